"""The command line: its parser stays cheap to build, and it says what it does.

Every sub-command's ``register`` runs for any ``noisyloop`` call, so the
command modules import the service stack (FastAPI, uvicorn, redis-py,
pydantic, httpx, ``app.api``, ``workers``) inside their handlers only.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import subprocess
import sys
from collections.abc import Iterator

import pytest

from app.cli import build_parser, main
from app.commands.deferred import DeferredArgumentParser

SERVICE_MODULES = ("fastapi", "uvicorn", "starlette", "redis", "pydantic", "httpx",
                   "app.api", "app.main", "app.store", "noisyloop_client", "workers")


def test_build_parser_imports_no_service_module() -> None:
    code = ("import sys; from app.cli import build_parser; build_parser(); "
            f"print(' '.join(m for m in {SERVICE_MODULES!r} if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                            text=True, timeout=120)
    assert result.stdout.strip() == ""


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """``parser`` and every sub-command's parser below it, with its deferred flags."""
    if isinstance(parser, DeferredArgumentParser):
        parser.complete()
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_version_is_the_installed_distributions(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"noisyloop {importlib.metadata.version('noisyloop')}\n"


def test_every_flag_says_what_it_does() -> None:
    """Not only its default: a help text of words before any "(default ...)"."""
    bare = [f"{parser.prog} {'/'.join(action.option_strings)}"
            for parser in _parsers(build_parser()) for action in parser._actions
            if action.option_strings and not (action.help or "").split("(default")[0].strip()]
    assert bare == []


def test_api_help_says_a_redis_url_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    """``noisyloop api`` starts no embedded Redis: its help says so, and so does its refusal."""
    api = next(p for p in _parsers(build_parser()) if p.prog.endswith(" api"))
    help_text = " ".join(api.format_help().split())
    assert "required: this flag or REDIS_URL" in help_text
    assert "embedded Redis of the data directory" not in help_text
    assert "--data-dir" not in help_text  # nothing of the data directory is used
    for name in ("REDIS_URL", "NOISYLOOP_REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SystemExit, match="needs --redis-url or REDIS_URL"):
        main(["api"])
