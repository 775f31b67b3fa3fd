"""The core: RM registration, the SI entry points, queries, and ``start_scheduler``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from loguru import logger

from actors import (
    Actor,
    ActorDeadError,
    ActorRef,
    ActorSystem,
    Clock,
    SystemClock,
    TimerHandle,
    wall_ns,
    wall_of,
)
from scheduler import si
from scheduler._errors import NotFoundError, SchedulerError
from scheduler.config._parser import SchedulerConfig, parse_config
from scheduler.config._timeouts import Timeouts
from scheduler.core._callback_actor import CallbackActor
from scheduler.core._event_log import DEFAULT_CAPACITY, EventLog
from scheduler.core._events import ConfigUpdated, Query, RMPaused
from scheduler.core._history import DEFAULT_HISTORY_SIZE, HistoryCollector, MetricsHistory
from scheduler.core._partition_actor import PartitionActor
from scheduler.core._proxy import DEFAULT_PARTITION, RMProxy, RMRecord, check_rm_id
from scheduler.core._views import config_info
from scheduler.si._callback import ResourceManagerCallback, check_callback, overrides

__all__ = ["PAUSED", "RUNNING", "STOPPED", "Core", "start_scheduler"]

# The states of a registered RM, the spec's names ("Status of RM in scheduler": init ->
# Running on registration, Running -> Paused on connection loss, Paused -> Stopped on
# timeout, Running or Paused -> Stopped when the RM shuts down of its own accord).
RUNNING = "Running"
PAUSED = "Paused"
STOPPED = "Stopped"
_STOPPED_KEPT = 1000  # Stopped RMs remembered for get_resource_managers()


class _Registration:
    """An RM's actors: its callback actor and one partition actor per partition; its
    state (``RUNNING`` or ``PAUSED``), since when, and a Paused RM's timeout."""

    def __init__(
        self,
        record: RMRecord,
        actors: dict[str, PartitionActor],
        config: SchedulerConfig,
        callback: CallbackActor | None = None,
        since: float = 0.0,
        build_info: dict[str, str] | None = None,
    ) -> None:
        self.record = record
        self.actors = actors
        self.config = config
        self.callback = callback
        self.state = RUNNING
        self.since = since
        self.timer: TimerHandle | None = None
        # What the RM said of its build, with its id under ``rmId`` (YuniKorn's SetRMInfo).
        self.build_info = {**(build_info or {}), "rmId": record.rm_id}

    @property
    def dropped(self) -> int:
        """Callback calls the RM's connection lost (a transport's stand-in counts them as
        ``dropped``: what it could not keep for the RM to resume)."""
        callback = self.callback.callback if self.callback is not None else None
        return int(getattr(callback, "dropped", 0))

    def tell_partitions(self, message: object) -> None:
        for actor in self.actors.values():
            if actor.actor_ref.alive:
                actor.actor_ref.tell(message)

    def stop_actors(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        for actor in self.actors.values():
            if actor.actor_ref.alive:
                actor.actor_ref.stop()  # its queue and application actors stop with it
        if self.record.callback.alive:
            self.record.callback.stop()

    def info(self, clock: Clock, state: str) -> dict[str, Any]:
        """What ``Core.get_resource_managers`` says of the RM in ``state``."""
        since = self.since if state != STOPPED else clock.now()
        out: dict[str, Any] = {
            "rmID": self.record.rm_id,
            "state": state,
            "since": wall_ns(clock, since),
            "partitions": sorted(self.actors),
            "droppedCallbacks": self.dropped,
            "buildInfo": dict(self.build_info),
        }
        if state == PAUSED and self.timer is not None:
            out["stopsAt"] = wall_ns(clock, self.timer.due)
        return out


class _RMTimeout:
    """A Paused RM's time is up (unless it registered again since)."""

    __slots__ = ("reg", "rm_id")

    def __init__(self, rm_id: str, reg: _Registration) -> None:
        self.rm_id = rm_id
        self.reg = reg


class _Lifecycle(Actor):
    """Hears the core's RM timeouts on the actor system's clock, and stops the RM."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def receive(self, message: object) -> object:
        if isinstance(message, _RMTimeout):
            self.core._rm_timed_out(message.rm_id, message.reg)
        return None


class Core:
    """The scheduler core, as ``start_scheduler()`` yields it.

    An RM registers with ``register_resource_manager`` and then sends SI requests through
    ``update_node``, ``update_application``, ``update_allocation`` and
    ``update_configuration``; the outcomes come back through its callback. ``settle()``
    waits until everything sent has been processed; the ``get_*`` queries and
    ``state_dump()`` answer with JSON shaped like YuniKorn's REST API. ``docs/in-process.md``
    shows it driven; ``docs/design.md`` says how it works inside.

    Attributes:
        system: the actor system every actor of the core runs on.
        timeouts: the state timeouts in effect.
        start_time: when the core started, in Unix nanoseconds of its clock.
        history: running applications and containers, sampled once a minute of the core's
            clock (``GET /ws/v1/history/apps`` and ``/history/containers``). Read it.
    """

    def __init__(
        self,
        system: ActorSystem,
        *,
        timeouts: Timeouts | None = None,
        event_capacity: int = DEFAULT_CAPACITY,
        history_size: int = DEFAULT_HISTORY_SIZE,
    ) -> None:
        self.system = system
        self.timeouts = timeouts or Timeouts()
        self.start_time = wall_ns(system.clock, system.clock.now())
        self.history = MetricsHistory(history_size)
        self._events = EventLog(event_capacity)
        self.proxy = RMProxy()
        self._registrations: dict[str, _Registration] = {}
        self._predicates: dict[str, bool] = {}
        self._outstanding: dict[str, bool] = {}
        self._generation = 0
        self._stopped: dict[str, dict[str, Any]] = {}  # the latest Stopped RMs, by id
        self._lifecycle: ActorRef | None = None

    @property
    def clock(self) -> Clock:
        """The clock every timeout of the core reads."""
        return self.system.clock

    @property
    def events(self) -> EventLog:
        """Every event the core sent to any RM, in the order each RM got them, numbered
        from 0 (the newest ``event_capacity`` are kept), and subscriptions to them as they
        are sent (``GET /ws/v1/events/batch`` and ``/ws/v1/events/stream``). Read it; the
        core alone writes it."""
        return self._events

    # ====================================================================== registration
    async def register_resource_manager(
        self, request: si.RegisterResourceManagerRequest, callback: ResourceManagerCallback
    ) -> si.RegisterResourceManagerResponse:
        """Register an RM; registering an ``rm_id`` again drops all state of that RM.

        The RM is then ``Running``. Registering again, Running or ``Paused`` (see
        ``rm_disconnected``), drops its state as the spec says ("If RM register with the
        same ID, all previous scheduling state in memory will be cleaned up, and expect RM
        report full scheduling state after registration") and cancels a Paused RM's
        timeout; a ``Stopped`` RM registers as a new one.

        Raises:
            SchedulerError: malformed request, a callback that is a class or lacks the SI
                coroutine methods, or invalid configuration.
        """
        if type(request) is not si.RegisterResourceManagerRequest:
            raise SchedulerError(
                f"expected si.RegisterResourceManagerRequest, got {type(request).__name__}"
            )
        rm_id = check_rm_id(request.rm_id)
        check_callback(callback)
        config = parse_config(_config_text(request.config))
        build = _build_info(request.build_info)
        old = self._registrations.pop(rm_id, None)
        if old is not None:
            logger.bind(rm_id=rm_id).info(
                "resource manager registers again ({}{}): state dropped",
                old.state,
                f", {old.dropped} callback calls dropped while Paused" if old.dropped else "",
            )
            self.proxy.rms.pop(rm_id, None)
            old.stop_actors()
        self._stopped.pop(rm_id, None)
        self._registrations[rm_id] = self._start_rm(rm_id, callback, config, build)
        logger.bind(rm_id=rm_id).info(
            "resource manager registered with partitions {}", [p.name for p in config.partitions]
        )
        return si.RegisterResourceManagerResponse()

    def _start_rm(
        self,
        rm_id: str,
        callback: ResourceManagerCallback,
        config: SchedulerConfig,
        build: dict[str, str],
    ) -> _Registration:
        self._generation += 1
        gen = self._generation
        callback_actor = CallbackActor(rm_id, callback, self._events)
        callback_ref = self.system.spawn(callback_actor, name=f"rm:{rm_id}#{gen}/callback")
        self._predicates[rm_id] = overrides(callback, "predicates")
        self._outstanding[rm_id] = overrides(callback, "update_container_scheduling_state")
        record = RMRecord(rm_id, callback_ref)
        actors: dict[str, PartitionActor] = {}
        for pconf in config.partitions:
            actors[pconf.name] = self._spawn_partition(record, gen, pconf)
        self.proxy.rms[rm_id] = record
        return _Registration(record, actors, config, callback_actor, self.clock.now(), build)

    def _spawn_partition(self, record: RMRecord, gen: int, pconf: Any) -> PartitionActor:
        rm_id = record.rm_id
        name = f"rm:{rm_id}#{gen}/partition:{pconf.name}"
        dispatcher = self.system.dispatcher(name)
        directory: dict[str, ActorRef] = {}
        actor = PartitionActor(
            pconf,
            rm_id=rm_id,
            callback=record.callback,
            dispatcher=dispatcher,
            timeouts=self.timeouts,
            predicates=self._predicates.get(rm_id, False),
            directory=directory,
            outstanding=self._outstanding.get(rm_id, False),
        )
        record.add_partition(
            pconf.name, self.system.spawn(actor, name=name, dispatcher=dispatcher), directory
        )
        return actor

    # ========================================================================= lifecycle
    def rm_disconnected(self, rm_id: str, callback: object = None) -> bool:
        """The connection of a registered RM is lost (a transport calls this): the RM is
        ``Paused``, and ``Stopped`` after ``timeouts.rm_paused`` seconds of the core's
        clock unless it registers again. Returns whether it was paused.

        While Paused the core keeps its state, and its partitions stay its own, but they
        make no allocation, release or rejection of their own accord: no pass and no
        preemption runs for them (the RM could not hear of the outcome), and predicates
        refuse the node. What still happens (a placeholder's or a gang's timeout, an
        application's state) goes to the callback as before: a transport keeps it for the
        RM to resume (``rm_reconnected``). When Stopped, its partitions, queues,
        applications and nodes are dropped, as a registration again drops them, and its
        id and partitions are free.

        Args:
            rm_id: the RM whose connection is lost.
            callback: the callback the transport registered it with; when given, an RM
                registered since with another callback (over a new connection) is left
                alone.
        """
        reg = self._registrations.get(rm_id)
        if reg is None or reg.state != RUNNING:
            return False
        if (
            callback is not None
            and reg.callback is not None
            and reg.callback.callback is not callback
        ):
            return False
        reg.state = PAUSED
        reg.since = self.clock.now()
        if reg.callback is not None:
            reg.callback.paused = True
        reg.tell_partitions(RMPaused(paused=True))
        if self._lifecycle is None or not self._lifecycle.alive:
            self._lifecycle = self.system.spawn(_Lifecycle(self), name="core/rm-lifecycle")
        reg.timer = self.system.timers.after(
            self.timeouts.rm_paused, _RMTimeout(rm_id, reg), to=self._lifecycle
        )
        logger.bind(rm_id=rm_id).warning(
            "resource manager {} lost its connection: Paused, Stopped in {:g}s unless it "
            "registers again",
            rm_id,
            self.timeouts.rm_paused,
        )
        return True

    def is_registered(self, rm_id: str, callback: object) -> bool:
        """``rm_id`` is registered (Running or Paused) with ``callback``."""
        reg = self._registrations.get(rm_id)
        return reg is not None and reg.callback is not None and reg.callback.callback is callback

    def rm_reconnected(self, rm_id: str, callback: object) -> bool:
        """A Paused RM is back on a new connection with its session (a transport calls
        this once it resumed the session: what it kept for the RM is on its way). The RM is
        ``Running`` again with all its state: its timeout is cancelled, its partitions
        schedule again and its predicates are asked. Returns whether ``rm_id`` is
        registered with ``callback`` (Running already, when the transport has not yet
        seen its old connection go); False when it was Stopped or registered again since.
        """
        reg = self._registrations.get(rm_id)
        if reg is None or reg.callback is None or reg.callback.callback is not callback:
            return False
        if reg.state != PAUSED:
            return True
        if reg.timer is not None:
            reg.timer.cancel()
            reg.timer = None
        paused_for = self.clock.now() - reg.since
        reg.state = RUNNING
        reg.since = self.clock.now()
        reg.callback.paused = False
        reg.tell_partitions(RMPaused(paused=False))
        logger.bind(rm_id=rm_id).info(
            "resource manager {} resumed its session after {:.3g}s Paused: Running",
            rm_id,
            paused_for,
        )
        return True

    async def stop_resource_manager(self, rm_id: str) -> None:
        """The RM shuts down of its own accord (the spec's "RM voluntarily shutdown"):
        Running or Paused, it is ``Stopped`` now, and its partitions, queues, applications
        and nodes are dropped, as when a Paused RM's time is up. Its id and partitions are
        free at once; its actors finish stopping in the background (``settle()`` waits
        for them). Stopping an RM that is already Stopped does nothing.

        Raises:
            SchedulerError: a malformed ``rm_id``.
            NotFoundError: no RM of that id was ever registered (or it was forgotten).
        """
        rm_id = check_rm_id(rm_id)
        reg = self._registrations.get(rm_id)
        if reg is None:
            if rm_id in self._stopped:
                return
            raise NotFoundError(f"resource manager {rm_id!r} is not registered")
        self._stop_rm(rm_id, reg)
        logger.bind(rm_id=rm_id).info(
            "resource manager {} Stopped at its own request (it was {}); its partitions {} "
            "and their state dropped",
            rm_id,
            reg.state,
            sorted(reg.actors),
        )

    def _rm_timed_out(self, rm_id: str, reg: _Registration) -> None:
        if self._registrations.get(rm_id) is not reg or reg.state != PAUSED:
            return  # registered again since
        self._stop_rm(rm_id, reg)
        logger.bind(rm_id=rm_id).warning(
            "resource manager {} Stopped: no registration {:g}s after it lost its connection;"
            " its partitions {} and their state dropped ({} callback calls dropped while "
            "Paused)",
            rm_id,
            self.timeouts.rm_paused,
            sorted(reg.actors),
            reg.dropped,
        )

    def _stop_rm(self, rm_id: str, reg: _Registration) -> None:
        """``reg`` is Stopped: its actors and its state go, its id is remembered."""
        del self._registrations[rm_id]
        self.proxy.rms.pop(rm_id, None)
        self._predicates.pop(rm_id, None)
        self._outstanding.pop(rm_id, None)
        reg.stop_actors()
        self._stopped.pop(rm_id, None)
        self._stopped[rm_id] = reg.info(self.clock, STOPPED)
        while len(self._stopped) > _STOPPED_KEPT:
            del self._stopped[next(iter(self._stopped))]

    # ============================================================================ updates
    async def update_node(self, request: si.NodeRequest) -> None:
        """Add, update, drain or remove nodes; outcomes arrive through the callback."""
        self.proxy.update_node(request)

    async def update_application(self, request: si.ApplicationRequest) -> None:
        """Add or remove applications; outcomes arrive through the callback."""
        self.proxy.update_application(request)

    async def update_allocation(self, request: si.AllocationRequest) -> None:
        """Add, update or release asks and release allocations."""
        self.proxy.update_allocation(request)

    async def update_configuration(self, request: si.UpdateConfigurationRequest) -> None:
        """Replace the RM's queue configuration; the old one stays if the new is invalid.

        Raises:
            SchedulerError: malformed request, unknown RM, or invalid configuration.
        """
        if type(request) is not si.UpdateConfigurationRequest:
            raise SchedulerError(
                f"expected si.UpdateConfigurationRequest, got {type(request).__name__}"
            )
        rm_id = check_rm_id(request.rm_id)
        reg = self._registrations.get(rm_id)
        if reg is None:
            raise SchedulerError(f"resource manager {rm_id!r} is not registered")
        config = parse_config(_config_text(request.config))
        new_names = {p.name for p in config.partitions}
        for name in set(reg.actors) - new_names:
            info = await self._ask(reg.record.partitions[name], Query(kind="partition"))
            if info["totalNodes"] or info["applications"]["total"]:
                raise SchedulerError(
                    f"partition {name!r} still has nodes or applications and cannot be removed"
                )
        for pconf in config.partitions:  # check everything before changing anything
            ref = reg.record.partitions.get(pconf.name)
            if ref is not None:
                await self._ask(ref, ConfigUpdated(config=pconf, dry_run=True))
        for pconf in config.partitions:
            ref = reg.record.partitions.get(pconf.name)
            if ref is not None:
                await self._ask(ref, ConfigUpdated(config=pconf))
            else:
                self._generation += 1
                reg.actors[pconf.name] = self._spawn_partition(reg.record, self._generation, pconf)
        for name in set(reg.actors) - new_names:
            actor = reg.actors.pop(name)
            reg.record.remove_partition(name)
            actor.actor_ref.stop()  # its queue and application actors stop with it
        reg.config = config

    # =========================================================================== queries
    async def settle(self) -> None:
        """Return once everything sent so far, and all it caused, has been processed."""
        await self.system.settle()

    def _partition_ref(self, partition: str) -> ActorRef:
        """The partition a query names. Two RMs may each have a partition of the same name,
        as in YuniKorn, which calls them ``[rmID]name``: that name finds the RM's own; a
        plain ``name`` (empty: ``default``) finds the one of the RM registered first, as
        YuniKorn's REST, which drops the RM id, finds one of them."""
        if not isinstance(partition, str):
            raise SchedulerError(f"partition name must be a string, got {partition!r}")
        regs = self._registrations.values()
        for reg in regs:
            ref = reg.record.partitions.get(partition or DEFAULT_PARTITION)
            if ref is not None:
                return ref
        if partition.startswith("["):
            for reg in regs:
                prefix = f"[{reg.record.rm_id}]"
                if partition.startswith(prefix):
                    ref = reg.record.partitions.get(partition[len(prefix) :] or DEFAULT_PARTITION)
                    if ref is not None:
                        return ref
        raise NotFoundError(f"partition {partition!r} not found")

    async def _ask(self, ref: ActorRef, query: Any) -> Any:
        try:
            return await ref.ask(query)
        except ActorDeadError:
            raise SchedulerError("the scheduler core has stopped") from None

    async def query(self, partition: str, kind: str) -> Any:
        """What one partition answers to the query ``kind`` (``nodes``, ``applications``,
        ``users``, ``groups``, ...): the REST list endpoints read only what they answer,
        never the whole state dump. An unknown partition raises ``NotFoundError``."""
        return await self._ask(self._partition_ref(partition), Query(kind=kind))

    async def get_partitions(self) -> list[dict[str, Any]]:
        """Every partition, as ``GET /ws/v1/partitions`` shows it."""
        refs = [
            ref for reg in self._registrations.values() for ref in reg.record.partitions.values()
        ]
        return [await self._ask(ref, Query(kind="partition")) for ref in refs]

    async def get_queue(self, partition: str, queue_path: str) -> dict[str, Any]:
        """One queue with its children, as ``GET /ws/v1/partition/{p}/queue/{q}``."""
        info: dict[str, Any] = await self._ask(
            self._partition_ref(partition), Query(kind="queue", key=str(queue_path))
        )
        return info

    async def get_application(self, partition: str, application_id: str) -> dict[str, Any]:
        """One application in any state until it expires."""
        info: dict[str, Any] = await self._ask(
            self._partition_ref(partition), Query(kind="application", key=str(application_id))
        )
        return info

    async def get_node(self, partition: str, node_id: str) -> dict[str, Any]:
        """One node with its allocations."""
        info: dict[str, Any] = await self._ask(
            self._partition_ref(partition), Query(kind="node", key=str(node_id))
        )
        return info

    async def get_nodes(self, partition: str) -> list[dict[str, Any]]:
        """Every node of a partition, as ``GET /ws/v1/partition/{p}/nodes``."""
        nodes: list[dict[str, Any]] = await self.query(partition, "nodes")
        return nodes

    async def get_applications(self, partition: str) -> list[dict[str, Any]]:
        """Every application of a partition, in any state, as
        ``GET /ws/v1/partition/{p}/applications`` (without a ``state``)."""
        part: dict[str, Any] = await self.query(partition, "applications")
        apps: list[dict[str, Any]] = [*part["applications"], *part["terminatedApplications"]]
        return apps

    async def get_events(
        self, start: int | None = None, count: int | None = None
    ) -> dict[str, Any]:
        """A page of ``events`` as ``GET /ws/v1/events/batch?start=&count=``
        (``EventLog.batch``); ``SchedulerError`` for a negative ``start`` or a ``count``
        below 1."""
        return self._events.batch(start, count)

    async def get_user_usage(self, partition: str) -> list[dict[str, Any]]:
        """What each user runs below each queue, against its limits, as
        ``GET /ws/v1/partition/{p}/usage/users`` (YuniKorn 1.3+) shows it.

        A user is listed while it has applications that hold allocations, or when the
        configuration gives it a limit of its own.

        Raises:
            NotFoundError: no such partition.
        """
        info: list[dict[str, Any]] = await self.query(partition, "users")
        return info

    async def get_group_usage(self, partition: str) -> list[dict[str, Any]]:
        """What each group runs below each queue, against its limits, as
        ``GET /ws/v1/partition/{p}/usage/groups`` shows it. An application is charged to
        one group at most: the first of its user's groups that the limits name, from its
        queue up, or the wildcard group.

        Raises:
            NotFoundError: no such partition.
        """
        info: list[dict[str, Any]] = await self.query(partition, "groups")
        return info

    async def get_config(self) -> dict[str, dict[str, Any]]:
        """The queue configuration in force for each registered RM, by RM id: what its
        partitions were configured with, as the ``queues.yaml`` document that gives it
        (``partitions`` and ``checksum``; YuniKorn's ``GET /ws/v1/config``). Empty while no
        RM is registered.
        """
        return {rm_id: config_info(reg.config) for rm_id, reg in self._registrations.items()}

    async def get_resource_managers(self) -> list[dict[str, Any]]:
        """Every RM the core knows, by id: ``rmID``, ``state`` (``Running``, ``Paused``
        or ``Stopped``, the spec's names), ``since`` (when it entered that state, in
        nanoseconds of the core's clock, as ``state_dump``'s ``timestamp``), its
        ``partitions``, ``droppedCallbacks`` (callback calls its transport lost: more than
        it keeps for a Paused RM to resume), ``buildInfo`` (the registration's
        ``build_info`` and ``rmId``), and for a Paused RM ``stopsAt``. The latest 1000
        Stopped RMs are kept.
        """
        out: dict[str, dict[str, Any]] = dict(self._stopped)
        for rm_id, reg in self._registrations.items():
            out[rm_id] = reg.info(self.clock, reg.state)
        return [dict(out[rm_id]) for rm_id in sorted(out)]

    async def state_dump(self, *, detail: bool = True) -> dict[str, Any]:
        """Every partition, queue, application and node in one JSON-able document;
        ``resourceManagerStates`` is ``get_resource_managers()``, ``failedNodes`` the new
        nodes refused before a partition. Without ``detail``, no asks or allocations are
        listed (``/ws/v1/metrics`` at each scrape): it costs per application, queue, node."""
        kind = "dump" if detail else "summary"
        partitions = []
        # Copies: an RM may register (or stop) while the partitions answer.
        for reg in list(self._registrations.values()):
            for ref in list(reg.record.partitions.values()):
                try:
                    partitions.append(await ref.ask(Query(kind=kind)))
                except ActorDeadError:  # its RM stopped, or registered again, meanwhile
                    continue
        return {
            "timestamp": wall_ns(self.clock, self.clock.now()),
            "resourceManagers": sorted(self._registrations),
            "resourceManagerStates": await self.get_resource_managers(),
            "partitions": partitions,
            "failedNodes": self.proxy.failed_nodes,
            "actors": {name: _stats(s) for name, s in self.system.stats().items()},
            "retiredActors": {k: _stats(s) for k, s in self.system.retired_stats().items()},
        }

    def __repr__(self) -> str:
        return f"<Core rms={sorted(self._registrations)} {self.system!r}>"


def _stats(stats: Any) -> dict[str, Any]:
    return {
        f: getattr(stats, f)
        for f in ("queued", "peak", "processed", "handler_time", "failures", "suspended", "resumed")
    }


def _build_info(info: object) -> dict[str, str]:
    if not isinstance(info, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in info.items()
    ):
        raise SchedulerError(f"build_info must map strings to strings, got {info!r}")
    return {k: v for k, v in info.items() if k != "rmId"}


def _config_text(config: object) -> str:
    if not isinstance(config, str):
        raise SchedulerError(f"config must be YAML text, got {type(config).__name__}")
    return config


@asynccontextmanager
async def start_scheduler(
    *,
    clock: Clock | None = None,
    timeouts: Timeouts | None = None,
    event_capacity: int = DEFAULT_CAPACITY,
    history_size: int = DEFAULT_HISTORY_SIZE,
) -> AsyncIterator[Core]:
    """Start a scheduler core in this event loop; leaving the block stops every actor.

    Args:
        clock: the clock every timeout reads (default: the system's monotonic clock);
            ``scheduler.testing.ManualClock`` for tests.
        timeouts: YuniKorn's state timeouts, to change for a test or a demo.
        event_capacity: how many of the latest events ``Core.events`` keeps.
        history_size: how many of the latest samples ``Core.history`` keeps.
    """
    system = ActorSystem(clock or SystemClock())
    owner = asyncio.get_running_loop().create_task(system.run())
    try:
        await system.ready()
        core = Core(
            system, timeouts=timeouts, event_capacity=event_capacity, history_size=history_size
        )
        HistoryCollector(core.history, core.get_partitions, wall_of(system.clock)).start(system)
        try:
            yield core
        finally:
            core.events.close("the scheduler core stopped")
    finally:
        system.stop()
        await owner
