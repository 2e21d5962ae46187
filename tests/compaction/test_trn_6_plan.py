"""TRN-6: which summaries a thread of N turns is sent, in each mode, and the settings that decide it."""

from __future__ import annotations

import pytest

from backend.domains.compaction.plan import Unit, leaves, plan
from backend.domains.compaction.settings import CompactionSettings
from backend.errors import ValidationFailed

DEFAULTS = CompactionSettings()


def spans(units: tuple[Unit, ...]) -> list[tuple[int, int, int]]:
    return [unit.key for unit in units]


def test_trn_6_with_the_defaults_the_first_summary_appears_after_the_eighth_turn() -> None:
    assert (DEFAULTS.mode, DEFAULTS.keep_recent_turns, DEFAULTS.segment_turns) == ("segments", 5, 3)
    for turns in range(8):
        assert plan(turns, DEFAULTS) == (), turns
    assert spans(plan(8, DEFAULTS)) == [(1, 1, 3)]  # turns 4-8 are the five recent ones


def test_trn_6_segments_cut_whole_turns_from_the_start_and_keep_an_incomplete_segment_in_full() -> None:
    assert spans(plan(10, DEFAULTS)) == [(1, 1, 3)]  # turns 4 and 5 wait for a third
    assert spans(plan(11, DEFAULTS)) == [(1, 1, 3), (1, 4, 6)]
    assert spans(plan(26, DEFAULTS)) == [(1, 1 + 3 * i, 3 + 3 * i) for i in range(7)]
    # A unit once complete never changes as the thread grows: every plan extends the one before.
    for turns in range(1, 60):
        assert plan(turns + 1, DEFAULTS)[:len(plan(turns, DEFAULTS))] == plan(turns, DEFAULTS)
    custom = CompactionSettings(keep_recent_turns=2, segment_turns=4)
    assert spans(plan(9, custom)) == [(1, 1, 4)] and spans(plan(10, custom)) == [(1, 1, 4), (1, 5, 8)]


def test_trn_6_tiered_groups_the_oldest_summaries_again_level_by_level() -> None:
    tiered = CompactionSettings(mode="tiered")
    # Up to six segment summaries nothing is grouped (the newest three stay, three more make no group yet).
    assert spans(plan(22, tiered)) == spans(plan(22, DEFAULTS))
    assert len(plan(22, tiered)) == 5
    # The sixth segment lets the oldest three become one level-2 summary of turns 1-9.
    assert spans(plan(23, tiered)) == [(2, 1, 9), (1, 10, 12), (1, 13, 15), (1, 16, 18)]
    assert spans(plan(23, tiered)[0].children) == [(1, 1, 3), (1, 4, 6), (1, 7, 9)]
    # Far enough back, level-2 summaries are grouped into level 3: the older a part, the shorter it reads.
    deep = plan(5 + 3 * 21, tiered)
    assert spans(deep) == [(3, 1, 27), (2, 28, 36), (2, 37, 45), (2, 46, 54), (1, 55, 57), (1, 58, 60),
                           (1, 61, 63)]
    assert [unit.level for unit in deep] == sorted((unit.level for unit in deep), reverse=True)
    # Every turn before the recent ones is still covered, exactly once, by the level-1 units underneath.
    assert [unit.key for unit in leaves(deep)] == [(1, 1 + 3 * i, 3 + 3 * i) for i in range(21)]


def test_trn_6_window_summarises_nothing() -> None:
    window = CompactionSettings(mode="window", keep_recent_turns=2)
    assert all(plan(turns, window) == () for turns in range(0, 100))


def test_trn_6_settings_default_and_refuse_the_old_item_counts_with_422() -> None:
    assert CompactionSettings.parse(None) == DEFAULTS == CompactionSettings.parse({})
    assert CompactionSettings.parse({"mode": "tiered", "segment_turns": 4}) == CompactionSettings("tiered", 5, 4)
    assert DEFAULTS.to_json() == {"mode": "segments", "keep_recent_turns": 5, "segment_turns": 3}
    for retired in ("keep_recent", "segment_items"):
        with pytest.raises(ValidationFailed) as refused:
            CompactionSettings.parse({retired: 4}, param="compaction")
        assert refused.value.status == 422 and refused.value.code == "retired_setting"
        assert refused.value.param == f"compaction.{retired}"
    for bad, param in (({"mode": "summary"}, "mode"), ({"keep_recent_turns": 0}, "keep_recent_turns"),
                       ({"segment_turns": "3"}, "segment_turns"), ({"segment_turns": True}, "segment_turns"),
                       ({"keep_recent_turns": 1001}, "keep_recent_turns"), ({"window": 3}, "window")):
        with pytest.raises(ValidationFailed) as refused:
            CompactionSettings.parse(bad, param="agent.compaction")
        assert refused.value.status == 422 and refused.value.param == f"agent.compaction.{param}", bad
    with pytest.raises(ValueError):
        CompactionSettings(segment_turns=0)
