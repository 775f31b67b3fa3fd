"""Small scenarios for the simulator's tests, written as a user writes them."""

from __future__ import annotations

import textwrap

import msgspec

from scheduler.simulate import Scenario, Summary, parse_scenario

QUEUES = """\
queues:
  partitions:
    - name: default
      queues:
        - name: root
          submitacl: '*'
          queues:
            - name: a
              resources: {guaranteed: {memory: 32Gi, vcore: 8}}
              properties: {preemption.delay: 5s}
            - name: b
              resources: {guaranteed: {memory: 32Gi, vcore: 8}}
"""


def scenario(
    body: str,
    *,
    nodes: int = 4,
    duration: str = "30m",
    queues: str = QUEUES,
    capacity: str = "{memory: 16Gi, vcore: 4}",
) -> Scenario:
    """A scenario of ``nodes`` nodes of ``capacity`` (16Gi/4 vcores), queues root.a and
    root.b (each guaranteed half of four such nodes), and ``body`` (workloads, events,
    ...)."""
    text = (
        f"name: test\nseed: 11\nduration: {duration}\nsample_every: 30s\n"
        f"nodes:\n  - {{group: w, count: {nodes}, capacity: {capacity}}}\n"
        + queues
        + textwrap.dedent(body)
    )
    return parse_scenario(text, source="test.yaml")


def without_wall(summary: Summary) -> bytes:
    """The summary's JSON but for its two wall-clock figures."""
    fixed = msgspec.structs.replace(summary, wall_seconds=0.0, pods_per_wall_second=0.0)
    return msgspec.json.encode(fixed)
