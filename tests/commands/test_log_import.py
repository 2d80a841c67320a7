"""``noisyloop log import --format dsjson``: a Personalizer loop warm-started from a logged
history ranks better than a fresh one, through the Personalizer rank route."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import numpy as np
import pytest

from app.cli import main
from tests.client.conftest import Service, admin, api_key, service  # noqa: F401 (fixtures)

#: Every test here starts the service.
pytestmark = pytest.mark.slow

SEGMENTS, N_ACTIONS = 3, 4
#: True reward: 0.8 for the segment's liked action (segment s likes action s + 1), else 0.2.
LIKED, OTHER = 0.8, 0.2
RANDOM = (LIKED + (N_ACTIONS - 1) * OTHER) / N_ACTIONS
ACTIONS = [{"id": f"a{k}", "features": [{"kind": f"k{k}"}]} for k in range(N_ACTIONS)]


def truth(segment: int, action: int) -> float:
    return LIKED if action == segment + 1 else OTHER


def write_log(path: Path, n: int, seed: int = 0) -> None:
    """``n`` decisions logged uniformly at random in Personalizer's dsjson layout (context
    ``user.segment`` and a noise feature, actions with ``_tag``, ``i``, ``j``), Bernoulli
    rewards, plus a ``_skipLearn`` line and a reward line that teach nothing."""
    rng = np.random.default_rng(seed)
    multi = [{"_tag": a["id"], "i": {"constant": 1, "id": a["id"]}, "j": a["features"]}
             for a in ACTIONS]
    lines = []
    for t in range(n):
        segment, a = int(rng.integers(SEGMENTS)), int(rng.integers(N_ACTIONS))
        reward = float(rng.random() < truth(segment, a))
        ranking = [a, *(k for k in range(N_ACTIONS) if k != a)]
        lines.append(json.dumps({
            "_label_cost": -reward, "_label_probability": 1 / N_ACTIONS,
            "_label_Action": a + 1, "_labelIndex": a, "EventId": f"e{t}",
            "Timestamp": "2026-09-30T12:00:00.0000000Z", "a": [k + 1 for k in ranking],
            "c": {"user": {"segment": f"s{segment}", "noise": float(rng.random())},
                  "_multi": multi},
            "p": [1 / N_ACTIONS] * N_ACTIONS, "_skipLearn": t == 0}))
    lines.append(json.dumps({"RewardValue": 1.0, "EventId": "e1"}))
    path.write_text("\n".join(lines) + "\n", "utf-8")


def greedy_value(http: httpx.Client, model: str, contexts: int = 200, seed: int = 1) -> float:
    """The mean true reward of the action a Personalizer rank gives the highest probability,
    over ``contexts`` drawn segments."""
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(contexts):
        segment = int(rng.integers(SEGMENTS))
        r = http.post(f"/v1/models/{model}/personalizer/v1.0/rank", json={
            "contextFeatures": [{"user": {"segment": f"s{segment}",
                                          "noise": float(rng.random())}}],
            "actions": ACTIONS})
        assert r.status_code == 201, r.text
        best = max(r.json()["ranking"], key=lambda e: e["probability"])["id"]
        values.append(truth(segment, int(best[1:])))
    return float(np.mean(values))


def test_a_warm_started_loop_ranks_better_than_a_fresh_one(
        service: Service, api_key: str, tmp_path: Path,  # noqa: F811
        capsys: pytest.CaptureFixture[str]) -> None:
    """After 1,500 uniformly logged decisions the warm loop's greedy choice closes at least
    0.9 of the gap between random (0.35) and the best (0.8); the fresh loop's (all scores
    alike) does not.  The score is the mean *true* reward over 200 drawn contexts: a policy
    right for two segments of three scores a gap share of 0.56 +- 0.044 (one standard
    deviation, sqrt(2/9/200) / 0.45 * 0.6), so 0.9 is 7.7 deviations above it."""
    log = tmp_path / "history.json"
    write_log(log, 1500)
    with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {api_key}"},
                      timeout=60) as http:
        for model in ("warm", "fresh"):
            r = http.post("/v1/models", json={"model_id": model, "preset": "personalizer",
                                              "seed": 0})
            assert r.status_code == 201, r.text
        version = http.get("/v1/models/warm").json()["version"]
        capsys.readouterr()
        code = main(["log", "import", "--url", service.url, "--key", api_key, "--model", "warm",
                     "--log", str(log), "--format", "dsjson"])
        err = capsys.readouterr().err
        assert code == 0, err
        assert "1499 logged decisions learned into warm" in err
        assert "'skipped_learn': 1" in err and "'no_decision': 1" in err
        assert http.get("/v1/models/warm").json()["version"] > version
        warm, fresh = greedy_value(http, "warm"), greedy_value(http, "fresh")
        for model in ("warm", "fresh"):
            (tmp_path / f"{model}.json").write_text(
                http.get(f"/v1/models/{model}/snapshot").text, "utf-8")
    # The warm loop's own policy evaluated on the history (uniform logging, 1,499 events):
    # greedy, it picks the liked action (0.8); IPS weighs a quarter of the events by 4, a
    # standard error of sqrt((4 * 0.8 - 0.64) / 1499) = 0.041, so 0.63 is 4 below 0.8; the
    # fresh loop's greedy first choice is one fixed action, worth 0.2 (no segment's liked
    # action) or 0.2 + 0.6 / 3 = 0.4.
    values = {}
    for model in ("warm", "fresh"):
        for kind in ("model", "model-greedy"):
            capsys.readouterr()
            assert main(["evaluate", "--no-progress", "--log", str(log), "--format", "dsjson",
                         "--policy", f"{kind}:{tmp_path / model}.json",
                         "--bootstrap", "50"]) == 0
            values[model, kind] = json.loads(capsys.readouterr().out)["ips"]["value"]
    print(f"history value: {values}")
    assert values["warm", "model-greedy"] >= 0.63
    assert values["warm", "model"] > values["fresh", "model"] + 0.1
    assert values["fresh", "model-greedy"] < 0.63
    gap = LIKED - RANDOM
    print(f"gap closed: warm {(warm - RANDOM) / gap:.3f}, fresh {(fresh - RANDOM) / gap:.3f}")
    assert (warm - RANDOM) / gap >= 0.9
    assert warm > fresh


def test_bad_lines_and_models_are_refused_naming_them(
        service: Service, api_key: str, tmp_path: Path,  # noqa: F811
        capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "history.json"
    write_log(log, 20)
    lines = log.read_text("utf-8").splitlines()
    bad = json.loads(lines[4])
    bad["_label_cost"] = 2.0  # a reward of -2
    lines[4] = json.dumps(bad)
    lines[7] = lines[7][:-3]  # truncated JSON
    log.write_text("\n".join(lines) + "\n", "utf-8")
    base = ["log", "import", "--url", service.url, "--key", api_key, "--format", "dsjson",
            "--log", str(log)]
    with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {api_key}"},
                      timeout=60) as http:
        r = http.post("/v1/models", json={"model_id": "loop", "preset": "personalizer"})
        assert r.status_code == 201, r.text
        r = http.post("/v1/models", json={"model_id": "lab", "task": "label",
                                          "n_features": 3, "n_classes": 2})
        assert r.status_code == 201, r.text

    def error(*args: str) -> str:
        capsys.readouterr()
        assert main([*base, *args]) == 2
        return capsys.readouterr().err

    assert "line 5: _label_cost: reward -2.0" in error("--model", "loop")
    assert "does not rank candidates" in error("--model", "lab")
    assert "HTTP 404" in error("--model", "missing")
    del lines[4]
    log.write_text("\n".join(lines) + "\n", "utf-8")
    assert "history.json:7: line: not JSON" in error("--model", "loop")
    lines.insert(4, json.dumps(bad))
    log.write_text("\n".join(lines) + "\n", "utf-8")
    capsys.readouterr()
    assert main([*base, "--model", "loop", "--skip-bad-lines"]) == 0
    err = capsys.readouterr().err
    assert "17 logged decisions learned" in err and "'bad_lines': 2" in err


def test_log_import_help_lists_its_format(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["log", "import", "--help"])
    assert "dsjson" in capsys.readouterr().out

