def test_plt_17_health_and_ready(client):
    assert client.get("/health").json() == {"status": "ok"}
    ready = client.get("/ready")
    assert ready.status_code == 200, ready.text
    assert ready.json()["migrations_current"] is True


def test_plt_3_bootstrap_gives_working_credentials(org, client):
    assert org.key.startswith("ck_")
    me = client.get("/key", headers=org.full)
    assert me.status_code == 200, me.text
    assert me.json()["id"] == org.key_id
