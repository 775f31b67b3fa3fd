"""A queue's ``preemption.policy`` and ``preemption.delay`` (``Queue.preemption_policy``,
``Queue.preemption_delay``), read as YuniKorn 1.3+ reads them: ``Queue.mergeProperties``,
``filterParentProperty``, ``UpdateQueueProperties`` and ``convertDelay``
(``pkg/scheduler/objects/queue.go``) and ``policies.PreemptionPolicyFromString``.

The first part builds queues directly; the second goes through the core (configured,
child-template and dynamic queues, a reload) and reads what ``get_queue`` shows
(``preemptionEnabled``, ``isPreemptionFence``, ``preemptionDelay``, as v1.8's
``dao.PartitionQueueDAOInfo``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from loguru import logger

import scheduler
from scheduler import si
from scheduler.objects._queue import Queue
from scheduler.testing import ManualClock

from ..conftest import RM, Driver, app

POLICY = "preemption.policy"
DELAY = "preemption.delay"


def make(
    name: str,
    parent: Queue | None = None,
    *,
    leaf: bool = True,
    policy: str | None = None,
    delay: str | None = None,
) -> Queue:
    """A queue with these properties (``None``: not set)."""
    queue = Queue(name, parent, leaf=leaf)
    props = {key: value for key, value in ((POLICY, policy), (DELAY, delay)) if value is not None}
    queue.configure(max_resources={}, guaranteed={}, properties=props)
    return queue


class Warnings:
    def __init__(self) -> None:
        self.messages: list[str] = []

    def sink(self, message: Any) -> None:
        self.messages.append(message.record["message"])


@pytest.fixture
def warnings() -> Iterator[Warnings]:
    captured = Warnings()
    sink = logger.add(captured.sink, level="WARNING")
    yield captured
    logger.remove(sink)


# ============================================================================ the policy
def test_a_queue_that_says_nothing_has_the_defaults(warnings: Warnings) -> None:
    root = make("root", leaf=False)
    leaf = make("a", root)
    for queue in (root, leaf):
        assert (queue.preemption_policy, queue.preemption_delay) == ("default", 30.0)
    assert warnings.messages == []


@pytest.mark.parametrize(
    ("value", "policy"),
    [
        ("default", "default"),
        ("fence", "fence"),
        ("disabled", "disabled"),
        ("Fence", "fence"),
        ("DISABLED", "disabled"),
        ("", "default"),
    ],
)
def test_policy_is_read_in_any_case_and_kept_lower_case(value: str, policy: str) -> None:
    root = make("root", leaf=False)
    assert make("a", root, policy=value).preemption_policy == policy


@pytest.mark.parametrize(
    ("parent", "child", "expected"),
    [
        ("disabled", None, "disabled"),  # only disabled comes down
        ("Disabled", None, "disabled"),
        ("fence", None, "default"),  # a fence is the parent's alone
        ("default", None, "default"),
        ("bogus", None, "default"),
        ("disabled", "fence", "fence"),  # the queue's own value wins
        ("disabled", "default", "default"),
        ("disabled", "", "default"),
        ("disabled", "bogus", "default"),  # even one it cannot read (then: default)
    ],
)
def test_of_the_parents_policy_only_disabled_is_inherited(
    parent: str, child: str | None, expected: str
) -> None:
    root = make("root", leaf=False)
    mid = make("mid", root, leaf=False, policy=parent)
    assert make("leaf", mid, policy=child).preemption_policy == expected


def test_disabled_comes_down_every_level_until_a_queue_says_otherwise() -> None:
    root = make("root", leaf=False, policy="disabled")
    mid = make("mid", root, leaf=False)
    fenced = make("fenced", mid, leaf=False, policy="fence")
    assert make("leaf", mid).preemption_policy == "disabled"
    assert mid.preemption_policy == "disabled"
    assert fenced.preemption_policy == "fence"
    assert make("below-fence", fenced).preemption_policy == "default"


# ============================================================================= the delay
@pytest.mark.parametrize(
    ("value", "seconds"), [("30s", 30.0), ("1m30s", 90.0), ("500ms", 0.5), ("1h", 3600.0)]
)
def test_delay_is_a_go_duration(value: str, seconds: float) -> None:
    root = make("root", leaf=False)
    assert make("a", root, delay=value).preemption_delay == seconds


def test_a_leaf_inherits_the_nearest_delay_and_a_parent_keeps_the_default() -> None:
    root = make("root", leaf=False, delay="5m")
    mid = make("mid", root, leaf=False, delay="2m")
    assert make("leaf", mid).preemption_delay == 120.0
    assert make("own", mid, delay="10s").preemption_delay == 10.0
    assert make("other", root).preemption_delay == 300.0
    # YuniKorn reads the delay on leaves only; a parent passes it down.
    assert (root.preemption_delay, mid.preemption_delay) == (30.0, 30.0)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"delay": "30"}, "preemption.delay '30' is not valid (missing unit in duration '30')"),
        ({"delay": "soon"}, "preemption.delay 'soon' is not valid (invalid duration 'soon')"),
        ({"delay": "0s"}, "preemption.delay '0s' is not valid (the delay must be above zero)"),
        ({"delay": "-1m"}, "preemption.delay '-1m' is not valid (the delay must be above zero)"),
        ({"delay": ""}, "preemption.delay '' is not valid (invalid duration '')"),
        (
            {"policy": "sometimes"},
            "preemption.policy 'sometimes' is not valid (expected default, fence or disabled)",
        ),
    ],
)
def test_a_bad_value_is_warned_about_and_the_default_used(
    warnings: Warnings, props: dict[str, str], message: str
) -> None:
    root = make("root", leaf=False)
    parent = make("p", root, leaf=False, policy="disabled", delay="1m")
    leaf = make("a", parent, policy=props.get("policy"), delay=props.get("delay"))
    assert (leaf.preemption_policy, leaf.preemption_delay) == (
        "default" if "policy" in props else "disabled",
        30.0 if "delay" in props else 60.0,
    )
    default = "30s" if "delay" in props else "default"
    assert warnings.messages == [f"queue root.p.a: {message}, using {default}"]


def test_a_bad_delay_is_warned_about_where_it_is_set_and_defaults_below(
    warnings: Warnings,
) -> None:
    root = make("root", leaf=False)
    parent = make("p", root, leaf=False, delay="1 minute")
    leaves = [make(f"l{i}", parent) for i in range(3)]
    assert [leaf.preemption_delay for leaf in leaves] == [30.0] * 3
    assert len(warnings.messages) == 1
    assert warnings.messages[0].startswith("queue root.p: preemption.delay '1 minute' is not")


def test_a_parents_new_values_reach_the_queues_below_it() -> None:
    root = make("root", leaf=False)
    parent = make("p", root, leaf=False, policy="disabled", delay="1m")
    mid = make("mid", parent, leaf=False)
    leaf = make("leaf", mid)
    assert (leaf.preemption_policy, leaf.preemption_delay) == ("disabled", 60.0)
    parent.configure(max_resources={}, guaranteed={}, properties={DELAY: "2m"})
    assert (mid.preemption_policy, leaf.preemption_policy) == ("default", "default")
    assert leaf.preemption_delay == 120.0
    parent.configure(max_resources={}, guaranteed={}, properties={POLICY: "DISABLED"})
    assert (mid.preemption_policy, leaf.preemption_policy) == ("disabled", "disabled")
    assert leaf.preemption_delay == 30.0


# ===================================================================== through the core
CONFIG = """
partitions:
  - name: default
    placementrules:
      - name: provided
        create: true
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: off
            parent: true
            properties:
              preemption.policy: disabled
              preemption.delay: 1m
            queues:
              - name: managed
          - name: fenced
            parent: true
            properties:
              preemption.policy: fence
          - name: templated
            parent: true
            properties:
              preemption.policy: disabled
            childtemplate:
              properties:
                preemption.policy: Fence
                preemption.delay: 45s
          - name: plain
"""


async def preemption(d: Driver, path: str) -> tuple[bool, bool, str]:
    q = await d.core.get_queue("default", path)
    return q["preemptionEnabled"], q["isPreemptionFence"], q["preemptionDelay"]


async def started(core: scheduler.Core, clock: ManualClock, config: str = CONFIG) -> Driver:
    d = Driver(core, clock)
    await d.register(config)
    await d.apps(
        app("app-1", "root.off.dynamic"),
        app("app-2", "root.fenced.dynamic"),
        app("app-3", "root.templated.dynamic"),
    )
    await d.settle()
    assert d.rm.accepted_apps == ["app-1", "app-2", "app-3"]
    return d


@pytest.mark.asyncio
async def test_configured_template_and_dynamic_queues(
    core: scheduler.Core, clock: ManualClock
) -> None:
    d = await started(core, clock)
    assert await preemption(d, "root") == (True, False, "30s")
    assert await preemption(d, "root.plain") == (True, False, "30s")
    assert await preemption(d, "root.off") == (False, False, "30s")  # a parent: not read
    assert await preemption(d, "root.off.managed") == (False, False, "1m0s")
    assert await preemption(d, "root.off.dynamic") == (False, False, "1m0s")
    assert await preemption(d, "root.fenced") == (True, True, "30s")
    assert await preemption(d, "root.fenced.dynamic") == (True, False, "30s")
    assert await preemption(d, "root.templated.dynamic") == (True, True, "45s")  # own values


@pytest.mark.asyncio
async def test_a_reload_reaches_managed_and_dynamic_queues_below_a_changed_parent(
    core: scheduler.Core, clock: ManualClock
) -> None:
    d = await started(core, clock)
    off = "              preemption.policy: disabled\n              preemption.delay: 1m\n"
    reloaded = CONFIG.replace(off, "              preemption.delay: 2m\n")
    reloaded = reloaded.replace("preemption.policy: fence\n", "preemption.policy: disabled\n")
    await d.core.update_configuration(si.UpdateConfigurationRequest(rm_id=RM, config=reloaded))
    await d.settle()
    assert await preemption(d, "root.off") == (True, False, "30s")
    assert await preemption(d, "root.off.managed") == (True, False, "2m0s")
    assert await preemption(d, "root.off.dynamic") == (True, False, "2m0s")
    assert await preemption(d, "root.fenced.dynamic") == (False, False, "30s")
