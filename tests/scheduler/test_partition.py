"""A partition without an event loop: proposal and commit, timers, outbox, placement, recovery."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import Any

import pytest

from scheduler import si
from scheduler._application import AppEvent, Application, AppState
from scheduler._config import parse_config
from scheduler._events import (
    AllocationReleased,
    AllocationSpec,
    AppSpec,
    AppTimer,
    AskSpec,
    Event,
    NodeUpdate,
    QueueTimer,
)
from scheduler._objects import Allocation, Node
from scheduler._partition import Outbox, Partition, Proposal
from scheduler._queue import QueueStatus

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

STARTING = 300.0
COMPLETING = 30.0
TERMINATED = 3 * 24 * 3600.0


# ============================================================================ fakes and factories
class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class FakeTimers:
    """A TimerPort that records what it is asked and which timers are armed."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.armed: dict[str, tuple[float, Event, str]] = {}

    def set(self, key: str, delay: float, message: Event, to: str) -> None:
        self.calls.append(("set", key, delay, message, to))
        self.armed[key] = (delay, message, to)

    def cancel(self, key: str) -> None:
        self.calls.append(("cancel", key))
        self.armed.pop(key, None)

    def sets(self) -> list[tuple[str, float, Event]]:
        return [(c[1], c[2], c[3]) for c in self.calls if c[0] == "set"]


class Env:
    def __init__(self, config: str = QUEUES) -> None:
        self.clock = FakeClock()
        self.timers = FakeTimers()
        self.p = Partition(
            parse_config(textwrap.dedent(config)).partitions[0],
            rm_id="rm-1",
            clock=self.clock,
            timers=self.timers,
        )

    def node(
        self,
        node_id: str = "n1",
        memory: int = 100,
        vcore: int = 100,
        existing: tuple[AllocationSpec, ...] = (),
    ) -> Node | None:
        self.p.update_nodes(
            [
                NodeUpdate(
                    node_id=node_id,
                    action=si.ActionFromRM.CREATE,
                    capacity={"memory": memory, "vcore": vcore},
                    existing=existing,
                )
            ]
        )
        return self.p.nodes.get(node_id)

    def app(
        self,
        app_id: str = "app-1",
        queue: str = "root.a",
        user: str = "alice",
        groups: tuple[str, ...] = (),
    ) -> Application | None:
        return self.p.add_application(
            AppSpec(application_id=app_id, queue_name=queue, user=user, groups=groups)
        )

    def asks(self, app: Application, *specs: AskSpec) -> None:
        self.p.update_asks(app, specs)

    def fields(self) -> list[str]:
        return [field for field, _ in self.p.outbox.entries]

    def items(self, field: str) -> list[Any]:
        if field == "event":
            return list(self.p.outbox.events)
        return [item for f, item in self.p.outbox.entries if f == field]


def ask(
    key: str, app_id: str = "app-1", memory: int = 10, vcore: int = 1, count: int = 1, **kw: Any
) -> AskSpec:
    return AskSpec(
        allocation_key=key,
        application_id=app_id,
        resource={"memory": memory, "vcore": vcore},
        max_allocations=count,
        **kw,
    )


def existing(
    uuid: str, app_id: str = "app-1", node_id: str = "n1", memory: int = 30, vcore: int = 3
) -> AllocationSpec:
    return AllocationSpec(
        uuid=uuid,
        allocation_key=f"key-{uuid}",
        application_id=app_id,
        node_id=node_id,
        resource={"memory": memory, "vcore": vcore},
    )


@pytest.fixture
def env() -> Env:
    return Env()


def state_of(app: Application) -> AppState:
    """The state now (a call, so a type checker does not keep an earlier narrowing)."""
    return app.state


def placed(app: Application | None) -> Application:
    assert app is not None
    return app


def proposal_for(env: Env, app_id: str = "app-1", memory: int = 60) -> Proposal:
    """One node, one application in root.a with one ask of ``memory``, and its proposal."""
    env.node("n1", memory=100)
    app = placed(env.app(app_id))
    env.asks(app, ask("k1", app_id, memory=memory))
    proposal = env.p.propose()
    assert proposal is not None
    assert proposal.application is app and proposal.node.node_id == "n1"
    return proposal


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
def test_propose_is_read_only(env: Env) -> None:
    env.node("n1", memory=100)
    env.node("n2", memory=50)
    app = placed(env.app("app-1"))
    env.asks(app, ask("k1", memory=30, count=2), ask("k2", memory=5, priority=1))
    before = snapshot(env.p)
    timer_calls = list(env.timers.calls)
    proposal = env.p.propose()
    assert proposal is not None
    assert proposal.ask.allocation_key == "k2"  # higher priority first
    assert proposal.node.node_id == "n1"  # fair: both empty, tie broken by id
    assert snapshot(env.p) == before
    assert env.timers.calls == timer_calls
    # and proposing again gives the same decision: nothing moved
    again = env.p.propose()
    assert again is not None and again.ask is proposal.ask and again.node is proposal.node


def test_propose_without_nodes_or_pending_is_none(env: Env) -> None:
    assert env.p.propose() is None
    env.node("n1")
    assert env.p.propose() is None
    app = placed(env.app())
    env.asks(app, ask("k1", memory=1000))  # bigger than any node
    assert env.p.propose() is None


def test_successful_commit_updates_everything_in_one_step(env: Env) -> None:
    env.node("n1", memory=100)
    app = placed(
        env.p.add_application(
            AppSpec(application_id="app-1", queue_name="root.parent.child", user="u")
        )
    )
    env.asks(app, ask("k1", memory=40, vcore=4, count=2))
    proposal = env.p.propose()
    assert proposal is not None
    env.p.outbox.flush()
    env.clock.now = 2000.0
    alloc = env.p.commit(proposal)
    assert alloc is not None
    res = {"memory": 40, "vcore": 4}
    node = env.p.nodes["n1"]
    assert node.allocations == {alloc.uuid: alloc}
    assert node.allocated == res
    assert node.available == {"memory": 60, "vcore": 96}
    for path in ("root.parent.child", "root.parent", "root"):
        queue = env.p.queues[path]
        assert queue.allocated == res, path
        assert queue.pending == res, path  # one of two still pending
    assert env.p.queues["root.parent.sibling"].allocated == {}
    assert app.allocations == {alloc.uuid: alloc}
    assert app.allocated == res and app.pending == res
    assert proposal.ask.pending == 1
    assert alloc.node_id == "n1" and alloc.application_id == "app-1"
    assert alloc.allocation_key == "k1" and alloc.allocation_time == 2000.0
    new = env.items("new")
    assert len(new) == 1
    assert new[0] == alloc.to_si()
    assert new[0].resource_per_alloc.to_dict() == res
    assert new[0].partition_name == "default"
    assert state_of(app) is AppState.STARTING


def test_commit_resorts_the_node_index(env: Env) -> None:
    env.node("n1", memory=100)
    env.node("n2", memory=100)
    app = placed(env.app())
    env.asks(app, ask("k1", memory=50))
    proposal = env.p.propose()
    assert proposal is not None and proposal.node.node_id == "n1"
    env.p.commit(proposal)
    assert [n.node_id for n in env.p.index] == ["n2", "n1"]  # fair: least used first


def _fill_node(env: Env, proposal: Proposal) -> None:
    other = placed(env.app("app-2"))
    env.asks(other, ask("other", "app-2", memory=50))
    assert env.p.commit(Proposal(other, other.asks["other"], proposal.node)) is not None


def _remove_node(env: Env, proposal: Proposal) -> None:
    env.p.update_nodes([NodeUpdate(node_id="n1", action=si.ActionFromRM.DECOMISSION)])


def _drain_node(env: Env, proposal: Proposal) -> None:
    env.p.update_nodes([NodeUpdate(node_id="n1", action=si.ActionFromRM.DRAIN_NODE)])


def _occupy_node(env: Env, proposal: Proposal) -> None:
    env.p.update_nodes(
        [NodeUpdate(node_id="n1", action=si.ActionFromRM.UPDATE, occupied={"memory": 50})]
    )


def _release_ask(env: Env, proposal: Proposal) -> None:
    env.p.release_asks(proposal.application, ["k1"])


def _replace_ask(env: Env, proposal: Proposal) -> None:
    env.asks(proposal.application, ask("k1", memory=60))


def _remove_app(env: Env, proposal: Proposal) -> None:
    env.p.remove_application(proposal.application.application_id)


def _queue_max(env: Env, proposal: Proposal) -> None:
    # another application of the same queue takes 50 of the queue's max of 100
    other = placed(env.app("app-2"))
    env.node("n2", memory=100)
    env.asks(other, ask("other", "app-2", memory=50))
    assert env.p.commit(Proposal(other, other.asks["other"], env.p.nodes["n2"])) is not None


def _lower_queue_max(env: Env, proposal: Proposal) -> None:
    env.p.apply_config(
        parse_config(QUEUES.replace("max: {memory: 100}", "max: {memory: 50}")).partitions[0]
    )


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
def test_commit_drops_a_proposal_that_no_longer_holds(
    env: Env, interfere: Callable[[Env, Proposal], None]
) -> None:
    proposal = proposal_for(env, memory=60)
    interfere(env, proposal)
    before = snapshot(env.p)
    ask_pending = proposal.ask.pending
    node_allocations = dict(proposal.node.allocations)
    assert env.p.commit(proposal) is None
    assert snapshot(env.p) == before
    assert proposal.ask.pending == ask_pending
    assert proposal.node.allocations == node_allocations


def test_commit_of_a_fully_allocated_ask_is_dropped(env: Env) -> None:
    proposal = proposal_for(env, memory=10)
    assert env.p.commit(proposal) is not None
    assert env.p.commit(proposal) is None
    assert len(env.items("new")) == 1


def test_commit_to_a_node_that_returned_under_the_same_id_is_dropped(env: Env) -> None:
    proposal = proposal_for(env, memory=10)
    _remove_node(env, proposal)
    env.node("n1", memory=100)
    assert env.p.commit(proposal) is None
    assert env.p.nodes["n1"].allocations == {}


# ============================================================================ schedule()
def test_schedule_stops_at_limit_and_leaves_schedule_pending(env: Env) -> None:
    env.node("n1", memory=1000)
    app = placed(env.app("app-1", queue="root.b"))
    env.asks(app, ask("k1", memory=10, count=5))
    assert env.p.schedule_pending
    assert env.p.schedule(limit=2) == 2
    assert env.p.schedule_pending
    assert len(app.allocations) == 2 and app.asks["k1"].pending == 3
    assert env.p.schedule() == 3
    assert not env.p.schedule_pending
    assert env.p.total_allocations == 5
    assert len(env.items("new")) == 5


def test_schedule_clears_schedule_pending_when_nothing_fits(env: Env) -> None:
    env.node("n1", memory=100)
    app = placed(env.app("app-1", queue="root.b"))
    env.asks(app, ask("k1", memory=60, count=3))
    assert env.p.schedule(limit=3) == 1
    assert not env.p.schedule_pending


def test_schedule_respects_queue_max(env: Env) -> None:
    env.node("n1", memory=1000)
    app = placed(env.app("app-1", queue="root.a"))  # max memory 100
    env.asks(app, ask("k1", memory=30, count=5))
    assert env.p.schedule() == 3
    assert env.p.queues["root.a"].allocated["memory"] == 90


def test_schedule_respects_a_parent_max_across_children(env: Env) -> None:
    env.node("n1", memory=1000)
    child = placed(env.app("c", queue="root.parent.child"))
    sibling = placed(env.app("s", queue="root.parent.sibling"))
    env.asks(child, ask("k", "c", memory=50, count=2))
    env.asks(sibling, ask("k", "s", memory=50, count=2))
    assert env.p.schedule() == 3  # parent max 150
    assert env.p.queues["root.parent"].allocated["memory"] == 150


def test_schedule_honours_required_node(env: Env) -> None:
    env.node("n1", memory=100)
    env.node("n2", memory=100)
    app = placed(env.app("app-1", queue="root.b"))
    env.asks(app, ask("k1", memory=10, required_node="n2"))
    assert env.p.schedule() == 1
    assert env.items("new")[0].node_id == "n2"


# ============================================================================ state timers
def _app_timer(app_id: str, event: AppEvent, state: AppState) -> AppTimer:
    return AppTimer(application_id=app_id, event=event.value, state=state.value)


def test_first_allocation_sets_the_starting_timer(env: Env) -> None:
    proposal = proposal_for(env, memory=10)
    assert state_of(proposal.application) is AppState.ACCEPTED
    assert env.timers.armed == {}
    env.p.commit(proposal)
    assert state_of(proposal.application) is AppState.STARTING
    assert env.timers.armed == {
        "app:app-1": (STARTING, _app_timer("app-1", AppEvent.RUN, AppState.STARTING), "app:app-1")
    }


def test_starting_timer_moves_the_app_to_running(env: Env) -> None:
    proposal = proposal_for(env, memory=10)
    env.p.commit(proposal)
    _, message, _ = env.timers.armed["app:app-1"]
    assert isinstance(message, AppTimer)
    env.p.on_app_timer(message)
    assert state_of(proposal.application) is AppState.RUNNING
    assert "app:app-1" not in env.timers.armed


def test_completing_and_completed_timers(env: Env) -> None:
    proposal = proposal_for(env, memory=10)
    app = proposal.application
    alloc = env.p.commit(proposal)
    assert alloc is not None
    env.p.release_allocations(
        app, [AllocationReleased(uuid=alloc.uuid, termination=si.TerminationType.STOPPED_BY_RM)]
    )
    assert state_of(app) is AppState.COMPLETING
    assert env.timers.armed["app:app-1"] == (
        COMPLETING,
        _app_timer("app-1", AppEvent.COMPLETE, AppState.COMPLETING),
        "app:app-1",
    )
    env.p.on_app_timer(_app_timer("app-1", AppEvent.COMPLETE, AppState.COMPLETING))
    assert state_of(app) is AppState.COMPLETED
    assert env.timers.armed["app:app-1"] == (
        TERMINATED,
        _app_timer("app-1", AppEvent.EXPIRE, AppState.COMPLETED),
        "app:app-1",
    )
    assert "app-1" not in env.p.applications and env.p.terminated["app-1"] is app
    env.p.on_app_timer(_app_timer("app-1", AppEvent.EXPIRE, AppState.COMPLETED))
    assert state_of(app) is AppState.EXPIRED
    assert "app-1" not in env.p.terminated
    assert "app:app-1" not in env.timers.armed


def test_rejected_app_gets_the_expire_timer(env: Env) -> None:
    assert env.app("app-1", queue="root.nope") is None
    assert env.timers.armed["app:app-1"] == (
        TERMINATED,
        _app_timer("app-1", AppEvent.EXPIRE, AppState.REJECTED),
        "app:app-1",
    )
    env.p.on_app_timer(_app_timer("app-1", AppEvent.EXPIRE, AppState.REJECTED))
    assert "app-1" not in env.p.terminated


def test_failed_app_gets_the_expire_timer(env: Env) -> None:
    app = placed(env.app())
    env.p.transition(app, AppEvent.FAIL)
    assert state_of(app) is AppState.FAILING
    assert "app:app-1" not in env.timers.armed
    env.p.transition(app, AppEvent.FAIL)
    assert state_of(app) is AppState.FAILED
    assert env.timers.armed["app:app-1"] == (
        TERMINATED,
        _app_timer("app-1", AppEvent.EXPIRE, AppState.FAILED),
        "app:app-1",
    )


def test_leaving_a_timed_state_cancels_its_timer(env: Env) -> None:
    proposal = proposal_for(env, memory=10)
    env.p.commit(proposal)
    env.timers.calls.clear()
    env.p.transition(proposal.application, AppEvent.RUN)  # Starting -> Running
    assert env.timers.calls == [("cancel", "app:app-1")]
    assert env.timers.armed == {}


@pytest.mark.parametrize(
    "stale",
    [
        _app_timer("app-1", AppEvent.RUN, AppState.STARTING),  # app is Running now
        _app_timer("app-1", AppEvent.COMPLETE, AppState.COMPLETING),
        _app_timer("nobody", AppEvent.RUN, AppState.STARTING),
    ],
)
def test_stale_app_timer_is_ignored(env: Env, stale: AppTimer) -> None:
    proposal = proposal_for(env, memory=10)
    env.p.commit(proposal)
    env.p.transition(proposal.application, AppEvent.RUN)
    assert state_of(proposal.application) is AppState.RUNNING
    before = snapshot(env.p)
    env.p.on_app_timer(stale)
    assert state_of(proposal.application) is AppState.RUNNING
    assert snapshot(env.p) == before


def test_asks_while_completing_bring_the_app_back_to_running(env: Env) -> None:
    proposal = proposal_for(env, memory=10)
    app = proposal.application
    alloc = env.p.commit(proposal)
    assert alloc is not None
    env.p.release_allocations(
        app, [AllocationReleased(uuid="", termination=si.TerminationType.STOPPED_BY_RM)]
    )
    assert state_of(app) is AppState.COMPLETING
    env.asks(app, ask("k2"))
    assert state_of(app) is AppState.RUNNING
    assert "app:app-1" not in env.timers.armed
    env.p.on_app_timer(_app_timer("app-1", AppEvent.COMPLETE, AppState.COMPLETING))
    assert state_of(app) is AppState.RUNNING


# ============================================================================ outbox
def _alloc_si(key: str) -> si.Allocation:
    return si.Allocation(allocation_key=key, uuid=key)


def _event(reason: str) -> si.EventRecord:
    return si.EventRecord(reason=reason)


def test_outbox_flush_merges_consecutive_entries_and_keeps_order() -> None:
    box = Outbox()
    a1, a2 = _alloc_si("a1"), _alloc_si("a2")
    rejected = si.RejectedAllocationAsk(allocation_key="r")
    updated = si.UpdatedApplication(application_id="app", state="Starting")
    accepted = si.AcceptedApplication(application_id="app2")
    released = si.AllocationRelease(uuid="a1")
    e1, e2 = _event("one"), _event("two")
    node = si.AcceptedNode(node_id="n1")
    for field, item in [
        ("new", a1),
        ("rejected", rejected),
        ("new", a2),
        ("app_updated", updated),
        ("app_accepted", accepted),
        ("released", released),
        ("event", e1),
        ("event", e2),
        ("node_accepted", node),
    ]:
        if field == "event":
            box.events.append(item)  # type: ignore[arg-type]
        else:
            box.add(field, item)
    assert len(box) == 9
    assert box.flush() == [
        ("allocation", si.AllocationResponse(new=[a1, a2], rejected=[rejected])),
        ("application", si.ApplicationResponse(updated=[updated], accepted=[accepted])),
        ("allocation", si.AllocationResponse(released=[released])),
        ("node", si.NodeResponse(accepted=[node])),
        ("event", [e1, e2]),
    ]
    assert len(box) == 0
    assert box.flush() == []


def test_outbox_keeps_interleaved_kinds_apart_and_events_after() -> None:
    box = Outbox()
    e1, e2 = _event("one"), _event("two")
    a1, a2 = _alloc_si("a1"), _alloc_si("a2")
    updated = si.UpdatedApplication(application_id="app", state="Starting")
    box.events.append(e1)
    box.add("new", a1)
    box.events.append(e2)
    box.add("new", a2)
    box.add("app_updated", updated)
    assert box.flush() == [
        ("allocation", si.AllocationResponse(new=[a1, a2])),  # events do not split them
        ("application", si.ApplicationResponse(updated=[updated])),
        ("event", [e1, e2]),
    ]


def test_partition_outbox_reports_in_order(env: Env) -> None:
    env.node("n1")
    app = placed(env.app())
    env.asks(app, ask("k1"))
    env.p.schedule()
    kinds = [kind for kind, _ in env.p.outbox.flush()]
    # node accepted, its event; app accepted, its event; the state changes and events
    # interleave; the allocation comes after the application was accepted.
    assert kinds[0] == "node"
    assert kinds.index("allocation") > kinds.index("application")


# ============================================================================ placement
def test_unknown_queue_rejects_the_application(env: Env) -> None:
    assert env.app("app-1", queue="root.nope") is None
    [rejected] = env.items("app_rejected")
    assert rejected.application_id == "app-1"
    assert "root.nope" in rejected.reason and "does not exist" in rejected.reason
    assert "app-1" not in env.p.applications
    app = env.p.terminated["app-1"]
    assert state_of(app) is AppState.REJECTED and app.rejected_message == rejected.reason
    assert [u.state for u in env.items("app_updated")] == ["Rejected"]
    assert "root.nope" not in env.p.queues  # no rule says create


def test_unqualified_queue_name_is_under_root(env: Env) -> None:
    app = placed(env.app("app-1", queue="b"))
    assert app.queue is env.p.queues["root.b"]
    assert app.queue_name == "root.b"
    assert env.items("app_accepted") == [si.AcceptedApplication(application_id="app-1")]


def test_parent_queue_rejects_the_application(env: Env) -> None:
    assert env.app("app-1", queue="root.parent") is None
    [rejected] = env.items("app_rejected")
    assert "not a leaf" in rejected.reason


def test_duplicate_application_is_rejected(env: Env) -> None:
    first = placed(env.app("app-1"))
    assert env.app("app-1", queue="root.b") is None
    assert env.p.applications["app-1"] is first
    assert "already exists" in env.items("app_rejected")[0].reason


@pytest.mark.parametrize(
    ("queue", "path"),
    [
        ("root.parent.new", "root.parent.new"),
        ("newleaf", "root.newleaf"),
        ("root.x.y", "root.x.y"),
    ],
)
def test_provided_rule_with_create_makes_dynamic_queues(queue: str, path: str) -> None:
    env = Env(DYNAMIC)
    added: list[str] = []
    env.p.on_queue_added = lambda q: added.append(q.path)
    app = placed(env.app("app-1", queue=queue))
    leaf = env.p.queues[path]
    assert app.queue is leaf and leaf.leaf and leaf.dynamic
    assert app.queue_name == path
    assert added[-1] == path
    parent = leaf.parent
    assert parent is not None and not parent.leaf


def test_dynamic_queue_cannot_go_below_a_leaf() -> None:
    env = Env(DYNAMIC)
    assert env.app("app-1", queue="root.a.below") is None
    assert "root.a.below" not in env.p.queues
    assert env.p.queues["root.a"].leaf


def test_empty_dynamic_queue_is_removed_by_its_timer() -> None:
    env = Env(DYNAMIC)
    app = placed(env.app("app-1", queue="root.parent.tmp"))
    env.p.remove_application(app.application_id)  # New -> Completed
    assert state_of(app) is AppState.COMPLETED
    delay, message, to = env.timers.armed["queue:root.parent.tmp"]
    assert (delay, message, to) == (
        10.0,
        QueueTimer(path="root.parent.tmp"),
        "queue:root.parent.tmp",
    )
    env.p.on_queue_timer(QueueTimer(path="root.parent.tmp"))
    assert "root.parent.tmp" not in env.p.queues
    assert "root.parent" in env.p.queues  # configured queues stay


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
def test_submit_acl(queue: str, user: str, groups: tuple[str, ...], allowed: bool) -> None:
    env = Env(ACLS)
    app = env.app("app-1", queue=queue, user=user, groups=groups)
    assert (app is not None) is allowed
    if not allowed:
        assert "may not submit" in env.items("app_rejected")[0].reason


def test_draining_queue_takes_no_new_applications(env: Env) -> None:
    placed(env.app("app-1", queue="root.b"))
    env.p.apply_config(parse_config(QUEUES.replace("          - name: b\n", "")).partitions[0])
    queue = env.p.queues["root.b"]
    assert queue.status is QueueStatus.DRAINING
    assert env.app("app-2", queue="root.b") is None
    assert "Draining" in env.items("app_rejected")[0].reason


# ============================================================================ node recovery
def test_node_with_existing_allocations_is_recovered(env: Env) -> None:
    app = placed(env.app("app-1", queue="root.parent.child"))
    env.p.outbox.flush()
    node = env.node("n1", memory=100, existing=(existing("u1"), existing("u2", memory=20)))
    assert node is not None
    assert set(node.allocations) == {"u1", "u2"}
    assert node.allocated == {"memory": 50, "vcore": 6}
    assert node.available == {"memory": 50, "vcore": 94}
    assert set(app.allocations) == {"u1", "u2"}
    assert app.allocations["u1"] is node.allocations["u1"]
    assert app.allocations["u1"].allocation_key == "key-u1"
    for path in ("root.parent.child", "root.parent", "root"):
        assert env.p.queues[path].allocated == {"memory": 50, "vcore": 6}
    assert state_of(app) is AppState.RUNNING  # New -> Accepted -> Starting -> Running
    assert [u.state for u in env.items("app_updated")] == ["Accepted", "Starting", "Running"]
    assert env.items("node_accepted") == [si.AcceptedNode(node_id="n1")]
    assert env.items("new") == []  # the RM already knows these allocations
    # recovered usage counts: the queue max of root.parent (150) has 100 left
    assert env.p.queues["root.parent.child"].headroom_fits({"memory": 100})
    assert not env.p.queues["root.parent.child"].headroom_fits({"memory": 101})


def test_recovered_allocation_can_be_released(env: Env) -> None:
    app = placed(env.app("app-1"))
    env.node("n1", existing=(existing("u1"),))
    env.p.release_allocations(
        app, [AllocationReleased(uuid="u1", termination=si.TerminationType.STOPPED_BY_RM)]
    )
    assert env.p.nodes["n1"].allocated == {}
    assert env.p.queues["root.a"].allocated == {}
    assert state_of(app) is AppState.COMPLETING


def test_node_with_an_allocation_of_an_unknown_app_is_rejected(env: Env) -> None:
    app = placed(env.app("app-1"))
    assert env.node("n1", existing=(existing("u0"), existing("u1", app_id="ghost"))) is None
    [rejected] = env.items("node_rejected")
    assert rejected.node_id == "n1" and "not in partition" in rejected.reason
    assert app.allocations == {} and env.p.queues["root"].allocated == {}
    assert "n1" not in env.p.index


def test_existing_allocation_already_on_another_node_rejects_the_node(env: Env) -> None:
    placed(env.app("app-1"))
    env.node("n1", existing=(existing("u1"),))
    assert env.node("n2", existing=(existing("u1", node_id="n2"),)) is None
    assert "already allocated" in env.items("node_rejected")[0].reason
    assert env.p.queues["root.a"].allocated == {"memory": 30, "vcore": 3}


def test_duplicate_node_is_rejected(env: Env) -> None:
    first = env.node("n1", memory=100)
    env.node("n1", memory=500)
    assert env.p.nodes["n1"] is first
    assert first is not None and first.capacity["memory"] == 100
    assert "already exists" in env.items("node_rejected")[0].reason


def test_removing_a_node_releases_its_allocations(env: Env) -> None:
    proposal = proposal_for(env, memory=10)
    app = proposal.application
    alloc = env.p.commit(proposal)
    assert alloc is not None
    _remove_node(env, proposal)
    [released] = env.items("released")
    assert released.uuid == alloc.uuid
    assert released.termination_type == si.TerminationType.STOPPED_BY_RM
    assert app.allocations == {} and env.p.queues["root"].allocated == {}
    assert state_of(app) is AppState.COMPLETING


def test_update_for_an_unknown_node_is_an_event(env: Env) -> None:
    env.p.update_nodes(
        [NodeUpdate(node_id="ghost", action=si.ActionFromRM.UPDATE, capacity={"memory": 1})]
    )
    assert "ghost" not in env.p.nodes
    [event] = env.items("event")
    assert event.reason == "NodeNotFound" and event.object_id == "ghost"


# ============================================================================ asks and removal
def test_asks_for_a_terminated_app_are_rejected(env: Env) -> None:
    app = placed(env.app())
    env.p.remove_application("app-1")
    env.asks(app, ask("late"))
    [rejected] = env.items("rejected")
    assert rejected.allocation_key == "late" and "Completed" in rejected.reason
    assert env.p.queues["root"].pending == {}


def test_first_ask_accepts_the_application(env: Env) -> None:
    app = placed(env.app())
    assert state_of(app) is AppState.NEW
    env.asks(app, ask("k1", count=2))
    assert state_of(app) is AppState.ACCEPTED
    assert env.p.queues["root.a"].pending == {"memory": 20, "vcore": 2}
    assert env.p.queues["root"].pending == {"memory": 20, "vcore": 2}


def test_replacing_an_ask_updates_pending_up_the_chain(env: Env) -> None:
    app = placed(env.app("app-1", queue="root.parent.child"))
    env.asks(app, ask("k1", memory=10, count=3), ask("k2", memory=1))
    env.asks(app, ask("k1", memory=5, count=1))
    for path in ("root.parent.child", "root.parent", "root"):
        assert env.p.queues[path].pending == {"memory": 6, "vcore": 2}, path
    assert app.pending == {"memory": 6, "vcore": 2}
    env.p.release_asks(app, ["k1"])
    assert env.p.queues["root"].pending == {"memory": 1, "vcore": 1}


def test_release_of_every_ask_completes_an_accepted_app(env: Env) -> None:
    app = placed(env.app())
    env.asks(app, ask("k1"), ask("k2"))
    env.p.release_asks(app, [])
    assert app.asks == {} and env.p.queues["root"].pending == {}
    assert state_of(app) is AppState.COMPLETING


def test_remove_application_releases_everything(env: Env) -> None:
    proposal = proposal_for(env, memory=10)
    app = proposal.application
    alloc = env.p.commit(proposal)
    assert alloc is not None
    env.asks(app, ask("k2", memory=5))
    env.p.remove_application("app-1")
    assert state_of(app) is AppState.COMPLETED
    assert [r.uuid for r in env.items("released")] == [alloc.uuid]
    assert env.p.nodes["n1"].allocated == {}
    for path in ("root.a", "root"):
        assert env.p.queues[path].allocated == {} and env.p.queues[path].pending == {}
    assert "app-1" not in env.p.queues["root.a"].applications


def test_allocation_object_identity_is_shared(env: Env) -> None:
    proposal = proposal_for(env, memory=10)
    alloc = env.p.commit(proposal)
    assert isinstance(alloc, Allocation)
    assert env.p.nodes["n1"].allocations[alloc.uuid] is proposal.application.allocations[alloc.uuid]


# ============================================================================ regressions
def test_draining_queue_still_schedules_its_applications(env: Env) -> None:
    env.node("n1")
    app = placed(env.app("app-1", queue="root.b"))
    env.p.apply_config(parse_config(QUEUES.replace("          - name: b\n", "")).partitions[0])
    assert env.p.queues["root.b"].status is QueueStatus.DRAINING
    env.asks(app, ask("k1"))
    assert env.p.schedule() == 1
    assert [a.application_id for a in env.items("new")] == ["app-1"]


def test_duplicate_uuid_within_one_node_rejects_the_node(env: Env) -> None:
    placed(env.app("app-1"))
    assert env.node("n1", existing=(existing("u1"), existing("u1"))) is None
    [rejected] = env.items("node_rejected")
    assert "u1" in rejected.reason and "already allocated" in rejected.reason
    assert env.p.queues["root.a"].allocated == {}


def test_finished_time_is_when_it_finished_not_when_it_expired() -> None:
    from scheduler._application import AppEvent as Ev
    from scheduler._application import Application as App

    a = App(application_id="x", partition="default", queue_name="root.a")
    a.fire(Ev.REJECT, 10.0)
    a.fire(Ev.EXPIRE, 20.0)
    assert a.finished_time == 10.0
