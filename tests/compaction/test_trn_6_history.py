"""TRN-6: the history a turn sends: summaries, then items in full; a missing summary never loses a position, the
items are never changed, and a long thread is not read whole."""

from __future__ import annotations

from typing import Any

from backend.domains.compaction import CompactionSettings, history
from backend.domains.compaction.plan import leaves, plan
from backend.ids import new_id
from tests.compaction.util import fetched_rows, history_of, new_thread, schedule_job, write_turns
from tests.helpers import bearer


def summarise_directly(db: Any, org_id: str, thread_id: str, units: list[tuple[int, int, int]]) -> None:
    """Summaries as the job writes them, for threads whose turns are two items each (turn t = 2t-1, 2t)."""
    for level, first, last in units:
        db.execute("INSERT INTO thread_summaries (org_id, id, thread_id, from_position, to_position, level, model, "
                   "text, from_turn, to_turn) VALUES (%s, %s, %s, %s, %s, %s, 'scripted', %s, %s, %s)",
                   (org_id, new_id("sum"), thread_id, 2 * first - 1, 2 * last, level,
                    f"turns {first}-{last} at level {level}", first, last))


def positions(rows: tuple[dict[str, Any], ...]) -> list[int]:
    return [row["position"] for row in rows]


def test_trn_6_items_go_in_full_until_their_summary_is_written_and_are_never_changed(client, org, database_url,
                                                                                    scripted, run_jobs):
    key = bearer(org.key)
    tid = new_thread(client, key)["id"]
    write_turns(database_url, org.org_id, tid, 1, 8)
    before = client.get(f"/threads/{tid}/items", headers=key).json()
    waiting = history_of(database_url, org.org_id, tid)
    assert waiting.summaries == () and positions(waiting.items) == list(range(1, 17)) and waiting.pending == 1
    scripted.reply("Turns one to three, condensed.")
    assert schedule_job(database_url, org.org_id, tid, org.key_id)
    run_jobs()
    after = history_of(database_url, org.org_id, tid)
    assert [(s["from_position"], s["to_position"], s["level"], s["text"]) for s in after.summaries] == [
        (1, 6, 1, "Turns one to three, condensed.")]
    assert positions(after.items) == list(range(7, 17)) and after.pending == 0
    # Rows as the threads repository returns them: the same keys and values the items route reads.
    assert set(after.items[0]) == {"id", "thread_id", "position", "type", "role", "subject", "response_id", "body",
                                   "created_at"}
    assert after.items[0]["body"] == {"role": "user", "content": "question 4"}
    assert client.get(f"/threads/{tid}/items", headers=key).json() == before


def test_trn_6_a_missing_summary_sends_everything_from_it_on_in_full(client, org, database_url, db):
    tid = new_thread(client, bearer(org.key))["id"]
    write_turns(database_url, org.org_id, tid, 1, 17)  # 12 older turns: four segments
    assert [u.key for u in plan(17, CompactionSettings())] == [(1, 1, 3), (1, 4, 6), (1, 7, 9), (1, 10, 12)]
    summarise_directly(db, org.org_id, tid, [(1, 1, 3), (1, 7, 9), (1, 10, 12)])  # turns 4-6 have none yet
    sent = history_of(database_url, org.org_id, tid)
    # The summaries of turns 7-12 are left out too: everything after the gap goes in order, in full.
    assert [s["text"] for s in sent.summaries] == ["turns 1-3 at level 1"]
    assert positions(sent.items) == list(range(7, 35)) and sent.pending == 3
    summarise_directly(db, org.org_id, tid, [(1, 4, 6)])
    complete = history_of(database_url, org.org_id, tid)
    assert [s["to_position"] for s in complete.summaries] == [6, 12, 18, 24]
    assert positions(complete.items) == list(range(25, 35)) and complete.pending == 0


def test_trn_6_tiered_history_sends_the_higher_level_and_falls_back_to_its_parts(client, org, database_url, db):
    tiered = CompactionSettings(mode="tiered")
    tid = new_thread(client, bearer(org.key))["id"]
    write_turns(database_url, org.org_id, tid, 1, 24)
    units = plan(24, tiered)
    assert [u.key for u in units] == [(2, 1, 9), (1, 10, 12), (1, 13, 15), (1, 16, 18)]
    summarise_directly(db, org.org_id, tid, [u.key for u in leaves(units)])
    parts = history_of(database_url, org.org_id, tid, tiered)  # level 2 not written yet: its three parts go
    assert [(s["level"], s["from_position"]) for s in parts.summaries] == [(1, 1), (1, 7), (1, 13), (1, 19),
                                                                             (1, 25), (1, 31)]
    assert positions(parts.items) == list(range(37, 49))
    summarise_directly(db, org.org_id, tid, [(2, 1, 9)])
    tiers = history_of(database_url, org.org_id, tid, tiered)
    assert [(s["level"], s["from_position"], s["to_position"]) for s in tiers.summaries] == [
        (2, 1, 18), (1, 19, 24), (1, 25, 30), (1, 31, 36)]
    assert positions(tiers.items) == list(range(37, 49)) and tiers.pending == 0
    # `segments` over the same thread ignores the level-2 summary and sends the six level-1 ones.
    assert [s["level"] for s in history_of(database_url, org.org_id, tid).summaries] == [1] * 6


def test_trn_6_a_long_thread_is_not_read_whole_when_summaries_cover_its_start(client, org, database_url, db):
    tid = new_thread(client, bearer(org.key))["id"]
    write_turns(database_url, org.org_id, tid, 1, 200)  # 400 items
    summarise_directly(db, org.org_id, tid, [u.key for u in plan(200, CompactionSettings())])
    sent, read = fetched_rows(database_url, lambda s: history(s, org.org_id, tid, CompactionSettings()))
    assert len(sent.summaries) == 65 and positions(sent.items) == list(range(391, 401))
    assert read <= len(sent.items) + 2, read  # PostgreSQL's count of thread_items rows the transaction read
    window = CompactionSettings(mode="window", keep_recent_turns=3)
    recent, read = fetched_rows(database_url, lambda s: history(s, org.org_id, tid, window))
    assert recent.summaries == () and positions(recent.items) == list(range(395, 401))
    assert read <= 64 + 2, read  # one page read backwards, not 400 rows


def test_trn_6_window_sends_only_the_recent_turns(client, org, database_url):
    tid = new_thread(client, bearer(org.key))["id"]
    write_turns(database_url, org.org_id, tid, 1, 2)
    window = CompactionSettings(mode="window", keep_recent_turns=5)
    assert positions(history_of(database_url, org.org_id, tid, window).items) == [1, 2, 3, 4]
    write_turns(database_url, org.org_id, tid, 3, 9)
    assert positions(history_of(database_url, org.org_id, tid, window).items) == list(range(9, 19))
    assert schedule_job(database_url, org.org_id, tid, org.key_id, window) is False  # nothing to summarise


def test_trn_6_history_can_leave_out_the_turns_own_input(client, org, database_url, db):
    tid = new_thread(client, bearer(org.key))["id"]
    write_turns(database_url, org.org_id, tid, 1, 9)
    summarise_directly(db, org.org_id, tid, [(1, 1, 3)])
    # The turn wrote its input at position 17 before asking: the thread's first eight turns are what it sends.
    sent = history_of(database_url, org.org_id, tid, before_position=17)
    assert [s["to_position"] for s in sent.summaries] == [6] and positions(sent.items) == list(range(7, 17))
    window = history_of(database_url, org.org_id, tid, CompactionSettings(mode="window", keep_recent_turns=2),
                        before_position=17)
    assert positions(window.items) == [13, 14, 15, 16]
