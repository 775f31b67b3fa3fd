"""The engine: plays a scenario against a core on virtual time and hands back a RunResult.

Every action (a job arriving, a pod finishing, a release confirmed, a cluster event, a
sample) is kept in a heap by tick (``Scenario.tick`` seconds). At each tick the engine
applies every due action, sends what they made in as few SI requests as it can (nodes,
then applications, then one allocation request of asks and releases, then removals),
settles the core, and lets the simulated RM's reactions to the core's callbacks go on the
heap. Between ticks the core's clock moves one tick at a time: the core's own timers
(placeholder timeouts, preemption delays, completion) fire on the way, in order, and what
the RM does about them lands on a later tick, never in the past.

Three ways to run: virtual time (a ``ManualClock``, as fast as the core goes), realtime
(the same clock, moved in step with the wall clock, ``speed`` times faster), and
``connect`` (a running daemon, through ``scheduler.client.connect``, on the wall clock).
"""

from __future__ import annotations

import heapq
import math
import random
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any, Protocol

import anyio

from scheduler import si
from scheduler.client import connect as connect_daemon
from scheduler.core import start_scheduler
from scheduler.simulate._model import ClusterEvent, Configuration, Scenario, ScenarioError
from scheduler.simulate._result import QueueSample, RunResult, Sample, SimEvent
from scheduler.simulate._shim import PARTITION, RM_ID, SimulatedShim, draw_runtime
from scheduler.simulate._units import counted, short_duration
from scheduler.testing import ManualClock

__all__ = ["OnSample", "arrival_times", "run_all", "run_scenario"]

OnSample = Callable[[Sample], None]


class _CoreLike(Protocol):
    async def register_resource_manager(
        self, request: si.RegisterResourceManagerRequest, callback: Any
    ) -> si.RegisterResourceManagerResponse: ...
    async def update_node(self, request: si.NodeRequest) -> None: ...
    async def update_application(self, request: si.ApplicationRequest) -> None: ...
    async def update_allocation(self, request: si.AllocationRequest) -> None: ...
    async def settle(self) -> None: ...
    async def get_queue(self, partition: str, queue_path: str) -> dict[str, Any]: ...
    async def get_partitions(self) -> list[dict[str, Any]]: ...


async def run_scenario(
    scenario: Scenario,
    *,
    configuration: str | None = None,
    on_sample: OnSample | None = None,
    realtime: bool = False,
    speed: float = 1.0,
    connect: str | None = None,
    token: str = "",
) -> RunResult:
    """Play ``scenario`` with one of its configurations (the first when None).

    Args:
        scenario: What to play (``load_scenario``, ``builtin_scenario``).
        configuration: The name of the configuration to play it with.
        on_sample: Called with each ``Sample`` as it is taken (every ``sample_every`` of
            virtual time, and at the end).
        realtime: Move virtual time with the wall clock, ``speed`` times faster.
        speed: How much faster than the wall clock realtime and ``connect`` runs go.
        connect: A daemon's address (``tcp://host:port``, ...): drive it instead of an
            in-process core, on the wall clock (the daemon's own timers run at its pace).
        token: The daemon's shared token, with ``connect``.

    Raises:
        ScenarioError: The core refused the scenario's configuration.
    """
    if speed <= 0 or not math.isfinite(speed):
        raise ScenarioError(f"speed must be above 0, got {speed!r}", source=scenario.source)
    config = scenario.configuration(configuration)
    started = time.perf_counter()
    if connect is not None:
        async with connect_daemon(connect, token=token) as remote:
            engine = _Engine(scenario, config, remote, None, on_sample, speed)
            await engine.run()
    else:
        clock = ManualClock()
        async with start_scheduler(clock=clock) as core:
            engine = _Engine(scenario, config, core, clock, on_sample, speed if realtime else 0.0)
            await engine.run()
    return engine.result(time.perf_counter() - started)


async def run_all(scenario: Scenario, **options: Any) -> list[RunResult]:
    """One RunResult per configuration of ``scenario``, each on the same seed and
    workload (``options`` as ``run_scenario`` takes them)."""
    return [
        await run_scenario(scenario, configuration=c.name, **options)
        for c in scenario.configurations
    ]


def arrival_times(scenario: Scenario, workload_index: int, rng: random.Random) -> list[float]:
    """When the jobs of one workload arrive, in order, within the scenario's duration."""
    a = scenario.workloads[workload_index].arrivals
    times = list(a.fixed)
    for b in a.bursts:
        times.extend([b.at] * b.count)
    for p in a.poisson:
        t = p.start
        while True:
            t += rng.expovariate(p.rate)
            if t >= p.until:
                break
            times.append(t)
    return sorted(t for t in times if t <= scenario.duration)


class _Engine:
    def __init__(
        self,
        scenario: Scenario,
        config: Configuration,
        core: _CoreLike,
        clock: ManualClock | None,
        on_sample: OnSample | None,
        pace: float,
    ) -> None:
        self.scenario = scenario
        self.config = config
        self.core = core
        self.clock = clock  # None: a daemon on the wall clock
        self.on_sample = on_sample
        self.pace = pace  # 0: as fast as it goes; else virtual seconds per wall second
        self.tick = scenario.tick
        self.last = math.ceil(scenario.duration / self.tick - 1e-9)
        self.current = 0  # the tick being applied
        self.floor = 0  # the earliest tick a new action may have
        self.heap: list[tuple[int, int, Callable[[], None]]] = []
        self.seq = 0
        self.samples: list[Sample] = []
        self.skipped: list[SimEvent] = []  # events after the end, never played
        self.restart = False
        self.sample_due = False
        self.wall0 = 0.0
        self.shim = SimulatedShim(scenario, config, self.now, self.schedule)

    # ------------------------------------------------------------------ time
    def now(self) -> float:
        if self.clock is not None:
            return self.clock.now()
        return min((time.monotonic() - self.wall0) * self.pace, self.last * self.tick)

    def schedule(self, at: float, action: Callable[[], None]) -> None:
        index = max(math.ceil(at / self.tick - 1e-9), self.floor)
        if index > self.last:
            return  # after the end: never happens in this run
        self.seq += 1
        heapq.heappush(self.heap, (index, self.seq, action))

    async def _move_to(self, index: int) -> None:
        """Virtual time to tick ``index``, one tick at a time so that the core's timers
        on the way fire in order and nothing the RM does about them is late."""
        while self.current < index:
            target = self.current + 1
            if self.heap and self.heap[0][0] > target and self.clock is None:
                target = self.heap[0][0]  # a daemon's timers are its own: wait once
            self.floor = target
            if self.pace:
                wait = self.wall0 + target * self.tick / self.pace - time.monotonic()
                if wait > 0:
                    await anyio.sleep(wait)
            if self.clock is not None:
                await self.clock.advance(target * self.tick - self.clock.now())
            self.current = target

    # ------------------------------------------------------------------ the run
    async def run(self) -> None:
        s = self.scenario
        response = self._register()
        try:
            await response
        except ValueError as exc:  # the core's SchedulerError: a configuration it refused
            raise ScenarioError(
                f"configuration {self.config.name!r}: {exc}", source=s.source
            ) from None
        self.wall0 = time.monotonic()
        for group in s.nodes:
            self.shim.add_nodes(group, group.count)
        self._plan()
        await self._flush()
        while self.heap:
            index = self.heap[0][0]
            await self._move_to(index)
            self.floor = index + 1
            while self.heap and self.heap[0][0] <= index:
                _, _, action = heapq.heappop(self.heap)
                action()
            await self._flush()
            if self.restart:
                self.restart = False
                await self._restart()
        await self._move_to(self.last)

    def _register(self) -> Any:
        request = si.RegisterResourceManagerRequest(
            rm_id=RM_ID, policy_group="default", version="simulate", config=self.config.queues
        )
        return self.core.register_resource_manager(request, self.shim)

    def _plan(self) -> None:
        """Every arrival, event and sample of the run on the heap, drawn from one random
        stream per workload (seeded by the scenario's seed and the workload's name, so a
        workload added or removed changes no other)."""
        s = self.scenario
        for i, w in enumerate(s.workloads):
            rng = random.Random(f"{s.seed}/{w.name}")
            real = w.job.pods + (1 if w.job.kind == "spark" else 0)
            for number, at in enumerate(arrival_times(s, i, rng), start=1):
                runtimes = [draw_runtime(rng, w.job) for _ in range(real)]
                self.schedule(at, partial(self.shim.arrive, w, number, runtimes))
        for event in s.events:
            if math.ceil(event.at / self.tick - 1e-9) > self.last:
                self.skipped.append(_skipped(event, self.last * self.tick))
            else:
                self.schedule(event.at, partial(self._event, event))
        every = max(1, round(s.sample_every / self.tick))
        for index in range(0, self.last + 1, every):
            self.schedule(index * self.tick, self._sample_later)
        if self.last % every:
            self.schedule(self.last * self.tick, self._sample_later)

    def _sample_later(self) -> None:
        self.sample_due = True

    def _event(self, event: ClusterEvent) -> None:
        now = self.now()
        groups = {g.name: g for g in self.scenario.nodes}
        group = event.group
        if event.kind == "nodes_added":
            ids = self.shim.add_nodes(groups[group], event.count)
            detail = f"{counted(len(ids), 'node')} of {group} added: {_ids(ids)}"
            kind = "node-added"
        elif event.kind == "nodes_drained":
            up = len(self.shim.group_nodes(group, "up"))
            ids = self.shim.drain_nodes(group, event.count)
            if ids:
                detail = f"{counted(len(ids), 'node')} of {group} drained"
                detail += _short(len(ids), event.count, up) + f": {_ids(ids)}"
            else:
                detail = f"none: {_none_left(self.shim, group, 'drained')}"
            kind = "node-drained"
        elif event.kind == "nodes_removed":
            up = len(self.shim.group_nodes(group, "up", "drained"))
            ids, lost = self.shim.remove_nodes(group, event.count)
            if ids:
                detail = f"{counted(len(ids), 'node')} of {group} removed"
                detail += _short(len(ids), event.count, up)
                detail += f", {counted(lost, 'pod')} lost: {_ids(ids)}"
            else:
                detail = f"none: {_none_left(self.shim, group, 'removed')}"
            kind = "node-removed"
        else:
            self.restart = True
            return
        self.shim.events.append(SimEvent(time=now, kind=kind, detail=detail))

    async def _restart(self) -> None:
        """The RM restarts: it registers again (the core drops its state) and recovers
        applications, then nodes with the pods on them, then the pods still waiting."""
        await self._register()
        apps, nodes, asks = self.shim.recover()
        await self.core.update_application(apps)
        await self.core.update_node(nodes)
        if asks:
            await self.core.update_allocation(si.AllocationRequest(rm_id=RM_ID, asks=asks))
        await self.core.settle()
        recovered = sum(len(n.existing_allocations) for n in nodes.nodes)
        self.shim.events.append(
            SimEvent(
                time=self.now(),
                kind="rm-restarted",
                detail=f"recovered {counted(len(apps.new), 'application')}, "
                f"{counted(len(nodes.nodes), 'node update')} with {counted(recovered, 'pod')}, "
                f"{counted(len(asks), 'pod')} waiting",
            )
        )
        await self._flush()

    async def _flush(self) -> None:
        out = self.shim.out.take()
        if out.nodes:
            await self.core.update_node(si.NodeRequest(rm_id=RM_ID, nodes=out.nodes))
        if out.apps:
            await self.core.update_application(si.ApplicationRequest(rm_id=RM_ID, new=out.apps))
        if out.asks or out.releases:
            releases = (
                si.AllocationReleasesRequest(allocations_to_release=out.releases)
                if out.releases
                else None
            )
            await self.core.update_allocation(
                si.AllocationRequest(rm_id=RM_ID, asks=out.asks, releases=releases)
            )
        if out.removes:
            await self.core.update_application(
                si.ApplicationRequest(rm_id=RM_ID, remove=out.removes)
            )
        await self.core.settle()
        if self.sample_due:
            self.sample_due = False
            await self._sample()

    async def _sample(self) -> None:
        """The cluster now: queues from one query of the queue tree, the partition's
        allocation from one query, the pods from what the RM tracks."""
        root = await self.core.get_queue(PARTITION, "root")
        partitions = await self.core.get_partitions()
        allocated: dict[str, int] = {}
        for p in partitions:
            if p.get("name") == PARTITION:
                allocated = dict(p["capacity"]["usedCapacity"])
        queues: list[QueueSample] = []
        stack = [root]
        while stack:
            q = stack.pop()
            queues.append(
                QueueSample(
                    queue=q["queuename"],
                    allocated=dict(q["allocatedResource"]),
                    guaranteed=dict(q["guaranteedResource"]),
                    max=dict(q["maxResource"]),
                    pending=dict(q["pendingResource"]),
                )
            )
            stack.extend(reversed(q["children"]))
        shim = self.shim
        sample = Sample(
            time=self.now(),
            capacity=dict(shim.capacity),
            allocated=allocated,
            pending_pods=shim.pending_pods,
            running_pods=shim.running_pods,
            allocations=shim.allocations,
            preemptions=shim.preemptions,
            gangs_waiting=shim.gangs_waiting,
            gangs_running=shim.gangs_running,
            queues=queues,
        )
        self.samples.append(sample)
        if self.on_sample is not None:
            self.on_sample(sample)

    def result(self, wall: float) -> RunResult:
        shim = self.shim
        breaches = list(shim.breaches)
        if shim.breach_count > len(breaches):
            breaches.append(f"... and {shim.breach_count - len(breaches)} more")
        return RunResult(
            scenario=self.scenario.name,
            configuration=self.config.name,
            seed=self.scenario.seed,
            duration=self.last * self.tick,
            wall_seconds=wall,
            samples=self.samples,
            pods=shim.pod_records,
            gangs=shim.gang_records,
            events=[*shim.events, *self.skipped],  # the skipped come after every other
            jobs=shim.job_records,
            breaches=breaches,
        )


def _skipped(event: ClusterEvent, end: float) -> SimEvent:
    """An event the scenario puts after the run's end, as the events list shows it."""
    what = event.kind if event.kind == "rm_restart" else f"{event.kind} of {event.group}"
    if event.kind != "rm_restart":
        what += f" ({event.count:,})"
    return SimEvent(
        time=event.at,
        kind="skipped",
        detail=f"{what}: after the run's end ({short_duration(end)}), not played",
    )


def _short(done: int, asked: int, up: int) -> str:
    """What an event that could not happen in full did: `` (3 of the 10 asked: the group
    had 3 up)``; nothing when it did."""
    return "" if done >= asked else f" ({done:,} of the {asked:,} asked: the group had {up:,} up)"


def _none_left(shim: SimulatedShim, group: str, what: str) -> str:
    """Why an event found no node of ``group`` to drain or remove."""
    if what == "drained" and shim.group_nodes(group, "drained"):
        return f"every node of {group} is drained already"
    return f"every node of {group} is removed already"


def _ids(ids: list[str]) -> str:
    return ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")


def with_overrides(
    scenario: Scenario, *, seed: int | None = None, duration: float | None = None
) -> Scenario:
    """The scenario with another seed or duration (``scheduler simulate --seed/--duration``)."""
    if seed is not None:
        scenario = replace(scenario, seed=seed)
    if duration is not None:
        if duration <= 0:
            raise ScenarioError("the duration must be above 0", source=scenario.source)
        scenario = replace(scenario, duration=duration)
    return scenario
