"""The switch between the learners' compiled kernels and their pure-numpy paths.

Learners whose batch update is a loop over events (each event's step reads the
state the previous one left) keep two implementations of ``learn_many``: a
pure-numpy one, the reference, and a kernel compiled by numba
(``numba.njit(cache=True)``) that runs the same sequential steps in one pass.
Property tests bind the two (``tests/learners/test_compiled.py``).

The kernels run when numba is installed, numba's own ``NUMBA_DISABLE_JIT`` is
not set (then its functions would run as plain Python, slower than numpy) and
``NOISYLOOP_NUMBA`` is not ``0``; otherwise every learner takes its numpy
path.  Both variables are read once, at import.  A kernel is compiled on its first
call and the machine code is cached beside its module (numba's ``cache=True``;
``NUMBA_CACHE_DIR`` moves it where the package is read-only), so a process
after the first loads it instead of compiling.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Callable
from typing import Any, TypeVar, cast

F = TypeVar("F", bound=Callable[..., Any])

logger = logging.getLogger(__name__)

#: Whether the learners use their compiled kernels (module docstring); tests flip it to run
#: the numpy paths.
ENABLED: bool = (importlib.util.find_spec("numba") is not None
                 and os.environ.get("NUMBA_DISABLE_JIT", "0") in ("", "0")
                 and os.environ.get("NOISYLOOP_NUMBA", "1") != "0")


#: Modules that define kernels (imported by :func:`warm`).
KERNEL_MODULES = ("app.learners.ridge_kernel", "app.learners.bpa_kernel",
                  "app.learners.ridge_actions_kernel")

_KERNELS: list[_Kernel] = []


class _Kernel:
    """A function compiled by ``numba.njit(cache=True)`` on its first call.

    numba (about 0.2 CPU-seconds to import) is imported then, so that a
    process that never learns a batch (an API process) does not pay for it.
    ``example`` gives arguments of the types the learners pass, for :func:`warm`.
    """

    def __init__(self, func: Callable[..., Any], example: Callable[[], tuple[Any, ...]]) -> None:
        self.py_func = func
        self.example = example
        self._compiled: Callable[..., Any] | None = None

    def __call__(self, *args: Any) -> Any:
        if self._compiled is None:
            self._compiled = self._compile()
        return self._compiled(*args)

    def _compile(self) -> Callable[..., Any]:
        """The numba dispatcher, caching its machine code; compiled in memory only (each
        process compiles) when numba finds no writable place for the cache."""
        import numba

        try:
            compiled: Callable[..., Any] = numba.njit(cache=True)(self.py_func)
        except RuntimeError as exc:  # "cannot cache function ...: no locator available"
            logger.warning("kernel %s compiles without a cache: %s", self.py_func.__name__, exc)
            compiled = numba.njit(self.py_func)
        return compiled


def njit(example: Callable[[], tuple[Any, ...]]) -> Callable[[F], F]:
    """Decorator: the function compiled by ``numba.njit(cache=True)`` on its first call
    (:class:`_Kernel`); its Python form stays reachable as ``py_func``.

    ``example()`` returns arguments of the types the learners pass (what
    :func:`warm` calls it with).  A kernel calls no other kernel (numba would
    not see through the lazy wrapper).
    """
    def wrap(func: F) -> F:
        kernel = _Kernel(func, example)
        _KERNELS.append(kernel)
        return cast(F, kernel)
    return wrap


def enabled() -> bool:
    """:data:`ENABLED`, read at each call (so that a test's switch takes effect)."""
    return ENABLED


def warm() -> None:
    """Compile or load every kernel now, on example arguments (a no-op when the kernels are
    off): a worker calls this at start, so that its first batch does not wait for numba's
    import and the cache's load (measured in ``docs/benchmarks.md``)."""
    if not ENABLED:
        return
    for module in KERNEL_MODULES:
        importlib.import_module(module)
    for kernel in _KERNELS:
        kernel(*kernel.example())
