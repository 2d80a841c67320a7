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
import os
from collections.abc import Callable
from typing import Any, TypeVar, cast

F = TypeVar("F", bound=Callable[..., Any])

#: Whether the learners use their compiled kernels (module docstring); tests flip it to run
#: the numpy paths.
ENABLED: bool = (importlib.util.find_spec("numba") is not None
                 and os.environ.get("NUMBA_DISABLE_JIT", "0") in ("", "0")
                 and os.environ.get("NOISYLOOP_NUMBA", "1") != "0")


class _Kernel:
    """A function compiled by ``numba.njit(cache=True)`` on its first call.

    numba (about 0.2 CPU-seconds to import) is imported then, so that a
    process that never learns a batch (an API process) does not pay for it.
    """

    def __init__(self, func: Callable[..., Any]) -> None:
        self.py_func = func
        self._compiled: Callable[..., Any] | None = None

    def __call__(self, *args: Any) -> Any:
        if self._compiled is None:
            import numba

            self._compiled = numba.njit(cache=True)(self.py_func)
        return self._compiled(*args)


def njit(func: F) -> F:
    """``func`` compiled by ``numba.njit(cache=True)`` on its first call (:class:`_Kernel`);
    its Python form stays reachable as ``py_func`` (what tests run without numba).

    A kernel calls no other kernel (numba would not see through the lazy wrapper).
    """
    return cast(F, _Kernel(func))


def enabled() -> bool:
    """:data:`ENABLED`, read at each call (so that a test's switch takes effect)."""
    return ENABLED
