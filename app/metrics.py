"""Prometheus metrics of noisyloop, in one container built on its own registry.

The API and the workers record at their edges (HTTP middleware, predict and
feedback handlers, the trainer after a publish); learners never do.  A fresh
:class:`Metrics` (with a fresh registry) per app keeps tests independent.
Label sets are bounded: ``route`` is the route template, ``tenant``/``model``
exist only for models that exist (their series are removed on delete).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

NAMESPACE = "noisyloop"
CONTENT_TYPE = CONTENT_TYPE_LATEST
_MODEL = ("tenant", "model")


class Metrics:
    """Every series listed in the API contract (prefix ``noisyloop_``)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r, ns = self.registry, NAMESPACE
        self.http_requests = Counter("http_requests", "HTTP requests by route and status",
                                     ("method", "route", "status"), namespace=ns, registry=r)
        self.http_duration = Histogram("http_request_duration_seconds", "HTTP request latency",
                                       ("route",), namespace=ns, registry=r,
                                       buckets=(.001, .0025, .005, .01, .025, .05, .1, .25, .5,
                                                1, 2.5, 5, 10))
        self.predictions = Counter("predictions", "Decisions served", _MODEL,
                                   namespace=ns, registry=r)
        self.predict_requests = Counter(
            "predict_requests", "Predict requests (HTTP and WebSocket) by path: "
            "one_round_trip (cached key and learner, checked by the Lua step that logs) "
            "or regular (key and model read first)", ("path",), namespace=ns, registry=r)
        self.feedback = Counter("feedback", "Feedback events by outcome",
                                (*_MODEL, "outcome"), namespace=ns, registry=r)
        self.events_applied = Counter("events_applied", "Events applied by the trainer",
                                      _MODEL, namespace=ns, registry=r)
        self.events_expired = Counter("events_expired", "Decisions ended by the sweeper",
                                      _MODEL, namespace=ns, registry=r)
        self.trainer_lag = Gauge("trainer_lag_seconds",
                                 "Age of the newest applied event when it was applied",
                                 _MODEL, namespace=ns, registry=r)
        self.model_version = Gauge("model_version", "Latest snapshot version seen", _MODEL,
                                   namespace=ns, registry=r)
        self.noise_rate = Gauge("noise_rate", "Current click-noise rates", (*_MODEL, "kind"),
                                namespace=ns, registry=r)
        self.debiased_reward = Gauge("debiased_reward", "Running mean of h(f) over applied events",
                                     _MODEL, namespace=ns, registry=r)
        self.nrest_runs = Counter("nrest_runs", "NREst runs by outcome", ("outcome",),
                                  namespace=ns, registry=r)
        self.nrest_duration = Histogram("nrest_duration_seconds", "NREst fit time",
                                        namespace=ns, registry=r)

    def forget_model(self, tenant: str, model: str) -> None:
        """Drop the series of a deleted model (keeps label sets bounded)."""
        for metric in (self.predictions, self.events_applied, self.events_expired,
                       self.trainer_lag, self.model_version, self.debiased_reward):
            try:
                metric.remove(tenant, model)
            except KeyError:
                pass
        for outcome in ("accepted", "unknown_event", "duplicate_feedback", "invalid"):
            try:
                self.feedback.remove(tenant, model, outcome)
            except KeyError:
                pass
        for kind in ("rho0", "rho1"):
            try:
                self.noise_rate.remove(tenant, model, kind)
            except KeyError:
                pass

    def render(self) -> bytes:
        """The registry in Prometheus text format."""
        return generate_latest(self.registry)
