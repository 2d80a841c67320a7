"""The client is its own distribution: it installs and runs without numpy or the server.

``noisyloop_client`` imports nothing of ``app`` or ``workers`` and no numpy;
its JSON codec gives the same documents without orjson (the ``fast`` extra);
``pip install ./clients/python`` in a fresh virtual environment runs the
README's client example against the real service; ``app.client`` is a
deprecated alias.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path
from types import ModuleType
from typing import Any

import noisyloop_client
import numpy as np
import pytest
from noisyloop_client import codec

from tests.client.conftest import Service

#: Every test here starts services or processes, or runs long statistics.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CLIENT_DIR = ROOT / "clients" / "python"
#: The README's client section and its first Python block (the example this module runs).
README_EXAMPLE = re.compile(r"^## The Python client\n.*?^```python\n(.*?)^```",
                            re.MULTILINE | re.DOTALL)
PIP_TIMEOUT = 300


def _run(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``args`` run from ``cwd`` (not the checkout, so ``app`` is not on the path)."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_client_imports_neither_the_server_nor_numpy(tmp_path: Path) -> None:
    code = ("import sys, noisyloop_client, noisyloop_client.stream; "
            "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] "
            "in ('app', 'workers', 'numpy', 'fastapi', 'redis'))))")
    result = _run([sys.executable, "-c", code], tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


def _codec_without_orjson(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """A second copy of :mod:`noisyloop_client.codec`, loaded while orjson cannot be imported."""
    monkeypatch.setitem(sys.modules, "orjson", None)
    spec = importlib.util.spec_from_file_location("codec_stdlib", codec.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_codec_without_orjson_writes_the_same_json(monkeypatch: pytest.MonkeyPatch) -> None:
    stdlib = _codec_without_orjson(monkeypatch)
    assert not hasattr(stdlib, "orjson") and hasattr(codec, "orjson")
    body: dict[str, Any] = {
        "instances": np.arange(6, dtype=np.float64).reshape(2, 3) / 4,
        "label": np.int64(2), "click": np.bool_(True), "n": 3, "x": [0.1, -1e-7],
        "features": {"prix": 1.5, "région": None}, "ids": np.arange(3),
    }
    encoded = stdlib.dumps(body)
    assert isinstance(encoded, bytes)
    assert stdlib.loads(encoded) == codec.loads(codec.dumps(body))
    assert stdlib.loads(encoded)["instances"] == [[0.0, 0.25, 0.5], [0.75, 1.0, 1.25]]
    with pytest.raises(TypeError, match="set is not JSON serializable"):
        stdlib.dumps({"x": {1, 2}})
    with pytest.raises(codec.DecodeError):
        stdlib.loads(b"{not json")


def test_app_client_is_a_deprecated_alias() -> None:
    with pytest.warns(DeprecationWarning, match="from noisyloop_client import Client"):
        from app.client import Client
    assert Client is noisyloop_client.Client
    import app.client

    with pytest.raises(AttributeError):
        app.client.calls  # noqa: B018 - only the public names are aliased


def _readme_example(url: str, api_key: str) -> str:
    """The README's client example, pointed at ``url`` with ``api_key``."""
    match = README_EXAMPLE.search((ROOT / "README.md").read_text("utf-8"))
    assert match, "README.md has no ```python block under '## The Python client'"
    code, urls = re.subn(r'"http://127\.0\.0\.1:8000"', repr(url), match.group(1))
    code, keys = re.subn(r'^api_key = "[^"]*"', f"api_key = {api_key!r}", code,
                         flags=re.MULTILINE)
    assert (urls, keys) == (1, 1), "the example no longer names the URL and the key once"
    return code


def _pip_install(python: Path, cwd: Path) -> None:
    """``pip install ./clients/python``; skip when pip cannot reach a package index.

    From a copy without build leftovers: pip builds in the source tree, and a stale
    ``build/`` there could put modules the sources no longer have into the wheel.
    """
    shutil.copytree(CLIENT_DIR, cwd / "clients" / "python",
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    install = _run([str(python), "-m", "pip", "install", "--quiet", "./clients/python"], cwd,
                   PIP_TIMEOUT)
    if install.returncode == 0:
        return
    probe = _run([str(python), "-m", "pip", "download", "--quiet", "--no-deps", "--dest",
                  str(cwd / "probe"), "httpx"], cwd, PIP_TIMEOUT)
    if probe.returncode != 0:
        pytest.skip(f"pip cannot reach a package index: {probe.stderr.strip()[-300:]}")
    pytest.fail(f"pip install ./clients/python failed:\n{install.stderr[-3000:]}")


def test_readme_example_runs_from_a_fresh_venv(service: Service, api_key: str,
                                               tmp_path: Path) -> None:
    """The acceptance check: the client alone (no numpy, no server) against the service."""
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True, system_site_packages=False)
    python = env_dir / "bin" / "python"
    _pip_install(python, tmp_path)
    present = ("import importlib.util as u; "
               "print([m for m in ('numpy', 'app', 'workers', 'orjson') if u.find_spec(m)])")
    missing = _run([str(python), "-c", present], tmp_path)
    assert missing.stdout.strip() == "[]", missing.stdout + missing.stderr

    script = tmp_path / "example.py"
    script.write_text(_readme_example(service.url, api_key), "utf-8")
    result = _run([str(python), str(script)], tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("409 duplicate_feedback"), result.stdout
