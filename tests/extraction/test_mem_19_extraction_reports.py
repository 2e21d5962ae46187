"""MEM-19/PLT-7 with EXT-4 and EXT-11: a store's extraction switch, runs and windows span every person's threads, so
a key naming a person reads none of them; erasing a person forgets the windows and cursors of her threads."""

from __future__ import annotations

from tests.extraction.util import answer, conversation, new_store, run_now, switch_on
from tests.helpers import assert_error, bearer


def test_mem_19_a_key_naming_a_person_is_refused_on_every_extraction_route(client, org, db, scripted, run_jobs):
    index_id = new_store(org)
    bobs = conversation(org, "bob", ("user", "My IBAN is secret, call me at home."))
    switch_on(org, index_id)
    scripted.reply("Sure! Bob has an IBAN.")  # not the asked shape: the window fails with an error text
    run_now(org, index_id)
    run_jobs()
    base = f"/memory/stores/{index_id}/extraction"
    for capabilities in (["knowledge", "memory", "threads"], ["knowledge", "memory", "threads", "management"]):
        secret = org.make_key(capabilities)["secret"]
        anna = bearer(secret, subject="anna")
        for method, path in (("GET", ""), ("GET", "/runs"), ("GET", "/windows"), ("POST", "/run"), ("PUT", "")):
            body = {"enabled": True, "model": "scripted", "quiet_minutes": 0} if method == "PUT" else None
            response = client.request(method, base + path, headers=anna, json=body)
            assert_error(response, 403, "subject_named", "X-Core-Subject")
            assert bobs not in response.text
        # Naming nobody, the same key reads the store's windows.
        page = client.get(base + "/windows", headers=bearer(secret))
        assert page.status_code == 200 and [w["thread_id"] for w in page.json()["data"]] == [bobs]


def test_mem_19_erasure_forgets_the_windows_and_cursors_of_her_threads_only(client, org, db, scripted, run_jobs):
    index_id = new_store(org)
    bobs = conversation(org, "bob", ("user", "My IBAN is secret, call me at home."))
    annas = conversation(org, "anna", ("user", "I like tea."))
    switch_on(org, index_id)
    scripted.respond = lambda request: answer()
    run_now(org, index_id)
    run_jobs()
    assert sorted(r[0] for r in db.execute("SELECT thread_id FROM extraction_windows")) == sorted([bobs, annas])
    erased = client.delete("/subjects/bob", headers=org.admin)
    assert erased.status_code == 200, erased.text
    counts = erased.json()["counts"]
    assert (counts["extraction_windows"], counts["extraction_cursors"], counts["threads"]) == (1, 1, 1)
    page = client.get(f"/memory/stores/{index_id}/extraction/windows", headers=org.full).json()
    assert [w["thread_id"] for w in page["data"]] == [annas] and page["counts"]["ready"] == 1
    assert db.execute("SELECT thread_id FROM extraction_windows").fetchall() == [(annas,)]
    assert db.execute("SELECT thread_id FROM extraction_cursors").fetchall() == [(annas,)]
