"""Python client of the noisyloop API: sync and async HTTP, WebSocket sessions, batching.

>>> from noisyloop_client import Client
>>> Client("http://127.0.0.1:8000", "nl_...").base_url
'http://127.0.0.1:8000'

The client is its own distribution, ``noisyloop-client``: it depends on httpx
and websockets only and imports nothing of the service.  The ``fast`` extra
adds orjson (:mod:`noisyloop_client.codec`), the ``numpy`` extra numpy for
:func:`snapshot_arrays`.

* :class:`Client` / :class:`AsyncClient`: every route of ``api.md`` (admin,
  models, snapshots, versions and rollback, sync, predict, rank, feedback,
  noise, confusion), with retries and exponential backoff on 503 and
  connection errors (never on 4xx); error answers raise
  :class:`NoisyloopError` (``status``, ``code``, ``message``, ``field``).
* :class:`Stream` / :class:`AsyncStream`: a WebSocket session with many
  requests in flight (answers come back in order).
* :class:`FeedbackBuffer` / :class:`AsyncFeedbackBuffer`: send feedback in
  batches by size or age.
* :func:`snapshot_arrays`: decode a snapshot's state into numpy arrays
  (imports numpy when called).
"""

from __future__ import annotations

import base64
import io
from typing import Any

from noisyloop_client.buffer import AsyncFeedbackBuffer, FeedbackBuffer
from noisyloop_client.calls import RetryPolicy
from noisyloop_client.errors import ConnectionFailed, NoisyloopError
from noisyloop_client.http import AsyncClient, Client
from noisyloop_client.stream import AsyncStream, Stream
from noisyloop_client.types import Model, Prediction, Ranking, Snapshot

__all__ = [
    "AsyncClient", "AsyncFeedbackBuffer", "AsyncStream", "Client", "ConnectionFailed",
    "FeedbackBuffer", "Model", "NoisyloopError", "Prediction", "Ranking", "RetryPolicy",
    "Snapshot",
    "Stream", "snapshot_arrays",
]


def snapshot_arrays(snapshot: Snapshot) -> dict[str, Any]:
    """The snapshot's state as numpy arrays (each ``data_b64`` is a ``.npy`` file)."""
    import numpy as np

    return {name: np.load(io.BytesIO(base64.b64decode(arr["data_b64"])), allow_pickle=False)
            for name, arr in snapshot["state"].items()}
