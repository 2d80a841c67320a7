"""What the console tests and the screenshot script share: a real ``noisyloop serve`` and a
real headless Chromium.

The browser is the system's Chromium (Debian's ``chromium`` package, which
``.ci/run`` installs), driven by Playwright without a browser download.  The
service runs as its own process (API, trainer and embedded Redis) on a free
port, in a process group of its own, and :func:`run_service` stops it with
every child.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from app.sim.rank import RankSimulator
from tests.serve_process import serve_process

CHROMIUM = os.environ.get("NOISYLOOP_CHROMIUM") or shutil.which("chromium") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
#: Headless, and nothing that reaches out to the network by itself.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]
ADMIN_TOKEN = "console-test-admin-token-0123456789"
#: Shape of the rank models :meth:`Service.rank_stream` feeds (``n_features`` counts the
#: constant 1).
RANK_SHAPE = {"n_features": 4, "n_action_features": 3, "slots": 3}
#: Seconds between two series points of the service's trainer (short: the tests wait for them).
SERIES_INTERVAL = 0.3
#: Seconds after which the service re-estimates the noise rates of a model with new plays
#: (short: each round of a stream can move the estimate).
NREST_INTERVAL = 0.5
#: Params of a label model (rcnbf) whose noise rates are estimated: the initial rates, and
#: a uniform share of 20% (more plays for the estimator's uniform anchor than the default 5%).
NOISY_PARAMS = {"rho0": 0.1, "rho1": 0.2, "gamma": 0.2}
#: Longest wait for an evaluation job to end (it queues behind the service's other jobs).
JOB_SECONDS = 120


@dataclass
class Service:
    """A running ``noisyloop serve``: its base URL and the admin header."""

    base: str
    admin: dict[str, str]

    def tenant(self, tenant_id: str) -> dict[str, str]:
        """Create a tenant; its key's Authorization header."""
        r = httpx.post(f"{self.base}/v1/admin/tenants", json={"tenant_id": tenant_id},
                       headers=self.admin)
        assert r.status_code == 201, r.text
        return {"Authorization": f"Bearer {r.json()['api_key']}"}

    def model(self, auth: dict[str, str], model_id: str, **overrides: Any) -> dict[str, Any]:
        """Create a label model (rcnbf, 4 features, 3 classes unless ``overrides`` say)."""
        body = {"model_id": model_id, "task": "label", "algorithm": "rcnbf", "n_features": 4,
                "n_classes": 3, "seed": 1, **overrides}
        r = httpx.post(f"{self.base}/v1/models", json=body, headers=auth)
        assert r.status_code == 201, r.text
        return dict(r.json())

    def stream(self, auth: dict[str, str], model_id: str, rounds: int, batch: int = 400,
               rho: tuple[float, float] = (0.1, 0.2), seed: int = 0) -> None:
        """A simulated stream: the true label is the argmax of a fixed linear map; the click
        says whether the played label is right, flipped at the noise rates ``rho``.  One
        series point per round (each round is applied, then waits an interval)."""
        rng = np.random.default_rng(seed)
        W = np.random.default_rng(1234).standard_normal((3, 4))
        for _ in range(rounds):
            X = rng.standard_normal((batch, 4))
            r = httpx.post(f"{self.base}/v1/models/{model_id}/predict", headers=auth,
                           json={"instances": X.tolist()}, timeout=30)
            assert r.status_code == 200, r.text
            preds = r.json()["predictions"]
            right = np.array([p["label"] for p in preds]) == np.argmax(X @ W.T, axis=1)
            u = rng.random(batch)
            click = np.where(right, u >= rho[1], u < rho[0])
            self.feed(auth, model_id, [{"event_id": p["event_id"], "click": bool(c)}
                                        for p, c in zip(preds, click, strict=True)])

    def rank_stream(self, auth: dict[str, str], model_id: str, rounds: int,
                    batch: int = 200, seed: int = 0) -> None:
        """A simulated recommender stream (:class:`~app.sim.rank.RankSimulator` with
        :data:`RANK_SHAPE`): each request ranks the simulator's candidates, the clicks follow
        its position-based model with click noise.  One series point per round."""
        sim = RankSimulator(n_features=RANK_SHAPE["n_features"],
                            n_action_features=RANK_SHAPE["n_action_features"],
                            slots=RANK_SHAPE["slots"], n_items=300, n_candidates=10, seed=seed)
        for _ in range(rounds):
            requests = [sim.request() for _ in range(batch)]
            body = {"requests": [
                {"features": q.x.tolist(),
                 "actions": [{"id": str(i), "features": a.tolist()}
                             for i, a in zip(q.ids, q.actions, strict=True)]}
                for q in requests]}
            r = httpx.post(f"{self.base}/v1/models/{model_id}/rank", headers=auth, json=body,
                           timeout=30)
            assert r.status_code == 200, r.text
            events = []
            for q, result in zip(requests, r.json()["results"], strict=True):
                shown = [slot["id"] for slot in result["ranking"]]
                row = {str(i): k for k, i in enumerate(q.ids)}
                clicks = sim.clicks(q, np.array([row[i] for i in shown]))
                events.append({"event_id": result["event_id"],
                               "clicks": [i for i, c in zip(shown, clicks, strict=True) if c]})
            self.feed(auth, model_id, events)

    def learn(self, auth: dict[str, str], model_id: str, rounds: int = 14,
              batch: int = 1000) -> None:
        """A stream long enough for the anchor estimator to publish the noise rates of a
        model made with :data:`NOISY_PARAMS` with its default thresholds (both 95% intervals
        at most 0.1 wide: about 8,000 plays at the rates (0.1, 0.2)), the rounds after that
        each drawing a point with the published interval; returns once the estimator has
        read every play."""
        self.stream(auth, model_id, rounds=rounds, batch=batch)
        self.wait_for_estimate(auth, model_id, rounds * batch)

    def noise(self, auth: dict[str, str], model_id: str) -> dict[str, Any]:
        """``GET .../noise`` of the model."""
        r = httpx.get(f"{self.base}/v1/models/{model_id}/noise", headers=auth, timeout=30)
        assert r.status_code == 200, r.text
        return dict(r.json())

    def wait_for_estimate(self, auth: dict[str, str], model_id: str, plays: int) -> None:
        """Wait until the noise estimator's last run has read ``plays`` plays (it runs in
        the background: until then what a page shows may be replaced)."""
        deadline = time.monotonic() + 30
        while (noise := self.noise(auth, model_id))["n_events"] < plays:
            assert time.monotonic() < deadline, noise
            time.sleep(0.2)

    def wait_for_job(self, auth: dict[str, str], model_id: str, job_id: str | None
                     ) -> dict[str, Any]:
        """The evaluation job ``job_id`` once it has ended (done or failed), waiting as long
        as a loaded machine may need.  A page shows it at its next poll: at most 5 s later
        (``MAX_POLL_MS`` of console.js), well within the page's default wait."""
        assert job_id, "no job id on the page"
        deadline = time.monotonic() + JOB_SECONDS
        while True:
            r = httpx.get(f"{self.base}/v1/models/{model_id}/evaluations/{job_id}",
                          headers=auth, timeout=30)
            assert r.status_code == 200, r.text
            job: dict[str, Any] = r.json()
            if job["status"] not in ("queued", "running"):
                return job
            assert time.monotonic() < deadline, job
            time.sleep(0.2)

    def series(self, auth: dict[str, str], model_id: str, at_least: int = 1
               ) -> list[dict[str, Any]]:
        """The model's series points once it holds ``at_least`` of them.  A model's first
        point closes ``FIRST_POINT_SECONDS`` (1 s) after its first batch and the trainer
        writes it in the background, so a loaded machine may need longer than the
        series interval :meth:`feed` waits."""
        deadline = time.monotonic() + 30
        while True:
            r = httpx.get(f"{self.base}/v1/models/{model_id}/series", headers=auth, timeout=30)
            assert r.status_code == 200, r.text
            points: list[dict[str, Any]] = r.json()["points"]
            if len(points) >= at_least:
                return points
            assert time.monotonic() < deadline, f"{len(points)} series points, not {at_least}"
            time.sleep(0.1)

    def feed(self, auth: dict[str, str], model_id: str, events: list[dict[str, Any]]) -> None:
        """Send ``events`` as feedback, have the trainer apply them, wait a series interval."""
        r = httpx.post(f"{self.base}/v1/models/{model_id}/feedback", headers=auth,
                       json={"events": events}, timeout=30)
        assert r.is_success and r.json()["accepted"] == len(events), r.text
        assert httpx.post(f"{self.base}/v1/models/{model_id}/sync", headers=auth,
                          timeout=30).status_code == 200
        time.sleep(SERIES_INTERVAL)


@contextmanager
def run_service(data_dir: Path) -> Iterator[Service]:
    """``noisyloop serve`` with short series and noise-estimate intervals; stopped with
    SIGTERM (then SIGKILL of its whole process group) on exit."""
    env = {"NOISYLOOP_ADMIN_TOKEN": ADMIN_TOKEN, "NOISYLOOP_LOG_LEVEL": "WARNING",
           "NOISYLOOP_WORKER_SERIES_INTERVAL": str(SERIES_INTERVAL),
           "NOISYLOOP_WORKER_NREST_INTERVAL": str(NREST_INTERVAL),
           "NOISYLOOP_WORKER_FLUSH_INTERVAL": "0.01"}
    with serve_process(data_dir, env) as (base, _):
        yield Service(base, {"Authorization": f"Bearer {ADMIN_TOKEN}"})


@contextmanager
def launch_browser() -> Iterator[Any]:
    """The system's Chromium, headless, through Playwright (the caller checks
    :data:`CHROMIUM` and that Playwright imports)."""
    from playwright.sync_api import sync_playwright

    assert CHROMIUM is not None
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def sign_in(page: Any, base: str, token: str) -> None:
    """Open the console and sign in with ``token``."""
    page.goto(f"{base}/console")
    page.fill("#token", token)
    page.click("#signin-form button[type=submit]")
    page.wait_for_selector("#logout:not([hidden])")
