"""Outstanding requests for autoscalers, through the public API.

Asks that fit their queue's headroom but no node reach the RM's
``update_container_scheduling_state`` as ``FAILED`` (more nodes would help), asks held by
their queue's quota as ``SKIPPED``; each ask again only when its state changed. The
inspection runs on the core's clock, at most once per ``Timeouts.outstanding`` (1 s).
"""

from __future__ import annotations

from typing import Any

import pytest

import scheduler
from scheduler import si
from scheduler.testing import ManualClock, RecordingCallback

from ..conftest import RM, Driver, app, ask, node

pytestmark = pytest.mark.asyncio

FAILED = si.SchedulingState.FAILED
SKIPPED = si.SchedulingState.SKIPPED

CONFIG = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: a
            resources:
              max: {memory: 1000, vcore: 100}
          - name: free
          - name: one
            maxapplications: 1
          - name: p
            resources:
              max: {memory: 100, vcore: 10}
            queues:
              - name: leaf
"""


def states(d: Driver) -> list[tuple[str, str, si.SchedulingState]]:
    return [(r.application_id, r.allocation_key, r.state) for r in d.rm.scheduling_states]


async def setup(d: Driver, *nodes: si.NodeInfo, config: str = CONFIG) -> None:
    await d.register(config)
    await d.nodes(*(nodes or (node("n1", memory=100, vcore=10),)))
    await d.settle()


async def update_config(d: Driver, config: str) -> None:
    await d.core.update_configuration(si.UpdateConfigurationRequest(rm_id=RM, config=config))


async def partition_messages(d: Driver) -> int:
    """What the partition has handled, less the queries of the core's history collector
    (one a minute, as YuniKorn samples its history; fewer than the 1440 kept here): those
    tick by design."""
    dump = await d.core.state_dump()
    [stats] = [s for n, s in dump["actors"].items() if n.endswith("partition:default")]
    return int(stats["processed"]) - len(d.core.history)


# ================================================================================ FAILED
async def test_an_ask_no_node_can_hold_but_the_quota_can_fails_after_the_interval(
    driver: Driver,
) -> None:
    d = driver
    await setup(d)
    await d.apps(app("app-1", "root.a"))
    await d.asks(ask("big", "app-1", memory=500), ask("small", "app-1", memory=10))
    await d.settle()
    assert [a.allocation_key for a in d.allocs()] == ["small"]
    assert states(d) == []  # not before the interval
    await d.clock.advance(0.5)
    assert states(d) == []
    await d.clock.advance(0.5)
    assert states(d) == [("app-1", "big", FAILED)]
    [request] = d.rm.scheduling_states
    assert "no node has room" in request.reason and "root.a" in request.reason


async def test_a_failed_ask_is_not_reported_again_while_its_state_holds(driver: Driver) -> None:
    d = driver
    await setup(d)
    await d.apps(app("app-1", "root.a"))
    await d.asks(ask("big", "app-1", memory=500))
    await d.settle()
    await d.clock.advance(1)
    assert states(d) == [("app-1", "big", FAILED)]
    # Other work comes and goes: every change is followed by an inspection.
    for i in range(3):
        await d.asks(ask(f"s{i}", "app-1"))
        await d.settle()
        await d.clock.advance(1)
    assert len(d.allocs()) == 3
    assert states(d) == [("app-1", "big", FAILED)]


async def test_a_node_that_fits_ends_the_reports(driver: Driver) -> None:
    d = driver
    await setup(d)
    await d.apps(app("app-1", "root.a"))
    await d.asks(ask("big", "app-1", memory=500))
    await d.settle()
    await d.clock.advance(1)
    await d.nodes(node("n2", memory=1000, vcore=10))
    await d.settle()
    assert [a.allocation_key for a in d.allocs()] == ["big"]
    await d.clock.advance(10)
    assert states(d) == [("app-1", "big", FAILED)]


async def test_asks_that_fit_a_node_or_are_bound_to_one_are_not_reported(driver: Driver) -> None:
    d = driver
    await setup(d, node("n1", memory=100, vcore=10), node("n2", memory=100, vcore=10))
    await d.apps(app("app-1", "root.a"))
    # n2 is full, and the ask bound to it waits for it; an autoscaler cannot help it.
    await d.asks(ask("fill", "app-1", memory=100, vcore=1))
    await d.settle()
    [fill] = d.allocs()
    bound_to = fill.node_id
    tags = {si.DOMAIN_YUNIKORN + si.KEY_REQUIRED_NODE: bound_to}
    await d.asks(ask("bound", "app-1", memory=50, tags=tags))
    await d.settle()
    await d.clock.advance(1)
    assert states(d) == []
    assert [a.allocation_key for a in d.allocs()] == ["fill"]


async def test_an_ask_released_and_asked_again_is_reported_afresh(driver: Driver) -> None:
    d = driver
    await setup(d)
    await d.apps(app("app-1", "root.a"))
    await d.asks(ask("big", "app-1", memory=500))
    await d.settle()
    await d.clock.advance(1)
    await d.release_asks("app-1", "big")
    await d.settle()
    await d.clock.advance(1)  # the inspection forgets it
    await d.asks(ask("big", "app-1", memory=500))
    await d.settle()
    await d.clock.advance(1)
    assert states(d) == [("app-1", "big", FAILED), ("app-1", "big", FAILED)]


async def test_an_ask_the_rm_refuses_every_node_for_fails(clock: ManualClock) -> None:
    class Picky(RecordingCallback):
        async def predicates(self, args: si.PredicatesArgs) -> bool:
            return args.allocation_key != "picky"

    async with scheduler.start_scheduler(clock=clock) as core:
        d = Driver(core, clock)
        d.rm = Picky()
        await setup(d)
        await d.apps(app("app-1", "root.a"))
        await d.asks(ask("picky", "app-1"), ask("easy", "app-1"))
        await d.settle()
        await clock.advance(1)
        assert [a.allocation_key for a in d.allocs()] == ["easy"]
        assert states(d) == [("app-1", "picky", FAILED)]
        assert "predicates refused" in d.rm.scheduling_states[0].reason


# =============================================================================== SKIPPED
async def test_an_ask_over_its_queue_max_is_skipped(driver: Driver) -> None:
    d = driver
    await setup(d)
    await d.apps(app("app-1", "root.a"))
    await d.asks(ask("huge", "app-1", memory=2000))
    await d.settle()
    await d.clock.advance(1)
    assert states(d) == [("app-1", "huge", SKIPPED)]
    [request] = d.rm.scheduling_states
    assert "root.a" in request.reason and "headroom" in request.reason


async def test_a_raised_quota_turns_skipped_into_failed(driver: Driver) -> None:
    d = driver
    await setup(d)
    await d.apps(app("app-1", "root.a"))
    await d.asks(ask("huge", "app-1", memory=2000))
    await d.settle()
    await d.clock.advance(1)
    await update_config(d, CONFIG.replace("max: {memory: 1000,", "max: {memory: 5000,"))
    await d.settle()
    await d.clock.advance(1)
    assert states(d) == [("app-1", "huge", SKIPPED), ("app-1", "huge", FAILED)]
    await update_config(d, CONFIG)  # lowered again: held by the quota once more
    await d.settle()
    await d.clock.advance(1)
    assert states(d)[-1] == ("app-1", "huge", SKIPPED)


async def test_asks_in_front_take_the_headroom_first(driver: Driver) -> None:
    """Queue max 1000: two asks of 600 cannot both run however many nodes come."""
    d = driver
    await setup(d)
    await d.apps(app("app-1", "root.a"), app("app-2", "root.a"))
    await d.asks(ask("first", "app-1", memory=600))
    await d.asks(ask("second", "app-2", memory=600))
    await d.settle()
    await d.clock.advance(1)
    assert states(d) == [("app-1", "first", FAILED), ("app-2", "second", SKIPPED)]
    await d.release_asks("app-1", "first")
    await d.settle()
    await d.clock.advance(1)
    assert states(d)[-1] == ("app-2", "second", FAILED)


async def test_an_ask_with_more_allocations_than_fit_the_quota_claims_what_fits(
    driver: Driver,
) -> None:
    d = driver
    await setup(d)
    await d.apps(app("app-1", "root.a"))
    await d.asks(ask("many", "app-1", memory=300, count=5))  # 3 of 5 fit the quota of 1000
    await d.asks(ask("after", "app-1", memory=200))
    await d.settle()
    await d.clock.advance(1)
    assert states(d) == [("app-1", "many", FAILED), ("app-1", "after", SKIPPED)]


async def test_a_parent_max_holds_asks_too(driver: Driver) -> None:
    d = driver
    await setup(d)
    await d.apps(app("app-1", "root.p.leaf"))
    await d.asks(ask("over", "app-1", memory=150))
    await d.settle()
    await d.clock.advance(1)
    assert states(d) == [("app-1", "over", SKIPPED)]
    assert "root.p" in d.rm.scheduling_states[0].reason


async def test_a_queue_without_a_max_never_skips(driver: Driver) -> None:
    d = driver
    await setup(d)
    await d.apps(app("app-1", "root.free"))
    await d.asks(ask("huge", "app-1", memory=10**9))
    await d.settle()
    await d.clock.advance(1)
    assert states(d) == [("app-1", "huge", FAILED)]


async def test_an_application_held_by_maxapplications_is_skipped(driver: Driver) -> None:
    d = driver
    await setup(d)
    await d.apps(app("run", "root.one"))
    await d.asks(ask("r", "run"))
    await d.settle()
    await d.apps(app("wait", "root.one"))
    await d.asks(ask("w", "wait"))
    await d.settle()
    await d.clock.advance(1)
    [request] = d.rm.scheduling_states
    assert (request.application_id, request.allocation_key, request.state) == (
        "wait",
        "w",
        SKIPPED,
    )
    assert "maximum number of applications" in request.reason


# ================================================================================= gangs
async def test_placeholders_no_node_holds_fail_and_their_real_asks_wait(driver: Driver) -> None:
    d = driver
    await setup(d)
    total = si.Resource.of(memory=600, vcore=3)
    await d.apps(app("gang", "root.a", placeholder_ask=total))
    await d.asks(
        *[
            ask(f"ph-{i}", "gang", memory=200, task_group_name="tg", placeholder=True)
            for i in (0, 1, 2)
        ],
        ask("real-0", "gang", memory=200, task_group_name="tg"),
    )
    await d.settle()
    await d.clock.advance(1)
    assert states(d) == [("gang", f"ph-{i}", FAILED) for i in (0, 1, 2)]


async def test_a_gang_that_may_not_start_in_its_quota_is_skipped(driver: Driver) -> None:
    d = driver
    await setup(d, node("n1", memory=1000, vcore=100))
    await d.apps(app("plain", "root.p.leaf"))
    await d.asks(ask("p-1", "plain", memory=50, vcore=5))
    await d.settle()
    await d.apps(app("gang", "root.p.leaf", placeholder_ask=si.Resource.of(memory=60, vcore=6)))
    await d.asks(
        *[ask(f"ph-{i}", "gang", task_group_name="tg", placeholder=True) for i in range(6)]
    )
    await d.settle()
    await d.clock.advance(1)
    assert states(d) == [("gang", f"ph-{i}", SKIPPED) for i in range(6)]
    await d.release(*d.allocs("plain"))
    await d.settle()
    assert len(d.allocs("gang")) == 6
    await d.clock.advance(5)
    assert len(states(d)) == 6


# ================================================================================= quiet
async def test_an_idle_core_makes_no_calls_however_far_the_clock_moves(driver: Driver) -> None:
    d = driver
    await setup(d)
    before = await partition_messages(d)
    await d.clock.advance(3600)
    assert states(d) == []
    assert await partition_messages(d) - before < 5  # no ticking timer
    await d.apps(app("app-1", "root.a"))
    await d.asks(ask("big", "app-1", memory=500))
    await d.settle()
    await d.clock.advance(1)
    assert states(d) == [("app-1", "big", FAILED)]
    calls = (len(d.rm.allocation_responses), len(d.rm.application_responses), len(d.rm.events))
    before = await partition_messages(d)
    await d.clock.advance(3 * 3600)  # nothing changes: nothing to inspect
    assert states(d) == [("app-1", "big", FAILED)]
    assert calls == (
        len(d.rm.allocation_responses),
        len(d.rm.application_responses),
        len(d.rm.events),
    )
    assert await partition_messages(d) - before < 5


async def test_an_rm_with_the_default_callback_costs_no_inspection() -> None:
    class Quiet(RecordingCallback):
        update_container_scheduling_state = (
            scheduler.ResourceManagerCallback.update_container_scheduling_state
        )

    async def messages_handled(rm: RecordingCallback) -> int:
        """The partition's messages for one ask no node holds, over a minute."""
        own = ManualClock()
        async with scheduler.start_scheduler(clock=own) as core:
            d = Driver(core, own)
            d.rm = rm
            await setup(d)
            await d.apps(app("app-1", "root.a"))
            await d.asks(ask("big", "app-1", memory=500))
            await d.settle()
            await d.clock.advance(60)
            return await partition_messages(d)

    quiet = await messages_handled(Quiet())
    listening = RecordingCallback()
    assert await messages_handled(listening) > quiet  # its inspections
    assert [r.state for r in listening.scheduling_states] == [FAILED]


async def test_the_interval_is_a_timeout_like_the_others(clock: ManualClock) -> None:
    timeouts = scheduler.Timeouts()
    timeouts.outstanding = 5.0
    async with scheduler.start_scheduler(clock=clock, timeouts=timeouts) as core:
        d = Driver(core, clock)
        await setup(d)
        await d.apps(app("app-1", "root.a"))
        await d.asks(ask("big", "app-1", memory=500))
        await d.settle()
        await clock.advance(4.9)
        assert states(d) == []
        await clock.advance(0.1)
        assert states(d) == [("app-1", "big", FAILED)]


@pytest.mark.logs_errors("RM callback update_container_scheduling_state raised")
async def test_a_callback_that_raises_does_not_stop_the_core(clock: ManualClock) -> None:
    class Broken(RecordingCallback):
        async def update_container_scheduling_state(self, request: Any) -> None:
            raise RuntimeError("autoscaler down")

    async with scheduler.start_scheduler(clock=clock) as core:
        d = Driver(core, clock)
        d.rm = Broken()
        await setup(d)
        await d.apps(app("app-1", "root.a"))
        await d.asks(ask("big", "app-1", memory=500))
        await d.settle()
        await clock.advance(1)
        await d.nodes(node("n2", memory=1000, vcore=10))
        await d.settle()
        assert [a.allocation_key for a in d.allocs()] == ["big"]


async def test_a_stateaware_queue_reports_the_asks_of_an_application_it_holds_back(
    driver: Driver,
) -> None:
    """YuniKorn inspects every application of the queue, the ones the stateaware filter
    holds in Accepted too: what they ask for is outstanding all the same."""
    config = CONFIG.replace(
        "          - name: free\n",
        "          - name: free\n"
        "          - name: sa\n"
        "            properties:\n"
        "              application.sort.policy: stateaware\n",
    )
    d = driver
    await setup(d, config=config)
    await d.apps(app("first", "root.sa"))
    await d.asks(ask("f1", "first", memory=10))
    await d.settle()
    assert (await d.core.get_application("default", "first"))["applicationState"] == "Starting"
    await d.apps(app("second", "root.sa"))
    await d.asks(ask("big", "second", memory=500))
    await d.settle()
    app_state = (await d.core.get_application("default", "second"))["applicationState"]
    assert app_state == "Accepted"
    await d.clock.advance(1)
    await d.settle()
    assert states(d) == [("second", "big", FAILED)]


async def test_an_ask_that_fits_a_node_it_may_not_take_yet_keeps_what_it_was_told(
    driver: Driver,
) -> None:
    """The stateaware filter holds ``second`` back: with a node that has room its asks need
    nothing from an autoscaler, and once the room is gone they are not reported again."""
    config = CONFIG.replace(
        "          - name: free\n",
        "          - name: free\n"
        "          - name: sa\n"
        "            properties:\n"
        "              application.sort.policy: stateaware\n",
    )
    d = driver
    await setup(d, config=config)
    await d.apps(app("first", "root.sa"))
    await d.asks(ask("f1", "first", memory=10))
    await d.settle()
    await d.apps(app("second", "root.sa"))
    await d.asks(*[ask(f"big-{i}", "second", memory=500) for i in range(3)])
    await d.settle()
    await d.clock.advance(1)
    assert states(d) == [("second", f"big-{i}", FAILED) for i in range(3)]
    await d.nodes(node("n2", memory=1000, vcore=10))  # room, but second may not start yet
    await d.settle()
    await d.clock.advance(1)
    assert d.allocs("second") == []
    await d.asks(ask("big-3", "second", memory=500))  # told nothing while it fits a node
    await d.settle()
    await d.clock.advance(1)
    await d.nodes(si.NodeInfo(node_id="n2", action=si.ActionFromRM.DECOMISSION))
    await d.asks(ask("f2", "first", memory=10))  # (a node that goes is no news by itself)
    await d.settle()
    await d.clock.advance(1)
    assert [a.allocation_key for a in d.allocs()] == ["f1", "f2"]
    assert states(d) == [("second", f"big-{i}", FAILED) for i in range(4)]
