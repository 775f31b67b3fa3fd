"""Helpers for driving the core from tests and scripts: a manual clock, a recording RM, a
watch on the errors the core logs, and a scenario that drives the core as one RM.

The pytest plugin ``scheduler.pytest_plugin`` (registered through the ``pytest11`` entry
point) wraps these in fixtures; ``docs/testing.md`` shows both."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from loguru import logger

from actors import ManualClock
from scheduler import si
from scheduler.client import RemoteCore
from scheduler.core import Core, gang_tags, start_scheduler  # gang_tags: tests had it here
from scheduler.si._callback import ResourceManagerCallback

__all__ = [
    "DEFAULT_ASK",
    "DEFAULT_NODE",
    "DaemonProcess",
    "ErrorWatch",
    "ManualClock",
    "RecordingCallback",
    "Scenario",
    "gang_tags",
    "start_scenario",
]


class ErrorWatch:
    """Every record of level ERROR or worse logged while the watch is open.

    The runtime logs each failed actor handler, timer or hook at ERROR (with its traceback)
    and goes on; so does the RM proxy for a callback that raised. A test that opens a watch
    and checks it afterwards cannot pass over a crash that the core survived:

        with ErrorWatch() as errors:
            ...  # drive the core
        assert not errors, errors.report()

    ``allow`` lists substrings of messages that are expected (a test that makes an RM
    callback raise on purpose): those are kept apart in ``allowed``. Opening a watch turns
    the ``actors`` and ``scheduler`` loggers on (they are what it watches).
    """

    def __init__(self, *, allow: tuple[str, ...] = ()) -> None:
        self.allow = allow
        self.records: list[dict[str, Any]] = []
        self.allowed: list[dict[str, Any]] = []
        self._sink_id: int | None = None

    def __enter__(self) -> ErrorWatch:
        logger.enable("actors")
        logger.enable("scheduler")
        self._sink_id = logger.add(self._sink, level="ERROR", format="{message}", catch=False)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._sink_id is not None:
            with contextlib.suppress(ValueError):  # code under the watch called logger.remove()
                logger.remove(self._sink_id)
            self._sink_id = None

    def _sink(self, message: Any) -> None:
        record = message.record
        text = record["message"]
        if any(expected in text for expected in self.allow):
            self.allowed.append(record)
        else:
            self.records.append(record)

    def __bool__(self) -> bool:
        return bool(self.records)

    def __len__(self) -> int:
        return len(self.records)

    def report(self) -> str:
        """Each unexpected record: where it was logged, its message and its exception."""
        lines = [f"{len(self.records)} error(s) logged:"]
        for record in self.records:
            lines.append(f"- {record['name']}:{record['line']}: {record['message']}")
            exception = record["exception"]
            if exception is not None and exception.type is not None:
                lines.append(f"    {exception.type.__name__}: {exception.value}")
        return "\n".join(lines)


class RecordingCallback(ResourceManagerCallback):
    """An RM callback that keeps every response it is given, in order."""

    def __init__(self) -> None:
        self.allocation_responses: list[si.AllocationResponse] = []
        self.application_responses: list[si.ApplicationResponse] = []
        self.node_responses: list[si.NodeResponse] = []
        self.events: list[si.EventRecord] = []
        self.scheduling_states: list[si.UpdateContainerSchedulingStateRequest] = []

    async def update_allocation(self, response: si.AllocationResponse) -> None:
        self.allocation_responses.append(response)

    async def update_application(self, response: si.ApplicationResponse) -> None:
        self.application_responses.append(response)

    async def update_node(self, response: si.NodeResponse) -> None:
        self.node_responses.append(response)

    async def send_event(self, events: list[si.EventRecord]) -> None:
        self.events.extend(events)

    async def update_container_scheduling_state(
        self, request: si.UpdateContainerSchedulingStateRequest
    ) -> None:
        self.scheduling_states.append(request)

    @property
    def allocations(self) -> list[si.Allocation]:
        return [a for r in self.allocation_responses for a in r.new]

    @property
    def released(self) -> list[si.AllocationRelease]:
        return [a for r in self.allocation_responses for a in r.released]

    @property
    def released_asks(self) -> list[si.AllocationAskRelease]:
        return [a for r in self.allocation_responses for a in r.released_asks]

    @property
    def rejected_asks(self) -> list[si.RejectedAllocationAsk]:
        return [a for r in self.allocation_responses for a in r.rejected]

    @property
    def accepted_apps(self) -> list[str]:
        return [a.application_id for r in self.application_responses for a in r.accepted]

    @property
    def rejected_apps(self) -> list[si.RejectedApplication]:
        return [a for r in self.application_responses for a in r.rejected]

    def app_states(self, application_id: str) -> list[str]:
        return [
            u.state
            for r in self.application_responses
            for u in r.updated
            if u.application_id == application_id
        ]

    @property
    def accepted_nodes(self) -> list[str]:
        return [n.node_id for r in self.node_responses for n in r.accepted]

    @property
    def rejected_nodes(self) -> list[si.RejectedNode]:
        return [n for r in self.node_responses for n in r.rejected]


#: Resources of a node when :meth:`Scenario.add_nodes` is given none.
DEFAULT_NODE: Final[Mapping[str, int]] = {"memory": 100, "vcore": 10}
#: Resources of one allocation when :meth:`Scenario.ask` is given none.
DEFAULT_ASK: Final[Mapping[str, int]] = {"memory": 10, "vcore": 1}

_RM_INITIATED: Final = si.TerminationType.STOPPED_BY_RM


class Scenario:
    """One resource manager driving a core, in a few words per step.

    Every step sends one SI request with the RM id and partition filled in, then waits for
    the core to settle, so what the step caused (allocations, releases, state changes) is
    in :attr:`rm` when it returns. The core, the clock and the recording callback stay
    available for anything the helpers do not cover::

        async with start_scenario() as s:  # the built-in configuration: by namespace tag
            await s.add_nodes("n1", memory=100, vcore=10)
            await s.submit("app-1", tags={"namespace": "default"})  # root.default
            await s.ask("app-1", count=2, memory=10, vcore=1)
            s.assert_allocated("app-1", 2)

    Args:
        core: A running core (from :func:`scheduler.start_scheduler`), or a daemon's
            (from :func:`scheduler.client.connect`): the same steps drive either.
        clock: The clock the core was started with.
        rm: The callback the RM registers; a new :class:`RecordingCallback` by default.
        rm_id: The RM's id in every request.
        partition: The partition of every application, ask and release.
    """

    def __init__(
        self,
        core: Core | RemoteCore,
        clock: ManualClock,
        rm: RecordingCallback | None = None,
        *,
        rm_id: str = "rm-1",
        partition: str = "default",
    ) -> None:
        self.core = core
        self.clock = clock
        self.rm = rm if rm is not None else RecordingCallback()
        self.rm_id = rm_id
        self.partition = partition
        self._confirmed: set[str] = set()
        self._asks = 0

    def __repr__(self) -> str:
        return f"<Scenario {self.rm_id} live={len(self.allocations())} now={self.clock.now()}>"

    # ------------------------------------------------------------------ requests
    async def register(self, config: str = "") -> si.RegisterResourceManagerResponse:
        """Register the RM with queue configuration ``config`` (empty: the built-in default,
        YuniKorn's, which places an application by its ``namespace`` tag only).

        Raises:
            scheduler.SchedulerError: The configuration is invalid.
        """
        request = si.RegisterResourceManagerRequest(
            rm_id=self.rm_id, policy_group="default", version="1", config=config
        )
        response = await self.core.register_resource_manager(request, self.rm)
        await self.core.settle()
        return response

    async def add_nodes(self, *nodes: str | si.NodeInfo, **resources: int) -> None:
        """Add nodes: ids with ``resources`` each (:data:`DEFAULT_NODE` when none), or
        ready-made ``si.NodeInfo`` messages sent as they are."""
        capacity = si.Resource.of(**(resources or DEFAULT_NODE))
        infos = [
            n
            if isinstance(n, si.NodeInfo)
            else si.NodeInfo(
                node_id=n, action=si.ActionFromRM.CREATE, schedulable_resource=capacity
            )
            for n in nodes
        ]
        await self._send(self.core.update_node(si.NodeRequest(rm_id=self.rm_id, nodes=infos)))

    async def submit(
        self, app_id: str, *, queue: str = "root.default", user: str = "nobody", **fields: Any
    ) -> None:
        """Submit an application; ``fields`` are further ``si.AddApplicationRequest`` fields
        (``tags``, ``placeholder_ask``, ``gang_scheduling_style``, ...)."""
        fields.setdefault("ugi", si.UserGroupInformation(user=user))
        request = si.AddApplicationRequest(
            application_id=app_id, queue_name=queue, partition_name=self.partition, **fields
        )
        await self._send(
            self.core.update_application(si.ApplicationRequest(rm_id=self.rm_id, new=[request]))
        )

    async def submit_gang(
        self,
        app_id: str,
        task_groups: Mapping[str, int],
        *,
        style: str = "Soft",
        timeout: float | None = None,
        queue: str = "root.default",
        user: str = "nobody",
        **resources: int,
    ) -> None:
        """Submit a gang application and its placeholder asks.

        Args:
            app_id: The application id.
            task_groups: Members of each task group, ``{"workers": 3}``; each member is one
                placeholder ask named ``<app_id>-<group>-ph-<i>``.
            style: ``"Soft"`` or ``"Hard"``.
            timeout: The placeholder timeout in seconds (the core's default when ``None``).
            queue: The application's queue.
            user: The submitting user.
            resources: One member's resources (:data:`DEFAULT_ASK` when none).
        """
        member = dict(resources or DEFAULT_ASK)
        members = sum(task_groups.values())
        fields: dict[str, Any] = {
            "placeholder_ask": si.Resource.of(**{k: v * members for k, v in member.items()}),
            "gang_scheduling_style": style,
        }
        if timeout is not None:
            fields["execution_timeout_milliseconds"] = round(timeout * 1000)
        await self.submit(app_id, queue=queue, user=user, **fields)
        asks = [
            self._ask(f"{app_id}-{group}-ph-{i}", app_id, 1, member, group, placeholder=True)
            for group, count in task_groups.items()
            for i in range(count)
        ]
        await self.send_asks(*asks)

    async def ask(
        self,
        app_id: str,
        key: str | None = None,
        *,
        count: int = 1,
        task_group: str = "",
        tags: Mapping[str, str] | None = None,
        priority: int = 0,
        **resources: int,
    ) -> str:
        """Ask for ``count`` allocations of ``resources`` each (:data:`DEFAULT_ASK` when none).

        Args:
            app_id: The application asking.
            key: The allocation key; ``<app_id>-ask-<n>`` by default.
            count: ``max_allocations`` of the ask.
            task_group: The task group of a gang's real ask (its placeholders are replaced).
            tags: The ask's tags (:func:`scheduler.gang_tags` makes it a permit gang
                member).
            priority: The ask's priority.
            resources: One allocation's resources.

        Returns:
            The allocation key.
        """
        if key is None:
            self._asks += 1
            key = f"{app_id}-ask-{self._asks}"
        ask = self._ask(key, app_id, count, resources or DEFAULT_ASK, task_group)
        ask.tags = dict(tags or {})
        ask.priority = priority
        await self.send_asks(ask)
        return key

    async def send_asks(self, *asks: si.AllocationAsk) -> None:
        """Send ready-made asks as they are."""
        request = si.AllocationRequest(rm_id=self.rm_id, asks=list(asks))
        await self._send(self.core.update_allocation(request))

    async def release(
        self,
        *allocations: si.Allocation,
        termination: si.TerminationType = si.TerminationType.STOPPED_BY_RM,
    ) -> None:
        """Release allocations the RM holds (a finished container, say)."""
        await self._send_releases(
            [
                si.AllocationRelease(
                    partition_name=self.partition,
                    application_id=a.application_id,
                    uuid=a.uuid,
                    termination_type=termination,
                )
                for a in allocations
            ]
        )

    async def confirm_releases(self) -> list[si.AllocationRelease]:
        """Confirm every release the core started and the RM has not confirmed yet
        (placeholders replaced or timed out, preemptions), with the same uuid and type, as
        an RM does once the containers are gone.

        Returns:
            The releases confirmed now.
        """
        pending = [
            r
            for r in self.rm.released
            if r.termination_type != _RM_INITIATED and r.uuid not in self._confirmed
        ]
        self._confirmed.update(r.uuid for r in pending)
        await self._send_releases(
            [
                si.AllocationRelease(
                    partition_name=r.partition_name or self.partition,
                    application_id=r.application_id,
                    uuid=r.uuid,
                    termination_type=r.termination_type,
                )
                for r in pending
            ]
        )
        return pending

    async def remove(self, *app_ids: str) -> None:
        """Remove applications, as an RM does when they are done."""
        remove = [
            si.RemoveApplicationRequest(application_id=a, partition_name=self.partition)
            for a in app_ids
        ]
        request = si.ApplicationRequest(rm_id=self.rm_id, remove=remove)
        await self._send(self.core.update_application(request))

    async def advance(self, seconds: float) -> None:
        """Move the clock, firing every timer that falls due, and settle."""
        await self.clock.advance(seconds)
        await self.core.settle()

    # ------------------------------------------------------------------ what the RM holds
    def allocations(
        self, app_id: str | None = None, *, placeholder: bool | None = None
    ) -> list[si.Allocation]:
        """The allocations the RM holds now: sent as new and not released since, in order.

        Args:
            app_id: Only this application's.
            placeholder: Only placeholders (``True``) or only real allocations (``False``).
        """
        gone = {r.uuid for r in self.rm.released}
        return [
            a
            for a in self.rm.allocations
            if a.uuid not in gone
            and (app_id is None or a.application_id == app_id)
            and (placeholder is None or a.placeholder == placeholder)
        ]

    def released(self, termination: si.TerminationType | None = None) -> list[si.AllocationRelease]:
        """Every release the core reported, of one termination type or all."""
        return [
            r for r in self.rm.released if termination is None or r.termination_type == termination
        ]

    def app_states(self, app_id: str) -> list[str]:
        """The states the core reported for an application, in order."""
        return self.rm.app_states(app_id)

    async def application(self, app_id: str) -> dict[str, Any]:
        """The application's query (``Core.get_application``) in the scenario's partition.

        Raises:
            scheduler.NotFoundError: No such application.
        """
        return await self.core.get_application(self.partition, app_id)

    async def app_state(self, app_id: str) -> str:
        """The application's state now (``applicationState`` of its query)."""
        return str((await self.application(app_id))["applicationState"])

    def assert_allocated(
        self, app_id: str, count: int, *, placeholder: bool = False
    ) -> list[si.Allocation]:
        """Assert the RM holds ``count`` real allocations (or placeholders) of ``app_id``.

        Returns:
            Those allocations.
        """
        held = self.allocations(app_id, placeholder=placeholder)
        kind = "placeholders" if placeholder else "allocations"
        assert len(held) == count, (
            f"{app_id}: expected {count} {kind}, the RM holds {len(held)}: "
            f"{[(a.allocation_key, a.node_id) for a in held]}"
        )
        return held

    # ------------------------------------------------------------------ plumbing
    def _ask(
        self,
        key: str,
        app_id: str,
        count: int,
        resources: Mapping[str, int],
        task_group: str,
        *,
        placeholder: bool = False,
    ) -> si.AllocationAsk:
        return si.AllocationAsk(
            allocation_key=key,
            application_id=app_id,
            partition_name=self.partition,
            resource_ask=si.Resource.of(**resources),
            max_allocations=count,
            task_group_name=task_group,
            placeholder=placeholder,
        )

    async def _send_releases(self, releases: list[si.AllocationRelease]) -> None:
        request = si.AllocationRequest(
            rm_id=self.rm_id,
            releases=si.AllocationReleasesRequest(allocations_to_release=releases),
        )
        await self._send(self.core.update_allocation(request))

    async def _send(self, request: Awaitable[None]) -> None:
        await request
        await self.core.settle()


@contextlib.asynccontextmanager
async def start_scenario(
    config: str = "", *, clock: ManualClock | None = None, rm: RecordingCallback | None = None
) -> AsyncIterator[Scenario]:
    """Start a core on a manual clock and register a recording RM with ``config``.

    Works under any asyncio test runner (pytest-asyncio, anyio's pytest plugin with the
    asyncio backend) and outside tests; leaving it stops the core.

    Args:
        config: Queue configuration YAML; empty means the built-in default, YuniKorn's,
            which places an application by its ``namespace`` tag only.
        clock: The clock to start the core with; a new :class:`ManualClock` by default.
        rm: The callback to register; a new :class:`RecordingCallback` by default.

    Raises:
        scheduler.SchedulerError: The configuration is invalid.
    """
    clock = clock if clock is not None else ManualClock()
    async with start_scheduler(clock=clock) as core:
        scenario = Scenario(core, clock, rm)
        await scenario.register(config)
        yield scenario


class DaemonProcess:
    """A ``scheduler serve`` subprocess on free loopback ports, for tests and benchmarks
    that drive a real daemon over the network.

    It starts the daemon with ``--native tcp://127.0.0.1:0 --http 127.0.0.1:0 --grpc
    127.0.0.1:0`` and then ``args`` (a later ``--native`` wins, so a test can ask for a
    Unix socket), reads the addresses it prints and returns once it printed ``ready``. The
    daemon imports the same ``scheduler`` package as this process (source tree or
    installed build), and its log goes to ``log``:

        daemon = DaemonProcess("--token", "s3cret", log=tmp_path / "daemon.log")
        try:
            async with scheduler.client.connect(daemon.native, token="s3cret") as core:
                ...
        finally:
            assert daemon.stop() == 0, daemon.logged()

    Used as a context manager it stops the daemon on the way out. ``native``, ``http`` and
    ``grpc`` are the addresses it bound (``tcp://``/``unix://``/``tls://``, ``http://`` or
    ``https://``, ``grpc://`` or ``grpcs://``).

    Args:
        *args: More ``scheduler serve`` options.
        log: Where the daemon's stderr (its log) goes.
        python: Options for the interpreter before ``-m scheduler`` (``-X`` options, a
            profiler's ``-m cProfile -o FILE``).
        start_timeout: Seconds it may take to print ``ready``.

    Raises:
        RuntimeError: The daemon exited or did not print ``ready`` in time; the message
            holds what it printed and its log.
    """

    def __init__(
        self,
        *args: str,
        log: Path,
        python: Sequence[str] = (),
        start_timeout: float = 30.0,
    ) -> None:
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parents[1])  # src/, or site-packages
        env["PYTHONPATH"] = os.pathsep.join([package_root, *filter(None, [env.get("PYTHONPATH")])])
        self.log = log
        self._log_file = log.open("w")
        command = [sys.executable, *python, "-m", "scheduler", "serve"]
        command += ["--native", "tcp://127.0.0.1:0", "--http", "127.0.0.1:0"]
        command += ["--grpc", "127.0.0.1:0", *args]
        self.proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=self._log_file, env=env
        )
        self.native = ""
        self.http = ""
        self.grpc = ""
        self._wait_ready(start_timeout)

    def _wait_ready(self, seconds: float) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        seen = b""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if not ready:
                if self.proc.poll() is not None:
                    break
                continue
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            seen += chunk
            lines = seen.decode().splitlines()
            for line in lines:
                kind, _, address = line.partition(" ")
                if kind in ("native", "http", "grpc") and address:
                    setattr(self, kind, address)
            if "ready" in lines:
                return
        self.proc.kill()
        self.proc.wait()
        self._close()
        raise RuntimeError(
            f"scheduler serve did not start within {seconds:g}s (exit code "
            f"{self.proc.returncode}); it printed:\n{seen.decode()}\nits log:\n"
            f"{self.log.read_text()}"
        )

    @property
    def port(self) -> int:
        """The port of the native transport (TCP)."""
        return int(self.native.rsplit(":", 1)[1])

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM, and the exit code; killed (and ``RuntimeError``) if it has not exited
        within ``timeout`` seconds."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self._close()
            raise RuntimeError(
                f"scheduler serve did not exit {timeout:g}s after SIGTERM; its log:\n"
                f"{self.log.read_text()}"
            ) from None
        self._close()
        return code

    def logged(self) -> str:
        """What the daemon logged so far."""
        if not self._log_file.closed:
            self._log_file.flush()
        return self.log.read_text()

    def _close(self) -> None:
        self._log_file.close()
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> DaemonProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.proc.poll() is None:
            self.stop()
        else:
            self._close()
