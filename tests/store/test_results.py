"""The Lua scripts' refusal codes and their names in :class:`app.store.results.ScriptResult`."""

from __future__ import annotations

import re
from importlib import resources

from app.store.results import ScriptResult

_RETURN = re.compile(r"return (-?\d+)\s*-- ScriptResult\.(\w+)")


def test_script_results_lua_comments_name_their_code() -> None:
    named = 0
    for script in resources.files("app.store").joinpath("lua").iterdir():
        source = script.read_text("utf-8")
        for code, name in _RETURN.findall(source):
            assert ScriptResult[name] == int(code), (script.name, code, name)
            named += 1
        bare = re.findall(r"^\s*return -\d+\s*$", source, re.M)
        assert not bare, f"{script.name}: a refusal without its ScriptResult name"
    assert named >= len(ScriptResult)
