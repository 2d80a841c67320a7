"""``pip install .`` works alone, and the service runs without the ``lab`` extra or the client.

The server's distribution requires neither the Python client (``clients/python``,
on no package index) nor matplotlib and tqdm (the ``lab`` extra): the service
imports and serves without them, and the commands that need them say what to
install.  Most checks hide those libraries with a meta-path blocker in a
subprocess; the last installs the checkout into a fresh virtual environment
(skipped when pip cannot reach a package index).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import venv
from pathlib import Path

import httpx
import pytest

from app.store.embedded import free_port

ROOT = Path(__file__).resolve().parents[1]
#: What the service must run without: the ``lab`` extra and the client.
OPTIONAL = ("matplotlib", "oxipng", "tqdm", "noisyloop_client")
BLOCKER = f"""\
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {OPTIONAL!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Block())
"""
PIP_TIMEOUT = 900
#: Every check here starts an interpreter that imports the service (a second or more).
pytestmark = pytest.mark.slow


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``code`` after :data:`BLOCKER` in a fresh interpreter (the checkout on the path)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NOISYLOOP_LOG_LEVEL": "WARNING"}
    return subprocess.run([sys.executable, "-c", BLOCKER + code, *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_service_imports_without_lab_or_client() -> None:
    code = """
import app.main, app.commands.serve, app.server.options, workers.worker
from app.cli import build_parser
from app.settings import Settings
app.main.create_app(Settings(redis_url="redis://127.0.0.1:1/0", admin_token="x" * 32))
build_parser()
print(sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED))
""".replace("BLOCKED", repr(OPTIONAL))
    result = _python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize(("argv", "message"), [
    (["replay", "--dataset", "synsep", "--plot", "out.png"],
     "--plot needs matplotlib: pip install 'noisyloop[lab]'"),
    (["log", "export", "--model", "m", "--out", "log.jsonl"],
     "noisyloop log export needs noisyloop_client: pip install ./clients/python"),
    (["log", "import", "--model", "m", "--log", "log.json", "--format", "dsjson"],
     "noisyloop log import needs noisyloop_client: pip install ./clients/python"),
])
def test_command_without_its_extra_says_what_to_install(argv: list[str], message: str) -> None:
    result = _python("from app.cli import main; sys.exit(main(sys.argv[1:]))", *argv)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def _serve_until_ready(argv: list[str], env: dict[str, str], port: int) -> str:
    """Start ``argv`` (a ``serve``), wait for /readyz, stop it with SIGTERM; its stderr."""
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, f"serve exited early: {proc.communicate()[1][-2000:]}"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "serve did not become ready"
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    return err


def test_serve_without_lab_or_client(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NOISYLOOP_LOG_LEVEL": "WARNING"}
    for name in ("REDIS_URL", "NOISYLOOP_REDIS_URL", "NOISYLOOP_ADMIN_TOKEN"):
        env.pop(name, None)
    err = _serve_until_ready(
        [sys.executable, "-c", BLOCKER + "from app.cli import main; sys.exit(main(sys.argv[1:]))",
         "serve", "--port", str(port), "--data-dir", str(tmp_path / "data")], env, port)
    assert "ModuleNotFoundError" not in err


def _run(args: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """``args`` from ``cwd`` without the checkout on the path."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_pip_install_of_the_checkout_alone_serves(tmp_path: Path) -> None:
    """``pip install .`` in a fresh virtual environment: no client, no lab extra, no
    setuptools warning; ``import app.main`` works and ``noisyloop serve`` answers."""
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "*.egg-info", "__pycache__", "data", "tests", "bench",
        "docs", ".*_cache"))
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True, system_site_packages=False)
    python = env_dir / "bin" / "python"
    install = _run([str(python), "-m", "pip", "install", "--no-cache-dir", "."], source,
                   PIP_TIMEOUT)
    if install.returncode != 0:
        probe = _run([str(python), "-m", "pip", "download", "--quiet", "--no-deps", "--dest",
                      str(tmp_path / "probe"), "setuptools"], tmp_path, PIP_TIMEOUT)
        if probe.returncode != 0:
            pytest.skip(f"pip cannot reach a package index: {probe.stderr.strip()[-300:]}")
        pytest.fail(f"pip install . failed:\n{install.stderr[-3000:]}")
    assert "Deprecat" not in install.stdout + install.stderr
    present = _run([str(python), "-c", "import importlib.util as u, app.main; "
                    f"print([m for m in {OPTIONAL!r} if u.find_spec(m)])"], tmp_path, 120)
    assert present.returncode == 0, present.stderr
    assert present.stdout.strip() == "[]"
    port = free_port()
    env = {name: value for name, value in os.environ.items()
           if name not in ("PYTHONPATH", "REDIS_URL", "NOISYLOOP_REDIS_URL",
                           "NOISYLOOP_ADMIN_TOKEN")}
    env["NOISYLOOP_LOG_LEVEL"] = "WARNING"
    _serve_until_ready([str(env_dir / "bin" / "noisyloop"), "serve", "--port", str(port),
                        "--data-dir", str(tmp_path / "data")], env, port)
