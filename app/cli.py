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
import os
import sys
from collections.abc import Sequence

from app.commands.deferred import DeferredArgumentParser
from app.optional import MissingDependency

# One BLAS thread per process: the learners' matrix products are small, and
# OpenBLAS's thread pool makes a batch update up to 70x slower on a busy
# 2-core machine.  Set before any sub-command imports numpy.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

COMMAND_MODULES: tuple[str, ...] = (
    "app.commands.replay",
    "app.commands.evaluate",
    "app.commands.log",
    "app.commands.serve",
    "app.commands.api",
    "app.commands.admin",
    "app.commands.bench",
    "app.commands.worker",
)


def version() -> str:
    """The version of the installed ``noisyloop`` distribution (its metadata)."""
    from importlib import metadata

    try:
        return metadata.version("noisyloop")
    except metadata.PackageNotFoundError:
        return "unknown (not installed: pip install -e .)"


class VersionAction(argparse.Action):
    """``--version``: print :func:`version` and exit.  Unlike argparse's ``version`` action,
    the metadata is read only when asked (about 60 ms, which every command would pay)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 help: str = "print the installed version and exit") -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        print(f"{parser.prog} {version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The full parser with every registered sub-command."""
    parser = argparse.ArgumentParser(
        prog="noisyloop",
        description="Online learning from noisy, delayed, partial feedback.",
    )
    parser.add_argument("--version", action=VersionAction)
    subparsers = parser.add_subparsers(dest="command", required=True,
                                       parser_class=DeferredArgumentParser)
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``noisyloop`` console script; 2 when an optional dependency the
    command needs is missing (the message says how to install it)."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except MissingDependency as exc:
        print(f"noisyloop {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
