"""Permit gangs at random: a property test of gang contention through the public API.

Each example starts its own core (``start_scenario`` on a ``ManualClock``) with two leaf
queues, ``root.quota`` (a ``max``) and ``root.free`` (none), and four applications, two in
each. A drawn program then plays: permit gangs (min-available 1-6, Strict or NonStrict,
alone or in a GangGroup, each group with its own waiting time) whose members arrive late,
in several asks of one to four members, interleaved with nodes coming and going, the RM
releasing what it holds or withdrawing member asks, and the clock moving (sometimes past a
waiting time).

The ``Model`` is what the RM knows (every ``AllocationResponse`` and event) plus the
program's plan (every gang's spec, every member ask). After every step it checks, against
the contract's "Permit gangs":

1. nothing of a gang reaches the RM before its GangGroup is satisfied: the first
   ``AllocationResponse.new`` with a member of a group has at least ``min_available``
   members of every gang of the group; a timed-out group never reaches the RM; a gang is
   ``satisfied`` exactly when its group was sent, stays so, and then holds nothing
   tentative; ``bound`` counts what the RM was sent; no uuid reaches the RM twice;
2. totals are exact: each node's ``allocated`` is the sum of its allocations (and
   ``available`` is what is left), each application's ``usedResource`` and
   ``pendingResource`` the sum of its allocations and requests, each leaf queue's the sum
   of its applications', the root's the sum of its children's; nothing is negative; the
   allocations on the nodes are those of the applications; the non-tentative ones are
   exactly what the RM holds; the tentative ones are exactly the gangs' ``placed``, and
   only an unsatisfied, waiting group has any; every member ask is pending, tentative or
   sent, member for member;
3. ``root.quota`` never holds more than its ``max`` (tentative members included);
4. the waiting time: a group times out no sooner than its waiting time after it last held
   nothing, and no later than its waiting time after it began holding members without a
   break (no rollback, no node removed, no ask withdrawn); its member asks, and any that
   arrive later, are rejected with a reason naming the gang and ``timeout``; a Strict group
   holds tentative members only while none of its members is pending (one that cannot be
   placed rolls the group back);
5. the core logs no error (an ``ErrorWatch`` per example).

At the end, no deadlock: the clock moves by nothing, the RM withdraws the members of every
group that could never complete (a gang with fewer members than min-available, or a group
whose members do not fit the quota), then, a few times over, releases everything it holds
and adds a large node (each a cluster change). Every other group that has not timed out
must then be satisfied: groups that each fit alone cannot keep one another waiting.

``test_gangs_contending_for_the_quota_do_not_deadlock`` runs the same checks on programs
made for that end: a few gangs, all in the quota queue, small nodes, no timeout.

The tests at the bottom are the minimal examples of the four bugs the property found in
the first version of permit gangs, kept as regression tests: a satisfied gang forgotten
once its member asks went, deadlock resolution that weighed one younger group at a time,
two Strict groups failing in one pass both rolled back, and Strict members not tried
while every node was reserved. ``PERMIT_PROPERTY_EXAMPLES=3000`` runs a deeper search.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

from scheduler import si
from scheduler.testing import ErrorWatch, Scenario, gang_tags, start_scenario

QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: free
          - name: quota
            resources:
              max: {memory: 100, vcore: 10}
"""
QUOTA_MEMORY = 100
APPS = {"q0": "root.quota", "q1": "root.quota", "f0": "root.free", "f1": "root.free"}
LEAVES = ("root.free", "root.quota")
TERMINATED = ("Completed", "Failed", "Rejected")
NAMESPACE = "default"
MEMBER_VCORE = 1
NODE_VCORE = 10
# Examples per run of the main property (the quota one runs half as many again); a deeper
# run: PERMIT_PROPERTY_EXAMPLES=3000 pytest tests/scheduler/test_permit_property.py
EXAMPLES = int(os.environ.get("PERMIT_PROPERTY_EXAMPLES", "270"))


pytestmark = pytest.mark.asyncio


# ======================================================================== the program
@dataclass(frozen=True)
class GangPlan:
    """One permit gang: every member ask of it carries these tags."""

    name: str
    min_available: int
    mode: str
    waiting: int  # seconds; the same for every gang of its group
    memory: int  # of one member
    group: tuple[str, ...]  # the gang ids of its GangGroup, sorted, itself included
    home: str  # the application most of its members come to

    @property
    def gang_id(self) -> str:
        return f"{NAMESPACE}/{self.name}"

    def tags(self) -> dict[str, str]:
        return gang_tags(
            self.name,
            self.min_available,
            mode=self.mode,
            waiting_time=f"{self.waiting}s",
            groups=list(self.group) if len(self.group) > 1 else None,
        )


@dataclass(frozen=True)
class AddNode:
    memory: int


@dataclass(frozen=True)
class RemoveNode:
    pick: int


@dataclass(frozen=True)
class Members:
    gang: int
    app: str | None  # None: the gang's home application
    count: int


@dataclass(frozen=True)
class Release:
    pick: int
    every: bool  # everything the RM holds of the picked allocation's application


@dataclass(frozen=True)
class Withdraw:
    pick: int


@dataclass(frozen=True)
class Advance:
    seconds: int


Step = AddNode | RemoveNode | Members | Release | Withdraw | Advance


@dataclass(frozen=True)
class Program:
    gangs: tuple[GangPlan, ...]
    steps: tuple[Step, ...]


def group_name(ids: Iterable[str]) -> str:
    """How the core names a GangGroup in its events (``group_id``)."""
    ids = sorted(ids)
    return ids[0] if len(ids) == 1 else "[" + ", ".join(ids) + "]"


@st.composite
def programs(draw: st.DrawFn, *, quota: bool = False) -> Program:
    """A random program; with ``quota``, one made for contention at the end: two or three
    gangs (mostly NonStrict, which accumulate), all at home in the quota queue, each
    fitting it alone, every one with min-available members or more, small nodes, and the
    clock never near a waiting time."""
    n = draw(st.sampled_from([2, 2, 3] if quota else [1, 2, 2, 3, 3, 4]))
    groups: list[list[int]] = []
    for i in range(n):
        if groups and draw(st.integers(0, 3)) == 0:
            groups[-1].append(i)  # joins the previous gang's GangGroup
        else:
            groups.append([i])
    homes = ["q0", "q1"] if quota else ["q0", "q1", "f0", "q0", "q1", "f1"]
    modes = ["Strict", "NonStrict", "NonStrict"] if quota else ["Strict", "NonStrict"]
    plans: list[GangPlan] = []
    for members in groups:  # gang i is plans[i]
        waiting = 600 if quota else draw(st.sampled_from([600, 30, 120]))
        ids = tuple(sorted(f"{NAMESPACE}/g{i}" for i in members))
        for i in members:
            plans.append(
                GangPlan(
                    name=f"g{i}",
                    min_available=draw(st.integers(2, 5) if quota else st.integers(1, 6)),
                    mode=draw(st.sampled_from(modes)),
                    waiting=waiting,
                    memory=draw(st.sampled_from([10, 20] if quota else [10, 20, 30])),
                    group=ids,
                    home=draw(st.sampled_from(homes)),
                )
            )
    picks = st.integers(0, 20)
    seconds = [1, 10, 30, 60] if quota else [1, 10, 30, 60, 120, 300, 599, 600, 601]
    sizes = [20, 30] if quota else [50, 30, 100, 20]  # with quota: scarce nodes
    other: st.SearchStrategy[Step] = st.one_of(
        st.builds(AddNode, st.sampled_from(sizes)),
        st.builds(RemoveNode, picks),
        st.builds(Release, picks, st.booleans()),
        st.builds(Release, picks, st.booleans()),
        st.builds(Withdraw, picks),
        st.builds(Advance, st.sampled_from(seconds)),
        st.builds(Advance, st.sampled_from(seconds)),
    )
    first = draw(st.lists(st.builds(AddNode, st.sampled_from(sizes)), max_size=2))
    rest: list[Step] = draw(st.lists(other, max_size=10 if quota else 14))
    # Each gang's members, about min-available of them, in one to four asks, arrive at
    # random points of the program.
    app = st.one_of(st.none(), st.none(), st.none(), st.sampled_from(sorted(APPS)))
    spare = [0, 0, 1] if quota else [0, 0, 0, 1, 2, -1]
    for i, plan in enumerate(plans):
        total = plan.min_available + draw(st.sampled_from(spare))
        while total > 0:
            count = draw(st.integers(1, min(total, 4)))
            total -= count
            rest.insert(draw(st.integers(0, len(rest))), Members(i, draw(app), count))
    return Program(tuple(plans), (*first, *rest))


# ============================================================================ the model
@dataclass
class MemberAsk:
    """One member ask the RM sent."""

    key: str
    plan: GangPlan
    app: str
    count: int
    rejected: str = ""  # the reason, once rejected
    withdrawn: bool = False
    app_gone: bool = False  # its application completed: its asks went with it

    @property
    def alive(self) -> bool:
        return not self.rejected and not self.withdrawn and not self.app_gone


@dataclass
class GroupModel:
    ids: tuple[str, ...]
    waiting: float
    bound: bool = False  # its first members reached the RM
    timed_out: bool = False
    last_empty: float = 0.0  # the last step end at which it held nothing tentative
    run_start: float | None = None  # holding members without a break since (at the latest)

    @property
    def name(self) -> str:
        return group_name(self.ids)


@dataclass
class Model:
    plans: dict[str, GangPlan]  # by gang id
    groups: dict[tuple[str, ...], GroupModel]
    asks: dict[str, MemberAsk] = field(default_factory=dict)
    nodes: list[str] = field(default_factory=list)
    next_node: int = 0
    next_key: int = 0
    sent: dict[str, si.Allocation] = field(default_factory=dict)  # every uuid sent in new
    sent_by_key: Counter[str] = field(default_factory=Counter)
    responses: int = 0  # allocation responses taken in
    events: int = 0
    rejections: int = 0

    def group_of(self, gang_id: str) -> GroupModel:
        return self.groups[self.plans[gang_id].group]

    def sent_of_gang(self, gang_id: str) -> int:
        return sum(self.sent_by_key[a.key] for a in self.asks.values() if a.plan.gang_id == gang_id)


def new_model(program: Program) -> Model:
    plans = {p.gang_id: p for p in program.gangs}
    groups = {p.group: GroupModel(p.group, float(p.waiting)) for p in program.gangs}
    return Model(plans, groups)


# =========================================================================== the steps
async def apply(s: Scenario, m: Model, step: Step) -> str:
    match step:
        case AddNode(memory=memory):
            node_id = f"n{m.next_node}"
            m.next_node += 1
            await s.add_nodes(node_id, memory=memory, vcore=NODE_VCORE)
            m.nodes.append(node_id)
            return f"add node {node_id} memory={memory}"
        case RemoveNode(pick=i):
            if not m.nodes:
                return "remove node: none"
            node_id = m.nodes.pop(i % len(m.nodes))
            await remove_node(s, node_id)
            return f"remove node {node_id}"
        case Members(gang=g, app=to, count=count):
            plan = m.plans[f"{NAMESPACE}/g{g}"]
            app_id = to or plan.home
            key = f"{plan.name}-k{m.next_key}"
            m.next_key += 1
            m.asks[key] = MemberAsk(key, plan, app_id, count)
            await s.ask(
                app_id, key, count=count, tags=plan.tags(), memory=plan.memory, vcore=MEMBER_VCORE
            )
            return f"{count} member(s) {key} of {plan.gang_id} in {app_id} ({APPS[app_id]})"
        case Release(pick=i, every=every):
            held = s.allocations()
            if not held:
                return "release: the RM holds nothing"
            chosen = held[i % len(held)]
            out = [a for a in held if a.application_id == chosen.application_id] if every else []
            out = out or [chosen]
            await s.release(*out)
            return f"release {[(a.allocation_key, a.uuid) for a in out]}"
        case Withdraw(pick=i):
            alive = [a for a in m.asks.values() if a.alive]
            if not alive:
                return "withdraw: no member ask"
            chosen_ask = alive[i % len(alive)]
            chosen_ask.withdrawn = True
            await withdraw(s, (chosen_ask.app, chosen_ask.key))
            return f"withdraw ask {chosen_ask.key} of {chosen_ask.app}"
        case Advance(seconds=seconds):
            await s.advance(seconds)
            return f"advance {seconds}s (now {s.clock.now():g})"
    raise AssertionError(step)


async def remove_node(s: Scenario, node_id: str) -> None:
    info = si.NodeInfo(node_id=node_id, action=si.ActionFromRM.DECOMISSION)
    await s.core.update_node(si.NodeRequest(rm_id=s.rm_id, nodes=[info]))
    await s.core.settle()


async def withdraw(s: Scenario, *asks: tuple[str, str]) -> None:
    """The RM withdraws asks, each given as (application id, allocation key)."""
    releases = [
        si.AllocationAskRelease(
            partition_name=s.partition,
            application_id=app_id,
            allocation_key=key,
            termination_type=si.TerminationType.STOPPED_BY_RM,
        )
        for app_id, key in asks
    ]
    request = si.AllocationRequest(
        rm_id=s.rm_id,
        releases=si.AllocationReleasesRequest(allocation_asks_to_release=releases),
    )
    await s.core.update_allocation(request)
    await s.core.settle()


# ========================================================================== the checks
def res_sum(resources: Iterable[dict[str, int]]) -> dict[str, int]:
    total: Counter[str] = Counter()
    for r in resources:
        total.update(r)
    return {k: v for k, v in total.items() if v}


def nz(r: dict[str, int] | None) -> dict[str, int]:
    return {k: v for k, v in (r or {}).items() if v}


def no_negative(what: str, r: dict[str, int] | None) -> None:
    assert all(v >= 0 for v in (r or {}).values()), f"{what} is negative: {r}"


@dataclass
class Snapshot:
    apps: dict[str, dict[str, Any]]
    nodes: dict[str, dict[str, Any]]
    root: dict[str, Any]
    gangs: dict[str, dict[str, Any]]  # the views of every gang, by gang id
    tentative: dict[str, dict[str, Any]]  # uuid -> allocation


async def snapshot(s: Scenario, m: Model) -> Snapshot:
    apps = {a: await s.application(a) for a in APPS}
    nodes = {n: await s.core.get_node(s.partition, n) for n in m.nodes}
    root = await s.core.get_queue(s.partition, "root")
    gangs: dict[str, dict[str, Any]] = {}
    for app in apps.values():
        for view in app["gangs"]:
            seen = gangs.setdefault(view["gangId"], view)
            assert seen == view, f"two views of one gang: {seen} != {view}"
    tentative = {
        a["uuid"]: a for app in apps.values() for a in app["allocations"] if a["tentative"]
    }
    return Snapshot(apps, nodes, root, gangs, tentative)


def take_in_responses(s: Scenario, m: Model) -> None:
    """Property 1 on every ``AllocationResponse`` since the last step."""
    responses = s.rm.allocation_responses
    for response in responses[m.responses :]:
        by_group: dict[tuple[str, ...], Counter[str]] = {}
        for alloc in response.new:
            assert alloc.uuid not in m.sent, f"{alloc.uuid} reached the RM twice"
            m.sent[alloc.uuid] = alloc
            m.sent_by_key[alloc.allocation_key] += 1
            ask = m.asks.get(alloc.allocation_key)
            assert ask is not None, f"an allocation of no ask the RM sent: {alloc}"
            assert ask.alive, f"{alloc.allocation_key} was allocated after it was {ask}"
            by_group.setdefault(ask.plan.group, Counter())[ask.plan.gang_id] += 1
        for ids, counts in by_group.items():
            group = m.groups[ids]
            assert not group.timed_out, f"group {ids} timed out, then reached the RM: {counts}"
            if group.bound:
                continue  # satisfied: later members are normal asks
            for gid in ids:
                need = m.plans[gid].min_available
                assert counts[gid] >= need, (
                    f"group {ids} reached the RM with {dict(counts)}: gang {gid} needs {need}"
                )
            group.bound = True
    m.responses = len(responses)


def take_in_rejections(s: Scenario, m: Model) -> None:
    rejected = s.rm.rejected_asks
    for r in rejected[m.rejections :]:
        ask = m.asks.get(r.allocation_key)
        assert ask is not None, f"rejected an ask never sent: {r}"
        assert not ask.rejected, f"{r.allocation_key} rejected twice"
        ask.rejected = r.reason or "rejected"
    m.rejections = len(rejected)


def take_in_events(s: Scenario, m: Model) -> tuple[set[str], dict[str, float]]:
    """The groups rolled back in this step, and those that timed out (with the time)."""
    rolled: set[str] = set()
    timeouts: dict[str, float] = {}
    for e in s.rm.events[m.events :]:
        if e.reason.startswith("Gang"):
            event(e.reason)
            if "older gang" in e.message:
                event("deadlock resolved")
        if e.reason == "GangRolledBack":
            rolled.add(e.group_id)
        elif e.reason == "GangTimeout":
            timeouts[e.group_id] = e.timestamp_nano / 1e9
    m.events = len(s.rm.events)
    return rolled, timeouts


def check_totals(snap: Snapshot, m: Model, s: Scenario) -> None:
    """Property 2 (totals) and 3 (quota)."""
    app_allocs: dict[str, dict[str, Any]] = {}
    for app_id, app in snap.apps.items():
        allocs = app["allocations"]
        for a in allocs:
            assert a["uuid"] not in app_allocs, f"{a['uuid']} in two applications"
            app_allocs[a["uuid"]] = a
        assert nz(app["usedResource"]) == res_sum(a["resource"] for a in allocs), app_id
        pending = res_sum(
            {k: v * r["pendingCount"] for k, v in r["resource"].items()} for r in app["requests"]
        )
        assert nz(app["pendingResource"]) == pending, f"{app_id} pending"
        no_negative(f"{app_id} used", app["usedResource"])
        no_negative(f"{app_id} pending", app["pendingResource"])
    node_allocs: dict[str, dict[str, Any]] = {}
    for node_id, node in snap.nodes.items():
        for a in node["allocations"]:
            assert a["uuid"] not in node_allocs, f"{a['uuid']} on two nodes"
            assert a["nodeId"] == node_id
            node_allocs[a["uuid"]] = a
        allocated = res_sum(a["resource"] for a in node["allocations"])
        assert nz(node["allocated"]) == allocated, f"{node_id}: {node}"
        left = dict(Counter(node["capacity"]) - Counter(allocated) - Counter(node["occupied"]))
        assert nz(node["available"]) == left, f"{node_id} available"
        for what in ("capacity", "allocated", "available"):
            no_negative(f"{node_id} {what}", node[what])
    assert set(node_allocs) == set(app_allocs), "the nodes and the applications disagree"
    held = {a.uuid for a in s.allocations()}
    sent_live = {u for u, a in app_allocs.items() if not a["tentative"]}
    assert sent_live == held, (
        f"non-tentative allocations {sorted(sent_live)} != what the RM holds {sorted(held)}"
    )
    # Queues: leaves are the sum of their applications, the root of its leaves.
    children = {c["queuename"]: c for c in snap.root["children"]}
    assert set(children) == set(LEAVES)
    for leaf in LEAVES:
        q = children[leaf]
        apps = [a for a in snap.apps.values() if a["queueName"] == leaf]
        live = [a for a in apps if a["applicationState"] not in TERMINATED]
        assert nz(q["allocatedResource"]) == res_sum(a["usedResource"] for a in live), leaf
        assert nz(q["pendingResource"]) == res_sum(a["pendingResource"] for a in live), leaf
        no_negative(leaf, q["allocatedResource"])
    root = snap.root
    assert nz(root["allocatedResource"]) == res_sum(
        c["allocatedResource"] for c in children.values()
    )
    assert nz(root["pendingResource"]) == res_sum(c["pendingResource"] for c in children.values())
    assert nz(root["allocatedResource"]) == res_sum(n["allocated"] for n in snap.nodes.values())
    # Property 3: the quota holds, tentative members included.
    quota = children["root.quota"]
    assert quota["allocatedResource"].get("memory", 0) <= QUOTA_MEMORY, quota


def check_gangs(snap: Snapshot, m: Model, s: Scenario) -> None:
    """Property 1 (the state side) and 2 (tentative members)."""
    placed: Counter[str] = Counter()
    tentative_by_key: Counter[str] = Counter()
    for a in snap.tentative.values():
        ask = m.asks.get(a["allocationKey"])
        assert ask is not None, f"a tentative allocation of no member ask: {a}"
        placed[ask.plan.gang_id] += 1
        tentative_by_key[ask.key] += 1
    for gid, view in snap.gangs.items():
        plan = m.plans[gid]
        group = m.group_of(gid)
        assert view["minAvailable"] == plan.min_available and view["mode"] == plan.mode
        assert view["gangGroup"] == list(plan.group)
        assert view["placed"] == placed[gid], f"{gid}: {view} but {placed[gid]} tentative"
        assert view["bound"] == m.sent_of_gang(gid), f"{gid}: {view}, sent {m.sent_of_gang(gid)}"
        assert view["satisfied"] == group.bound, f"{gid}: {view}, group sent: {group.bound}"
        if view["satisfied"]:
            assert view["placed"] == 0 and not view["timedOut"], view
        if view["timedOut"]:
            assert view["placed"] == 0, view
    # Every gang a live member ask belongs to is shown in that ask's application.
    for ask in m.asks.values():
        if ask.alive:
            assert ask.plan.gang_id in snap.gangs, f"no view of {ask.plan.gang_id} for {ask}"
    assert sum(placed.values()) == sum(v["placed"] for v in snap.gangs.values())
    # Member for member: each ask is pending, tentative or was sent.
    pending = {
        r["allocationKey"]: r["pendingCount"] for app in snap.apps.values() for r in app["requests"]
    }
    for ask in m.asks.values():
        accounted = pending.get(ask.key, 0) + tentative_by_key[ask.key] + m.sent_by_key[ask.key]
        if ask.alive:
            assert accounted == ask.count, (
                f"{ask.key}: {pending.get(ask.key, 0)} pending + {tentative_by_key[ask.key]} "
                f"tentative + {m.sent_by_key[ask.key]} sent != {ask.count}"
            )
        else:
            assert pending.get(ask.key, 0) == 0 and tentative_by_key[ask.key] == 0, ask


def group_placed(snap: Snapshot, group: GroupModel) -> int:
    return sum(snap.gangs[g]["placed"] for g in group.ids if g in snap.gangs)


def check_waiting(
    snap: Snapshot,
    m: Model,
    now: float,
    rolled: set[str],
    timeouts: dict[str, float],
    broken: bool,
) -> None:
    """Property 4: waiting time, timeout rejections, Strict rollback."""
    for group in m.groups.values():
        views = [snap.gangs[g] for g in group.ids if g in snap.gangs]
        timed_out = any(v["timedOut"] for v in views)
        if group.timed_out:
            assert timed_out or not views, f"{group.ids} timed out, then forgot it: {views}"
        elif timed_out:
            assert group.name in timeouts, f"{group.ids} timed out without a GangTimeout event"
            at = timeouts[group.name]
            assert at >= group.last_empty + group.waiting, (
                f"{group.ids} timed out at {at:g}, but held nothing tentative at "
                f"{group.last_empty:g} (waiting time {group.waiting:g}s)"
            )
            group.timed_out = True
        if group.timed_out:
            assert all(v["timedOut"] for v in views), views
            for ask in m.asks.values():
                if ask.plan.group != group.ids or ask.withdrawn:
                    continue
                # Every member ask, before the timeout or after, is rejected.
                assert ask.rejected, f"{ask.key} of a timed-out group is not rejected"
                app_gone = "is Completed" in ask.rejected or "is Failed" in ask.rejected
                if not app_gone:
                    assert ask.plan.gang_id in ask.rejected and "timeout" in ask.rejected, (
                        ask.rejected
                    )
            group.run_start = None
            continue
        placed = group_placed(snap, group)
        if group.bound or placed == 0:
            group.run_start = None
            group.last_empty = now
            continue
        # Holding members: the wait runs (from ``run_start`` at the latest, without a break).
        if group.run_start is not None and not broken and group.name not in rolled:
            assert now - group.run_start < group.waiting, (
                f"{group.ids} held {placed} member(s) tentatively from {group.run_start:g} "
                f"to {now:g}, past its waiting time of {group.waiting:g}s"
            )
        else:
            group.run_start = now
        # Strict: tentative members only while no member of a Strict gang is pending.
        for app in snap.apps.values():
            for r in app["requests"]:
                member = m.asks.get(r["allocationKey"])
                if member is None or member.plan.group != group.ids:
                    continue
                assert member.plan.mode != "Strict" or not r["pendingCount"], (
                    f"group {group.ids} holds {placed} tentative member(s) while "
                    f"{member.key} of Strict gang {member.plan.gang_id} is pending"
                )


async def check(s: Scenario, m: Model, errors: ErrorWatch, *, broken: bool = False) -> Snapshot:
    take_in_responses(s, m)
    take_in_rejections(s, m)
    rolled, timeouts = take_in_events(s, m)
    snap = await snapshot(s, m)
    for app_id, app in snap.apps.items():
        if app["applicationState"] in TERMINATED:
            for ask in m.asks.values():
                if ask.app == app_id and ask.alive:
                    ask.app_gone = True
    check_totals(snap, m, s)
    check_gangs(snap, m, s)
    check_waiting(snap, m, s.clock.now(), rolled, timeouts, broken)
    assert not errors, errors.report()
    return snap


# ======================================================================= no deadlock
def quota_need(m: Model, group: GroupModel) -> int:
    """The memory all live members of ``group`` take in the quota queue."""
    return sum(
        a.count * a.plan.memory
        for a in m.asks.values()
        if a.alive and a.plan.group == group.ids and APPS[a.app] == "root.quota"
    )


def feasible(m: Model, group: GroupModel) -> bool:
    """The group can complete alone: every gang has min-available live members, and all
    its live members in the quota queue fit the quota."""
    live = [a for a in m.asks.values() if a.alive and a.plan.group == group.ids]
    for gid in group.ids:
        if sum(a.count for a in live if a.plan.gang_id == gid) < m.plans[gid].min_available:
            return False
    return quota_need(m, group) <= QUOTA_MEMORY


async def no_deadlock(s: Scenario, m: Model, errors: ErrorWatch) -> None:
    note("-- the end: advance 0, withdraw what can never complete, release and add room")
    await s.advance(0)
    snap = await check(s, m, errors)
    waiting = [g for g in m.groups.values() if not g.bound and not g.timed_out]
    hopeless = [g for g in waiting if not feasible(m, g)]
    give_up = [a for a in m.asks.values() if a.alive and m.groups[a.plan.group] in hopeless]
    if give_up:
        for a in give_up:
            a.withdrawn = True
        await withdraw(s, *((a.app, a.key) for a in give_up))
        note(f"withdraw {[a.key for a in give_up]} (groups that cannot complete)")
        snap = await check(s, m, errors, broken=True)
    expected = [g for g in waiting if g not in hopeless]
    event(f"at the end: {len(expected)} group(s) to complete, {len(hopeless)} hopeless")
    for round_ in range(2 * len(m.groups) + 3):
        if all(g.bound for g in expected) and not snap.tentative:
            break
        held = s.allocations()
        if held:
            await s.release(*held)
        node_id = f"big{round_}"
        await s.add_nodes(node_id, memory=10_000, vcore=1_000)
        m.nodes.append(node_id)
        note(f"release {len(held)}, add node {node_id}")
        snap = await check(s, m, errors)
    if sum(quota_need(m, g) for g in expected) > QUOTA_MEMORY:
        event("at the end: groups contend for the quota")
    late = [g.ids for g in expected if not g.bound]
    assert not late, (
        f"deadlock: groups {late} that fit alone and have all their members are not "
        f"satisfied; the gangs: {snap.gangs}"
    )
    assert not snap.tentative, f"tentative members left: {snap.tentative}"


# =========================================================================== the test
async def run(program: Program) -> None:
    note(f"gangs: {program.gangs}")
    with ErrorWatch() as errors:
        async with start_scenario(QUEUES) as s:
            m = new_model(program)
            for app_id, queue in APPS.items():
                await s.submit(app_id, queue=queue)
            for n, step in enumerate(program.steps):
                note(f"{n:2}. {await apply(s, m, step)}")
                await check(s, m, errors, broken=isinstance(step, RemoveNode | Withdraw))
            await no_deadlock(s, m, errors)
    assert not errors, errors.report()


SETTINGS = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@settings(SETTINGS, max_examples=EXAMPLES)
@given(program=programs())
async def test_random_gang_contention_keeps_the_permit_contract(program: Program) -> None:
    await run(program)


@settings(SETTINGS, max_examples=EXAMPLES * 3 // 2)
@given(program=programs(quota=True))
async def test_gangs_contending_for_the_quota_do_not_deadlock(program: Program) -> None:
    await run(program)


# ============================================================ found by the property
@pytest_asyncio.fixture
async def s() -> AsyncIterator[Scenario]:
    with ErrorWatch() as errors:
        async with start_scenario(QUEUES) as scenario:
            yield scenario
    assert not errors, errors.report()


async def test_a_late_member_of_a_satisfied_gang_whose_asks_went(s: Scenario) -> None:
    """Contract: "From then on the gang is satisfied and later members are scheduled as
    normal asks." Here the RM withdraws the ask of the two running members (their
    allocations stay), then a third member comes."""
    await s.add_nodes("n1")
    await s.submit("app-1", queue="root.free")
    await s.ask("app-1", "k0", count=2, tags=gang_tags("g", 2))
    assert len(s.allocations()) == 2
    await withdraw(s, ("app-1", "k0"))
    await s.ask("app-1", "k1", tags=gang_tags("g", 2))
    assert len(s.allocations()) == 3, (await s.application("app-1"))["gangs"]


async def test_a_late_member_in_a_satisfied_group_is_not_held_for_ever(s: Scenario) -> None:
    await s.add_nodes("n1")
    await s.submit("app-1", queue="root.free")
    group = ["default/a", "default/b"]
    await s.ask("app-1", "a0", count=2, tags=gang_tags("a", 2, groups=group))
    await s.ask("app-1", "b0", tags=gang_tags("b", 1, groups=group))
    assert len(s.allocations()) == 3
    await withdraw(s, ("app-1", "a0"))
    await s.ask("app-1", "a1", tags=gang_tags("a", 2, groups=group))
    await s.advance(3600)
    # Sent to the RM (the contract), or at worst rejected: not tentative an hour later.
    app = await s.application("app-1")
    assert not [a for a in app["allocations"] if a["tentative"]], app["gangs"]


async def test_no_deadlock_when_two_younger_groups_hold_the_room_together(s: Scenario) -> None:
    """Quota 100. The oldest gang (3 members of 30) holds 60; two younger gangs (2 members
    of 20 each) hold 20 each. Every gang's next member arrives: the quota is full, none can
    complete, and each fits alone. Rolling back either younger gang frees 20, less than
    the 30 the oldest needs; rolling back both would let it complete."""
    await s.add_nodes("n1", memory=1000, vcore=100)
    await s.submit("q0", queue="root.quota")
    tags = {
        name: gang_tags(name, need, mode="NonStrict")
        for name, need in (("old", 3), ("young-1", 2), ("young-2", 2))
    }
    await s.ask("q0", "old-1", count=2, tags=tags["old"], memory=30, vcore=1)
    await s.advance(1)
    await s.ask("q0", "y1-1", tags=tags["young-1"], memory=20, vcore=1)
    await s.advance(1)
    await s.ask("q0", "y2-1", tags=tags["young-2"], memory=20, vcore=1)
    assert (await s.core.get_queue("default", "root.quota"))["allocatedResource"]["memory"] == 100
    await s.ask("q0", "old-2", tags=tags["old"], memory=30, vcore=1)
    await s.ask("q0", "y1-2", tags=tags["young-1"], memory=20, vcore=1)
    await s.ask("q0", "y2-2", tags=tags["young-2"], memory=20, vcore=1)
    await s.add_nodes("n2", memory=1000, vcore=100)  # a cluster change, for good measure
    assert sorted(a.allocation_key for a in s.allocations()) == ["old-1", "old-1", "old-2"]


async def test_two_strict_groups_that_fail_in_one_pass_are_not_both_rolled_back(
    s: Scenario,
) -> None:
    """Quota 100, no node yet. Strict gang x (2 members: 30 in q0, 20 in q1) is older
    than Strict gang y (3 members of 30 in q0). When nodes come, one pass places x's
    first member and two of y's (90), then y's third member and x's second both find the
    quota full: both groups are rolled back, and the same happens on every cluster
    change. Rolling back the younger y alone would let x complete, then y."""
    await s.submit("q0", queue="root.quota")
    await s.submit("q1", queue="root.quota")
    x = gang_tags("x", 2)
    await s.ask("q0", "x-a", tags=x, memory=30, vcore=1)
    await s.ask("q1", "x-b", tags=x, memory=20, vcore=1)
    await s.advance(1)
    await s.ask("q0", "y", count=3, tags=gang_tags("y", 3), memory=30, vcore=1)
    for i in range(3):  # three cluster changes
        await s.add_nodes(f"n{i}", memory=1000, vcore=100)
    assert sorted(a.allocation_key for a in s.allocations()) == ["x-a", "x-b"]


async def test_a_strict_member_that_cannot_be_placed_rolls_back_while_every_node_is_reserved(
    s: Scenario,
) -> None:
    await s.add_nodes("n1", memory=50, vcore=10)
    await s.submit("app", queue="root.free")
    tags = gang_tags("g", 5)
    await s.ask("app", "m1", tags=tags)  # tentative: 10
    await s.ask("app", "other", memory=30, vcore=1)  # allocated: 40 of 50 used
    await s.ask("app", "more", memory=20, vcore=1)  # does not fit ...
    await s.advance(3)  # ... and reserves n1
    assert (await s.core.get_node("default", "n1"))["isReserved"]
    await s.ask("app", "m2", count=4, tags=tags)  # Strict: cannot be placed
    # Rolled back (and again when the reservation becomes an allocation: a change of the
    # cluster, on which a Strict group is tried anew).
    assert {e.group_id for e in s.rm.events if e.reason == "GangRolledBack"} == {"default/g"}
    # m1's room is given back: the reserving ask gets it at once, not at g's timeout.
    assert sorted(a.allocation_key for a in s.allocations()) == ["more", "other"]
