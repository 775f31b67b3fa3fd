"""Domain objects without an event loop: node order, pending asks, accounting, queues, outbox."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler import si
from scheduler.objects._application import Application
from scheduler.objects._asks import Allocation, Ask
from scheduler.objects._nodes import Node, NodeIndex
from scheduler.objects._outbox import Outbox
from scheduler.objects._pending import PendingAsks
from scheduler.objects._queue import Queue, QueueStatus
from scheduler.objects._resources import Res

_uuids = itertools.count(1)


# ============================================================================ factories
def make_alloc(
    app_id: str = "app-1", node_id: str = "n1", key: str = "k", **res: int
) -> Allocation:
    return Allocation(f"u{next(_uuids)}", key, app_id, "default", node_id, dict(res))


def make_node(
    node_id: str, memory: int = 100, vcore: int = 10, *, used_memory: int = 0, used_vcore: int = 0
) -> Node:
    node = Node(node_id, {"memory": memory, "vcore": vcore})
    if used_memory or used_vcore:
        node.add_allocation(make_alloc(node_id=node_id, memory=used_memory, vcore=used_vcore))
    return node


def make_ask(
    key: str,
    *,
    priority: int = 0,
    memory: int = 10,
    count: int = 1,
    app_id: str = "app-1",
    seq: int = 0,
) -> Ask:
    return Ask(
        allocation_key=key,
        application_id=app_id,
        resource={"memory": memory},
        max_allocations=count,
        priority=priority,
        seq=seq,
    )


def make_app(app_id: str = "app-1", *, seq: int = 0) -> Application:
    return Application(
        application_id=app_id, partition="default", queue_name="root.a", submit_seq=seq
    )


def add_asks(app: Application, *asks: Ask) -> Res:
    """Add ``asks`` as the partition does: one delta applied once."""
    delta: Res = {}
    for ask in asks:
        app.add_ask(ask, delta)
    app.apply_pending(delta)
    return delta


def make_queue(
    name: str,
    parent: Queue | None = None,
    *,
    leaf: bool = True,
    max_resources: Res | None = None,
    guaranteed: Res | None = None,
    properties: dict[str, str] | None = None,
) -> Queue:
    queue = Queue(name, parent, leaf=leaf)
    queue.configure(
        max_resources=max_resources or {}, guaranteed=guaranteed or {}, properties=properties or {}
    )
    return queue


def index_of(policy: str, *nodes: Node) -> NodeIndex:
    index = NodeIndex(policy)
    for node in nodes:
        index.add(node)
    return index


def size(res: Res) -> tuple[tuple[str, int], ...]:
    """A resource as NodeIndex.first_fit takes it (``Ask.size``)."""
    return tuple(res.items())


def order(index: NodeIndex) -> list[str]:
    return [n.node_id for n in index]


# ============================================================================ NodeIndex
def _three_nodes() -> tuple[Node, Node, Node]:
    return (
        make_node("half", used_memory=50, used_vcore=5),
        make_node("empty"),
        make_node("quarter", used_memory=25, used_vcore=2),
    )


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("fair", ["empty", "quarter", "half"]),
        ("binpacking", ["half", "quarter", "empty"]),
    ],
)
def test_node_index_order_by_policy(policy: str, expected: list[str]) -> None:
    assert order(index_of(policy, *_three_nodes())) == expected


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("fair", ["big", "small"]),  # big is 10% used, small 50%
        ("binpacking", ["small", "big"]),
    ],
)
def test_node_index_compares_usage_relative_to_capacity(policy: str, expected: list[str]) -> None:
    small = make_node("small", memory=100, vcore=10, used_memory=50, used_vcore=5)
    big = make_node("big", memory=1000, vcore=100, used_memory=100, used_vcore=10)
    assert order(index_of(policy, small, big)) == expected


@pytest.mark.parametrize("policy", ["fair", "binpacking"])
def test_node_index_breaks_ties_by_node_id(policy: str) -> None:
    nodes = [make_node(n) for n in ("c", "a", "b")]
    assert order(index_of(policy, *nodes)) == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("policy", "expected_after"),
    [
        ("fair", ["quarter", "half", "empty"]),
        ("binpacking", ["empty", "half", "quarter"]),
    ],
)
def test_node_index_update_resorts_after_usage_change(
    policy: str, expected_after: list[str]
) -> None:
    half, empty, quarter = _three_nodes()
    index = index_of(policy, half, empty, quarter)
    empty.add_allocation(make_alloc(node_id="empty", memory=90, vcore=9))
    index.update(empty)
    assert order(index) == expected_after
    # and back again once the allocation is gone
    empty.remove_allocation(next(iter(empty.allocations)))
    index.update(empty)
    assert order(index) == order(index_of(policy, *_three_nodes()))


def test_node_index_refresh_resorts_after_capacity_change() -> None:
    a = make_node("a", used_memory=50, used_vcore=5)  # 50%
    b = make_node("b", used_memory=40, used_vcore=4)  # 40%
    index = index_of("fair", a, b)
    assert order(index) == ["b", "a"]
    a.capacity = {"memory": 1000, "vcore": 100}  # a is now 5% used
    a.refresh_available()
    index.refresh(a)
    assert order(index) == ["a", "b"]


@pytest.mark.parametrize("policy", ["fair", "binpacking"])
def test_first_fit_skips_nodes_without_room(policy: str) -> None:
    tiny = make_node("tiny", memory=20)
    full = make_node("full", used_memory=95, used_vcore=1)
    roomy = make_node("roomy", used_memory=30, used_vcore=1)
    index = index_of(policy, tiny, full, roomy)
    chosen = index.first_fit(size({"memory": 50}))
    assert chosen is roomy
    # a resource no node has at all never fits
    assert index.first_fit(size({"gpu": 1})) is None
    assert index.first_fit(size({"memory": 71})) is None


def test_first_fit_takes_the_first_node_in_policy_order() -> None:
    nodes = _three_nodes()
    assert index_of("fair", *nodes).first_fit(size({"memory": 10})) is nodes[1]  # empty
    assert index_of("binpacking", *nodes).first_fit(size({"memory": 10})) is nodes[0]  # half


def test_first_fit_counts_occupied_resources() -> None:
    node = Node("n", {"memory": 100}, occupied={"memory": 80})
    index = index_of("fair", node)
    assert index.first_fit(size({"memory": 30})) is None
    assert index.first_fit(size({"memory": 20})) is node


def test_discarded_node_leaves_the_index() -> None:
    a, b = make_node("a"), make_node("b")
    index = index_of("fair", a, b)
    index.discard(a)
    assert "a" not in index and len(index) == 1
    assert order(index) == ["b"]
    assert index.first_fit(size({"memory": 1})) is b


def test_unknown_node_sort_policy_raises() -> None:
    with pytest.raises(ValueError, match="unknown node sorting policy"):
        NodeIndex("random")


# ============================================================================ PendingAsks
def test_pending_asks_order_priority_high_first_then_age() -> None:
    pending = PendingAsks()
    asks = [
        make_ask("a", priority=0),
        make_ask("b", priority=5),
        make_ask("c", priority=0),
        make_ask("d", priority=5),
        make_ask("e", priority=-1),
        make_ask("f", priority=10),
    ]
    for ask in asks:
        pending.add(ask)
    expected = ["f", "b", "d", "a", "c", "e"]
    assert [a.allocation_key for a in pending] == expected
    assert [a.allocation_key for a in pending.in_order()] == expected
    assert len(pending) == 6


def test_pending_asks_single_priority_keeps_arrival_order() -> None:
    pending = PendingAsks()
    for key in "zyx":
        pending.add(make_ask(key, priority=3))
    assert [a.allocation_key for a in pending.in_order()] == ["z", "y", "x"]


def test_pending_asks_remove_keeps_the_rest_in_order() -> None:
    pending = PendingAsks()
    asks = {k: make_ask(k, priority=p) for k, p in [("a", 1), ("b", 1), ("c", 1), ("d", 2)]}
    for ask in asks.values():
        pending.add(ask)
    pending.remove(asks["b"])
    assert [a.allocation_key for a in pending] == ["d", "a", "c"]
    pending.remove(asks["d"])  # the last ask of its priority
    assert [a.allocation_key for a in pending.in_order()] == ["a", "c"]
    assert len(pending) == 2


def test_pending_asks_count_the_asks_that_may_preempt_others() -> None:
    """What a preemption round reads to pass over an application without a walk of its
    asks: added one at a time or in a batch, put back late, removed."""
    pending = PendingAsks()

    def ask(key: str, seq: int, *, may: bool) -> Ask:
        made = make_ask(key, seq=seq)
        made.allow_preempt_other = may
        return made

    first = [ask("a", 1, may=False), ask("b", 2, may=True), ask("c", 3, may=True)]
    pending.extend(first)
    assert pending.preempting == 2
    pending.add(ask("d", 4, may=False))
    late = ask("e", 0, may=True)  # older than the group's newest: put back in its place
    pending.add(late)
    assert [a.allocation_key for a in pending] == ["e", "a", "b", "c", "d"]
    assert pending.preempting == 3
    pending.remove(first[1])
    pending.remove(first[0])
    assert pending.preempting == 2
    pending.remove(first[2])
    pending.remove(late)
    assert pending.preempting == 0
    assert len(pending) == 1


def test_a_leaf_counts_the_asks_of_its_applications_that_may_preempt_others() -> None:
    root = make_queue("root", leaf=False)
    leaf = make_queue("a", root)
    app = make_app()
    may = make_ask("may", seq=1)
    may.allow_preempt_other = True
    add_asks(app, may, make_ask("not", seq=2))
    leaf.add_application(app)  # the application's asks come with it
    assert (app.pending_asks.preempting, leaf.shapes.preempting) == (1, 1)
    later = make_ask("later", seq=3)
    later.allow_preempt_other = True
    add_asks(app, later)
    assert leaf.shapes.preempting == 2
    app.remove_ask("may")
    assert (app.pending_asks.preempting, leaf.shapes.preempting) == (1, 1)
    leaf.remove_application(app)
    assert (app.pending_asks.preempting, leaf.shapes.preempting) == (1, 0)


def test_pending_asks_stay_in_order_while_placed_from_the_front() -> None:
    """A large bucket drained from the front (as a pass places its asks), with new asks
    arriving and placed ones coming back pending, keeps priority and age order throughout
    (the bucket is compacted along the way)."""
    pending = PendingAsks()
    model: list[str] = []  # keys in expected order (one priority)
    asks: dict[str, Ask] = {}
    for i in range(500):
        asks[f"k{i:04}"] = make_ask(f"k{i:04}", priority=1)
        pending.add(asks[f"k{i:04}"])
        model.append(f"k{i:04}")
    arrivals = 500
    for step in range(1_200):
        if step % 7 == 6:  # a new ask arrives at the back
            key = f"k{arrivals:04}"
            arrivals += 1
            asks[key] = make_ask(key, priority=1)
            pending.add(asks[key])
            model.append(key)
        elif model:  # the oldest is placed
            pending.remove(asks[model.pop(0)])
        if step % 97 == 0:
            assert [a.allocation_key for a in pending.in_order()] == model
    assert [a.allocation_key for a in pending.in_order()] == model
    assert len(pending) == len(model)


def test_pending_asks_keep_order_under_random_adds_and_removes() -> None:
    """Thousands of asks over a few priorities, added and removed anywhere (chunks that
    empty in the middle, at the back, and come again), always in the order of a plain
    list model."""
    rng = random.Random(7)
    pending = PendingAsks()
    model: dict[int, list[Ask]] = {}  # priority -> asks in arrival order
    live: list[Ask] = []
    for step in range(6_000):
        if live and rng.random() < 0.45:
            ask = live.pop(rng.randrange(len(live)) if rng.random() < 0.5 else 0)
            was_last = len(model[ask.priority]) == 1
            assert pending.remove(ask) is was_last
            model[ask.priority].remove(ask)
            if was_last:
                del model[ask.priority]
        else:
            ask = make_ask(f"k{step}", priority=rng.choice([0, 0, 0, 1, 5]))
            assert pending.add(ask) is (ask.priority not in model)
            model.setdefault(ask.priority, []).append(ask)
            live.append(ask)
        if step % 251 == 0 or step > 5_900:
            expected = [a for p in sorted(model, reverse=True) for a in model[p]]
            assert list(pending.in_order()) == expected
            assert len(pending) == len(expected) and bool(pending) is bool(expected)


def test_pending_asks_drained_in_the_middle_and_at_the_back() -> None:
    """Whole runs of asks go from the middle and from the back (as when the RM withdraws
    them), new ones come after: the order holds and nothing is lost."""
    pending = PendingAsks()
    asks = [make_ask(f"k{i:04}", priority=2) for i in range(1_000)]
    for ask in asks:
        pending.add(ask)
    for ask in asks[200:700]:
        pending.remove(ask)
    for ask in asks[760:]:
        pending.remove(ask)
    more = [make_ask(f"m{i:04}", priority=2) for i in range(300)]
    for ask in more:
        pending.add(ask)
    expected = asks[:200] + asks[700:760] + more
    assert list(pending.in_order()) == expected and len(pending) == len(expected)
    for ask in expected[:-1]:
        assert pending.remove(ask) is False
    assert list(pending) == [more[-1]]
    assert pending.remove(more[-1]) is True and not pending


def test_pending_asks_remove_the_ask_they_hold_not_another_of_its_key() -> None:
    pending = PendingAsks()
    a = make_ask("a")
    pending.add(a)
    pending.add(make_ask("b"))
    with pytest.raises(KeyError):
        pending.remove(make_ask("a"))  # another object with the same key: not held here
    pending.remove(a)
    assert [x.allocation_key for x in pending] == ["b"]


def test_pending_asks_group_by_shape_and_merge_in_age_order() -> None:
    """Asks of several shapes at one priority are grouped by shape, and walked in age
    order across the groups; the asks the pass looks at one by one are a group of their
    own. A group goes when its last ask does."""
    pending = PendingAsks()
    asks = [make_ask(f"k{i}", memory=10 * (1 + i % 3), seq=i) for i in range(9)]
    bound = make_ask("bound", seq=9)
    bound.required_node = "node-1"
    for ask in [*asks, bound]:
        pending.add(ask)
    assert list(pending.in_order()) == [*asks, bound]
    (level,) = pending.levels
    assert {size: len(g) for size, g in level.items()} == {
        (("memory", 10),): 3,
        (("memory", 20),): 3,
        (("memory", 30),): 3,
        None: 1,
    }
    for ask in asks[1::3]:
        pending.remove(ask)
    assert (("memory", 20),) not in pending.levels[0]
    assert list(pending) == [a for a in asks if a not in asks[1::3]] + [bound]


def test_pending_asks_put_a_late_older_ask_in_its_place() -> None:
    """An ask that comes back pending (a replacement fell through) goes back to its place
    by age, as YuniKorn sorts asks by priority and then creation time."""
    pending = PendingAsks()
    asks = [make_ask(f"k{i}", seq=i) for i in range(5)]
    for ask in asks:
        pending.add(ask)
    pending.remove(asks[1])
    pending.add(asks[1])
    assert list(pending.in_order()) == asks


def test_pending_asks_remove_of_unknown_ask_raises() -> None:
    pending = PendingAsks()
    pending.add(make_ask("a", priority=1))
    with pytest.raises(KeyError):
        pending.remove(make_ask("b", priority=1))
    with pytest.raises(KeyError):
        pending.remove(make_ask("a", priority=2))
    assert len(pending) == 1


def test_empty_pending_asks_is_false() -> None:
    pending = PendingAsks()
    assert not pending and len(pending) == 0 and list(pending) == []
    ask = make_ask("a")
    pending.add(ask)
    assert pending
    pending.remove(ask)
    assert not pending and list(pending.in_order()) == []


def test_pending_asks_report_when_their_highest_priority_may_move() -> None:
    pending = PendingAsks()
    assert pending.highest() == -(2**31)  # none: YuniKorn's minimum priority
    low, high, high2 = (
        make_ask("l", priority=1),
        make_ask("h", priority=7),
        make_ask("h2", priority=7),
    )
    assert pending.add(low) is True  # a new level
    assert pending.add(high) is True
    assert pending.add(high2) is False  # the level exists
    assert pending.highest() == 7
    assert pending.remove(high) is False
    assert pending.remove(high2) is True  # the last of its level
    assert pending.highest() == 1


def test_pending_asks_priority_added_later_sorts_in() -> None:
    pending = PendingAsks()
    pending.add(make_ask("low", priority=1))
    pending.add(make_ask("high", priority=9))
    pending.add(make_ask("mid", priority=5))
    assert [a.allocation_key for a in pending] == ["high", "mid", "low"]


# ================================================================ Application accounting
def test_add_ask_reports_and_applies_pending() -> None:
    app = make_app()
    delta = add_asks(app, make_ask("a", memory=10, count=3), make_ask("b", memory=5))
    assert delta == {"memory": 35}
    assert app.pending == {"memory": 35}
    assert [a.allocation_key for a in app.pending_asks] == ["a", "b"]
    assert not app.is_idle


def _intake(app: Application) -> object:
    return (
        list(app.asks.items()),
        list(app.pending_asks),
        app.pending,
        app.priority,
        app.placeholders_wanted,
        {name: g.count for name, g in app.task_groups.items()},
    )


@given(
    st.lists(
        st.tuples(
            st.sampled_from("abcde"),  # keys repeat: replacements, in one batch too
            st.integers(0, 3),  # max allocations (0: nothing pending)
            st.sampled_from([0, 0, 5, -1]),  # priority
            st.booleans(),  # placeholder
            st.integers(1, 3),  # memory
        ),
        max_size=12,
    ),
    st.integers(0, 12),
)
def test_add_asks_is_add_ask_one_by_one(
    spec: list[tuple[str, int, int, bool, int]], split: int
) -> None:
    """The batch intake ends where numbering, stamping and adding each ask in turn ends,
    whatever the mix."""
    state = []
    for batch in (False, True):
        app = make_app()
        asks = [
            Ask(
                allocation_key=key,
                application_id="app-1",
                resource={"memory": memory},
                max_allocations=count,
                priority=priority,
                placeholder=placeholder,
                task_group_name="tg" if placeholder else "",
                seq=n,
            )
            for n, (key, count, priority, placeholder, memory) in enumerate(spec)
        ]
        deltas = []
        for part in (asks[:split], asks[split:]):  # the second part meets the first's asks
            delta: Res = {}
            seq = part[0].seq if part else 0
            if batch:
                app.add_asks(part, delta, seq=seq, now=5.0)
            else:
                for n, ask in enumerate(part):
                    ask.seq, ask.created, ask.pending = seq + n, 5.0, ask.max_allocations
                    app.add_ask(ask, delta)
            app.apply_pending(delta)
            deltas.append({k: v for k, v in delta.items() if v})
        state.append((_intake(app), deltas))
    assert state[0] == state[1]


def test_add_ask_with_the_same_key_replaces_it() -> None:
    app = make_app()
    add_asks(app, make_ask("a", memory=10, count=3))
    new = make_ask("a", memory=20, count=1)
    delta = add_asks(app, new)
    assert delta == {"memory": -10}  # -30 for the old ask, +20 for the new one
    assert app.pending == {"memory": 20}
    assert app.asks["a"] is new
    assert list(app.pending_asks) == [new]


def test_replacing_an_ask_with_a_zero_count_drops_its_pending() -> None:
    app = make_app()
    add_asks(app, make_ask("a", memory=10, count=2))
    done = make_ask("a", memory=10)
    done.pending = 0
    add_asks(app, done)
    assert app.pending == {}
    assert not app.pending_asks
    assert app.asks["a"] is done


def test_replacing_a_fully_allocated_ask_counts_only_the_new_one() -> None:
    app = make_app()
    old = make_ask("a", memory=10)
    add_asks(app, old)
    app.allocate_from(old, make_alloc(memory=10))
    assert app.pending == {}
    delta = add_asks(app, make_ask("a", memory=7, count=2))
    assert delta == {"memory": 14}
    assert app.pending == {"memory": 14}


def test_remove_ask_returns_negative_delta_and_applies_it() -> None:
    app = make_app()
    add_asks(app, make_ask("a", memory=10, count=3), make_ask("b", memory=5))
    delta = app.remove_ask("a")
    assert delta == {"memory": -30}
    assert app.pending == {"memory": 5}
    assert "a" not in app.asks
    assert [a.allocation_key for a in app.pending_asks] == ["b"]


def test_remove_unknown_ask_changes_nothing() -> None:
    app = make_app()
    add_asks(app, make_ask("a", memory=10))
    assert app.remove_ask("nope") == {}
    assert app.pending == {"memory": 10}


def test_allocate_from_moves_pending_to_allocated() -> None:
    app = make_app()
    ask = make_ask("a", memory=10, count=2)
    add_asks(app, ask)
    first = make_alloc(memory=10)
    app.allocate_from(ask, first)
    assert ask.pending == 1
    assert app.pending == {"memory": 10}
    assert app.allocated == {"memory": 10}
    assert list(app.pending_asks) == [ask]
    app.allocate_from(ask, make_alloc(memory=10))
    assert ask.pending == 0
    assert app.pending == {}  # no zero entries left behind
    assert app.allocated == {"memory": 20}
    assert not app.pending_asks
    assert app.allocations[first.uuid] is first
    assert len(app.allocations) == 2


def test_remove_allocation_gives_back_allocated_but_keeps_the_peak() -> None:
    app = make_app()
    ask = make_ask("a", memory=10, count=2)
    add_asks(app, ask)
    allocs = [make_alloc(memory=10), make_alloc(memory=10)]
    for alloc in allocs:
        app.allocate_from(ask, alloc)
    assert app.remove_allocation(allocs[0].uuid) is allocs[0]
    assert app.allocated == {"memory": 10}
    assert app.max_allocated == {"memory": 20}
    assert app.remove_allocation(allocs[0].uuid) is None  # twice is a no-op
    assert app.allocated == {"memory": 10}
    app.remove_allocation(allocs[1].uuid)
    assert app.allocated == {}
    assert app.is_idle


# ============================================================================ Queue headroom
def test_parent_max_limits_a_leaf_without_one() -> None:
    root = make_queue("root", leaf=False)
    parent = make_queue("parent", root, leaf=False, max_resources={"memory": 100})
    leaf = make_queue("leaf", parent)
    leaf.add_allocated({"memory": 80})
    assert parent.allocated == {"memory": 80} and root.allocated == {"memory": 80}
    assert leaf.headroom_fits({"memory": 20})
    assert not leaf.headroom_fits({"memory": 21})
    assert leaf.blocking_queue({"memory": 21}) is parent
    assert leaf.blocking_queue({"memory": 20}) is None


def test_sibling_usage_counts_against_the_parent_max() -> None:
    root = make_queue("root", leaf=False)
    parent = make_queue("parent", root, leaf=False, max_resources={"memory": 100})
    a = make_queue("a", parent)
    b = make_queue("b", parent)
    a.add_allocated({"memory": 60})
    assert b.headroom_fits({"memory": 40})
    assert not b.headroom_fits({"memory": 41})
    a.remove_allocated({"memory": 60})
    assert b.headroom_fits({"memory": 100})


def test_leaf_max_tighter_than_parent_blocks_at_the_leaf() -> None:
    root = make_queue("root", leaf=False)
    parent = make_queue("parent", root, leaf=False, max_resources={"memory": 100})
    leaf = make_queue("leaf", parent, max_resources={"memory": 30})
    assert leaf.headroom_fits({"memory": 30})
    assert leaf.blocking_queue({"memory": 31}) is leaf


def test_names_missing_from_max_are_unlimited() -> None:
    root = make_queue("root", leaf=False)
    leaf = make_queue("leaf", root, max_resources={"memory": 100})
    leaf.add_allocated({"vcore": 10**9})
    assert leaf.headroom_fits({"vcore": 10**9, "gpu": 8, "memory": 100})
    assert not leaf.headroom_fits({"vcore": 1, "memory": 101})


def test_max_set_on_a_parent_later_applies_to_existing_children() -> None:
    root = make_queue("root", leaf=False)
    parent = make_queue("parent", root, leaf=False)
    leaf = make_queue("leaf", parent)
    assert leaf.headroom_fits({"memory": 10**6})
    parent.configure(max_resources={"memory": 10}, guaranteed={}, properties={})
    assert not leaf.headroom_fits({"memory": 11})
    parent.configure(max_resources={}, guaranteed={}, properties={})
    assert leaf.headroom_fits({"memory": 11})


def test_allocate_moves_pending_to_allocated_up_the_chain() -> None:
    root = make_queue("root", leaf=False)
    parent = make_queue("parent", root, leaf=False)
    leaf = make_queue("leaf", parent)
    leaf.add_pending({"memory": 30, "vcore": 3})
    leaf.allocate({"memory": 10, "vcore": 1})
    for queue in (leaf, parent, root):
        assert queue.pending == {"memory": 20, "vcore": 2}
        assert queue.allocated == {"memory": 10, "vcore": 1}
    leaf.add_pending({"memory": -20, "vcore": -2})
    assert root.pending == {} and not root.has_pending()


# ============================================================================ Queue ordering
def _parent_with(*children: tuple[str, Res, Res, Res]) -> tuple[Queue, dict[str, Queue]]:
    """children: (name, guaranteed, allocated, pending)."""
    root = make_queue("root", leaf=False)
    out = {}
    for name, guaranteed, allocated, pending in children:
        q = make_queue(name, root, guaranteed=guaranteed)
        if allocated:
            q.add_allocated(allocated)
        if pending:
            q.add_pending(pending)
        out[name] = q
    return root, out


def names(queues: list[Queue]) -> list[str]:
    return [q.name for q in queues]


def test_sorted_children_least_used_relative_to_guarantee_first() -> None:
    root, _ = _parent_with(
        ("half", {"memory": 100}, {"memory": 50}, {"memory": 1}),
        ("tenth", {"memory": 1000}, {"memory": 100}, {"memory": 1}),
        ("unused", {"memory": 10}, {}, {"memory": 1}),
    )
    assert names(root.sorted_children()) == ["unused", "tenth", "half"]


def test_sorted_children_skips_children_without_pending() -> None:
    root, _ = _parent_with(
        ("idle", {"memory": 100}, {}, {}),
        ("busy", {"memory": 100}, {"memory": 90}, {"memory": 1}),
    )
    assert names(root.sorted_children()) == ["busy"]


def test_sorted_children_without_guarantee_sort_behind_ones_within_it() -> None:
    root, _ = _parent_with(
        ("noguar", {}, {"memory": 2}, {"memory": 1}),
        ("guar", {"memory": 100}, {"memory": 90}, {"memory": 1}),
    )
    assert names(root.sorted_children()) == ["guar", "noguar"]


def test_sorted_children_resort_after_usage_changes() -> None:
    root, qs = _parent_with(
        ("a", {"memory": 100}, {"memory": 10}, {"memory": 1}),
        ("b", {"memory": 100}, {"memory": 20}, {"memory": 1}),
    )
    assert names(root.sorted_children()) == ["a", "b"]
    qs["a"].add_allocated({"memory": 50})
    assert names(root.sorted_children()) == ["b", "a"]
    qs["b"].remove_allocated({"memory": 20})
    qs["b"].add_allocated({"memory": 80})
    assert names(root.sorted_children()) == ["a", "b"]


def test_sorted_children_tie_more_pending_first_then_name() -> None:
    root, _ = _parent_with(
        ("c", {"memory": 100}, {}, {"memory": 5}),
        ("b", {"memory": 100}, {}, {"memory": 9}),
        ("a", {"memory": 100}, {}, {"memory": 5}),
    )
    assert names(root.sorted_children()) == ["b", "a", "c"]


def test_sorted_children_follow_a_removed_queue_and_its_namesake() -> None:
    root, qs = _parent_with(
        ("a", {"memory": 100}, {}, {"memory": 1}),
        ("b", {"memory": 100}, {"memory": 10}, {"memory": 1}),
    )
    assert names(root.sorted_children()) == ["a", "b"]
    qs["a"].add_pending({"memory": -1})  # a has nothing left: removable, gone before a walk
    assert qs["a"].removable() is False  # managed and active: it stays
    qs["a"].status = QueueStatus.DRAINING
    qs["a"].detach()
    again = make_queue("a", root, guaranteed={"memory": 100})
    again.add_pending({"memory": 1})
    assert root.sorted_children() == [again, qs["b"]]
    qs["b"].status = QueueStatus.STOPPED  # a stopped queue is skipped
    assert root.sorted_children() == [again]
    qs["b"].status = QueueStatus.ACTIVE
    assert root.sorted_children() == [again, qs["b"]]


def test_sorted_children_follow_a_reconfigured_guarantee() -> None:
    root, qs = _parent_with(
        ("a", {"memory": 100}, {"memory": 20}, {"memory": 1}),
        ("b", {"memory": 100}, {"memory": 10}, {"memory": 1}),
    )
    assert names(root.sorted_children()) == ["b", "a"]
    qs["a"].configure(max_resources={}, guaranteed={"memory": 1000}, properties={})
    assert names(root.sorted_children()) == ["a", "b"]
    # the parent's own configuration keys every child again (its order may change)
    root.configure(max_resources={}, guaranteed={}, properties={})
    assert names(root.sorted_children()) == ["a", "b"]


def _leaf_with_apps(policy: str, guaranteed: Res | None = None) -> tuple[Queue, list[Application]]:
    root = make_queue("root", leaf=False)
    props = {"application.sort.policy": policy} if policy else {}
    leaf = make_queue("leaf", root, properties=props, guaranteed=guaranteed)
    apps = []
    for seq, allocated in enumerate([50, 10, 30], start=1):
        app = make_app(f"app-{seq}", seq=seq)
        add_asks(app, make_ask("k", app_id=app.application_id))
        app.add_allocation(make_alloc(app.application_id, memory=allocated))
        leaf.add_application(app)
        apps.append(app)
    return leaf, apps


def app_ids(apps: object) -> list[str]:
    return [a.application_id for a in apps]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("", ["app-1", "app-2", "app-3"]),  # fifo is the default
        ("fifo", ["app-1", "app-2", "app-3"]),
        ("unknown", ["app-1", "app-2", "app-3"]),  # an unknown policy is fifo
        ("fair", ["app-2", "app-3", "app-1"]),  # least allocated first
    ],
)
def test_sorted_applications_by_policy(policy: str, expected: list[str]) -> None:
    leaf, _ = _leaf_with_apps(policy, guaranteed={"memory": 100})
    assert app_ids(leaf.sorted_applications()) == expected


def test_sort_policy_is_inherited_from_a_parent() -> None:
    root = make_queue("root", leaf=False, properties={"application.sort.policy": "fair"})
    leaf = make_queue("leaf", root)
    assert leaf.sort_policy == "fair"


def test_fair_ties_are_broken_by_submission_order() -> None:
    leaf, apps = _leaf_with_apps("fair")
    for app in apps:
        app.remove_allocation(next(iter(app.allocations)))
    assert app_ids(leaf.sorted_applications()) == ["app-1", "app-2", "app-3"]


@pytest.mark.parametrize("policy", ["fifo", "fair"])
def test_sorted_applications_skip_apps_without_pending_asks(policy: str) -> None:
    leaf, apps = _leaf_with_apps(policy)
    apps[1].remove_ask("k")
    assert "app-2" not in app_ids(leaf.sorted_applications())
    assert len(app_ids(leaf.sorted_applications())) == 2


def test_an_application_is_walked_only_while_it_has_pending_asks() -> None:
    leaf, (first, second, third) = _leaf_with_apps("fifo")
    first.remove_ask("k")
    assert app_ids(leaf.sorted_applications()) == ["app-2", "app-3"]
    assert list(leaf.pending_apps.values()) == [second, third]
    add_asks(first, make_ask("again", app_id="app-1"))
    assert app_ids(leaf.sorted_applications()) == ["app-1", "app-2", "app-3"]  # back in place
    leaf.remove_application(second)
    assert app_ids(leaf.sorted_applications()) == ["app-1", "app-3"]


# ============================================================================ Outbox
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


def _reference_order(policy: str, nodes: list[Node]) -> list[str]:
    """Policy order by brute force: the score as the policy defines it, then the node id."""

    def score(node: Node) -> float:
        used = sum(node.allocated.get(n, 0) / node.capacity[n] for n in ("memory", "vcore")) / 2
        return 1.0 - used if policy == "binpacking" else used

    return [n.node_id for n in sorted(nodes, key=lambda n: (score(n), n.node_id))]


@pytest.mark.parametrize("policy", ["fair", "binpacking"])
@given(
    ops=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 30), st.integers(0, 9)), max_size=60)
)
def test_node_index_matches_a_brute_force_order(
    policy: str, ops: list[tuple[int, int, int]]
) -> None:
    """Nodes added in any id order (some after the index was used), removed, added again,
    filled past their capacity and emptied: the index keeps (score, node id) order, and
    first_fit takes the first node of it with room."""
    index = NodeIndex(policy)
    live: dict[str, Node] = {}
    for op, n, amount in ops:
        node_id = f"n{n:02d}"
        node = live.get(node_id)
        if op == 0 and node is None:
            live[node_id] = node = make_node(node_id)
            index.add(node)
        elif op == 1 and node is not None:
            index.discard(live.pop(node_id))
        elif op == 2 and node is not None:  # may go past capacity: binpacking scores < 0
            node.add_allocation(make_alloc(node_id=node_id, memory=amount * 15, vcore=amount))
            index.update(node)
        elif op == 3 and node is not None and node.allocations:
            node.remove_allocation(next(iter(node.allocations)))
            index.update(node)
        elif op == 3:
            index.first_fit(size({"memory": amount}))
    expected = _reference_order(policy, list(live.values()))
    assert order(index) == expected
    fitting = [i for i in expected if live[i].available.get("memory", 0) >= 5]
    chosen = index.first_fit(size({"memory": 5}))
    assert (chosen.node_id if chosen else None) == (fitting[0] if fitting else None)


@pytest.mark.parametrize("policy", ["fair", "binpacking"])
@given(
    ops=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 12), st.integers(0, 9)), max_size=80)
)
def test_first_fit_remembers_sizes_without_room_and_finds_what_frees_up(
    policy: str, ops: list[tuple[int, int, int]]
) -> None:
    """A size that no node had room for is remembered, and only the nodes that may have
    gained room since are looked at for it. After any run of nodes added (in any id order),
    removed and added again, allocations made and released, and capacities changed,
    first_fit gives the node that the walk of the whole heap gives (the lowest key among the
    nodes with room), for every size."""
    index = NodeIndex(policy)
    live: dict[str, Node] = {}
    sizes = [
        size({"memory": m, "vcore": v})
        for m, v in ((10, 1), (40, 2), (60, 8), (90, 3), (100, 10), (200, 1))
    ]
    for op, n, amount in ops:
        node_id = f"n{n:02d}"
        node = live.get(node_id)
        if op == 0 and node is None:
            live[node_id] = node = make_node(node_id)
            index.add(node)
        elif op == 1 and node is not None:
            index.discard(live.pop(node_id))
        elif op == 2 and node is not None:
            node.add_allocation(make_alloc(node_id=node_id, memory=amount * 10, vcore=amount))
            index.update(node)
        elif op == 3 and node is not None and node.allocations:
            node.remove_allocation(next(iter(node.allocations)))
            index.update(node)
        elif op == 4 and node is not None:
            node.capacity = {"memory": 50 + amount * 20, "vcore": 5 + amount}
            node.refresh_available()
            index.refresh(node)
        for s in sizes:
            got = index.first_fit(s)
            assert got is _lowest_key_with_room(index, s), (s, ops)


def _lowest_key_with_room(index: NodeIndex, wanted: tuple[tuple[str, int], ...]) -> Node | None:
    """What the walk of the heap gives: of the indexed nodes with room, the lowest key."""
    fitting = [
        n
        for n in index.nodes()
        if n.index_key is not None and all(v <= n.available.get(k, 0) for k, v in wanted)
    ]
    return min(fitting, key=lambda n: n.index_key or 0, default=None)


def test_a_full_cluster_answers_no_room_from_memory_and_finds_a_freed_node() -> None:
    """The backlog's case: every node full; a size is refused without a walk of the nodes
    the second time, and a release makes exactly the freed node the answer."""
    nodes = [make_node(f"n{i:02d}", used_memory=100, used_vcore=10) for i in range(20)]
    index = index_of("fair", *nodes)
    wanted = size({"memory": 30, "vcore": 3})
    assert index.first_fit(wanted) is None
    assert index.first_fit(wanted) is None  # from memory: nothing changed since
    freed = nodes[7]
    freed.remove_allocation(next(iter(freed.allocations)))
    index.update(freed)
    assert index.first_fit(wanted) is freed
    freed.add_allocation(make_alloc(node_id="n07", memory=100, vcore=10))  # full again
    index.update(freed)
    assert index.first_fit(wanted) is None
