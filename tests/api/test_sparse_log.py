"""A context stored sparse stays sparse in the decision log's lines (the page, hence the
exports and the Kafka decisions topic, which write the same records)."""

from __future__ import annotations

import orjson

from tests.api.conftest import TestClient, new_model, post_feedback

#: The acceptance case's width: one non-zero of 100,000 features is stored in 1,616 bytes.
WIDE = 100_000


def test_a_sparse_context_is_a_sparse_line_and_a_dense_one_a_list(
        client: TestClient, tenant: dict[str, str]) -> None:
    new_model(client, tenant, n_features=WIDE)
    new_model(client, tenant, model_id="narrow")
    played = []
    for i in range(5):
        r = client.post("/v1/models/m1/predict", headers=tenant,
                        json={"features": {"indices": [7 * i], "values": [0.5 + i]}})
        assert r.status_code == 200, r.text
        played.append(r.json()["event_id"])
    events = [{"event_id": eid, "click": True} for eid in played]
    assert post_feedback(client, tenant, {"events": events}).status_code == 202
    dense = client.post("/v1/models/narrow/predict", headers=tenant,
                        json={"features": [0.0, 1.5, 0.0, 2.0]}).json()
    assert post_feedback(client, tenant, {"event_id": dense["event_id"], "click": False},
                         model="narrow").status_code == 202
    for model in ("m1", "narrow"):
        assert client.post(f"/v1/models/{model}/sync", headers=tenant).status_code == 200
    r = client.get("/v1/models/m1/log", headers=tenant)
    assert r.status_code == 200, r.text
    lines = [orjson.loads(line) for line in r.content.splitlines()]
    assert sorted(line["event_id"] for line in lines) == sorted(played)
    for line in lines:
        i = played.index(line["event_id"])
        assert line["features"] == {"size": WIDE, "indices": [7 * i], "values": [0.5 + i]}
    # a dense line took 800 KB; the sparse one is a few hundred bytes
    assert max(map(len, r.content.splitlines())) < 1000
    narrow = client.get("/v1/models/narrow/log", headers=tenant).content
    assert orjson.loads(narrow)["features"] == [0.0, 1.5, 0.0, 2.0]
