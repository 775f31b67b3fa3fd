"""Preemption between queues and on a required node, through the public API on a manual
clock: the laws of YuniKorn 1.3+'s design (``docs/design/preemption.md``), the awaited
handshake with the RM, and its faults."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import scheduler
from scheduler import si
from scheduler.testing import ManualClock, RecordingCallback, gang_tags

from ..conftest import RM, Driver, app, ask, node

pytestmark = pytest.mark.asyncio

PREEMPTED = si.TerminationType.PREEMPTED_BY_SCHEDULER
MAY_PREEMPT = si.PreemptionPolicy(allow_preempt_self=True, allow_preempt_other=True)
REQUIRED = si.DOMAIN_YUNIKORN + si.KEY_REQUIRED_NODE

TWO = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: starved
            resources:
              guaranteed: {memory: 50}
          - name: greedy
"""


def preemptor(key: str, app_id: str, memory: int = 10, **kw: Any) -> si.AllocationAsk:
    return ask(key, app_id, memory=memory, vcore=0, preemption_policy=MAY_PREEMPT, **kw)


def victims(d: Driver) -> list[si.AllocationRelease]:
    return [r for r in d.rm.released if r.termination_type == PREEMPTED]


async def confirm(d: Driver, rels: list[si.AllocationRelease]) -> None:
    await d.core.update_allocation(
        si.AllocationRequest(
            rm_id=RM,
            releases=si.AllocationReleasesRequest(
                allocations_to_release=[
                    si.AllocationRelease(
                        partition_name="default",
                        application_id=r.application_id,
                        uuid=r.uuid,
                        termination_type=PREEMPTED,
                    )
                    for r in rels
                ]
            ),
        )
    )


async def full_cluster(d: Driver, config: str = TWO) -> None:
    """One node of memory 100, filled by ten allocations of 10 in ``greedy``."""
    await d.register(config)
    await d.nodes(node("n1", memory=100, vcore=100))
    await d.apps(app("g", "root.greedy"), app("s", "root.starved"))
    await d.asks(*(ask(f"g-{i}", "g", memory=10, vcore=0) for i in range(10)))
    await d.settle()
    assert len(d.allocs("g")) == 10


async def test_a_starved_queue_takes_its_guarantee_back_after_the_delay(driver: Driver) -> None:
    d = driver
    await full_cluster(d)
    await d.asks(preemptor("s-0", "s"))
    await d.settle()
    assert victims(d) == []  # within preemption.delay (30s by default)
    await d.clock.advance(29)
    await d.settle()
    assert victims(d) == []
    await d.clock.advance(1)
    await d.settle()
    (victim,) = victims(d)
    assert victim.application_id == "g"
    assert d.allocs("s") == []  # the victim is still there until the RM confirms it
    await confirm(d, [victim])
    await d.settle()
    (placed,) = d.allocs("s")
    assert placed.node_id == "n1"


async def test_only_the_asks_that_may_preempt_do_and_an_update_may_allow_it(
    driver: Driver,
) -> None:
    """An application whose asks may not preempt is passed over (its queue is below its
    guarantee); the same ask sent again allowing it preempts after the delay."""
    d = driver
    await full_cluster(d)
    await d.asks(*(ask(f"s-{i}", "s", memory=10, vcore=0) for i in range(2)))
    await d.settle()
    await d.clock.advance(60)
    await d.settle()
    assert victims(d) == []
    await d.asks(preemptor("s-1", "s"))  # the same key, now allowed to preempt
    await d.settle()
    await d.clock.advance(30)
    await d.settle()
    (victim,) = victims(d)
    await confirm(d, [victim])
    await d.settle()
    assert [a.allocation_key for a in d.allocs("s")] == ["s-1"]
    await d.clock.advance(60)
    await d.settle()
    assert len(victims(d)) == 1  # s-0 still may not


def config(queues: str, partition: str = "") -> str:
    """A partition whose root (``submitacl: '*'``) holds ``queues`` (YAML, indented 10)."""
    return f"""
partitions:
  - name: default
{partition}    queues:
      - name: root
        submitacl: "*"
        queues:
{queues}"""


async def fill(d: Driver, app_id: str, queue: str, count: int, memory: int = 10, **kw: Any) -> None:
    await d.apps(app(app_id, queue))
    await d.asks(
        *(ask(f"{app_id}-{i}", app_id, memory=memory, vcore=0, **kw) for i in range(count))
    )
    await d.settle()
    assert len(d.allocs(app_id)) == count


async def preempt_rounds(d: Driver, rounds: int = 10) -> None:
    """Let the delays pass and the RM confirm every preemption at once, ``rounds`` times."""
    await d.settle()  # the asks are stamped when the core takes them
    for _ in range(rounds):
        await d.clock.advance(30)
        await d.settle()
        seen = _confirmed.setdefault(id(d), set())
        pending = [v for v in victims(d) if v.uuid not in seen]
        if pending:
            seen.update(v.uuid for v in pending)
            await confirm(d, pending)
            await d.settle()


async def used(d: Driver, queue: str) -> int:
    info = await d.core.get_queue("default", queue)
    return int(info["allocatedResource"].get("memory", 0))


# Per driver, the victims ``preempt_rounds`` confirmed already.
_confirmed: dict[int, set[str]] = {}


@pytest.fixture
def d(driver: Driver) -> Iterator[Driver]:
    yield driver
    _confirmed.pop(id(driver), None)


# ======================================================================== the seven laws
async def test_law_a_victims_queue_never_goes_below_its_guarantee(d: Driver) -> None:
    await d.register(
        config(
            """          - name: starved
            resources: {guaranteed: {memory: 50}}
          - name: greedy
            resources: {guaranteed: {memory: 70}}
"""
        )
    )
    await d.nodes(node("n1", memory=100, vcore=100))
    await fill(d, "g", "root.greedy", 10)
    await d.apps(app("s", "root.starved"))
    await d.asks(*(preemptor(f"s-{i}", "s") for i in range(5)))
    await preempt_rounds(d)
    assert len(victims(d)) == 3  # greedy keeps its 70, so starved gets 30 of its 50
    assert await used(d, "root.greedy") == 70
    assert await used(d, "root.starved") == 30


async def test_law_only_a_queue_below_its_guarantee_triggers_it(d: Driver) -> None:
    await d.register(
        config(
            """          - name: starved
            resources: {guaranteed: {memory: 20}}
          - name: greedy
"""
        )
    )
    await d.nodes(node("n1", memory=100, vcore=100))
    await fill(d, "s0", "root.starved", 2)  # at its guarantee already
    await fill(d, "g", "root.greedy", 8)
    await d.apps(app("s", "root.starved"))
    await d.asks(preemptor("s-0", "s"))
    await preempt_rounds(d, 3)
    assert victims(d) == []


async def test_law_a_queue_with_no_guarantee_anywhere_never_triggers_it(d: Driver) -> None:
    """YUNIKORN-1951: a queue without a guarantee at any level preempted others."""
    await d.register(
        config(
            """          - name: plain
          - name: greedy
"""
        )
    )
    await d.nodes(node("n1", memory=100, vcore=100))
    await fill(d, "g", "root.greedy", 10)
    await d.apps(app("p", "root.plain"))
    await d.asks(preemptor("p-0", "p"))
    await preempt_rounds(d, 3)
    assert victims(d) == []


async def test_law_only_tasks_of_queues_above_their_guarantee_are_victims(d: Driver) -> None:
    await d.register(
        config(
            """          - name: starved
            resources: {guaranteed: {memory: 30}}
          - name: exact
            resources: {guaranteed: {memory: 50}}
          - name: over
"""
        )
    )
    await d.nodes(node("n1", memory=100, vcore=100))
    await fill(d, "e", "root.exact", 5)
    await fill(d, "o", "root.over", 5)
    await d.apps(app("s", "root.starved"))
    await d.asks(*(preemptor(f"s-{i}", "s") for i in range(3)))
    await preempt_rounds(d)
    assert {v.application_id for v in victims(d)} == {"o"}
    assert len(victims(d)) == 3
    assert await used(d, "root.exact") == 50
    assert await used(d, "root.starved") == 30


async def test_law_only_equal_or_lower_priority_is_preempted(d: Driver) -> None:
    await d.register(TWO)
    await d.nodes(node("n1", memory=100, vcore=100))
    await fill(d, "g", "root.greedy", 10, priority=10)
    await d.apps(app("s", "root.starved"))
    await d.asks(preemptor("low", "s", priority=5))
    await preempt_rounds(d, 3)
    assert victims(d) == []
    await d.asks(preemptor("same", "s", priority=10))
    await preempt_rounds(d, 3)
    assert len(victims(d)) == 1
    assert [a.allocation_key for a in d.allocs("s")] == ["same"]


async def test_siblings_under_a_guaranteed_parent_never_preempt_each_other(d: Driver) -> None:
    """Neither sibling has a guarantee of its own: taking from one to give the other
    leaves their parent where it was, so it would help no guarantee (YUNIKORN-2761's
    storm between siblings cannot start)."""
    await d.register(
        config(
            """          - name: parent
            resources: {guaranteed: {memory: 100}}
            queues:
              - name: a
              - name: b
"""
        )
    )
    await d.nodes(node("n1", memory=100, vcore=100))
    await fill(d, "b", "root.parent.b", 10)
    await d.apps(app("a", "root.parent.a"))
    await d.asks(preemptor("a-0", "a"))
    await preempt_rounds(d, 3)
    assert victims(d) == []


async def test_a_parent_at_its_guarantee_takes_from_its_own_child_over_its_share(
    d: Driver,
) -> None:
    """The preemptor's parent would go over its guarantee if the victim came from outside
    it: the victim is its sibling's, which is over its own share."""
    await d.register(
        config(
            """          - name: parent
            resources: {guaranteed: {memory: 60}}
            queues:
              - name: a
                resources: {guaranteed: {memory: 30}}
              - name: b
                resources: {guaranteed: {memory: 30}}
          - name: other
"""
        )
    )
    await d.nodes(node("n1", memory=100, vcore=100))
    await fill(d, "b", "root.parent.b", 6)  # parent at its 60, b 30 over its share
    await fill(d, "o", "root.other", 4)
    await d.apps(app("a", "root.parent.a"))
    await d.asks(preemptor("a-0", "a"))
    await preempt_rounds(d, 2)
    (victim,) = victims(d)
    assert victim.application_id == "b"


# ====================================================================== choosing victims
def uuid_of(d: Driver, key: str) -> str:
    (alloc,) = [a for a in d.rm.allocations if a.allocation_key == key]
    return alloc.uuid


async def test_victims_are_taken_in_the_documented_order(d: Driver) -> None:
    """Those that allow it first, then lower priority, non-originators, tasks outside
    gangs, younger ones: each step of the order decides one preemption here."""
    await d.register(TWO)
    await d.nodes(node("n1", memory=60, vcore=100))
    await d.apps(app("g", "root.greedy"), app("s", "root.starved"))
    no_self = si.PreemptionPolicy(allow_preempt_self=False)
    kinds: list[tuple[str, dict[str, Any]]] = [
        ("opted-out", {"preemption_policy": no_self}),
        ("high", {"priority": 5}),
        ("originator", {"originator": True}),
        ("gang", {"task_group_name": "tg"}),
        ("old", {}),
    ]
    for key, kw in kinds:
        await d.asks(ask(key, "g", memory=10, vcore=0, **kw))
        await d.settle()
        await d.clock.advance(1)
    await d.asks(ask("young", "g", memory=10, vcore=0))
    await d.settle()
    assert len(d.allocs("g")) == 6
    expected = ["young", "old", "gang", "originator", "high"]
    for i, key in enumerate(expected):
        await d.asks(preemptor(f"s-{i}", "s", priority=5))
        await preempt_rounds(d, 1)
        assert victims(d)[-1].uuid == uuid_of(d, key), key
    assert len(victims(d)) == 5  # the starved queue has its 50


async def test_just_enough_victims_on_the_node_with_the_fewest(d: Driver) -> None:
    await d.register(TWO)
    await d.nodes(node("n1", memory=40, vcore=100))
    await d.apps(app("g", "root.greedy"), app("s", "root.starved"))
    await d.asks(*(ask(f"small-{i}", "g", memory=10, vcore=0) for i in range(4)))
    await d.settle()
    await d.nodes(node("n2", memory=40, vcore=100))
    await d.asks(*(ask(f"big-{i}", "g", memory=20, vcore=0) for i in range(2)))
    await d.settle()
    assert {a.node_id for a in d.allocs("g") if a.allocation_key.startswith("big")} == {"n2"}
    await d.asks(preemptor("s-0", "s", memory=20))
    await preempt_rounds(d, 1)
    (victim,) = victims(d)  # one big one, not two small ones
    assert victim.allocation_key.startswith("big")
    (placed,) = d.allocs("s")
    assert placed.node_id == "n2"


# ============================================================================ handshake
async def test_the_node_is_held_while_victims_are_confirmed_one_by_one(d: Driver) -> None:
    await full_cluster(d)
    await d.apps(app("late", "root.greedy"))
    await d.asks(preemptor("s-0", "s", memory=20))
    await d.settle()
    await d.clock.advance(30)
    await d.settle()
    first, second = victims(d)
    await confirm(d, [first])
    await d.asks(ask("late-0", "late", memory=10, vcore=0))  # would fit in the room freed
    await d.settle()
    assert d.allocs("late") == []
    assert d.allocs("s") == []
    await confirm(d, [second])
    await d.settle()
    assert [a.node_id for a in d.allocs("s")] == ["n1"]
    assert d.allocs("late") == []  # the cluster is full again


async def test_confirmations_twice_late_or_unknown_change_nothing_more(d: Driver) -> None:
    await full_cluster(d)
    await d.asks(preemptor("s-0", "s"))
    await d.settle()
    await d.clock.advance(30)
    await d.settle()
    (victim,) = victims(d)
    await confirm(d, [victim, victim])
    await d.settle()
    await confirm(d, [victim])  # late: it is gone
    bogus = si.AllocationRelease(partition_name="default", application_id="g", uuid="no-such-uuid")
    await confirm(d, [bogus])
    await d.settle()
    assert len(d.allocs("s")) == 1
    assert await used(d, "root.greedy") == 90
    assert await used(d, "root.starved") == 10
    assert len(victims(d)) == 1  # and nothing was echoed back as a release
    node_info = await d.core.get_node("default", "n1")
    assert node_info["allocated"]["memory"] == 100


async def test_a_victim_never_confirmed_lets_the_node_go_and_the_ask_tries_again(
    d: Driver,
) -> None:
    await full_cluster(d)
    await d.asks(preemptor("s-0", "s"))
    await d.settle()
    await d.clock.advance(30)
    await d.settle()
    (first,) = victims(d)
    await d.clock.advance(60)  # Timeouts.preemption
    await d.settle()
    timed_out = [e for e in d.rm.events if e.reason == "PreemptionTimedOut"]
    assert len(timed_out) == 1
    assert "s-0" in timed_out[0].message
    # Tried again: the first victim, still on its way out, is not taken twice.
    second = victims(d)[-1]
    assert len(victims(d)) == 2 and second.uuid != first.uuid
    await confirm(d, [second])
    await d.settle()
    assert len(d.allocs("s")) == 1
    await confirm(d, [first])  # the late one frees its room too
    await d.settle()
    assert await used(d, "root.greedy") == 80


async def test_an_ask_withdrawn_while_its_victims_go_lets_the_node_go(d: Driver) -> None:
    await full_cluster(d)
    await d.asks(preemptor("s-0", "s"))
    await d.settle()
    await d.clock.advance(30)
    await d.settle()
    (victim,) = victims(d)
    await d.release_asks("s", "s-0")
    await d.settle()
    await d.apps(app("other", "root.greedy"))
    await confirm(d, [victim])
    await d.asks(ask("other-0", "other", memory=10, vcore=0))
    await d.settle()
    assert [a.node_id for a in d.allocs("other")] == ["n1"]  # the node is free for anyone


async def test_events_say_who_was_preempted_for_whom_and_why(d: Driver) -> None:
    await full_cluster(d)
    await d.asks(preemptor("s-0", "s"))
    await d.settle()
    await d.clock.advance(30)
    await d.settle()
    (victim,) = victims(d)
    (preempted,) = [e for e in d.rm.events if e.reason == "Preempted"]
    assert preempted.object_id == victim.allocation_key
    assert "s-0" in preempted.message and "root.starved" in preempted.message
    assert "below its guarantee" in preempted.message
    (triggered,) = [e for e in d.rm.events if e.reason == "PreemptionTriggered"]
    assert triggered.object_id == "s-0" and victim.uuid in triggered.message
    assert "s-0" in victim.message


# ================================================================================ gangs
async def ph_data(d: Driver, app_id: str, group: str = "tg") -> dict[str, Any]:
    info = await d.core.get_application("default", app_id)
    (entry,) = [e for e in info["placeholderData"] if e["taskGroupName"] == group]
    return dict(entry)


async def test_a_placeholder_being_replaced_is_never_a_victim(d: Driver) -> None:
    await d.register(TWO)
    await d.nodes(node("n1", memory=100, vcore=100))
    await d.apps(
        app("gang", "root.greedy", placeholder_ask=si.Resource.of(memory=100)),
        app("s", "root.starved"),
    )
    await d.asks(
        *(
            ask(f"ph-{i}", "gang", memory=10, vcore=0, task_group_name="tg", placeholder=True)
            for i in range(10)
        )
    )
    await d.settle()
    await d.asks(ask("real-0", "gang", memory=10, vcore=0, task_group_name="tg"))
    await d.settle()
    (replacing,) = [
        r for r in d.rm.released if r.termination_type == si.TerminationType.PLACEHOLDER_REPLACED
    ]
    await d.asks(*(preemptor(f"s-{i}", "s") for i in range(5)))
    await preempt_rounds(d, 6)  # one node: one preemption holds it at a time
    assert len(victims(d)) == 5
    assert replacing.uuid not in {v.uuid for v in victims(d)}
    data = await ph_data(d, "gang")
    # A preempted placeholder counts as timed out, as YuniKorn counts every placeholder
    # that goes without being replaced (removeAllocationInternal).
    assert data["replaced"] == 0 and data["timedout"] == 5
    # The real asks of the group are not left waiting for placeholders that went.
    await d.asks(
        *(ask(f"real-{i}", "gang", memory=10, vcore=0, task_group_name="tg") for i in range(1, 6))
    )
    await d.settle()
    replaced = [
        r for r in d.rm.released if r.termination_type == si.TerminationType.PLACEHOLDER_REPLACED
    ]
    assert len(replaced) == 5  # one per free placeholder left
    await d.release_asks("s")  # the starved queue gives its room back
    for a in d.allocs("s"):
        await d.release(a)
    await d.settle()
    reals = [a for a in d.allocs("gang") if not a.placeholder]
    assert len(reals) == 1  # real-5 took a node as a normal ask; the others await the RM


async def test_a_tentative_permit_gang_member_is_never_a_victim(d: Driver) -> None:
    await d.register(TWO)
    await d.nodes(node("n1", memory=100, vcore=100))
    await fill(d, "g", "root.greedy", 8, priority=10)
    await d.apps(app("pg", "root.greedy"), app("s", "root.starved"))
    tags = gang_tags("g1", 3)
    await d.asks(*(ask(f"m{i}", "pg", memory=10, vcore=0, tags=tags) for i in range(2)))
    await d.settle()
    info = await d.core.get_application("default", "pg")
    assert [a["tentative"] for a in info["allocations"]] == [True, True]
    await d.asks(preemptor("s-0", "s", priority=5))
    await preempt_rounds(d, 3)
    assert victims(d) == []  # the only lower-priority tasks are tentative members


async def test_preemptions_in_flight_take_distinct_victims_one_node_each(d: Driver) -> None:
    await d.register(TWO)
    await d.nodes(*(node(f"n{i}", memory=20, vcore=100) for i in range(5)))
    await fill(d, "g", "root.greedy", 10)
    await d.apps(app("s", "root.starved"))
    await d.asks(*(preemptor(f"s-{i}", "s") for i in range(3)))
    await d.settle()
    await d.clock.advance(30)
    await d.settle()
    got = victims(d)
    assert len({v.uuid for v in got}) == len(got) == 3  # nothing taken twice
    assert len({uuid_node(d, v.uuid) for v in got}) == 3  # each on its own node
    await confirm(d, got)
    await d.settle()
    assert len({a.node_id for a in d.allocs("s")}) == 3


# ======================================================================== required node
def daemon(key: str, app_id: str, node_id: str, memory: int = 10, **kw: Any) -> si.AllocationAsk:
    return ask(key, app_id, memory=memory, vcore=0, tags={REQUIRED: node_id}, **kw)


NO_GUARANTEES = config(
    """          - name: apps
          - name: system
"""
)


async def test_a_daemon_ask_preempts_on_its_node_and_the_node_is_held_for_it(
    d: Driver,
) -> None:
    """YUNIKORN-1085: no queue has a guarantee, nothing waited any delay; the ask must run
    on n2, so room is made there, and only there."""
    await d.register(NO_GUARANTEES)
    await d.nodes(node("n1", memory=50, vcore=100), node("n2", memory=50, vcore=100))
    await fill(d, "w", "root.apps", 10)
    await d.apps(app("ds", "root.system"), app("late", "root.apps"))
    await d.asks(daemon("ds-n2", "ds", "n2", memory=20))
    await d.settle()
    first, second = victims(d)
    assert {uuid_node(d, v.uuid) for v in (first, second)} == {"n2"}
    await confirm(d, [first])
    await d.asks(ask("late-0", "late", memory=10, vcore=0))
    await d.settle()
    assert d.allocs("late") == []  # the node is held for the daemon
    await confirm(d, [second])
    await d.settle()
    assert [a.node_id for a in d.allocs("ds")] == ["n2"]


def uuid_node(d: Driver, uuid: str) -> str:
    (alloc,) = [a for a in d.rm.allocations if a.uuid == uuid]
    return alloc.node_id


async def test_a_daemon_ask_passes_over_opted_out_tasks_until_the_last_resort(
    d: Driver,
) -> None:
    await d.register(NO_GUARANTEES)
    await d.nodes(node("n1", memory=30, vcore=100))
    no_self = si.PreemptionPolicy(allow_preempt_self=False)
    await d.apps(app("w", "root.apps"), app("ds", "root.system"))
    await d.asks(ask("opted-out-0", "w", memory=10, vcore=0, preemption_policy=no_self))
    await d.settle()
    await d.asks(ask("regular", "w", memory=10, vcore=0))
    await d.settle()
    await d.asks(ask("opted-out-1", "w", memory=10, vcore=0, preemption_policy=no_self))
    await d.settle()
    await d.asks(daemon("ds-0", "ds", "n1", memory=10))
    await d.settle()
    (victim,) = victims(d)
    assert victim.allocation_key == "regular"
    await confirm(d, [victim])
    await d.settle()
    await d.asks(daemon("ds-1", "ds", "n1", memory=20))  # only opted-out tasks are left
    await d.settle()
    assert sorted(v.allocation_key for v in victims(d)[1:]) == ["opted-out-0", "opted-out-1"]


async def test_a_daemon_ask_never_preempts_a_higher_priority_or_another_daemon(
    d: Driver,
) -> None:
    await d.register(NO_GUARANTEES)
    await d.nodes(node("n1", memory=20, vcore=100))
    await d.apps(app("w", "root.apps"), app("ds", "root.system"))
    await d.asks(ask("important", "w", memory=10, vcore=0, priority=100))
    await d.asks(daemon("other-daemon", "ds", "n1"))
    await d.settle()
    await d.asks(daemon("ds-0", "ds", "n1", priority=10))
    await d.settle()
    assert victims(d) == []


# ========================================================= an RM that checks predicates
class Checking(RecordingCallback):
    """Checks predicates; its ``preemption_predicates`` refuses the nodes in ``refused``."""

    def __init__(self) -> None:
        super().__init__()
        self.refused: set[str] = set()
        self.asked: list[si.PreemptionPredicatesArgs] = []

    async def predicates(self, args: si.PredicatesArgs) -> bool:
        return True

    async def preemption_predicates(
        self, args: si.PreemptionPredicatesArgs
    ) -> si.PreemptionPredicatesResponse:
        self.asked.append(args)
        if args.node_id in self.refused:
            return si.PreemptionPredicatesResponse(success=False, index=-1)
        return si.PreemptionPredicatesResponse(success=True, index=args.start_index)


async def test_an_rm_that_checks_predicates_is_asked_before_anything_is_preempted(
    core: scheduler.Core, clock: ManualClock
) -> None:
    d = Driver(core, clock)
    rm = d.rm = Checking()
    rm.refused = {"n1"}
    await full_cluster(d)
    await d.asks(preemptor("s-0", "s"))
    await d.settle()
    await d.clock.advance(30)
    await d.settle()
    (question,) = rm.asked
    assert question.allocation_key == "s-0" and question.node_id == "n1"
    assert len(question.preempt_allocation_keys) == 1 and question.start_index == 0
    assert victims(d) == []  # refused: nothing preempted
    assert [e.reason for e in d.rm.events].count("PreemptionRefused") == 1
    rm.refused = set()
    await d.clock.advance(15)  # Timeouts.preempt_retry
    await d.settle()
    (victim,) = victims(d)
    assert victim.allocation_key == rm.asked[-1].preempt_allocation_keys[0]
    await confirm(d, [victim])
    await d.settle()
    assert [a.node_id for a in d.allocs("s")] == ["n1"]


# ============================================================== fences and disabled queues
FENCED = config(
    """          - name: system
            resources: {guaranteed: {memory: 50}}
          - name: tenant
            properties: {preemption.policy: fence}
            queues:
              - name: inside
                resources: {guaranteed: {memory: 50}}
              - name: neighbour
          - name: outside
"""
)


async def test_law_a_fenced_subtree_cannot_reach_out(d: Driver) -> None:
    await d.register(FENCED)
    await d.nodes(node("n1", memory=100, vcore=100))
    await fill(d, "o", "root.outside", 10)
    await d.apps(app("i", "root.tenant.inside"))
    await d.asks(preemptor("i-0", "i"))
    await preempt_rounds(d, 3)
    assert victims(d) == []


async def test_law_a_fence_lets_preemption_in_and_works_within(d: Driver) -> None:
    await d.register(FENCED)
    await d.nodes(node("n1", memory=100, vcore=100))
    await fill(d, "nb", "root.tenant.neighbour", 10)
    await d.apps(app("sys", "root.system"), app("i", "root.tenant.inside"))
    await d.asks(preemptor("sys-0", "sys"))  # from outside the fence: in is allowed
    await preempt_rounds(d, 2)
    await d.asks(preemptor("i-0", "i"))  # within the fence
    await preempt_rounds(d, 2)
    assert [v.application_id for v in victims(d)] == ["nb", "nb"]
    assert len(d.allocs("sys")) == len(d.allocs("i")) == 1


async def test_a_queue_with_preemption_disabled_gives_no_victims(d: Driver) -> None:
    await d.register(
        config(
            """          - name: starved
            resources: {guaranteed: {memory: 50}}
          - name: protected
            properties: {preemption.policy: disabled}
          - name: open
"""
        )
    )
    await d.nodes(node("n1", memory=100, vcore=100))
    await fill(d, "p", "root.protected", 5)
    await fill(d, "o", "root.open", 5)
    await d.apps(app("s", "root.starved"))
    await d.asks(*(preemptor(f"s-{i}", "s") for i in range(8)))
    await preempt_rounds(d, 10)
    assert {v.application_id for v in victims(d)} == {"o"}
    assert await used(d, "root.protected") == 50


async def test_partition_with_preemption_disabled_preempts_between_queues_never(
    d: Driver,
) -> None:
    await d.register(
        TWO.replace("  - name: default\n", "  - name: default\n    preemption: {enabled: false}\n")
    )
    await d.nodes(node("n1", memory=100, vcore=100))
    await fill(d, "g", "root.greedy", 10)
    await d.apps(app("s", "root.starved"))
    await d.asks(preemptor("s-0", "s"))
    await preempt_rounds(d, 3)
    assert victims(d) == []


async def test_a_shorter_preemption_delay_on_the_leaf(d: Driver) -> None:
    await d.register(
        TWO.replace(
            "guaranteed: {memory: 50}",
            "guaranteed: {memory: 50}\n            properties: {preemption.delay: 5s}",
        )
    )
    await d.nodes(node("n1", memory=100, vcore=100))
    await fill(d, "g", "root.greedy", 10)
    await d.apps(app("s", "root.starved"))
    await d.asks(preemptor("s-0", "s"))
    await d.settle()
    await d.clock.advance(4)
    await d.settle()
    assert victims(d) == []
    await d.clock.advance(1)
    await d.settle()
    assert len(victims(d)) == 1
