"""The client's evaluate()/evaluation() against the real service (no jobs role runs here,
so the job stays queued)."""

from __future__ import annotations

import pytest
from noisyloop_client import Client, NoisyloopError


def test_evaluate_queues_a_job_and_evaluation_reads_it(client: Client) -> None:
    client.create_model("m", "label", 3, algorithm="rcnbf", n_classes=3, seed=0)
    job = client.evaluate("m", "fixed:1", since="2020-01-01", rho0=0.1, rho1=0.2,
                          bootstrap=10)
    assert job["status"] == "queued"
    assert client.evaluation("m", job["job_id"]) == {"job_id": job["job_id"],
                                                     "status": "queued"}
    with pytest.raises(NoisyloopError) as bad:
        client.evaluate("m", "best")
    assert bad.value.status == 422 and bad.value.field == "policy"
    job = client.evaluate("m", {"algorithm": "linucb_diag", "params": {"alpha": 0.5}},
                          train_fraction=0.3)
    assert job["status"] == "queued"
    with pytest.raises(NoisyloopError) as bad:
        client.evaluate("m", {"algorithm": "perceptron"}, train_fraction=0.3)
    assert bad.value.status == 422 and bad.value.field == "policy.algorithm"
