"""THR-6 with THR-8 and THR-11: a write that read a thread just before another request deleted it (or erased its
owner, or the author of the item it notes) answers the 404 a read of the thread now answers, and writes nothing.

Each scenario holds a lock from a connection of its own so the write waits after its read, lets the deletion commit,
then lets the write go on: a person's erasure lock for the writes that take it (MEM-19), the thread's or the
note's row for those that do not.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from backend.domains.audit.service import subject_hash
from tests.helpers import assert_error, bearer
from tests.threads.util import append, msg, new_thread

OPEN_THREADS = {"indexes": ["*"], "settings": {}, "rules": [
    {"id": "threads", "effect": "permit", "kind": "thread"},
    {"id": "records", "effect": "permit", "kind": "memory_record"}]}


def _waiting(db: psycopg.Connection[Any], count: int) -> None:
    """Until `count` sessions of this database wait on a lock."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if db.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                      "AND wait_event_type = 'Lock'").fetchone()[0] >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{count} requests should be waiting on a lock")


class _Request:
    """One API call on a thread of its own (the test client serves calls from several threads at once)."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self.answers: list[Any] = []
        self.thread = threading.Thread(target=lambda: self.answers.append(call()))
        self.thread.start()

    def answer(self) -> Any:
        self.thread.join(30)
        assert self.answers, "the request did not finish"
        return self.answers[0]


@contextmanager
def _held(db: psycopg.Connection[Any], sql: str, *params: Any) -> Iterator[None]:
    """A transaction of another connection that holds what `sql` locks until the block ends."""
    holder = psycopg.connect(db.info.dsn)
    try:
        holder.execute(sql, params)
        yield
    finally:
        holder.rollback()
        holder.close()


def _erasure_lock(db: psycopg.Connection[Any], settings: Any, org_id: str, person: str) -> Any:
    return _held(db, "SELECT pg_advisory_xact_lock(hashtextextended('subject:' || %s || ':' || %s, 0))",
                 org_id, subject_hash(settings.secret, org_id, person))


def _thread_404(client: Any, headers: dict[str, str], thread_id: str) -> dict[str, Any]:
    return assert_error(client.get(f"/threads/{thread_id}", headers=headers), 404, "not_found", "thread_id")


def _warm(client: Any, key: str) -> None:
    client.get("/key", headers=bearer(key))  # the key's last use is fresh: the requests below leave its row alone


WRITES: dict[str, Callable[[Any, str, str, dict[str, str]], Any]] = {
    "labels and metadata": lambda client, tid, item, h: client.patch(
        f"/threads/{tid}", json={"labels": {"team": "a"}, "metadata": {"topic": "back"}}, headers=h),
    "state put": lambda client, tid, item, h: client.put(
        f"/threads/{tid}/state", json={"state": {"secret": "kept"}}, headers=h),
    "state merge patch": lambda client, tid, item, h: client.patch(
        f"/threads/{tid}/state", json={"secret": "kept"}, headers=h),
    "note": lambda client, tid, item, h: client.put(
        f"/threads/{tid}/items/{item}/metadata", json={"metadata": {"secret": "kept"}}, headers=h),
}


@pytest.mark.parametrize("write", list(WRITES))
def test_thr_6_a_write_that_read_the_thread_before_its_deletion_answers_404_and_writes_nothing(
        client, org, db, settings, write):
    anna = bearer(org.key, "anna")
    thread = new_thread(client, anna, items=[msg("user", "hello")], metadata={"topic": "x"})
    tid, item = thread["id"], thread["items"][0]["id"]
    _warm(client, org.key)
    with _erasure_lock(db, settings, org.org_id, "anna"):
        late = _Request(lambda: WRITES[write](client, tid, item, anna))
        _waiting(db, 1)  # read the thread; waits for Anna's erasure lock before writing
        assert client.delete(f"/threads/{tid}", headers=anna).status_code == 204
    answer = late.answer()
    assert answer.status_code == 404, answer.text
    assert answer.json() == _thread_404(client, anna, tid)
    assert db.execute("SELECT labels, metadata FROM threads WHERE id = %s", (tid,)).fetchone() == ({}, {})
    assert db.execute("SELECT count(*) FROM thread_states WHERE thread_id = %s", (tid,)).fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM thread_item_notes WHERE thread_id = %s", (tid,)).fetchone()[0] == 0


@pytest.mark.parametrize(("write", "deletion"), [("labels and metadata", "thread deleted"),
                                                  ("metadata", "thread deleted"), ("metadata", "owner erased"),
                                                  ("state put", "thread deleted")])
def test_thr_6_a_write_that_read_the_thread_while_its_deletion_ran_answers_404(client, org, db, write, deletion):
    """The write waits on the thread's row behind the deletion (a metadata patch takes no erasure lock)."""
    anna = bearer(org.key, "anna")
    thread = new_thread(client, anna, items=[msg("user", "hello")], metadata={"topic": "x"})
    tid = thread["id"]
    _warm(client, org.key)
    with _held(db, "SELECT 1 FROM threads WHERE id = %s FOR UPDATE", tid):
        gone = _Request(lambda: client.delete(f"/threads/{tid}", headers=anna) if deletion == "thread deleted"
                        else client.delete("/subjects/anna", headers=org.admin))
        _waiting(db, 1)  # the deletion waits on the thread's row
        late = _Request(lambda: client.patch(f"/threads/{tid}", json={"metadata": {"topic": "back"}}, headers=anna)
                        if write == "metadata" else WRITES[write](client, tid, thread["items"][0]["id"], anna))
        _waiting(db, 2)  # the write read the thread and waits on its row, after the deletion
    assert gone.answer().status_code in (200, 204)
    answer = late.answer()
    assert answer.status_code == 404, answer.text
    assert answer.json() == _thread_404(client, anna, tid)
    assert db.execute("SELECT labels, metadata FROM threads WHERE id = %s", (tid,)).fetchall() in ([], [({}, {})])
    assert db.execute("SELECT count(*) FROM thread_states WHERE thread_id = %s", (tid,)).fetchone()[0] == 0


def test_thr_6_of_two_deletions_of_one_thread_the_later_answers_404_and_only_one_is_audited(client, org, db):
    anna = bearer(org.key, "anna")
    tid = new_thread(client, anna, items=[msg("user", "hello")])["id"]
    _warm(client, org.key)
    with _held(db, "SELECT 1 FROM threads WHERE id = %s FOR UPDATE", tid):
        first = _Request(lambda: client.delete(f"/threads/{tid}", headers=anna))
        _waiting(db, 1)
        second = _Request(lambda: client.delete(f"/threads/{tid}", headers=anna))
        _waiting(db, 2)
    assert first.answer().status_code == 204
    answer = second.answer()
    assert answer.status_code == 404, answer.text
    assert answer.json() == _thread_404(client, anna, tid)
    assert db.execute("SELECT count(*) FROM audit_events WHERE action = 'thread.deleted' AND object_id = %s",
                      (tid,)).fetchone()[0] == 1


def test_thr_8_a_note_on_a_message_whose_author_was_erased_meanwhile_answers_404(client, org, db, settings):
    key = org.make_key(policy=OPEN_THREADS)["secret"]
    shared = new_thread(client, bearer(key), items=[msg("user", "a shared question")])
    bobs = append(client, bearer(key, "bob"), shared["id"], msg("user", "bob's answer"))[0]["id"]
    anna = bearer(key, "anna")
    _warm(client, key)
    with _erasure_lock(db, settings, org.org_id, "anna"):
        late = _Request(lambda: client.put(f"/threads/{shared['id']}/items/{bobs}/metadata",
                                           json={"metadata": {"mood": "fine"}}, headers=anna))
        _waiting(db, 1)  # read the message; waits for Anna's erasure lock before writing
        assert client.delete("/subjects/bob", headers=org.admin).status_code == 200
    answer = late.answer()
    assert answer.status_code == 404, answer.text
    read = assert_error(client.get(f"/threads/{shared['id']}/items/{bobs}", headers=anna), 404, "not_found",
                        "item_id")
    assert answer.json() == read
    assert db.execute("SELECT count(*) FROM thread_item_notes WHERE item_id = %s", (bobs,)).fetchone()[0] == 0


def _noted_message(client, org, anna):
    """Anna's new thread and its message, on which she keeps a note; the routes warmed for the timed part."""
    thread = new_thread(client, anna, items=[msg("user", "hello")])
    tid, item = thread["id"], thread["items"][0]["id"]
    noted = client.put(f"/threads/{tid}/items/{item}/metadata", json={"metadata": {"k": 1}}, headers=anna)
    assert noted.status_code == 200, noted.text
    _warm(client, org.key)
    return tid, item


def test_thr_8_removing_a_note_of_a_thread_deleted_meanwhile_answers_the_threads_404(client, org, db):
    anna = bearer(org.key, "anna")
    tid, item = _noted_message(client, org, anna)
    with _held(db, "SELECT 1 FROM thread_item_notes WHERE item_id = %s FOR UPDATE", item):
        gone = _Request(lambda: client.delete(f"/threads/{tid}", headers=anna))
        _waiting(db, 1)  # the deletion marked the thread and waits on the note
        late = _Request(lambda: client.delete(f"/threads/{tid}/items/{item}/metadata", headers=anna))
        _waiting(db, 2)  # the removal read the thread and the message and waits on the note, after the deletion
    assert gone.answer().status_code == 204
    answer = late.answer()
    assert answer.status_code == 404, answer.text
    assert answer.json() == _thread_404(client, anna, tid)


def test_thr_8_a_note_written_while_the_thread_is_being_deleted_answers_404_and_is_not_kept(client, org, db):
    """The write waits on the note the deletion removes; when it goes on, its message is gone too."""
    anna = bearer(org.key, "anna")
    tid, item = _noted_message(client, org, anna)
    with _held(db, "SELECT 1 FROM thread_item_notes WHERE item_id = %s FOR UPDATE", item):
        gone = _Request(lambda: client.delete(f"/threads/{tid}", headers=anna))
        _waiting(db, 1)  # the deletion marked the thread and waits on the note
        late = _Request(lambda: client.put(f"/threads/{tid}/items/{item}/metadata",
                                           json={"metadata": {"k": 2}}, headers=anna))
        _waiting(db, 2)  # the write read a live thread and waits on the note, after the deletion
    assert gone.answer().status_code == 204
    answer = late.answer()
    assert answer.status_code == 404, answer.text
    assert answer.json() == _thread_404(client, anna, tid)
    assert db.execute("SELECT count(*) FROM thread_item_notes WHERE thread_id = %s", (tid,)).fetchone()[0] == 0
