"""CPU of reading and writing a model's config as a typed ``ModelConfig``, against the plain
JSON parse and dump that it replaced (the reference, measured in the same run).

A model's config is read on every request (the view), every trainer batch and every
background pass; it is written only when it changes.  Reads go through
``ModelConfig.from_json``, which validates a stored document once and then answers from a
cache keyed by the document's bytes; this measures, per call and as ratios to
``orjson.loads``:

- ``cached``: ``ModelConfig.from_json`` of a document read before (every read but the
  first of each config version),
- ``validate``: ``ModelConfig.of(orjson.loads(raw))`` (a first read, and every write),
- ``write``: ``config.to_json()`` against ``orjson.dumps`` of the dict,
- ``learner_class``: the property (cached per config) against the registry lookup.

    .venv/bin/python bench/bench_model_config.py --out bench/results/model-config.json
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import orjson

from app.bench.results import write_results
from app.learners.config import ModelConfig
from app.learners.registry import learner_class

#: A rank model's config as ``POST /v1/models`` stores it (the largest params of the tasks).
DOCUMENT = {
    "model_id": "m", "task": "rank", "algorithm": "ridge_pl", "n_features": 16,
    "n_classes": None, "params": {"n_action_features": 16, "slots": 1, "ridge": 1.0,
                                  "temperature": 0.03, "epsilon": 0.2, "anchor_share": 0.03,
                                  "position_bias": None, "theta_floor": 0.1,
                                  "score_bands": 20, "half_life": None},
    "feedback": {"wait_seconds": 86400, "on_timeout": "drop"}, "seed": None,
    "uid": "0123456789abcdef", "preset": "personalizer", "max_feature_norm": 1e6,
    "mode": "online", "versions": {"kept": 5, "interval_seconds": 60.0},
    "drift": {"action": "alert"}, "created_at": "2026-01-01T00:00:00+00:00"}


def per_call(fn: Callable[[], Any], calls: int) -> float:
    """Process CPU seconds per call of ``fn`` (best of three runs of ``calls``)."""
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        for _ in range(calls):
            fn()
        best = min(best, (time.process_time() - start) / calls)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    raw = orjson.dumps(DOCUMENT)
    config = ModelConfig.from_json(raw)
    assert config.to_json() == raw  # the document round-trips
    reference = per_call(lambda: orjson.loads(raw), args.calls)
    dumps = per_call(lambda: orjson.dumps(DOCUMENT), args.calls)
    lookup = per_call(lambda: learner_class(DOCUMENT["task"], DOCUMENT["algorithm"]),
                      args.calls)
    times = {
        "cached": per_call(lambda: ModelConfig.from_json(raw), args.calls) / reference,
        "validate": per_call(lambda: ModelConfig.of(orjson.loads(raw)), args.calls) / reference,
        "write": per_call(config.to_json, args.calls) / dumps,
        "learner_class": per_call(lambda: config.learner_class, args.calls) / lookup,
    }
    out = {"calls": args.calls, "orjson_loads_us": reference * 1e6,
           "orjson_dumps_us": dumps * 1e6, "registry_lookup_us": lookup * 1e6,
           "ratios": times}
    for name, ratio in times.items():
        print(f"{name:>14}: {ratio:6.2f} x its reference")
    print(f"(orjson.loads {reference * 1e6:.2f} us, orjson.dumps {dumps * 1e6:.2f} us, "
          f"registry lookup {lookup * 1e6:.2f} us per call)")
    if args.out:
        write_results(args.out, out)


if __name__ == "__main__":
    main()
