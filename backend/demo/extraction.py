"""The demo's extraction: a `replay` model whose recorded answers (`recordings/demo-extraction.json`) turn the demo's
threads into records, episodes and lessons through a real extraction run on the job queue.

The recording answers by the conversation's opening line. The delivery conversations get a broken answer on
purpose, so that the extraction health page has failed windows to show; the battery conversations all note the
same general fact about range, which several people then hold: the material of a promotion proposal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shared.schemas.extraction import ExtractionSwitchIn
from shared.schemas.turns import ModelCreate

if TYPE_CHECKING:
    from backend.demo.build import Demo

MODEL = "demo-extraction"
STORE = "support"
INSTRUCTIONS = ("Note what a customer tells about her bike, how she rides it and what she waits for; "
                "never note payment details.")


def switch_on(demo: Demo) -> None:
    """Offer the recorded model and switch extraction on for the support store: every thread, episodes and lessons,
    no quiet period. Before the threads are written: only sessions that settle after the switch get an episode."""
    demo.admin.add_model(ModelCreate(id=MODEL, provider="replay", model=MODEL, org_id=demo.org_id))
    demo.admin.set_extraction_switch(demo.stores[STORE], ExtractionSwitchIn(
        enabled=True, model=MODEL, instructions=INSTRUCTIONS, quiet_minutes=0, threads="all",
        episodes=True, lessons=True))


def run(demo: Demo) -> None:
    """Queue a run over the threads; the job queue's workers read its windows, not this step."""
    demo.admin.run_extraction(demo.stores[STORE])
    demo.counts["extraction runs"] += 1
