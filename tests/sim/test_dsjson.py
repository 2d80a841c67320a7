"""The dsjson reader on Vowpal Wabbit's own test files (``tests/data/vw``) and on bad lines."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from app.sim.dsjson import DsjsonCounts, DsjsonError, features, read_dsjson

VW_DATA = Path(__file__).resolve().parents[1] / "data" / "vw"
#: VW's files that hold only well-formed lines, with the decisions each gives.
READABLE = {"decisionservice.json": 3, "dsjson_cb_default_ns.json": 4,
            "no_shared_features.json": 1, "cb_as_ccb.json": 1, "cb_simple_pdrop.json": 1,
            "cb_features_w_zero_vals.dsjson": 2,
            "cb_l_namespace.txt": 1, "issue4669.dsjson": 2, "ccb_data.json": 66,
            "ccb_simple_pdrop.json": 2,
            "b1848_dsjson_parser_regression.txt": 0}


@pytest.mark.parametrize(("name", "decisions"), READABLE.items())
def test_reads_vw_test_files(name: str, decisions: int) -> None:
    counts = DsjsonCounts()
    found = list(read_dsjson(VW_DATA / name, counts))
    assert len(found) == decisions == counts.decisions
    for d in found:
        e = d.example
        assert e.logged is not None and 0 <= e.logged < len(e.actions)
        assert e.probability is not None and 0 < e.probability <= 1
        assert e.logged in d.candidates


def test_personalizer_line_fields() -> None:
    first = next(read_dsjson(VW_DATA / "dsjson_cb_default_ns.json"))
    assert first.example.logged == 3  # _labelIndex
    assert first.example.cost == 0.0 and first.example.probability == pytest.approx(0.05)
    assert first.example.shared == {"timeofdayAfternoon": 1.0, "weatherSunny": 1.0,
                                    "nameCathy": 1.0}
    assert first.example.actions[0] == {"i^constant": 1.0, "i^idCappucino": 1.0,
                                        "j^typehot": 1.0, "j^originkenya": 1.0,
                                        "j^organicyes": 1.0, "j^roastdark": 1.0}
    assert first.event_id == "13118d9b4c114f8485d9dec417e3aefe" and first.slot is None


def test_ccb_slots_take_their_features_and_candidates() -> None:
    slots = list(read_dsjson(VW_DATA / "ccb_data.json"))[:2]
    assert [d.slot for d in slots] == [0, 1]
    assert slots[0].example.logged == 3 and slots[1].example.logged == 0
    assert slots[0].candidates == [0, 1, 2, 3] and slots[1].candidates == [0, 1, 2]
    assert slots[0].example.shared["sj^sizeLarge"] == 1.0
    assert slots[1].example.shared["sj^sizeMedium"] == 1.0
    with_inc = list(read_dsjson(VW_DATA / "issue4669.dsjson"))
    assert [d.candidates for d in with_inc] == [[0, 1], [1]]
    assert [d.example.cost for d in with_inc] == [1.0, 0.0]


def test_skip_learn_markers_and_lines_without_decision_are_counted() -> None:
    counts = DsjsonCounts()
    assert list(read_dsjson(VW_DATA / "b1848_dsjson_parser_regression.txt", counts)) == []
    assert (counts.skipped_learn, counts.no_decision, counts.markers) == (1, 6, 1)


def test_malformed_vw_files_name_line_and_field() -> None:
    with pytest.raises(DsjsonError, match=r"cb_simple_pdrop1.json:1: pdrop: 1.0 outside"):
        list(read_dsjson(VW_DATA / "cb_simple_pdrop1.json"))
    with pytest.raises(DsjsonError, match=r"ccb_data_parse_error.json:57: line: not JSON"):
        list(read_dsjson(VW_DATA / "ccb_data_parse_error.json"))
    counts = DsjsonCounts()
    found = list(read_dsjson(VW_DATA / "ccb_data_parse_error.json", counts, skip_bad=True))
    assert counts.bad_lines == 2 and counts.decisions == len(found) > 0
    assert counts.first_bad is not None and ":57:" in counts.first_bad


CB = {"_label_cost": -1, "_label_probability": 0.5, "_labelIndex": 1,
      "c": {"u": {"f": 1}, "_multi": [{"a": 1}, {"a": 2}]}}


@pytest.mark.parametrize(("change", "field"), [
    ({"_label_cost": "x"}, "_label_cost"),
    ({"_label_probability": 0}, "_label_probability"),
    ({"_labelIndex": 2}, "_labelIndex"),
    ({"c": [1]}, "c"),
    ({"c": {"_multi": {"a": 1}}}, "c._multi"),
    ({"pdrop": -0.1}, "pdrop"),
    ({"a": [2, 1], "p": [0.0, 1.0]}, "p"),
    ({"c": {"_multi": [{"a": 1}], "_slots": [{}]},
      "_outcomes": [{"_label_cost": 0, "_a": [3], "_p": [1]}]}, "_outcomes[0]._a[0]"),
    ({"c": {"_multi": [{"a": 1}], "_slots": [{}]},
      "_outcomes": [{"_label_cost": 0, "_a": [0], "_p": [2]}]}, "_outcomes[0]._p[0]"),
    ({"c": {"_multi": [{"a": 1}], "_slots": [{"_inc": [5]}]}}, "c._slots[0]._inc"),
])
def test_bad_fields_are_named(tmp_path: Path, change: dict[str, object], field: str) -> None:
    path = tmp_path / "log.json"
    path.write_text(json.dumps(CB) + "\n" + json.dumps({**CB, **change}) + "\n", "utf-8")
    with pytest.raises(DsjsonError, match=re.escape(f"log.json:2: {field}: ")):
        list(read_dsjson(path))


def test_pdrop_must_be_the_same_for_every_event(tmp_path: Path) -> None:
    path = tmp_path / "log.json"
    path.write_text(json.dumps({**CB, "pdrop": 0.5}) + "\n" + json.dumps({**CB, "pdrop": 0.2})
                    + "\n", "utf-8")
    with pytest.raises(DsjsonError, match=r"log\.json:2: pdrop: 0\.2 differs"):
        list(read_dsjson(path))


def test_features_follow_vw_naming() -> None:
    assert features({"a": "x", "n": {"b": [1.5, 2], "c": False, "d": None},
                     "j": [{"k": "v"}, {"k": "w"}], "_x": 1}) == {
        "ax": 1.0, "b^0": 1.5, "b^1": 2.0, "j^kv": 1.0, "j^kw": 1.0}


#: Values a fuzzed field takes: every JSON type, out-of-range numbers, deep nesting.
ODD_VALUES: list[object] = [None, True, False, -1, 0, 1, 2.5, 1e308, float("nan"), "x", "",
                            [], [1, "a"], [{"a": 1}], {}, {"a": [None]}, [[[[[1]]]]]]


def _paths(value: object, prefix: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += _paths(item, (*prefix, i))
    return found


def _replaced(value: object, path: tuple[object, ...], new: object) -> object:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {k: _replaced(v, rest, new) if k == head else v for k, v in value.items()}
    assert isinstance(value, list)
    return [_replaced(v, rest, new) if i == head else v for i, v in enumerate(value)]


@pytest.mark.slow
def test_any_field_of_any_type_reads_or_fails_naming_the_line(tmp_path: Path) -> None:
    """Every field of a CB and a CCB line of VW's files, set to each odd value (plus a line
    nested 10,000 deep): the reader yields decisions or raises DsjsonError naming line 1,
    never another exception."""
    sources = [(VW_DATA / "dsjson_cb_default_ns.json").read_text("utf-8").splitlines()[0],
               (VW_DATA / "ccb_data.json").read_text("utf-8").splitlines()[1]]
    path = tmp_path / "fuzz.json"
    tried = 0
    for source in sources:
        line = json.loads(source)
        for field_path in _paths(line)[::2]:
            for value in ODD_VALUES:
                path.write_text(json.dumps(_replaced(line, field_path, value)) + "\n", "utf-8")
                try:
                    list(read_dsjson(path))
                except DsjsonError as exc:
                    assert str(exc).startswith(f"{path}:1: "), exc
                tried += 1
    for deep in ("[" * 10_000 + "]" * 10_000, '{"c": ' * 10_000 + "1" + "}" * 10_000):
        path.write_text(json.dumps(CB) + "\n" + deep + "\n", "utf-8")
        with pytest.raises(DsjsonError, match=r"fuzz\.json:2: line: "):
            list(read_dsjson(path))
    assert tried > 1000
