"""``noisyloop replay --service URL --api-key KEY``: the label / label_set replay through a service.

The same stream as the in-process replay (:func:`app.replay.label.setup`:
data, round order, pre-drawn noisy clicks, hyper-parameters) is sent to a
running noisyloop service with the Python client (:mod:`noisyloop_client`):

1. a new model (``replay-<algorithm>-<seed>-<random>``) is created with the
   run's task, algorithm, hyper-parameters and seed;
2. every ``--feedback-delay`` rounds (capped at the service's batch limit
   per request) are decided by one batch predict with the same weights;
   each round is scored by the *service's* greedy label (the online error
   the papers plot), and its simulated feedback (noisy ``click``, or
   ``label`` for full-information learners) is queued in a
   :class:`~noisyloop_client.FeedbackBuffer`;
3. the buffer is flushed and ``sync`` waits until the trainer has applied
   it, so the next batch is decided by the updated model, as in the
   in-process ``--feedback-delay`` loop;
4. after the last round the final model is read (``version``, ``stats``, ``drift``,
   and for learners that use noise rates the service's published estimates
   as ``noise_estimates``, the last with its interval) and the model is
   deleted.  ``--estimator`` other than the service's default for the learner is
   set on the model (``PUT .../noise``) right after it is created; ``service``
   names the estimator the model ran.

The JSON has the same fields as the in-process replay's, plus ``service``
(URL, model id, final version and counters).  The service draws its own
exploration, so the curve follows the in-process one statistically, not
round by round.
"""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from noisyloop_client import Client, FeedbackBuffer

from app.learners.config import ModelConfig, takes_clicks
from app.learners.registry import learner_class
from app.replay.label import greedy_label, result, setup
from app.replay.result import ReplayResult
from app.sim.feedback import set_contains

#: Most instances per batch predict request (the service's batch limit).
MAX_BATCH = 1000

def run(args: argparse.Namespace, seed: int, progress: Callable[[int], None]) -> ReplayResult:
    """Replay ``args.dataset`` through ``args.algorithm`` on the service at ``args.service``."""
    s = setup(args, seed)
    cls = learner_class(s.task, s.algorithm)
    field, learns_clicks = cls.feedback_fields[0], takes_clicks(cls)
    rounds = len(s.order)
    delay = min(int(args.feedback_delay), MAX_BATCH)
    greedy_err, played_err, clicks = np.zeros(rounds), np.zeros(rounds), np.zeros(rounds)
    model_id = f"replay-{s.algorithm}-{seed}-{uuid.uuid4().hex[:8]}"
    with Client(args.service, args.api_key) as client:
        client.create_model(model_id, s.task, int(s.X.shape[1]), algorithm=s.algorithm,
                            n_classes=s.n_classes, params=s.params, seed=seed)
        try:
            config = ModelConfig.of_learner(s.task, s.algorithm, s.params)
            if s.estimator != config.default_estimator:
                client.put_noise(model_id, estimator=s.estimator)
            if config.one_right_label(None) not in (None, s.one_right_label):
                client.put_noise(model_id, one_right_label=s.one_right_label)
            with FeedbackBuffer(client, model_id, max_events=MAX_BATCH,
                                max_delay=3600.0) as buffer:
                for start in range(0, rounds, delay):
                    stop = min(start + delay, rounds)
                    rows = s.order[start:stop]
                    predictions = client.predict_batch(model_id, s.X[rows])
                    for k, p in enumerate(predictions, start):
                        label = int(s.labels[k])
                        greedy_err[k] = greedy_label(dict(p)) != label
                        played = p["labels"] if "labels" in p else p["label"]
                        right = bool(set_contains(np.asarray(played), np.asarray(label)))
                        played_err[k] = not right
                        click = s.if_right[k] if right else s.if_wrong[k]
                        clicks[k] = click
                        value = bool(click) if learns_clicks else label
                        buffer.add(p["event_id"], **{field: value})
                    buffer.flush()
                    client.sync(model_id, timeout=60)
                    progress(stop - start)
                if buffer.rejected:
                    event, error = buffer.rejected[0]
                    raise ValueError(f"the service refused {len(buffer.rejected)} feedback "
                                     f"events, e.g. {event}: {error}")
            client.sync(model_id, timeout=60)
            model = client.get_model(model_id)
            noise = client.get_noise(model_id) if cls.uses_noise_rates else None
            estimates = None if noise is None else _noise_estimates(noise)
        finally:
            client.delete_model(model_id)
    out = result(args, s.task, s.algorithm, seed, s.params, greedy_err, played_err, clicks,
                 estimates, n_classes=s.n_classes, estimator=s.estimator)
    out.extra["service"] = {"url": args.service, "model_id": model_id,
                            "version": model.get("version"), "stats": model.get("stats"),
                            "drift": model.get("drift"),
                            "estimator": None if noise is None else noise.get("estimator")}
    return out


def _noise_estimates(noise: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The service's published estimates (``GET .../noise``) as the replay's
    ``noise_estimates`` (``t`` = plays or samples they used); the last carries the
    interval."""
    history = noise.get("history") or []
    out = [{"t": h.get("n_samples"), "status": "published", **h} for h in history]
    if out:
        out[-1]["interval"] = noise.get("interval")
    return out
