"""The demo scenario behind ``scheduler demo``: what happened, as tables of rows.

Nodes, a gang and a plain application in two dynamic queues, which the built-in
configuration (YuniKorn's) makes from each application's ``namespace`` tag, as a Kubernetes
shim sends it: the gang's placeholders, their replacement by real tasks through the release
handshake, a release, completion. The scenario knows nothing about the terminal: it hands
each report to ``on_report`` and each finished step to ``on_step``; the CLI renders them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from scheduler import si
from scheduler.core import Core, start_scheduler
from scheduler.testing import ManualClock, RecordingCallback

__all__ = ["Report", "Section", "demo_steps", "run_demo"]

RM: Final = "demo-rm"
GI: Final = 1 << 30  # memory is in bytes; the tables show it in Gi and Mi
NODE_BATCH: Final = 1_000  # nodes per NodeRequest: a large run shows progress while registering
_STEPS: Final = 6  # steps after the node batches (see run_demo)


@dataclass(frozen=True)
class Section:
    """One table: a title, the column names and the rows (cells are plain values or resource
    maps, which the CLI shows with ``scheduler.config._quantity.format_resources``)."""

    title: str
    header: tuple[str, ...]
    rows: list[tuple[Any, ...]]


@dataclass(frozen=True)
class Report:
    """The state of the core at one moment of the scenario."""

    moment: str
    sections: list[Section]


def demo_steps(nodes: int) -> int:
    """How many times ``run_demo`` calls ``on_step`` for ``nodes`` nodes."""
    return -(-nodes // NODE_BATCH) + _STEPS


async def run_demo(
    *,
    nodes: int,
    tasks: int,
    on_report: Callable[[Report], None],
    on_step: Callable[[str], None] = lambda _: None,
) -> None:
    """Run the scenario on a manual clock, reporting three moments of it."""
    clock = ManualClock()
    rm = RecordingCallback()
    async with start_scheduler(clock=clock) as core:
        await core.register_resource_manager(
            si.RegisterResourceManagerRequest(rm_id=RM, policy_group="default", version="demo"), rm
        )
        for first in range(1, nodes + 1, NODE_BATCH):
            last = min(first + NODE_BATCH, nodes + 1)
            await core.update_node(si.NodeRequest(rm_id=RM, nodes=_nodes(first, last)))
            await core.settle()
            on_step(f"registered {last - 1:,} of {nodes:,} nodes")
        await core.update_application(_applications(tasks))
        await core.update_allocation(
            si.AllocationRequest(
                rm_id=RM,
                asks=[
                    *_asks("spark-etl", "placeholder", tasks, placeholder=True),
                    *_asks("web-api", "task", tasks, placeholder=False),
                ],
            )
        )
        await core.settle()
        on_step("placed the gang's placeholders")
        on_report(await _report(core, rm, "after placing the gang's placeholders"))
        on_step("reported")
        await core.update_allocation(
            si.AllocationRequest(
                rm_id=RM, asks=_asks("spark-etl", "task", tasks, placeholder=False)
            )
        )
        await core.settle()
        # The core released each placeholder for a real task; the RM confirms.
        replaced = [
            r for r in rm.released if r.termination_type == si.TerminationType.PLACEHOLDER_REPLACED
        ]
        await core.update_allocation(
            si.AllocationRequest(
                rm_id=RM,
                releases=si.AllocationReleasesRequest(allocations_to_release=replaced),
            )
        )
        await core.settle()
        on_step("replaced the placeholders by real tasks")
        on_report(await _report(core, rm, "after the real tasks replaced the placeholders"))
        on_step("reported")
        await _release_real_tasks(core, rm)
        await core.settle()
        await clock.advance(31)
        on_step("finished spark-etl")
        on_report(await _report(core, rm, "after spark-etl finished (31 s later)"))
        on_step("reported")


def _nodes(first: int, last: int) -> list[si.NodeInfo]:
    return [
        si.NodeInfo(
            node_id=f"node-{i}",
            action=si.ActionFromRM.CREATE,
            schedulable_resource=si.Resource.of(memory=8 * GI, vcore=4_000),
        )
        for i in range(first, last)
    ]


def _applications(tasks: int) -> si.ApplicationRequest:
    return si.ApplicationRequest(
        rm_id=RM,
        new=[
            si.AddApplicationRequest(
                application_id="spark-etl",
                tags={"namespace": "batch"},  # the built-in tag rule: root.batch
                ugi=si.UserGroupInformation(user="demo"),
                placeholder_ask=si.Resource.of(memory=GI * tasks, vcore=500 * tasks),
                gang_scheduling_style="Soft",
            ),
            si.AddApplicationRequest(
                application_id="web-api",
                tags={"namespace": "service"},  # the built-in tag rule: root.service
                ugi=si.UserGroupInformation(user="demo"),
            ),
        ],
    )


async def _release_real_tasks(core: Core, rm: RecordingCallback) -> None:
    done = [a for a in rm.allocations if a.application_id == "spark-etl" and not a.placeholder]
    await core.update_allocation(
        si.AllocationRequest(
            rm_id=RM,
            releases=si.AllocationReleasesRequest(
                allocations_to_release=[
                    si.AllocationRelease(
                        application_id="spark-etl",
                        uuid=a.uuid,
                        termination_type=si.TerminationType.STOPPED_BY_RM,
                    )
                    for a in done
                ]
            ),
        )
    )


def _asks(app: str, kind: str, n: int, *, placeholder: bool) -> list[si.AllocationAsk]:
    group = "executors" if app == "spark-etl" else ""
    return [
        si.AllocationAsk(
            allocation_key=f"{app}-{kind}-{i}",
            application_id=app,
            resource_ask=si.Resource.of(memory=GI, vcore=500),
            max_allocations=1,
            task_group_name=group,
            placeholder=placeholder,
        )
        for i in range(n)
    ]


async def _report(core: Core, rm: RecordingCallback, moment: str) -> Report:
    dump = await core.state_dump()
    nodes = Section("Nodes", ("node", "capacity", "allocated", "available", "allocations"), [])
    apps = Section(
        "Applications", ("application", "queue", "state", "used", "pending", "allocations"), []
    )
    allocs = Section("Allocations", ("ask", "application", "node", "resource", "placeholder"), [])
    gangs = Section(
        "Placeholders", ("application", "task group", "count", "replaced", "timed out"), []
    )
    queues = Section("Queues", ("queue", "status", "max", "allocated", "pending"), [])
    for part in dump["partitions"]:
        nodes.rows.extend(
            (n["nodeID"], n["capacity"], n["allocated"], n["available"], len(n["allocations"]))
            for n in part["nodes"]
        )
        for a in [*part["applications"], *part["terminatedApplications"]]:
            apps.rows.append(_app_row(a))
            allocs.rows.extend(
                (
                    al["allocationKey"],
                    al["applicationId"],
                    al["nodeId"],
                    al["resource"],
                    "yes" if al["placeholder"] else "",
                )
                for al in a["allocations"]
            )
            gangs.rows.extend(
                (a["applicationID"], g["taskGroupName"], g["count"], g["replaced"], g["timedout"])
                for g in a["placeholderData"]
            )
        queues.rows.extend(_queue_rows(part["queues"]))
    states = Section(
        "Application states reported to the RM",
        ("application", "states"),
        [(a, " -> ".join(rm.app_states(a))) for a in ("spark-etl", "web-api")],
    )
    return Report(moment, [nodes, apps, allocs, gangs, queues, states])


def _app_row(a: dict[str, Any]) -> tuple[Any, ...]:
    return (
        a["applicationID"],
        a["queueName"],
        a["applicationState"],
        a["usedResource"],
        a["pendingResource"],
        len(a["allocations"]),
    )


def _queue_rows(root: dict[str, Any]) -> Sequence[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    stack = [root]
    while stack:
        q = stack.pop()
        rows.append(
            (
                q["queuename"],
                q["status"],
                q["maxResource"],
                q["allocatedResource"],
                q["pendingResource"],
            )
        )
        stack.extend(reversed(q["children"]))
    return rows
