"""``scheduler simulate --replay FILE``: a recording of ``scheduler serve --record``
(``scheduler.daemon._record``) played against an in-process core on virtual time, and
where the core's decisions differ from the recorded ones (a changed policy, a new release).

The core starts on a ``ManualClock`` at the recording's first moment. Each record in turn:
the clock moves to its time (timers due on the way fire, in order), an RM's request goes
to the core as it was recorded and the core settles before the next; a registration gets
a callback that overrides what the recorded RM's did and gives the recorded answers to
predicate questions; an RM's disconnection, resumption and stop happen to the core too.
The recorded responses are the recorded core's decisions, and the replay's callback
collects the replaying core's.

The RM's later requests name what the recorded core generated: a release or a
confirmation names an allocation by the uuid the recorded core gave it. Each such uuid is
mapped to the allocation key it was given for (and which allocation of that key it was,
for an ask of several) and then to the uuid the replaying core gave the same allocation.

The decisions are compared by stable keys, never by uuids: an allocation by its key (the
nodes its allocations went to, and the placeholder each replaced), a core's release of an
allocation or an ask by the key and the termination type, a rejected ask by its key, an
application by its id (accepted or rejected, and the states it went through), a node by
its id (accepted or rejected), and a request the core refused by its place in the
recording. ``ReplayReport`` counts the decisions that match and lists those that differ.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from scheduler import si
from scheduler._errors import NotFoundError, SchedulerError
from scheduler.core import Core, start_scheduler
from scheduler.daemon._record import (
    ANSWER,
    EVENT,
    HEADER,
    REGISTRATION,
    REQUEST,
    RESPONSE,
    Answer,
    Event,
    Header,
    Record,
    read_records,
    recording_files,
)
from scheduler.si._callback import ResourceManagerCallback, accept_preemption
from scheduler.si._versions import SI_VERSION
from scheduler.si._wire import (
    AllocationCall,
    AllocationPush,
    ApplicationCall,
    ApplicationPush,
    ConfigurationCall,
    NodeCall,
    NodePush,
    RegisterCall,
)
from scheduler.testing import ManualClock

__all__ = ["Difference", "ReplayReport", "replay"]

_REPLACED = si.TerminationType.PLACEHOLDER_REPLACED
_REPLACING = "replacing uuid: "  # how a placeholder's release names the allocation after it


class Difference(msgspec.Struct, frozen=True, kw_only=True):
    """One decision the replaying core made otherwise than the recorded one.

    Attributes:
        time: when, in seconds since the recording began (the earlier of the two).
        kind: ``allocation``, ``released``, ``released_ask``, ``rejected_ask``,
            ``application``, ``application_states``, ``node`` or ``refused``.
        key: the allocation key, application id, node id, or ``request N`` (N: the
            request's sequence number in the recording).
        recorded: what the recorded core decided ("" for nothing).
        replayed: what the replaying core decided ("" for nothing).
    """

    time: float
    kind: str
    key: str
    recorded: str
    replayed: str


class ReplayReport(msgspec.Struct, kw_only=True):
    """What a replay found.

    Attributes:
        files: the files replayed, oldest first.
        records: records read; requests: the RMs' requests sent to the core.
        duration: seconds of virtual time from the first record to the last.
        matched: decisions that match, by kind (as ``Difference.kind``).
        differences: those that do not, in order of time.
        notes: what the replay could not do as recorded (a recording that begins
            mid-session, records lost, a uuid it could not map).
    """

    files: list[str]
    records: int = 0
    requests: int = 0
    duration: float = 0.0
    matched: dict[str, int] = msgspec.field(default_factory=dict)
    differences: list[Difference] = msgspec.field(default_factory=list)
    notes: list[str] = msgspec.field(default_factory=list)

    @property
    def same(self) -> bool:
        """The replaying core decided everything as the recorded one did."""
        return not self.differences

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready builtins (for ``--json`` or a file)."""
        out: dict[str, Any] = msgspec.to_builtins(self)
        out["same"] = self.same
        return out


async def replay(
    path: Path,
    *,
    rotated: bool = False,
    config: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> ReplayReport:
    """Play the recording ``path`` against an in-process core and compare its decisions.

    Args:
        path: a recording of ``scheduler serve --record``.
        rotated: play its rotated files too (``FILE.2``, ``FILE.1``, then ``FILE``).
        config: a queue configuration (YAML text) to replay with instead of the recorded
            ones (every registration gets it; recorded configuration updates are skipped):
            what a changed policy would have decided.
        on_progress: called with (records done, records in all) every 1,000 records and
            at the end.

    Raises:
        SchedulerError: the file is missing or not a recording, of another SI version or
            format, or malformed.
    """
    files = recording_files(path) if rotated else ([path] if path.exists() else [])
    if not files:
        raise SchedulerError(f"no recording at {path}")
    records = [r for f in files for r in read_records(f)]
    report = ReplayReport(files=[str(f) for f in files], records=len(records))
    first = records[0]
    clock = ManualClock(epoch=first.at / 1e9)
    async with start_scheduler(clock=clock) as core:
        player = _Player(core, clock, first.at, report, config)
        for record in records:  # a question is asked before its recorded answer is reached
            if record.kind == ANSWER:
                player.answers.add(record.decode())
        for done, record in enumerate(records, 1):
            await player.play(record)
            if on_progress is not None and done % 1000 == 0:
                on_progress(done, len(records))
        await core.settle()
    report.duration = (records[-1].at - first.at) / 1e9
    _compare(player.recorded, player.replayed, report)
    if on_progress is not None:
        on_progress(len(records), len(records))
    return report


# ======================================================================== decisions
class _Decisions:
    """One side's decisions, by kind and key: the values in order, and when the first
    came (seconds since the recording began)."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, str], list[str]] = defaultdict(list)
        self.first: dict[tuple[str, str], float] = {}
        self.uuids: dict[str, tuple[str, int]] = {}  # uuid -> (allocation key, n-th of it)
        self.by_key: dict[tuple[str, int], str] = {}  # and back
        self._count: dict[str, int] = defaultdict(int)
        self._replaces: dict[str, str] = {}  # real allocation's uuid -> placeholder key

    def add(self, at: float, kind: str, key: str, value: str) -> None:
        self.values[(kind, key)].append(value)
        self.first.setdefault((kind, key), at)

    def allocation(self, at: float, response: si.AllocationResponse) -> None:
        for r in response.released:
            if r.termination_type == _REPLACED and r.message.startswith(_REPLACING):
                self._replaces[r.message.removeprefix(_REPLACING)] = r.allocation_key
            self.add(at, "released", r.allocation_key, r.termination_type.name)
        for a in response.new:
            n = self._count[a.allocation_key]
            self._count[a.allocation_key] = n + 1
            self.uuids[a.uuid] = (a.allocation_key, n)
            self.by_key[(a.allocation_key, n)] = a.uuid
            replaced = self._replaces.pop(a.uuid, "")
            value = a.node_id + (f" replacing {replaced}" if replaced else "")
            self.add(at, "allocation", a.allocation_key, value)
        for ask in response.released_asks:
            self.add(at, "released_ask", ask.allocation_key, ask.termination_type.name)
        for rejected in response.rejected:
            self.add(at, "rejected_ask", rejected.allocation_key, "rejected")

    def application(self, at: float, response: si.ApplicationResponse) -> None:
        for accepted in response.accepted:
            self.add(at, "application", accepted.application_id, "accepted")
        for rejected in response.rejected:
            self.add(at, "application", rejected.application_id, "rejected")
        for updated in response.updated:
            self.add(at, "application_states", updated.application_id, updated.state)

    def node(self, at: float, response: si.NodeResponse) -> None:
        for accepted in response.accepted:
            self.add(at, "node", accepted.node_id, "accepted")
        for rejected in response.rejected:
            self.add(at, "node", rejected.node_id, "rejected")


def _compare(recorded: _Decisions, replayed: _Decisions, report: ReplayReport) -> None:
    """Each kind and key: the same values (in any order for allocations, whose
    allocations of one ask may come in another order; in order for states) match."""
    matched: dict[str, int] = defaultdict(int)
    differences = []
    for kind_key in sorted(recorded.values.keys() | replayed.values.keys()):
        kind, key = kind_key
        mine = recorded.values.get(kind_key, [])
        theirs = replayed.values.get(kind_key, [])
        ordered = kind == "application_states"
        if (mine if ordered else sorted(mine)) == (theirs if ordered else sorted(theirs)):
            matched[kind] += len(mine)
            continue
        at = min(
            t for t in (recorded.first.get(kind_key), replayed.first.get(kind_key)) if t is not None
        )
        joiner = " -> " if ordered else ", "
        differences.append(
            Difference(
                time=round(at, 6),
                kind=kind,
                key=key,
                recorded=joiner.join(mine if ordered else sorted(mine)),
                replayed=joiner.join(theirs if ordered else sorted(theirs)),
            )
        )
    report.matched = dict(sorted(matched.items()))
    report.differences = sorted(differences, key=lambda d: (d.time, d.kind, d.key))


# ========================================================================= the player
class _Player:
    """Plays records against ``core`` and collects both sides' decisions."""

    def __init__(
        self, core: Core, clock: ManualClock, start: int, report: ReplayReport, config: str | None
    ) -> None:
        self.core = core
        self.clock = clock
        self.start = start
        self.report = report
        self.config = config
        self.recorded = _Decisions()
        self.replayed = _Decisions()
        self.callbacks: dict[str, ResourceManagerCallback] = {}
        self.answers = _Answers()
        self.seq = 0  # the last record's number, to see a gap
        self.parts: set[int] = set()

    def now(self) -> float:
        return self.clock.now()

    async def play(self, record: Record) -> None:
        t = (record.at - self.start) / 1e9
        if t > self.clock.now():
            await self.clock.advance(t - self.clock.now())
        kind = record.kind
        if kind == HEADER:
            self._header(record)
        elif kind == RESPONSE:
            self._response(t, record)
        elif kind in (REQUEST, REGISTRATION):
            await self._request(t, record)
        elif kind == EVENT:
            await self._event(t, record)
        if kind != HEADER and kind != REGISTRATION:
            if self.seq and record.seq > self.seq + 1:
                self.report.notes.append(
                    f"records {self.seq + 1} to {record.seq - 1} are missing (a rotated "
                    "file was removed): what they held is not replayed"
                )
            self.seq = record.seq

    def _header(self, record: Record) -> None:
        header: Header = record.decode()
        if header.si_version != SI_VERSION:
            raise SchedulerError(
                f"the recording speaks SI {header.si_version}, this scheduler {SI_VERSION}: "
                "replay it with the release that recorded it"
            )
        if header.format != 1:
            raise SchedulerError(f"recording format {header.format} is not 1: a newer release")
        if not self.parts and header.part:
            self.report.notes.append(
                f"the recording begins mid-session (file {header.part + 1} of the session): "
                "nodes, applications and allocations from before it are not known to the "
                "replaying core"
            )
        self.parts.add(header.part)

    def _response(self, t: float, record: Record) -> None:
        message = record.decode()
        if isinstance(message, AllocationPush):
            self.recorded.allocation(t, message.response)
        elif isinstance(message, ApplicationPush):
            self.recorded.application(t, message.response)
        elif isinstance(message, NodePush):
            self.recorded.node(t, message.response)

    async def _request(self, t: float, record: Record) -> None:
        message = record.decode()
        if record.kind == REGISTRATION and record.rm_id in self.callbacks:
            return  # a later file's restatement of a registration already in force
        if isinstance(message, ConfigurationCall) and self.config is not None:
            return  # the replay's own configuration stays
        self.report.requests += 1
        try:
            await self._send(message)
        except (SchedulerError, NotFoundError) as exc:
            self.replayed.add(t, "refused", f"request {record.seq}", type(exc).__name__)
        await self.core.settle()

    async def _send(self, message: Any) -> None:
        core = self.core
        if isinstance(message, RegisterCall):
            request = message.request
            if self.config is not None:
                request.config = self.config
            callback = self._callback(request.rm_id, set(message.overrides))
            await core.register_resource_manager(request, callback)
            self.callbacks[request.rm_id] = callback
        elif isinstance(message, NodeCall):
            await core.update_node(message.request)
        elif isinstance(message, ApplicationCall):
            await core.update_application(message.request)
        elif isinstance(message, AllocationCall):
            self._map_uuids(message.request)
            await core.update_allocation(message.request)
        elif isinstance(message, ConfigurationCall):
            await core.update_configuration(message.request)

    def _map_uuids(self, request: si.AllocationRequest) -> None:
        """The uuids the recorded core gave, as the replaying core gave them."""
        if request.releases is None:
            return
        for release in request.releases.allocations_to_release:
            which = self.recorded.uuids.get(release.uuid)
            uuid = None if which is None else self.replayed.by_key.get(which)
            if uuid is not None:
                release.uuid = uuid
            elif release.uuid:
                key = release.allocation_key or (which[0] if which else "?")
                self.report.notes.append(
                    f"a release of {release.uuid} (allocation key {key}) names an allocation "
                    "the replaying core did not make: sent as recorded"
                )

    async def _event(self, t: float, record: Record) -> None:
        event: Event = record.decode()
        rm_id = record.rm_id
        if event.what == "refused":
            self.recorded.add(t, "refused", f"request {event.request}", event.detail.split(":")[0])
        elif event.what == "lost":
            self.report.notes.append(
                f"{event.count} records were lost while recording (the disk fell behind)"
            )
        elif event.what == "disconnected":
            self.core.rm_disconnected(rm_id, self.callbacks.get(rm_id))
        elif event.what == "reconnected":
            self.core.rm_reconnected(rm_id, self.callbacks.get(rm_id))
        elif event.what == "stopped":
            await self.core.stop_resource_manager(rm_id)
            self.callbacks.pop(rm_id, None)
        await self.core.settle()

    def _callback(self, rm_id: str, overridden: set[str]) -> ResourceManagerCallback:
        """The replay's RM: its decisions go to ``replayed``; it overrides what the
        recorded RM's callback overrode, and answers questions as that RM did."""
        replayed, clock, answers = self.replayed, self.clock, self.answers

        async def update_allocation(self: Any, response: si.AllocationResponse) -> None:
            replayed.allocation(clock.now(), response)

        async def update_application(self: Any, response: si.ApplicationResponse) -> None:
            replayed.application(clock.now(), response)

        async def update_node(self: Any, response: si.NodeResponse) -> None:
            replayed.node(clock.now(), response)

        namespace: dict[str, Any] = {
            "update_allocation": update_allocation,
            "update_application": update_application,
            "update_node": update_node,
        }
        if "predicates" in overridden:

            async def predicates(self: Any, args: si.PredicatesArgs) -> bool:
                return answers.predicates(args)

            namespace["predicates"] = predicates
        if "preemption_predicates" in overridden:

            async def preemption(
                self: Any, args: si.PreemptionPredicatesArgs
            ) -> si.PreemptionPredicatesResponse:
                return answers.preemption(args)

            namespace["preemption_predicates"] = preemption
        if "update_container_scheduling_state" in overridden:

            async def scheduling_state(
                self: Any, request: si.UpdateContainerSchedulingStateRequest
            ) -> None:
                return None

            namespace["update_container_scheduling_state"] = scheduling_state
        cls = type(f"ReplayedRM_{rm_id}", (ResourceManagerCallback,), namespace)
        return cls()  # type: ignore[no-any-return]


class _Answers:
    """The recorded RMs' answers to predicate questions, by ask and node: a question is
    answered as the latest recorded answer to the same one (yes, when none was)."""

    def __init__(self) -> None:
        self._predicates: dict[tuple[str, str], bool] = {}
        self._preemption: dict[tuple[str, str], si.PreemptionPredicatesResponse] = {}

    def add(self, answer: Answer) -> None:
        if answer.predicates is not None:
            args = answer.predicates
            self._predicates[(args.allocation_key, args.node_id)] = answer.allowed
        if answer.preemption is not None and answer.response is not None:
            pargs = answer.preemption
            self._preemption[(pargs.allocation_key, pargs.node_id)] = answer.response

    def predicates(self, args: si.PredicatesArgs) -> bool:
        return self._predicates.get((args.allocation_key, args.node_id), True)

    def preemption(self, args: si.PreemptionPredicatesArgs) -> si.PreemptionPredicatesResponse:
        found = self._preemption.get((args.allocation_key, args.node_id))
        return found if found is not None else accept_preemption(args)
