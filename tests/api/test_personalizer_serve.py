"""The acceptance run of Personalizer's SDKs against ``noisyloop serve`` itself: the
process ``make serve`` runs (its embedded Redis, its in-process workers, every setting at
its default), started here on a free port and a temporary data directory and stopped with
every child it started."""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from azure.cognitiveservices.personalizer import PersonalizerClient as OldClient
from azure.cognitiveservices.personalizer.models import RankableAction
from azure.cognitiveservices.personalizer.models import RankRequest as OldRankRequest
from msrest.authentication import CognitiveServicesCredentials

from tests import processes
from tests.api.test_personalizer import (
    ACTIONS,
    ADMIN_TOKEN,
    CONTEXT,
    Service,
    _admin,
    _client,
    _loop,
    gap_closed,
    world_players,
)
from tests.serve_process import serve_process

pytestmark = pytest.mark.slow

#: Events of the acceptance world: 2,800 learned from, then 200 scored (3,000 in all).
LEARN_EVENTS = 2800
#: The issue's acceptance floor: the greedy choice closes 0.6 of the random-to-best gap.
#: The scored value has no noise of its own (the scored contexts take the segments in
#: turn, :func:`~tests.api.test_personalizer.gap_closed`): a policy right for two
#: segments of three scores 0.56 at most; 0.6 asks for the best choice on at least 70% of
#: the scored contexts (0.2 + 0.6 f >= 0.35 + 0.6 * 0.45), more than any two segments
#: hold, and no tolerance is subtracted.
GAP_CLOSED = 0.6


@contextmanager
def served(data_dir: Path) -> Iterator[str]:
    """``noisyloop serve`` as ``make serve`` runs it (only the port, the data directory and
    the admin token given); yields its base URL, then stops it and checks that every
    process it started (its redis-server) ended with it."""
    with serve_process(data_dir, {"NOISYLOOP_ADMIN_TOKEN": ADMIN_TOKEN}) as (base, proc):
        children = processes.descendants(proc.pid)
        yield base
    left = processes.wait_gone(children, 10)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 0 and children and not left, (proc.returncode, children, left)


def test_both_sdks_learn_a_simulated_world_against_serve(tmp_path: Path) -> None:
    """Against ``noisyloop serve``: the older SDK ranks, rewards and activates, the newer
    one reads the service configuration, and the simulated world of
    :mod:`tests.api.test_personalizer` (3 segments, 4 actions, Bernoulli rewards, a noise
    feature) played through ``PersonalizerClient.rank``/``reward`` for 3,000 events closes
    at least 0.6 of the random-to-best gap, as the native rank API does on the same world
    (same seed)."""
    with served(tmp_path / "data") as base:
        for loop in _loop(Service(base, "")):
            old = OldClient(loop.endpoint, CognitiveServicesCredentials(loop.key))
            event = f"old-{uuid.uuid4().hex[:8]}"
            answer = old.rank(OldRankRequest(
                context_features=CONTEXT, excluded_actions=["news"], event_id=event,
                defer_activation=True,
                actions=[RankableAction(id=a["id"], features=a["features"]) for a in ACTIONS]))
            assert answer.event_id == event and answer.reward_action_id != "news"
            old.events.reward(event, 1.0)
            old.events.activate(event)
            assert _admin(loop).get_service_configuration()["rewardAggregation"] == "earliest"
            assert _client(loop).rank({"contextFeatures": CONTEXT,
                                       "actions": ACTIONS})["rewardActionId"]
            loop.sync()
            assert loop.model()["stats"]["events_applied"] == 1

            sdk, native = world_players(loop)
            started = time.monotonic()
            closed = gap_closed(*sdk, learn_events=LEARN_EVENTS)
            middle = time.monotonic()
            native_closed = gap_closed(*native, learn_events=LEARN_EVENTS)
            ended = time.monotonic()
            print(f"gap closed within 3,000 events: {closed:.3f} (Personalizer's SDK, "
                  f"{middle - started:.1f} s), {native_closed:.3f} (the native rank API, "
                  f"{ended - middle:.1f} s)")
            assert min(closed, native_closed) >= GAP_CLOSED
