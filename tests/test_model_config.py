"""A model's config is a :class:`~app.learners.config.ModelConfig`: its stored JSON round-trips
unchanged, a change is a new validated config, and nothing outside its module reads a
config by key.

The type does most of the guarding: ``ModelConfig`` has no ``__getitem__`` nor ``get``, so
``mypy`` (part of ``make lint``) reports ``config["task"]`` or ``config.get("mode")`` on any
value typed ``ModelConfig`` (``[index]``, ``[attr-defined]``).  What the type cannot see is a
config that is handed around as a dict (parsed JSON, a ``dict[str, Any]`` parameter):
:func:`findings` scans every module of ``app/`` and ``workers/`` (with :mod:`ast`) for

- a subscript or ``.get`` of a config field name (``"task"``, ``"algorithm"``, ...) on a
  name or attribute that holds a model config (``config``, ``view.config``, ``current``...),
- ``learner_class(x.task, x.algorithm)`` (``x.learner_class`` says it),
- a parameter holding a model config annotated as a dict or mapping,

and :func:`test_the_scan_catches_each_kind_of_access` shows each rule catching its case.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from pydantic import ValidationError

from app.learners.config import ModelConfig

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("app", "workers")
#: The module that defines the config: the only one that may read its document by key.
HOME = Path("app/learners/config.py")
#: The keys of a model config's document.
FIELDS = frozenset(ModelConfig.model_fields)
#: Names (or attribute names) that hold a model config in the service's code.
HOLDERS = frozenset({"config", "current", "new", "cfg", "c", "restored", "learner_config",
                     "new_config", "model_config"})
#: Parameter names that hold a model config (besides any ending in ``config``).
PARAMETERS = frozenset({"config", "current", "new"})
#: Functions whose ``config`` is not a model config, each with what it is.
NOT_MODEL_CONFIGS = {
    ("app/evaluation/training.py", "check_config"):
        "an evaluation request's policy configuration, {algorithm, params}",
}
_DICTS = ("dict", "Mapping", "MutableMapping")


def _holder(node: ast.expr) -> str | None:
    """The config name ``node`` reads (``config``, ``view.config``), or None."""
    name = (node.id if isinstance(node, ast.Name)
            else node.attr if isinstance(node, ast.Attribute) else None)
    return name if name in HOLDERS else None


def _key(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _is_dict_annotation(node: ast.expr | None) -> bool:
    """Whether an annotation names a dict or mapping (``dict[str, Any]``, ``Mapping``...)."""
    if node is None:
        return False
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a string annotation
        return node.value.split("[")[0].split(".")[-1] in _DICTS
    target = node.value if isinstance(node, ast.Subscript) else node
    name = (target.id if isinstance(target, ast.Name)
            else target.attr if isinstance(target, ast.Attribute) else "")
    return name in _DICTS


def _functions(tree: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    """``(function name, node)`` for every node, the function being the innermost one."""
    def walk(node: ast.AST, owner: str) -> Iterator[tuple[str, ast.AST]]:
        for child in ast.iter_child_nodes(node):
            inner = (child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
                     else owner)
            yield inner, child
            yield from walk(child, inner)
    yield from walk(tree, "")


def _by_key(node: ast.AST) -> bool:
    """``config["task"]`` or ``view.config.get("mode")``: a field read by key."""
    if isinstance(node, ast.Subscript):
        return bool(_holder(node.value)) and _key(node.slice) in FIELDS
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get" and bool(_holder(node.func.value)) and bool(node.args)
            and _key(node.args[0]) in FIELDS)


def _class_lookup(node: ast.AST) -> bool:
    """``learner_class(config.task, config.algorithm)``."""
    if not (isinstance(node, ast.Call) and len(node.args) == 2):
        return False
    name = (node.func.id if isinstance(node.func, ast.Name)
            else node.func.attr if isinstance(node.func, ast.Attribute) else "")
    return name == "learner_class" and all(
        isinstance(arg, ast.Attribute) and _holder(arg.value) and arg.attr == attr
        for arg, attr in zip(node.args, ("task", "algorithm"), strict=True))


def _dict_parameter(node: ast.AST) -> bool:
    """A parameter holding a model config, annotated as a dict or mapping."""
    return (isinstance(node, ast.arg)
            and (node.arg in PARAMETERS or node.arg.endswith("config"))
            and _is_dict_annotation(node.annotation))


def findings(source: str, path: str) -> list[str]:
    """Each string-key access of a model config in ``source`` (the text of ``path``), as
    ``path:line: what``."""
    out = []
    for function, node in _functions(ast.parse(source)):
        if (path, function) in NOT_MODEL_CONFIGS:
            continue
        where = f"{path}:{getattr(node, 'lineno', 0)}"
        if _by_key(node):
            out.append(f"{where}: {ast.unparse(node)} (use the attribute)")
        elif _class_lookup(node):
            out.append(f"{where}: {ast.unparse(node)} (use .learner_class)")
        elif isinstance(node, ast.arg) and _dict_parameter(node):
            annotation = ast.unparse(node.annotation) if node.annotation else ""
            out.append(f"{where}: parameter {node.arg}: {annotation} (a model config is a "
                       "ModelConfig)")
    return out


def _modules() -> Iterator[Path]:
    for package in PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))


def test_no_string_key_access_to_a_model_config_outside_its_module() -> None:
    scanned, found = 0, []
    for path in _modules():
        relative = path.relative_to(ROOT)
        if relative == HOME:
            continue
        scanned += 1
        found += findings(path.read_text(encoding="utf-8"), relative.as_posix())
    assert scanned > 100  # the scan ran over the tree
    assert found == []


@pytest.mark.parametrize("source, expected", [
    ('config["task"]', 'config["task"]'),
    ('view.config["feedback"]["wait_seconds"]', "view.config['feedback']"),
    ('current.get("mode", "online")', "current.get('mode', 'online')"),
    ("learner_class(view.config.task, view.config.algorithm)", ".learner_class"),
    ("def f(new_config: dict[str, Any]) -> None: ...", "parameter new_config"),
    ("def f(config: dict[str, Any]) -> None: ...", "parameter config: dict[str, Any]"),
    ("def f(config: 'Mapping[str, Any]') -> None: ...", "parameter config"),
])
def test_the_scan_catches_each_kind_of_access(source: str, expected: str) -> None:
    found = findings(source, "app/x.py")
    assert len(found) == 1 and expected.replace("'", '"') in found[0].replace("'", '"')


@pytest.mark.parametrize("source", [
    'request["task"]',  # not a config
    'ctx.config.nrest_buffer',
    'config["auto-aof-rewrite-percentage"]',  # Redis's config: not a field name
    "def f(config: ModelConfig) -> None: ...",
    "def f(cfg: dict[str, Any], stored: Mapping[str, Any]) -> None: ...",
    "learner_class(setup.task, setup.algorithm)",
])
def test_the_scan_passes_what_is_not_a_model_config_by_key(source: str) -> None:
    assert findings(source, "app/x.py") == []


def test_the_exempt_function_exists() -> None:
    """An exemption names a function that is there (a renamed one would exempt nothing)."""
    for path, function in NOT_MODEL_CONFIGS:
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
        assert any(isinstance(n, ast.FunctionDef) and n.name == function
                   for n in ast.walk(tree)), (path, function)


#: A config as ``POST /v1/models`` writes it (every key, in the order it is written).
CREATED = {
    "model_id": "m", "task": "label", "algorithm": "rcnbf", "n_features": 4, "n_classes": 3,
    "params": {"gamma": 0.1, "rho0": 0.1, "rho1": 0.2},
    "feedback": {"wait_seconds": 60, "on_timeout": "drop"}, "seed": None, "uid": "0a1b",
    "preset": "personalizer",
    "label_budget": {"budget": 2.0, "strategy": "auto", "a": 1.0, "horizon": None},
    "max_feature_norm": 100.0, "mode": "online", "versions": {"kept": 5,
                                                              "interval_seconds": 60.0},
    "drift": {"action": "alert"}, "created_at": "2026-01-01T00:00:00Z"}
#: An older model's config: no mode, versions, drift nor bound, and a key no longer known.
OLDER = {"model_id": "m", "task": "label", "algorithm": "rcnbf", "n_features": 4,
         "n_classes": 3, "params": {"gamma": 0.1}, "feedback": {"wait_seconds": 60},
         "seed": 3, "uid": "0a1b", "created_at": "2020-01-01T00:00:00Z", "retired": 1}


@pytest.mark.parametrize("document", [CREATED, OLDER])
def test_the_stored_json_round_trips_unchanged(document: dict) -> None:
    raw = orjson.dumps(document)
    config = ModelConfig.from_json(raw)
    assert config.to_json() == raw
    assert ModelConfig.from_json(config.to_json()) == config


def test_defaults_apply_to_keys_an_older_config_lacks() -> None:
    config = ModelConfig.of(OLDER)
    assert (config.mode, config.feedback.on_timeout, config.max_feature_norm,
            config.versions.kept, config.drift.action, config.label_budget,
            config.explain_scores) == ("online", "drop", None, None, None, None, False)


def test_a_change_is_a_new_validated_config_with_the_stored_keys_in_place() -> None:
    config = ModelConfig.of(OLDER)
    changed = config.updated(mode="apprentice", params={"gamma": 0.2})
    assert config.mode == "online" and config.params == {"gamma": 0.1}  # unchanged
    assert changed.to_json() == orjson.dumps({**OLDER, "params": {"gamma": 0.2},
                                              "mode": "apprentice"})
    with pytest.raises(ValidationError):
        config.updated(n_features="four")
    with pytest.raises(ValidationError):
        config.model_id = "other"  # type: ignore[misc]  # frozen


def test_the_learners_declarations_are_attributes() -> None:
    """The questions the service asks of a model, answered by its learner class."""
    label = ModelConfig.of(CREATED)
    rank = ModelConfig.of_learner("rank", "ridge_pl", {})
    assert label.learner_class.__name__ == "RCNBF" and label.takes_clicks
    assert label.keeps_anchors and not label.logs_placements and label.estimates_anchors
    assert label.default_estimator == "anchor"
    assert label.usable_estimators == ("anchor", "fixed")  # rcnbf keeps no NREst samples
    assert ModelConfig.of_learner("label", "rcine", {}).usable_estimators == (
        "anchor", "nrest", "fixed")
    assert label.estimates_over("estimated") and not label.estimates_over("configured")
    assert label.initial_noise_rates == (0.1, 0.2)
    assert label.budget_seed == int("0a1b", 16) and label.class_count == 3
    assert rank.logs_placements and rank.usable_estimators == ("anchor", "fixed")
    with pytest.raises(ValueError):
        _ = rank.class_count
