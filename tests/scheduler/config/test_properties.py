"""Queue property values: ``preemption.policy`` and ``preemption.delay`` read as YuniKorn 1.3+
reads them (``policies.PreemptionPolicyFromString``, ``objects.convertDelay``), and
``scheduler check-config`` reporting the values the core takes but cannot read."""

from __future__ import annotations

import pytest

from scheduler.config._check import Problem, check_config
from scheduler.config._parser import parse_config
from scheduler.config._properties import preemption_delay, preemption_policy


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


def test_a_broken_queue_entry_hides_its_property_values() -> None:
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
    (problem,) = check_config(text).problems
    assert problem == Problem(
        "partitions[default].queues[root].queues[a].maxapps: unknown key 'maxapps' "
        "(allowed: adminacl, childtemplate, limits, maxapplications, name, parent, "
        "properties, queues, resources, submitacl)",
        7,
        13,
    )
