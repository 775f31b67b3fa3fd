"""The simulated RM: pods, jobs and nodes as YuniKorn's Kubernetes shim keeps them.

A gang job's placeholders go first (one ask per member, tagged with its task group); its
real pods follow once every placeholder is placed, or once a Soft gang's placeholders
timed out (``Resuming``). A release the core starts (a placeholder replaced or timed out,
a preemption) is confirmed after the scenario's ``confirm_latency``, when the pod is gone;
a pod runs its run time once placed and is then released (``STOPPED_BY_RM``); a preempted
or lost pod is resubmitted as a new pod, as a ReplicaSet or a Job controller makes one; a
job's application is removed once its last pod finished.

The shim never calls the core itself: it collects what it would send in an ``Outbox`` and
asks the engine, through ``schedule``, to run its reactions at a later tick. Everything is
tracked incrementally, so a sample costs nothing per pod.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final

from scheduler import si
from scheduler.core import gang_tags
from scheduler.si._callback import ResourceManagerCallback
from scheduler.simulate._model import Configuration, JobSpec, NodeGroup, Scenario, Workload
from scheduler.simulate._result import GangRecord, JobRecord, PodRecord, SimEvent

__all__ = ["Job", "Node", "Outbox", "Pod", "SimulatedShim"]

RM_ID: Final = "simulate"
PARTITION: Final = "default"
MAX_BREACHES: Final = 1000  # over-capacity breaches kept word for word; the rest counted
_RM_STOPPED: Final = si.TerminationType.STOPPED_BY_RM
_PREEMPTED: Final = si.TerminationType.PREEMPTED_BY_SCHEDULER

# Pod states.
PENDING, RUNNING, RELEASING, DONE = "pending", "running", "releasing", "done"


class Pod:
    """One pod: its ask, where it runs and the record the result keeps."""

    __slots__ = ("ask", "job", "node", "record", "runtime", "state", "uuid")

    def __init__(self, job: Job, ask: si.AllocationAsk, record: PodRecord, runtime: float | None):
        self.job = job
        self.ask = ask
        self.record = record
        self.runtime = runtime
        self.state = PENDING
        self.uuid = ""
        self.node: Node | None = None


@dataclass(eq=False, slots=True)
class Job:
    """One job: its application, its pods and, for gangs, how far the gang got."""

    id: str
    workload: Workload
    spec: JobSpec
    style: str  # the gang style ("" for no placeholder gang)
    runtimes: list[float | None]  # one per real pod, drawn at arrival
    record: JobRecord
    gang: GangRecord | None = None
    placed: int = 0  # placeholders (or permit members) placed
    real_sent: bool = False
    outstanding: int = 0  # real pods not finished yet
    ended: bool = False
    resubmits: int = 0
    first_real: float | None = None  # when its first real pod was placed


@dataclass(eq=False, slots=True)
class Node:
    id: str
    group: str
    capacity: dict[str, int]
    attributes: dict[str, str]
    used: dict[str, int] = field(default_factory=dict)
    state: str = "up"  # up, drained, removed
    pods: dict[str, Pod] = field(default_factory=dict)  # by uuid


@dataclass(slots=True)
class Outbox:
    """What the shim sends at the end of a tick, in the order the core needs it."""

    nodes: list[si.NodeInfo] = field(default_factory=list)
    apps: list[si.AddApplicationRequest] = field(default_factory=list)
    asks: list[si.AllocationAsk] = field(default_factory=list)
    releases: list[si.AllocationRelease] = field(default_factory=list)
    removes: list[si.RemoveApplicationRequest] = field(default_factory=list)

    def take(self) -> Outbox:
        out = Outbox(self.nodes, self.apps, self.asks, self.releases, self.removes)
        self.nodes, self.apps, self.asks, self.releases, self.removes = [], [], [], [], []
        return out


Schedule = Callable[[float, Callable[[], None]], None]


class SimulatedShim(ResourceManagerCallback):
    """The RM's side: reacts to the core's callbacks and to the engine's actions.

    Args:
        scenario: The scenario played.
        configuration: The configuration it is played with.
        now: The engine's virtual time.
        schedule: Runs an action (a no-argument function) at a virtual time: the engine
            rounds it up to a tick, and never runs it before the next tick.
    """

    def __init__(
        self,
        scenario: Scenario,
        configuration: Configuration,
        now: Callable[[], float],
        schedule: Schedule,
    ) -> None:
        self.scenario = scenario
        self.configuration = configuration
        self.now = now
        self.schedule = schedule
        self.latency = scenario.shim.confirm_latency
        self.out = Outbox()
        self.pods: dict[str, Pod] = {}  # by allocation key
        self.by_uuid: dict[str, Pod] = {}
        self.jobs: dict[str, Job] = {}
        self.nodes: dict[str, Node] = {}
        self.group_next: dict[str, int] = {}
        self.pod_records: list[PodRecord] = []
        self.job_records: list[JobRecord] = []
        self.gang_records: list[GangRecord] = []
        self.events: list[SimEvent] = []
        self.breaches: list[str] = []
        self.breach_count = 0
        # the nodes that are up, drained ones included (their pods run on) until removed
        self.capacity: dict[str, int] = {}
        self.pending_pods = 0
        self.running_pods = 0
        self.allocations = 0
        self.preemptions = 0
        self.gangs_waiting = 0
        self.gangs_running = 0

    # ====================================================================== nodes
    def add_nodes(self, group: NodeGroup, count: int) -> list[str]:
        """``count`` new nodes of ``group``, numbered on from the last."""
        first = self.group_next.get(group.name, 1)
        self.group_next[group.name] = first + count
        ids = []
        for i in range(first, first + count):
            node = Node(
                f"{group.name}-{i}", group.name, dict(group.capacity), dict(group.attributes)
            )
            self.nodes[node.id] = node
            _add(self.capacity, node.capacity)
            self.out.nodes.append(self._node_info(node, si.ActionFromRM.CREATE))
            ids.append(node.id)
        return ids

    def _node_info(
        self, node: Node, action: si.ActionFromRM, existing: list[si.Allocation] | None = None
    ) -> si.NodeInfo:
        return si.NodeInfo(
            node_id=node.id,
            action=action,
            attributes={si.HOST_NAME: node.id, **node.attributes},
            schedulable_resource=si.Resource.of(**node.capacity),
            existing_allocations=existing or [],
        )

    def group_nodes(self, group: str, *states: str) -> list[Node]:
        """The nodes of ``group`` in one of ``states``, those in the first state first."""
        return [
            n
            for state in states
            for n in self.nodes.values()
            if n.group == group and n.state == state
        ]

    def drain_nodes(self, group: str, count: int) -> list[str]:
        """The last ``count`` nodes of ``group`` that are up stop taking pods; theirs run on
        (a drained node's capacity counts until it is removed: its pods hold it)."""
        chosen = self.group_nodes(group, "up")[-count:] if count > 0 else []
        for node in chosen:
            node.state = "drained"
            self.out.nodes.append(self._node_info(node, si.ActionFromRM.DRAIN_NODE))
        return [n.id for n in chosen]

    def remove_nodes(self, group: str, count: int) -> tuple[list[str], int]:
        """The last ``count`` nodes of ``group`` (drained ones first) go, with their pods:
        each real pod is lost and resubmitted, as Kubernetes recreates it elsewhere."""
        up = self.group_nodes(group, "up", "drained")
        chosen = up[-count:] if count > 0 else []
        lost = 0
        for node in chosen:
            _sub(self.capacity, node.capacity)
            node.state = "removed"
            self.out.nodes.append(self._node_info(node, si.ActionFromRM.DECOMISSION))
            for pod in list(node.pods.values()):
                if not pod.record.placeholder:
                    lost += 1
                pod.record.lost = True
                self._gone(pod)
                if not pod.record.placeholder:
                    self._resubmit(pod)
        return [n.id for n in chosen], lost

    # ====================================================================== jobs
    def arrive(self, workload: Workload, number: int, runtimes: list[float | None]) -> None:
        """A job of ``workload`` arrives: its application and its first asks."""
        spec = workload.job
        job_id = f"{workload.name}-{number:05d}"
        queue = workload.queue or f"root.{workload.namespace}"
        style = (self.configuration.gang_style or spec.gang.style) if spec.kind == "spark" else ""
        real = spec.pods + (1 if spec.kind == "spark" else 0)
        record = JobRecord(
            job=job_id,
            kind=spec.kind,
            workload=workload.name,
            queue=queue,
            pods=real,
            submitted=self.now(),
            long_running=spec.runtime is None,
        )
        job = Job(job_id, workload, spec, style, runtimes, record, outstanding=real)
        self.jobs[job_id] = job
        self.job_records.append(record)
        self.out.apps.append(self._app_request(job))
        if spec.kind in ("spark", "permit"):
            members = real
            job.gang = GangRecord(
                job=job_id,
                style=style or "permit",
                queue=queue,
                members=members,
                submitted=self.now(),
            )
            self.gang_records.append(job.gang)
            self.gangs_waiting += 1
        if spec.kind == "spark":
            self._new_pod(job, f"{job_id}-ph-driver", spec.driver, None, "driver", placeholder=True)
            for i in range(spec.pods):
                self._new_pod(
                    job, f"{job_id}-ph-exec-{i}", spec.resource, None, "executors", placeholder=True
                )
        else:
            self._send_real(job)

    def _app_request(self, job: Job) -> si.AddApplicationRequest:
        w, spec = job.workload, job.spec
        fields: dict[str, Any] = {}
        if spec.kind == "spark":
            total = dict(spec.driver)
            for _ in range(spec.pods):
                _add(total, spec.resource)
            fields["placeholder_ask"] = si.Resource.of(**total)
            fields["gang_scheduling_style"] = job.style
            if spec.gang.timeout:
                fields["execution_timeout_milliseconds"] = round(spec.gang.timeout * 1000)
        return si.AddApplicationRequest(
            application_id=job.id,
            queue_name=w.queue,
            partition_name=PARTITION,
            ugi=si.UserGroupInformation(user=w.user),
            tags={"namespace": w.namespace} if w.namespace else {},
            **fields,
        )

    def _send_real(self, job: Job) -> None:
        """The job's real pods: a spark job's driver and executors (replacing its
        placeholders), the pods of the others."""
        if job.real_sent or job.ended:
            return
        job.real_sent = True
        spec = job.spec
        tags = (
            gang_tags(job.id, spec.pods, namespace=job.workload.namespace or None)
            if spec.kind == "permit"
            else {}
        )
        runtimes = iter(job.runtimes)
        if spec.kind == "spark":
            self._new_pod(job, f"{job.id}-driver", spec.driver, next(runtimes), "driver")
            for i in range(spec.pods):
                self._new_pod(job, f"{job.id}-exec-{i}", spec.resource, next(runtimes), "executors")
        else:
            for i in range(spec.pods):
                self._new_pod(job, f"{job.id}-{i}", spec.resource, next(runtimes), "", tags=tags)

    def _new_pod(
        self,
        job: Job,
        key: str,
        resource: dict[str, int],
        runtime: float | None,
        group: str,
        *,
        placeholder: bool = False,
        tags: dict[str, str] | None = None,
    ) -> Pod:
        spec = job.spec
        policy = None
        if spec.allow_preempt_self is not None or spec.allow_preempt_other is not None:
            policy = si.PreemptionPolicy(
                allow_preempt_self=bool(spec.allow_preempt_self),
                allow_preempt_other=bool(spec.allow_preempt_other),
            )
        ask = si.AllocationAsk(
            allocation_key=key,
            application_id=job.id,
            partition_name=PARTITION,
            resource_ask=si.Resource.of(**resource),
            max_allocations=1,
            priority=spec.priority,
            tags=dict(tags or {}),
            task_group_name=group,
            placeholder=placeholder,
            preemption_policy=policy,
        )
        record = PodRecord(
            key=key,
            job=job.id,
            kind=spec.kind,
            queue=job.record.queue,
            workload=job.workload.name,
            placeholder=placeholder,
            resource=dict(resource),
            submitted=self.now(),
        )
        pod = Pod(job, ask, record, runtime)
        self.pods[key] = pod
        self.pod_records.append(record)
        self.out.asks.append(ask)
        self.pending_pods += 1
        return pod

    def _resubmit(self, pod: Pod) -> None:
        """A new pod in place of one preempted or lost (its run time starts over)."""
        job = pod.job
        if job.ended:
            return
        job.resubmits += 1
        base = pod.record.key.split("~", 1)[0]
        new = self._new_pod(
            job,
            f"{base}~{job.resubmits}",
            pod.record.resource,
            pod.runtime,
            pod.ask.task_group_name,
            tags=pod.ask.tags,
        )
        new.ask.preemption_policy = pod.ask.preemption_policy

    def finish(self, pod: Pod, uuid: str) -> None:
        """A pod ran its run time: the RM releases it; the job may be done."""
        if pod.state != RUNNING or pod.uuid != uuid:
            return  # preempted, lost or recovered meanwhile
        self.out.releases.append(
            si.AllocationRelease(
                partition_name=PARTITION,
                application_id=pod.job.id,
                uuid=pod.uuid,
                termination_type=_RM_STOPPED,
            )
        )
        self._gone(pod)
        job = pod.job
        job.outstanding -= 1
        if job.outstanding == 0:
            self._end(job, failed=False)

    def _end(self, job: Job, *, failed: bool) -> None:
        if job.ended:
            return
        job.ended = True
        job.record.failed = failed
        if not failed:
            job.record.finished = self.now()
        if job.gang is not None:
            if job.gang.whole is None:
                self.gangs_waiting -= 1
            else:
                self.gangs_running -= 1
            job.gang.finished = self.now() if not failed else None
        for pod in list(self.pods.values()) if failed else ():
            if pod.job is job and pod.state == PENDING:
                pod.state = DONE
                self.pending_pods -= 1
        self.out.removes.append(
            si.RemoveApplicationRequest(application_id=job.id, partition_name=PARTITION)
        )

    def _gone(self, pod: Pod) -> None:
        """The pod no longer holds its node."""
        if pod.state in (RUNNING, RELEASING):
            self.running_pods -= 1
            if pod.node is not None:
                _sub(pod.node.used, pod.record.resource)
                pod.node.pods.pop(pod.uuid, None)
            self.by_uuid.pop(pod.uuid, None)
        elif pod.state == PENDING:
            self.pending_pods -= 1
        pod.state = DONE
        pod.record.finished = self.now()

    def confirm(self, pod: Pod, uuid: str, termination: si.TerminationType) -> None:
        """The pod the core released is gone: confirm, and resubmit a preempted pod."""
        if pod.state != RELEASING or pod.uuid != uuid:
            return
        self.out.releases.append(
            si.AllocationRelease(
                partition_name=PARTITION,
                application_id=pod.job.id,
                uuid=uuid,
                termination_type=termination,
            )
        )
        self._gone(pod)
        if termination == _PREEMPTED and not pod.record.placeholder:
            self._resubmit(pod)

    # ====================================================================== callbacks
    async def update_allocation(self, response: si.AllocationResponse) -> None:
        now = self.now()
        for a in response.new:
            self._placed(a, now)
        for r in response.released:
            pod = self.by_uuid.get(r.uuid)
            if pod is None or pod.state != RUNNING or r.termination_type == _RM_STOPPED:
                continue
            pod.state = RELEASING
            if r.termination_type == _PREEMPTED:
                pod.record.preempted = True
                self.preemptions += 1
            uuid, termination = pod.uuid, r.termination_type
            self.schedule(now + self.latency, partial(self.confirm, pod, uuid, termination))
        for ar in response.released_asks:
            pod = self.pods.get(ar.allocation_key)
            if pod is not None and pod.state == PENDING:
                self._gone(pod)
        for rejected in response.rejected:
            pod = self.pods.get(rejected.allocation_key)
            if pod is not None and pod.state == PENDING:
                self._gone(pod)
                self._end(pod.job, failed=True)

    def _placed(self, a: si.Allocation, now: float) -> None:
        pod = self.pods.get(a.allocation_key)
        node = self.nodes.get(a.node_id)
        if pod is None or node is None or pod.state != PENDING:
            return
        pod.state = RUNNING
        pod.uuid = a.uuid
        pod.node = node
        pod.record.allocated = now
        pod.record.node = node.id
        self.by_uuid[a.uuid] = pod
        node.pods[a.uuid] = pod
        self.pending_pods -= 1
        self.running_pods += 1
        self.allocations += 1
        _add(node.used, pod.record.resource)
        for name, used in node.used.items():
            if used > node.capacity.get(name, 0):
                self._breach(node, name, used, now)
        job = pod.job
        if pod.record.placeholder:
            job.placed += 1
            if job.gang is not None and job.placed == job.gang.members and job.gang.whole is None:
                self._whole(job, now)
                self.schedule(now, partial(self._send_real, job))
            return
        if job.first_real is None:
            job.first_real = now
        if job.spec.kind == "permit":
            job.placed += 1
            if job.gang is not None and job.placed == job.gang.members and job.gang.whole is None:
                self._whole(job, now)
        if pod.runtime is not None:
            uuid = pod.uuid
            self.schedule(now + pod.runtime, partial(self.finish, pod, uuid))

    def _whole(self, job: Job, now: float) -> None:
        assert job.gang is not None
        job.gang.whole = now
        self.gangs_waiting -= 1
        self.gangs_running += 1

    def _breach(self, node: Node, name: str, used: int, now: float) -> None:
        self.breach_count += 1
        if len(self.breaches) < MAX_BREACHES:
            self.breaches.append(
                f"{node.id} at {now:g}s: {name} {used} > {node.capacity.get(name, 0)}"
            )

    async def update_application(self, response: si.ApplicationResponse) -> None:
        now = self.now()
        for rejected in response.rejected:
            job = self.jobs.get(rejected.application_id)
            if job is not None and not job.ended:
                job.record.rejected = rejected.reason or "rejected, no reason given"
                self._end(job, failed=True)
        for update in response.updated:
            job = self.jobs.get(update.application_id)
            if job is None or job.ended:
                continue
            if update.state == "Resuming" and job.gang is not None:
                job.gang.timed_out = True  # a Soft gang: its real pods go as plain pods
                self.schedule(now, partial(self._send_real, job))
            elif update.state in ("Failing", "Failed") and job.gang is not None:
                job.gang.timed_out = True
                if update.state == "Failed":
                    self._end(job, failed=True)
            elif update.state == "Failed":
                self._end(job, failed=True)

    # ====================================================================== recovery
    def recover(self) -> tuple[si.ApplicationRequest, si.NodeRequest, list[si.AllocationAsk]]:
        """After the RM restarted: every live job's application, every node with the pods
        it holds, and every pod still waiting, as the shim recovers from the API server.
        A pod whose release was under way is taken as gone (it was deleted meanwhile)."""
        for pod in list(self.by_uuid.values()):
            if pod.state == RELEASING:
                self._gone(pod)
                if pod.record.preempted and not pod.record.placeholder:
                    self._resubmit(pod)
        self.out = Outbox()  # what those made is in the recovery below
        apps = [self._app_request(j) for j in self.jobs.values() if not j.ended]
        nodes: list[si.NodeInfo] = []
        for node in self.nodes.values():
            if node.state == "removed":
                continue
            existing = [
                si.Allocation(
                    allocation_key=p.ask.allocation_key,
                    allocation_tags=dict(p.ask.tags),
                    uuid=p.uuid,
                    resource_per_alloc=p.ask.resource_ask,
                    priority=p.ask.priority,
                    node_id=node.id,
                    application_id=p.job.id,
                    partition_name=PARTITION,
                    task_group_name=p.ask.task_group_name,
                    placeholder=p.ask.placeholder,
                )
                for p in node.pods.values()
            ]
            nodes.append(self._node_info(node, si.ActionFromRM.CREATE, existing))
            if node.state == "drained":
                nodes.append(self._node_info(node, si.ActionFromRM.DRAIN_NODE))
        asks = [p.ask for p in self.pods.values() if p.state == PENDING]
        return (
            si.ApplicationRequest(rm_id=RM_ID, new=apps),
            si.NodeRequest(rm_id=RM_ID, nodes=nodes),
            asks,
        )


def _add(total: dict[str, int], more: dict[str, int]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, 0) + value


def _sub(total: dict[str, int], less: dict[str, int]) -> None:
    for name, value in less.items():
        total[name] = total.get(name, 0) - value


def draw_runtime(rng: Any, spec: JobSpec) -> float | None:
    """One pod's run time from the job's distribution (None: a service that runs on)."""
    r = spec.runtime
    if r is None:
        return None
    if r.kind == "fixed":
        return r.a
    if r.kind == "uniform":
        return float(rng.uniform(r.a, r.b))
    if r.kind == "exponential":
        return float(rng.expovariate(1.0 / r.a)) if r.a > 0 else 0.0
    return float(r.a * math.exp(rng.gauss(0.0, r.b)))  # lognormal: median a, sigma b
