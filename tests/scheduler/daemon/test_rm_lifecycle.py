"""The spec's RM lifecycle: Running on registration, Paused when its connection is lost,
Stopped (its state dropped, its id and partitions free) after a timeout unless it registers
again. In-process on a manual clock through ``Core.rm_disconnected``, then against a
``scheduler serve --rm-timeout 1`` subprocess over the native transport and gRPC."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest

import scheduler
from scheduler import SchedulerError, si
from scheduler.client import connect
from scheduler.si import _grpc_codec as codec
from scheduler.si import si_pb2 as pb
from scheduler.testing import ManualClock, RecordingCallback, Scenario

from .test_daemon import QUEUES, Daemon

pytestmark = pytest.mark.asyncio

OTHER = QUEUES.replace("name: default\n    queues", "name: other\n    queues", 1)


@asynccontextmanager
async def local(timeout: float = 30.0) -> AsyncIterator[Scenario]:
    clock = ManualClock()
    timeouts = scheduler.Timeouts()
    timeouts.rm_paused = timeout
    async with scheduler.start_scheduler(clock=clock, timeouts=timeouts) as core:
        yield Scenario(core, clock)


async def states(core: Any) -> dict[str, str]:
    return {rm["rmID"]: rm["state"] for rm in await core.get_resource_managers()}


# ====================================================================== in-process
async def test_a_lost_connection_pauses_and_the_timeout_stops_and_drops_state() -> None:
    async with local(30.0) as s:
        core: scheduler.Core = s.core  # type: ignore[assignment]
        await s.register(QUEUES)
        await s.add_nodes("n1", "n2")
        await s.submit("app")
        await s.ask("app", count=1, memory=10, vcore=1)
        assert await states(core) == {"rm-1": "Running"}

        await s.advance(5)
        assert core.rm_disconnected("rm-1") is True
        assert core.rm_disconnected("rm-1") is False  # already Paused
        [rm] = await core.get_resource_managers()
        assert rm["state"] == "Paused"
        assert rm["since"] == 5 * 10**9
        assert rm["stopsAt"] == 35 * 10**9
        assert rm["partitions"] == ["default"]
        dump = await core.state_dump()
        assert dump["resourceManagers"] == ["rm-1"]
        assert dump["resourceManagerStates"] == [rm]

        # Paused: the state stays, and nothing is allocated that the RM could not hear of
        heard = len(s.rm.allocations)
        await s.ask("app", count=2, memory=10, vcore=1)
        assert len(s.rm.allocations) == heard
        assert len((await s.application("app"))["allocations"]) == heard
        assert (await core.get_node("default", "n1"))["nodeID"] == "n1"
        [rm] = await core.get_resource_managers()
        assert rm["droppedCallbacks"] == 0  # an in-process callback loses nothing

        await s.advance(29.9)
        assert await states(core) == {"rm-1": "Paused"}
        await s.advance(0.2)
        [rm] = await core.get_resource_managers()
        assert rm["state"] == "Stopped"
        assert rm["since"] == 35 * 10**9
        assert rm["partitions"] == ["default"]
        assert "stopsAt" not in rm
        assert await core.get_partitions() == []
        assert (await core.state_dump())["resourceManagers"] == []
        assert await core.get_config() == {}
        with pytest.raises(scheduler.NotFoundError):
            await core.get_node("default", "n1")
        with pytest.raises(SchedulerError, match="not registered"):
            await core.update_configuration(si.UpdateConfigurationRequest(rm_id="rm-1"))
        assert not [n for n in core.system.stats() if n.startswith("rm:rm-1")]

        # the id is free: registering again is a new RM, Running
        s.rm = RecordingCallback()
        await s.register(QUEUES)
        assert await states(core) == {"rm-1": "Running"}
        [part] = await core.get_partitions()
        assert part["totalNodes"] == 0


async def test_a_paused_rm_that_resumes_is_running_with_its_state_and_scheduling_goes_on() -> None:
    async with local(30.0) as s:
        core: scheduler.Core = s.core  # type: ignore[assignment]
        await s.register(QUEUES)
        await s.add_nodes("n1")
        await s.submit("app")
        await s.ask("app", count=1, memory=10, vcore=1)
        assert len(s.rm.allocations) == 1
        core.rm_disconnected("rm-1", s.rm)
        await s.advance(10)
        await s.ask("app", count=2, memory=10, vcore=1)  # sent before the loss, run after
        assert len(s.rm.allocations) == 1

        assert core.rm_reconnected("rm-1", RecordingCallback()) is False  # not its callback
        assert core.rm_reconnected("rm-1", s.rm) is True
        assert core.rm_reconnected("rm-1", s.rm) is True  # Running already: nothing to do
        await core.settle()
        [rm] = await core.get_resource_managers()
        assert (rm["state"], rm["since"]) == ("Running", 10 * 10**9)
        assert "stopsAt" not in rm
        assert len(s.rm.allocations) == 3  # the pass that waited ran
        await s.advance(60)  # the Paused RM's timeout was cancelled
        assert await states(core) == {"rm-1": "Running"}
        assert core.rm_disconnected("rm-1", s.rm) is True  # and it can be lost again


async def test_a_stopped_rm_cannot_resume() -> None:
    async with local(10.0) as s:
        core: scheduler.Core = s.core  # type: ignore[assignment]
        await s.register(QUEUES)
        core.rm_disconnected("rm-1", s.rm)
        await s.advance(10)
        assert core.rm_reconnected("rm-1", s.rm) is False
        assert await states(core) == {"rm-1": "Stopped"}


async def test_registering_again_while_paused_cancels_the_timeout_and_drops_state() -> None:
    async with local(10.0) as s:
        core: scheduler.Core = s.core  # type: ignore[assignment]
        await s.register(QUEUES)
        await s.add_nodes("n1")
        core.rm_disconnected("rm-1")
        await s.advance(9)
        s.rm = RecordingCallback()
        await s.register(QUEUES)  # the spec: state cleaned up, the RM reports it again
        assert await states(core) == {"rm-1": "Running"}
        [part] = await core.get_partitions()
        assert part["totalNodes"] == 0
        await s.advance(60)  # the old timeout does not stop the new registration
        assert await states(core) == {"rm-1": "Running"}
        await s.add_nodes("n1")
        assert s.rm.accepted_nodes == ["n1"]  # the new callback hears outcomes


async def test_a_paused_rm_keeps_its_partitions_until_it_is_stopped() -> None:
    async with local(10.0) as s:
        core: scheduler.Core = s.core  # type: ignore[assignment]
        await s.register(QUEUES)
        await s.add_nodes("n1")
        core.rm_disconnected("rm-1")
        other = Scenario(core, s.clock, rm_id="rm-2")
        await other.register(QUEUES)  # its own default partition, beside the Paused one's
        owners = {p["clusterId"]: p["totalNodes"] for p in await core.get_partitions()}
        assert owners == {"rm-1": 1, "rm-2": 0}
        await s.advance(10)
        assert await states(core) == {"rm-1": "Stopped", "rm-2": "Running"}
        assert [p["clusterId"] for p in await core.get_partitions()] == ["rm-2"]


async def test_a_stale_connection_does_not_pause_a_newer_registration() -> None:
    async with local(10.0) as s:
        core: scheduler.Core = s.core  # type: ignore[assignment]
        old = s.rm
        await s.register(QUEUES)
        s.rm = RecordingCallback()
        await s.register(QUEUES)  # over a new connection, before the old one ended
        assert core.rm_disconnected("rm-1", old) is False
        assert await states(core) == {"rm-1": "Running"}
        assert core.rm_disconnected("rm-1", s.rm) is True
        assert core.rm_disconnected("nobody") is False


async def test_predicates_of_a_paused_rm_refuse_the_node() -> None:
    class Picky(RecordingCallback):
        asked = 0

        async def predicates(self, args: si.PredicatesArgs) -> bool:
            self.asked += 1
            return True

    async with local(10.0) as s:
        core: scheduler.Core = s.core  # type: ignore[assignment]
        s.rm = Picky()
        await s.register(QUEUES)
        await s.add_nodes("n1")
        await s.submit("app")
        core.rm_disconnected("rm-1")
        await s.ask("app", count=1, memory=10, vcore=1)
        assert s.rm.asked == 0
        assert (await s.application("app"))["allocations"] == []


# ========================================================================= the daemon
async def _until(probe: Any, want: Any, seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    got: Any = None
    while time.monotonic() < deadline:
        got = await probe()
        if got == want:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"still {got!r} after {seconds}s, waiting for {want!r}")


@pytest.mark.parametrize("transport", ["native", "grpc"])
async def test_a_daemon_pauses_then_stops_an_rm_whose_connection_is_lost(
    tmp_path: Path, transport: str
) -> None:
    d = Daemon(tmp_path, "--rm-timeout", "1")
    target = d.address if transport == "native" else d.grpc
    try:
        async with connect(d.address) as watcher:
            async with connect(target) as remote:
                s = Scenario(remote, ManualClock())
                await s.register(QUEUES)
                await s.add_nodes("n1", "n2")
                assert await states(remote) == {"rm-1": "Running"}  # over either transport
            # the connection is gone, without a goodbye of the daemon
            await _until(lambda: states(watcher), {"rm-1": "Paused"}, 5)
            [part] = await watcher.get_partitions()
            assert part["totalNodes"] == 2  # Paused: the state is kept
            await _until(lambda: states(watcher), {"rm-1": "Stopped"}, 10)
            assert await watcher.get_partitions() == []
            assert (await watcher.state_dump())["resourceManagers"] == []

            async with connect(target) as remote:  # connect and register again
                s = Scenario(remote, ManualClock())
                await s.register(QUEUES)
                await s.add_nodes("n1")
                assert await states(watcher) == {"rm-1": "Running"}
                [part] = await watcher.get_partitions()
                assert part["totalNodes"] == 1
                assert s.rm.accepted_nodes == ["n1"]
        logged = d.logged()
        assert "lost its connection: Paused" in logged
        assert "Stopped: no registration" in logged
    finally:
        assert d.stop() == 0, d.logged()
    assert "Traceback" not in d.logged(), d.logged()


async def test_a_daemon_rm_that_registers_again_while_paused_is_running(tmp_path: Path) -> None:
    d = Daemon(tmp_path, "--rm-timeout", "1")
    try:
        async with connect(d.address) as remote:
            s = Scenario(remote, ManualClock())
            await s.register(QUEUES)
            await s.add_nodes("n1")
        async with connect(d.address) as remote:
            await _until(lambda: states(remote), {"rm-1": "Paused"}, 5)
            s = Scenario(remote, ManualClock())
            await s.register(QUEUES)
            await asyncio.sleep(1.5)  # past the old timeout
            assert await states(remote) == {"rm-1": "Running"}
            [part] = await remote.get_partitions()
            assert part["totalNodes"] == 0  # the spec: registering again drops the state
    finally:
        assert d.stop() == 0, d.logged()


async def test_a_daemon_that_stops_does_not_pause_its_rms(tmp_path: Path) -> None:
    d = Daemon(tmp_path, "--rm-timeout", "1")
    async with connect(d.address) as remote:
        s = Scenario(remote, ManualClock())
        await s.register(QUEUES)
        assert d.stop() == 0, d.logged()
    assert "lost its connection" not in d.logged()


async def test_a_plain_grpc_client_whose_streams_end_is_paused_then_stopped(
    tmp_path: Path,
) -> None:
    """Only the spec's service (no extension session): when the last of its SI streams
    ends, the RM is Paused as a lost native connection is, then Stopped."""
    d = Daemon(tmp_path, "--rm-timeout", "1")
    try:
        async with connect(d.address) as watcher:
            address = d.grpc.removeprefix("grpc://")
            async with grpc.aio.insecure_channel(address) as channel:
                register = channel.unary_unary(
                    "/si.v1.Scheduler/RegisterResourceManager",
                    request_serializer=pb.RegisterResourceManagerRequest.SerializeToString,
                    response_deserializer=pb.RegisterResourceManagerResponse.FromString,
                )
                await register(pb.RegisterResourceManagerRequest(rm_id="plain", config=QUEUES))
                open_stream = channel.stream_stream(
                    "/si.v1.Scheduler/UpdateNode",
                    request_serializer=pb.NodeRequest.SerializeToString,
                    response_deserializer=pb.NodeResponse.FromString,
                )
                nodes, more = open_stream(None), open_stream(None)
                node = si.NodeInfo(
                    node_id="p1",
                    action=si.ActionFromRM.CREATE,
                    schedulable_resource=si.Resource.of(memory=10),
                )
                await nodes.write(pb.NodeRequest(rm_id="plain", nodes=[codec.to_proto(node)]))
                response: Any = await nodes.read()
                assert [n.node_id for n in response.accepted] == ["p1"]
                await more.write(pb.NodeRequest(rm_id="plain"))
                nodes.cancel()  # one stream of two ends: still Running
                await asyncio.sleep(0.3)
                assert await states(watcher) == {"plain": "Running"}
                more.cancel()  # the last one
                await _until(lambda: states(watcher), {"plain": "Paused"}, 5)
                [part] = await watcher.get_partitions()
                assert part["totalNodes"] == 1  # Paused: the state is kept
            await _until(lambda: states(watcher), {"plain": "Stopped"}, 10)
        logged = d.logged()
        assert "the last SI stream of plain ended" in logged
        assert "plain lost its connection: Paused" in logged
    finally:
        assert d.stop() == 0, d.logged()
    assert "Traceback" not in d.logged(), d.logged()
