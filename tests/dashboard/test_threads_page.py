"""The Threads page (DSH-7) in AppTest against the live API: list and filter, one thread's items, notes, working
state and summaries, message search with its highlights, and the errors and empty states."""

from __future__ import annotations

import json
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from dashboard import data
from dashboard.data import threads as thread_data
from shared.client import CoreClient
from shared.schemas.platform import AuditQuery
from shared.schemas.threads import Highlight
from tests.dashboard.conftest import log_in, no_exception
from tests.helpers import Org, bearer
from tests.threads.util import append, msg, new_thread

PAGE = "app_pages/threads.py"
# The page's tables, told apart by a column only they have (pandas frames).
TABLE_COLUMNS = {"threads": "assistant", "items": "writer", "notes": "by", "summaries": "level"}
AUDIT_BANNER = ("Every read on this page — the list, a thread's items, notes, working state and summaries, and each "
                "search — is recorded in the organisation's audit trail under your name (`thread.read`).")


def table(at: AppTest, kind: str) -> Any:
    found = [d.value for d in at.dataframe if TABLE_COLUMNS[kind] in d.value.columns]
    assert len(found) == 1, f"{len(found)} {kind} tables"
    return found[0]


def has_table(at: AppTest, kind: str) -> bool:
    return any(TABLE_COLUMNS[kind] in d.value.columns for d in at.dataframe)


def infos(at: AppTest) -> list[str]:
    return [i.value for i in at.info]


def errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


def run(at: AppTest) -> AppTest:
    at.run()
    no_exception(at)
    return at


def open_threads(at: AppTest, org: Org) -> AppTest:
    log_in(at, org.admin_email, org.admin_password)
    at.switch_page(PAGE).run()
    no_exception(at)
    assert [t.value for t in at.title] == ["Threads"]
    assert errors(at) == []
    return at


def apply_filters(at: AppTest) -> AppTest:
    at.button(key="threads_apply").click().run()
    no_exception(at)
    assert errors(at) == []
    return at


def open_thread(at: AppTest, thread_id: str) -> AppTest:
    at.text_input(key="threads_open_id").input(thread_id).run()
    no_exception(at)
    return at


def detail_tab(at: AppTest, label: str) -> AppTest:
    at.session_state["threads_detail"] = label
    return run(at)


def search(at: AppTest, query: str, **fields: str) -> AppTest:
    at.session_state["threads_view"] = "Search messages"
    run(at)
    at.text_input(key="threads_q").input(query)
    for key, value in fields.items():
        if key == "role":
            at.selectbox(key="threads_search_role").select(value)
        else:
            at.text_input(key=f"threads_search_{key}").input(value)
    at.button(key="threads_search_submit").click().run()
    no_exception(at)
    return at


def hits(at: AppTest) -> list[str]:
    """The snippets shown, as the Markdown the page wrote (highlights in **bold**)."""
    return [m.value for m in at.markdown if m.value and not m.value.startswith(("owner ", ":"))]


@pytest.fixture
def threads(org: Org) -> dict[str, str]:
    """Anna's thread (her messages and the organisation's answer), Bert's, and a shared one with metadata."""
    anna = new_thread(org.client, bearer(org.key, "anna"), metadata={"channel": "web"},
                      items=[msg("user", "Wanneer komt mijn terugbetaling?"), msg("user", "Het is dringend.")])
    append(org.client, org.full, anna["id"], msg("assistant", "Binnen vijf dagen."))
    bert = new_thread(org.client, bearer(org.key, "bert"), items=[msg("user", "Where is my parcel?")])
    shared = new_thread(org.client, org.full, metadata={"dossier": "4711"}, labels={"department": "payroll"},
                        items=[msg("developer", "Answer in Dutch.")])
    return {"anna": anna["id"], "bert": bert["id"], "shared": shared["id"]}


# ---------------------------------------------------------------- the list


def test_dsh_7_list_shows_threads_with_message_counts_and_the_audit_banner(app: AppTest, org: Org,
                                                                         threads: dict[str, str]) -> None:
    open_threads(app, org)
    assert AUDIT_BANNER in infos(app)
    shown = table(app, "threads").set_index("id")
    assert list(shown.index) == [threads["shared"], threads["bert"], threads["anna"]]  # newest first
    assert shown.loc[threads["anna"], ["owner", "user", "assistant", "developer"]].tolist() == ["anna", 2, 1, 0]
    assert shown.loc[threads["bert"], ["owner", "user", "assistant", "developer"]].tolist() == ["bert", 1, 0, 0]
    assert shown.loc[threads["shared"], ["owner", "user", "assistant", "developer"]].tolist() == [
        data.SHARED, 0, 0, 1]
    assert shown.loc[threads["shared"], "metadata"] == "dossier:4711"
    assert shown.loc[threads["shared"], "labels"] == "department:payroll"
    assert any(c.value.startswith("Page 1 · 3 threads, newest first · times in ") for c in app.caption)


def test_dsh_7_filters_narrow_the_list(app: AppTest, org: Org, threads: dict[str, str]) -> None:
    open_threads(app, org)
    app.selectbox(key="threads_owner").select("one person")
    app.text_input(key="threads_person").input("anna")
    apply_filters(app)
    assert list(table(app, "threads")["id"]) == [threads["anna"]]

    app.text_input(key="threads_person").input("bert")
    apply_filters(app)
    assert list(table(app, "threads")["id"]) == [threads["bert"]]

    app.selectbox(key="threads_owner").select("shared only")
    apply_filters(app)
    assert list(table(app, "threads")["id"]) == [threads["shared"]]

    app.selectbox(key="threads_owner").select("everyone")
    app.text_input(key="threads_metadata").input("channel:web")
    apply_filters(app)
    assert list(table(app, "threads")["id"]) == [threads["anna"]]

    app.text_input(key="threads_metadata").input("")
    app.text_input(key="threads_labels").input("department:payroll")
    apply_filters(app)
    assert list(table(app, "threads")["id"]) == [threads["shared"]]

    app.text_input(key="threads_labels").input("department:sales")
    apply_filters(app)
    assert not has_table(app, "threads")
    assert "No threads match these filters — choose owner *everyone* or clear a filter." in infos(app)

    app.text_input(key="threads_labels").input("department")
    app.button(key="threads_apply").click().run()
    no_exception(app)
    assert errors(app) == ["`department` is not `name:value`. Write filters as `name:value`, separated by "
                           "commas.\n\nCode `invalid_filter`"]


def test_dsh_7_older_and_newer_follow_the_cursor(app: AppTest, org: Org) -> None:
    made = [new_thread(org.client, org.full, metadata={"n": str(n)})["id"] for n in range(27)]
    open_threads(app, org)
    app.selectbox(key="threads_page_size").select(25)
    apply_filters(app)
    first = list(table(app, "threads")["id"])
    assert first == made[::-1][:25]
    assert app.button(key="threads_newer").disabled
    app.button(key="threads_older").click().run()
    no_exception(app)
    assert list(table(app, "threads")["id"]) == made[::-1][25:]
    assert app.button(key="threads_older").disabled
    app.button(key="threads_newer").click().run()
    assert list(table(app, "threads")["id"]) == first


def test_dsh_7_an_organisation_without_threads_says_how_to_open_one(app: AppTest, org: Org) -> None:
    open_threads(app, org)
    assert any(i.startswith("No threads yet. Applications open them") for i in infos(app))
    assert app.button(key="threads_go_keys").label == "Create a key"
    assert not has_table(app, "threads")
    app.session_state["threads_view"] = "Search messages"
    run(app)
    assert "Type words to find (or a note), then press Search." in infos(app)



def test_dsh_7_operator_reads_the_chosen_organisation_and_switching_forgets_the_page(
        app: AppTest, org: Org, other_org: Org, operator: dict[str, str], threads: dict[str, str]) -> None:
    globex = new_thread(other_org.client, other_org.full, items=[msg("user", "Globex question")])["id"]
    log_in(app, operator["email"], operator["password"])
    app.sidebar.selectbox(key="org_choice").select(org.org_id).run()
    app.switch_page(PAGE).run()
    no_exception(app)
    assert set(table(app, "threads")["id"]) == set(threads.values())
    open_thread(app, threads["bert"])
    assert list(table(app, "items")["text"]) == ["Where is my parcel?"]

    app.sidebar.selectbox(key="org_choice").select(other_org.org_id).run()
    no_exception(app)
    assert errors(app) == []
    assert list(table(app, "threads")["id"]) == [globex]  # X-Core-Org names the other organisation
    assert app.text_input(key="threads_open_id").value == ""  # the other organisation's thread is forgotten
    assert not has_table(app, "items")

# ---------------------------------------------------------------- one thread


def test_dsh_7_a_selected_thread_shows_items_with_writers_state_and_no_summaries(
        app: AppTest, org: Org, threads: dict[str, str], admin_client: CoreClient) -> None:
    anna = threads["anna"]
    append(org.client, org.full, anna,
           {"type": "function_call", "call_id": "c1", "name": "refund_status", "arguments": '{"order": 7}'},
           {"type": "function_call_output", "call_id": "c1", "output": "paid"},
           {"type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": "Betaald."}, {"type": "refusal", "refusal": "Geen IBAN."}]})
    working_state = {"step": "refund", "order": 7}
    written = org.client.put(f"/threads/{anna}/state", json={"state": working_state}, headers=org.full)
    assert written.status_code == 200, written.text
    zone = org.client.patch(f"/tenants/{org.org_id}", json={"timezone": "Europe/Amsterdam"}, headers=org.admin)
    assert zone.status_code == 200, zone.text
    open_threads(app, org)
    rows = list(table(app, "threads")["id"])
    app.session_state["threads_table"] = {"selection": {"rows": [rows.index(anna)], "columns": []}}
    run(app)
    assert errors(app) == []
    assert [s.value for s in app.subheader] == [f"Thread `{anna}`"]
    items = table(app, "items")
    assert list(items["position"]) == [1, 2, 3, 4, 5, 6]
    # Who wrote each item: her messages are hers, the model's are the assistant's, a tool result the tool's (named
    # from its call when the result does not say); `for` is the person the writing request named.
    assert list(items["writer"]) == ["anna", "anna", "assistant", "assistant", "tool refund_status", "assistant"]
    assert list(items["person"]) == ["anna", "anna", thread_data.BY_ORGANISATION, thread_data.BY_ORGANISATION,
                                     thread_data.BY_ORGANISATION, thread_data.BY_ORGANISATION]
    assert list(items["type"]) == ["message", "message", "message", "function_call", "function_call_output",
                                   "message"]
    assert list(items["role"][:3]) == ["user", "user", "assistant"]
    assert list(items["text"]) == ["Wanneer komt mijn terugbetaling?", "Het is dringend.", "Binnen vijf dagen.",
                                   'refund_status({"order": 7})', "refund_status → paid",
                                   "Betaald.\n[refusal] Geen IBAN."]
    assert str(items["created_at"].dt.tz) == "Europe/Amsterdam"  # the organisation's time zone

    detail_tab(app, "Working state")
    size = len(json.dumps(working_state, separators=(",", ":")))
    assert [(m.label, m.value) for m in app.metric][:2] == [("Version", "1"), ("Size", f"{size} bytes")]
    [shown] = app.json
    assert json.loads(shown.value) == working_state
    assert not has_table(app, "items")  # only the open tab runs

    detail_tab(app, "Summaries")
    assert ("No summaries yet — a summary is written when a long conversation is compacted during its turns."
            in infos(app))

    # What the banner says: the administrator's reads are in the audit trail as thread.read.
    events = admin_client.audit(AuditQuery(action=["thread.read"]), limit=50).data
    routes = {str(e.detail["route"]) for e in events}
    assert {"GET /threads", "GET /threads/{id}", "GET /threads/{id}/items", "GET /threads/{id}/state",
            "GET /threads/{id}/summaries"} <= routes


def test_ext_1_a_summary_written_by_a_replay_model_says_so(app: AppTest, org: Org, threads: dict[str, str],
                                                            db: Any) -> None:
    """A summary names the model that wrote it; a `replay` one shows its label (recorded answers), not a bare id."""
    offered = org.client.post("/admin/models", headers=org.admin, json={
        "id": "demo", "provider": "replay", "model": "demo", "org_id": org.org_id})
    assert offered.status_code == 201, offered.text
    db.execute("INSERT INTO thread_summaries (org_id, id, thread_id, from_position, to_position, level, model, text)"
               " VALUES (%s, 'sum_replayed', %s, 1, 2, 1, 'demo', 'Anna asked when her refund comes.')",
               (org.org_id, threads["anna"]))
    open_threads(app, org)
    open_thread(app, threads["anna"])
    detail_tab(app, "Summaries")
    assert list(table(app, "summaries")["model"]) == [f"demo — {offered.json()['label']}"]


def test_dsh_7_a_thread_without_working_state_says_so(app: AppTest, org: Org, threads: dict[str, str]) -> None:
    open_threads(app, org)
    open_thread(app, threads["bert"])
    detail_tab(app, "Working state")
    assert "No working state yet: the application keeps none for this thread." in infos(app)
    assert list(app.metric) == []


def test_dsh_7_load_more_items(app: AppTest, org: Org) -> None:
    long = new_thread(org.client, org.full, items=[msg("user", f"message {n}") for n in range(104)])
    open_threads(app, org)
    open_thread(app, long["id"])
    assert list(table(app, "items")["position"]) == list(range(1, 101))
    app.button(key="threads_item_cursors_more").click().run()
    no_exception(app)
    assert list(table(app, "items")["position"]) == list(range(1, 105))
    assert app.button(key="threads_item_cursors_more").disabled
    app.toggle(key="threads_items_newest").set_value(True).run()
    no_exception(app)
    assert list(table(app, "items")["position"]) == list(range(104, 4, -1))


def test_dsh_7_notes_of_the_chosen_message(app: AppTest, org: Org, threads: dict[str, str]) -> None:
    anna = threads["anna"]
    items = org.client.get(f"/threads/{anna}/items", headers=org.full).json()["items"]
    first, second = items[0]["id"], items[1]["id"]
    for headers, note in ((bearer(org.key, "anna"), {"urgent": True}), (org.full, {"status": "open"})):
        response = org.client.put(f"/threads/{anna}/items/{first}/metadata", json={"metadata": note},
                                  headers=headers)
        assert response.status_code == 200, response.text
    open_threads(app, org)
    open_thread(app, anna)
    detail_tab(app, "Notes")
    picker = app.selectbox(key=f"threads_note_{anna}")
    assert picker.options == ["#1 · user · anna · Wanneer komt mijn terugbetaling?", "#2 · user · anna · Het is "
                              "dringend.", f"#3 · assistant · {thread_data.BY_ORGANISATION} · Binnen vijf dagen."]
    notes = table(app, "notes").set_index("by")
    assert (notes.loc["anna", "name"], notes.loc["anna", "value"]) == ("urgent", "true")
    assert (notes.loc[thread_data.BY_ORGANISATION, "name"], notes.loc[thread_data.BY_ORGANISATION, "value"]) == (
        "status", "open")

    picker.select(second).run()
    no_exception(app)
    assert not has_table(app, "notes")
    assert ("No notes on this message: applications note messages (a status, a category) for themselves; none "
            "has noted this one.") in infos(app)


def test_dsh_7_an_unknown_thread_id_is_said_with_its_code(app: AppTest, org: Org, threads: dict[str, str]) -> None:
    open_threads(app, org)
    open_thread(app, "thr_does_not_exist")
    [message] = errors(app)
    assert message.startswith("Could not read thread thr_does_not_exist: No thread 'thr_does_not_exist'")
    assert "Code `not_found`" in message and "field `thread_id`" in message


# ---------------------------------------------------------------- search


def test_dsh_7_search_finds_a_message_and_bolds_its_highlight(app: AppTest, org: Org, threads: dict[str, str]
                                                               ) -> None:
    # Emoji before the match: the API counts them as two UTF-16 code units each, Python as one character.
    found = new_thread(org.client, bearer(org.key, "carla"),
                       items=[msg("user", "🎉🎉 Die Rückzahlung für Café 👩‍👩‍👧 kommt morgen früh")])
    open_threads(app, org)
    search(app, "morgen")
    assert errors(app) == []
    assert hits(app) == ["🎉🎉 Die Rückzahlung für Café 👩‍👩‍👧 kommt **morgen** früh"]
    [about] = [c.value for c in app.caption if "thread `" in c.value]
    assert about.startswith("user · written by carla · ") and f"thread `{found['id']}`" in about
    assert any(c.value.startswith("1 hit, newest first · searched back to ") for c in app.caption)

    search(app, '"Rückzahlung für Café"')
    assert hits(app) == ["🎉🎉 Die **Rückzahlung für Café** 👩‍👩‍👧 kommt morgen früh"]

    search(app, "dagen or parcel", role="user")
    assert hits(app) == ["Where is my **parcel**?"]

    # Open thread: back on the Threads tab, with the hit's thread open.
    app.button(key="threads_hit_0").click().run()
    no_exception(app)
    assert app.session_state["threads_view"] == "Threads"
    assert [s.value for s in app.subheader] == [f"Thread `{threads['bert']}`"]
    assert list(table(app, "items")["text"]) == ["Where is my parcel?"]


def test_dsh_7_search_further_back_reads_older_slices(app: AppTest, org: Org, threads: dict[str, str], db: Any
                                                      ) -> None:
    old = new_thread(org.client, org.full, items=[msg("user", "Old refund question")])
    new_thread(org.client, org.full, items=[msg("user", "New refund question")])
    # History older than one slice (7 days): as if written a month ago.
    db.execute("UPDATE thread_items SET created_at = created_at - interval '30 days' WHERE thread_id = %s",
               (old["id"],))
    open_threads(app, org)
    search(app, "refund")
    assert hits(app) == ["New **refund** question"]
    assert not app.button(key="threads_search_more").disabled
    app.button(key="threads_search_more").click().run()
    no_exception(app)
    assert hits(app) == ["New **refund** question", "Old **refund** question"]
    assert any(c.value.startswith("2 hits, newest first · searched back to ") and "no older messages" in c.value
               for c in app.caption)
    assert app.button(key="threads_search_more").disabled


def test_dsh_7_exclusions_only_query_shows_the_error_code(app: AppTest, org: Org, threads: dict[str, str]) -> None:
    open_threads(app, org)
    search(app, "-refund")
    [message] = errors(app)
    assert message.startswith("Could not search the messages: A query of only exclusions")
    assert message.endswith("Code `exclusions_only` · field `q`")
    assert hits(app) == []


def test_dsh_7_search_without_hits_says_what_to_try(app: AppTest, org: Org, threads: dict[str, str]) -> None:
    open_threads(app, org)
    search(app, "zeppelin")
    assert errors(app) == []
    assert "No messages match — try other words, fewer exclusions or a longer period." in infos(app)


def test_dsh_7_search_by_note(app: AppTest, org: Org, threads: dict[str, str]) -> None:
    anna = threads["anna"]
    first = org.client.get(f"/threads/{anna}/items", headers=org.full).json()["items"][0]["id"]
    noted = org.client.put(f"/threads/{anna}/items/{first}/metadata", json={"metadata": {"status": "open"}},
                           headers=org.full)
    assert noted.status_code == 200, noted.text
    open_threads(app, org)
    search(app, "", note="status:open")
    assert errors(app) == []
    assert hits(app) == ["Wanneer komt mijn terugbetaling?"]
    [about] = [c.value for c in app.caption if "thread `" in c.value]
    assert f"note status\\:open by {thread_data.markdown_text(thread_data.BY_ORGANISATION)}" in about


# ---------------------------------------------------------------- highlights: UTF-16 code units to str indices


def marks(*spans: tuple[int, int]) -> list[Highlight]:
    return [Highlight(start=start, end=end) for start, end in spans]


def test_dsh_7_utf16_offsets_become_python_indices() -> None:
    text = "🎉 café 👩‍👩‍👧 naïve"
    # In UTF-16: 🎉 is 2 units, each person of the family 2 and each joiner 1, é/ï 1 each.
    assert thread_data.utf16_spans(text, marks((3, 7), (17, 22))) == [(2, 6), (13, 18)]
    assert [text[s:e] for s, e in thread_data.utf16_spans(text, marks((3, 7), (17, 22)))] == ["café", "naïve"]
    decomposed = "cafe\u0301 ok"  # e + combining acute: two characters, two units, as in JavaScript
    assert thread_data.utf16_spans(decomposed, marks((0, 5))) == [(0, 5)]
    assert thread_data.utf16_spans("plain text", marks((6, 10))) == [(6, 10)]


def test_dsh_7_highlights_are_clipped_merged_and_sorted() -> None:
    assert thread_data.utf16_spans("abc", marks((1, 99))) == [(1, 3)]
    assert thread_data.utf16_spans("abcdef", marks((4, 6), (0, 2), (1, 3), (3, 3))) == [(0, 3), (4, 6)]
    assert thread_data.utf16_spans("abc", marks((5, 9))) == []


def test_dsh_7_snippets_are_markdown_with_bold_highlights_and_literal_text() -> None:
    assert thread_data.bold_snippet("😀 a *b* $5 [x](y)", marks((3, 4))) == (
        "😀 **a** \\*b\\* \\$5 \\[x\\]\\(y\\)")
    assert thread_data.bold_snippet("line\nbreak", []) == "line break"
    assert thread_data.bold_snippet("🎉🎉 kommt morgen", marks((11, 17))) == "🎉🎉 kommt **morgen**"
