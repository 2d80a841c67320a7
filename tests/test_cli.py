"""The command line's parser stays cheap to build.

Every sub-command's ``register`` runs for any ``noisyloop`` call, so the
command modules import the service stack (FastAPI, uvicorn, redis-py,
pydantic, httpx, ``app.api``, ``workers``) inside their handlers only.
"""

from __future__ import annotations

import subprocess
import sys

SERVICE_MODULES = ("fastapi", "uvicorn", "starlette", "redis", "pydantic", "httpx",
                   "app.api", "app.main", "app.store", "app.client", "workers")


def test_build_parser_imports_no_service_module() -> None:
    code = ("import sys; from app.cli import build_parser; build_parser(); "
            f"print(' '.join(m for m in {SERVICE_MODULES!r} if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                            text=True, timeout=120)
    assert result.stdout.strip() == ""
