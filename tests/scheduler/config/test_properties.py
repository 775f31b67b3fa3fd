"""Queue property values: ``preemption.policy`` and ``preemption.delay`` read as YuniKorn 1.3+
reads them (``policies.PreemptionPolicyFromString``, ``objects.convertDelay``), the sort and
priority properties as v1.2 reads them, and ``scheduler check-config`` reporting the values
the core takes but cannot read, with the reason and the default the core logs."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from loguru import logger

from scheduler.config._check import Problem, check_config
from scheduler.config._parser import parse_config
from scheduler.config._properties import (
    application_sort_policy,
    application_sort_priority,
    preemption_delay,
    preemption_policy,
    priority_offset,
    priority_policy,
)
from scheduler.objects._priority import PrioritySettings
from scheduler.objects._queue import Queue


@pytest.mark.parametrize(
    ("value", "policy"),
    [
        ("default", "default"),
        ("fence", "fence"),
        ("disabled", "disabled"),
        ("Fence", "fence"),
        ("DISABLED", "disabled"),
        ("Default", "default"),
        ("", "default"),
    ],
)
def test_preemption_policy_is_read_in_any_case(value: str, policy: str) -> None:
    assert preemption_policy(value) == policy


@pytest.mark.parametrize("value", ["sometimes", "fenced", " fence", "none", "off"])
def test_other_preemption_policies_are_refused(value: str) -> None:
    with pytest.raises(ValueError, match="expected default, fence or disabled"):
        preemption_policy(value)


@pytest.mark.parametrize(
    ("value", "seconds"), [("30s", 30.0), ("1m30s", 90.0), ("500ms", 0.5), ("1h", 3600.0)]
)
def test_preemption_delay_is_a_go_duration(value: str, seconds: float) -> None:
    assert preemption_delay(value) == seconds


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("30", "missing unit"),
        ("abc", "invalid duration"),
        ("", "invalid duration"),
        ("0", "above zero"),
        ("0s", "above zero"),
        ("-5s", "above zero"),
    ],
)
def test_a_delay_that_is_no_duration_or_not_above_zero_is_refused(value: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        preemption_delay(value)


# ===================================================================== check-config
BAD = """\
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        properties:
          preemption.delay: 0s
        queues:
          - name: a
            properties:
              preemption.policy: sometimes
              preemption.delay: "30"
          - name: bad name
          - name: b
            parent: true
            properties:
              preemption.policy: Fence
              preemption.delay: 1m30s
            childtemplate:
              properties:
                preemption.policy: never
                preemption.delay: soon
"""


def test_check_config_reports_bad_preemption_values_in_file_order() -> None:
    problems = check_config(BAD).problems
    assert [(p.line, p.column) for p in problems] == [
        (7, 29),  # root's delay 0s
        (11, 34),  # root.a's policy
        (12, 33),  # root.a's delay "30"
        (13, 19),  # 'bad name': a problem of another kind, in its place
        (21, 36),  # the child template's policy
        (22, 35),  # the child template's delay
    ]
    assert problems[0].message.endswith(
        "partition 'default', queue 'root': preemption.delay '0s' is not valid "
        "(the delay must be above zero); the core logs it and uses 30s"
    )
    assert "queue 'root.a': preemption.policy 'sometimes' is not valid " in problems[1].message
    assert "(expected default, fence or disabled); the core logs it and uses default" in (
        problems[1].message
    )
    assert "preemption.delay '30' is not valid (missing unit in duration '30')" in (
        problems[2].message
    )
    assert "invalid queue name 'bad name'" in problems[3].message
    assert "queue 'root.b', childtemplate: preemption.policy 'never'" in problems[4].message
    assert "preemption.delay 'soon' is not valid" in problems[5].message


def test_the_core_takes_what_check_config_reports_about_properties() -> None:
    text = BAD.replace("          - name: bad name\n", "")
    assert len(check_config(text).problems) == 5
    parse_config(text)  # no ConfigError: the core warns and uses the defaults


def test_good_preemption_values_are_no_problem() -> None:
    text = BAD.replace("delay: 0s", "delay: 2m").replace("sometimes", "DISABLED")
    text = text.replace('"30"', "45s")
    text = text.replace("never", "fence").replace("soon", "10s")
    text = text.replace("          - name: bad name\n", "")
    assert check_config(text).problems == []


def test_a_broken_queue_entry_still_has_its_property_values_checked() -> None:
    text = """\
partitions:
  - name: default
    queues:
      - name: root
        queues:
          - name: a
            maxapps: 1
            properties:
              preemption.policy: sometimes
"""
    unknown, policy = check_config(text).problems
    assert unknown == Problem(
        "partitions[default].queues[root].queues[a].maxapps: unknown key 'maxapps' "
        "(allowed: adminacl, childtemplate, limits, maxapplications, name, parent, "
        "properties, queues, resources, submitacl)",
        7,
        13,
    )
    assert (policy.line, policy.column) == (9, 34)
    assert "preemption.policy 'sometimes' is not valid" in policy.message


# ======================================================= priority and sort properties
@pytest.mark.parametrize(
    ("read", "value", "expected"),
    [
        (application_sort_policy, "fair", "fair"),
        (application_sort_policy, "stateaware", "stateaware"),
        (application_sort_policy, "", "fifo"),
        (application_sort_priority, "Disabled", False),
        (application_sort_priority, "ENABLED", True),
        (priority_policy, "Fence", "fence"),
        (priority_policy, "", "default"),
        (priority_offset, "+7", 7),
        (priority_offset, "-2147483648", -(2**31)),
        (priority_offset, "", 0),
    ],
)
def test_priority_and_sort_values_are_read_as_yunikorn_reads_them(
    read: Callable[[str], object], value: str, expected: object
) -> None:
    """``SortPolicyFromString`` (exact names), ``applicationSortPriorityEnabled`` and
    ``PriorityPolicyFromString`` (any case), ``priorityOffset`` (``ParseInt(value, 10, 32)``):
    pkg/scheduler/policies and pkg/scheduler/objects/queue.go, v1.2.0."""
    assert read(value) == expected


@pytest.mark.parametrize(
    ("read", "value"),
    [
        (application_sort_policy, "FAIR"),
        (application_sort_policy, "drf"),
        (application_sort_priority, ""),
        (application_sort_priority, "yes"),
        (priority_policy, "strict"),
        (priority_offset, "1.5"),
        (priority_offset, "0x10"),
        (priority_offset, "2147483648"),
    ],
)
def test_other_priority_and_sort_values_are_refused(
    read: Callable[[str], object], value: str
) -> None:
    with pytest.raises(ValueError, match="expected "):
        read(value)


# One line per property the core cannot read: (key, value, why, what the core uses).
UNREADABLE = [
    ("application.sort.policy", "FAIR", "expected fifo, fair or stateaware, in lower case", "fifo"),
    ("application.sort.priority", "maybe", "expected enabled or disabled", "enabled"),
    ("priority.policy", "strict", "expected default or fence", "default"),
    ("priority.offset", "1.5", "expected a whole number from -2147483648 to 2147483647", "0"),
    ("preemption.policy", "never", "expected default, fence or disabled", "default"),
    ("preemption.delay", "30", "missing unit in duration '30'", "30s"),
]


@pytest.mark.parametrize(("key", "value", "why", "default"), UNREADABLE)
def test_check_config_reports_each_unreadable_property_where_it_is_written(
    key: str, value: str, why: str, default: str
) -> None:
    text = f"""\
partitions:
  - queues:
      - name: root
        queues:
          - name: a
            properties:
              {key}: "{value}"
"""
    (problem,) = check_config(text).problems
    assert (problem.line, problem.column) == (7, 17 + len(key))
    assert problem.message.endswith(
        f"queue 'root.a': {key} {value!r} is not valid ({why}); the core logs it and uses {default}"
    )


@pytest.mark.parametrize(("key", "value", "why", "default"), UNREADABLE)
def test_the_core_warns_with_the_reason_check_config_gives(
    key: str, value: str, why: str, default: str
) -> None:
    """One check for both: the queue logs the value it cannot read and uses the default, as
    YuniKorn's ``UpdateQueueProperties`` does; check-config's problem says the same."""
    messages: list[str] = []
    sink = logger.add(lambda m: messages.append(m.record["message"]), level="WARNING")
    try:
        root = Queue("root", None, leaf=False)
        root.configure(max_resources={}, guaranteed={}, properties={})
        leaf = Queue("a", root, leaf=True)
        leaf.configure(max_resources={}, guaranteed={}, properties={key: value})
    finally:
        logger.remove(sink)
    assert messages == [f"queue root.a: {key} {value!r} is not valid ({why}), using {default}"]
    assert (leaf.sort_policy, leaf.priority_settings) == ("fifo", PrioritySettings())
    assert (leaf.preemption_policy, leaf.preemption_delay) == ("default", 30.0)


def test_check_config_lists_every_bad_property_of_a_queue_in_file_order() -> None:
    lines = "".join(f"              {key}: '{value}'\n" for key, value, _, _ in UNREADABLE)
    text = f"""\
partitions:
  - queues:
      - name: root
        queues:
          - name: a
            properties:
{lines}"""
    problems = check_config(text).problems
    assert [p.line for p in problems] == list(range(7, 7 + len(UNREADABLE)))
    assert [p.message.split(": ")[-1].split(" ")[0] for p in problems] == [
        key for key, _, _, _ in UNREADABLE
    ]
