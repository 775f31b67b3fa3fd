"""What a scenario file says, as frozen values: node groups, the queue configuration (one
or several, to compare), workloads with their arrivals and job kinds, cluster events and
how the simulated shim behaves. ``_scenario`` reads a file into these; the engine plays
them. Times are seconds of virtual time; resources are the SI's integers (``memory`` in
bytes, ``vcore`` in milli-vcores).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from scheduler._errors import SchedulerError

__all__ = [
    "JOB_KINDS",
    "Arrivals",
    "Burst",
    "ClusterEvent",
    "Configuration",
    "Gang",
    "JobSpec",
    "NodeGroup",
    "Poisson",
    "Runtime",
    "Scenario",
    "ScenarioError",
    "Shim",
    "Workload",
]

#: The job kinds a workload may run.
JOB_KINDS: Final = ("batch", "spark", "permit", "service")


class ScenarioError(SchedulerError):
    """A scenario file the simulator cannot play; ``str()`` is ``file:line:column: message``
    as compilers write it (line and column count from 1; left out when unknown)."""

    def __init__(self, message: str, *, source: str = "<scenario>", line: int = 0, column: int = 0):
        super().__init__(message)
        self.message = message
        self.source = source
        self.line = line
        self.column = column

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}:{self.column}" if self.line else self.source
        return f"{where}: {self.message}"


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """``count`` alike nodes named ``<name>-<i>`` (from 1)."""

    name: str
    count: int
    capacity: dict[str, int]
    attributes: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Runtime:
    """How long a pod runs once placed: ``fixed`` (``a``), ``uniform`` (``a`` to ``b``),
    ``exponential`` (mean ``a``) or ``lognormal`` (median ``a``, sigma ``b``)."""

    kind: str
    a: float
    b: float = 0.0


@dataclass(frozen=True, slots=True)
class Gang:
    """A placeholder gang's style (``Hard`` or ``Soft``) and its placeholder timeout
    (0: the core's default)."""

    style: str = "Soft"
    timeout: float = 0.0


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One job of a workload.

    ``batch``: ``pods`` pods, each running its run time. ``spark``: a driver and ``pods``
    executors, submitted as a placeholder gang (task groups ``driver`` and ``executors``)
    whose real pods follow once every placeholder is placed. ``permit``: ``pods`` pods as
    one permit gang (ask tags), placed all together or not at all. ``service``: ``pods``
    replicas that run until the end (or their run time, if given) and are resubmitted when
    preempted or lost, as a ReplicaSet does.
    """

    kind: str
    pods: int
    resource: dict[str, int]
    runtime: Runtime | None
    driver: dict[str, int] = field(default_factory=dict)  # spark: the driver's resource
    gang: Gang = field(default_factory=Gang)
    priority: int = 0
    allow_preempt_self: bool | None = None  # None: no PreemptionPolicy on the asks
    allow_preempt_other: bool | None = None


@dataclass(frozen=True, slots=True)
class Poisson:
    """Arrivals at ``rate`` per second between ``start`` and ``until``."""

    rate: float
    start: float
    until: float


@dataclass(frozen=True, slots=True)
class Burst:
    """``count`` jobs arriving together at ``at``."""

    at: float
    count: int


@dataclass(frozen=True, slots=True)
class Arrivals:
    """When a workload's jobs arrive: fixed times, Poisson processes and bursts, together."""

    fixed: tuple[float, ...] = ()
    poisson: tuple[Poisson, ...] = ()
    bursts: tuple[Burst, ...] = ()


@dataclass(frozen=True, slots=True)
class Workload:
    """A stream of alike jobs from one user into one queue (``queue``, for a configuration
    with a ``provided`` rule or none) or namespace (``namespace``, the tag YuniKorn's
    default placement rule reads)."""

    name: str
    user: str
    queue: str
    namespace: str
    arrivals: Arrivals
    job: JobSpec


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """At ``at``: ``count`` nodes of ``group`` added, drained or removed (``kind``
    ``nodes_added``, ``nodes_drained``, ``nodes_removed``), or the RM restarted and
    recovered (``rm_restart``)."""

    at: float
    kind: str
    group: str = ""
    count: int = 0


@dataclass(frozen=True, slots=True)
class Configuration:
    """One variant of the cluster to run the workload on: its queues.yaml text (empty: the
    core's built-in default) and, when set, the gang style every spark job uses."""

    name: str
    queues: str
    gang_style: str = ""  # "", "Hard" or "Soft"


@dataclass(frozen=True, slots=True)
class Shim:
    """How the simulated RM behaves: how long it takes to confirm a release the core
    started (a pod deleted: placeholder replaced or timed out, preemption)."""

    confirm_latency: float = 1.0


@dataclass(frozen=True, slots=True)
class Scenario:
    """A whole scenario file. ``configurations`` holds at least one; ``tick`` is the
    resolution of virtual time: every action happens on a multiple of it, so actions that
    fall in one tick go to the core together."""

    name: str
    seed: int
    duration: float
    sample_every: float
    nodes: tuple[NodeGroup, ...]
    configurations: tuple[Configuration, ...]
    workloads: tuple[Workload, ...]
    events: tuple[ClusterEvent, ...] = ()
    shim: Shim = field(default_factory=Shim)
    tick: float = 1.0
    source: str = "<scenario>"
    # Where the file wrote the values ``check_limits`` weighs (line, column from 1), keyed
    # ``duration``, ``tick``, ``sample_every``, ``nodes[i]``, ``events[i]`` (in time order),
    # ``workloads[i].fixed``, ``workloads[i].poisson[j]``, ``workloads[i].burst[j]``,
    # ``workloads[i].pods``; empty for a scenario built in code.
    places: dict[str, tuple[int, int]] = field(default_factory=dict, compare=False, repr=False)

    def configuration(self, name: str | None = None) -> Configuration:
        """The configuration called ``name`` (the first when None)."""
        if name is None:
            return self.configurations[0]
        for c in self.configurations:
            if c.name == name:
                return c
        names = ", ".join(c.name for c in self.configurations)
        raise ScenarioError(f"no configuration {name!r} (the scenario has: {names})")
