"""TRN-6: counting turns over a thread's stored items. Client items go through the API (no response id); a turn's
items are written with its response id, as `POST /responses` writes them."""

from __future__ import annotations

from backend.domains.compaction.plan import plan
from backend.domains.compaction.settings import CompactionSettings
from backend.domains.compaction.turns import turn_starts
from tests.compaction.util import (
    append,
    call,
    history_of,
    msg,
    new_thread,
    output,
    schedule_job,
    turn,
    turns_of,
    write_turn,
)
from tests.helpers import bearer


def test_trn_6_user_messages_a_client_adds_start_turns_and_its_other_items_join_them(client, org, database_url):
    key = bearer(org.key)
    thread = new_thread(client, key, items=[msg("developer", "be brief"), msg("user", "hi"), msg("assistant", "hello")])
    append(client, key, thread["id"], msg("user", "and now?"), msg("assistant", "now this"), msg("developer", "note"))
    append(client, key, thread["id"], msg("user", "last one"))
    # The developer note ahead of the first user message belongs to the first turn; the assistant's and the
    # developer's items the client added join the turn they follow.
    assert turns_of(database_url, org.org_id, thread["id"]) == [1, 4, 7]


def test_trn_6_a_tool_result_the_client_adds_starts_the_next_turn(client, org, database_url):
    key = bearer(org.key)
    thread = new_thread(client, key)
    tid = thread["id"]
    write_turn(database_url, org.org_id, tid, [msg("user", "weather?"), call("get_weather", call_id="w1")])
    append(client, key, tid, output("sunny", call_id="w1"))  # the client ran its function and stored the result
    write_turn(database_url, org.org_id, tid, [msg("assistant", "It is sunny.")])
    # Sent back as the next request's input instead, the result is part of that request's turn.
    write_turn(database_url, org.org_id, tid, [msg("user", "tomorrow?"), call("get_weather", call_id="w2")])
    write_turn(database_url, org.org_id, tid, [output("rain", call_id="w2"), msg("assistant", "Rain.")])
    # The stored result starts turn 2 and the request answering it belongs to it; the next question starts turn 3.
    assert turns_of(database_url, org.org_id, tid) == [1, 3, 5, 7]


def test_trn_6_one_turn_with_many_platform_tool_calls_is_one_turn_and_never_summarised(client, org, database_url,
                                                                                       scripted, run_jobs):
    thread = new_thread(client, bearer(org.key))
    tid = thread["id"]
    items = [msg("user", "find everything")]
    for n in range(12):
        items += [call("memory__idx__search", f'{{"query": "q{n}"}}', call_id=f"c{n}"), output(f"hit {n}", f"c{n}")]
    write_turn(database_url, org.org_id, tid, [*items, msg("assistant", "done")])
    assert turns_of(database_url, org.org_id, tid) == [1]
    for settings in (CompactionSettings(), CompactionSettings(keep_recent_turns=1, segment_turns=1),
                     CompactionSettings(mode="tiered", keep_recent_turns=1, segment_turns=1)):
        assert plan(1, settings) == ()
        whole = history_of(database_url, org.org_id, tid, settings)
        assert whole.summaries == () and len(whole.items) == 26 and whole.pending == 0
        assert schedule_job(database_url, org.org_id, tid, org.key_id, settings)
        run_jobs()
    assert scripted.requests == []  # no summary was ever asked for
    assert client.get(f"/threads/{tid}/summaries", headers=bearer(org.key)).json()["data"] == []


def test_trn_6_a_turn_is_never_split_by_a_message_written_while_it_ran(client, org, database_url):
    thread = new_thread(client, bearer(org.key))
    tid = thread["id"]
    write_turn(database_url, org.org_id, tid, turn(1), subject="anna")
    # Anna's request writes her message; Bob's turn runs to the end before her answer lands; Bob also adds a
    # message of his own through the items route meanwhile.
    write_turn(database_url, org.org_id, tid, [msg("user", "anna asks")], response_id="resp_anna", subject="anna")
    write_turn(database_url, org.org_id, tid, [msg("user", "bob asks"), msg("assistant", "bob's answer")],
               subject="bob")
    append(client, bearer(org.key), tid, msg("user", "a note from the app"))
    write_turn(database_url, org.org_id, tid, [msg("assistant", "anna's answer")], response_id="resp_anna",
               subject="anna")
    write_turn(database_url, org.org_id, tid, turn(3), subject="bob")
    # Positions 3-7 are one turn: Anna's request spans them, so nothing inside starts a turn.
    assert turns_of(database_url, org.org_id, tid) == [1, 3, 8]


def test_trn_6_turn_counting_reads_requests_not_roles():
    rows = [{"position": p, "response_id": r, "type": t, "role": role} for p, r, t, role in [
        (1, None, "message", "developer"), (2, "resp_a", "message", "user"), (3, "resp_a", "message", "assistant"),
        (4, "resp_b", "function_call_output", None), (5, "resp_b", "message", "assistant"),
        (6, None, "message", "assistant"), (7, None, "function_call", None), (8, "resp_c", "message", "assistant"),
    ]]
    # A request starts a turn without a user message too (here a tool result it was sent, or only its answer);
    # the first request joins the developer message ahead of it.
    assert turn_starts(rows) == [1, 4, 8]
    stored_first = [{"position": 1, "response_id": None, "type": "message", "role": "user"},
                    {"position": 2, "response_id": "resp_a", "type": "message", "role": "user"},
                    {"position": 3, "response_id": "resp_a", "type": "message", "role": "assistant"},
                    {"position": 4, "response_id": None, "type": "message", "role": "user"},
                    {"position": 5, "response_id": None, "type": "message", "role": "user"}]
    # A user message stored by the client, then the request answering it: one turn; each later one starts its own.
    assert turn_starts(stored_first) == [1, 4, 5]
    assert turn_starts([]) == []
