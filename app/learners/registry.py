"""Which algorithm serves which task, and how a learner is built from config.

Adding an algorithm touches its module and one line of :data:`ALGORITHMS`; a task
defined outside the project brings its own through :func:`register_algorithm` (called
by :func:`app.tasks.register_task` for the algorithms its ``Task`` declares).
Classes are imported lazily so that building one learner does not import
every other (scikit-learn, for one, is only needed by NREst).
"""

from __future__ import annotations

import difflib
import functools
import importlib
import inspect
from collections.abc import Callable
from typing import Any

from app.learners.base import Learner, ParamError

#: (task, algorithm) -> "module:Class".  The first algorithm listed for a task
#: is that task's default; the tasks come in the order of :data:`app.tasks.TASKS`
#: (``tests/tasks/test_registry.py`` checks it).
ALGORITHMS: dict[tuple[str, str], str] = {
    # each task's first algorithm is its default: the one that measures best on the results
    # pages (label: linucb_diag, docs/results/ridge.md; the papers' learners follow it)
    ("label", "linucb_diag"): "app.learners.ridge:LinUCBDiag",
    ("label", "rcine"): "app.learners.rcnbf:RCINE",
    ("label", "rcnbf"): "app.learners.rcnbf:RCNBF",
    ("label", "banditron"): "app.learners.banditron:Banditron",
    ("label", "soba"): "app.learners.soba:SOBA",
    ("label", "bpa"): "app.learners.bpa:BanditPA",
    ("label", "squarecb_diag"): "app.learners.ridge:SquareCBDiag",
    ("label", "linucb"): "app.learners.linucb:LinUCB",
    ("label", "lints_diag"): "app.learners.lints:LinTSDiag",
    ("label", "perceptron"): "app.learners.perceptron:Perceptron",
    ("label_set", "mc_dbf"): "app.learners.mcdbf:MCDBF",
    ("label_set", "mc_slp"): "app.learners.mcdbf:MCSLP",
    ("regression", "ors"): "app.learners.ors:ORS",
    ("regression", "nlms"): "app.learners.ors:NLMS",
    ("noisy_label", "uma"): "app.learners.uma:UMA",
    ("noisy_label", "perceptron"): "app.learners.uma:NoisyLabelPerceptron",
    ("noisy_input", "kernel_ogd"): "app.learners.kernel_ogd:KernelOGD",
    ("rank", "ridge_pl"): "app.learners.rank:RidgeRanker",
    # continuous: ridge_ucb closes more of the pricing world's gap than cats (docs/continuous.md)
    ("continuous", "ridge_ucb"): "app.learners.ridge_actions:RidgeUCB",
    ("continuous", "cats"): "app.learners.cats:CATS",
}

#: Constructor arguments that are not hyper-parameters.
STRUCTURAL_ARGS = ("n_features", "n_classes", "seed")


def register_algorithm(task: str, algorithm: str, target: str) -> None:
    """Add ``algorithm`` for ``task``, implemented by ``target`` ("module:Class"), after
    the algorithms listed (so a task's default stays its first).

    Raises ValueError when ``(task, algorithm)`` is already registered to another class.
    """
    known = ALGORITHMS.setdefault((task, algorithm), target)
    if known != target:
        raise ValueError(f"{task}/{algorithm} is already {known!r}, not {target!r}")


def _tasks() -> list[str]:
    """The tasks some algorithm serves (for the error naming an unknown one)."""
    return list(dict.fromkeys(task for task, _ in ALGORITHMS))


def algorithms(task: str) -> list[str]:
    """The algorithms of ``task``; the first is the default."""
    return [alg for t, alg in ALGORITHMS if t == task]


def did_you_mean(word: str, choices: list[str]) -> str:
    """`` (did you mean 'x'?)`` for the choice closest to a misspelt ``word`` (difflib), or
    "" when none is close.

    >>> did_you_mean("rcnfb", ["rcine", "rcnbf"]), did_you_mean("zzz", ["rcnbf"])
    (" (did you mean 'rcnbf'?)", '')
    """
    close = difflib.get_close_matches(word, choices, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def learner_class(task: str, algorithm: str) -> type[Learner]:
    """The class implementing ``algorithm`` for ``task``.

    Raises :class:`ParamError` for an unknown task or an algorithm that does
    not fit the task.
    """
    served = _tasks()
    if task not in served:
        raise ParamError("task", f"unknown task {task!r}{did_you_mean(task, served)}; "
                                 f"choose one of {served}")
    target = ALGORITHMS.get((task, algorithm))
    if target is None:
        fits = [t for t, alg in ALGORITHMS if alg == algorithm]
        raise ParamError(
            "algorithm",
            f"{algorithm!r} does not fit task {task!r} (it serves {fits}); choose one of "
            f"{algorithms(task)}" if fits else
            f"unknown algorithm {algorithm!r}{did_you_mean(algorithm, algorithms(task))}; "
            f"task {task!r} takes one of {algorithms(task)}",
        )
    module_name, class_name = target.split(":")
    cls: type[Learner] = getattr(importlib.import_module(module_name), class_name)
    return cls


def takes_classes(cls: type[Learner]) -> bool:
    """Whether ``cls`` is built with ``n_classes`` (its constructor takes it).

    >>> [takes_classes(learner_class(*case)) for case in (("label", "rcnbf"), ("rank", "ridge_pl"))]
    [True, False]
    """
    return "n_classes" in inspect.signature(cls.__init__).parameters


def default_params(cls: type[Learner]) -> dict[str, Any]:
    """The hyper-parameters of ``cls`` with their defaults (keyword arguments)."""
    return {
        name: p.default
        for name, p in inspect.signature(cls.__init__).parameters.items()
        if name not in ("self", *STRUCTURAL_ARGS) and p.default is not inspect.Parameter.empty
    }


def hyper_params(learner: Learner) -> dict[str, Any]:
    """The hyper-parameters of a built learner, read back from the attributes of their
    names (the constructor keeps each so), e.g. to ask its class a capability."""
    return {name: getattr(learner, name) for name in _param_names(type(learner))}


@functools.cache
def _param_names(cls: type[Learner]) -> tuple[str, ...]:
    return tuple(default_params(cls))


def _int64(value: Any) -> bool:
    """Whether ``value`` is an integer (not a bool) that a config can store (64 bits)."""
    return isinstance(value, int) and not isinstance(value, bool) and -2**63 <= value < 2**63


#: What a value of each simple annotated type must be (bool is no int nor float).
_SIMPLE_TYPES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "float": ("a number", lambda v: isinstance(v, float) or _int64(v)),
    "int": ("a 64-bit integer", lambda v: _int64(v)),
    "bool": ("true or false", lambda v: isinstance(v, bool)),
    "str": ("a string", lambda v: isinstance(v, str)),
    "None": ("null", lambda v: v is None),
}


def check_param_types(cls: type[Learner], params: dict[str, Any]) -> None:
    """:class:`ParamError` naming ``params.<name>`` for a value that is not of the simple
    types its constructor annotation names (``gamma: float``: a number; ``percentile:
    float | None``: a number or null).  A string is never taken for a number, nor a number
    for a boolean; annotations with other types (sequences) are left to the learner.

    Checked when a model is created, so that no config stores a string for a number.
    """
    signature = inspect.signature(cls.__init__).parameters
    for name, value in params.items():
        annotation = signature[name].annotation if name in signature else ""
        alternatives = [part.strip() for part in str(annotation).split("|")]
        if any(part not in _SIMPLE_TYPES for part in alternatives):
            continue
        if not any(_SIMPLE_TYPES[part][1](value) for part in alternatives):
            wanted = " or ".join(_SIMPLE_TYPES[part][0] for part in alternatives)
            raise ParamError(f"params.{name}", f"must be {wanted}, got {value!r:.80}")


def build(
    task: str,
    algorithm: str,
    n_features: int,
    n_classes: int | None = None,
    params: dict[str, Any] | None = None,
    seed: int | None = None,
) -> Learner:
    """Build and validate a learner from its config.

    Unknown parameter names and out-of-range values raise :class:`ParamError`
    naming ``params.<name>``.
    """
    cls = learner_class(task, algorithm)
    params = dict(params or {})
    known = default_params(cls)
    for name in params:
        if name not in known:
            raise ParamError(f"params.{name}", f"unknown parameter for {algorithm!r}; "
                             f"known: {sorted(known)}")
    kwargs: dict[str, Any] = {"n_features": n_features, "seed": seed, **params}
    if takes_classes(cls):
        kwargs["n_classes"] = n_classes
    try:
        return cls(**kwargs)
    except ParamError as exc:
        if exc.field in known:
            raise ParamError(f"params.{exc.field}", exc.message) from exc
        raise
