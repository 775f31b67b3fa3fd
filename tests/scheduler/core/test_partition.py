"""A partition through its actors: proposal and commit, state timers, placement, recovery.

The state is built through the public API on a settled core, and the partition actor
(``core._registrations[RM].actors["default"]``) is read white-box. Scheduling internals are
called directly on its ``scheduler`` while the core is settled: nothing else runs then, and
nothing runs until the test awaits again.

The scheduling pass runs each time the partition's mailboxes drain. To get a proposal the
pass has not committed (``held``, then ``schedulable``), the nodes are drained while the asks
arrive, so the pass finds no node; then the test calls the partition actor's node handler
directly to make them schedulable again. The pass this wakes runs only at the partition's
next message, so until the test awaits, its own propose and commit calls are the only
scheduling. What a commit must re-check is changed through the public API where the pass,
seeing the change first, cannot place the ask either; otherwise directly, by the owning
actor's handler, as the old synchronous tests did.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio

import scheduler
from scheduler import si
from scheduler.config._parser import parse_config, queue_paths
from scheduler.config._timeouts import Timeouts
from scheduler.core._app_actor import ApplicationActor
from scheduler.core._events import AppSpec, AppTimer, ConfigureQueue, NodeUpdate
from scheduler.core._partition import Partition
from scheduler.core._partition_actor import PartitionActor
from scheduler.core._pass import Proposal
from scheduler.objects._application import AppEvent, Application, AppState
from scheduler.objects._asks import Allocation, Ask
from scheduler.objects._queue import QueueStatus
from scheduler.testing import ManualClock, RecordingCallback

from ..conftest import RM, Driver, app, ask, node

pytestmark = pytest.mark.asyncio

QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: a
            resources:
              max: {memory: 100}
          - name: b
          - name: parent
            resources:
              max: {memory: 150}
            queues:
              - name: child
              - name: sibling
"""

DYNAMIC = """
partitions:
  - name: default
    placementrules:
      - name: provided
        create: true
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: a
          - name: parent
            parent: true
"""

ACLS = """
partitions:
  - name: default
    queues:
      - name: root
        queues:
          - name: users
            submitacl: "alice,carol"
          - name: groups
            submitacl: " devs"
          - name: open
            submitacl: "*"
          - name: closed
          - name: team
            submitacl: "bob"
            queues:
              - name: inner
"""

STARTING = Timeouts.starting
COMPLETING = Timeouts.completing
TERMINATED = Timeouts.terminated


# ============================================================================ fixtures and helpers
async def registered(core: scheduler.Core, clock: ManualClock, config: str) -> Driver:
    d = Driver(core, clock)
    await d.register(config)
    return d


@pytest_asyncio.fixture
async def d(core: scheduler.Core, clock: ManualClock) -> Driver:
    """An RM registered with this module's ``QUEUES``."""
    return await registered(core, clock, QUEUES)


def partition_actor(d: Driver) -> PartitionActor:
    return d.core._registrations[RM].actors["default"]


def app_actor(pa: PartitionActor, app_id: str) -> ApplicationActor:
    owner = pa.partition.owners[app_id]
    assert isinstance(owner, ApplicationActor)
    return owner


def drain(node_id: str) -> si.NodeInfo:
    return si.NodeInfo(node_id=node_id, action=si.ActionFromRM.DRAIN_NODE)


def decommission(node_id: str) -> si.NodeInfo:
    return si.NodeInfo(node_id=node_id, action=si.ActionFromRM.DECOMISSION)


def existing(
    uuid: str, app_id: str = "app-1", node_id: str = "n1", memory: int = 30, vcore: int = 3
) -> si.Allocation:
    return si.Allocation(
        allocation_key=f"key-{uuid}",
        uuid=uuid,
        application_id=app_id,
        node_id=node_id,
        partition_name="default",
        resource_per_alloc=si.Resource.of(memory=memory, vcore=vcore),
    )


async def state(d: Driver, app_id: str = "app-1") -> str:
    info = await d.core.get_application("default", app_id)
    return str(info["applicationState"])


def state_of(application: Application) -> AppState:
    """The state now (a call, so a type checker does not keep an earlier narrowing)."""
    return application.state


def new(pa: PartitionActor) -> list[Any]:
    """The allocations in the partition's outbox (what direct commits made)."""
    return [item for field, item in pa.partition.outbox.entries if field == "new"]


async def held(d: Driver, nodes: list[si.NodeInfo], *asks: si.AllocationAsk) -> None:
    """``nodes`` and the pending ``asks``, settled, with the nodes drained: the pass placed
    nothing."""
    await d.nodes(*nodes)
    await d.nodes(*(drain(n.node_id) for n in nodes))
    await d.asks(*asks)
    await d.settle()


def schedulable(d: Driver, *node_ids: str) -> PartitionActor:
    """The drained nodes back in the node index, by the partition actor's node handler called
    directly: the pass it wakes waits for the partition's next message."""
    pa = partition_actor(d)
    pa.update_nodes(
        [NodeUpdate(node_id=n, action=si.ActionFromRM.DRAIN_TO_SCHEDULABLE) for n in node_ids]
    )
    return pa


async def proposal_for(d: Driver, memory: int = 60) -> tuple[PartitionActor, Proposal]:
    """n1 (memory 100), app-1 in root.a asking for ``memory``, and its uncommitted proposal."""
    await d.apps(app("app-1"))
    await held(d, [node("n1")], ask("k1", "app-1", memory=memory))
    pa = schedulable(d, "n1")
    proposal = pa.scheduler.propose()
    assert proposal is not None
    assert proposal.application is pa.partition.applications["app-1"]
    assert proposal.node.node_id == "n1"
    return pa, proposal


def add_directly(pa: PartitionActor, app_id: str, queue: str, memory: int) -> Application:
    """An application with one ask "other" of ``memory``, added by calling the partition's
    and the application's handlers directly (no pass runs)."""
    pa.add_application(AppSpec(application_id=app_id, queue_name=queue, user="alice"))
    actor = app_actor(pa, app_id)
    actor.update_asks(
        (Ask(allocation_key="other", application_id=app_id, resource={"memory": memory}),)
    )
    return actor.app


def snapshot(p: Partition) -> dict[str, Any]:
    """Everything a proposal must not touch, as plain copies."""
    return {
        "nodes": {
            n: (dict(node.available), dict(node.allocated), sorted(node.allocations))
            for n, node in p.nodes.items()
        },
        "index": [n.node_id for n in p.index],
        "queues": {
            path: (dict(q.allocated), dict(q.pending), sorted(q.applications))
            for path, q in p.queues.items()
        },
        "apps": {
            a: (
                app.state,
                dict(app.pending),
                dict(app.allocated),
                sorted(app.allocations),
                [(k.allocation_key, k.pending) for k in app.pending_asks],
            )
            for a, app in p.applications.items()
        },
        "outbox": list(p.outbox.entries),
        "schedule_pending": p.schedule_pending,
        "total": p.total_allocations,
    }


# ============================================================================ proposal and commit
async def test_propose_is_read_only(d: Driver) -> None:
    await d.apps(app("app-1"))
    await held(
        d,
        [node("n1"), node("n2", memory=50)],
        ask("k1", "app-1", memory=30, count=2),
        ask("k2", "app-1", memory=5, priority=1),
    )
    pa = schedulable(d, "n1", "n2")
    timers = d.core.system.timers
    before = snapshot(pa.partition)
    timers_before = (len(timers), timers.next_due())
    proposal = pa.scheduler.propose()
    assert proposal is not None
    assert proposal.ask.allocation_key == "k2"  # higher priority first
    assert proposal.node.node_id == "n1"  # fair: both empty, tie broken by id
    assert snapshot(pa.partition) == before
    assert (len(timers), timers.next_due()) == timers_before
    # and proposing again gives the same decision: nothing moved
    again = pa.scheduler.propose()
    assert again is not None and again.ask is proposal.ask and again.node is proposal.node


async def test_propose_without_nodes_or_pending_is_none(d: Driver) -> None:
    scheduler_ = partition_actor(d).scheduler
    assert scheduler_.propose() is None
    await d.nodes(node("n1"))
    await d.settle()
    assert scheduler_.propose() is None
    await d.apps(app("app-1"))
    await d.asks(ask("k1", "app-1", memory=1000))  # bigger than any node
    await d.settle()
    assert scheduler_.propose() is None


async def test_successful_commit_updates_everything_in_one_step(
    d: Driver, clock: ManualClock
) -> None:
    await d.apps(app("app-1", queue="root.parent.child"))
    await held(d, [node("n1")], ask("k1", "app-1", memory=40, vcore=4, count=2))
    await clock.advance(1000)  # the asks are older than the commit
    pa = schedulable(d, "n1")
    p = pa.partition
    proposal = pa.scheduler.propose()
    assert proposal is not None
    assert p.outbox.entries == []
    alloc = pa.scheduler.commit(proposal)
    assert alloc is not None
    res = {"memory": 40, "vcore": 4}
    n1 = p.nodes["n1"]
    assert n1.allocations == {alloc.uuid: alloc}
    assert n1.allocated == res
    assert n1.available == {"memory": 60, "vcore": 6}
    for path in ("root.parent.child", "root.parent", "root"):
        queue = p.queues[path]
        assert queue.allocated == res, path
        assert queue.pending == res, path  # one of two still pending
    assert p.queues["root.parent.sibling"].allocated == {}
    application = p.applications["app-1"]
    assert application.allocations == {alloc.uuid: alloc}
    assert application.allocated == res and application.pending == res
    assert proposal.ask.pending == 1
    assert alloc.node_id == "n1" and alloc.application_id == "app-1"
    assert alloc.allocation_key == "k1" and alloc.allocation_time == 1000.0
    assert alloc.request_time == 0.0
    [sent] = new(pa)
    assert sent == alloc.to_si()
    assert sent.resource_per_alloc.to_dict() == res
    assert sent.partition_name == "default"
    assert application.state is AppState.STARTING  # the application's actor, same turn


async def test_commit_resorts_the_node_index(d: Driver) -> None:
    await d.apps(app("app-1"))
    await held(d, [node("n1"), node("n2")], ask("k1", "app-1", memory=50))
    pa = schedulable(d, "n1", "n2")
    proposal = pa.scheduler.propose()
    assert proposal is not None and proposal.node.node_id == "n1"
    pa.scheduler.commit(proposal)
    assert [n.node_id for n in pa.partition.index] == ["n2", "n1"]  # fair: least used first


Interference = Callable[[Driver, PartitionActor, Proposal], Awaitable[None]]


async def _fill_node(d: Driver, pa: PartitionActor, proposal: Proposal) -> None:
    # another application (of root.b: no quota in the way) takes n1's room first, committed
    # directly: through the API the pass would place app-1's older ask first
    other = add_directly(pa, "app-2", "root.b", memory=50)
    assert pa.scheduler.commit(Proposal(other, other.asks["other"], proposal.node)) is not None


async def _remove_node(d: Driver, pa: PartitionActor, proposal: Proposal) -> None:
    await d.nodes(decommission("n1"))
    await d.settle()


async def _drain_node(d: Driver, pa: PartitionActor, proposal: Proposal) -> None:
    await d.nodes(drain("n1"))
    await d.settle()


async def _occupy_node(d: Driver, pa: PartitionActor, proposal: Proposal) -> None:
    await d.nodes(
        si.NodeInfo(
            node_id="n1",
            action=si.ActionFromRM.UPDATE,
            occupied_resource=si.Resource.of(memory=50),
        )
    )
    await d.settle()


async def _release_ask(d: Driver, pa: PartitionActor, proposal: Proposal) -> None:
    await d.release_asks("app-1", "k1")
    await d.settle()


async def _replace_ask(d: Driver, pa: PartitionActor, proposal: Proposal) -> None:
    # the same ask again, by the application's handler called directly: through the API the
    # pass would place the new ask at once
    app_actor(pa, "app-1").update_asks(
        (Ask(allocation_key="k1", application_id="app-1", resource={"memory": 60, "vcore": 1}),)
    )


async def _remove_app(d: Driver, pa: PartitionActor, proposal: Proposal) -> None:
    await d.remove_apps("app-1")
    await d.settle()


async def _queue_max(d: Driver, pa: PartitionActor, proposal: Proposal) -> None:
    # another application of root.a takes 50 of its max of 100 on a new node (directly, as
    # in _fill_node)
    pa.update_nodes(
        [
            NodeUpdate(
                node_id="n2", action=si.ActionFromRM.CREATE, capacity={"memory": 100, "vcore": 10}
            )
        ]
    )
    other = add_directly(pa, "app-2", "root.a", memory=50)
    n2 = pa.partition.nodes["n2"]
    assert pa.scheduler.commit(Proposal(other, other.asks["other"], n2)) is not None


async def _lower_queue_max(d: Driver, pa: PartitionActor, proposal: Proposal) -> None:
    # root.a's actor takes its part of a configuration with max 50, as apply_config asks it
    # to (update_configuration asks the partition twice: a pass would run in between)
    config = parse_config(QUEUES.replace("max: {memory: 100}", "max: {memory: 50}"))
    conf = queue_paths(config.partitions[0])["root.a"]
    pa.partition.queue_refs["root.a"].tell(ConfigureQueue(config=conf))
    await d.settle()
    assert pa.partition.queues["root.a"].max_resources == {"memory": 50}


@pytest.mark.parametrize(
    "interfere",
    [
        _fill_node,
        _remove_node,
        _drain_node,
        _occupy_node,
        _release_ask,
        _replace_ask,
        _remove_app,
        _queue_max,
        _lower_queue_max,
    ],
    ids=lambda f: f.__name__.lstrip("_"),
)
async def test_commit_drops_a_proposal_that_no_longer_holds(
    d: Driver, interfere: Interference
) -> None:
    pa, proposal = await proposal_for(d, memory=60)
    await interfere(d, pa, proposal)
    before = snapshot(pa.partition)
    ask_pending = proposal.ask.pending
    node_allocations = dict(proposal.node.allocations)
    assert pa.scheduler.commit(proposal) is None
    assert snapshot(pa.partition) == before
    assert proposal.ask.pending == ask_pending
    assert proposal.node.allocations == node_allocations


async def test_commit_of_a_fully_allocated_ask_is_dropped(d: Driver) -> None:
    pa, proposal = await proposal_for(d, memory=10)
    assert pa.scheduler.commit(proposal) is not None
    assert pa.scheduler.commit(proposal) is None
    assert len(new(pa)) == 1


async def test_commit_to_a_node_that_returned_under_the_same_id_is_dropped(d: Driver) -> None:
    pa, proposal = await proposal_for(d, memory=10)
    await d.nodes(decommission("n1"))
    await d.nodes(node("n1"), drain("n1"))  # back, drained so that the pass leaves it alone
    await d.settle()
    schedulable(d, "n1")
    assert pa.partition.nodes["n1"] is not proposal.node
    assert pa.scheduler.commit(proposal) is None
    assert pa.partition.nodes["n1"].allocations == {}


# ============================================================================ schedule()
async def test_schedule_stops_at_limit_and_leaves_schedule_pending(d: Driver) -> None:
    await d.apps(app("app-1", queue="root.b"))
    await held(d, [node("n1", memory=1000)], ask("k1", "app-1", count=5))
    pa = schedulable(d, "n1")
    p = pa.partition
    assert p.schedule_pending
    assert pa.scheduler.schedule(limit=2) == 2
    assert p.schedule_pending
    application = p.applications["app-1"]
    assert len(application.allocations) == 2 and application.asks["k1"].pending == 3
    assert pa.scheduler.schedule() == 3
    assert not p.schedule_pending
    assert p.total_allocations == 5
    assert len(new(pa)) == 5


async def test_schedule_clears_schedule_pending_when_nothing_fits(d: Driver) -> None:
    await d.apps(app("app-1", queue="root.b"))
    await held(d, [node("n1")], ask("k1", "app-1", memory=60, count=3))
    pa = schedulable(d, "n1")
    assert pa.scheduler.schedule(limit=3) == 1
    assert not pa.partition.schedule_pending


async def test_schedule_respects_queue_max(d: Driver) -> None:
    await d.apps(app("app-1", queue="root.a"))  # max memory 100
    await held(d, [node("n1", memory=1000)], ask("k1", "app-1", memory=30, count=5))
    pa = schedulable(d, "n1")
    assert pa.scheduler.schedule() == 3
    assert pa.partition.queues["root.a"].allocated["memory"] == 90


async def test_schedule_respects_a_parent_max_across_children(d: Driver) -> None:
    await d.apps(app("c", queue="root.parent.child"), app("s", queue="root.parent.sibling"))
    await held(
        d,
        [node("n1", memory=1000)],
        ask("k", "c", memory=50, count=2),
        ask("k", "s", memory=50, count=2),
    )
    pa = schedulable(d, "n1")
    assert pa.scheduler.schedule() == 3  # parent max 150
    assert pa.partition.queues["root.parent"].allocated["memory"] == 150


async def test_schedule_honours_required_node(d: Driver) -> None:
    await d.apps(app("app-1", queue="root.b"))
    required = {si.DOMAIN_YUNIKORN + si.KEY_REQUIRED_NODE: "n2"}
    await held(d, [node("n1"), node("n2")], ask("k1", "app-1", tags=required))
    pa = schedulable(d, "n1", "n2")
    assert pa.scheduler.schedule() == 1
    assert new(pa)[0].node_id == "n2"  # fair order alone would take n1


# ============================================================================ state timers
async def test_first_allocation_sets_the_starting_timer(d: Driver, clock: ManualClock) -> None:
    await d.apps(app("app-1"))
    await d.asks(ask("k1", "app-1"))
    await d.settle()
    await clock.advance(2 * STARTING)  # Accepted has no timer
    assert await state(d) == "Accepted"
    await d.nodes(node("n1"))
    await d.settle()
    assert await state(d) == "Starting"
    timer = app_actor(partition_actor(d), "app-1").state_timer
    assert timer is not None and timer.due == clock.now() + STARTING
    await clock.advance(STARTING - 1)
    assert await state(d) == "Starting"
    await clock.advance(1)
    assert await state(d) == "Running"


async def test_starting_timer_moves_the_app_to_running(d: Driver, clock: ManualClock) -> None:
    await d.nodes(node("n1"))
    await d.apps(app("app-1"))
    await d.asks(ask("k1", "app-1"))
    await d.settle()
    actor = app_actor(partition_actor(d), "app-1")
    await clock.advance(STARTING)
    assert d.rm.app_states("app-1") == ["Accepted", "Starting", "Running"]
    assert actor.state_timer is None  # Running has no timer
    await clock.advance(TERMINATED)
    assert await state(d) == "Running"


async def test_completing_and_completed_timers(d: Driver, clock: ManualClock) -> None:
    await d.nodes(node("n1"))
    await d.apps(app("app-1"))
    await d.asks(ask("k1", "app-1"))
    await d.settle()
    p = partition_actor(d).partition
    application = p.applications["app-1"]
    await d.release(*d.allocs("app-1"))
    await d.settle()
    assert await state(d) == "Completing"
    await clock.advance(COMPLETING - 1)
    assert await state(d) == "Completing"
    await clock.advance(1)
    assert await state(d) == "Completed"
    assert "app-1" not in p.applications and p.terminated["app-1"] is application
    await clock.advance(TERMINATED - 1)
    assert await state(d) == "Completed"
    await clock.advance(1)
    assert application.state is AppState.EXPIRED
    assert "app-1" not in p.terminated and "app-1" not in p.app_refs
    assert d.rm.app_states("app-1")[-3:] == ["Completing", "Completed", "Expired"]


async def test_rejected_app_gets_the_expire_timer(d: Driver, clock: ManualClock) -> None:
    await d.apps(app("app-1", queue="root.nope"))
    await d.settle()
    p = partition_actor(d).partition
    assert p.terminated["app-1"].state is AppState.REJECTED
    await clock.advance(TERMINATED - 1)
    assert "app-1" in p.terminated
    await clock.advance(1)
    assert "app-1" not in p.terminated
    with pytest.raises(scheduler.NotFoundError):
        await d.core.get_application("default", "app-1")


async def test_failed_app_gets_the_expire_timer(d: Driver, clock: ManualClock) -> None:
    await d.apps(app("app-1"))
    await d.settle()
    actor = app_actor(partition_actor(d), "app-1")
    actor.transition(AppEvent.FAIL)  # the actor's own transition, called directly
    assert actor.app.state is AppState.FAILING
    assert actor.state_timer is None
    await clock.advance(TERMINATED)
    assert await state(d) == "Failing"
    actor.transition(AppEvent.FAIL)
    assert state_of(actor.app) is AppState.FAILED
    await clock.advance(TERMINATED - 1)
    assert await state(d) == "Failed"
    await clock.advance(1)
    with pytest.raises(scheduler.NotFoundError):
        await d.core.get_application("default", "app-1")
    assert d.rm.app_states("app-1") == ["Failing", "Failed", "Expired"]


async def test_leaving_a_timed_state_cancels_its_timer(d: Driver) -> None:
    pa, proposal = await proposal_for(d, memory=10)
    pa.scheduler.commit(proposal)
    actor = app_actor(pa, "app-1")
    timer = actor.state_timer
    assert timer is not None and not timer.cancelled
    await d.asks(ask("k2", "app-1"))  # a second allocation: Starting -> Running
    await d.settle()
    assert await state(d) == "Running"
    assert timer.cancelled and actor.state_timer is None


def _app_timer(event: AppEvent, state: AppState, app_id: str = "app-1") -> AppTimer:
    return AppTimer(application_id=app_id, event=event.value, state=state.value)


@pytest.mark.parametrize(
    "stale",
    [
        _app_timer(AppEvent.RUN, AppState.STARTING),  # app is Running now
        _app_timer(AppEvent.COMPLETE, AppState.COMPLETING),
        _app_timer(AppEvent.RUN, AppState.STARTING, app_id="nobody"),  # only the state counts
    ],
    ids=["left_starting", "never_completing", "other_app"],
)
async def test_stale_app_timer_is_ignored(d: Driver, stale: AppTimer) -> None:
    await d.nodes(node("n1"))
    await d.apps(app("app-1"))
    await d.asks(ask("k1", "app-1"))
    await d.settle()
    await d.asks(ask("k2", "app-1"))
    await d.settle()
    assert await state(d) == "Running"
    p = partition_actor(d).partition
    before = snapshot(p)
    p.app_refs["app-1"].tell(stale)
    await d.settle()
    assert await state(d) == "Running"
    assert snapshot(p) == before


async def test_asks_while_completing_bring_the_app_back_to_running(
    d: Driver, clock: ManualClock
) -> None:
    await d.nodes(node("n1"))
    await d.apps(app("app-1"))
    await d.asks(ask("k1", "app-1"))
    await d.settle()
    await d.release(si.Allocation(uuid="", application_id="app-1"))  # every allocation
    await d.settle()
    assert await state(d) == "Completing"
    await d.asks(ask("k2", "app-1"))
    await d.settle()
    assert await state(d) == "Running"
    assert app_actor(partition_actor(d), "app-1").state_timer is None
    await clock.advance(COMPLETING)
    assert await state(d) == "Running"


async def test_finished_time_is_when_it_finished_not_when_it_expired(
    d: Driver, clock: ManualClock
) -> None:
    await clock.advance(10)
    await d.apps(app("app-1", queue="root.nope"))
    await d.settle()
    info = await d.core.get_application("default", "app-1")
    assert info["finishedTime"] == 10 * 10**9
    rejected = partition_actor(d).partition.terminated["app-1"]
    await clock.advance(TERMINATED)
    assert rejected.state is AppState.EXPIRED
    assert rejected.finished_time == 10.0


# ============================================================================ outbox order
class Ordered(RecordingCallback):
    """Records the kind of each response, in the order the RM gets them."""

    def __init__(self) -> None:
        super().__init__()
        self.kinds: list[str] = []

    async def update_allocation(self, response: si.AllocationResponse) -> None:
        self.kinds.append("allocation")
        await super().update_allocation(response)

    async def update_application(self, response: si.ApplicationResponse) -> None:
        self.kinds.append("application")
        await super().update_application(response)

    async def update_node(self, response: si.NodeResponse) -> None:
        self.kinds.append("node")
        await super().update_node(response)


async def test_partition_outbox_reports_in_order(core: scheduler.Core, clock: ManualClock) -> None:
    d = Driver(core, clock)
    d.rm = rm = Ordered()
    await d.register(QUEUES)
    await d.nodes(node("n1"))
    await d.apps(app("app-1"))
    await d.asks(ask("k1", "app-1"))
    await d.settle()
    # node accepted; app accepted and its state changes; the allocation comes after the
    # application was accepted.
    assert rm.kinds[0] == "node"
    assert rm.kinds.index("allocation") > rm.kinds.index("application")


# ============================================================================ placement
async def test_unknown_queue_rejects_the_application(d: Driver) -> None:
    await d.apps(app("app-1", queue="root.nope"))
    await d.settle()
    [rejected] = d.rm.rejected_apps
    assert rejected.application_id == "app-1"
    assert "root.nope" in rejected.reason and "does not exist" in rejected.reason
    p = partition_actor(d).partition
    assert "app-1" not in p.applications
    application = p.terminated["app-1"]
    assert application.state is AppState.REJECTED
    assert application.rejected_message == rejected.reason
    assert d.rm.app_states("app-1") == []  # no UpdatedApplication for Rejected (YuniKorn's)
    assert "root.nope" not in p.queues  # no rule says create


async def test_duplicate_application_is_rejected(d: Driver) -> None:
    await d.apps(app("app-1"))
    await d.settle()
    p = partition_actor(d).partition
    first = p.applications["app-1"]
    await d.apps(app("app-1", queue="root.b"))
    await d.settle()
    assert p.applications["app-1"] is first and first.queue_name == "root.a"
    assert "already exists" in d.rm.rejected_apps[0].reason


@pytest.mark.parametrize(
    ("queue", "path"),
    [
        ("root.parent.new", "root.parent.new"),
        ("newleaf", "root.newleaf"),
        ("root.x.y", "root.x.y"),
    ],
)
async def test_provided_rule_with_create_makes_dynamic_queues(
    core: scheduler.Core, clock: ManualClock, queue: str, path: str
) -> None:
    d = await registered(core, clock, DYNAMIC)
    await d.apps(app("app-1", queue=queue))
    await d.settle()
    p = partition_actor(d).partition
    leaf = p.queues[path]
    application = p.applications["app-1"]
    assert application.queue is leaf and leaf.leaf and leaf.dynamic
    assert application.queue_name == path
    assert p.queue_refs[path].alive  # the new queue has its actor
    parent = leaf.parent
    assert parent is not None and not parent.leaf


async def test_dynamic_queue_cannot_go_below_a_leaf(
    core: scheduler.Core, clock: ManualClock
) -> None:
    d = await registered(core, clock, DYNAMIC)
    await d.apps(app("app-1", queue="root.a.below"))
    await d.settle()
    assert d.rm.rejected_apps[0].application_id == "app-1"
    p = partition_actor(d).partition
    assert "root.a.below" not in p.queues
    assert p.queues["root.a"].leaf


async def test_empty_dynamic_queue_is_removed_by_its_timer(
    core: scheduler.Core, clock: ManualClock
) -> None:
    d = await registered(core, clock, DYNAMIC)
    await d.apps(app("app-1", queue="root.parent.tmp"))
    await d.settle()
    await d.remove_apps("app-1")  # New -> Completed
    await d.settle()
    assert await state(d) == "Completed"
    p = partition_actor(d).partition
    await clock.advance(Timeouts.dynamic_queue - 1)
    assert "root.parent.tmp" in p.queues
    await clock.advance(1)
    assert "root.parent.tmp" not in p.queues and "root.parent.tmp" not in p.queue_refs
    assert "root.parent" in p.queues  # configured queues stay


@pytest.mark.parametrize(
    ("queue", "user", "groups", "allowed"),
    [
        ("root.users", "alice", (), True),
        ("root.users", "carol", (), True),
        ("root.users", "bob", (), False),
        ("root.groups", "bob", ("devs",), True),
        ("root.groups", "bob", ("ops", "devs"), True),
        ("root.groups", "devs", (), False),  # a group name is not a user name
        ("root.open", "anyone", (), True),
        ("root.closed", "alice", (), False),  # no ACL anywhere on the chain
        ("root.team.inner", "bob", (), True),  # the parent's ACL covers its children
        ("root.team.inner", "alice", (), False),
    ],
)
async def test_submit_acl(
    core: scheduler.Core,
    clock: ManualClock,
    queue: str,
    user: str,
    groups: tuple[str, ...],
    allowed: bool,
) -> None:
    d = await registered(core, clock, ACLS)
    await d.apps(
        si.AddApplicationRequest(
            application_id="app-1",
            queue_name=queue,
            partition_name="default",
            ugi=si.UserGroupInformation(user=user, groups=list(groups)),
        )
    )
    await d.settle()
    assert (d.rm.accepted_apps == ["app-1"]) is allowed
    if not allowed:
        assert "may not submit" in d.rm.rejected_apps[0].reason


# ============================================================================ nodes and recovery
async def test_drained_nodes_are_not_in_the_partition_index(d: Driver) -> None:
    await d.nodes(node("n1"), node("n2"))
    await d.settle()
    p = partition_actor(d).partition
    assert "n1" in p.index and "n2" in p.index
    await d.nodes(drain("n1"))
    await d.settle()
    assert "n1" not in p.index
    assert "n1" in p.nodes  # still a node of the partition, just not schedulable
    assert [n.node_id for n in p.index] == ["n2"]
    await d.nodes(si.NodeInfo(node_id="n1", action=si.ActionFromRM.DRAIN_TO_SCHEDULABLE))
    await d.settle()
    assert "n1" in p.index
    await d.nodes(decommission("n2"))
    await d.settle()
    assert "n2" not in p.index and "n2" not in p.nodes


async def test_node_with_existing_allocations_is_recovered(d: Driver) -> None:
    await d.apps(app("app-1", queue="root.parent.child"))
    await d.settle()
    await d.nodes(node("n1", existing_allocations=[existing("u1"), existing("u2", memory=20)]))
    await d.settle()
    p = partition_actor(d).partition
    n1 = p.nodes["n1"]
    assert set(n1.allocations) == {"u1", "u2"}
    assert n1.allocated == {"memory": 50, "vcore": 6}
    assert n1.available == {"memory": 50, "vcore": 4}
    application = p.applications["app-1"]
    assert set(application.allocations) == {"u1", "u2"}
    assert application.allocations["u1"] is n1.allocations["u1"]
    assert application.allocations["u1"].allocation_key == "key-u1"
    for path in ("root.parent.child", "root.parent", "root"):
        assert p.queues[path].allocated == {"memory": 50, "vcore": 6}
    assert application.state is AppState.RUNNING  # New -> Accepted -> Starting -> Running
    assert d.rm.app_states("app-1") == ["Accepted", "Starting", "Running"]
    assert d.rm.accepted_nodes == ["n1"]
    assert d.rm.allocations == []  # the RM already knows these allocations
    await d.nodes(node("n2"))  # root's max, the nodes' capacity, is no limit here
    await d.settle()
    # recovered usage counts: the queue max of root.parent (150) has 100 left
    assert p.queues["root.parent.child"].headroom_fits({"memory": 100})
    assert not p.queues["root.parent.child"].headroom_fits({"memory": 101})


async def test_recovered_allocation_can_be_released(d: Driver) -> None:
    await d.apps(app("app-1"))
    await d.settle()
    await d.nodes(node("n1", existing_allocations=[existing("u1")]))
    await d.settle()
    await d.release(existing("u1"))
    await d.settle()
    p = partition_actor(d).partition
    assert p.nodes["n1"].allocated == {}
    assert p.queues["root.a"].allocated == {}
    assert await state(d) == "Completing"


async def test_node_with_an_allocation_of_an_unknown_app_is_rejected(d: Driver) -> None:
    await d.apps(app("app-1"))
    await d.settle()
    await d.nodes(node("n1", existing_allocations=[existing("u0"), existing("u1", "ghost")]))
    await d.settle()
    [rejected] = d.rm.rejected_nodes
    assert rejected.node_id == "n1" and "not in partition" in rejected.reason
    p = partition_actor(d).partition
    assert p.applications["app-1"].allocations == {} and p.queues["root"].allocated == {}
    assert "n1" not in p.index and "n1" not in p.nodes


async def test_existing_allocation_already_on_another_node_rejects_the_node(d: Driver) -> None:
    await d.apps(app("app-1"))
    await d.settle()
    await d.nodes(node("n1", existing_allocations=[existing("u1")]))
    await d.nodes(node("n2", existing_allocations=[existing("u1", node_id="n2")]))
    await d.settle()
    assert "already allocated" in d.rm.rejected_nodes[0].reason
    assert partition_actor(d).partition.queues["root.a"].allocated == {"memory": 30, "vcore": 3}


async def test_duplicate_uuid_within_one_node_rejects_the_node(d: Driver) -> None:
    await d.apps(app("app-1"))
    await d.settle()
    await d.nodes(node("n1", existing_allocations=[existing("u1"), existing("u1")]))
    await d.settle()
    [rejected] = d.rm.rejected_nodes
    assert "u1" in rejected.reason and "already allocated" in rejected.reason
    assert partition_actor(d).partition.queues["root.a"].allocated == {}


async def test_duplicate_node_is_rejected(d: Driver) -> None:
    await d.nodes(node("n1", memory=100))
    await d.settle()
    p = partition_actor(d).partition
    first = p.nodes["n1"]
    await d.nodes(node("n1", memory=500))
    await d.settle()
    assert p.nodes["n1"] is first and first.capacity["memory"] == 100
    assert "already exists" in d.rm.rejected_nodes[0].reason


async def test_removing_a_node_releases_its_allocations(d: Driver) -> None:
    pa, proposal = await proposal_for(d, memory=10)
    alloc = pa.scheduler.commit(proposal)
    assert alloc is not None
    await d.nodes(decommission("n1"))
    await d.settle()
    [released] = d.rm.released
    assert released.uuid == alloc.uuid
    assert released.termination_type == si.TerminationType.STOPPED_BY_RM
    assert proposal.application.allocations == {} and pa.partition.queues["root"].allocated == {}
    assert await state(d) == "Completing"


async def test_update_for_an_unknown_node_is_an_event(d: Driver) -> None:
    await d.nodes(
        si.NodeInfo(
            node_id="ghost",
            action=si.ActionFromRM.UPDATE,
            schedulable_resource=si.Resource.of(memory=1),
        )
    )
    await d.settle()
    assert "ghost" not in partition_actor(d).partition.nodes
    [event] = [e for e in d.rm.events if e.object_id == "ghost"]
    assert event.reason == "NodeNotFound"


# ============================================================================ asks and removal
async def test_asks_for_a_terminated_app_are_rejected(d: Driver) -> None:
    await d.apps(app("app-1"))
    await d.settle()
    await d.remove_apps("app-1")
    await d.settle()
    await d.asks(ask("late", "app-1"))
    await d.settle()
    [rejected] = d.rm.rejected_asks
    assert rejected.allocation_key == "late" and "Completed" in rejected.reason
    assert partition_actor(d).partition.queues["root"].pending == {}


async def test_first_ask_accepts_the_application(d: Driver) -> None:
    await d.apps(app("app-1"))
    await d.settle()
    assert await state(d) == "New"
    await d.asks(ask("k1", "app-1", count=2))
    await d.settle()
    assert await state(d) == "Accepted"
    p = partition_actor(d).partition
    assert p.queues["root.a"].pending == {"memory": 20, "vcore": 2}
    assert p.queues["root"].pending == {"memory": 20, "vcore": 2}


async def test_replacing_an_ask_updates_pending_up_the_chain(d: Driver) -> None:
    await d.apps(app("app-1", queue="root.parent.child"))
    await d.asks(ask("k1", "app-1", memory=10, count=3), ask("k2", "app-1", memory=1))
    await d.asks(ask("k1", "app-1", memory=5, count=1))
    await d.settle()
    p = partition_actor(d).partition
    for path in ("root.parent.child", "root.parent", "root"):
        assert p.queues[path].pending == {"memory": 6, "vcore": 2}, path
    assert p.applications["app-1"].pending == {"memory": 6, "vcore": 2}
    await d.release_asks("app-1", "k1")
    await d.settle()
    assert p.queues["root"].pending == {"memory": 1, "vcore": 1}


async def test_release_of_every_ask_completes_an_accepted_app(d: Driver) -> None:
    await d.apps(app("app-1"))
    await d.asks(ask("k1", "app-1"), ask("k2", "app-1"))
    await d.release_asks("app-1")  # no key: every ask
    await d.settle()
    p = partition_actor(d).partition
    assert p.applications["app-1"].asks == {} and p.queues["root"].pending == {}
    assert await state(d) == "Completing"


async def test_remove_application_releases_everything(d: Driver) -> None:
    await d.nodes(node("n1"))
    await d.apps(app("app-1"))
    await d.asks(ask("k1", "app-1"), ask("k2", "app-1", memory=1000))  # k2 never fits
    await d.settle()
    [alloc] = d.allocs("app-1")
    await d.remove_apps("app-1")
    await d.settle()
    assert await state(d) == "Completed"
    assert [r.uuid for r in d.rm.released] == [alloc.uuid]
    p = partition_actor(d).partition
    assert p.nodes["n1"].allocated == {}
    for path in ("root.a", "root"):
        assert p.queues[path].allocated == {} and p.queues[path].pending == {}, path
    assert "app-1" not in p.queues["root.a"].applications


async def test_allocation_object_identity_is_shared(d: Driver) -> None:
    pa, proposal = await proposal_for(d, memory=10)
    alloc = pa.scheduler.commit(proposal)
    assert isinstance(alloc, Allocation)
    n1 = pa.partition.nodes["n1"]
    assert n1.allocations[alloc.uuid] is proposal.application.allocations[alloc.uuid]


# ============================================================================ regressions
async def test_draining_queue_still_schedules_its_applications(d: Driver) -> None:
    await d.nodes(node("n1"))
    await d.apps(app("app-1", queue="root.b"))
    await d.settle()
    await d.core.update_configuration(
        si.UpdateConfigurationRequest(rm_id=RM, config=QUEUES.replace("          - name: b\n", ""))
    )
    assert partition_actor(d).partition.queues["root.b"].status is QueueStatus.DRAINING
    await d.asks(ask("k1", "app-1"))
    await d.settle()
    assert [a.application_id for a in d.allocs()] == ["app-1"]
