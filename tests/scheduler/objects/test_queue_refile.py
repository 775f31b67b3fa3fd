"""The kept order of a parent's children is the one a full sort by their keys gives."""

from __future__ import annotations

import random

import pytest

from scheduler.objects._queue import Queue, QueueStatus, _queue_order
from scheduler.objects._resources import shares

_NAMES = ("memory", "vcore", "gpu")


def _tree(children: int, guarantees: list[dict[str, int]]) -> tuple[Queue, list[Queue]]:
    root = Queue("root", leaf=False)
    parent = Queue("p", root, leaf=False)
    leaves = []
    for i in range(children):
        leaf = Queue(f"l{i:03d}", parent)
        leaf.configure(max_resources={}, guaranteed=guarantees[i % len(guarantees)], properties={})
        leaves.append(leaf)
    return parent, leaves


def _full_sort(parent: Queue) -> list[Queue]:
    children = [
        c
        for c in parent.children.values()
        if c.name in parent.pending_children and c.status is not QueueStatus.STOPPED
    ]
    return sorted(children, key=parent.child_key)


@pytest.mark.parametrize("children", [3, 40])  # found by identity, and by key
@pytest.mark.parametrize("seed", range(20))
def test_kept_order_matches_a_full_sort(children: int, seed: int) -> None:
    rng = random.Random(seed)
    print("seed", seed)
    guarantees = [_random_res(rng) for _ in range(rng.randint(1, 4))] + [{}]
    parent, leaves = _tree(children, guarantees)
    for _ in range(400):
        leaf = rng.choice(leaves)
        op = rng.choice(("pending", "pending", "allocate", "allocate", "release", "stop", "walk"))
        if op == "pending":
            leaf.add_pending(_random_res(rng))
        elif op == "allocate":
            have = {n: rng.randint(1, v) for n, v in leaf.pending.items() if rng.random() < 0.7}
            if have:
                leaf.allocate(have)
        elif op == "release":
            if leaf.allocated:
                leaf.remove_allocated(dict(leaf.allocated))
        elif op == "stop":
            stopped = leaf.status is QueueStatus.STOPPED
            leaf.status = QueueStatus.ACTIVE if stopped else QueueStatus.STOPPED
        else:
            assert parent.sorted_children() == _full_sort(parent)
    assert parent.sorted_children() == _full_sort(parent)


def _random_res(rng: random.Random) -> dict[str, int]:
    names = rng.sample(_NAMES, rng.randint(1, 3))
    return {name: rng.randint(1, 50) for name in names}


@pytest.mark.parametrize("seed", range(20))
def test_queue_key_matches_shares_and_sorted_pending(seed: int) -> None:
    # The key built without a sort for two resources is the one the general form gives.
    rng = random.Random(seed)
    print("seed", seed)
    root = Queue("root", leaf=False)
    for i in range(50):
        leaf = Queue(f"l{i}", root)
        guaranteed = _random_res(rng) if rng.random() < 0.8 else {}
        if rng.random() < 0.3:
            guaranteed = {n: 0 for n in guaranteed}  # a zero guarantee counts the raw quantity
        leaf.configure(max_resources={}, guaranteed=guaranteed, properties={})
        leaf.allocated = {n: rng.choice((0, 1, 7, 50)) for n in rng.sample(_NAMES, 2)}
        leaf.pending = {n: rng.choice((1, 7, 50)) for n in rng.sample(_NAMES, rng.randint(1, 3))}
        waiting = sorted(-v for v in leaf.pending.values())
        expected = (shares(leaf.allocated, leaf.guaranteed), waiting, leaf.name)
        assert _queue_order(leaf) == expected
