"""The daemon dies hard (SIGKILL) while two RMs stream asks and releases to it, one over
the native transport and one over gRPC; a new daemon starts on the same addresses, and
each RM recovers as the SI says: it connects again, registers again, sends its
applications, then its nodes with ``existing_allocations`` = every allocation it holds,
then the asks it still wants. The new core must hold exactly what each RM holds, once,
with node, application and queue totals to match, and schedule the rest."""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx
import pytest

import scheduler
from scheduler import si
from scheduler.client import connect

from .test_daemon import Daemon

pytestmark = pytest.mark.asyncio

STOPPED = si.TerminationType.STOPPED_BY_RM
NODES = 12  # per RM, each with room for 100 asks (vcore 100)
ASKS = 1500  # per RM; about a third of what it gets it releases as it goes
BATCH = 25  # asks per request
KILL_AFTER = 20  # batches both RMs have sent when the daemon is killed (of 60)
LEAD = 2  # batches one RM may run ahead of the other
RECONNECT_SECONDS = 30.0  # how long an RM keeps trying to connect


def queues(partition: str) -> str:
    return f"""
partitions:
  - name: {partition}
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: a
          - name: b
"""


class Pace:
    """Keeps the RMs' streams abreast (none sends a batch more than ``LEAD`` ahead of the
    other), so that both are mid-stream when the daemon is killed."""

    def __init__(self, names: Iterable[str]) -> None:
        self.sent = dict.fromkeys(names, 0)
        self.free = False
        self.changed = asyncio.Condition()

    async def turn(self, name: str) -> None:
        async with self.changed:
            await self.changed.wait_for(
                lambda: self.free or self.sent[name] - min(self.sent.values()) < LEAD
            )

    async def sent_one(self, name: str) -> None:
        async with self.changed:
            self.sent[name] += 1
            self.changed.notify_all()

    async def reached(self, batches: int) -> None:
        async with self.changed:
            await self.changed.wait_for(lambda: min(self.sent.values()) >= batches)

    async def release(self) -> None:
        async with self.changed:
            self.free = True
            self.changed.notify_all()


class ModelRM(scheduler.ResourceManagerCallback):
    """One RM's own view: the asks it wants, the allocations it holds (heard of from the
    core, not released), and how it recovers them on a new connection."""

    def __init__(self, rm_id: str, partition: str, target: str) -> None:
        self.rm_id, self.partition, self.target = rm_id, partition, target
        self.nodes = [f"{rm_id}-n{i}" for i in range(NODES)]
        self.apps = {f"{rm_id}-app{i}": "root.a" if i % 2 else "root.b" for i in range(4)}
        self.batches = [
            [f"{rm_id}-k{i}" for i in range(at, at + BATCH)] for at in range(0, ASKS, BATCH)
        ]
        self.sent = 0  # batches sent (a request whose connection broke counts: resent)
        self.asked: dict[str, si.AllocationAsk] = {}  # every ask sent, by key
        self.allocated: set[str] = set()  # keys allocated (held or released since)
        self.held: dict[str, si.Allocation] = {}  # by uuid
        self.released = 0
        self.connections = 0
        self.recovered: list[tuple[int, int]] = []  # per connection: held, asks resent
        self.lost: list[tuple[int, str]] = []  # batches sent when a connection failed, why
        self.problems: list[str] = []

    # ----------------------------------------------------------------- the callback
    async def update_allocation(self, response: si.AllocationResponse) -> None:
        for alloc in response.new:
            if alloc.uuid in self.held or alloc.allocation_key in self.allocated:
                self.problems.append(f"allocated again: {alloc.allocation_key} {alloc.uuid}")
            self.held[alloc.uuid] = alloc
            self.allocated.add(alloc.allocation_key)
        for rel in response.released:  # the core confirms the RM's releases; it starts none
            if rel.termination_type != STOPPED or rel.uuid in self.held:
                self.problems.append(f"released by the core: {rel.uuid} {rel.termination_type}")
        self.problems += [
            f"ask rejected: {r.allocation_key}: {r.reason}" for r in response.rejected
        ]

    async def update_application(self, response: si.ApplicationResponse) -> None:
        self.problems += [
            f"app rejected: {r.application_id}: {r.reason}" for r in response.rejected
        ]

    async def update_node(self, response: si.NodeResponse) -> None:
        self.problems += [f"node rejected: {r.node_id}: {r.reason}" for r in response.rejected]

    # -------------------------------------------------------------------- the RM
    def pending(self) -> list[si.AllocationAsk]:
        return [ask for key, ask in self.asked.items() if key not in self.allocated]

    def ask(self, key: str) -> si.AllocationAsk:
        i = int(key.rsplit("k", 1)[1])
        return si.AllocationAsk(
            allocation_key=key,
            application_id=f"{self.rm_id}-app{i % len(self.apps)}",
            partition_name=self.partition,
            resource_ask=si.Resource.of(memory=10 * (1 + i % 3), vcore=1),
        )

    def finished(self) -> list[si.AllocationRelease]:
        """The allocations whose work is done (every third ask's): no longer held."""
        done = [a for a in self.held.values() if int(a.allocation_key.rsplit("k", 1)[1]) % 3 == 0]
        for alloc in done:
            del self.held[alloc.uuid]
        self.released += len(done)
        return [
            si.AllocationRelease(
                partition_name=self.partition,
                application_id=a.application_id,
                uuid=a.uuid,
                allocation_key=a.allocation_key,
                termination_type=STOPPED,
            )
            for a in done
        ]

    async def recover(self, core: Any) -> None:
        """Register, the applications, the nodes with what runs on them, then the asks
        still wanted (nothing, the first time)."""
        await core.register_resource_manager(
            si.RegisterResourceManagerRequest(
                rm_id=self.rm_id, policy_group="default", config=queues(self.partition)
            ),
            self,
        )
        await core.update_application(
            si.ApplicationRequest(
                rm_id=self.rm_id,
                new=[
                    si.AddApplicationRequest(
                        application_id=app,
                        queue_name=queue,
                        partition_name=self.partition,
                        ugi=si.UserGroupInformation(user="u"),
                    )
                    for app, queue in self.apps.items()
                ],
            )
        )
        by_node: dict[str, list[si.Allocation]] = {n: [] for n in self.nodes}
        for alloc in self.held.values():
            by_node[alloc.node_id].append(alloc)
        await core.update_node(
            si.NodeRequest(
                rm_id=self.rm_id,
                nodes=[
                    si.NodeInfo(
                        node_id=node,
                        action=si.ActionFromRM.CREATE,
                        attributes={si.NODE_PARTITION: self.partition},
                        schedulable_resource=si.Resource.of(memory=10_000, vcore=100),
                        existing_allocations=by_node[node],
                    )
                    for node in self.nodes
                ],
            )
        )
        await core.settle()
        if self.connections > 1:
            await expect_held(core, self)  # nothing but what it holds, before any ask
        self.recovered.append((len(self.held), len(self.pending())))
        if self.pending():
            await core.update_allocation(
                si.AllocationRequest(rm_id=self.rm_id, asks=self.pending())
            )

    async def stream(self, core: Any, pace: Pace) -> None:
        """The rest of its batches of asks, each with the releases of the work done."""
        while self.sent < len(self.batches):
            await pace.turn(self.rm_id)
            asks = [self.ask(key) for key in self.batches[self.sent]]
            self.asked.update((ask.allocation_key, ask) for ask in asks)
            self.sent += 1  # sent, as far as it knows: resent with the pending if it broke
            releases = si.AllocationReleasesRequest(allocations_to_release=self.finished())
            await core.update_allocation(
                si.AllocationRequest(rm_id=self.rm_id, asks=asks, releases=releases)
            )
            await pace.sent_one(self.rm_id)

    async def run(self, pace: Pace) -> None:
        """Connect, recover, stream; whenever the connection is lost, again, until every
        batch is sent and every ask allocated; then check the core holds what it holds."""
        deadline = time.monotonic() + RECONNECT_SECONDS
        while True:
            try:
                async with connect(self.target, timeout=2.0) as core:
                    self.connections += 1
                    await self.recover(core)
                    await self.stream(core, pace)
                    await core.settle()
                    assert not self.pending(), f"{self.rm_id}: {len(self.pending())} asks wait"
                    await expect_held(core, self)
                    return
            except ConnectionError as exc:
                self.lost.append((self.sent, str(exc)))
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.05)  # a real daemon: poll with a deadline


def total(allocs: Iterable[si.Allocation]) -> dict[str, int]:
    out: Counter[str] = Counter()
    for alloc in allocs:
        assert alloc.resource_per_alloc is not None
        for name, q in alloc.resource_per_alloc.resources.items():
            out[name] += q.value
    return {k: v for k, v in out.items() if v}


async def expect_held(core: Any, rm: ModelRM) -> None:
    """The core holds each allocation the RM holds once, nothing else, and its node,
    application and queue totals are the RM's."""
    assert not rm.problems, rm.problems[:5]
    held = rm.held.values()
    dump = await core.state_dump()
    [part] = [p for p in dump["partitions"] if p["partition"]["name"] == rm.partition]
    on_nodes = Counter(a["uuid"] for n in part["nodes"] for a in n["allocations"])
    of_apps = Counter(a["uuid"] for app in part["applications"] for a in app["allocations"])
    assert on_nodes == of_apps == Counter(iter(rm.held)), "the core holds other allocations"
    for node in rm.nodes:
        info = await core.get_node(rm.partition, node)
        mine = [a for a in held if a.node_id == node]
        assert sorted(a["uuid"] for a in info["allocations"]) == sorted(a.uuid for a in mine)
        assert info["allocated"] == total(mine), node
    for app, queue in rm.apps.items():
        info = await core.get_application(rm.partition, app)
        assert info["queueName"] == queue
        mine = [a for a in held if a.application_id == app]
        assert sorted(a["allocationKey"] for a in info["allocations"]) == sorted(
            a.allocation_key for a in mine
        )
        assert info["usedResource"] == total(mine), app
    for queue in ("root", *set(rm.apps.values())):
        info = await core.get_queue(rm.partition, queue)
        mine = [a for a in held if queue == "root" or rm.apps[a.application_id] == queue]
        assert info["allocatedResource"] == total(mine), queue
    [user] = await core.get_user_usage(rm.partition)
    assert user["queues"]["resourceUsage"] == total(held)


async def test_rms_recover_what_they_hold_after_the_daemon_is_killed(tmp_path: Path) -> None:
    first = Daemon(tmp_path)
    native = ModelRM("rm-native", "default", first.native)
    grpc = ModelRM("rm-grpc", "other", first.grpc)
    rms = (native, grpc)
    pace = Pace(rm.rm_id for rm in rms)
    second: Daemon | None = None
    running: list[asyncio.Task[None]] = []
    try:
        running = [asyncio.create_task(rm.run(pace)) for rm in rms]
        reached = asyncio.create_task(pace.reached(KILL_AFTER))
        done, _ = await asyncio.wait([reached, *running], timeout=30, return_when="FIRST_COMPLETED")
        assert reached in done, [t.result() for t in done]  # an RM that ended says why
        first.proc.send_signal(signal.SIGKILL)  # mid-stream: requests are in flight
        assert first.stop() == -signal.SIGKILL
        await pace.release()
        second = await asyncio.to_thread(  # the RMs are refused meanwhile, and try again
            Daemon,
            tmp_path,
            *("--native", first.native),
            *("--grpc", first.grpc.removeprefix("grpc://")),
            *("--http", first.http.removeprefix("http://")),
        )
        assert (second.native, second.grpc, second.http) == (first.native, first.grpc, first.http)
        await asyncio.wait_for(asyncio.gather(*running), 60)
        for rm in rms:
            assert rm.connections == 2, rm.lost  # one lost connection: the kill
            interrupted_at = rm.lost[0][0]  # then refused until the new daemon listened
            assert KILL_AFTER <= interrupted_at < len(rm.batches) - LEAD, rm.lost[0]
            assert len(rm.allocated) == ASKS  # every ask allocated once, in either core
            assert len(rm.held) + rm.released == ASKS
            assert rm.released > 0
            assert rm.recovered[0] == (0, 0)  # (held, asks sent again) per connection
            assert rm.recovered[1][0] > 0
        async with httpx.AsyncClient(base_url=second.http) as client:
            health = (await client.get("/ws/v1/scheduler/healthcheck")).json()
        assert health["Healthy"] is True, [c for c in health["HealthChecks"] if not c["Succeeded"]]
    finally:
        for task in running:
            task.cancel()
        if first.proc.poll() is None:
            first.stop()
        if second is not None:
            assert second.stop() == 0, second.logged()
    assert second is not None and "Traceback" not in second.logged(), second.logged()
