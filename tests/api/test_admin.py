"""Admin routes: tenants, keys, rotation, revocation, admin token."""

from __future__ import annotations

from tests.api.conftest import ADMIN, TestClient, new_model, new_tenant


def test_create_tenant_returns_key_once(client: TestClient) -> None:
    r = client.post("/v1/admin/tenants", json={"tenant_id": "acme"}, headers=ADMIN)
    assert r.status_code == 201
    body = r.json()
    assert body["tenant_id"] == "acme" and body["api_key"].startswith("nl.acme.")
    assert body["key_id"] in body["api_key"]
    listed = client.get("/v1/admin/tenants", headers=ADMIN).json()["tenants"]
    assert [t["tenant_id"] for t in listed] == ["acme"] and listed[0]["n_models"] == 0


def test_create_tenant_duplicate_409_and_bad_id_422(client: TestClient) -> None:
    new_tenant(client)
    r = client.post("/v1/admin/tenants", json={"tenant_id": "acme"}, headers=ADMIN)
    assert r.status_code == 409 and r.json()["error"]["code"] == "tenant_exists"
    r = client.post("/v1/admin/tenants", json={"tenant_id": "Bad Id"}, headers=ADMIN)
    assert r.status_code == 422 and r.json()["error"]["field"] == "tenant_id"


def test_admin_routes_need_admin_token(client: TestClient, tenant: dict[str, str]) -> None:
    assert client.get("/v1/admin/tenants").json()["error"]["code"] == "unauthenticated"
    r = client.get("/v1/admin/tenants", headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401
    # a tenant key is not an admin token
    assert client.get("/v1/admin/tenants", headers=tenant).status_code == 401


def test_rotate_and_revoke_key(client: TestClient, tenant: dict[str, str]) -> None:
    new_model(client, tenant)
    r = client.post("/v1/admin/tenants/acme/keys", headers=ADMIN)
    assert r.status_code == 201
    second = {"Authorization": f"Bearer {r.json()['api_key']}"}
    assert client.get("/v1/models/m1", headers=second).status_code == 200
    assert client.get("/v1/models/m1", headers=tenant).status_code == 200  # old key still valid
    old_key_id = tenant["Authorization"].split(".")[2]
    assert client.delete(f"/v1/admin/tenants/acme/keys/{old_key_id}",
                         headers=ADMIN).status_code == 204
    r = client.get("/v1/models/m1", headers=tenant)
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    assert client.post("/v1/models/m1/predict", json={"features": [0, 0, 0, 1]},
                       headers=tenant).status_code == 401
    assert client.get("/v1/models/m1", headers=second).status_code == 200
    assert client.delete(f"/v1/admin/tenants/acme/keys/{old_key_id}",
                         headers=ADMIN).status_code == 404


def test_tampered_key_is_invalid(client: TestClient, tenant: dict[str, str]) -> None:
    token = tenant["Authorization"]
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    r = client.get("/v1/models", headers={"Authorization": forged})
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    other_tenant = token.replace("nl.acme.", "nl.other.")
    assert client.get("/v1/models", headers={"Authorization": other_tenant}).status_code == 401


def test_delete_tenant_removes_keys_and_models(client: TestClient, tenant: dict[str, str],
                                               redis_url: str) -> None:
    new_model(client, tenant)
    assert client.delete("/v1/admin/tenants/acme", headers=ADMIN).status_code == 204
    assert client.get("/v1/models", headers=tenant).status_code == 401
    assert client.delete("/v1/admin/tenants/acme", headers=ADMIN).status_code == 404
    assert client.post("/v1/admin/tenants/acme/keys", headers=ADMIN).status_code == 404
    import redis

    with redis.Redis.from_url(redis_url) as r:
        assert [k for k in r.keys("*") if b"acme" in k] == []


def test_a_token_on_the_other_kind_of_route_says_which_one_it_takes(
        client: TestClient, tenant: dict[str, str]) -> None:
    """The admin token on a tenant route (a list, a model, the one-round-trip predict) is
    told that the route takes a tenant's API key; a tenant key on an admin route that it
    takes the admin token."""
    new_model(client, tenant)
    for method, path, body in (("GET", "/v1/models", None), ("GET", "/v1/models/m1", None),
                               ("POST", "/v1/models/m1/predict", {"features": [1, 0, 0, 0]})):
        r = client.request(method, path, json=body, headers=ADMIN)
        error = r.json()["error"]
        assert (r.status_code, error["code"]) == (401, "invalid_api_key"), path
        assert "takes a tenant's API key, not the admin token" in error["message"], path
    r = client.get("/v1/models", headers={"Authorization": "Bearer nl.acme.wrong"})
    assert r.json()["error"]["message"] == "unknown or revoked API key"
    r = client.get("/v1/admin/tenants", headers=tenant)
    assert (r.status_code, r.json()["error"]["code"]) == (401, "invalid_admin_token")
    assert "takes the admin token, not a tenant's API key" in r.json()["error"]["message"]
