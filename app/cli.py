"""The ``noisyloop`` command line: the one composition root of the project.

Each sub-command lives in its own module under :mod:`app.commands` and
exposes ``register(subparsers)``, which adds its parser and sets
``handler`` (a function taking the parsed arguments and returning an exit
code).  Modules are imported lazily, so ``noisyloop replay`` never pays for
importing FastAPI.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

COMMAND_MODULES: tuple[str, ...] = (
    "app.commands.replay",
    "app.commands.serve",
    "app.commands.api",
    "app.commands.admin",
)


def build_parser() -> argparse.ArgumentParser:
    """The full parser with every registered sub-command."""
    parser = argparse.ArgumentParser(
        prog="noisyloop",
        description="Online learning from noisy, delayed, partial feedback.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``noisyloop`` console script."""
    args = build_parser().parse_args(argv)
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
