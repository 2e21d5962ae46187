"""THR-13: compaction summaries of a thread, as turns will write them."""

from __future__ import annotations

from tests.helpers import assert_error, bearer
from tests.threads.util import new_thread


def test_thr_13_summaries_list_positions_level_model_and_text(client, org, db):
    key, anna, bob = bearer(org.key), bearer(org.key, "anna"), bearer(org.key, "bob")
    thread = new_thread(client, anna)
    url = f"/threads/{thread['id']}/summaries"
    assert client.get(url, headers=anna).json() == {"data": [], "next_cursor": None}
    for n, (start, end, level) in enumerate([(1, 6, 1), (7, 12, 1), (1, 12, 2)]):
        db.execute("INSERT INTO thread_summaries (org_id, id, thread_id, from_position, to_position, level, model,"
                   " text) VALUES (%s, %s, %s, %s, %s, %s, 'helper-1', %s)",
                   (org.org_id, f"sum_{n:026d}", thread["id"], start, end, level, f"samenvatting {n}"))
    page = client.get(f"{url}?limit=2", headers=anna).json()
    assert [(s["from_position"], s["to_position"], s["level"], s["model"], s["text"]) for s in page["data"]] == [
        (1, 6, 1, "helper-1", "samenvatting 0"), (7, 12, 1, "helper-1", "samenvatting 1")]
    rest = client.get(f"{url}?limit=2&cursor={page['next_cursor']}", headers=key).json()
    assert [s["level"] for s in rest["data"]] == [2] and rest["next_cursor"] is None
    assert_error(client.get(url, headers=bob), 404)
