"""TRN-10/EXT-11 against the real database: a thread's placeholders are stored and loaded, two turns adding
values at once agree on them, a turn that stores nothing writes nothing, the thread is marked, and thread
deletion (THR-6) and erasure (MEM-19) remove the real values."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from backend import contexts
from backend.access.context import RequestContext
from backend.db.engine import make_engine, make_sessionmaker
from backend.domains.privacy import repository as repo
from backend.domains.privacy import service as privacy
from backend.errors import Conflict
from backend.providers.pii import Pseudonym
from tests.helpers import bearer
from tests.threads.util import msg, new_thread

T = TypeVar("T")


def _header(subject: str | None, attributes: dict[str, list[str]] | None) -> str | None:
    return json.dumps({"id": subject, "attributes": attributes or {}}) if subject else None


async def _ctx(session: Any, settings: Any, key: str, subject: str | None,
               attributes: dict[str, list[str]] | None = None) -> RequestContext:
    return await contexts.for_credential(session, settings, authorization=f"Bearer {key}",
                                         subject_header=_header(subject, attributes))


def as_person(database_url: str, settings: Any, key: str, subject: str | None,
              work: Callable[[RequestContext], Awaitable[T]], attributes: dict[str, list[str]] | None = None) -> T:
    """Run `work(ctx)` in one committed transaction, as a turn for this person would."""

    async def go() -> T:
        engine = make_engine(database_url, pool_size=1)
        try:
            async with make_sessionmaker(engine)() as session, session.begin():
                return await work(await _ctx(session, settings, key, subject, attributes))
        finally:
            await engine.dispose()

    return asyncio.run(go())


def rows(db: Any, thread_id: str) -> list[tuple[str, str, str | None, str | None]]:
    return db.execute("SELECT placeholder, value, subject, belongs_to FROM thread_pseudonyms WHERE thread_id = %s "
                      "ORDER BY kind, placeholder", (thread_id,)).fetchall()


def a_turn(thread_id: str | None, *texts: str, subject: Any = ...) -> Callable[[RequestContext], Awaitable[Any]]:
    async def work(ctx: RequestContext) -> list[str]:
        pz = await privacy.open_pseudonymizer(ctx, thread_id)
        hidden = [pz.hide(t, subject=subject) for t in texts]
        if thread_id is not None and await privacy.store(ctx, thread_id, pz):
            hidden = [pz.hide(t, subject=subject) for t in texts]
        return hidden
    return work


def test_trn_10_placeholders_are_stored_per_thread_and_the_next_turn_continues_them(client, org, settings,
                                                                                    database_url, db):
    anna = bearer(org.key, "anna")
    thread = new_thread(client, anna, items=[msg("user", "hallo")])["id"]
    other = new_thread(client, anna, items=[msg("user", "hallo")])["id"]
    attributes = {"name": ["Anna de Vries"]}
    first = as_person(database_url, settings, org.key, "anna", a_turn(
        thread, "Ik ben Anna de Vries, mail bert@example.com of bel 06-12345678."), attributes)
    assert first == ["Ik ben <PERSON_1>, mail <EMAIL_1> of bel <PHONE_1>."]
    second = as_person(database_url, settings, org.key, "anna", a_turn(
        thread, "Bert Jansen heeft bert@example.com; Anna de Vries belt 06-12345678."))
    assert second == ["<PERSON_2> heeft <EMAIL_1>; <PERSON_1> belt <PHONE_1>."]
    assert rows(db, thread) == [
        ("<EMAIL_1>", "bert@example.com", "anna", None), ("<PERSON_1>", "Anna de Vries", "anna", "anna"),
        ("<PERSON_2>", "Bert Jansen", "anna", None), ("<PHONE_1>", "06-12345678", "anna", None)]
    # Another thread has its own numbering.
    assert as_person(database_url, settings, org.key, "anna", a_turn(other, "Bert Jansen")) == ["<PERSON_1>"]
    # EXT-11: both threads are marked; the mark is set once.
    marks = db.execute("SELECT id, pseudonymized FROM threads WHERE id IN (%s, %s) ORDER BY id",
                       (thread, other)).fetchall()
    assert {m[1] for m in marks} == {True}
    assert as_person(database_url, settings, org.key, "anna",
                     lambda ctx: repo.mark_pseudonymized(ctx.db, ctx.org_id, thread)) is False
    loaded = as_person(database_url, settings, org.key, "anna", lambda ctx: repo.load(ctx.db, ctx.org_id, thread))
    assert [e.placeholder for e in loaded] == ["<EMAIL_1>", "<PERSON_1>", "<PERSON_2>", "<PHONE_1>"]


def test_trn_10_a_turn_that_stores_nothing_keeps_its_placeholders_in_memory(client, org, settings, database_url,
                                                                             db):
    thread = new_thread(client, bearer(org.key, "anna"), items=[msg("user", "hallo")])["id"]
    hidden = as_person(database_url, settings, org.key, "anna", a_turn(None, "Bel Emma Thompson op 06-12345678."))
    assert hidden == ["Bel <PERSON_1> op <PHONE_1>."]
    assert db.execute("SELECT count(*) FROM thread_pseudonyms").fetchone()[0] == 0
    assert db.execute("SELECT pseudonymized FROM threads WHERE id = %s", (thread,)).fetchone()[0] is False


def test_trn_10_two_turns_adding_values_at_once_end_with_the_same_placeholders(client, org, settings, database_url,
                                                                                db):
    thread = new_thread(client, bearer(org.key, "anna"), items=[msg("user", "hallo")])["id"]
    as_person(database_url, settings, org.key, "anna", a_turn(thread, "Anna de Vries"))

    async def race() -> tuple[list[str], list[str], bool]:
        engine = make_engine(database_url, pool_size=2)
        try:
            maker = make_sessionmaker(engine)
            async with maker() as a, maker() as b:
                await a.begin()
                await b.begin()
                ctx_a = await _ctx(a, settings, org.key, "anna")
                ctx_b = await _ctx(b, settings, org.key, "bert")
                pz_a = await privacy.open_pseudonymizer(ctx_a, thread)
                pz_b = await privacy.open_pseudonymizer(ctx_b, thread)
                text_a, text_b = "Bert Jansen belde.", "Carl Peters en Bert Jansen."
                assert pz_a.hide(text_a) == "<PERSON_2> belde."
                assert pz_b.hide(text_b) == "<PERSON_2> en <PERSON_3>."
                assert await privacy.store(ctx_a, thread, pz_a) is False
                # B meets A's uncommitted row and waits for A's transaction to end.
                store_b = asyncio.create_task(privacy.store(ctx_b, thread, pz_b))
                await asyncio.sleep(0.5)
                waited = not store_b.done()
                await a.commit()
                changed = await store_b
                await b.commit()
                return [pz_a.hide(text_a)], [pz_b.hide(text_b)], waited and changed
        finally:
            await engine.dispose()

    hidden_a, hidden_b, waited_and_changed = asyncio.run(race())
    assert waited_and_changed
    assert hidden_a == ["<PERSON_2> belde."]
    # B's Carl Peters lost number 2 to A's Bert Jansen and takes the next free one; Bert Jansen is A's number.
    assert hidden_b == ["<PERSON_3> en <PERSON_2>."]
    assert rows(db, thread) == [("<PERSON_1>", "Anna de Vries", "anna", None),
                                ("<PERSON_2>", "Bert Jansen", "anna", None),
                                ("<PERSON_3>", "Carl Peters", "bert", None)]


def test_trn_10_save_new_gives_a_value_stored_meanwhile_its_stored_placeholder(client, org, settings, database_url):
    thread = new_thread(client, bearer(org.key), items=[msg("user", "hallo")])["id"]

    async def work(ctx: RequestContext) -> list[Pseudonym]:
        await repo.save_new(ctx.db, ctx.org_id, thread, [Pseudonym("<URL_1>", "URL", "https://a.example"),
                                                          Pseudonym("<URL_2>", "URL", "https://b.example")])
        # A stale turn numbered these from an empty mapping: one value is known, one number is taken.
        return await repo.save_new(ctx.db, ctx.org_id, thread, [
            Pseudonym("<URL_1>", "URL", "https://c.example"), Pseudonym("<URL_2>", "URL", "https://a.example"),
            Pseudonym("<URL_1>", "URL", "https://c.example")])

    saved = as_person(database_url, settings, org.key, None, work)
    assert [(e.placeholder, e.value) for e in saved] == [
        ("<URL_3>", "https://c.example"), ("<URL_1>", "https://a.example"), ("<URL_3>", "https://c.example")]


def test_trn_10_a_long_value_is_stored(client, org, settings, database_url, db):
    thread = new_thread(client, bearer(org.key), items=[msg("user", "hallo")])["id"]
    url = "https://example.com/" + "a" * 9000
    hidden = as_person(database_url, settings, org.key, None, a_turn(thread, f"see {url} now"))
    assert hidden == ["see <URL_1> now"]
    assert rows(db, thread) == [("<URL_1>", url, None, None)]


def test_thr_6_deleting_a_thread_removes_its_placeholders_and_the_cascade_covers_removed_rows(
        client, org, settings, database_url, db):
    anna = bearer(org.key, "anna")
    deleted = new_thread(client, anna, items=[msg("user", "hallo")])["id"]
    kept = new_thread(client, anna, items=[msg("user", "hallo")])["id"]
    removed = new_thread(client, anna, items=[msg("user", "hallo")])["id"]
    for thread in (deleted, kept, removed):
        as_person(database_url, settings, org.key, "anna", a_turn(thread, "Emma Thompson, NL91ABNA0417164300"))
    assert client.delete(f"/threads/{deleted}", headers=anna).status_code == 204
    assert rows(db, deleted) == []
    db.execute("DELETE FROM threads WHERE id = %s", (removed,))
    assert rows(db, removed) == []
    assert len(rows(db, kept)) == 2
    assert db.execute("SELECT count(*) FROM thread_pseudonyms t WHERE t::text LIKE '%%Emma Thompson%%'"
                      ).fetchone()[0] == 1


def test_mem_19_erasing_a_person_removes_her_values_also_from_threads_that_stay(client, org, other_org, settings,
                                                                                database_url, db):
    her_thread = new_thread(client, bearer(org.key, "anna"), items=[msg("user", "hallo")])["id"]
    bobs_group = new_thread(client, bearer(org.key, "bob"), labels={"participants": ["anna", "bob"]},
                            items=[msg("user", "hallo")])["id"]
    carls = new_thread(client, bearer(org.key, "carl"), items=[msg("user", "hallo")])["id"]
    elsewhere = new_thread(client, bearer(other_org.key, "carl"), items=[msg("user", "hallo")])["id"]
    # In her own thread her attributes name her; she mentions a colleague.
    as_person(database_url, settings, org.key, "anna",
              a_turn(her_thread, "Ik ben Anna de Vries (anna@example.com), ken je Bert Jansen?"),
              {"name": ["Anna de Vries"], "email": ["anna@example.com"]})
    # In Bob's group thread: Bob writes her name (his turn does not know it is hers), she writes her address,
    # Bob writes his own number, and a message of nobody names her by her id.
    as_person(database_url, settings, org.key, "bob", a_turn(bobs_group, "Vraag het Anna de Vries, 06-11111111."))
    as_person(database_url, settings, org.key, "bob", a_turn(bobs_group, "Ik woon op Kerkstraat 12.", subject="anna"))
    as_person(database_url, settings, org.key, "bob", a_turn(bobs_group, "Bel mevrouw Anna.", subject=None))
    # Carl's thread names her too (her address in capitals), and someone else; another organisation's Anna de
    # Vries is another person.
    as_person(database_url, settings, org.key, "carl", a_turn(carls, "Anna de Vries, ANNA@EXAMPLE.COM, Emma Thompson."))
    as_person(database_url, settings, other_org.key, "carl", a_turn(elsewhere, "Anna de Vries."))
    before = db.execute("SELECT count(*) FROM thread_pseudonyms WHERE org_id = %s", (org.org_id,)).fetchone()[0]

    erased = client.delete("/subjects/anna", headers=org.admin)
    assert erased.status_code == 200, erased.text
    assert rows(db, her_thread) == []
    assert rows(db, bobs_group) == [("<PHONE_1>", "06-11111111", "bob", None)]
    assert rows(db, carls) == [("<PERSON_2>", "Emma Thompson", "carl", None)]
    assert rows(db, elsewhere) == [("<PERSON_1>", "Anna de Vries", "carl", None)]
    after = db.execute("SELECT count(*) FROM thread_pseudonyms WHERE org_id = %s", (org.org_id,)).fetchone()[0]
    assert (before, after) == (10, 2)
    assert erased.json()["counts"]["pseudonyms"] == 8
    assert db.execute("SELECT count(*) FROM thread_pseudonyms t WHERE org_id = %s AND (lower(t::text) LIKE "
                      "'%%anna%%' OR t::text LIKE '%%Kerkstraat%%')", (org.org_id,)).fetchone()[0] == 0


def test_mem_19_a_turn_that_began_before_her_erasure_stores_no_placeholder_of_hers(client, org, settings,
                                                                                     database_url, db):
    thread = new_thread(client, bearer(org.key, "bob"), items=[msg("user", "hallo")])["id"]

    async def race() -> None:
        engine = make_engine(database_url, pool_size=2)
        try:
            async with make_sessionmaker(engine)() as session, session.begin():
                ctx = await _ctx(session, settings, org.key, "bob")
                pz = await privacy.open_pseudonymizer(ctx, thread)
                pz.hide("Ik woon op Kerkstraat 12.", subject="anna")
                erased = await asyncio.to_thread(client.delete, "/subjects/anna", headers=org.admin)
                assert erased.status_code == 200
                with pytest.raises(Conflict) as refused:
                    await privacy.store(ctx, thread, pz)
                assert refused.value.code == "subject_erased"
        finally:
            await engine.dispose()

    asyncio.run(race())
    assert rows(db, thread) == []
