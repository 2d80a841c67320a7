"""Personalizer's shape of a loop's evaluations: each evaluated policy's ``content.value``
entry (the 2022-09-01-preview shape) and ``policyResults`` entry (the v1.0 shape) from
noisyloop's result, the search set of ``enablePolicyOptimization``, and the
choices made on the results (the ``optimalPolicy`` to report, and auto-optimization's
switch rule).  Shared by the API's evaluations (:mod:`app.api.personalizer_evaluation`)
and the worker's auto-optimization (:mod:`workers.autooptimize`).
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

import orjson

from app.learners.config import ModelConfig

#: noisyloop's policy, Personalizer's name and source of each policy always evaluated.
POLICIES = (("logging", "Online Policy", "Online"), ("uniform", "Random Policy", "Random"))
#: The exploration shares :func:`optimization_set` tries.
OPTIMIZATION_EXPLORATION = (0.02, 0.05, 0.1, 0.2)
#: The statuses of an evaluation whose every policy was evaluated: a manual one's, and an
#: automatic one's after its switch rule ran (Personalizer's names).
SETTLED = ("Succeeded", "OptimalPolicyApplied", "OnlinePolicyRetained")
#: The sources of the policies other than the online and the random one.
OTHER_SOURCES = ("Custom", "OfflineExperimentation")
#: The normal quantile of Personalizer's Gaussian ``confidenceInterval`` (95%).
GAUSSIAN_Z = 1.96


def optimization_set(config: ModelConfig) -> list[tuple[str, dict[str, Any]]]:
    """The learning settings ``enablePolicyOptimization`` evaluates: the model's own with
    each exploration share of :data:`OPTIMIZATION_EXPLORATION` under the param its learner
    declares for it (none when it declares none), each named after it."""
    param = config.learner_class.exploration_param
    if param is None:
        return []
    return [(f"exploration-{share:g}", {"algorithm": config.algorithm,
                                         "params": {**config.params, param: share}})
            for share in OPTIMIZATION_EXPLORATION]


def setting_arguments(config: ModelConfig) -> str:
    """The learning setting of ``config`` as Personalizer's ``arguments``: its algorithm and
    params as JSON."""
    return orjson.dumps({"algorithm": config.algorithm, "params": config.params}).decode()


def evaluation_record(evaluation_id: str, name: str, description: str, start: datetime,
                      end: datetime, created: datetime, kind: str, jobs: dict[str, str],
                      others: list[dict[str, Any]], config: ModelConfig) -> dict[str, Any]:
    """A running evaluation as it is kept (``kind`` its ``evaluationType``, ``Manual`` or
    ``Auto``; ``jobs`` each policy's job by its key, ``others`` the policies of
    :func:`other_policy`, ``config`` the loop's, whose setting is the online policy's)."""
    return {"id": evaluation_id, "name": name, "description": description,
            "startTime": start.isoformat(), "endTime": end.isoformat(),
            "creationTime": created.isoformat(), "evaluationType": kind,
            "status": "Running", "jobs": jobs, "others": others,
            "onlineArguments": setting_arguments(config)}


def other_policy(at: int, name: str, source: str, setting: dict[str, Any]) -> dict[str, Any]:
    """The ``at``-th policy other than the online and the random one (``setting`` its learner
    configuration, ``source`` one of :data:`OTHER_SOURCES`), as an evaluation's record keeps
    it: with its ``arguments`` as answered and the key of its job."""
    return {"name": name, "source": source, "config": setting,
            "arguments": orjson.dumps(setting).decode(), "job": f"policy-{at}"}


def entry(name: str, source: str, arguments: str, result: dict[str, Any],
          end: str) -> dict[str, Any]:
    """One policy's ``content.value`` entry from noisyloop's result: ``summary`` with the
    SNIPS estimate (none when flagged ``insufficientData``) and its 95% interval, the flags
    with their ``reason``, the whole result under ``noisyloop``."""
    snips = result["snips"]
    insufficient = bool(result.get("insufficient_data"))
    summary: dict[str, Any] = {
        "expectedReward": None if insufficient else snips["value"],
        "confidenceInterval": [snips["ci_low"], snips["ci_high"]]}
    point = dict(summary)
    summary.update(flags(result))
    return {"name": name, "arguments": arguments, "policySource": source, "slotId": "",
            "summary": summary, "timeseries": {"data": [{"timeStamp": end, **point}]},
            "noisyloop": result}


def flags(result: dict[str, Any]) -> dict[str, Any]:
    """noisyloop's flags of a result in Personalizer's spelling, with their ``reason``."""
    out: dict[str, Any] = {}
    if result.get("insufficient_data"):
        out["insufficientData"] = True
    if result.get("calibration_unreliable"):
        out["calibrationUnreliable"] = True
    if out:
        out["reason"] = result.get("reason")
    return out


def window(result: dict[str, Any], time_stamp: str, aggregate: str) -> dict[str, Any]:
    """One ``PolicyResultSummary`` of a result: ``ipsEstimatorNumerator`` ``sum_i w_i r_i``
    (``r_i`` the reward the result's ``correction`` names: ``h(f)`` when it corrects click
    noise), ``ipsEstimatorDenominator`` ``n``, ``snipsEstimatorDenominator`` ``sum_i w_i``,
    ``nonZeroProbability`` the events with ``w_i > 0``, ``sumOfSquares``
    ``sum_i (w_i r_i)^2``, ``averageReward`` the IPS value and ``confidenceInterval`` the
    half-width of its Gaussian 95% interval, ``z sqrt((sumOfSquares / n - avg^2) / (n - 1))``
    (None below two events).  A result without sums (kept before they were) gives None."""
    totals = result.get("totals")
    if totals is None:
        sums = dict.fromkeys(("ipsEstimatorNumerator", "ipsEstimatorDenominator",
                              "snipsEstimatorDenominator", "nonZeroProbability",
                              "sumOfSquares", "confidenceInterval", "averageReward"))
        return {"timeStamp": time_stamp, "aggregateTimeWindow": aggregate, **sums}
    n, numerator, squares = result["n"], totals["sum_wr"], totals["sum_wr_squared"]
    average = numerator / n
    half = (GAUSSIAN_Z * math.sqrt(max(squares / n - average * average, 0.0) / (n - 1))
            if n > 1 else None)
    return {"timeStamp": time_stamp, "ipsEstimatorNumerator": numerator,
            "ipsEstimatorDenominator": n, "snipsEstimatorDenominator": totals["sum_w"],
            "aggregateTimeWindow": aggregate, "nonZeroProbability": totals["nonzero_weights"],
            "sumOfSquares": squares, "confidenceInterval": half, "averageReward": average}


def policy_results(record: dict[str, Any], aggregate: str) -> list[dict[str, Any]]:
    """The ``policyResults`` of a settled evaluation ``record`` (its ``content``): per
    policy one ``summary`` window over the whole range (:func:`window`, ``aggregate`` the
    range's ISO 8601 duration) and the same as ``totalSummary``, with the flags and the
    ``correction`` the rewards were corrected by."""
    out = []
    for e in record["content"]["value"]:
        result = e["noisyloop"]
        out.append({"name": e["name"], "arguments": e["arguments"],
                    "policySource": e["policySource"],
                    "summary": [window(result, record["startTime"], aggregate)],
                    "totalSummary": window(result, record["endTime"], aggregate),
                    "correction": result.get("correction"), **flags(result)})
    return out


def policies(record: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """Each evaluated policy of an evaluation's record: its job key, name, source and
    arguments, in the answer's order."""
    out = [(source, name, source, record["onlineArguments"] if source == "Online" else "")
           for _, name, source in POLICIES]
    return out + [(o["job"], o["name"], o["source"], o["arguments"])
                  for o in record.get("others", [])]


def content(record: dict[str, Any], results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The ``content`` of a settled evaluation, ``results`` each job's result by its key."""
    value = [entry(name, source, arguments, results[key], record["endTime"])
             for key, name, source, arguments in policies(record)]
    return {"startTime": record["startTime"], "endTime": record["endTime"],
            "intervalInMinutes": 0, "value": value}


def succeeded(record: dict[str, Any], results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``record`` succeeded with the ``results`` of its jobs (by key) and its
    ``optimalPolicy`` (:func:`optimal_policy`, when there is one)."""
    done = {**record, "status": "Succeeded", "content": content(record, results)}
    best = optimal_policy(done["content"]["value"])
    if best is not None:
        done["optimalPolicy"] = best
    return done


def optimal_policy(value: list[dict[str, Any]]) -> str | None:
    """The name of the custom or searched policy of largest SNIPS value among those whose
    estimate is not flagged ``insufficientData`` (None: none is)."""
    ranked = [e for e in value if e["policySource"] in OTHER_SOURCES
              and e["summary"]["expectedReward"] is not None]
    if not ranked:
        return None
    best: str = max(ranked, key=lambda e: e["summary"]["expectedReward"])["name"]
    return best


def switch_to(value: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Auto-optimization's rule: the searched or custom policy whose (noise-corrected) 95%
    interval lies wholly above the online policy's, the highest lower bound first; None
    when none does (or the online policy's value is missing).  Flagged estimates count with
    their widened intervals, so a flag never makes a switch easier."""
    online = next((e for e in value if e["policySource"] == "Online"), None)
    if online is None:
        return None
    ceiling = online["summary"]["confidenceInterval"][1]
    above = [e for e in value if e["policySource"] in OTHER_SOURCES
             and e["summary"]["confidenceInterval"][0] > ceiling]
    return max(above, key=lambda e: e["summary"]["confidenceInterval"][0]) if above else None
