"""Python client of the noisyloop API: sync and async HTTP, WebSocket sessions, batching.

>>> from app.client import Client
>>> Client("http://127.0.0.1:8000", "nl_...").base_url
'http://127.0.0.1:8000'

The client depends on httpx, orjson and websockets only (nothing else from
``app``), so it can be vendored or published on its own.

* :class:`Client` / :class:`AsyncClient`: every route of ``api.md`` (admin,
  models, snapshots, sync, predict, feedback, noise, confusion), with
  retries and exponential backoff on 503 and connection errors (never on
  4xx); error answers raise :class:`NoisyloopError` (``status``, ``code``,
  ``message``, ``field``).
* :class:`Stream` / :class:`AsyncStream`: a WebSocket session with many
  requests in flight (answers come back in order).
* :class:`FeedbackBuffer` / :class:`AsyncFeedbackBuffer`: send feedback in
  batches by size or age.
* :func:`snapshot_arrays`: decode a snapshot's state into numpy arrays.
"""

from __future__ import annotations

import base64
import io
from typing import Any

from app.client.buffer import AsyncFeedbackBuffer, FeedbackBuffer
from app.client.calls import RetryPolicy
from app.client.errors import ConnectionFailed, NoisyloopError
from app.client.http import AsyncClient, Client
from app.client.stream import AsyncStream, Stream
from app.client.types import Model, Prediction, Snapshot

__all__ = [
    "AsyncClient", "AsyncFeedbackBuffer", "AsyncStream", "Client", "ConnectionFailed",
    "FeedbackBuffer", "Model", "NoisyloopError", "Prediction", "RetryPolicy", "Snapshot",
    "Stream", "snapshot_arrays",
]


def snapshot_arrays(snapshot: Snapshot) -> dict[str, Any]:
    """The snapshot's state as numpy arrays (each ``data_b64`` is a ``.npy`` file)."""
    import numpy as np

    return {name: np.load(io.BytesIO(base64.b64decode(arr["data_b64"])), allow_pickle=False)
            for name, arr in snapshot["state"].items()}
