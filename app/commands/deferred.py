"""Flags added when a sub-command is used, so that building the command line stays cheap.

Every sub-command's ``register`` runs for any ``noisyloop`` call.  A
sub-command whose flags are derived from something costly to import (the
worker's flags come from its pydantic settings) adds them with
:func:`add_later`: they are added the first time that sub-command parses
its arguments or shows its help, never for another sub-command.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

AddArguments = Callable[[argparse.ArgumentParser], None]


class DeferredArgumentParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` that runs its deferred ``add`` functions before first use."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.deferred: list[AddArguments] = []

    def complete(self) -> None:
        """Add the deferred arguments now (idempotent)."""
        while self.deferred:
            self.deferred.pop(0)(self)

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None,
                         ) -> tuple[argparse.Namespace, list[str]]:
        self.complete()
        return super().parse_known_args(args, namespace)

    def format_usage(self) -> str:
        self.complete()
        return super().format_usage()

    def format_help(self) -> str:
        self.complete()
        return super().format_help()


def add_later(parser: argparse.ArgumentParser, add: AddArguments) -> None:
    """Run ``add(parser)`` when ``parser`` is first used if it can defer, else now."""
    if isinstance(parser, DeferredArgumentParser):
        parser.deferred.append(add)
    else:
        add(parser)
