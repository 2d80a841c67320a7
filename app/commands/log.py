"""``noisyloop log export``: download a model's decision log to a JSON Lines or Parquet file
(``noisyloop log import``, the way back from another system's log: :mod:`app.commands.log_import`).

Pages through ``GET /v1/models/{id}/log`` with the Python client
and writes every line: JSON Lines as the service sends them, or Parquet (the
optional ``parquet`` extra, ``pip install 'noisyloop[parquet]'``): a directory
partitioned by day, written as the pages arrive, that ``--resume`` continues
(:mod:`app.commands.log_parquet`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.commands import log_import
from app.commands.arguments import add_client_arguments, error_message
from app.optional import CLIENT, require

if TYPE_CHECKING:
    from noisyloop_client import Client

def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``log`` parser with its ``export`` and ``import`` sub-commands."""
    parser = subparsers.add_parser("log", help="a model's decision log (applied events)",
                                   description=__doc__.split("\n\n")[0] if __doc__ else None)
    actions = parser.add_subparsers(dest="log_command", required=True)
    export = actions.add_parser("export", help="download the log to a file",
                                description=__doc__.split("\n\n")[1] if __doc__ else None)
    add_client_arguments(export)
    export.add_argument("--model", required=True, help="the model id")
    export.add_argument("--out", required=True, metavar="PATH",
                        help="the file to write (jsonl) or the directory (parquet)")
    export.add_argument("--since", help="applied at or after (ISO 8601 or Unix seconds)")
    export.add_argument("--until", help="applied at or before (ISO 8601 or Unix seconds)")
    export.add_argument("--format", choices=("jsonl", "parquet"), default="jsonl",
                        help="jsonl (default): the lines as served; parquet: a directory of "
                             "files per day, DIR/day=YYYY-MM-DD/part-N.parquet (needs pyarrow: "
                             "pip install 'noisyloop[parquet]')")
    export.add_argument("--resume", action="store_true",
                        help="parquet: continue an interrupted export into the same --out "
                             "from where it stopped")
    export.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    export.set_defaults(handler=handle)
    log_import.register(actions)


class ExportError(Exception):
    """pyarrow is missing for ``--format parquet`` (the message says how to install it)."""


def write_jsonl(bodies: Iterator[bytes], out: Path, advance: Callable[[int], None]) -> int:
    """Write the pages as they come; returns the lines written."""
    n = 0
    with open(out, "wb") as f:
        for body in bodies:
            f.write(body)
            lines = body.count(b"\n")
            n += lines
            advance(lines)
    return n


def positioned_pages(client: Client, args: argparse.Namespace, after: str | None
                     ) -> Iterator[tuple[bytes, str | None]]:
    """The log's pages after ``after``, each with the position after it."""
    from noisyloop_client import calls

    pages = calls.LogPages(args.model, args.since, args.until, after=after)
    while (call := pages.next_call()) is not None:
        yield pages.read(client.send(call)), pages.after


def write_parquet(client: Client, args: argparse.Namespace, out: Path,
                  advance: Callable[[int], None]) -> int:
    """Export into the directory ``out`` (resuming with ``--resume``); returns the lines
    written (ExportError when ``out`` holds an earlier export and ``--resume`` is not
    given)."""
    from app.commands.log_parquet import POSITION, resume_position, write_pages

    if (out / POSITION).exists() and not args.resume:
        raise ExportError(f"{out} holds an export: continue it with --resume or choose "
                          "another --out")
    if out.exists() and not out.is_dir():
        raise ExportError(f"--out {out}: --format parquet writes a directory")
    try:
        after, next_part = resume_position(out)
    except ValueError as exc:
        raise ExportError(str(exc)) from None
    return write_pages(positioned_pages(client, args, after), out, next_part, advance)


def parquet_modules() -> tuple[Any, Any]:
    """``pyarrow`` and ``pyarrow.parquet``, or ExportError saying how to install them."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ExportError("--format parquet needs pyarrow: pip install 'noisyloop[parquet]' "
                          "(or pip install pyarrow)") from None
    return pa, pq


def handle(args: argparse.Namespace) -> int:
    """Export the log; 2 on an error (printed), 0 otherwise."""
    require("noisyloop_client", CLIENT, "noisyloop log export")
    from noisyloop_client import Client, NoisyloopError

    from app.replay.output import progress_bar

    out = Path(args.out)
    client = Client(args.url, args.key, timeout=60.0)
    try:
        if args.resume and args.format != "parquet":
            raise ExportError("--resume needs --format parquet")
        if args.format == "parquet":
            parquet_modules()  # fail before downloading anything
        out.parent.mkdir(parents=True, exist_ok=True)
        with progress_bar(None, f"log of {args.model}", unit="event",
                          enabled=False if args.no_progress else None) as advance:
            if args.format == "parquet":
                n = write_parquet(client, args, out, advance)
            else:
                n = write_jsonl(client.log_pages(args.model, since=args.since,
                                                 until=args.until), out, advance)
    except (ExportError, OSError, NoisyloopError) as exc:
        message = error_message(exc, args.url) if isinstance(exc, NoisyloopError) else exc
        print(f"noisyloop log export: error: {message}", file=sys.stderr)
        return 2
    finally:
        client.close()
    print(f"{n} lines written to {out}", file=sys.stderr)
    return 0
