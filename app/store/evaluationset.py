"""The outcome of a set of queued evaluations (each job by its key): all done, one failed or
expired, or still running (what a Personalizer evaluation, :mod:`app.api.personalizer_evaluation`,
and the worker's auto-optimization, :mod:`workers.autooptimize`, wait on)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from app.store.evaluations import EvaluationStore
from app.store.keys import ModelKeys


@dataclass(frozen=True)
class SetOutcome:
    """``status`` ``done`` (``results``: each job's result by its key), ``failed`` (``why``,
    naming the job's key) or ``running``."""

    status: str
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    why: str = ""


async def set_outcome(store: EvaluationStore, mk: ModelKeys, jobs: dict[str, str],
                      names: dict[str, str]) -> SetOutcome:
    """The outcome of the jobs ``jobs`` (key -> job id), each named ``names[key]`` in
    ``why``."""
    results: dict[str, dict[str, Any]] = {}
    for key, job_id in jobs.items():
        job = await store.get(mk, job_id)
        if job is None:
            return SetOutcome("failed", why=f"the {names[key]} policy's evaluation expired")
        if job["status"] == "failed":
            return SetOutcome("failed", why=f"the {names[key]} policy's evaluation failed: "
                                            f"{job.get('error', '')}")
        if job["status"] != "done":
            return SetOutcome("running")
        results[key] = orjson.loads(job["result"])
    return SetOutcome("done", results)
