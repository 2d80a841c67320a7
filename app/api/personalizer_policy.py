"""Personalizer's learning policy as a view of a noisyloop model's learner configuration.

``GET .../configurations/policy`` answers ``{"name": ..., "arguments": ...}`` where
``arguments`` is the model's learner configuration as JSON (``{"algorithm": ..., "params":
{...}}``).  ``PUT`` takes either form of ``arguments``:

- that JSON: an algorithm of the model's task and the params it changes (the model's
  sizes, ``slots`` and ``n_action_features``, stay as they are);
- a Vowpal Wabbit argument string, translated where noisyloop has the same policy:
  ``--cb_explore_adf`` (candidates with features, as a rank model's) with ``--epsilon E``
  (epsilon-greedy: the best candidate, a share ``E`` spread uniformly; VW's default 0.05
  when no exploration is named) or ``--softmax --lambda L`` (a softmax of the scores at
  temperature ``1 / L``); ``--cb_adf`` plays greedily.  ``--quiet``, ``--dsjson`` and
  ``--json`` only say how VW reads and prints, and are accepted as such.  Every other
  argument (``--power_t``, ``-q``, ``--cb_type``, ``--squarecb``, ``--cover``...) has no
  noisyloop equivalent and is refused, naming it.

The answer adds ``translation``: the learner configuration now in force and the arguments
that only concern VW's input and output.  ``DELETE`` goes back to the model's defaults: the
params a new model of its preset gets.  The model keeps what it learned (its statistics do
not depend on these params); ``reset_model`` starts it afresh.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

import orjson

from app.api.errors import ApiError
from app.api.presets import preset_params
from app.evaluation.personalizer import setting_arguments
from app.learners.config import ModelConfig
from app.learners.registry import algorithms, default_params

#: The name every policy is shown under (the name a ``PUT`` gives is not kept).
POLICY_NAME = "noisyloop"
#: Params that fix the model's shape: a policy does not change them.
SHAPE_PARAMS = ("slots", "n_action_features")
#: Vowpal Wabbit arguments about its input and output only.
IO_ARGUMENTS = ("--quiet", "--dsjson", "--json")
#: Vowpal Wabbit's exploration share of ``--cb_explore_adf`` without ``--epsilon``.
VW_DEFAULT_EPSILON = 0.05


@dataclass(frozen=True)
class Policy:
    """A policy to put in force: the algorithm, the params it sets, the arguments that only
    concern VW's input and output."""

    algorithm: str
    params: dict[str, Any]
    io_only: list[str] = field(default_factory=list)


def policy_view(config: ModelConfig) -> dict[str, Any]:
    """The model's policy in Personalizer's shape."""
    return {"name": POLICY_NAME, "arguments": setting_arguments(config)}


def _invalid(message: str, field_name: str = "arguments") -> ApiError:
    return ApiError(422, "invalid_policy", message, field_name)


def _number(tokens: list[str], at: int, flag: str) -> float:
    if at + 1 >= len(tokens):
        raise _invalid(f"{flag} needs a number")
    try:
        return float(tokens[at + 1])
    except ValueError:
        raise _invalid(f"{flag} needs a number, got {tokens[at + 1]!r:.40}") from None


def from_vowpal_wabbit(arguments: str, algorithm: str) -> Policy:
    """The noisyloop policy of a VW argument string (module docstring); 422 naming the
    first argument without an equivalent.

    >>> from_vowpal_wabbit("--cb_explore_adf --epsilon 0.2 --quiet", "ridge_pl")
    Policy(algorithm='ridge_pl', params={'temperature': 0.0, 'epsilon': 0.2}, io_only=['--quiet'])
    """
    try:
        tokens = shlex.split(arguments)
    except ValueError as exc:
        raise _invalid(f"arguments do not parse: {exc}") from None
    io_only: list[str] = []
    shape = epsilon = lam = None
    softmax = False
    at = 0
    while at < len(tokens):
        token = tokens[at]
        if token in ("--cb_explore_adf", "--cb_adf"):
            shape = token
        elif token == "--epsilon":
            epsilon = _number(tokens, at, token)
            at += 1
        elif token == "--lambda":
            lam = _number(tokens, at, token)
            at += 1
        elif token == "--softmax":
            softmax = True
        elif token in IO_ARGUMENTS:
            io_only.append(token)
        else:
            raise _invalid(f"the Vowpal Wabbit argument {token!r:.40} has no noisyloop "
                           "equivalent")
        at += 1
    if shape is None:
        raise _invalid("a rank model's policy is --cb_explore_adf (or --cb_adf): candidates "
                       "with features")
    if shape == "--cb_adf" and (epsilon is not None or softmax):
        raise _invalid("--cb_adf does not explore: use --cb_explore_adf with --epsilon or "
                       "--softmax")
    if softmax and epsilon is not None:
        raise _invalid("give --epsilon or --softmax, not both")
    if lam is not None and not softmax:
        raise _invalid("--lambda is the temperature of --softmax")
    if softmax:
        lam = 1.0 if lam is None else lam
        if lam <= 0:
            raise _invalid(f"--lambda must be positive, got {lam}")
        return Policy(algorithm, {"temperature": 1.0 / lam, "epsilon": 0.0}, io_only)
    share = 0.0 if shape == "--cb_adf" else VW_DEFAULT_EPSILON if epsilon is None else epsilon
    return Policy(algorithm, {"temperature": 0.0, "epsilon": share}, io_only)


def parse_policy(body: Any, config: ModelConfig) -> Policy:
    """The policy a ``PUT`` body asks for (module docstring); 422 naming what is wrong."""
    if not isinstance(body, dict):
        raise ApiError(422, "invalid_request", "the policy is a JSON object")
    arguments = body.get("arguments")
    if not isinstance(arguments, str):
        raise _invalid("arguments must be a string: a learner configuration as JSON or "
                       "Vowpal Wabbit arguments")
    if not arguments.lstrip().startswith("{"):
        return from_vowpal_wabbit(arguments, config.algorithm)
    try:
        given = orjson.loads(arguments)
    except orjson.JSONDecodeError as exc:
        raise _invalid(f"arguments are not valid JSON: {exc}") from None
    if not isinstance(given, dict) or set(given) - {"algorithm", "params"}:
        raise _invalid('arguments are {"algorithm": ..., "params": {...}}')
    algorithm = given.get("algorithm", config.algorithm)
    if algorithm not in algorithms(config.task):
        raise _invalid(f"{algorithm!r:.40} is no algorithm of task {config.task!r} "
                       f"(one of {', '.join(algorithms(config.task))})",
                       "arguments.algorithm")
    if algorithm != config.algorithm:
        raise _invalid("a policy keeps the model's algorithm: add the other as a challenger "
                       "and promote it", "arguments.algorithm")
    params = given.get("params", {})
    if not isinstance(params, dict):
        raise _invalid("params must be an object", "arguments.params")
    for name in SHAPE_PARAMS:
        if name in params and params[name] != config.params.get(name):
            raise _invalid(f"{name} is the model's shape, not its policy",
                           f"arguments.params.{name}")
    return Policy(algorithm, params)


def default_policy(config: ModelConfig) -> Policy:
    """The params a new model of the same kind and preset starts from."""
    cls = config.learner_class
    params = {**default_params(cls), **cls.service_defaults,
              **preset_params(config.preset, cls.exploration_param)}
    for name in SHAPE_PARAMS:
        params.pop(name, None)
    return Policy(config.algorithm, params)


def with_policy(config: ModelConfig, policy: Policy) -> ModelConfig:
    """``config`` with ``policy`` in force."""
    return config.updated(algorithm=policy.algorithm, params={**config.params, **policy.params})


def policy_answer(config: ModelConfig, policy: Policy) -> dict[str, Any]:
    """The answer to a ``PUT`` or ``DELETE``: the policy now in force and what the request
    was translated into."""
    return {**policy_view(config),
            "translation": {"algorithm": config.algorithm, "params": policy.params,
                            "io_only": policy.io_only}}
