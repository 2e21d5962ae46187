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


def test_plt_14a_real_http_round_trip(org, live_api):
    """The same API under uvicorn on a loopback port: create an index, read it back."""
    import httpx

    with httpx.Client(base_url=live_api, headers={"Authorization": f"Bearer {org.key}"}) as http:
        created = http.post("/indexes", json={"name": "over-http"})
        assert created.status_code == 201, created.text
        assert http.get(f"/indexes/{created.json()['id']}").json()["name"] == "over-http"
        assert http.post("/indexes", content=b"{", headers={"Content-Type": "application/json"}).json()["code"] == (
            "malformed_body")
