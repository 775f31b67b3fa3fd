"""A client whose connection is lost: its closed state, reconnecting, resuming its RM's
session (nothing lost, nothing twice), and recovering on a daemon that restarted.

The daemon runs in this process on a manual clock, behind a TCP proxy that breaks the
network on demand: ``cut`` drops every connection at once, ``swallow`` loses what the
daemon sends on the way (as a connection that dies with data in flight), ``refuse`` keeps
the RM away, and ``upstream`` swaps the daemon behind it for a new one (a restart)."""

from __future__ import annotations

import contextlib
import random
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import anyio
import pytest
from anyio.abc import Listener, SocketAttribute, SocketStream, TaskGroup

import scheduler
from scheduler import si
from scheduler.client import ConnectionClosed, Reconnect, RemoteCore, connect
from scheduler.daemon._grpc import GrpcServer
from scheduler.daemon._native import Limits, NativeServer
from scheduler.testing import ManualClock, RecordingCallback, Scenario

from ..daemon.test_daemon import QUEUES

pytestmark = pytest.mark.asyncio

FAST = Reconnect(first=0.01, most=0.05)
RM = "rm-1"


class Proxy:
    """A TCP proxy in front of a daemon's listener, with faults on demand."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.port = 0
        self.swallowing = False  # what the daemon sends is lost on the way
        self.refusing = False  # new connections are closed at once
        self.connections = 0
        self._scopes: set[anyio.CancelScope] = set()
        self._frozen: set[anyio.CancelScope] = set()  # connections that carry nothing more

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self, tg: TaskGroup) -> None:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        self.port = listener.extra(SocketAttribute.local_port)
        tg.start_soon(self._serve, listener)

    async def _serve(self, listener: Listener[SocketStream]) -> None:
        async with listener:
            await listener.serve(self._handle)

    def freeze(self) -> None:
        """Every connection through the proxy goes silent both ways, and stays open (a
        host that vanished: no FIN ever comes). New connections go through."""
        self._frozen |= self._scopes

    def cut(self) -> None:
        """Every connection through the proxy breaks, both ends at once."""
        for scope in list(self._scopes):
            scope.cancel()

    async def _handle(self, client: SocketStream) -> None:
        async with client:
            if self.refusing:
                return
            self.connections += 1
            try:
                upstream = await anyio.connect_tcp("127.0.0.1", self.upstream)
            except OSError:
                return
            async with upstream:
                with anyio.CancelScope() as scope:
                    self._scopes.add(scope)
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(self._pipe, client, upstream, False, scope)
                        tg.start_soon(self._pipe, upstream, client, True, scope)
                self._scopes.discard(scope)

    async def _pipe(
        self, source: SocketStream, sink: SocketStream, down: bool, scope: anyio.CancelScope
    ) -> None:
        with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, OSError):
            async for chunk in source:
                if (down and self.swallowing) or scope in self._frozen:
                    continue
                await sink.send(chunk)
        scope.cancel()  # one side ended: so does the other


@dataclass
class Daemon:
    core: scheduler.Core
    clock: ManualClock
    native: NativeServer
    grpc: GrpcServer
    native_port: int
    grpc_port: int
    tg: TaskGroup
    proxies: dict[str, Proxy] = field(default_factory=dict)

    def target(self, transport: str) -> str:
        scheme = "tcp" if transport == "native" else "grpc"
        return f"{scheme}://{self.proxies[transport].target}"


@contextlib.asynccontextmanager
async def daemon(rm_timeout: float = 60.0, idle_timeout: float = 60.0) -> AsyncIterator[Daemon]:
    """A daemon on a manual clock, both transports."""
    clock = ManualClock()
    timeouts = scheduler.Timeouts()
    timeouts.rm_paused = rm_timeout
    async with scheduler.start_scheduler(clock=clock, timeouts=timeouts) as core:
        native = NativeServer(core, limits=Limits(idle_timeout=idle_timeout))
        grpc_server = GrpcServer(native)
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        grpc_target = await grpc_server.start("127.0.0.1:0")
        async with listener, anyio.create_task_group() as tg:
            tg.start_soon(native.serve, listener)
            d = Daemon(
                core,
                clock,
                native,
                grpc_server,
                listener.extra(SocketAttribute.local_port),
                int(grpc_target.rsplit(":", 1)[1]),
                tg,
            )
            try:
                yield d
            finally:
                await native.shut_down("the test is over", 1)
                await grpc_server.shut_down("the test is over", 1)
                tg.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def behind_proxies(d: Daemon) -> AsyncIterator[Daemon]:
    async with anyio.create_task_group() as tg:
        for transport, port in (("native", d.native_port), ("grpc", d.grpc_port)):
            proxy = d.proxies[transport] = Proxy(port)
            await proxy.start(tg)
        try:
            yield d
        finally:
            tg.cancel_scope.cancel()


class Holding(RecordingCallback):
    """An RM that keeps what it holds (allocated and not released) and hears the losses
    of its connection."""

    def __init__(self) -> None:
        super().__init__()
        self.held: dict[str, si.Allocation] = {}
        self.heard: list[str] = []  # every allocation it was told of, in order
        self.losses: list[ConnectionClosed] = []

    async def update_allocation(self, response: si.AllocationResponse) -> None:
        await super().update_allocation(response)
        for alloc in response.new:
            self.heard.append(alloc.uuid)
            self.held[alloc.uuid] = alloc
        for release in response.released:
            self.held.pop(release.uuid, None)

    async def connection_lost(self, closed: ConnectionClosed) -> None:
        self.losses.append(closed)


async def until(condition: object, seconds: float = 10.0) -> None:
    with anyio.fail_after(seconds):
        while not condition():  # type: ignore[operator]
            await anyio.sleep(0.01)


async def rm_state(core: scheduler.Core) -> str:
    [rm] = [r for r in await core.get_resource_managers() if r["rmID"] == RM]
    return str(rm["state"])


async def held_by_core(core: scheduler.Core | RemoteCore, app_id: str) -> list[str]:
    app = await core.get_application("default", app_id)
    return sorted(a["uuid"] for a in app["allocations"])


TRANSPORTS = ["native", "grpc"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_lost_connection_resumes_and_the_rm_hears_everything_once(
    transport: str,
) -> None:
    async with daemon() as d, behind_proxies(d):
        rm = Holding()
        async with connect(d.target(transport), reconnect=FAST, timeout=10) as remote:
            s = Scenario(remote, d.clock, rm=rm)
            await s.register(QUEUES)
            await s.add_nodes("n1", "n2")
            await s.submit("app")
            await s.submit("done")
            await s.ask("app", count=4, memory=10, vcore=1)
            await s.ask("done", count=1, memory=10, vcore=1)
            [finished] = [a for a in rm.held.values() if a.application_id == "done"]
            await s.release(finished)  # "done" is Completing; Completed 30 s later
            assert len(rm.held) == 4

            # what the daemon sends is lost on the way: two more allocations, and the
            # result of the call that asked for them
            proxy = d.proxies[transport]
            proxy.swallowing = True
            request = si.AllocationRequest(
                rm_id=RM,
                asks=[
                    si.AllocationAsk(
                        allocation_key=f"late-{i}",
                        application_id="app",
                        partition_name="default",
                        resource_ask=si.Resource.of(memory=10, vcore=1),
                        max_allocations=1,
                    )
                    for i in range(2)
                ],
            )
            async with anyio.create_task_group() as tg:
                outcome: list[BaseException | None] = []

                async def send() -> None:
                    try:
                        await remote.update_allocation(request)
                        outcome.append(None)
                    except ConnectionError as exc:
                        outcome.append(exc)

                tg.start_soon(send)
                with anyio.fail_after(10):  # allocated, and unheard
                    while len(await held_by_core(d.core, "app")) < 6:
                        await anyio.sleep(0.01)
                proxy.refusing = True
                proxy.swallowing = False
                proxy.cut()
            assert isinstance(outcome[0], ConnectionError)  # it cannot know it ran

            # away: Paused, and what happens meanwhile is kept for it
            await until(lambda: not remote.connected)
            with anyio.fail_after(10):  # the daemon sees the loss too
                while await rm_state(d.core) != "Paused":
                    await anyio.sleep(0.01)
            await d.clock.advance(31)  # "done" goes Completed while the RM is away
            await d.core.settle()
            assert "Completed" not in rm.app_states("done")

            proxy.refusing = False
            await remote.settle()  # waits until the session is resumed
            assert remote.connected and remote.reconnects == 1
            assert await rm_state(d.core) == "Running"
            assert [c.final for c in rm.losses] == [False]
            assert rm.losses[0].kind == "lost"

            # every allocation the core holds is held by the RM, each heard once
            assert sorted(rm.held) == await held_by_core(d.core, "app")
            assert len(rm.heard) == len(set(rm.heard)) == 7
            assert {"late-0", "late-1"} <= {a.allocation_key for a in rm.held.values()}
            assert rm.app_states("done").count("Completed") == 1

            # and it goes on as before
            await s.ask("app", count=1, memory=10, vcore=1)
            assert len(rm.held) == 7
        assert remote.closed is not None and remote.closed.kind == "closed"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_rm_whose_daemon_restarted_recovers_what_it_holds(transport: str) -> None:
    async with daemon() as first, behind_proxies(first), daemon() as second:
        rm = Holding()
        recovered: list[str] = []

        async def recover(core: RemoteCore) -> None:
            """The SI's recovery: register, the applications, then the nodes with the
            allocations on them."""
            recovered.append(core.target)
            await core.register_resource_manager(
                si.RegisterResourceManagerRequest(rm_id=RM, config=QUEUES), rm
            )
            await core.update_application(
                si.ApplicationRequest(
                    rm_id=RM,
                    new=[
                        si.AddApplicationRequest(
                            application_id="app",
                            queue_name="root.default",
                            partition_name="default",
                            ugi=si.UserGroupInformation(user="nobody"),
                        )
                    ],
                )
            )
            nodes = []
            for node_id in ("n1", "n2"):
                on_node = [a for a in rm.held.values() if a.node_id == node_id]
                nodes.append(
                    si.NodeInfo(
                        node_id=node_id,
                        action=si.ActionFromRM.CREATE,
                        schedulable_resource=si.Resource.of(memory=100, vcore=10),
                        existing_allocations=on_node,
                    )
                )
            await core.update_node(si.NodeRequest(rm_id=RM, nodes=nodes))

        async with connect(
            first.target(transport), reconnect=FAST, recover=recover, timeout=10
        ) as remote:
            s = Scenario(remote, first.clock, rm=rm)
            await s.register(QUEUES)
            await s.add_nodes("n1", "n2")
            await s.submit("app")
            await s.ask("app", count=5, memory=10, vcore=1)
            held = sorted(rm.held)
            assert len(held) == 5

            # the daemon restarts: a new core, empty, behind the same address
            proxy = first.proxies[transport]
            proxy.upstream = second.native_port if transport == "native" else second.grpc_port
            proxy.cut()
            await remote.settle()
            assert recovered == [remote.target]
            assert [c.final for c in rm.losses] == [False]

            # the new core knows every allocation the RM holds, once
            assert await held_by_core(second.core, "app") == held
            assert sorted(rm.held) == held  # recovery allocates nothing new
            for node_id in ("n1", "n2"):
                node = await second.core.get_node("default", node_id)
                on_node = [a for a in rm.held.values() if a.node_id == node_id]
                assert node["allocated"].get("memory", 0) == 10 * len(on_node)
            await s.ask("app", count=1, memory=10, vcore=1)
            assert len(rm.held) == 6


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_without_reconnect_a_lost_connection_is_the_end_and_says_why(
    transport: str,
) -> None:
    async with daemon() as d, behind_proxies(d):
        rm = Holding()
        async with connect(d.target(transport), timeout=10) as remote:
            s = Scenario(remote, d.clock, rm=rm)
            await s.register(QUEUES)
            assert remote.closed is None and remote.connected
            d.proxies[transport].cut()
            closed = await remote.wait_closed()
            assert (closed.kind, closed.final) == ("lost", True)
            assert remote.closed == closed and not remote.connected
            assert rm.losses == [closed]  # the callback heard it
            with pytest.raises(ConnectionError, match=re.escape(closed.reason)):
                await remote.get_partitions()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_daemon_that_says_goodbye_is_a_goodbye(transport: str) -> None:
    async with daemon() as d:
        rm = Holding()
        target = (
            f"tcp://127.0.0.1:{d.native_port}"
            if transport == "native"
            else f"grpc://127.0.0.1:{d.grpc_port}"
        )
        async with connect(target, timeout=10) as remote:
            s = Scenario(remote, d.clock, rm=rm)
            await s.register(QUEUES)
            if transport == "native":
                await d.native.shut_down("the daemon stops", 1)
            else:
                await d.grpc.shut_down("the daemon stops", 1)
            closed = await remote.wait_closed()
            assert closed.kind == "goodbye" and "the daemon stops" in closed.reason
            assert rm.losses == [closed]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_daemon_gone_silent_is_lost_and_the_session_resumes(transport: str) -> None:
    """The daemon's host vanished, or the network between: the connection looks open and
    nothing comes. The client pings, hears nothing, and counts it lost within its idle
    timeout; it reconnects and resumes (the daemon, which has not yet seen the old one
    go, hands the session over)."""
    async with daemon(idle_timeout=30) as d, behind_proxies(d):
        rm = Holding()
        target = d.target(transport)
        async with connect(target, reconnect=FAST, idle_timeout=0.6, timeout=10) as remote:
            s = Scenario(remote, d.clock, rm=rm)
            await s.register(QUEUES)
            await s.add_nodes("n1")
            await s.submit("app")
            await s.ask("app")
            d.proxies[transport].freeze()
            await until(lambda: remote.reconnects == 1)
            [lost] = rm.losses
            assert lost.kind == "lost" and not lost.final
            await s.ask("app")
            assert len(rm.held) == 2
            assert sorted(rm.held) == await held_by_core(d.core, "app")
            assert await rm_state(d.core) == "Running"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_idle_connection_to_a_live_daemon_stays_up(transport: str) -> None:
    """Nothing to say for several idle timeouts: the pings keep it, on both sides."""
    async with daemon(idle_timeout=0.6) as d, behind_proxies(d):
        rm = Holding()
        async with connect(d.target(transport), idle_timeout=0.6, timeout=10) as remote:
            await Scenario(remote, d.clock, rm=rm).register(QUEUES)
            await anyio.sleep(2.5)
            assert remote.connected and remote.closed is None and rm.losses == []
            assert await rm_state(d.core) == "Running"
            assert await remote.get_partitions()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_calls_made_while_reconnecting_wait_and_go_on(transport: str) -> None:
    async with daemon() as d, behind_proxies(d):
        rm = Holding()
        async with connect(d.target(transport), reconnect=FAST, timeout=10) as remote:
            s = Scenario(remote, d.clock, rm=rm)
            await s.register(QUEUES)
            await s.add_nodes("n1")
            await s.submit("app")
            proxy = d.proxies[transport]
            proxy.refusing = True
            proxy.cut()
            await until(lambda: not remote.connected)
            async with anyio.create_task_group() as tg:
                tg.start_soon(s.ask, "app")  # waits at the gate
                await anyio.sleep(0.1)
                assert rm.held == {}
                proxy.refusing = False
            assert len(rm.held) == 1 and remote.reconnects == 1


async def test_a_reconnection_that_gives_up_is_the_end() -> None:
    async with daemon() as d, behind_proxies(d):
        rm = Holding()
        policy = Reconnect(first=0.01, most=0.01, attempts=3)
        async with connect(d.target("native"), reconnect=policy, timeout=10) as remote:
            await Scenario(remote, d.clock, rm=rm).register(QUEUES)
            proxy = d.proxies["native"]
            proxy.refusing = True
            proxy.cut()
            closed = await remote.wait_closed()
            assert closed.final and "not connected again after 3 attempts" in closed.reason
            assert [c.final for c in rm.losses] == [False, True]


async def test_without_recover_a_restarted_daemon_is_the_end() -> None:
    async with (
        daemon() as first,
        behind_proxies(first),
        daemon() as second,
        connect(first.target("native"), reconnect=FAST, timeout=10) as remote,
    ):
        await Scenario(remote, first.clock, rm=Holding()).register(QUEUES)
        proxy = first.proxies["native"]
        proxy.upstream = second.native_port
        proxy.cut()
        closed = await remote.wait_closed()
        assert "recover=" in closed.reason and closed.final


async def test_a_reconnect_policy_is_checked() -> None:
    for bad in (
        {"first": 0},
        {"first": 2, "most": 1},
        {"factor": 0.5},
        {"jitter": 2},
        {"attempts": 0},
    ):
        with pytest.raises(scheduler.SchedulerError, match="Reconnect: "):
            Reconnect(**bad)
    for idle in (0, -1, 10**6):
        with pytest.raises(scheduler.SchedulerError, match="idle_timeout"):
            async with connect("tcp://127.0.0.1:1", idle_timeout=idle):
                pass
    waits = list(Reconnect(first=1, most=4, jitter=0, attempts=5).waits(random.Random(1)))
    assert waits == [1, 2, 4, 4, 4]
    jittered = list(Reconnect(first=1, most=1, jitter=0.5, attempts=50).waits(random.Random(1)))
    assert all(0.5 <= w <= 1 for w in jittered) and len(set(jittered)) > 1
