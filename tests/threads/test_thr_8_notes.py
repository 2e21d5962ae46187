"""THR-8: each person's own note on a message; finding messages by note."""

from __future__ import annotations

from tests.helpers import assert_error, bearer
from tests.threads.util import msg, new_thread


def test_thr_8_notes_per_person_limits_and_isolation(client, org):
    key = org.make_key(name="app")
    anna, bob, nobody = bearer(key["secret"], "anna"), bearer(key["secret"], "bob"), bearer(key["secret"])
    anna_token = bearer(org.subject_token(key["secret"], "anna"))
    thread = new_thread(client, nobody, items=[msg("user", "Hoe vraag ik een terugbetaling aan?"),
                                               msg("assistant", "Via het formulier."),
                                               {"type": "function_call", "call_id": "c", "name": "f",
                                                "arguments": "{}"}])
    answer = thread["items"][1]["id"]
    url = f"/threads/{thread['id']}/items/{answer}/metadata"

    # Reading the (shared) thread is enough to write one's own note.
    put = client.put(url, json={"metadata": {"score": "negative", "stars": 2, "liked": False}}, headers=anna)
    assert put.status_code == 200, put.text
    assert put.json()["by"] == "anna" and put.json()["metadata"] == {"score": "negative", "stars": 2, "liked": False}
    client.put(url, json={"metadata": {"score": "positive", "stars": "2"}}, headers=bob)
    client.put(url, json={"metadata": {"by": "anna", "flag": True}}, headers=nobody)

    notes = {n["by"]: n["metadata"] for n in client.get(url, headers=nobody).json()["data"]}
    assert notes == {None: {"by": "anna", "flag": True}, "anna": {"score": "negative", "stars": 2, "liked": False},
                     "bob": {"score": "positive", "stars": "2"}}
    # A subject token sees and writes only her own; PUT replaces her note whole.
    assert [n["by"] for n in client.get(url, headers=anna_token).json()["data"]] == ["anna"]
    client.put(url, json={"metadata": {"score": "neutral"}}, headers=anna_token)
    notes = {n["by"]: n["metadata"] for n in client.get(url, headers=nobody).json()["data"]}
    assert notes["anna"] == {"score": "neutral"} and notes["bob"] == {"score": "positive", "stars": "2"}

    assert client.delete(url, headers=anna_token).status_code == 204
    assert_error(client.delete(url, headers=anna), 404)
    assert {n["by"] for n in client.get(url, headers=nobody).json()["data"]} == {None, "bob"}

    # Limits: 16 keys; a string of at most 512; numbers and booleans; nothing nested.
    assert client.put(url, json={"metadata": {f"k{i}": "v" * 512 for i in range(16)}}, headers=anna).status_code == 200
    assert_error(client.put(url, json={"metadata": {f"k{i}": 1 for i in range(17)}}, headers=anna), 422,
                 param="metadata")
    assert_error(client.put(url, json={"metadata": {"k": "v" * 513}}, headers=anna), 422, param="metadata.k")
    assert_error(client.put(url, json={"metadata": {"k": {"nested": 1}}}, headers=anna), 422)
    assert_error(client.put(url, json={"metadata": {"k": [1]}}, headers=anna), 422)
    assert_error(client.put(url, json={"metadata": {"k": None}}, headers=anna), 422)
    tool = f"/threads/{thread['id']}/items/{thread['items'][2]['id']}/metadata"
    assert_error(client.put(tool, json={"metadata": {"k": 1}}, headers=anna), 422, code="not_a_message")
    # Another person's thread is unreachable for notes too.
    bobs = new_thread(client, bob, items=[msg("user", "privé")])
    assert_error(client.put(f"/threads/{bobs['id']}/items/{bobs['items'][0]['id']}/metadata",
                            json={"metadata": {"k": 1}}, headers=anna), 404)


def test_thr_8_find_messages_by_note(client, org):
    key = org.make_key(name="app")
    anna, bob, nobody = bearer(key["secret"], "anna"), bearer(key["secret"], "bob"), bearer(key["secret"])
    anna_token = bearer(org.subject_token(key["secret"], "anna"))
    thread = new_thread(client, nobody, items=[msg("user", "eerste vraag over terugbetaling"),
                                               msg("assistant", "eerste antwoord"),
                                               msg("assistant", "tweede antwoord over terugbetaling")])
    first, second, third = (i["id"] for i in thread["items"])

    def note(item: str, headers: dict[str, str], metadata: dict) -> None:
        url = f"/threads/{thread['id']}/items/{item}/metadata"
        assert client.put(url, json={"metadata": metadata}, headers=headers).status_code == 200

    note(second, anna, {"score": "negative", "stars": 2, "liked": False})
    note(third, anna, {"score": "positive", "stars": 2.5})
    note(third, bob, {"score": "negative", "stars": "2"})
    note(first, nobody, {"score": "negative"})

    def found(query: str, headers: dict[str, str]) -> list[tuple[str, dict | None, str | None]]:
        response = client.get(f"/thread-items?{query}", headers=headers)
        assert response.status_code == 200, response.text
        return [(h["item_id"], h.get("metadata"), h.get("metadata_by")) for h in response.json()["data"]]

    assert found("metadata=score:negative&metadata_by=anna", nobody) == [
        (second, {"score": "negative", "stars": 2, "liked": False}, "anna")]
    assert found("metadata=score:negative&metadata_by=bob", nobody) == [
        (third, {"score": "negative", "stars": "2"}, "bob")]
    # A value matches the string and the number or boolean it spells.
    assert [i for i, _, _ in found("metadata=stars:2&metadata_by=anna", nobody)] == [second]
    assert [i for i, _, _ in found("metadata=stars:2&metadata_by=bob", nobody)] == [third]
    assert [i for i, _, _ in found("metadata=stars:2.5&metadata_by=anna", nobody)] == [third]
    assert [i for i, _, _ in found("metadata=liked:false&metadata_by=anna", nobody)] == [second]
    assert found("metadata=liked:true&metadata_by=anna", nobody) == []
    # Without metadata_by: the request's own person's notes (the organisation's when nobody is named).
    assert [i for i, _, _ in found("metadata=score:negative", nobody)] == [first]
    assert [i for i, _, _ in found("metadata=score:negative", anna)] == [second]
    # Together with q; several pairs must all match.
    assert [i for i, _, _ in found("q=terugbetaling&metadata=score:negative&metadata_by=bob", nobody)] == [third]
    assert found("q=eerste&metadata=score:negative&metadata_by=bob", nobody) == []
    assert [i for i, _, _ in found("metadata=score:negative&metadata=stars:2&metadata_by=anna", nobody)] == [second]
    hit = client.get("/thread-items?q=terugbetaling&metadata=score:positive&metadata_by=anna",
                     headers=nobody).json()["data"][0]
    assert hit["highlights"] and hit["metadata"] == {"score": "positive", "stars": 2.5}

    # A subject token: metadata_by can name only herself; hits carry only her note.
    assert found("metadata=score:negative&metadata_by=bob", anna_token) == []
    assert found("metadata=score:negative&metadata_by=anna", anna_token) == [
        (second, {"score": "negative", "stars": 2, "liked": False}, "anna")]
    assert [i for i, _, _ in found("metadata=score:negative", anna_token)] == [second]
