"""``scheduler serve`` as a real subprocess on free loopback ports, driven with
``scheduler.client``: the same scenario runs in-process and against the daemon; the
configuration file is watched; a wrong token, a client that dies mid-frame, oversized and
malformed frames are refused without harm to other RMs; SIGTERM exits cleanly."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import msgspec
import pytest

import scheduler
from scheduler import si
from scheduler.client import connect
from scheduler.si._wire import PROTOCOL_VERSION
from scheduler.testing import DaemonProcess, ManualClock, RecordingCallback, Scenario, gang_tags

pytestmark = pytest.mark.asyncio

QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: default
          - name: a
            resources:
              max: {memory: 1000, vcore: 100}
"""
REPLACED = si.TerminationType.PLACEHOLDER_REPLACED


# ================================================================= the daemon process
class Daemon(DaemonProcess):
    """``scheduler.testing.DaemonProcess`` with its log in ``tmp`` and ``address`` for
    its native address."""

    def __init__(self, tmp: Path, *args: str) -> None:
        super().__init__(*args, log=tmp / f"daemon-{time.monotonic_ns()}.log")

    @property
    def address(self) -> str:
        return self.native


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon(tmp_path_factory.mktemp("daemon"))
    yield d
    assert d.stop() == 0, d.logged()
    assert "Traceback" not in d.logged(), d.logged()


@asynccontextmanager
async def remote_scenario(address: str, token: str = "") -> AsyncIterator[Scenario]:
    async with connect(address, token=token) as core:
        yield Scenario(core, ManualClock())


@asynccontextmanager
async def local_scenario() -> AsyncIterator[Scenario]:
    clock = ManualClock()
    async with scheduler.start_scheduler(clock=clock) as core:
        yield Scenario(core, clock)


# ======================================================================= one scenario
async def gang_story(s: Scenario) -> None:
    """Register, nodes, plain asks, a placeholder gang through the replacement handshake
    with queries during it, a permit gang: the same steps whichever core ``s`` drives."""
    await s.register(QUEUES)
    await s.add_nodes("n1", "n2")
    assert s.rm.accepted_nodes == ["n1", "n2"]
    await s.submit("plain")
    await s.ask("plain", count=2)
    s.assert_allocated("plain", 2)

    await s.submit_gang("gang", {"workers": 2})
    s.assert_allocated("gang", 2, placeholder=True)
    await s.ask("gang", "w", count=2, task_group="workers")
    assert len(s.released(REPLACED)) == 2  # the core waits for the RM's confirmation
    s.assert_allocated("gang", 0)
    app = await s.application("gang")
    assert app["placeholderData"][0]["count"] == 2
    assert {a["releasePending"] for a in app["allocations"]} == {"PLACEHOLDER_REPLACED"}
    await s.confirm_releases()
    s.assert_allocated("gang", 2)
    app = await s.application("gang")
    assert app["placeholderData"][0]["replaced"] == 2
    assert app["applicationState"] == "Running"

    await s.submit("permit")
    await s.ask("permit", "m", count=2, tags=gang_tags("p", 2))
    s.assert_allocated("permit", 2)
    assert (await s.application("permit"))["gangs"][0]["satisfied"] is True
    [partition] = await s.core.get_partitions()
    assert partition["totalNodes"] == 2
    config = await s.core.get_config()  # the configuration in force, by RM: remote too
    assert list(config) == [s.rm_id]
    assert [p["name"] for p in config[s.rm_id]["partitions"]] == ["default"]
    assert config[s.rm_id]["checksum"]
    node = await s.core.get_node("default", "n1")
    assert node["nodeID"] == "n1"
    with pytest.raises(scheduler.NotFoundError):
        await s.core.get_application("default", "nope")
    with pytest.raises(scheduler.SchedulerError):
        await s.core.update_node(si.NodeRequest(rm_id="not-registered"))


async def test_the_scenario_in_process() -> None:
    async with local_scenario() as s:
        await gang_story(s)


async def test_the_same_scenario_against_a_daemon(daemon: Daemon) -> None:
    async with remote_scenario(daemon.address) as s:
        await gang_story(s)


async def test_rest_queries_during_a_gang_handshake(daemon: Daemon) -> None:
    async with (
        remote_scenario(daemon.address) as s,
        httpx.AsyncClient(base_url=daemon.http, timeout=10) as http,
    ):
        await s.register(QUEUES)
        await s.add_nodes("n1")
        await s.submit_gang("gang", {"workers": 2})
        await s.ask("gang", "w", count=2, task_group="workers")  # the RM has not confirmed
        app = (await http.get("/ws/v1/partition/default/application/gang")).json()
        assert app["applicationID"] == "gang"
        assert {a["releasePending"] for a in app["allocations"]} == {"PLACEHOLDER_REPLACED"}
        nodes = (await http.get("/ws/v1/partition/default/nodes")).json()
        assert [n["nodeID"] for n in nodes] == ["n1"]
        health = (await http.get("/ws/v1/scheduler/healthcheck")).json()
        assert health["Healthy"] is True, health
        await s.confirm_releases()
        queue = (await http.get("/ws/v1/partition/default/queue/root.default")).json()
        assert queue["allocatedResource"] == {"memory": 20, "vcore": 2}
        metrics = (await http.get("/ws/v1/metrics")).text
        assert 'yunikorn_scheduler_application_total{state="running"}' in metrics.lower()
        missing = await http.get("/ws/v1/partition/default/application/nope")
        assert missing.status_code == 404 and missing.json()["status_code"] == 404


async def test_a_callback_that_calls_the_core_is_settled_with_it(daemon: Daemon) -> None:
    """An RM that confirms releases from its callback, as a real one does: settle() waits
    for what the callback sent too."""

    class Confirming(RecordingCallback):
        core: object = None

        async def update_allocation(self, response: si.AllocationResponse) -> None:
            await super().update_allocation(response)
            confirm = [
                si.AllocationRelease(
                    partition_name="default",
                    application_id=r.application_id,
                    uuid=r.uuid,
                    termination_type=REPLACED,
                )
                for r in response.released
                if r.termination_type == REPLACED
            ]
            if confirm:
                request = si.AllocationRequest(
                    rm_id="rm-1",
                    releases=si.AllocationReleasesRequest(allocations_to_release=confirm),
                )
                await remote.update_allocation(request)

    async with connect(daemon.address) as remote:
        s = Scenario(remote, ManualClock(), Confirming())
        await s.register(QUEUES)
        await s.add_nodes("n1")
        await s.submit_gang("gang", {"workers": 3})
        await s.ask("gang", "w", count=3, task_group="workers")
        s.assert_allocated("gang", 3)


async def test_predicates_are_asked_over_the_wire(daemon: Daemon) -> None:
    class Choosy(RecordingCallback):
        def __init__(self) -> None:
            super().__init__()
            self.asked: list[str] = []

        async def predicates(self, args: si.PredicatesArgs) -> bool:
            self.asked.append(args.node_id)
            return args.node_id != "n1"

    rm = Choosy()
    async with connect(daemon.address) as remote:
        s = Scenario(remote, ManualClock(), rm)
        await s.register(QUEUES)
        await s.add_nodes("n1", "n2")
        await s.submit("app")
        await s.ask("app", count=2)
        assert {a.node_id for a in s.assert_allocated("app", 2)} == {"n2"}
        assert "n1" in rm.asked


# ===================================================================== configuration
async def test_a_configuration_file_change_is_picked_up(tmp_path: Path) -> None:
    config = tmp_path / "queues.yaml"
    config.write_text(QUEUES)
    d = Daemon(tmp_path, "--config", str(config))
    try:
        async with remote_scenario(d.address) as s:
            await s.register()  # no configuration: the daemon's file
            assert (await s.core.get_queue("default", "root.a"))["maxResource"]["memory"] == 1000
            config.write_text(QUEUES.replace("memory: 1000", "memory: 2000"))
            await _until(lambda: _max_memory(s), 2000)
            config.write_text("partitions: [{name: default, queues: [{name: root, max: 3}]}]")
            await asyncio.sleep(2.5)  # two looks at the file: it is refused
            assert await _max_memory(s) == 2000
            assert "is invalid, the old one stays" in d.logged()
    finally:
        assert d.stop() == 0, d.logged()


async def _max_memory(s: Scenario) -> int:
    return int((await s.core.get_queue("default", "root.a"))["maxResource"]["memory"])


async def _until(probe: object, want: object, seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    got: object = None
    while time.monotonic() < deadline:
        got = await probe()  # type: ignore[operator]
        if got == want:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"still {got!r} after {seconds}s, waiting for {want!r}")


async def test_an_invalid_configuration_file_stops_the_start(tmp_path: Path) -> None:
    config = tmp_path / "queues.yaml"
    config.write_text(
        "partitions: [{name: default, queues: [{name: root, resources: {max: {memory: 5}}}]}]"
    )
    command = [sys.executable, "-m", "scheduler", "serve", "--native", "tcp://127.0.0.1:0"]
    command += ["--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"]
    done = subprocess.run(
        [*command, "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(scheduler.__file__).parents[1])},
        check=False,
    )
    assert done.returncode == 2
    assert str(config) in done.stderr and "Traceback" not in done.stderr


# ========================================================================== security
async def test_a_wrong_token_is_refused(tmp_path: Path) -> None:
    d = Daemon(tmp_path, "--token", "s3cret")
    try:
        with pytest.raises(ConnectionError, match="authentication failed"):
            async with connect(d.address, token="wrong"):
                pass
        with pytest.raises(ConnectionError, match="authentication failed"):
            async with connect(d.address):
                pass
        async with remote_scenario(d.address, token="s3cret") as s:
            await s.register(QUEUES)
            await s.add_nodes("n1")
            assert s.rm.accepted_nodes == ["n1"]
    finally:
        assert d.stop() == 0, d.logged()


def _raw(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(_frame({"t": "hello", "version": PROTOCOL_VERSION}))
    assert _read_frame(sock)["t"] == "welcome"
    return sock


def _frame(doc: object) -> bytes:
    body = msgspec.msgpack.encode(doc)
    return len(body).to_bytes(4, "big") + body


def _read_frame(sock: socket.socket) -> dict[str, object]:
    header = _recv_exactly(sock, 4)
    body = _recv_exactly(sock, int.from_bytes(header, "big"))
    doc: dict[str, object] = msgspec.msgpack.decode(body)
    return doc


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


async def test_bad_frames_are_refused_without_harm_to_other_rms(daemon: Daemon) -> None:
    async with remote_scenario(daemon.address) as s:
        await s.register(QUEUES)
        await s.add_nodes("n1")
        # A frame announcing more than the daemon takes: refused before it is read.
        big = _raw(daemon.port)
        big.sendall((1 << 30).to_bytes(4, "big") + b"x" * 100)
        bye = _read_frame(big)
        assert bye["t"] == "bye" and "over the limit" in str(bye["message"])
        # A frame that is not MessagePack, and one that is not a message of the protocol.
        for junk in (b"\xc1\xc1\xc1", msgspec.msgpack.encode({"t": "nope", "id": 1})):
            bad = _raw(daemon.port)
            bad.sendall(len(junk).to_bytes(4, "big") + junk)
            bye = _read_frame(bad)
            assert bye["t"] == "bye" and "malformed frame" in str(bye["message"])
            bad.close()
        # A client killed mid-frame: half a frame, then gone.
        dying = _raw(daemon.port)
        dying.sendall((500).to_bytes(4, "big") + b"\x85" * 10)
        dying.close()
        big.close()
        # The RM connected all along is unharmed.
        await s.submit("app")
        await s.ask("app")
        s.assert_allocated("app", 1)
    # It reconnects, registers again (its state is dropped, as the spec says) and goes on.
    async with remote_scenario(daemon.address) as s:
        await s.register(QUEUES)
        await s.add_nodes("n1")
        await s.submit("app")
        await s.ask("app")
        s.assert_allocated("app", 1)


async def test_limits_on_asks_and_ids_are_clear_errors(tmp_path: Path) -> None:
    d = Daemon(tmp_path, "--max-asks", "3", "--max-id", "20")
    try:
        async with remote_scenario(d.address) as s:
            await s.register(QUEUES)
            await s.submit("app")
            asks = [s._ask(f"k{i}", "app", 1, {"memory": 1}, "") for i in range(4)]
            with pytest.raises(scheduler.SchedulerError, match="4 asks, over the limit of 3"):
                await s.send_asks(*asks)
            with pytest.raises(scheduler.SchedulerError, match="over the limit of 20"):
                await s.ask("app", "k" * 21)
            await s.send_asks(*asks[:3])  # within the limits: taken
            assert len((await s.application("app"))["requests"]) == 3
    finally:
        assert d.stop() == 0, d.logged()


# ========================================================================== shutdown
async def test_sigterm_says_goodbye_to_connected_rms_and_exits_0(tmp_path: Path) -> None:
    d = Daemon(tmp_path)
    async with connect(d.address) as remote:
        s = Scenario(remote, ManualClock())
        await s.register(QUEUES)
        await s.add_nodes("n1")
        started = time.monotonic()
        assert d.stop() == 0, d.logged()
        assert time.monotonic() - started < 10
        with pytest.raises(ConnectionError, match="shutting down"):
            await remote.get_partitions()
    assert "stopped" in d.logged()


async def test_the_event_stream_over_http_ends_at_sigterm(tmp_path: Path) -> None:
    d = Daemon(tmp_path)
    async with (
        httpx.AsyncClient(base_url=d.http, timeout=10) as http,
        http.stream("GET", "/ws/v1/events/stream") as stream,
        remote_scenario(d.address) as s,
    ):
        assert stream.headers["content-type"] == "application/x-ndjson"
        lines = stream.aiter_lines()
        assert "InstanceUUID" in msgspec.json.decode(await anext(lines))
        await s.register(QUEUES)
        await s.submit("app-1")  # the event comes while the stream is open
        event = msgspec.json.decode(await anext(lines))
        while event["objectID"] != "app-1":
            event = msgspec.json.decode(await anext(lines))
        assert event["type"] == si.EventRecordType.APP
        started = time.monotonic()
        assert d.stop() == 0, d.logged()
        assert time.monotonic() - started < 5  # the open stream does not hold the exit back
        rest = [msgspec.json.decode(line) async for line in lines]
        assert rest[-1]["description"] == "the daemon is shutting down"


async def test_a_bad_target_says_what_to_write() -> None:
    for target, words in (
        ("grpc://nohost", "grpc://host:port"),
        ("http://x:1", "tcp://, unix:// or grpc://"),
        ("tcp://nohost", "tcp://host:port"),
    ):
        with pytest.raises(scheduler.SchedulerError, match=words):
            async with connect(target):
                pass
    with pytest.raises(ConnectionError):
        async with connect(f"tcp://127.0.0.1:{_free_port()}", timeout=5):
            pass


async def test_a_unix_socket(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    d = Daemon(tmp_path, "--native", f"unix://{path}")  # the last --native counts
    try:
        assert d.address == f"unix://{path}"
        async with remote_scenario(d.address) as s:
            await s.register(QUEUES)
            await s.add_nodes("n1")
            assert s.rm.accepted_nodes == ["n1"]
    finally:
        assert d.stop() == 0, d.logged()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_daemon_process_says_why_a_daemon_did_not_start(tmp_path: Path) -> None:
    missing = tmp_path / "missing.pem"
    with pytest.raises(RuntimeError, match="did not start") as caught:
        DaemonProcess("--tls-cert", str(missing), "--tls-key", str(missing), log=tmp_path / "l")
    assert str(missing) in str(caught.value)  # the daemon's own error, from its log


async def test_daemon_process_as_a_context_manager_stops_the_daemon(tmp_path: Path) -> None:
    with DaemonProcess(log=tmp_path / "daemon.log") as daemon:
        assert daemon.native.startswith("tcp://127.0.0.1:") and daemon.port > 0
        assert daemon.http.startswith("http://") and daemon.grpc.startswith("grpc://")
        async with connect(daemon.native) as remote:
            assert await remote.get_partitions() == []
    assert daemon.proc.returncode == 0
    assert "Traceback" not in daemon.logged()
