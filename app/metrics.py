"""Prometheus metrics of noisyloop, in one container built on its own registry.

The API and the workers record at their edges (HTTP middleware, predict and
feedback handlers, the trainer after a publish); learners never do.  A fresh
:class:`Metrics` (with a fresh registry) per app keeps tests independent.
Label sets are bounded: ``route`` is the route template, ``tenant``/``model``
exist only for models that exist (their series are removed on delete).

The series name every tenant, model and challenger, so they are served only
to a caller with a credential (:func:`authorized`): the metrics token
(``NOISYLOOP_METRICS_TOKEN``, what Prometheus is given) or the admin token,
as ``Authorization: Bearer <token>``, on the API's ``/metrics`` and on a
worker's metrics port alike.

The per-request series are counted through :meth:`Metrics.observe_request`
and :meth:`Metrics.count_decisions`, which look each labelled series up once
and keep it: ``labels()`` costs about 2 us a call (a lock, the values checked
and joined into a key), four times what counting on the kept series costs.
"""

from __future__ import annotations

import contextlib
import hmac
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    make_wsgi_app,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST, ThreadingWSGIServer

NAMESPACE = "noisyloop"
CONTENT_TYPE = CONTENT_TYPE_LATEST
_MODEL = ("tenant", "model")
#: The ``stat`` label of the interval gauges.
INTERVAL_STATS = ("estimate", "ci_low", "ci_high")


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
        #: the series of each path (both exported from the start)
        self.predict_path = {path: self.predict_requests.labels(path)
                             for path in ("one_round_trip", "regular")}
        self.rank_requests = Counter(
            "rank_requests", "Rank requests (HTTP and WebSocket; a batch counts once) by path, "
            "as predict_requests", ("path",), namespace=ns, registry=r)
        self.rank_path = {path: self.rank_requests.labels(path)
                          for path in ("one_round_trip", "regular")}
        self.feedback = Counter("feedback", "Feedback events by outcome",
                                (*_MODEL, "outcome"), namespace=ns, registry=r)
        self.limit_reached = Counter(
            "tenant_limit_reached", "Requests refused because the tenant reached one of its "
            "limits (the limit is the setting's name)", ("tenant", "limit"), namespace=ns,
            registry=r)
        self.events_applied = Counter("events_applied", "Events applied by the trainer",
                                      _MODEL, namespace=ns, registry=r)
        self.events_expired = Counter("events_expired", "Decisions ended by the sweeper",
                                      _MODEL, namespace=ns, registry=r)
        self.events_dead_lettered = Counter(
            "events_dead_lettered", "Events the trainer could not apply, moved to the model's "
            "dead letters", _MODEL, namespace=ns, registry=r)
        self.trainer_lag = Gauge("trainer_lag_seconds",
                                 "Age of the newest applied event when it was applied",
                                 _MODEL, namespace=ns, registry=r)
        self.model_version = Gauge("model_version", "Latest snapshot version seen", _MODEL,
                                   namespace=ns, registry=r)
        self.noise_rate = Gauge("noise_rate", "Current click-noise rates", (*_MODEL, "kind"),
                                namespace=ns, registry=r)
        self.debiased_reward = Gauge("debiased_reward",
                                     "Mean click over applied events, noise-corrected",
                                     _MODEL, namespace=ns, registry=r)
        self.online_reward = Gauge(
            "online_reward", "Mean observed click over the applied events of the model's last "
            "quality-series window", _MODEL, namespace=ns, registry=r)
        self.calibrated_reward = Gauge(
            "calibrated_reward", "online_reward noise-corrected with the rates in force (h(f))",
            _MODEL, namespace=ns, registry=r)
        self.noise_interval_width = Gauge(
            "noise_interval_width", "Width of the published noise rates' confidence interval",
            (*_MODEL, "kind"), namespace=ns, registry=r)
        self.noise_insufficient_data = Gauge(
            "noise_insufficient_data",
            "1 while the anchor estimator has not published an estimate (too few events)",
            _MODEL, namespace=ns, registry=r)
        self.noise_estimates = Counter(
            "noise_estimates", "Anchor estimates by outcome (published, insufficient_data, "
            "error)", ("outcome",), namespace=ns, registry=r)
        self.nrest_runs = Counter("nrest_runs", "NREst runs by outcome", ("outcome",),
                                  namespace=ns, registry=r)
        self.nrest_duration = Histogram("nrest_duration_seconds", "NREst fit time",
                                        namespace=ns, registry=r)
        self.champion_value = Gauge(
            "champion_value", "Champion's mean reward (noise-corrected) over the events its "
            "challengers followed: estimate, ci_low, ci_high (95%, the rates' error included), "
            "as GET .../challengers shows them", (*_MODEL, "stat"), namespace=ns, registry=r)
        self.challenger_value = Gauge(
            "challenger_value", "A challenger's estimated value (SNIPS): estimate, ci_low, "
            "ci_high, as champion_value", (*_MODEL, "challenger", "stat"), namespace=ns,
            registry=r)
        self.challenger_vs_champion = Gauge(
            "challenger_vs_champion", "A challenger's estimated value minus the champion's "
            "on the same events: estimate, ci_low, ci_high, as champion_value",
            (*_MODEL, "challenger", "stat"), namespace=ns, registry=r)
        self.challenger_values_unreliable = Gauge(
            "challenger_values_unreliable", "1 while the champion and challenger values rest "
            "on noise rates nobody stands behind, by reason (noise_rates_unreliable; "
            "noise_rates_estimated: an estimate whose error their intervals leave out), as "
            "GET .../challengers flags them; 0 otherwise", (*_MODEL, "reason"), namespace=ns,
            registry=r)
        self.kafka_messages = Counter(
            "kafka_messages", "Feedback messages read from Kafka by outcome: accepted, "
            "duplicate (the event's feedback was accepted already) or dead_lettered",
            ("outcome",), namespace=ns, registry=r)
        self.kafka_dead_letters = Counter(
            "kafka_dead_letters", "Kafka feedback messages sent to the dead-letter topic, by "
            "reason (the error code an HTTP client would have got)", ("reason",),
            namespace=ns, registry=r)
        self.kafka_lag = Gauge(
            "kafka_consumer_lag", "Feedback messages of a partition not yet read by this "
            "consumer group (high watermark minus committed offset)", ("topic", "partition"),
            namespace=ns, registry=r)
        self.kafka_restarts = Counter(
            "kafka_consumer_restarts", "Kafka feedback consumers restarted after an unexpected "
            "error (the batch at hand is read again from the last commit)",
            namespace=ns, registry=r)
        self.trainer_step_failures = Counter(
            "trainer_step_failures", "Trainer steps that raised (the model's events stay "
            "pending and are retried)", namespace=ns, registry=r)
        self.trainer_failing_models = Gauge(
            "trainer_failing_models", "Models whose last trainer step raised", namespace=ns,
            registry=r)
        self.store_restarts = Counter(
            "store_restarts", "Restarts of the embedded redis-server by noisyloop serve after "
            "it exited", namespace=ns, registry=r)
        self.drift_detections = Counter(
            "drift_detections", "Falls of a model's reward its drift detector reported",
            _MODEL, namespace=ns, registry=r)
        self.drift_statistic = Gauge(
            "drift_statistic", "Page-Hinkley statistic of a model's reward (standard "
            "deviations; a detection above the threshold)", _MODEL, namespace=ns, registry=r)
        self.auto_optimizations = Counter(
            "auto_optimizations", "Personalizer auto-optimization runs by outcome (started, "
            "applied: switched to another setting, retained, failed)", ("outcome",),
            namespace=ns, registry=r)
        #: the metrics labelled by model (their first labels are ``tenant``, ``model``)
        self._per_model: tuple[Counter | Gauge, ...] = (
            self.predictions, self.feedback, self.events_applied, self.events_expired,
            self.events_dead_lettered, self.trainer_lag, self.model_version, self.noise_rate,
            self.debiased_reward, self.online_reward, self.calibrated_reward,
            self.noise_interval_width, self.noise_insufficient_data, self.champion_value,
            self.challenger_value, self.challenger_vs_champion,
            self.challenger_values_unreliable, self.drift_detections, self.drift_statistic)
        self._request_series: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}
        self._decision_series: dict[tuple[str, str], tuple[Counter, Gauge]] = {}

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one answered HTTP request and its latency."""
        key = (method, route, status)
        series = self._request_series.get(key)
        if series is None:
            series = self._request_series[key] = (
                self.http_requests.labels(method, route, str(status)),
                self.http_duration.labels(route))
        series[0].inc()
        series[1].observe(seconds)

    def count_decisions(self, tenant: str, model: str, n: int, version: int) -> None:
        """Count ``n`` decisions served by a model from its snapshot ``version``."""
        key = (tenant, model)
        series = self._decision_series.get(key)
        if series is None:
            series = self._decision_series[key] = (self.predictions.labels(tenant, model),
                                                   self.model_version.labels(tenant, model))
        series[0].inc(n)
        series[1].set(version)

    def forget_model(self, tenant: str, model: str) -> None:
        """Drop every series of a deleted model (keeps label sets bounded): each series of
        the registry labelled with its tenant and model, whatever its other labels."""
        self._decision_series.pop((tenant, model), None)
        for metric in self._per_model:
            stale = {tuple(sample.labels.values()) for family in metric.collect()
                     for sample in family.samples
                     if sample.labels.get("tenant") == tenant
                     and sample.labels.get("model") == model}
            for values in stale:
                with contextlib.suppress(KeyError):
                    metric.remove(*values)

    def set_interval(self, gauge: Gauge, labels: tuple[str, ...], interval: Any) -> None:
        """Set the ``estimate``, ``ci_low`` and ``ci_high`` series of ``gauge`` from an
        interval (an object with those attributes); a None value (too few events) removes
        its series, as the API shows null."""
        for stat in INTERVAL_STATS:
            value = getattr(interval, stat)
            if value is not None:
                gauge.labels(*labels, stat).set(value)
            else:
                with contextlib.suppress(KeyError):
                    gauge.remove(*labels, stat)

    def set_reason(self, gauge: Gauge, labels: tuple[str, ...], reason: str | None,
                   reasons: Iterable[str]) -> None:
        """Set the series of ``gauge`` of each of ``reasons`` (its last label): 1 for
        ``reason``, 0 for the others (all exported, so that a flag's absence reads 0)."""
        for each in reasons:
            gauge.labels(*labels, each).set(1 if each == reason else 0)

    def forget_challenger(self, tenant: str, model: str, challenger: str) -> None:
        """Drop the series of a removed or promoted challenger."""
        for gauge in (self.challenger_value, self.challenger_vs_champion):
            for stat in INTERVAL_STATS:
                with contextlib.suppress(KeyError):
                    gauge.remove(tenant, model, challenger, stat)

    def render(self) -> bytes:
        """The registry in Prometheus text format."""
        return generate_latest(self.registry)


def authorized(authorization: str | None, tokens: Iterable[str]) -> bool:
    """Whether ``authorization`` is ``Bearer <t>`` for one of ``tokens`` (constant-time
    compares; no token, no access)."""
    scheme, _, given = (authorization or "").partition(" ")
    if scheme.lower() != "bearer":
        return False
    matches = [hmac.compare_digest(given.strip().encode(), t.encode()) for t in tokens]
    return any(matches)


class _QuietHandler(WSGIRequestHandler):
    """No access log line per scrape."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


def start_metrics_server(registry: CollectorRegistry, port: int,
                         tokens: Sequence[str]) -> WSGIServer:
    """Serve ``registry`` on ``port`` (every address) from a thread, to callers with one of
    ``tokens`` as a Bearer credential (:func:`authorized`); 401 to the others."""
    metrics_app = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if authorized(environ.get("HTTP_AUTHORIZATION"), tokens):
            return metrics_app(environ, start_response)  # type: ignore[no-any-return]
        start_response("401 Unauthorized", [("Content-Type", "application/json"),
                                             ("WWW-Authenticate", "Bearer")])
        return [b'{"error": {"code": "invalid_metrics_token", "message": "the metrics need '
                b'Authorization: Bearer <NOISYLOOP_METRICS_TOKEN>", "field": null}}']

    server = make_server("", port, app, ThreadingWSGIServer, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, daemon=True, name="metrics").start()
    return server
