"""The order queues are tried in, through the public API (YuniKorn v1.2).

YuniKorn's ``objects/sorters.go`` ``sortQueue``: siblings with pending work, least used
relative to their guarantee first (``resources.CompUsageRatio``: the largest share decides);
priority first when priorities are in play. Ours breaks a tie of usage by more pending work,
then by name. These tests pin the order a user sees in the sequence of allocations: many
queues with guarantees stay balanced, a reloaded guarantee re-sorts at once, a queue that
gains work again rejoins at its place, a draining queue still schedules.
"""

from __future__ import annotations

import pytest

from scheduler import si

from ..conftest import RM, Driver, app, ask, node

pytestmark = pytest.mark.asyncio

ASK_MEMORY = 10
ASK_VCORE = 1


def tree(parents: dict[str, dict[str, int]], parent_guarantee: dict[str, int]) -> str:
    """``parents``: parent name -> {leaf name: guaranteed memory}; vcore in proportion
    (configured in cores, asked in millicores: memory decides every comparison)."""
    lines = [
        "partitions:",
        "  - name: default",
        "    queues:",
        "      - name: root",
        '        submitacl: "*"',
        "        queues:",
    ]
    for parent, leaves in parents.items():
        g = parent_guarantee[parent]
        lines += [
            f"          - name: {parent}",
            f"            resources: {{guaranteed: {{memory: {g}, vcore: {g // 10}}}}}",
            "            queues:",
        ]
        for leaf, mem in leaves.items():
            lines += [
                f"              - name: {leaf}",
                f"                resources: {{guaranteed: {{memory: {mem}, vcore: {mem // 10}}}}}",
            ]
    return "\n".join(lines) + "\n"


def expected_order(
    parents: dict[str, dict[str, int]],
    parent_guarantee: dict[str, int],
    pending: dict[str, int],
    count: int,
) -> list[str]:
    """The leaves the next ``count`` allocations go to, one ask each, by walking the tree as
    the order says: at each level the child with the lowest largest usage share, then the
    one with more pending work, then by name."""
    used = dict.fromkeys(pending, 0)
    left = dict(pending)

    def key(name: str, guar: int, n_used: int, n_left: int) -> tuple[float, int, str]:
        # the vcore share is the memory share / 1000: memory decides
        return (n_used * ASK_MEMORY / guar, -n_left, name)

    out: list[str] = []
    for _ in range(count):
        candidates = []
        for parent, leaves in parents.items():
            p_left = sum(left[leaf] for leaf in leaves)
            if p_left:
                p_used = sum(used[leaf] for leaf in leaves)
                candidates.append((key(parent, parent_guarantee[parent], p_used, p_left), parent))
        if not candidates:
            break
        parent = min(candidates)[1]
        leaf = min(
            (key(leaf, guar, used[leaf], left[leaf]), leaf)
            for leaf, guar in parents[parent].items()
            if left[leaf]
        )[1]
        used[leaf] += 1
        left[leaf] -= 1
        out.append(leaf)
    return out


def leaf_of(alloc: si.Allocation) -> str:
    return alloc.application_id.removeprefix("app-")


async def start(driver: Driver, config: str, pending: dict[str, int]) -> None:
    await driver.core.update_configuration(
        si.UpdateConfigurationRequest(rm_id=RM, policy_group="default", config=config)
    )
    await driver.settle()
    queue_of = {
        leaf: f"root.{parent}.{leaf}"
        for parent, leaves in _parents_in(config).items()
        for leaf in leaves
    }
    await driver.apps(*(app(f"app-{leaf}", queue=queue_of[leaf]) for leaf in pending))
    await driver.asks(
        *(ask(f"k-{leaf}", f"app-{leaf}", count=n) for leaf, n in pending.items() if n)
    )
    await driver.settle()


def _parents_in(config: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current = ""
    for line in config.splitlines():
        stripped = line.strip()
        if stripped.startswith("- name:"):
            indent = len(line) - len(line.lstrip())
            name = stripped.removeprefix("- name:").strip()
            if indent == 10:
                current = name
                out[current] = []
            elif indent == 14:
                out[current].append(name)
    return out


async def test_siblings_take_turns_by_usage_relative_to_guarantee(driver: Driver) -> None:
    parents = {"p1": {"x": 100, "y": 100}, "p2": {"z": 100}}
    guarantee = {"p1": 200, "p2": 100}
    await start(driver, tree(parents, guarantee), {"x": 20, "y": 20, "z": 20})
    await driver.nodes(node("n1", memory=9 * ASK_MEMORY, vcore=100))
    await driver.settle()
    # p1 (twice p2's guarantee) gets two of every three; its leaves alternate; ties go to
    # the queue with more pending work (p1 over p2), then by name (x over y)
    assert [leaf_of(a) for a in driver.allocs()] == ["x", "z", "y"] * 3


async def test_many_queues_with_guarantees_stay_balanced(driver: Driver) -> None:
    parents = {
        "pa": {"a1": 100, "a2": 200, "a3": 300, "a4": 100},
        "pb": {"b1": 400, "b2": 100, "b3": 100},
        "pc": {"c1": 200, "c2": 200, "c3": 100, "c4": 300},
    }
    guarantee = {"pa": 700, "pb": 600, "pc": 900}
    pending = {leaf: 12 for leaves in parents.values() for leaf in leaves}
    pending["b2"] = 3  # runs out early: its parent's other leaves take its share
    pending["c4"] = 0  # nothing to ask for: never tried
    await start(driver, tree(parents, guarantee), pending)
    count = 80
    await driver.nodes(node("n1", memory=count * ASK_MEMORY, vcore=1000))
    await driver.settle()
    got = [leaf_of(a) for a in driver.allocs()]
    assert got == expected_order(parents, guarantee, pending, count)
    assert "c4" not in got and got.count("b2") == 3


async def test_reloaded_guarantee_resorts_the_queue(driver: Driver) -> None:
    parents = {"p": {"a": 100, "b": 100}}
    await start(driver, tree(parents, {"p": 200}), {"a": 20, "b": 20})
    await driver.nodes(node("n1", memory=4 * ASK_MEMORY, vcore=100))
    await driver.settle()
    assert [leaf_of(a) for a in driver.allocs()] == ["a", "b", "a", "b"]
    # b's guarantee grows fourfold: b is now far below its share, a is at it
    config = tree({"p": {"a": 100, "b": 400}}, {"p": 500})
    await driver.core.update_configuration(
        si.UpdateConfigurationRequest(rm_id=RM, policy_group="default", config=config)
    )
    await driver.settle()
    await driver.nodes(node("n2", memory=7 * ASK_MEMORY, vcore=100))
    await driver.settle()
    # b catches up to a's share (0.2) after six more; on the tie a has more pending
    assert [leaf_of(a) for a in driver.allocs()][4:] == ["b"] * 6 + ["a"]


async def test_queue_that_gains_work_again_rejoins_at_its_place(driver: Driver) -> None:
    parents = {"p": {"a": 100, "b": 100, "c": 100}}
    await start(driver, tree(parents, {"p": 300}), {"a": 2, "b": 10, "c": 10})
    await driver.nodes(node("n1", memory=6 * ASK_MEMORY, vcore=100))
    await driver.settle()
    # a runs out after two allocations and drops out of the order
    assert [leaf_of(x) for x in driver.allocs()] == ["b", "c", "a", "b", "c", "a"]
    await driver.asks(ask("k-a-more", "app-a", count=5))
    await driver.settle()
    await driver.nodes(node("n2", memory=4 * ASK_MEMORY, vcore=100))
    await driver.settle()
    # all three are at 2: a ties on usage and has less pending: b, c, a, then b again
    assert [leaf_of(x) for x in driver.allocs()][6:] == ["b", "c", "a", "b"]


async def test_draining_queue_keeps_its_place_in_the_order(driver: Driver) -> None:
    parents = {"p": {"a": 100, "b": 100}}
    await start(driver, tree(parents, {"p": 200}), {"a": 10, "b": 10})
    await driver.nodes(node("n1", memory=2 * ASK_MEMORY, vcore=100))
    await driver.settle()
    assert [leaf_of(x) for x in driver.allocs()] == ["a", "b"]
    # a leaves the configuration: it drains, and still schedules what its application asks
    config = tree({"p": {"b": 100}}, {"p": 200})
    await driver.core.update_configuration(
        si.UpdateConfigurationRequest(rm_id=RM, policy_group="default", config=config)
    )
    await driver.settle()
    assert (await driver.core.get_queue("default", "root.p.a"))["status"] == "Draining"
    await driver.nodes(node("n2", memory=4 * ASK_MEMORY, vcore=100))
    await driver.settle()
    assert [leaf_of(x) for x in driver.allocs()][2:] == ["a", "b", "a", "b"]


async def test_priority_moves_a_nested_queue_ahead_and_back(driver: Driver) -> None:
    parents = {"p1": {"x": 100}, "p2": {"z": 100}}
    await start(driver, tree(parents, {"p1": 100, "p2": 100}), {"x": 10, "z": 10})
    await driver.nodes(node("n1", memory=2 * ASK_MEMORY, vcore=100))
    await driver.settle()
    assert [leaf_of(a) for a in driver.allocs()] == ["x", "z"]
    # z's application asks with a higher priority: p2 and z go first despite the tie
    await driver.asks(ask("k-z-high", "app-z", priority=5, count=2))
    await driver.settle()
    await driver.nodes(node("n2", memory=4 * ASK_MEMORY, vcore=100))
    await driver.settle()
    new = driver.allocs()[2:]
    assert [a.allocation_key for a in new] == ["k-z-high", "k-z-high", "k-x", "k-x"]
    # its priority placed, z is back at 0 and the fair order holds again: both at 3, z has
    # more pending (9 against 7); then x is less used; then the tie again
    await driver.nodes(node("n3", memory=3 * ASK_MEMORY, vcore=100))
    await driver.settle()
    assert [leaf_of(a) for a in driver.allocs()][6:] == ["z", "x", "z"]
