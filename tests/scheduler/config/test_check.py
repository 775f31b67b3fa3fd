"""``scheduler check-config`` (``scheduler.config._check``) lists every problem of a file in
file order: each field of a queue, partition, placement rule or child template is checked
on its own, so a queue with several mistakes shows them all, and the queues below a broken
one are still checked. A queue entry with a problem of its own is left out of the checks
across queues (quota sums, limits), which would otherwise judge it by a value it does not
have; a property value the core takes and defaults does not count as such a problem.

The checks themselves are the core's (``parse_config``), which follow yunikorn-core's
``configvalidator.go`` (v1.2.0); YuniKorn stops at the first error, check-config does not.
"""

from __future__ import annotations

import pytest

from scheduler.config._check import check_config
from scheduler.config._parser import ConfigError, parse_config

QUEUE_WITH_EVERYTHING_WRONG = """\
partitions:
  - name: default
    queues:
      - name: root
        queues:
          - name: a
            maxapps: 3
            resources:
              max: {memory: 1Gx, vcore: 2}
              guaranteed: {vcore: abc, memory: 2Gq}
            submitacl: "a b c"
            maxapplications: -1
            properties:
              priority.offset: high
            childtemplate:
              maxapplications: many
              resources:
                max: {vcore: lots}
            queues:
              - name: bad name
              - name: child
                parent: maybe
"""


def test_every_problem_of_a_queue_is_listed_in_file_order() -> None:
    problems = check_config(QUEUE_WITH_EVERYTHING_WRONG).problems
    assert [(p.line, p.column) for p in problems] == [
        (7, 13),  # unknown key maxapps
        (9, 29),  # max memory 1Gx
        (10, 35),  # guaranteed vcore abc
        (10, 48),  # guaranteed memory 2Gq: a second bad quantity in the same map
        (11, 24),  # submitacl with three fields
        (12, 30),  # maxapplications -1
        (14, 32),  # priority.offset high
        (16, 32),  # the child template's maxapplications
        (18, 30),  # the child template's max vcore
        (20, 23),  # a child's invalid name: children of a broken queue are checked
        (22, 25),  # a grandchild's parent: maybe
    ]
    words = [
        "unknown key 'maxapps'",
        "invalid quantity '1Gx'",
        "invalid quantity 'abc'",
        "invalid quantity '2Gq'",
        "invalid submitacl 'a b c'",
        "maxapplications: expected a non-negative integer",
        "priority.offset 'high' is not valid",
        "childtemplate.maxapplications: expected a non-negative integer",
        "invalid quantity 'lots'",
        "invalid queue name 'bad name'",
        "parent: expected true or false",
    ]
    for problem, expected in zip(problems, words, strict=True):
        assert expected in problem.message


def test_the_core_stops_at_the_first_of_them() -> None:
    with pytest.raises(ConfigError, match="unknown key 'maxapps'"):
        parse_config(QUEUE_WITH_EVERYTHING_WRONG)


def test_every_problem_of_a_partition_entry_is_listed() -> None:
    text = """\
partitions:
  - name: default
    colour: blue
    preemption: {enabled: maybe, when: never}
    statedumpfilepath: [a]
    placementrules:
      - name: nosuch
      - name: fixed
    nodesortpolicy: {type: weird}
    queues:
      - name: a
        resources: {max: {memory: 1Gx}}
"""
    problems = check_config(text).problems
    assert [(p.line, p.column) for p in problems] == [
        (3, 5),  # unknown key colour
        (4, 27),  # preemption.enabled maybe
        (4, 34),  # unknown key preemption.when
        (5, 24),  # statedumpfilepath is no string
        (7, 15),  # unknown rule
        (8, 9),  # fixed without a value
        (9, 28),  # node sort policy
        (12, 35),  # the queue's memory
    ]


def test_a_partition_without_queues_still_has_its_other_keys_checked() -> None:
    text = "partitions:\n  - name: x\n    nodesortpolicy: {type: weird}\n"
    problems = check_config(text).problems
    assert [(p.line, "queue config is not set" in p.message) for p in problems] == [
        (2, True),
        (3, False),
    ]


def test_a_broken_queue_is_left_out_of_checks_across_queues() -> None:
    """Its max (unreadable) would count as unlimited; its maxapplications (unreadable) as
    unset, which the parent's maxapplications forbids: neither is reported, as neither is
    what the file says (``checkQueueResource``, ``checkMaxApplications``)."""
    text = """\
partitions:
  - queues:
      - name: root
        queues:
          - name: p
            maxapplications: 5
            resources: {max: {vcore: 2}}
            queues:
              - name: c
                maxapplications: lots
                resources: {max: {vcore: 4x}}
"""
    problems = check_config(text).problems
    assert [(p.line, p.column) for p in problems] == [(10, 34), (11, 42)]


def test_an_unreadable_property_value_keeps_its_queue_in_the_checks_across_queues() -> None:
    """The core takes the queue (it defaults the value), so its quota is checked too."""
    text = """\
partitions:
  - queues:
      - name: root
        queues:
          - name: p
            resources: {max: {vcore: 2}}
            queues:
              - name: c
                properties: {preemption.policy: never}
                resources: {max: {vcore: 4}}
"""
    quota, policy = check_config(text).problems
    assert (quota.line, quota.column) == (8, 17)  # a check across queues: at the queue's entry
    assert "queue 'root.p.c': maximum resource {vcore: 4} is larger than the maximum" in (
        quota.message
    )
    assert (policy.line, "preemption.policy 'never' is not valid" in policy.message) == (9, True)


def test_each_queue_breaking_a_check_across_queues_is_listed() -> None:
    """``checkQueueResource`` and ``checkQueueMaxApplications`` stop at the first queue;
    check-config goes on with its siblings, and leaves out a sum over a child it reported."""
    text = """\
partitions:
  - queues:
      - name: root
        queues:
          - name: p
            maxapplications: 4
            resources: {guaranteed: {vcore: 1}, max: {memory: 2Gi, vcore: 2}}
            queues:
              - name: c
                maxapplications: 9
                resources: {max: {memory: 3G}}
              - name: d
                maxapplications: 2
                resources: {guaranteed: {memory: 512Mi, vcore: 3}, max: {memory: 256Mi}}
          - name: q
            resources: {guaranteed: {vcore: 2}, max: {vcore: 1}}
"""
    problems = check_config(text).problems
    assert [(p.line, p.column) for p in problems] == [(9, 17), (9, 17), (12, 17), (15, 13)]
    assert [p.message.split(": ", 1)[1] for p in problems] == [
        "maximum resource {memory: 2.8Gi} is larger than the maximum resource "
        "{memory: 2Gi, vcore: 2} of its parent",
        "maxapplications 9 must be set and not larger than the parent 'root.p' maxapplications 4",
        "guaranteed resource {memory: 512Mi, vcore: 3} is larger than maximum resource "
        "{memory: 256Mi}",
        "guaranteed resource {vcore: 2} is larger than maximum resource {vcore: 1}",
    ]  # no "smaller than the sum of the children's" for p: its children's sum is unknown
