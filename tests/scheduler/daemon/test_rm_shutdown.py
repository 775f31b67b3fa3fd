"""The spec's "RM voluntarily shutdown": ``Core.stop_resource_manager`` makes a Running or
Paused RM Stopped at once, its state dropped and its id and partitions free."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

import scheduler
from scheduler import SchedulerError, si
from scheduler.client import connect
from scheduler.testing import ManualClock, RecordingCallback, Scenario

from .test_daemon import Daemon

pytestmark = pytest.mark.asyncio

QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: a
"""


@asynccontextmanager
async def local(paused_timeout: float = 30.0) -> AsyncIterator[Scenario]:
    clock = ManualClock()
    timeouts = scheduler.Timeouts()
    timeouts.rm_paused = paused_timeout
    async with scheduler.start_scheduler(clock=clock, timeouts=timeouts) as core:
        yield Scenario(core, clock)


async def rms(core: Any) -> dict[str, dict[str, Any]]:
    return {rm["rmID"]: rm for rm in await core.get_resource_managers()}


async def test_a_running_rm_that_stops_is_stopped_at_once_and_its_state_dropped() -> None:
    async with local() as s:
        core: scheduler.Core = s.core  # type: ignore[assignment]
        await s.register(QUEUES)
        await s.add_nodes("n1", "n2")
        await s.submit("app", queue="root.a")
        await s.ask("app", count=2, memory=10, vcore=1)
        assert len(s.rm.allocations) == 2
        await s.advance(3)

        await core.stop_resource_manager("rm-1")

        rm = (await rms(core))["rm-1"]
        assert rm["state"] == "Stopped" and rm["since"] == 3 * 10**9
        assert rm["partitions"] == ["default"]
        assert await core.get_partitions() == []
        with pytest.raises(scheduler.NotFoundError):
            await core.get_node("default", "n1")
        with pytest.raises(SchedulerError, match="not registered"):
            await core.update_node(si.NodeRequest(rm_id="rm-1"))
        await core.settle()
        assert not [n for n in core.system.stats() if n.startswith("rm:rm-1")]

        # its partition is free for another RM, and its id registers as a new RM
        other = Scenario(core, s.clock, rm_id="rm-2")
        await other.register(QUEUES)
        await other.add_nodes("n9")
        await core.stop_resource_manager("rm-2")
        s.rm = RecordingCallback()
        await s.register(QUEUES)
        assert {k: v["state"] for k, v in (await rms(core)).items()} == {
            "rm-1": "Running",
            "rm-2": "Stopped",
        }
        [part] = await core.get_partitions()
        assert part["totalNodes"] == 0


async def test_a_paused_rm_that_stops_is_stopped_before_its_timeout() -> None:
    async with local(paused_timeout=10.0) as s:
        core: scheduler.Core = s.core  # type: ignore[assignment]
        await s.register(QUEUES)
        await s.add_nodes("n1")
        assert core.rm_disconnected("rm-1") is True
        await s.advance(4)

        await core.stop_resource_manager("rm-1")
        rm = (await rms(core))["rm-1"]
        assert rm["state"] == "Stopped" and rm["since"] == 4 * 10**9
        assert "stopsAt" not in rm

        # the Paused RM's timeout was cancelled: nothing moves when it would have fired
        await s.advance(30)
        assert (await rms(core))["rm-1"] == rm


async def test_stopping_again_does_nothing_and_an_unknown_or_bad_id_is_an_error() -> None:
    async with local() as s:
        core: scheduler.Core = s.core  # type: ignore[assignment]
        await s.register(QUEUES)
        await core.stop_resource_manager("rm-1")
        before = await rms(core)
        await core.stop_resource_manager("rm-1")  # already Stopped
        assert await rms(core) == before
        with pytest.raises(scheduler.NotFoundError, match="'nobody' is not registered"):
            await core.stop_resource_manager("nobody")
        with pytest.raises(SchedulerError):
            await core.stop_resource_manager("")


# ========================================================================= the daemon
@pytest.mark.parametrize("transport", ["native", "grpc"])
async def test_an_rm_stops_of_its_own_accord_over_a_transport(
    tmp_path: Path, transport: str
) -> None:
    d = Daemon(tmp_path, "--rm-timeout", "30")
    try:
        async with connect(d.address if transport == "native" else d.grpc) as remote:
            s = Scenario(remote, ManualClock())
            await s.register(QUEUES)
            await s.add_nodes("n1")
            other = Scenario(remote, ManualClock(), rm_id="rm-2")
            with pytest.raises(SchedulerError, match="may stop only the resource manager it"):
                await remote.stop_resource_manager("rm-2")  # not this connection's RM
            await remote.stop_resource_manager("rm-1")
            assert {k: v["state"] for k, v in (await rms(remote)).items()} == {"rm-1": "Stopped"}
            assert await remote.get_partitions() == []
            # the partition is free at once, for this connection too
            await other.register(QUEUES.replace("- name: a", "- name: b"))
            [part] = await remote.get_partitions()
            assert part["totalNodes"] == 0
        # closing the connection now pauses nobody: rm-1 is Stopped, rm-2 was registered
        # over it and is Paused as usual
        async with connect(d.address) as watcher:
            for _ in range(100):
                states = {k: v["state"] for k, v in (await rms(watcher)).items()}
                if states.get("rm-2") == "Paused":
                    break
                await asyncio.sleep(0.05)
            assert states == {"rm-1": "Stopped", "rm-2": "Paused"}
        assert "resource manager rm-1 stopped of its own accord" in d.logged()
        assert "rm-1 lost its connection" not in d.logged()
    finally:
        assert d.stop() == 0, d.logged()
    assert "Traceback" not in d.logged(), d.logged()
