"""``noisyloop evaluate --format dsjson`` equals ``--format vw`` on the same log.

The log is written twice by this test, from the same simulated events: as Decision Service
JSON (Personalizer's layout: context namespaces, ``_multi`` actions with ``_tag``, ``i``,
``j``, ``a``/``p``, ``_skipLearn`` and reward-only lines that VW skips) and as VW ADF text
(this test's own writer, namespaces as VW's JSON parser forms them).  Every estimate of
every policy must agree to 1e-9: they read the same events, so they are the same numbers
up to the order of float sums.  VW's own dsjson files are converted to VW text by
:func:`vw_text` here (written from VW's JSON feature rules, independently of the reader)
and compared the same way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.cli import main
from tests.commands.test_evaluate import run

VW_DATA = Path(__file__).resolve().parents[1] / "data" / "vw"
#: Agreement of the two formats' estimates (the same sums in another order).
TOLERANCE = 1e-9
#: Click probability of each action per user segment.
CLICK = np.array([[0.2, 0.5, 0.8], [0.7, 0.4, 0.1]])
ACTIONS = ("hot", "cold", "iced")


def simulated(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` events logged by an epsilon-greedy policy (action 1 greedy, epsilon 0.6), each
    with its segment, hour, chosen action, propensity and click; every 10th is marked
    ``_skipLearn``."""
    rng = np.random.default_rng(seed)
    events = []
    for t in range(n):
        segment, hour = int(rng.integers(2)), round(float(rng.random()), 6)
        p = np.full(3, 0.2)
        p[1] += 0.4
        a = int(rng.choice(3, p=p))
        events.append({"segment": segment, "hour": hour, "action": a, "p": float(p[a]),
                       "click": bool(rng.random() < CLICK[segment, a]), "skip": t % 10 == 9,
                       "ranking": [a, *(k for k in range(3) if k != a)], "probs": p})
    return events


def dsjson_line(e: dict[str, Any], t: int) -> str:
    """One event as Personalizer exported it."""
    multi = [{"_tag": name, "i": {"constant": 1, "id": name}, "j": [{"kind": name}]}
             for name in ACTIONS]
    line = {"_label_cost": -1.0 if e["click"] else 0.0, "_label_probability": e["p"],
            "_label_Action": e["action"] + 1, "_labelIndex": e["action"],
            "o": [{"v": 1.0 if e["click"] else 0.0, "EventId": f"e{t}"}],
            "Timestamp": f"2024-01-01T00:00:{t % 60:02d}.0000000Z", "Version": "1",
            "EventId": f"e{t}", "a": [k + 1 for k in e["ranking"]],
            "c": {"user": {"segment": f"s{e['segment']}"}, "hour": e["hour"], "_multi": multi},
            "p": [float(e["probs"][k]) for k in e["ranking"]], "VWState": {"m": "N/A"}}
    if e["skip"]:
        line["_skipLearn"] = True
    return json.dumps(line)


def vw_block(e: dict[str, Any]) -> list[str]:
    """The same event as VW ADF text (its namespaces as VW's JSON parser forms them)."""
    cost = -1.0 if e["click"] else 0.0
    lines = [f"shared |user segments{e['segment']} | hour:{e['hour']!r}"]
    for k, name in enumerate(ACTIONS):
        label = f"0:{cost!r}:{e['p']!r} " if k == e["action"] else ""
        lines.append(f"{label}|i constant:1 id{name} |j kind{name}")
    return [*lines, ""]


def write_both(folder: Path, n: int) -> tuple[Path, Path]:
    events = simulated(n)
    dsjson, vw = folder / "log.json", folder / "log.vw"
    lines = []
    for t, e in enumerate(events):
        lines.append(dsjson_line(e, t))
        if t % 7 == 0:  # a reward line without a decision (Decision Service joins them)
            lines.append(json.dumps({"RewardValue": 1.0, "EventId": f"e{t}"}))
    dsjson.write_text("\n".join(lines) + "\n", "utf-8")
    vw.write_text("\n".join(line for e in events if not e["skip"] for line in vw_block(e)),
                  "utf-8")
    return dsjson, vw


def estimates(result: dict[str, Any]) -> np.ndarray:
    """Every number of the three estimators, ``n`` and the effective sample size."""
    values = [result[k][f] for k in ("ips", "snips", "dr") for f in ("value", "ci_low",
                                                                      "ci_high")]
    return np.array([*values, result["n"], result["ess"]], dtype=float)


def both(capsys: pytest.CaptureFixture[str], dsjson: Path, vw: Path, *args: str
         ) -> tuple[dict[str, Any], dict[str, Any]]:
    code_d, from_dsjson = run(capsys, "--log", str(dsjson), "--format", "dsjson",
                              "--bootstrap", "50", *args)
    code_v, from_vw = run(capsys, "--log", str(vw), "--format", "vw", "--bootstrap", "50",
                          *args)
    assert code_d == code_v == 0
    return from_dsjson, from_vw


@pytest.mark.parametrize("policy", ["uniform", "logging", "fixed:2",
                                    'config:{"algorithm": "linucb_diag"}'])
def test_dsjson_equals_its_vw_text(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   policy: str) -> None:
    dsjson, vw = write_both(tmp_path, 400)
    from_dsjson, from_vw = both(capsys, dsjson, vw, "--policy", policy)
    np.testing.assert_allclose(estimates(from_dsjson), estimates(from_vw), rtol=0,
                               atol=TOLERANCE)
    assert from_dsjson.get("split") == from_vw.get("split")
    if "split" not in from_dsjson:
        assert from_dsjson["n"] == 360
        assert from_dsjson["dsjson"]["skipped_learn"] == 40
        assert from_dsjson["dsjson"]["no_decision"] == 58
        assert from_dsjson["dsjson"]["decisions"] == 360


def test_noise_correction_is_the_same(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    dsjson, vw = write_both(tmp_path, 300)
    from_dsjson, from_vw = both(capsys, dsjson, vw, "--policy", "fixed:0", "--rho0", "0.1",
                                "--rho1", "0.2")
    np.testing.assert_allclose(estimates(from_dsjson), estimates(from_vw), rtol=0,
                               atol=TOLERANCE)
    assert from_dsjson["correction"] == from_vw["correction"]


def vw_namespaces(obj: dict[str, Any], namespace: str = " "
                  ) -> list[tuple[str, str, float | None]]:
    """``(namespace, feature, value)`` of a dsjson feature object by VW's JSON rules (value
    None: 1): a string is ``key + value``, a number ``key`` with its value, an object (or a
    list of objects) opens the namespace of its key, ``_`` keys are skipped."""
    out: list[tuple[str, str, float | None]] = []
    for key, value in obj.items():
        if key.startswith("_") or value is None or value is False:
            continue
        if value is True:
            out.append((namespace, key, None))
        elif isinstance(value, str):
            out.append((namespace, key + value, None))
        elif isinstance(value, int | float):
            out.append((namespace, key, float(value)))
        elif isinstance(value, dict):
            out += vw_namespaces(value, key)
        else:
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    out += vw_namespaces(item, key)
                elif isinstance(item, str):
                    out.append((key, item, None))
                else:
                    out.append((key, str(i), float(item)))
    return out


def vw_features(obj: dict[str, Any]) -> str:
    """VW text of a feature object: a ``|namespace`` group per change of namespace (spaces,
    ``:`` and ``|`` in names written as ``_``: injective on these files' names)."""
    text, current = "", None
    for namespace, name, value in vw_namespaces(obj):
        if namespace != current:
            text += " |" + ("" if namespace == " " else namespace.replace(" ", "_"))
            current = namespace
        clean = name.replace(" ", "_").replace("|", "_").replace(":", "_")
        text += f" {clean}" if value is None else f" {clean}:{value!r}"
    return text


def vw_text(path: Path) -> str:
    """A dsjson file of VW's as VW ADF text: a CB line as one example, a CCB line as one
    example per labelled slot (its features shared), every action of ``_multi``."""
    blocks = []
    for raw in path.read_text("utf-8").splitlines():
        line = json.loads(raw)
        c = line["c"]
        slots = c.get("_slots")
        decisions = ([(line["_labelIndex"], line["_label_cost"], line["_label_probability"],
                       {})] if slots is None else
                     [(o["_a"][0], o["_label_cost"], o["_p"][0], slots[k])
                      for k, o in enumerate(line["_outcomes"])])
        for logged, cost, probability, slot in decisions:
            shared = {k: v for k, v in c.items() if k not in ("_multi", "_slots")}
            rows = [f"shared{vw_features({**shared, **slot})}"]
            for k, action in enumerate(c["_multi"]):
                label = f"0:{float(cost)!r}:{float(probability)!r}" if k == logged else ""
                rows.append(f"{label}{vw_features(action) or ' |'}")
            blocks.append("\n".join(rows) + "\n")
    return "\n".join(blocks)


@pytest.mark.parametrize(("name", "policy"), [
    ("dsjson_cb_default_ns.json", "uniform"), ("decisionservice.json", "uniform"),
    ("cb_features_w_zero_vals.dsjson", "uniform"), ("ccb_data.json", "fixed:1"),
    ("ccb_data.json", "logging")])
def test_vw_files_equal_their_vw_text(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      name: str, policy: str) -> None:
    """(A multi-slot log's ``uniform`` is over each slot's candidates, which VW text of CB
    examples cannot say: below.)"""
    converted = tmp_path / "log.vw"
    converted.write_text(vw_text(VW_DATA / name), "utf-8")
    from_dsjson, from_vw = both(capsys, VW_DATA / name, converted, "--policy", policy)
    np.testing.assert_allclose(estimates(from_dsjson), estimates(from_vw), rtol=0,
                               atol=TOLERANCE)


def test_uniform_is_over_each_decisions_candidates(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """IPS of ``uniform`` is the mean of ``r_i / (|C_i| p_i)`` with ``C_i`` the actions event
    i could choose: a CCB slot's (``_inc``, else those no earlier slot took), a line's own
    actions when lines have different numbers of them, less those ``p`` gives 0 (excluded)."""
    from app.sim.dsjson import read_dsjson

    ragged = tmp_path / "ragged.json"
    lines = [{"_label_cost": -1.0, "_label_probability": 0.5, "_labelIndex": 1,
              "c": {"u": {"f": 1.0}, "_multi": [{"a": 1}, {"a": 2}]}},
             {"_label_cost": -1.0, "_label_probability": 0.25, "_labelIndex": 2,
              "c": {"u": {"f": 2.0}, "_multi": [{"a": 1}, {"a": 2}, {"a": 3}]}},
             {"_label_cost": 0.0, "_label_probability": 0.5, "_labelIndex": 0,
              "c": {"u": {"f": 3.0}, "_multi": [{"a": 1}, {"a": 2}, {"a": 3}]}},
             {"_label_cost": -1.0, "_label_probability": 0.5, "_labelIndex": 2,
              "a": [3, 1, 2], "p": [0.5, 0.5, 0.0],  # action 2 excluded
              "c": {"u": {"f": 4.0}, "_multi": [{"a": 1}, {"a": 2}, {"a": 3}]}}]
    ragged.write_text("\n".join(json.dumps(line) for line in lines) + "\n", "utf-8")
    for path in (VW_DATA / "ccb_data.json", VW_DATA / "issue4669.dsjson", ragged):
        decisions = list(read_dsjson(path))
        expected = np.mean([-d.example.cost / (len(d.candidates) * d.example.probability)
                            for d in decisions])
        code, result = run(capsys, "--log", str(path), "--format", "dsjson", "--policy",
                           "uniform", "--bootstrap", "20")
        assert code == 0
        assert result["ips"]["value"] == pytest.approx(expected, abs=TOLERANCE)
    assert len({len(d.candidates) for d in read_dsjson(VW_DATA / "ccb_data.json")}) == 2
    assert [d.candidates for d in read_dsjson(ragged)][2:] == [[0, 1, 2], [0, 2]]


def error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """What ``evaluate`` printed to stderr, having exited with 2."""
    capsys.readouterr()
    assert main(["evaluate", "--no-progress", *args]) == 2
    return capsys.readouterr().err


def test_bad_line_is_an_error_naming_it_or_counted(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = VW_DATA / "ccb_data_parse_error.json"
    assert "ccb_data_parse_error.json:57: line: not JSON" in error(
        capsys, "--log", str(path), "--format", "dsjson", "--policy", "uniform")
    code, result = run(capsys, "--log", str(path), "--format", "dsjson", "--policy", "uniform",
                       "--skip-bad-lines", "--bootstrap", "20")
    assert code == 0 and result["dsjson"]["bad_lines"] == 2
    assert "cb_simple_pdrop1.json:1: pdrop:" in error(
        capsys, "--log", str(VW_DATA / "cb_simple_pdrop1.json"), "--format", "dsjson",
        "--policy", "uniform")
    assert "--skip-bad-lines needs --format dsjson" in error(
        capsys, "--log", str(path), "--format", "vw", "--policy", "uniform", "--skip-bad-lines")


def test_multi_slot_log_gets_each_slot_and_they_add_up(capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    """A CCB log's result holds each slot's estimates ("positions"); IPS is a mean of
    per-event terms, so the slots' values weighted by their events give the pooled value
    (to float rounding)."""
    code, result = run(capsys, "--log", str(VW_DATA / "ccb_data.json"), "--format", "dsjson",
                       "--policy", "fixed:1", "--bootstrap", "20")
    assert code == 0
    slots = result["positions"]
    assert [s["position"] for s in slots] == [0, 1]
    assert sum(s["n"] for s in slots) == result["n"] == 66
    pooled = sum(s["n"] * s["ips"]["value"] for s in slots) / result["n"]
    assert pooled == pytest.approx(result["ips"]["value"], abs=TOLERANCE)
    code, single = run(capsys, "--log", str(VW_DATA / "dsjson_cb_default_ns.json"),
                       "--format", "dsjson", "--policy", "uniform", "--bootstrap", "20")
    assert code == 0 and "positions" not in single


#: A continuous-action log in the format of VW's CATS dsjson test data (written here:
#: tests/data/vw/README.md), its actions played in [185, 23959].
CATS_LOG = VW_DATA / "cats_small.json"


def _cats_arrays() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The labelled, learnable lines' actions, densities and rewards (-cost), read here
    independently of the reader."""
    rows = [json.loads(line) for line in CATS_LOG.read_text().splitlines()
            if line.startswith("{")]
    kept = [r["_label_ca"] for r in rows if "_label_ca" in r and not r.get("_skipLearn")]
    return (np.array([k["action"] for k in kept]), np.array([k["pdf_value"] for k in kept]),
            -np.array([k["cost"] for k in kept]))


@pytest.mark.parametrize("policy", ["logging", "uniform", "fixed:4000", "fixed:12000.5"])
def test_a_cats_log_is_evaluated_by_smoothed_ips_and_snips(
        capsys: pytest.CaptureFixture[str], policy: str) -> None:
    """``_label_ca`` lines (VW's ``--cats`` dsjson) evaluate without error: the smoothed
    estimators' values on the arrays read here (1e-9: the same sums), the skipped lines
    counted, the range given or read from the log."""
    from app.evaluation.smoothed import smoothed_value

    action, pdf, reward = _cats_arrays()
    lo, hi = 185.0, 23959.0
    code, result = run(capsys, "--log", str(CATS_LOG), "--format", "dsjson", "--policy",
                       policy, "--action-range", str(lo), str(hi))
    assert code == 0 and result["n"] == len(action) == 60 and result["kind"] == "cats"
    assert result["dsjson"]["skipped_learn"] == 1 and result["dsjson"]["unlabelled"] == 1
    assert result["dsjson"]["markers"] == 1
    h = (hi - lo) / 32
    # uniform: the window around the middle that spans the range
    centre, width = ((lo + hi) / 2, (hi - lo) / 2) if policy == "uniform" else (
        (float(policy.partition(":")[2]), h) if policy.startswith("fixed:") else (None, h))
    if centre is None:
        want_ips = want_snips = reward.mean()
    else:
        want = smoothed_value(action, pdf, reward, np.full(len(action), centre), (lo, hi),
                              width)
        want_ips, want_snips = want.ips.value, want.snips.value
        assert result["ess"] == pytest.approx(want.ess, rel=TOLERANCE)
    assert result["ips"]["value"] == pytest.approx(want_ips, rel=TOLERANCE)
    assert result["snips"]["value"] == pytest.approx(want_snips, rel=TOLERANCE)
    assert result["ips"]["ci_low"] <= result["ips"]["value"] <= result["ips"]["ci_high"]
    assert result["action_range"] == [lo, hi] and result["bandwidth"] == h


def test_a_cats_log_reads_its_range_from_the_actions_and_refuses_clicks(
        capsys: pytest.CaptureFixture[str]) -> None:
    action, _, _ = _cats_arrays()
    base = ["evaluate", "--log", str(CATS_LOG), "--format", "dsjson", "--policy"]
    assert main([*base, "uniform"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["action_range"] == [action.min(), action.max()]
    assert result["action_range_from"] == "log"
    for extra, option in ((["uniform", "--rho0", "0.1", "--rho1", "0.1"], "--rho0"),
                          (["fixed:99999"], "--policy"),
                          (["fixed:2"], "--policy"),
                          (["uniform", "--action-range", "1000", "2000"], "--action-range")):
        assert main([*base, *extra]) == 2
        assert option in capsys.readouterr().err
    assert main(["evaluate", "--log", str(VW_DATA / "decisionservice.json"), "--format",
                 "dsjson", "--policy", "uniform", "--bandwidth", "2"]) == 2
    assert "--bandwidth" in capsys.readouterr().err
