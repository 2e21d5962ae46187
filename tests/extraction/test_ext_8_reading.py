"""EXT-7 … EXT-10: quiet threads read in windows by a real worker against the scripted model server: what was
sent, the records written, confirmed and replaced, and what fails a window."""

from __future__ import annotations

import json

from tests.extraction.util import answer, conversation, new, new_store, records, run_now, switch_on, windows


def test_ext_10_a_quiet_thread_of_anna_gives_records_owned_by_anna(client, org, db, scripted, run_jobs):
    index_id = new_store(org)
    conversation(org, "anna", ("user", "I moved to Utrecht last month."), ("assistant", "Noted!"))
    switch_on(org, index_id)
    scripted.reply(answer(new("fact", "Anna lives in Utrecht.", confidence=0.9)), usage=(300, 40))
    run_now(org, index_id)
    run_jobs()
    mine = records(org, index_id, "anna")
    assert [(r["subject"], r["type"], r["text"], r["source"]) for r in mine] == [
        ("anna", "fact", "Anna lives in Utrecht.", "extraction")]
    sent = scripted.last
    assert sent["response_format"]["type"] == "json_schema"
    assert "user: I moved to Utrecht last month." in sent["messages"][-1]["content"]
    assert db.execute("SELECT key_id, job, input_tokens, output_tokens FROM usage_events").fetchall() == [
        (org.key_id, "extraction", 300, 40)]
    provenance = mine[0]["provenance"]
    assert provenance["thread_id"] and provenance["window_id"] and provenance["first_item_id"]
    assert json.loads(json.dumps(windows(db, index_id)))[0][3:] == ["ready", None, 1, 0, 0, 0]
