"""Replay data sets through learners with simulated noisy feedback."""

from __future__ import annotations

import argparse


def task_of(args: argparse.Namespace, runner: str) -> str:
    """The task a replay runs: ``args.task`` (the command sets it), else the first task of the
    registry whose runner is the module ``runner`` (for callers that build their own
    arguments, such as the scripts under ``bench/``).

    >>> task_of(argparse.Namespace(task="label_set"), "app.replay.label")
    'label_set'
    >>> task_of(argparse.Namespace(), "app.replay.label")
    'label'
    """
    task = getattr(args, "task", None)
    if task:
        return str(task)
    from app.tasks import TASKS  # the API's schemas: only for a caller that named no task

    return next(name for name, declared in TASKS.items()
                if declared.replay is not None and declared.replay.runner == runner)
