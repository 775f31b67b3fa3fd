"""Preemption storms that do not happen: YuniKorn's design (``docs/design/preemption.md``,
"Preemption Loop Prevention") with ReplicaSet-like RMs that resubmit every pod preempted,
and the sibling set-ups of YUNIKORN-2761 and -2795. Each converges: the number of
preemptions stops growing, and no queue ends below its guarantee while another that could
give it room is above its own."""

from __future__ import annotations

from itertools import count

import pytest

from scheduler import si

from ..conftest import Driver, app, ask, node
from .test_preemption import MAY_PREEMPT, PREEMPTED, config, confirm, used

pytestmark = pytest.mark.asyncio


class ReplicaSets:
    """An RM with a ReplicaSet per application: every pod preempted is confirmed at once
    and created again (a new ask in the same application, that may preempt too)."""

    def __init__(self, d: Driver) -> None:
        self.d = d
        self.handled: set[str] = set()
        self.numbers = count()

    def pods(self, app_id: str, n: int, memory: int = 10) -> list[si.AllocationAsk]:
        return [self.pod(app_id, memory) for _ in range(n)]

    def pod(self, app_id: str, memory: int = 10) -> si.AllocationAsk:
        return ask(
            f"{app_id}-{next(self.numbers)}",
            app_id,
            memory=memory,
            vcore=0,
            preemption_policy=MAY_PREEMPT,
        )

    def preemptions(self) -> int:
        return sum(1 for r in self.d.rm.released if r.termination_type == PREEMPTED)

    async def run(self, seconds: float = 600, step: float = 10) -> list[int]:
        """Let time pass, answering the core as a ReplicaSet controller would; the number
        of preemptions after each step."""
        d = self.d
        seen: list[int] = []
        elapsed = 0.0
        await d.settle()
        while elapsed < seconds:
            await d.clock.advance(step)
            elapsed += step
            await d.settle()
            fresh = [
                r
                for r in d.rm.released
                if r.termination_type == PREEMPTED and r.uuid not in self.handled
            ]
            if fresh:
                self.handled.update(r.uuid for r in fresh)
                await confirm(d, fresh)
                await d.asks(*(self.pod(r.application_id) for r in fresh))
                await d.settle()
            seen.append(self.preemptions())
        return seen


SIBLINGS = config(
    """          - name: parent
            queues:
              - name: prod
                resources: {guaranteed: {memory: 50}}
              - name: test
                resources: {guaranteed: {memory: GUARANTEE}}
"""
)


async def siblings(d: Driver, test_guarantee: int) -> ReplicaSets:
    await d.register(SIBLINGS.replace("GUARANTEE", str(test_guarantee)))
    await d.nodes(node("n1", memory=50, vcore=100), node("n2", memory=50, vcore=100))
    rs = ReplicaSets(d)
    await d.apps(app("test-repl", "root.parent.test"), app("prod-repl", "root.parent.prod"))
    await d.asks(*rs.pods("test-repl", 10))
    await d.settle()
    assert len(d.allocs("test-repl")) == 10  # the cluster is full
    return rs


def settled(counts: list[int]) -> bool:
    """The count of preemptions stopped growing: the second half of the run added none."""
    return counts[len(counts) // 2] == counts[-1]


async def test_flow_cases_1_and_3_prod_takes_its_guarantee_and_test_never_takes_it_back(
    driver: Driver,
) -> None:
    """Prod below its guarantee with pods pending, Test above its own: Test pods are
    preempted (and recreated) until Prod has its guarantee (case 3: while Prod is still
    below it, it goes on); the recreated Test pods never preempt Prod (case 1)."""
    d = driver
    rs = await siblings(d, test_guarantee=30)
    await d.asks(*rs.pods("prod-repl", 8))
    counts = await rs.run()
    assert settled(counts)
    assert counts[-1] == 5
    assert await used(d, "root.parent.prod") == 50  # its guarantee
    assert await used(d, "root.parent.test") == 50  # still above its 30
    assert {r.application_id for r in d.rm.released if r.termination_type == PREEMPTED} == {
        "test-repl"
    }


async def test_flow_case_2_a_queue_that_would_go_below_its_guarantee_keeps_its_pods(
    driver: Driver,
) -> None:
    d = driver
    rs = await siblings(d, test_guarantee=95)
    await d.asks(*rs.pods("prod-repl", 3))
    counts = await rs.run(seconds=300)
    assert counts[-1] == 0
    assert await used(d, "root.parent.test") == 100


async def test_two_starved_siblings_with_resubmission_share_the_cluster_and_stop(
    driver: Driver,
) -> None:
    """Three queues with guarantees that add up to the cluster, all greedy: every queue
    ends at its guarantee and the preemptions stop, whatever each resubmits."""
    d = driver
    await d.register(
        config(
            """          - name: a
            resources: {guaranteed: {memory: 20}}
          - name: b
            resources: {guaranteed: {memory: 30}}
          - name: c
            resources: {guaranteed: {memory: 50}}
"""
        )
    )
    await d.nodes(*(node(f"n{i}", memory=20, vcore=100) for i in range(5)))
    rs = ReplicaSets(d)
    await d.apps(app("a", "root.a"), app("b", "root.b"), app("c", "root.c"))
    await d.asks(*rs.pods("c", 10))
    await d.settle()
    await d.asks(*rs.pods("a", 5), *rs.pods("b", 5))
    counts = await rs.run(seconds=900)
    assert settled(counts)
    assert [await used(d, q) for q in ("root.a", "root.b", "root.c")] == [20, 30, 50]


async def test_a_parent_guarantee_alone_starts_no_storm_between_its_children(
    driver: Driver,
) -> None:
    """YUNIKORN-2795's shape: the guarantee is on the parent only, the children compete
    and resubmit; moving pods between them would help no guarantee, so none moves."""
    d = driver
    await d.register(
        config(
            """          - name: parent
            resources: {guaranteed: {memory: 100}}
            queues:
              - name: x
              - name: y
"""
        )
    )
    await d.nodes(node("n1", memory=100, vcore=100))
    rs = ReplicaSets(d)
    await d.apps(app("x", "root.parent.x"), app("y", "root.parent.y"))
    await d.asks(*rs.pods("x", 10))
    await d.settle()
    await d.asks(*rs.pods("y", 5))
    counts = await rs.run(seconds=300)
    assert counts[-1] == 0
