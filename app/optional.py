"""Optional dependencies: import one, or say which install brings it.

The service (``noisyloop serve``, ``api``, ``worker``) needs none of them.
The plots of ``noisyloop replay`` and ``evaluate`` need matplotlib and
pyoxipng and the progress bars tqdm (the ``lab`` extra; without tqdm there is no bar); the
commands that call a running service (``log export``, ``replay --service``,
``bench service``) need the Python client, a distribution of its own in
``clients/python``.  A command checks before it starts its work, and
``noisyloop`` prints the :class:`MissingDependency` message.
"""

from __future__ import annotations

import importlib
from types import ModuleType

#: How to install the plotting and progress-bar libraries.
LAB = "pip install 'noisyloop[lab]'"
#: How to install pyarrow (Parquet logs: export, evaluate).
PARQUET = "pip install 'noisyloop[parquet]'"
#: How to install pyspark (``evaluate --engine spark``).
SPARK = "pip install 'noisyloop[spark]'"
#: How to install the Python client from a checkout (it is on no package index).
CLIENT = "pip install ./clients/python (from the noisyloop checkout)"


class MissingDependency(ImportError):
    """An optional dependency is not installed; the message says how to install it."""


def require(module: str, install: str, purpose: str) -> ModuleType:
    """``module`` imported, or :class:`MissingDependency` naming ``purpose`` and ``install``.

    >>> require("json", LAB, "a test").__name__
    'json'
    >>> require("no_such_module_here", LAB, "--plot")
    Traceback (most recent call last):
    ...
    app.optional.MissingDependency: --plot needs no_such_module_here: pip install 'noisyloop[lab]'
    """
    top = module.split(".")[0]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] != top:
            raise  # the module is there but something it imports is not
        raise MissingDependency(f"{purpose} needs {top}: {install}") from None
