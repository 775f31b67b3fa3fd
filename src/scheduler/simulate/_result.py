"""What one run of a scenario produced: samples over virtual time, one record per pod and
per gang, and the cluster events. The engine fills it; the report, the live view and the
tests read it. Times are seconds of virtual time since the run began; resources are maps
of the SI's names (``memory`` in bytes, ``vcore`` in milli-vcores) to integers.
"""

from __future__ import annotations

import msgspec

__all__ = [
    "Checks",
    "Distribution",
    "GangRecord",
    "JobRecord",
    "PodRecord",
    "QueueSample",
    "QueueSummary",
    "RunResult",
    "Sample",
    "SimEvent",
    "Summary",
]


class QueueSample(msgspec.Struct, frozen=True, kw_only=True):
    """One leaf or parent queue at one sample: its usage and its configured bounds (empty
    maps where the queue has none)."""

    queue: str  # full path, root.a.b
    allocated: dict[str, int]
    guaranteed: dict[str, int]
    max: dict[str, int]
    pending: dict[str, int]  # resources asked and not yet allocated


class Sample(msgspec.Struct, frozen=True, kw_only=True):
    """The cluster at one moment of virtual time; the engine takes one every
    ``sample_every`` seconds and one at the end."""

    time: float
    # resources of the nodes that are up: drained nodes count until they are removed (they
    # take no new pods, but theirs run on and are in ``allocated``)
    capacity: dict[str, int]
    allocated: dict[str, int]  # what the core has allocated on them
    pending_pods: int  # submitted, not yet allocated (placeholders included)
    running_pods: int  # allocated and not yet released (placeholders included)
    allocations: int  # allocations made so far (cumulative)
    preemptions: int  # pods preempted so far (cumulative)
    gangs_waiting: int  # gangs submitted and not yet whole
    gangs_running: int  # gangs whole and not yet finished
    queues: list[QueueSample]


class PodRecord(msgspec.Struct, kw_only=True):
    """One pod from submission to release. ``allocated``/``finished`` stay ``None`` for a
    pod that never got so far by the end of the run."""

    key: str  # the allocation key
    job: str  # the application id
    kind: str  # the job kind: batch, spark, permit, service
    queue: str
    workload: str  # the scenario's workload that made it
    placeholder: bool
    resource: dict[str, int]
    submitted: float
    allocated: float | None = None
    finished: float | None = None
    node: str | None = None
    preempted: bool = False  # released by the core to make room (the pod was resubmitted
    # as a new record, as a ReplicaSet makes a new pod)
    lost: bool = False  # its node was removed under it (resubmitted as a new record too)


class JobRecord(msgspec.Struct, kw_only=True):
    """One job (one application) from arrival to its end. A job ``finished`` when every
    one of its pods ran its run time; ``failed`` when the core rejected or failed it (a
    Hard gang that timed out); ``rejected`` holds the core's reason when it rejected the
    application (a queue that does not exist or is a parent, a submit ACL that refuses the
    user, no placement rule that matched): such a job is ``failed`` too. A service without
    a run time is ``long_running``: it runs until the end and is not expected to finish."""

    job: str
    kind: str
    workload: str
    queue: str
    pods: int  # real pods it needs (a spark job's driver counted)
    submitted: float
    finished: float | None = None
    failed: bool = False
    long_running: bool = False
    rejected: str = ""  # the core's reason for rejecting the application ("" if it did not)


class GangRecord(msgspec.Struct, kw_only=True):
    """One gang job: submitted, whole (every member placed) or given up."""

    job: str
    style: str  # Hard, Soft (placeholder gangs) or permit
    queue: str
    members: int
    submitted: float
    whole: float | None = None  # when the last member was placed
    timed_out: bool = False
    finished: float | None = None


class SimEvent(msgspec.Struct, frozen=True, kw_only=True):
    """A cluster event the scenario scheduled, as it happened: ``kind`` is ``node-added``,
    ``node-drained``, ``node-removed`` or ``rm-restarted``; ``detail`` says what (node ids,
    counts, and how much of it happened when the group had fewer nodes than asked). An
    event the scenario puts after the run's end is not played: it is listed last, at its
    own time, with ``kind`` ``skipped``."""

    time: float
    kind: str
    detail: str


class RunResult(msgspec.Struct, kw_only=True):
    """One configuration's run of a scenario."""

    scenario: str
    configuration: str  # the configuration's name ("default" when the scenario has one)
    seed: int
    duration: float  # virtual seconds played
    wall_seconds: float  # wall-clock seconds it took
    samples: list[Sample] = msgspec.field(default_factory=list)
    pods: list[PodRecord] = msgspec.field(default_factory=list)
    gangs: list[GangRecord] = msgspec.field(default_factory=list)
    events: list[SimEvent] = msgspec.field(default_factory=list)
    jobs: list[JobRecord] = msgspec.field(default_factory=list)
    # Over-capacity breaches the simulated RM saw ("node at time: used > capacity"): the
    # pods it held on a node against that node's capacity, at each placement.
    breaches: list[str] = msgspec.field(default_factory=list)


class Distribution(msgspec.Struct, frozen=True, kw_only=True):
    """Seconds of virtual time over a set of pods or gangs (all zero when ``count`` is 0)."""

    count: int
    mean: float
    p50: float
    p90: float
    p99: float
    max: float


class QueueSummary(msgspec.Struct, frozen=True, kw_only=True):
    """One queue over the run."""

    queue: str
    guaranteed: dict[str, int]
    max: dict[str, int]
    peak: dict[str, int]  # the most it had allocated at any sample
    mean_share: dict[str, float]  # mean of allocated / guaranteed per guaranteed resource
    # The first sample at which it held, of every guaranteed resource, its guarantee or all
    # it asked for if that is less (holding something: a queue that holds nothing and asks
    # nothing has not), counted from when it first had pods pending; None if it never did
    # (or had no guarantee, or never asked for anything).
    guarantee_reached_after: float | None
    # Time with pods pending while it held less than that (its guarantee, or what it asked).
    starved_seconds: float


class Checks(msgspec.Struct, frozen=True, kw_only=True):
    """What a scenario implies, checked on what the simulated RM saw (not on what the core
    says of itself)."""

    jobs_submitted: int
    jobs_finished: int
    all_finished: bool
    over_capacity: list[str]  # "node at time: used > capacity" for every breach (goal: none)
    gangs: int
    gangs_whole: int
    partial_gangs: list[str]  # gangs that ran with part of their members (goal: none)
    guarantees_reached: dict[str, bool]  # per queue with a guarantee and pods pending
    # Applications the core rejected (goal: none), grouped by workload and reason, in the
    # order first seen: "job: reason" for one job, "12 jobs of workload w: reason" for
    # several (the job's id in a reason written "..."); the first 10 groups, then
    # "... and N more jobs".
    rejected_jobs: list[str] = msgspec.field(default_factory=list)


class Summary(msgspec.Struct, frozen=True, kw_only=True):
    """One run in numbers: the body of ``summary.json`` (a list of these, one per
    configuration, under ``runs``)."""

    scenario: str
    configuration: str
    seed: int
    duration: float
    wall_seconds: float
    pods_per_wall_second: float
    pods_submitted: int
    pods_allocated: int
    pods_finished: int
    preemptions: int
    pending_time: Distribution  # allocated - submitted, real pods (not placeholders)
    gang_wait: Distribution  # whole - submitted, per gang
    utilization: dict[str, float]  # mean of allocated / capacity over the samples
    queues: list[QueueSummary]
    checks: Checks
    pods_lost: int = 0  # real pods on nodes removed under them (each resubmitted)
    jobs_failed: int = 0  # jobs the core failed (a Hard gang timed out, a pod rejected)
    jobs_rejected: int = 0  # jobs whose application the core rejected (not in jobs_failed)
