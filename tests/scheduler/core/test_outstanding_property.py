"""Outstanding requests at random: the inspection by shape reports what the walk ask by ask
reports.

Each example starts two cores on their own ``ManualClock``: one inspects by shape (the
default), the other walks every pending ask and remembers each by itself
(``OutstandingRequests.by_shape = False``, the reference). A drawn program plays on both:
asks of mixed shapes, priorities and counts (some bound to a node, some sent again under a
key already used) come to applications in a leaf without a max, in a leaf with one, in a
leaf under a parent with one, in a queue of one running application, and of a user with a
``maxresources`` limit; a gang sends its placeholders and its real asks; the RM withdraws
asks and releases allocations; nodes come and go; the maxes are lowered and raised. After
every step the clock moves by the interval, so each step is followed by an inspection, and
both cores must have sent the same ``update_container_scheduling_state`` calls (application,
allocation key, state and reason, in order) and the same allocations. Half of the programs
run with an RM that checks predicates and refuses some asks every node.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import scheduler
from scheduler import si
from scheduler.testing import ErrorWatch, ManualClock, RecordingCallback

from ..conftest import RM, Driver, app, ask, node

pytestmark = pytest.mark.asyncio

CONFIG = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: free
            limits:
              - limit: bob
                users: [bob]
                maxresources: {{memory: 9}}
          - name: cap
            resources:
              max: {{memory: {cap}, vcore: 40}}
          - name: one
            maxapplications: 1
          - name: sa
            properties:
              application.sort.policy: stateaware
          - name: p
            resources:
              max: {{memory: {parent}}}
            queues:
              - name: x
              - name: y
"""
APPS = {  # application -> (queue, user)
    "free-1": ("root.free", "alice"),
    "bob-1": ("root.free", "bob"),
    "cap-1": ("root.cap", "alice"),
    "cap-2": ("root.cap", "alice"),
    "one-1": ("root.one", "alice"),
    "one-2": ("root.one", "alice"),
    "sa-1": ("root.sa", "alice"),
    "sa-2": ("root.sa", "alice"),
    "x-1": ("root.p.x", "alice"),
    "y-1": ("root.p.y", "bob"),
}
GANG = "gang-1"  # in root.cap, with a placeholder total of 3 placeholders of 2
SHAPES = ((1, 1), (2, 1), (3, 1), (2, 2), (5, 1))  # (memory, vcore)
REQUIRED = si.DOMAIN_YUNIKORN + si.KEY_REQUIRED_NODE
# Examples per run; a deeper search: OUTSTANDING_PROPERTY_EXAMPLES=2000 pytest <this file>
EXAMPLES = int(os.environ.get("OUTSTANDING_PROPERTY_EXAMPLES", "450"))


# ======================================================================== the program
@dataclass(frozen=True)
class NewAsk:
    shape: int
    priority: int
    count: int
    bound: bool  # to the first node
    again: int | None  # sent again under the key of an earlier ask of its application


@dataclass(frozen=True)
class Asks:
    app: str
    asks: tuple[NewAsk, ...]


@dataclass(frozen=True)
class Withdraw:
    app: str
    pick: int


@dataclass(frozen=True)
class AddNode:
    memory: int


@dataclass(frozen=True)
class RemoveNode:
    pick: int


@dataclass(frozen=True)
class Release:
    pick: int
    count: int


@dataclass(frozen=True)
class Maxes:
    cap: int
    parent: int


@dataclass(frozen=True)
class Gang:
    placeholders: int
    reals: int


Step = Asks | Withdraw | AddNode | RemoveNode | Release | Maxes | Gang

new_asks = st.builds(
    NewAsk,
    shape=st.integers(0, len(SHAPES) - 1),
    priority=st.sampled_from([0, 0, 0, 5]),
    count=st.sampled_from([1, 1, 1, 2, 3]),
    bound=st.integers(0, 9).map(lambda n: n == 0),
    again=st.one_of(st.none(), st.none(), st.none(), st.integers(0, 20)),
)
# A burst: several asks of one shape and priority, to one application of a queue with a
# max (or of the stateaware queue), so the headroom admits some and holds the rest.
bursts = st.builds(
    lambda app_id, one, n: Asks(
        app_id, (NewAsk(one.shape, one.priority, one.count, False, None),) * n
    ),
    st.sampled_from(["cap-1", "cap-2", "x-1", "y-1", "sa-1", "sa-2"]),
    new_asks,
    st.integers(2, 6),
)
steps = st.one_of(
    st.builds(
        Asks, st.sampled_from(sorted(APPS)), st.lists(new_asks, min_size=1, max_size=6).map(tuple)
    ),
    bursts,
    bursts,
    st.builds(Withdraw, st.sampled_from([*APPS, GANG]), st.integers(0, 30)),
    st.builds(AddNode, st.sampled_from([2, 3, 4, 6, 12])),
    st.builds(RemoveNode, st.integers(0, 10)),
    st.builds(Release, st.integers(0, 50), st.integers(1, 4)),
    st.builds(Maxes, st.sampled_from([4, 12, 60]), st.sampled_from([5, 15, 100])),
    st.builds(Maxes, st.sampled_from([4, 12, 60]), st.sampled_from([5, 15, 100])),
    st.builds(Gang, st.integers(1, 4), st.integers(0, 3)),
)


@dataclass(frozen=True)
class Program:
    picky: bool  # the RM checks predicates and refuses every node to some asks
    nodes: tuple[int, ...]  # the memory of the first nodes
    maxes: Maxes
    steps: tuple[Step, ...]


programs = st.builds(
    Program,
    picky=st.booleans(),
    nodes=st.lists(st.sampled_from([2, 3, 4, 6]), min_size=1, max_size=3).map(tuple),
    maxes=st.builds(Maxes, st.sampled_from([4, 12, 60]), st.sampled_from([5, 15, 100])),
    steps=st.lists(steps, min_size=4, max_size=24).map(tuple),
)


# ============================================================================ the RMs
class Picky(RecordingCallback):
    """Refuses every node to the asks whose key ends in 3 (never one bound to a node: the
    walk would propose it again and again, as it does not remember the refusal for it)."""

    async def predicates(self, args: si.PredicatesArgs) -> bool:
        return not args.allocation_key.endswith("3")


class Side:
    """One core and what its RM sent and holds."""

    def __init__(self, driver: Driver) -> None:
        self.d = driver
        self.nodes: list[str] = []
        self.keys: dict[str, list[str]] = {}  # application -> the keys it asked for
        self.released: set[str] = set()  # uuids the RM released

    def reports(self) -> list[tuple[str, str, str, str]]:
        return [
            (r.application_id, r.allocation_key, r.state.name, r.reason)
            for r in self.d.rm.scheduling_states
        ]

    def held(self) -> list[si.Allocation]:
        """What the RM holds: allocated, not released by either side."""
        gone = self.released | {r.uuid for r in self.d.rm.released}
        return [a for a in self.d.rm.allocations if a.uuid not in gone]


@asynccontextmanager
async def side(program: Program, by_shape: bool) -> AsyncIterator[Side]:
    clock = ManualClock()
    async with scheduler.start_scheduler(clock=clock) as core:
        d = Driver(core, clock)
        d.rm = Picky() if program.picky else RecordingCallback()
        await d.register(CONFIG.format(cap=program.maxes.cap, parent=program.maxes.parent))
        await d.settle()  # the partition's actor started
        partition = core._registrations[RM].actors["default"]
        assert partition.outstanding is not None
        partition.outstanding.by_shape = by_shape
        s = Side(d)
        await d.apps(*(app(a, q, user=u) for a, (q, u) in APPS.items()))
        await d.apps(app(GANG, "root.cap", placeholder_ask=si.Resource.of(memory=6, vcore=3)))
        for memory in program.nodes:
            await add_node(s, memory)
        await d.settle()
        yield s


async def add_node(s: Side, memory: int) -> None:
    name = f"n{len(s.nodes) + 1}"
    s.nodes.append(name)
    await s.d.nodes(node(name, memory=memory, vcore=8))


async def apply(s: Side, step: Step, n: int) -> None:
    """Play ``step`` (the ``n``-th) on ``s``, then let the interval pass."""
    d = s.d
    match step:
        case Asks(app=app_id, asks=asks):
            await d.asks(*(new_ask(s, app_id, a, f"{app_id}-{n}-{i}") for i, a in enumerate(asks)))
        case Withdraw(app=app_id, pick=pick):
            keys = s.keys.get(app_id)
            if keys:
                await d.release_asks(app_id, keys[pick % len(keys)])
        case AddNode(memory=memory):
            await add_node(s, memory)
        case RemoveNode(pick=pick):
            if s.nodes:
                name = s.nodes[pick % len(s.nodes)]
                await d.nodes(si.NodeInfo(node_id=name, action=si.ActionFromRM.DECOMISSION))
        case Release(pick=pick, count=count):
            await release(s, pick, count)
        case Maxes(cap=cap, parent=parent):
            config = CONFIG.format(cap=cap, parent=parent)
            await d.core.update_configuration(
                si.UpdateConfigurationRequest(rm_id=RM, config=config)
            )
        case Gang(placeholders=placeholders, reals=reals):
            gang = [
                ask(f"ph-{n}-{i}", GANG, 2, 1, task_group_name="tg", placeholder=True)
                for i in range(placeholders)
            ]
            gang += [ask(f"real-{n}-{i}", GANG, 2, 1, task_group_name="tg") for i in range(reals)]
            s.keys.setdefault(GANG, []).extend(a.allocation_key for a in gang)
            await d.asks(*gang)
    await d.settle()
    await d.clock.advance(1)  # the interval: an inspection if anything happened
    await d.settle()


def new_ask(s: Side, app_id: str, a: NewAsk, fresh: str) -> si.AllocationAsk:
    """The SI ask of ``a``: under a key used before (``again``), else under ``fresh``."""
    keys = s.keys.setdefault(app_id, [])
    if a.again is not None and keys and not a.bound:
        key = keys[a.again % len(keys)]
    else:
        key = fresh + ("b" if a.bound else "")
        keys.append(key)
    memory, vcore = SHAPES[a.shape]
    tags = {REQUIRED: s.nodes[0]} if a.bound and s.nodes else {}
    return ask(key, app_id, memory, vcore, a.count, priority=a.priority, tags=tags)


async def release(s: Side, pick: int, count: int) -> None:
    """The RM releases ``count`` of the allocations it holds, from the ``pick``-th on."""
    held = s.held()
    if held:
        chosen = {
            held[(pick + i) % len(held)].uuid: held[(pick + i) % len(held)] for i in range(count)
        }
        s.released |= chosen.keys()
        await s.d.release(*chosen.values())


def allocations(s: Side) -> list[tuple[str, str, str]]:
    return [(a.application_id, a.allocation_key, a.node_id) for a in s.d.rm.allocations]


async def run(program: Program) -> None:
    note(f"picky={program.picky} nodes={program.nodes} maxes={program.maxes}")
    with ErrorWatch() as errors:
        async with AsyncExitStack() as stack:
            by_shape = await stack.enter_async_context(side(program, True))
            by_ask = await stack.enter_async_context(side(program, False))
            for n, step in enumerate(program.steps):
                note(f"{n:2}. {step}")
                await apply(by_shape, step, n)
                await apply(by_ask, step, n)
                assert allocations(by_shape) == allocations(by_ask)
                assert by_shape.reports() == by_ask.reports()
    assert not errors, errors.report()


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(program=programs)
async def test_the_inspection_by_shape_reports_what_the_walk_ask_by_ask_reports(
    program: Program,
) -> None:
    await run(program)
