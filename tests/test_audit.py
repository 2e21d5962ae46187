"""PLT-12: the append-only, hash-chained audit trail."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import psycopg
import pytest

from backend.domains.audit.service import subject_hash
from tests.helpers import assert_error, bearer


def _events(db, org_id, action=None):
    sql = "SELECT action, outcome, object_id, detail FROM audit_events WHERE org_id = %s"
    args = [org_id]
    if action:
        sql += " AND action = %s"
        args.append(action)
    return db.execute(sql + " ORDER BY seq", args).fetchall()


def test_plt_12_event_is_written_with_the_change_and_not_without_it(org, client, db):
    before = len(_events(db, org.org_id))
    created = org.make_key(["knowledge"])
    rows = _events(db, org.org_id, "key.created")
    assert [r[2] for r in rows][-1] == created["id"]
    # A refused change writes neither the change nor an event.
    bad = client.post(f"/tenants/{org.org_id}/keys", headers=org.admin,
                      json={"name": "x", "capabilities": ["knowledge"],
                            "policy": {"rules": [{"id": "a", "effect": "permit", "kind": "nope"}]}})
    assert bad.status_code == 422
    assert len(_events(db, org.org_id)) == before + 1
    assert db.execute("SELECT count(*) FROM api_keys WHERE org_id = %s", (org.org_id,)).fetchone()[0] == 2


def test_plt_12_update_delete_truncate_are_refused_by_the_database(org, db):
    for sql in ("UPDATE audit_events SET action = 'x'", "DELETE FROM audit_events", "TRUNCATE audit_events"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
            db.execute(sql)
    assert db.execute("SELECT count(*) FROM audit_events").fetchone()[0] >= 1


def _verify(database_url, *extra):
    from sqlalchemy.engine import make_url

    plain = make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)
    env = {**os.environ, "CORE_DATABASE_URL": plain, "CORE_SECRET": "irrelevant-for-verify"}
    return subprocess.run([sys.executable, "-m", "backend.cli", "audit", "verify", *extra], env=env,
                          capture_output=True, text=True, timeout=120)


def test_plt_12_tampering_is_detected_by_coremem_audit_verify(org, other_org, client, db, database_url):
    org.make_key(["knowledge"])
    org.make_key(["threads"])
    good = _verify(database_url)
    assert good.returncode == 0, good.stderr
    assert f"{org.org_id}: intact (3 events)" in good.stdout
    assert f"{other_org.org_id}: intact" in good.stdout
    # Someone with superuser rights bypasses the trigger and edits a row.
    db.execute("SET session_replication_role = replica")
    db.execute("UPDATE audit_events SET detail = '{\"forged\": true}' WHERE org_id = %s AND seq = 2", (org.org_id,))
    db.execute("SET session_replication_role = origin")
    bad = _verify(database_url)
    assert bad.returncode == 1
    assert f"{org.org_id}: BROKEN at seq 2: row content does not match its hash" in bad.stdout
    assert f"{other_org.org_id}: intact" in bad.stdout
    status = client.get("/audit/verify", headers=org.admin).json()
    assert status["intact"] is False and status["broken_at_seq"] == 2


def test_plt_12_removed_row_breaks_the_chain(org, db, database_url):
    org.make_key(["knowledge"])
    org.make_key(["knowledge"])
    db.execute("SET session_replication_role = replica")
    db.execute("DELETE FROM audit_events WHERE org_id = %s AND seq = 2", (org.org_id,))
    db.execute("SET session_replication_role = origin")
    result = _verify(database_url, "--org", org.org_id)
    assert result.returncode == 1
    assert "BROKEN at seq 3: sequence gap" in result.stdout


def test_plt_12_get_audit_filters_pages_and_is_itself_audited(org, client):
    for _ in range(3):
        org.make_key(["knowledge"])
    page = client.get("/audit?action=key.created&limit=2", headers=org.admin).json()
    assert [e["action"] for e in page["data"]] == ["key.created", "key.created"]
    assert page["data"][0]["seq"] > page["data"][1]["seq"]
    rest = client.get(f"/audit?action=key.created&limit=2&cursor={page['next_cursor']}", headers=org.admin).json()
    assert len(rest["data"]) == 2 and rest["next_cursor"] is None  # bootstrap key + 3 made here
    reads = client.get("/audit?action=audit.read", headers=org.admin).json()["data"]
    assert len(reads) == 2
    assert reads[0]["detail"]["filters"] == {"action": ["key.created"]}
    assert reads[0]["actor"]["type"] == "admin"


def test_plt_12_audit_needs_an_administrator(org, client):
    assert_error(client.get("/audit", headers=org.full), 403, "admin_required")
    token = org.subject_token(org.key, "anna")
    assert_error(client.get("/audit", headers=bearer(token)), 403)


def test_plt_12_a_person_is_named_only_by_a_keyed_hash(org, client, db, settings, database_url):
    from backend.access.actor import Actor
    from backend.domains.audit import service
    from tests.helpers import in_transaction

    in_transaction(database_url, lambda db: service.record(
        db, org_id=org.org_id, actor=Actor("key", org.key_id), action="memory.denied", secret=settings.secret,
        subject_id="anna-canary", outcome="denied"))
    dump = db.execute("SELECT string_agg(t::text, ' ') FROM audit_events t").fetchone()[0]
    assert "anna-canary" not in dump
    found = client.get("/audit?subject=anna-canary", headers=org.admin).json()["data"]
    assert [e["action"] for e in found] == ["memory.denied"]
    assert found[0]["subject"] == subject_hash(settings.secret, org.org_id, "anna-canary")
    assert client.get("/audit?subject=bob", headers=org.admin).json()["data"] == []


def test_plt_12_instants_without_offset_are_422(org, client):
    assert_error(client.get("/audit?from=2026-01-01T00:00:00", headers=org.admin), 422, param="from")
    assert client.get("/audit?from=2026-01-01T00:00:00Z", headers=org.admin).status_code == 200


def _policy_naming_anna(*others: str) -> dict:
    from backend.access.policy import default_policy

    policy = default_policy()
    policy["rules"].append({"id": "her-records", "effect": "permit", "kind": "memory_record", "actions": ["see"],
                            "match": {"labels": {"subject": ["anna", *others]}}})
    policy["settings"] = {"writable_labels": {"participants": {"values": ["anna", *others]}}}
    return policy


def test_plt_12_policy_changes_are_audited_without_the_people_they_name(org, client, db):
    """Key lifecycle and organisation events describe a policy by its rules, indexes and a keyed digest, never by
    the person ids in its label values; the digest tells two versions apart."""
    first, second = _policy_naming_anna(), _policy_naming_anna("carla")
    key = org.make_key(["knowledge"], policy=first)
    changed = client.patch(f"/tenants/{org.org_id}/keys/{key['id']}", json={"policy": second}, headers=org.admin)
    assert changed.status_code == 200, changed.text
    manager = org.make_key(["knowledge", "management"], policy=second)
    assert client.put("/key/policy", json=second, headers=bearer(manager["secret"])).status_code == 200
    assert client.post(f"/tenants/{org.org_id}/keys/{key['id']}/revoke", headers=org.admin).status_code == 200
    assert client.delete(f"/tenants/{org.org_id}/keys/{key['id']}", headers=org.admin).status_code == 204
    for policy in (first, second):
        response = client.patch(f"/tenants/{org.org_id}", json={"policy": policy}, headers=org.admin)
        assert response.status_code == 200, response.text

    events = client.get("/audit?limit=200", headers=org.admin).json()["data"]
    actions = {e["action"] for e in events}
    assert {"key.created", "key.changed", "key.revoked", "key.deleted", "org.updated"} <= actions
    assert "anna" not in json.dumps([e["detail"] for e in events])
    assert "anna" not in db.execute("SELECT string_agg(t::text, ' ') FROM audit_events t").fetchone()[0]

    [patched] = [e for e in events if e["action"] == "key.changed" and e["object_id"] == key["id"]]
    before, after = patched["detail"]["before"]["policy"], patched["detail"]["after"]["policy"]
    assert [r["id"] for r in after["rules"]][-1] == "her-records" and after["indexes"] == ["*"]
    assert after["rules"][-1] == {"id": "her-records", "effect": "permit", "kind": "memory_record"}
    assert after["settings"] == ["writable_labels"]
    assert before["digest"] != after["digest"] and len(after["digest"]) == 64
    [own] = [e for e in events if e["action"] == "key.changed" and e["object_id"] == manager["id"]]
    assert own["detail"]["before"]["policy"]["digest"] == after["digest"]  # the same document, the same digest
    newest, oldest = [e["detail"]["changed"]["policy"] for e in events if e["action"] == "org.updated"]
    assert (newest["before"]["digest"], newest["after"]["digest"]) == (before["digest"], after["digest"])
    assert oldest["after"] == before
