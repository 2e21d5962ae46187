"""EXT-11: a thread a pseudonymising key writes items into through the thread routes (`POST /threads` with items,
`POST /threads/{id}/items`) is marked like one its turns wrote in, so extraction hides the thread's windows."""

from __future__ import annotations

import json
from typing import Any

from tests.extraction.util import answer, new_store, run_now, switch_on
from tests.helpers import Org, bearer
from tests.threads.util import append, msg, new_thread

ADDRESS = "anna@example.com"


def _marked(db: Any, thread_id: str) -> bool:
    return bool(db.execute("SELECT pseudonymized FROM threads WHERE id = %s", (thread_id,)).fetchone()[0])


def test_ext_11_items_written_through_the_thread_routes_mark_the_thread(client: Any, org: Org, db: Any,
                                                                       scripted: Any, run_jobs: Any) -> None:
    hiding = bearer(org.make_key(name="hiding", privacy={"pseudonymize": True})["secret"], "anna")
    plain = bearer(org.key, "anna")
    opened = new_thread(client, hiding, items=[msg("user", f"Write to me at {ADDRESS} please.")])
    appended = new_thread(client, plain)
    append(client, hiding, appended["id"], msg("user", f"My address is {ADDRESS}."))
    untouched = new_thread(client, plain, items=[msg("user", "Nothing personal here.")])
    assert _marked(db, opened["id"]) and _marked(db, appended["id"])
    assert not _marked(db, untouched["id"])  # a key that hides nothing marks nothing

    index_id = new_store(org)
    switch_on(org, index_id)
    for _ in range(3):
        scripted.reply(answer())
    run_now(org, index_id)
    run_jobs()
    sent = [json.dumps(request["messages"]) for request in scripted.requests]
    assert len(sent) == 3 and sum("Nothing personal here." in s for s in sent) == 1
    hidden = [s for s in sent if "<EMAIL_1>" in s]
    assert len(hidden) == 2 and all(ADDRESS not in s for s in sent)
