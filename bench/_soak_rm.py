"""The soak's RM (``bench/soak.py``): one resource manager that churns, and the TCP proxy
in front of the daemon that cuts its connection.

``SoakRM`` keeps its own view, as a real RM does: the nodes it has, the applications it
submitted and their asks, and the allocations it holds (heard of from the core, not
released since). Each step does one thing at random: adds or removes a node, submits an
application (plain asks, a placeholder gang, or a permit gang), or completes one whose
asks are all allocated (releases what it holds, removes it); and it moves its gangs on
(real asks once the placeholders are placed, confirming each ``PLACEHOLDER_REPLACED``).
Every step ends with ``settle()``.

Its connection goes through its own ``Proxy``. Now and then the RM has the proxy cut it
(``cut``: the client reconnects and resumes its session), holds the proxy shut for longer
than the daemon's ``--rm-timeout`` (``outage``: the RM is Stopped, so the client's
``recover`` hook registers again and reports the RM's state), or closes its client and
connects a new one (``restart``: it registers again and recovers the same way).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from dataclasses import dataclass, field
from typing import Any

import scheduler
import scheduler.client
from scheduler import si
from scheduler.testing import gang_tags

STOPPED = si.TerminationType.STOPPED_BY_RM
REPLACED = si.TerminationType.PLACEHOLDER_REPLACED
NODE = {"memory": 64_000, "vcore": 32}
ASK = {"memory": 1_000, "vcore": 1}
STEP_TIMEOUT = 60.0  # seconds any one call may take; a stuck daemon fails the soak


def queues(partition: str) -> str:
    return (
        "partitions:\n"
        f"  - name: {partition}\n"
        "    queues:\n"
        "      - name: root\n"
        '        submitacl: "*"\n'
        "        queues:\n"
        "          - name: a\n"
        "          - name: b\n"
    )


class Proxy:
    """A TCP proxy in front of the daemon that can cut its connections (``cut``) and turn
    new ones away for a while (``shut``)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.port = 0
        self.accepted = 0
        self._server: asyncio.Server | None = None
        self._links: set[asyncio.StreamWriter] = set()
        self._shut_until = 0.0
        self._pumps: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def cut(self) -> None:
        """Abort every connection through the proxy, both ends."""
        for writer in list(self._links):
            writer.transport.abort()
        self._links.clear()

    def shut(self, seconds: float) -> None:
        """Cut, and turn new connections away for ``seconds``."""
        self._shut_until = time.monotonic() + seconds
        self.cut()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        self.cut()
        for task in list(self._pumps):
            task.cancel()
        if self._pumps:
            await asyncio.wait(self._pumps, timeout=5)
        if self._server is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if time.monotonic() < self._shut_until:
            writer.transport.abort()
            return
        try:
            async with asyncio.timeout(5):
                up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except (OSError, TimeoutError):
            writer.transport.abort()
            return
        self.accepted += 1
        self._links.update((writer, up_writer))
        for src, dst in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.get_running_loop().create_task(self._pump(src, dst))
            self._pumps.add(task)
            task.add_done_callback(self._pumps.discard)

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self._links.discard(dst)
            dst.transport.abort()


@dataclass
class App:
    """An application the RM submitted and has not completed yet."""

    app_id: str
    kind: str  # "plain", "placeholder" or "permit"
    request: si.AddApplicationRequest
    asks: dict[str, si.AllocationAsk] = field(default_factory=dict)  # every ask sent, by key
    allocated: set[str] = field(default_factory=set)  # keys allocated (held or gone since)
    members: int = 0  # a placeholder gang's members
    replacing: bool = False  # a placeholder gang's real asks are sent
    born: float = field(default_factory=time.monotonic)

    def pending(self) -> list[si.AllocationAsk]:
        return [a for k, a in self.asks.items() if k not in self.allocated]

    def done(self) -> bool:
        if self.pending():
            return False
        return self.kind != "placeholder" or self.replacing


@dataclass
class Schedule:
    """When the RM loses its connection, in seconds between two losses of each kind."""

    cut_every: float = 8.0
    outage_every: float = 25.0
    restart_every: float = 25.0
    outage_seconds: float = 3.0  # more than the daemon's --rm-timeout


class SoakRM(scheduler.ResourceManagerCallback):
    """One churning RM; see the module."""

    def __init__(
        self,
        rm_id: str,
        transport: str,
        proxy: Proxy,
        rng: random.Random,
        schedule: Schedule,
        *,
        max_apps: int = 8,
        min_nodes: int = 3,
        max_nodes: int = 8,
        pace: float = 0.0,
    ) -> None:
        self.rm_id, self.transport, self.proxy, self.rng = rm_id, transport, proxy, rng
        self.schedule = schedule
        self.partition = f"p-{rm_id}"
        self.max_apps, self.min_nodes, self.max_nodes, self.pace = (
            max_apps,
            min_nodes,
            max_nodes,
            pace,
        )
        self.nodes: list[str] = []
        self.apps: dict[str, App] = {}
        self.held: dict[str, si.Allocation] = {}  # by uuid
        self.to_confirm: list[si.AllocationRelease] = []  # the core's releases to confirm
        self._seq = 0
        # figures
        self.allocations = 0
        self.completed: dict[str, int] = {"plain": 0, "placeholder": 0, "permit": 0}
        self.nodes_added = self.nodes_removed = 0
        self.cuts = self.outages = self.restarts = self.recoveries = 0
        self.steps = 0
        self.problems: list[str] = []
        self.verified = False
        self._core: Any = None
        self._reconnects_before = 0  # of the clients closed before
        self._registered = False

    @property
    def target(self) -> str:
        return f"{self.transport}://127.0.0.1:{self.proxy.port}"

    @property
    def reconnects(self) -> int:
        now = int(getattr(self._core, "reconnects", 0)) if self._core is not None else 0
        return self._reconnects_before + now + self.restarts

    def figures(self) -> dict[str, Any]:
        return {
            "rm": self.rm_id,
            "transport": self.transport,
            "steps": self.steps,
            "allocations": self.allocations,
            "apps_completed": sum(self.completed.values()),
            "placeholder_gangs": self.completed["placeholder"],
            "permit_gangs": self.completed["permit"],
            "nodes_added": self.nodes_added,
            "nodes_removed": self.nodes_removed,
            "cuts": self.cuts,
            "outages": self.outages,
            "restarts": self.restarts,
            "recoveries": self.recoveries,
            "held_end": len(self.held),
            "problems": len(self.problems),
        }

    def _name(self, what: str) -> str:
        self._seq += 1
        return f"{self.rm_id}-{what}{self._seq}"

    # ----------------------------------------------------------------- the callback
    async def update_allocation(self, response: si.AllocationResponse) -> None:
        for alloc in response.new:
            app = self.apps.get(alloc.application_id)
            if alloc.uuid in self.held or app is None or alloc.allocation_key in app.allocated:
                self.problems.append(f"unexpected allocation: {alloc.allocation_key} {alloc.uuid}")
                continue
            self.held[alloc.uuid] = alloc
            app.allocated.add(alloc.allocation_key)
            self.allocations += 1
        for rel in response.released:
            self.held.pop(rel.uuid, None)
            if rel.termination_type != STOPPED:  # the core's own: the RM confirms it
                self.to_confirm.append(rel)
        self.problems += [
            f"ask rejected: {r.allocation_key}: {r.reason}" for r in response.rejected
        ]

    async def update_application(self, response: si.ApplicationResponse) -> None:
        self.problems += [
            f"app rejected: {r.application_id}: {r.reason}" for r in response.rejected
        ]

    async def update_node(self, response: si.NodeResponse) -> None:
        self.problems += [f"node rejected: {r.node_id}: {r.reason}" for r in response.rejected]

    # ----------------------------------------------------------------- requests
    def _node(self, node_id: str, existing: list[si.Allocation] | None = None) -> si.NodeInfo:
        return si.NodeInfo(
            node_id=node_id,
            action=si.ActionFromRM.CREATE,
            attributes={si.NODE_PARTITION: self.partition},
            schedulable_resource=si.Resource.of(**NODE),
            existing_allocations=existing or [],
        )

    def _ask(self, app: App, key: str, **fields: Any) -> si.AllocationAsk:
        ask = si.AllocationAsk(
            allocation_key=key,
            application_id=app.app_id,
            partition_name=self.partition,
            resource_ask=si.Resource.of(**ASK),
            max_allocations=1,
            **fields,
        )
        app.asks[key] = ask
        return ask

    def _releases(self, allocs: list[si.Allocation]) -> si.AllocationRequest:
        return si.AllocationRequest(
            rm_id=self.rm_id,
            releases=si.AllocationReleasesRequest(
                allocations_to_release=[
                    si.AllocationRelease(
                        partition_name=self.partition,
                        application_id=a.application_id,
                        uuid=a.uuid,
                        allocation_key=a.allocation_key,
                        termination_type=STOPPED,
                    )
                    for a in allocs
                ]
            ),
        )

    async def _call(self, call: Any) -> None:
        async with asyncio.timeout(STEP_TIMEOUT):
            await call

    async def recover(self, core: Any) -> None:
        """Register (again), then the applications, the nodes with what runs on them, and
        the asks still wanted: the SI's recovery, and the first registration."""
        self.to_confirm.clear()  # releases of an earlier core: a new one never knew them
        request = si.RegisterResourceManagerRequest(
            rm_id=self.rm_id, policy_group="default", config=queues(self.partition)
        )
        await self._call(core.register_resource_manager(request, self))
        if self.apps:
            new = [app.request for app in self.apps.values()]
            await self._call(
                core.update_application(si.ApplicationRequest(rm_id=self.rm_id, new=new))
            )
        by_node: dict[str, list[si.Allocation]] = {n: [] for n in self.nodes}
        for alloc in list(self.held.values()):
            if alloc.node_id in by_node:
                by_node[alloc.node_id].append(alloc)
            else:  # its node is decommissioned: the allocation went with it
                del self.held[alloc.uuid]
        if self.nodes:
            nodes = [self._node(n, by_node[n]) for n in self.nodes]
            await self._call(core.update_node(si.NodeRequest(rm_id=self.rm_id, nodes=nodes)))
        pending = [ask for app in self.apps.values() for ask in app.pending()]
        if pending:
            await self._call(
                core.update_allocation(si.AllocationRequest(rm_id=self.rm_id, asks=pending))
            )
        await self._call(core.settle())
        if self._registered:
            self.recoveries += 1
        self._registered = True

    # ----------------------------------------------------------------- the churn
    async def step(self, core: Any) -> None:
        self.steps += 1
        if self.to_confirm:
            await self._confirm(core)
        await self._move_gangs(core)
        roll = self.rng.random()
        live = len(self.apps)
        if len(self.nodes) < self.min_nodes or (roll < 0.08 and len(self.nodes) < self.max_nodes):
            await self._add_node(core)
        elif roll < 0.14 and len(self.nodes) > self.min_nodes:
            await self._remove_node(core)
        elif roll < 0.6 and live < self.max_apps:
            kind = self.rng.choice(("plain", "plain", "placeholder", "permit"))
            await self._submit(core, kind)
        else:
            await self._complete(core)
        await self._call(core.settle())
        if self.pace:
            await asyncio.sleep(self.pace)

    async def _add_node(self, core: Any) -> None:
        node = self._name("n")
        self.nodes.append(node)
        self.nodes_added += 1
        await self._call(
            core.update_node(si.NodeRequest(rm_id=self.rm_id, nodes=[self._node(node)]))
        )

    async def _remove_node(self, core: Any) -> None:
        """Decommission a node that holds no gang's allocation (a plain one's are lost)."""
        gang = {
            a.node_id for a in self.held.values() if self.apps[a.application_id].kind != "plain"
        }
        candidates = [n for n in self.nodes if n not in gang]
        if not candidates:
            return
        node = self.rng.choice(candidates)
        self.nodes.remove(node)
        self.nodes_removed += 1
        info = si.NodeInfo(
            node_id=node,
            action=si.ActionFromRM.DECOMISSION,
            attributes={si.NODE_PARTITION: self.partition},
        )
        await self._call(core.update_node(si.NodeRequest(rm_id=self.rm_id, nodes=[info])))

    async def _submit(self, core: Any, kind: str) -> None:
        app_id = self._name(kind[:2])
        members = self.rng.randint(2, 6)
        fields: dict[str, Any] = {}
        if kind == "placeholder":
            fields["placeholder_ask"] = si.Resource.of(**{k: v * members for k, v in ASK.items()})
            fields["gang_scheduling_style"] = "Soft"
        request = si.AddApplicationRequest(
            application_id=app_id,
            queue_name=self.rng.choice(("root.a", "root.b")),
            partition_name=self.partition,
            ugi=si.UserGroupInformation(user=f"u{self.rng.randint(0, 3)}"),
            **fields,
        )
        app = App(app_id, kind, request, members=members)
        self.apps[app_id] = app
        await self._call(
            core.update_application(si.ApplicationRequest(rm_id=self.rm_id, new=[request]))
        )
        if kind == "placeholder":
            asks = [
                self._ask(app, f"{app_id}-ph{i}", task_group_name="workers", placeholder=True)
                for i in range(members)
            ]
        elif kind == "permit":
            tags = gang_tags(f"{app_id}-gang", members)
            asks = [self._ask(app, f"{app_id}-m{i}", tags=dict(tags)) for i in range(members)]
        else:
            asks = [self._ask(app, f"{app_id}-k{i}") for i in range(members)]
        await self._call(core.update_allocation(si.AllocationRequest(rm_id=self.rm_id, asks=asks)))

    async def _move_gangs(self, core: Any) -> None:
        """Real asks for each placeholder gang whose placeholders are all placed."""
        asks = []
        for app in self.apps.values():
            if app.kind == "placeholder" and not app.replacing and not app.pending():
                app.replacing = True
                asks += [
                    self._ask(app, f"{app.app_id}-r{i}", task_group_name="workers")
                    for i in range(app.members)
                ]
        if asks:
            await self._call(
                core.update_allocation(si.AllocationRequest(rm_id=self.rm_id, asks=asks))
            )

    async def _confirm(self, core: Any) -> None:
        releases = [
            si.AllocationRelease(
                partition_name=self.partition,
                application_id=r.application_id,
                uuid=r.uuid,
                termination_type=r.termination_type,
            )
            for r in self.to_confirm
        ]
        self.to_confirm.clear()
        request = si.AllocationRequest(
            rm_id=self.rm_id,
            releases=si.AllocationReleasesRequest(allocations_to_release=releases),
        )
        await self._call(core.update_allocation(request))

    async def _complete(self, core: Any) -> None:
        """Complete the oldest application whose asks are all allocated: release what it
        holds, remove it."""
        done = [a for a in self.apps.values() if a.done() and not self._placeholders_of(a)]
        if not done:
            return
        app = min(done, key=lambda a: a.born)
        mine = [a for a in self.held.values() if a.application_id == app.app_id]
        for alloc in mine:
            del self.held[alloc.uuid]
        if mine:
            await self._call(core.update_allocation(self._releases(mine)))
        del self.apps[app.app_id]
        self.completed[app.kind] += 1
        remove = [
            si.RemoveApplicationRequest(application_id=app.app_id, partition_name=self.partition)
        ]
        await self._call(
            core.update_application(si.ApplicationRequest(rm_id=self.rm_id, remove=remove))
        )

    def _placeholders_of(self, app: App) -> bool:
        return any(a.placeholder and a.application_id == app.app_id for a in self.held.values())

    # ----------------------------------------------------------------- losses
    async def _cut(self, core: Any) -> None:
        """The proxy cuts the connection; the client notices, reconnects and resumes."""
        self.cuts += 1
        before = core.reconnects
        self.proxy.cut()
        await self._lost(core, before)
        if self.transport == "grpc":  # a gRPC session is not resumed: the RM recovers
            await self._back(core, before)

    async def _outage(self, core: Any) -> None:
        """The proxy stays shut past --rm-timeout: the daemon Stops the RM, and the client's
        recover hook registers again and reports the RM's state. The RM waits until it is
        back (its recovery reports what it sent; a request made meanwhile would be sent
        twice, once by the hook and once by itself, as for a real RM)."""
        self.outages += 1
        before = core.reconnects
        self.proxy.shut(self.schedule.outage_seconds)
        await self._lost(core, before)
        await self._back(core, before)

    async def _back(self, core: Any, before: int) -> None:
        """Wait until the client is connected again, its RM resumed or recovered."""
        async with asyncio.timeout(STEP_TIMEOUT):
            while core.reconnects == before:
                await asyncio.sleep(0.02)

    async def _lost(self, core: Any, before: int) -> None:
        """Wait (a bounded while) until the client noticed the loss."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                while core.connected and core.reconnects == before:
                    await asyncio.sleep(0.005)

    # ----------------------------------------------------------------- the run
    async def run(self, stop_at: float) -> None:
        """Churn until ``stop_at`` (monotonic), losing the connection as the schedule says,
        then verify what the core holds."""
        s = self.schedule
        offset = self.rng.uniform(0.3, 0.9)
        cut_at = time.monotonic() + s.cut_every * offset
        outage_at = time.monotonic() + s.outage_every * offset
        restart_at = time.monotonic() + s.restart_every * (offset + 0.5)
        reconnect = scheduler.client.Reconnect(first=0.05, most=0.5)
        while True:
            async with scheduler.client.connect(
                self.target, timeout=15.0, reconnect=reconnect, recover=self.recover
            ) as core:
                await self.recover(core)
                self._core = core
                while (now := time.monotonic()) < stop_at:
                    if now >= restart_at:
                        break
                    if now >= outage_at:
                        await self._outage(core)
                        outage_at = now + s.outage_every
                    elif now >= cut_at:
                        await self._cut(core)
                        cut_at = now + s.cut_every
                    await self.step(core)
                else:
                    await self.verify(core)
                    return
            self._reconnects_before += core.reconnects
            self._core = None
            self.restarts += 1
            restart_at = time.monotonic() + s.restart_every

    async def verify(self, core: Any) -> None:
        """The core holds each allocation the RM holds once, on its node and its
        application, and nothing else, in the RM's partition."""
        await self._call(core.settle())
        while self.to_confirm:  # what the core released last, confirmed
            await self._confirm(core)
            await self._call(core.settle())
        async with asyncio.timeout(STEP_TIMEOUT):
            dump = await core.state_dump()
        [part] = [p for p in dump["partitions"] if p["partition"]["name"] == self.partition]
        on_nodes = sorted(a["uuid"] for n in part["nodes"] for a in n["allocations"])
        of_apps = sorted(a["uuid"] for app in part["applications"] for a in app["allocations"])
        mine = sorted(self.held)
        if on_nodes != mine or of_apps != mine:
            extra = {
                a["uuid"]: (app["applicationID"], a["allocationKey"])
                for app in part["applications"]
                for a in app["allocations"]
                if a["uuid"] not in self.held
            }
            pending = {
                key
                for app_id, key in extra.values()
                if app_id in self.apps and key not in self.apps[app_id].allocated
            }
            self.problems.append(
                f"held {len(mine)}, the core has {len(on_nodes)} on nodes and {len(of_apps)} "
                f"in applications; only the core: {sorted(extra.values())[:6]} "
                f"({len(pending)} of them pending at the RM: never told); only the RM: "
                f"{[self.held[u].allocation_key for u in set(mine) - set(on_nodes)][:3]}"
            )
        nodes = sorted(n["nodeID"] for n in part["nodes"])
        if nodes != sorted(self.nodes):
            self.problems.append(f"nodes: the core has {nodes}, the RM {sorted(self.nodes)}")
        self.verified = True
