"""Wake-ups of sleeping models: the trainer's listener on the asleep channels.

A model whose trainer found its stream empty for a while sleeps
(:mod:`workers.pacing`): its asleep flag is set in Redis and the trainer stops
reading it.  Every Lua step that adds an entry to a model's event stream
removes that flag and publishes on the channel of the same name
(``app/store/lua/lib_wake.lua``); :func:`listen` subscribes to all of them and
wakes the model, so it is read on the trainer's next pass.

Pub/sub loses what is published while nobody listens: on every (re)subscribe
every waiting model is read once, and the trainer lets no model sleep while
the listener is not subscribed (``WorkerContext.listening``).  A Redis Cluster
client has no pub/sub here: there the trainer never lets models sleep (it
reads idle ones every ``idle_interval``, as before).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from app.store import STORE_ERRORS, keys
from app.store.util import text
from workers.context import WorkerContext

logger = logging.getLogger(__name__)

#: Seconds one wait for a message lasts (how soon the listener sees a stop).
POLL_SECONDS = 1.0


async def listen(ctx: WorkerContext) -> None:
    """Wake each held model whose asleep channel gets a message, until the worker stops
    (module docstring); reconnects after ``retry_delay`` when the store fails."""
    if not ctx.store.single_redis:
        return
    while not ctx.stopping.is_set():
        pubsub = ctx.store.redis.pubsub()
        try:
            await pubsub.psubscribe(keys.ASLEEP_CHANNELS)
            ctx.listening = True
            ctx.pacer.wake_all()  # what was published before this subscribe is lost
            while not ctx.stopping.is_set():
                message = await pubsub.get_message(ignore_subscribe_messages=True,
                                                   timeout=POLL_SECONDS)
                if message is not None and message.get("type") == "pmessage":
                    ctx.pacer.wake(keys.asleep_model(text(message["channel"]) or ""))
                    ctx.woken.set()
        except STORE_ERRORS as exc:
            logger.warning("worker %s: wake-up listener: store unavailable (%s); retrying",
                           ctx.config.worker_id, exc)
            ctx.listening = False
            ctx.pacer.wake_all()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ctx.stopping.wait(), ctx.config.retry_delay)
        finally:
            ctx.listening = False
            with contextlib.suppress(*STORE_ERRORS):
                await pubsub.aclose()
