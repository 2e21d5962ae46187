"""One turn in flight: what was asked, what the platform added, and what the model and tools produced."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from backend.access.context import RequestContext
from backend.domains.injection.service import Built
from backend.domains.turns.inputs import TurnTools
from backend.domains.turns.state_tool import PendingState
from backend.ids import new_id
from backend.providers.chat import ModelSpec
from shared.schemas.threads import ItemIn
from shared.schemas.turns import ResponseCreate


@dataclass
class AgentTurn:
    """The agent version a turn runs (TRN-5), as the turn needs it."""

    id: str
    version: int
    instructions: str | None = None
    memory_injection: Any = None  # the agent's block (INJ-2), for choose_block
    working_state_schema: dict[str, Any] | None = None
    compaction: Any = None  # CompactionSettings


@dataclass
class ModelCall:
    model: str
    input_tokens: int
    output_tokens: int
    ms: float


@dataclass
class TurnFailure(Exception):
    code: str
    message: str


@dataclass
class Turn:
    ctx: RequestContext
    body: ResponseCreate
    spec: ModelSpec
    items: list[ItemIn]
    tools: TurnTools
    zone: str
    stored: bool
    thread_id: str | None = None
    agent: AgentTurn | None = None
    compaction: Any = None  # compaction.CompactionSettings when the key holds `compaction` (TRN-6)
    id: str = field(default_factory=lambda: new_id("resp"))
    trace_id: str = field(default_factory=lambda: new_id("evt").removeprefix("evt_"))
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    started: float = field(default_factory=time.perf_counter)
    # filled while the turn runs
    history_positions: tuple[int, int] | None = None
    new_thread: bool = False  # the thread was opened by this turn (nothing to read back but a copied state)
    # THR-4: a turn with an Idempotency-Key keeps its input with its answer when it ends, not when it is accepted
    input_later: bool = False
    messages: list[dict[str, Any]] = field(default_factory=list)
    injected: Built | None = None
    calls: list[ModelCall] = field(default_factory=list)
    produced: list[dict[str, Any]] = field(default_factory=list)  # output items, each with its own `id`
    tool_trace: list[dict[str, Any]] = field(default_factory=list)
    # TRN-4: the state as the model was shown it (read with its version in `prepare`), and the patches it accepted
    pending_state: PendingState | None = None
    pseudonymizer: Any = None  # a Pseudonymizer when the key hides personal data (TRN-10)
    state_written: bool | None = None
    rounds: int = 0
    thread_labels: dict[str, Any] = field(default_factory=dict)  # THR-5: the records its write tool keeps get them
    state_schema: dict[str, Any] | None = None  # what the state tool's patches must fit (state_tool.schema_of)
    cut_short: bool = False  # the final answer stopped at `max_output_tokens`: the response is `incomplete`
    # the memory block being built on a session of its own while the turn is accepted (block_ahead.py)
    block_ahead: asyncio.Task[Built] | None = None
    # a transaction finishing while the model is asked (loop.settle): the accepting one (no call id), or a
    # platform tool's while the model reads its result, with the call's id
    committing: tuple[asyncio.Task[None], str | None] | None = None
    # MEM-19: whose erasure after `accepted_at` (the accepting transaction's start) stops the turn from keeping more:
    # its person, its thread's owner and `participants`, and the writers of the items the model reads
    people: tuple[str, ...] = ()
    accepted_at: datetime | None = None

    @property
    def usage(self) -> dict[str, int]:
        spent_in = sum(c.input_tokens for c in self.calls)
        spent_out = sum(c.output_tokens for c in self.calls)
        return {"input_tokens": spent_in, "output_tokens": spent_out, "total_tokens": spent_in + spent_out}

    @property
    def provenance(self) -> dict[str, Any]:
        return {"thread_id": self.thread_id, "response_id": self.id}

    def trace(self) -> dict[str, Any]:
        total_ms = (time.perf_counter() - self.started) * 1000
        model_ms = sum(c.ms for c in self.calls)
        return {"id": self.trace_id, "injection": self.injected.trace(left_out=False) if self.injected else None,
                "tools": self.tool_trace,
                "model": {"id": self.spec.id, "provider": self.spec.provider, "label": self.spec.label},
                "agent": {"id": self.agent.id, "version": self.agent.version} if self.agent else None,
                "rounds": self.rounds, "usage": self.usage,
                "calls": [{"model": c.model, "input_tokens": c.input_tokens, "output_tokens": c.output_tokens,
                           "ms": round(c.ms, 1)} for c in self.calls],
                "working_state": None if self.state_written is None else
                ("written" if self.state_written else "dropped"),
                "timings": {"total_ms": round(total_ms, 1), "model_ms": round(model_ms, 1),
                            "platform_ms": round(total_ms - model_ms, 1)}}
