"""The walk by shape holds to the ask-by-ask walk: two cores, one input, the same decisions.

The pass (``scheduler.core._pass.Scheduler``) walks the pending asks of an application
either by shape (``by_shape = True``, the default: asks grouped by size, a size no node or
quota can hold skipped as a whole) or ask by ask (``by_shape = False``, the reference).
Both must place the same asks on the same nodes in the same order. Each example starts
two in-process cores, each on its own ``ManualClock``, the reference and the walk by
shape, registers the same drawn queue configuration with both, and plays the same drawn
steps on both, settling each after every step:

- the configuration: one or two parent queues with one to three leaves each, some with a
  ``max``, a ``guaranteed``, a ``maxapplications``, a fair application sort or priority
  sorting; often a user limit (``maxresources`` for alice) on a leaf, a parent or root;
  fair or binpacking nodes;
- the steps: nodes of mixed memory and vcore come and go; applications of three users
  arrive and leave, among them placeholder gangs (one or two task groups; their real asks
  come later, some larger than the placeholder, which cancels it); asks of a handful of
  shapes (some larger than any usual node, some larger in every dimension than others)
  with varied priorities and ``max_allocations``, some requiring a node, alone or several
  in one request; permit gang members (Strict and NonStrict, one GangGroup, members in
  one application or several); the RM releases allocations it holds (``STOPPED_BY_RM``:
  the cluster is kept mostly full, so a release frees room the backlog refills),
  withdraws asks, confirms the core's own releases (placeholders replaced or timed out),
  and moves the clock, often past the reservation delay.

After every step both cores must have sent the RM the same allocations in the same order,
as ``(application, allocation key, node, placeholder)`` (uuids differ between cores), the
same releases, released and rejected asks and application states, in the same order, and
must hold the same reservations (node, application, ask), in the same order; the events
of the pass's decisions (a reservation, a gang rolled back or satisfied, a placeholder
replaced or cancelled) must be the same too, which catches a reservation made and dropped
within one step. ``BY_SHAPE_EXAMPLES=2000`` runs a deeper search; a failure prints the
configuration and every step.

``test_release_refills_the_oldest_ask_of_the_freed_shape`` holds both walks to what a
user relies on, by hand: on a full cluster each release is refilled by the oldest ask of
the shape it freed.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, Phase, event, given, note, settings
from hypothesis import strategies as st

import scheduler
from scheduler import si
from scheduler.config._timeouts import Timeouts
from scheduler.core._partition_actor import PartitionActor
from scheduler.testing import ErrorWatch, ManualClock, gang_tags

from ..conftest import RM, Driver, app, ask, node

T = TypeVar("T")

EXAMPLES = int(os.environ.get("BY_SHAPE_EXAMPLES", "1000"))  # more for a deeper search
SETTLE_TIMEOUT = 10.0  # seconds of wall time: a core that does not settle fails the example
STOPPED = si.TerminationType.STOPPED_BY_RM
REQUIRED_NODE = si.DOMAIN_YUNIKORN + si.KEY_REQUIRED_NODE
USERS = ("alice", "bob", "carol")

# (memory, vcore). The nodes are at most 120 memory and 20 vcore, but for a rare large one.
NODE_SIZES = ((100, 10), (60, 16), (120, 6), (40, 20), (80, 8))
LARGE_NODE = (400, 40)
# A handful of shapes: (40, 4) and (60, 6) are larger in every dimension than the first
# ones, (30, 1) and (5, 4) cross, (150, 2) and (20, 24) are larger than any usual node in
# one dimension and (200, 30) in both (a large node takes all three).
SHAPES = ((10, 1), (20, 2), (30, 1), (5, 4), (40, 4), (60, 6), (150, 2), (20, 24), (200, 30))
FITTING = range(6)  # the shapes that fit a usual node
PRIORITIES = (0, 0, 0, 1, 2, -1)
RESERVATION_DELAY = Timeouts.reservation_delay
# Permit gangs by name, whatever the application of a member: (min-available, mode,
# waiting time, GangGroup). g2 and g3 are one GangGroup.
GANGS = (
    (2, "Strict", "10s", None),
    (3, "NonStrict", "600s", None),
    (2, "Strict", "30s", ["default/g2", "default/g3"]),
    (3, "Strict", "30s", ["default/g2", "default/g3"]),
)


# ===================================================================== configuration
@dataclass(frozen=True)
class Leaf:
    max: tuple[int, int] | None
    guaranteed: tuple[int, int] | None
    max_apps: int  # 0: no maxapplications
    policy: str  # "", "fair" or "priority" (``application.sort.priority: enabled``)


@dataclass(frozen=True)
class Parent:
    max: tuple[int, int] | None
    leaves: tuple[Leaf, ...]


@dataclass(frozen=True)
class Setup:
    parents: tuple[Parent, ...]
    limit_on: str  # "", "root", "parent" or "leaf": where alice's maxresources is
    limit: tuple[int, int]
    binpacking: bool

    def leaf_paths(self) -> list[str]:
        return [
            f"root.p{i}.q{j}"
            for i, parent in enumerate(self.parents)
            for j in range(len(parent.leaves))
        ]

    def yaml(self) -> str:
        """The configuration, with what the parser would refuse trimmed: a child's max and
        guaranteed within its parent's max, guaranteed within max, the children's
        guaranteed together within their parent's max, a limit within its queue's max."""
        lines = ["partitions:", "  - name: default"]
        if self.binpacking:
            lines.append("    nodesortpolicy: {type: binpacking}")
        lines += ["    queues:", "      - name: root", "        submitacl: '*'"]
        lines += _block(self._limit("root", None), 8)
        lines.append("        queues:")
        for i, parent in enumerate(self.parents):
            lines.append(f"          - name: p{i}")
            lines += _block(_resources(parent.max, None), 12)
            lines += _block(self._limit("parent" if i == 0 else "", parent.max), 12)
            lines.append("            queues:")
            claimed = (0, 0)
            for j, leaf in enumerate(parent.leaves):
                lines.append(f"              - name: q{j}")
                max_ = _within(leaf.max, parent.max)
                guaranteed = _within(_within(leaf.guaranteed, max_), parent.max)
                if guaranteed is not None and parent.max is not None:
                    total = (claimed[0] + guaranteed[0], claimed[1] + guaranteed[1])
                    if _within(total, parent.max) != total:
                        guaranteed = None
                    else:
                        claimed = total
                body = _resources(max_, guaranteed)
                if leaf.max_apps:
                    body += f"maxapplications: {leaf.max_apps}\n"
                if leaf.policy == "fair":
                    body += "properties: {application.sort.policy: fair}\n"
                elif leaf.policy == "priority":
                    body += "properties: {application.sort.priority: enabled}\n"
                body += self._limit("leaf" if i == j == 0 else "", _within(max_, parent.max))
                lines += _block(body, 16)
        return "\n".join(lines) + "\n"

    def _limit(self, where: str, max_: tuple[int, int] | None) -> str:
        if where != self.limit_on or not where:
            return ""
        limit = _within(self.limit, max_)
        assert limit is not None
        return f"limits:\n  - {{users: [alice], maxresources: {_res(limit)}}}\n"


def _within(res: tuple[int, int] | None, bound: tuple[int, int] | None) -> tuple[int, int] | None:
    if res is None or bound is None:
        return res
    return (min(res[0], bound[0]), min(res[1], bound[1]))


def _res(res: tuple[int, int]) -> str:
    """A resource of the configuration: vcore in milli-vcores there, as the SI counts."""
    return f"{{memory: {res[0]}, vcore: {res[1]}m}}"


def _resources(max_: tuple[int, int] | None, guaranteed: tuple[int, int] | None) -> str:
    if max_ is None and guaranteed is None:
        return ""
    out = "resources:\n"
    if max_ is not None:
        out += f"  max: {_res(max_)}\n"
    if guaranteed is not None:
        out += f"  guaranteed: {_res(guaranteed)}\n"
    return out


def _block(text: str, indent: int) -> list[str]:
    return [" " * indent + line for line in text.splitlines()]


leaves = st.builds(
    Leaf,
    st.sampled_from([None, None, (100, 10), (60, 40), (200, 15)]),
    st.sampled_from([None, None, (50, 5), (100, 4)]),
    st.sampled_from([0, 0, 0, 1, 2]),
    st.sampled_from(["", "", "", "fair", "priority"]),
)
parents = st.builds(
    Parent, st.sampled_from([None, None, (150, 20)]), st.lists(leaves, min_size=1, max_size=3)
).map(lambda p: Parent(p.max, tuple(p.leaves)))
setups = st.builds(
    Setup,
    st.lists(parents, min_size=1, max_size=2).map(tuple),
    st.sampled_from(["", "root", "root", "parent", "leaf"]),
    st.sampled_from([(80, 8), (50, 20)]),
    st.booleans(),
)


# ======================================================================== operations
# A pick chooses among the candidates from the most recent one back (0: the newest).
@dataclass(frozen=True)
class AddApp:
    queue: int
    user: int


@dataclass(frozen=True)
class AddGang:
    """A placeholder gang: the application and all its placeholder asks."""

    queue: int
    user: int
    groups: tuple[tuple[int, int], ...]  # (members, shape) of each task group
    style: str
    timeout_ms: int  # 0: the core's default


@dataclass(frozen=True)
class Ask:
    app: int
    shape: int
    count: int
    priority: int
    node: int | None  # a required node (a pick among the nodes ever added)


@dataclass(frozen=True)
class Asks:
    """Several asks in one request: the pass sees them all at once."""

    asks: tuple[Ask, ...]


@dataclass(frozen=True)
class Reals:
    """Real asks of a gang's task group (a shape other than the placeholder's at times)."""

    app: int
    group: int
    n: int
    shape: int | None  # None: the placeholder's


@dataclass(frozen=True)
class Permit:
    """Members of permit gang ``gang`` (``GANGS``) in one ask of an application."""

    app: int
    gang: int
    count: int
    shape: int


@dataclass(frozen=True)
class Release:
    pick: int
    n: int


@dataclass(frozen=True)
class ReleaseAsk:
    pick: int


@dataclass(frozen=True)
class Confirm:
    pick: int | None  # None: every release of the core not confirmed yet


@dataclass(frozen=True)
class Advance:
    seconds: float


@dataclass(frozen=True)
class AddNode:
    size: tuple[int, int]


@dataclass(frozen=True)
class RemoveNode:
    pick: int


@dataclass(frozen=True)
class RemoveApp:
    pick: int


Op = (
    AddApp
    | AddGang
    | Ask
    | Asks
    | Reals
    | Permit
    | Release
    | ReleaseAsk
    | Confirm
    | Advance
    | AddNode
    | RemoveNode
    | RemoveApp
)

picks = st.one_of(st.just(0), st.integers(0, 20))
users = st.integers(0, len(USERS) - 1)
shapes = st.one_of(st.sampled_from(FITTING), st.integers(0, len(SHAPES) - 1))
add_app = st.builds(AddApp, st.integers(0, 9), users)
add_gang = st.builds(
    AddGang,
    st.integers(0, 9),
    users,
    st.lists(st.tuples(st.integers(1, 3), st.integers(0, 3)), min_size=1, max_size=2).map(tuple),
    st.sampled_from(["Soft", "Hard"]),
    st.sampled_from([0, 0, 10_000]),
)
asks = st.builds(
    Ask,
    picks,
    shapes,
    st.sampled_from([1, 1, 2, 3, 5]),
    st.sampled_from(PRIORITIES),
    st.one_of(st.none(), st.none(), st.none(), picks),
)
backlog = st.builds(
    Ask, picks, st.sampled_from(FITTING), st.sampled_from([2, 4, 8]), st.just(0), st.none()
)
batches = st.builds(Asks, st.lists(asks, min_size=2, max_size=5).map(tuple))
real_shapes = st.one_of(st.none(), st.none(), st.sampled_from(FITTING))  # None: the group's
reals = st.builds(Reals, picks, st.integers(0, 1), st.integers(1, 3), real_shapes)
permits = st.builds(
    Permit, picks, st.integers(0, len(GANGS) - 1), st.integers(1, 3), st.sampled_from((0, 1, 3, 4))
)
releases = st.builds(Release, picks, st.sampled_from([1, 1, 2, 3]))
confirms = st.builds(Confirm, st.one_of(st.none(), picks))
advances = st.builds(
    Advance, st.sampled_from([0.5, RESERVATION_DELAY + 0.5, RESERVATION_DELAY + 0.5, 30, 700])
)


def _gang_story(gang: AddGang, reals: Reals, then: list[Op]) -> list[Op]:
    """A gang's usual life: its placeholders, real asks of a group (larger than the
    placeholder at times), then maybe the RM confirming the core's releases, the clock
    moving past a short placeholder timeout."""
    return [gang, reals, *then]


def _permit_story(first: Permit, more: list[tuple[int, int]]) -> list[Op]:
    """Members of one permit gang in several asks, of one application or several."""
    return [first, *(Permit(app, first.gang, count, first.shape) for app, count in more)]


def _large_story(large: Ask) -> list[Op]:
    """A shape no usual node holds, then a node that does."""
    return [large, AddNode(LARGE_NODE)]


def _reserve_story(newcomer: AddApp, batch: Asks, release: Release) -> list[Op]:
    """Asks wait past the reservation delay (the pending ones reserve nodes), a younger
    application asks too, and the RM releases: reserved and younger asks meet over the
    room it frees."""
    return [Advance(RESERVATION_DELAY + 0.5), newcomer, batch, release]


stories = st.one_of(
    st.builds(
        _gang_story,
        add_gang,
        st.builds(Reals, st.just(0), st.integers(0, 1), st.integers(1, 3), real_shapes),
        st.sampled_from([[], [Confirm(None)], [Advance(30)], [Confirm(None), Advance(30)]]),
    ),
    st.builds(_permit_story, permits, st.lists(st.tuples(picks, st.integers(1, 2)), max_size=3)),
    st.builds(_reserve_story, add_app, batches, releases),
    st.builds(
        _large_story,
        st.builds(
            Ask,
            picks,
            st.sampled_from(range(len(FITTING), len(SHAPES))),
            st.integers(1, 2),
            st.sampled_from(PRIORITIES),
            st.none(),
        ),
    ),
)
# Weighted by repetition: mostly asks, releases and the clock, so the cluster stays full
# and each release frees room for the backlog.
single: st.SearchStrategy[Op] = st.one_of(
    add_app,
    asks,
    asks,
    asks,
    batches,
    batches,
    add_gang,
    reals,
    permits,
    releases,
    releases,
    releases,
    releases,
    releases,
    st.builds(ReleaseAsk, picks),
    confirms,
    confirms,
    advances,
    advances,
    st.builds(AddNode, st.sampled_from((*NODE_SIZES, LARGE_NODE))),
    st.builds(RemoveNode, picks),
    st.builds(RemoveApp, picks),
)


# A start that fills the cluster: a few applications, nodes, and a backlog in one request
# (before some of the nodes, so that one pass places several of its asks); then anything.
def _program(
    start: list[Op], nodes: list[AddNode], k: int, fill: list[Ask], chunks: list[list[Op]]
) -> list[Op]:
    k %= len(nodes) + 1
    return [*start, *nodes[:k], Asks(tuple(fill)), *nodes[k:], *(op for c in chunks for op in c)]


programs = st.builds(
    _program,
    st.lists(add_app, min_size=1, max_size=3),
    st.lists(st.sampled_from(NODE_SIZES).map(AddNode), min_size=2, max_size=5),
    st.integers(0, 5),
    st.lists(backlog, min_size=2, max_size=6),
    st.lists(
        st.one_of(stories, single.map(lambda op: [op]), single.map(lambda op: [op])),
        min_size=15,
        max_size=40,
    ),
)


def pick(items: list[T], i: int) -> T | None:
    return items[-1 - i % len(items)] if items else None


def shape_res(shape: int) -> dict[str, int]:
    memory, vcore = SHAPES[shape]
    return {"memory": memory, "vcore": vcore}


# ============================================================================ driving
@dataclass
class Side:
    """One core, and the releases of the core its RM confirmed."""

    d: Driver
    actor: PartitionActor
    confirmed: set[str] = field(default_factory=set)  # uuids

    def live(self) -> list[si.Allocation]:
        """The allocations the RM holds and may release, in the order it got them."""
        gone = {r.uuid for r in self.d.rm.released}
        return [a for a in self.d.rm.allocations if a.uuid not in gone]

    def outstanding(self) -> list[si.AllocationRelease]:
        """The core's own releases (replaced or timed out) the RM has not confirmed."""
        return [
            r
            for r in self.d.rm.released
            if r.termination_type != STOPPED and r.uuid not in self.confirmed
        ]


Sides = tuple[Side, Side]


@dataclass
class Program:
    """What the RM sent so far: the same for both cores."""

    leaves: list[str]
    nodes: list[str] = field(default_factory=list)  # every node ever added
    live_nodes: list[str] = field(default_factory=list)
    apps: list[str] = field(default_factory=list)  # neither removed nor rejected
    gangs: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # app -> groups
    keys: list[tuple[str, str]] = field(default_factory=list)  # (app, ask key) sent
    shapes: dict[str, int] = field(default_factory=dict)  # ask key -> its shape
    required: set[str] = field(default_factory=set)  # keys of asks that require a node
    made: int = 0  # applications and asks made, for unique names

    def name(self, prefix: str) -> str:
        self.made += 1
        return f"{prefix}{self.made}"

    def asked(self, app_id: str, key: str, shape: int) -> None:
        self.keys.append((app_id, key))
        self.shapes[key] = shape


async def both(sides: Sides, send: Callable[[Driver], Awaitable[None]]) -> None:
    for s in sides:
        await send(s.d)


async def settle(side: Side) -> None:
    await asyncio.wait_for(side.d.settle(), SETTLE_TIMEOUT)


async def step(prog: Program, sides: Sides, op: Op) -> str:
    """Send ``op`` to both cores; what was sent (empty: nothing to send)."""
    match op:
        case AddApp():
            return await _add_app(prog, sides, op)
        case AddGang():
            return await _add_gang(prog, sides, op)
        case Ask() | Asks():
            return await _asks(prog, sides, op)
        case Reals():
            return await _reals(prog, sides, op)
        case Permit():
            return await _permit(prog, sides, op)
        case Release():
            return await _release(sides, op)
        case ReleaseAsk(pick=i):
            chosen = pick(prog.keys, i)
            if chosen is None:
                return ""
            await both(sides, lambda d: d.release_asks(*chosen))
            return f"release ask {chosen[1]}"
        case Confirm():
            return await _confirm(sides, op)
        case Advance(seconds=seconds):
            await both(sides, lambda d: d.clock.advance(seconds))
            return f"advance {seconds}s"
        case AddNode() | RemoveNode():
            return await _node(prog, sides, op)
        case RemoveApp(pick=i):
            app_id = pick(prog.apps, i)
            if app_id is None:
                return ""
            prog.apps.remove(app_id)
            await both(sides, lambda d: d.remove_apps(app_id))
            return f"remove {app_id}"
    raise AssertionError(op)


async def _add_app(prog: Program, sides: Sides, op: AddApp) -> str:
    app_id = prog.name("app")
    queue = prog.leaves[op.queue % len(prog.leaves)]
    prog.apps.append(app_id)
    await both(sides, lambda d: d.apps(app(app_id, queue, USERS[op.user])))
    return f"add {app_id} in {queue} for {USERS[op.user]}"


async def _add_gang(prog: Program, sides: Sides, gang: AddGang) -> str:
    app_id = prog.name("gang")
    queue = prog.leaves[gang.queue % len(prog.leaves)]
    total = {"memory": 0, "vcore": 0}
    for members, shape in gang.groups:
        for name, v in shape_res(shape).items():
            total[name] += v * members
    request = app(
        app_id,
        queue,
        USERS[gang.user],
        placeholder_ask=si.Resource.of(**total),
        gang_scheduling_style=gang.style,
        execution_timeout_milliseconds=gang.timeout_ms,
    )
    phs = []
    for g, (members, shape) in enumerate(gang.groups):
        for i in range(members):
            key = f"{app_id}-ph{g}-{i}"
            prog.asked(app_id, key, shape)
            phs.append(
                ask(key, app_id, **shape_res(shape), task_group_name=f"tg{g}", placeholder=True)
            )
    prog.apps.append(app_id)
    prog.gangs[app_id] = list(gang.groups)
    await both(sides, lambda d: d.apps(request))
    await both(sides, lambda d: d.asks(*phs))
    groups = [(members, SHAPES[shape]) for members, shape in gang.groups]
    return (
        f"add {gang.style} gang {app_id} in {queue} for {USERS[gang.user]}, groups {groups}, "
        f"timeout {gang.timeout_ms} ms"
    )


async def _asks(prog: Program, sides: Sides, op: Ask | Asks) -> str:
    """One request with the asks of ``op``."""
    requests, shown = [], []
    for one in op.asks if isinstance(op, Asks) else (op,):
        app_id = pick(prog.apps, one.app)
        if app_id is None:
            continue
        key = prog.name(f"{app_id}-k")
        required = pick(prog.nodes, one.node) if one.node is not None else None
        tags = {REQUIRED_NODE: required} if required is not None else {}
        res = shape_res(one.shape)
        requests.append(ask(key, app_id, **res, count=one.count, priority=one.priority, tags=tags))
        prog.asked(app_id, key, one.shape)
        if required is not None:
            prog.required.add(key)
        where = f" on {required}" if required else ""
        shown.append(f"ask {key} {SHAPES[one.shape]} x{one.count} prio {one.priority}{where}")
    if requests:
        await both(sides, lambda d: d.asks(*requests))
    return "; ".join(shown)


async def _reals(prog: Program, sides: Sides, op: Reals) -> str:
    app_id = pick([a for a in prog.apps if a in prog.gangs], op.app)
    if app_id is None:
        return ""
    groups = prog.gangs[app_id]
    group = op.group % len(groups)
    shape = groups[group][1] if op.shape is None else op.shape
    requests = []
    for _ in range(op.n):
        key = prog.name(f"{app_id}-r")
        prog.asked(app_id, key, shape)
        requests.append(ask(key, app_id, **shape_res(shape), task_group_name=f"tg{group}"))
    await both(sides, lambda d: d.asks(*requests))
    return f"reals {[r.allocation_key for r in requests]} of tg{group} {SHAPES[shape]}"


def permit_tags(gang: int) -> dict[str, str]:
    min_available, mode, waiting, group = GANGS[gang]
    return gang_tags(f"g{gang}", min_available, mode=mode, waiting_time=waiting, groups=group)


async def _permit(prog: Program, sides: Sides, op: Permit) -> str:
    app_id = pick(prog.apps, op.app)
    if app_id is None:
        return ""
    key = prog.name(f"{app_id}-m")
    request = ask(key, app_id, **shape_res(op.shape), count=op.count, tags=permit_tags(op.gang))
    prog.asked(app_id, key, op.shape)
    await both(sides, lambda d: d.asks(request))
    return f"member {key} of g{op.gang} {SHAPES[op.shape]} x{op.count}"


async def _release(sides: Sides, op: Release) -> str:
    """The RM releases allocations it holds: the same on both cores, as each core's list
    is the same (checked after every step) but for the uuids."""
    chosen = []
    if not sides[0].live():
        return ""
    for s in sides:
        live = s.live()
        chosen.append([live[-1 - (op.pick + j) % len(live)] for j in range(min(op.n, len(live)))])
        await s.d.release(*chosen[-1])
    return ", ".join(f"release {a.allocation_key} on {a.node_id}" for a in chosen[0])


async def _confirm(sides: Sides, op: Confirm) -> str:
    """The RM confirms releases of the core, with their uuid and termination type."""
    shown = []
    for s in sides:
        out = s.outstanding()
        rels = out if op.pick is None or not out else [out[-1 - op.pick % len(out)]]
        if not rels:
            continue
        s.confirmed.update(r.uuid for r in rels)
        await s.d.core.update_allocation(
            si.AllocationRequest(
                rm_id=RM,
                releases=si.AllocationReleasesRequest(
                    allocations_to_release=[
                        si.AllocationRelease(
                            partition_name="default",
                            application_id=r.application_id,
                            uuid=r.uuid,
                            termination_type=r.termination_type,
                        )
                        for r in rels
                    ]
                ),
            )
        )
        shown = [f"{r.application_id} {r.termination_type.name}" for r in rels]
    return f"confirm {', '.join(shown)}" if shown else ""


async def _node(prog: Program, sides: Sides, op: AddNode | RemoveNode) -> str:
    if isinstance(op, AddNode):
        node_id = f"n{len(prog.nodes)}"
        prog.nodes.append(node_id)
        prog.live_nodes.append(node_id)
        memory, vcore = op.size
        await both(sides, lambda d: d.nodes(node(node_id, memory=memory, vcore=vcore)))
        return f"add node {node_id} memory={memory} vcore={vcore}"
    gone = pick(prog.live_nodes, op.pick)
    if gone is None:
        return ""
    prog.live_nodes.remove(gone)
    info = si.NodeInfo(node_id=gone, action=si.ActionFromRM.DECOMISSION)
    await both(sides, lambda d: d.nodes(info))
    return f"remove node {gone}"


# ========================================================================== checking
# Events of the pass's decisions: a reservation made and dropped within one step shows here
# only; a Strict gang's rollback, a gang satisfied, a placeholder replaced or cancelled.
DECISIONS = frozenset(
    {
        "AskReserved",
        "GangRolledBack",
        "GangSatisfied",
        "GangTimeout",
        "PlaceholderReplaced",
        "PlaceholderCancelled",
    }
)


def observed(side: Side) -> dict[str, list[Any]]:
    """What the core decided so far, without uuids."""
    rm = side.d.rm
    keys = {a.uuid: a.allocation_key for a in rm.allocations}
    return {
        "allocations": [
            (a.application_id, a.allocation_key, a.node_id, a.placeholder) for a in rm.allocations
        ],
        "releases": [
            (r.application_id, keys.get(r.uuid, r.allocation_key), r.termination_type.name)
            for r in rm.released
        ],
        "reservations": [
            (node_id, r.application_id, r.ask.allocation_key)
            for node_id, r in side.actor.partition.reservations.by_node.items()
        ],
        "released asks": [
            (r.application_id, r.allocation_key, r.termination_type.name) for r in rm.released_asks
        ],
        "rejected asks": [(r.application_id, r.allocation_key) for r in rm.rejected_asks],
        "application states": [
            (u.application_id, u.state) for r in rm.application_responses for u in r.updated
        ],
        "decision events": [(e.reason, e.object_id) for e in rm.events if e.reason in DECISIONS],
    }


def assert_same(reference: Side, by_shape: Side) -> None:
    """Both cores decided the same; else the first difference of each kind."""
    assert reference.actor.scheduler.by_shape is False, "the reference walks by shape"
    assert by_shape.actor.scheduler.by_shape is True
    want, got = observed(reference), observed(by_shape)
    problems = []
    for what, expected in want.items():
        actual = got[what]
        if actual == expected:
            continue
        at = next(
            (i for i, (x, y) in enumerate(zip(expected, actual, strict=False)) if x != y),
            min(len(expected), len(actual)),
        )
        problems.append(
            f"{what} differ from #{at} on (of {len(expected)} and {len(actual)}):\n"
            f"  ask by ask: {expected[at : at + 4]}\n  by shape:   {actual[at : at + 4]}"
        )
    assert not problems, "the walk by shape decided otherwise:\n" + "\n".join(problems)


# ============================================================================ running
@asynccontextmanager
async def two_cores(config: str) -> AsyncIterator[tuple[Side, Side]]:
    """The reference core (ask by ask) and the core that walks by shape, registered."""
    async with AsyncExitStack() as stack:
        sides = []
        for by_shape in (False, True):
            clock = ManualClock()
            core = await stack.enter_async_context(scheduler.start_scheduler(clock=clock))
            d = Driver(core, clock)
            await d.register(config)
            await d.settle()  # the partition's actor has started
            actor: PartitionActor = core._registrations[RM].actors["default"]
            actor.scheduler.by_shape = by_shape
            sides.append(Side(d, actor))
        yield sides[0], sides[1]


async def run(setup: Setup, program: list[Op]) -> None:
    config = setup.yaml()
    note(config)
    with ErrorWatch() as errors:
        async with two_cores(config) as sides:
            prog = Program(setup.leaf_paths())
            rm = sides[0].d.rm
            for n, op in enumerate(program):
                before = len(rm.allocations)
                what = await step(prog, sides, op)
                for s in sides:
                    await settle(s)
                note(f"{n:2}. {what or f'(nothing to do: {op})'}")
                assert_same(*sides)
                if isinstance(op, Release) and what and len(rm.allocations) > before:
                    event("a release refilled from the backlog")
                rejected = {r.application_id for r in rm.rejected_apps}
                prog.apps = [a for a in prog.apps if a not in rejected]
            tally(prog, sides[0])
    assert not errors, errors.report()


def tally(prog: Program, side: Side) -> None:
    """Which paths the example reached (``--hypothesis-show-statistics``)."""
    rm = side.d.rm
    allocated = {a.allocation_key for a in rm.allocations}
    reasons = {e.reason for e in rm.events}
    for reason in sorted(reasons & DECISIONS):
        event(reason)
    if any(a.placeholder for a in rm.allocations):
        event("placeholder allocated")
    if any(r.uuid in side.confirmed for r in rm.released):
        event("the RM confirmed a release of the core")
    if any("-m" in key for key in allocated):
        event("permit member allocated")
    if allocated & prog.required:
        event("ask with a required node allocated")
    if any(prog.shapes[key] >= len(FITTING) for key in allocated):
        event("shape larger than a usual node allocated")
    if any(r.termination_type is si.TerminationType.TIMEOUT for r in rm.released):
        event("placeholder timed out")
    if rm.rejected_apps:
        event("application rejected")


# No explain phase: it replays the shrunk example hundreds of times (minutes) to mark the
# steps that do not matter; the notes already print every step and the configuration.
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
)
@given(setup=setups, program=programs)
def test_walk_by_shape_decides_as_the_ask_by_ask_walk(setup: Setup, program: list[Op]) -> None:
    asyncio.run(run(setup, program))


# ========================================================================= by hand
# Three shapes none of which fits where another was: nodes of two A slots, of two B slots
# and of one C slot, so a release frees room for its own shape only.
A, B, C = (40, 1), (10, 5), (25, 3)
TOO_BIG = (150, 2)  # no node holds it
ONE_LEAF = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: a
"""
SLOTS = {"n0": (80, 2), "n1": (80, 2), "n2": (20, 10), "n3": (20, 10), "n4": (25, 3)}
# What the RM releases, what the backlog refills it with, in order: the oldest pending ask
# of the freed shape, old's before young's (a fifo queue); X never.
REFILLS = [
    (["old A1"], ["old A4"]),
    (["old C0", "old B0"], ["old C1", "old B4"]),
    (["old A0", "old A2", "old B3"], ["old A5", "old B5", "young A0"]),
    (["old C1", "old A3", "old B1", "old B2"], ["old C2", "young B0", "young A1", "young B1"]),
]
# Once the asks waited past the reservation delay, each shape's oldest pending ask holds a
# node; a release of a reserved node goes to its ask, that of another node of the shape
# too (its reservation is dropped), and the next oldest ask reserves a node again.
RESERVED = [("n4", "old C3"), ("n0", "young A2"), ("n2", "young B2")]
REFILLS_RESERVED = [
    (["old C2"], ["old C3"], [("n0", "young A2"), ("n2", "young B2"), ("n4", "old C4")]),
    (["young A1"], ["young A2"], [("n2", "young B2"), ("n4", "old C4")]),
    (["old B4"], ["young B2"], [("n4", "old C4")]),
]


def _named(allocs: list[si.Allocation]) -> list[str]:
    return [f"{a.application_id} {a.allocation_key}" for a in allocs]


def _reserved(side: Side) -> list[tuple[str, str]]:
    return [
        (node_id, f"{r.application_id} {r.ask.allocation_key}")
        for node_id, r in side.actor.partition.reservations.by_node.items()
    ]


async def _release_named(sides: tuple[Side, Side], names: list[str]) -> list[str]:
    """The RM releases the allocations ``names`` on both cores; what the backlog refilled."""
    before = len(sides[0].d.rm.allocations)
    for s in sides:
        live = dict(zip(_named(s.live()), s.live(), strict=True))
        await s.d.release(*(live[name] for name in names))
        await settle(s)
    assert_same(*sides)
    return _named(sides[0].d.rm.allocations[before:])


@pytest.mark.asyncio
async def test_release_refills_the_oldest_ask_of_the_freed_shape() -> None:
    """A full cluster with a backlog of several shapes: each release is refilled by the
    oldest ask of the shape it freed, on both walks, before and after reservations."""
    shapes = {"A": A, "B": B, "C": C, "X": TOO_BIG}
    # old's backlog, shape by shape in turn with X first, then young's of the same shapes
    backlog = [("old", f"{shape}{i}") for i in range(6) for shape in "XABC"]
    backlog += [("young", f"{shape}{i}") for i in range(3) for shape in "ABC"]
    requests = [
        ask(key, app_id, memory=shapes[key[0]][0], vcore=shapes[key[0]][1])
        for app_id, key in backlog
    ]
    async with two_cores(ONE_LEAF) as sides:
        for s in sides:
            await s.d.nodes(*(node(n, memory=m, vcore=v) for n, (m, v) in SLOTS.items()))
            await s.d.apps(app("old", "root.a"), app("young", "root.a"))
            await s.d.asks(*requests)
            await settle(s)
        assert_same(*sides)
        # every slot taken by the oldest asks of its shape
        slots = ["A0", "A1", "A2", "A3", "B0", "B1", "B2", "B3", "C0"]
        assert sorted(_named(sides[0].d.rm.allocations)) == [f"old {k}" for k in slots]
        for released, refilled in REFILLS:
            assert await _release_named(sides, released) == refilled, released
        assert _reserved(sides[0]) == []  # nothing waited long enough yet

        for s in sides:
            await s.d.clock.advance(RESERVATION_DELAY + 1)
            await settle(s)
        assert_same(*sides)
        assert _reserved(sides[0]) == RESERVED
        for released, refilled, reserved in REFILLS_RESERVED:
            assert await _release_named(sides, released) == refilled, released
            assert _reserved(sides[0]) == reserved, released
        assert not [name for name in _named(sides[0].d.rm.allocations) if " X" in name]


# ============================================================ found by the property
# Divergences the property found in the first walk by shape (main at 44ee0db), made small.
async def settled(sides: Sides, send: Callable[[Driver], Awaitable[None]]) -> None:
    """``send`` to both cores, each settled after."""
    for s in sides:
        await send(s.d)
        await settle(s)


async def release_key(sides: Sides, key: str) -> None:
    for s in sides:
        await s.d.release(next(a for a in s.live() if a.allocation_key == key))
        await settle(s)


@pytest.mark.asyncio
async def test_a_reserved_ask_takes_room_freed_on_another_node_before_a_younger_ask() -> None:
    """R waits on its reservation of n0 (full); the RM releases on n1, reserved by R2: R2
    takes n1 and what is left of it goes to R, not to the younger application's Y (the
    reserved asks first, each on any node once its own has no room: YuniKorn's
    ``tryReservedAllocate``). The walk by shape gave it to Y."""
    async with two_cores(ONE_LEAF) as sides:
        await settled(sides, lambda d: d.nodes(node("n0", 20, 2), node("n1", 60, 6)))
        await settled(sides, lambda d: d.apps(*(app(a, "root.a") for a in ("f", "old", "young"))))
        await settled(sides, lambda d: d.asks(ask("f0", "f", 20, 2), ask("f1", "f", 60, 6)))
        await settled(sides, lambda d: d.asks(ask("R2", "old", 40, 4), ask("R", "old", 20, 2)))
        await settled(sides, lambda d: d.clock.advance(RESERVATION_DELAY + 1))
        await settled(sides, lambda d: d.asks(ask("Y", "young", 10, 1)))
        assert _reserved(sides[0]) == [("n1", "old R2"), ("n0", "old R")]
        assert_same(*sides)
        await release_key(sides, "f1")
        assert _named(sides[0].d.rm.allocations[2:]) == ["old R2", "old R"]
        assert _reserved(sides[0]) == []
        assert_same(*sides)


@pytest.mark.asyncio
async def test_an_ask_with_room_on_its_reserved_node_does_not_reserve_it_again() -> None:
    """k4 holds n0 and n1 for four more allocations. Removing app2 frees n0: the four go
    there, and no node is reserved again on the way (the RM hears of each reservation, an
    ``AskReserved`` event). The walk by shape reserved n0 again between them, twice."""
    async with two_cores(ONE_LEAF + "          - name: b\n") as sides:
        await settled(sides, lambda d: d.apps(app("app1", "root.a"), app("app2", "root.b")))
        await settled(
            sides,
            lambda d: d.asks(ask("k3", "app2", 60, 6, count=2), ask("k4", "app1", 10, 1, count=8)),
        )
        await settled(sides, lambda d: d.nodes(node("n0", 60, 16)))
        await settled(sides, lambda d: d.nodes(node("n1", 40, 20)))
        await settled(sides, lambda d: d.clock.advance(RESERVATION_DELAY + 0.5))
        assert _reserved(sides[0]) == [("n0", "app1 k4"), ("n1", "app1 k4")]
        assert_same(*sides)
        rm = sides[0].d.rm
        before, events = len(rm.allocations), len(rm.events)
        await settled(sides, lambda d: d.remove_apps("app2"))
        assert [(a.allocation_key, a.node_id) for a in rm.allocations[before:]] == [
            ("k4", "n0")
        ] * 4
        assert [e.reason for e in rm.events[events:] if e.reason == "AskReserved"] == []
        assert _reserved(sides[0]) == []
        assert_same(*sides)
