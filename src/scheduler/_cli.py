"""The ``scheduler`` command line: the CLI owns the terminal and the log sinks."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import Any

from loguru import logger

from scheduler import si
from scheduler._core import Core, start_scheduler
from scheduler.testing import ManualClock, RecordingCallback

__all__ = ["main"]

RM = "demo-rm"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scheduler", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log to stderr")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run a short in-process scenario and print what happened")
    demo.add_argument("--nodes", type=int, default=3, help="nodes to register (default 3)")
    demo.add_argument("--tasks", type=int, default=4, help="asks per application (default 4)")
    args = parser.parse_args(argv)
    logger.remove()
    if args.verbose:
        logger.add(sys.stderr, level="DEBUG")
    if args.command == "demo":
        asyncio.run(run_demo(nodes=args.nodes, tasks=args.tasks, out=sys.stdout))
    return 0


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table with a title line, aligned columns and a rule under the header."""
    cells = [[str(c) for c in header], *[[_cell(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = [
        title,
        "  ".join(h.ljust(w) for h, w in zip(cells[0], widths, strict=True)),
        "  ".join("-" * w for w in widths),
    ]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells[1:]]
    if not rows:
        lines.append("(none)")
    return "\n".join(lines) + "\n"


def _cell(value: Any) -> str:
    if isinstance(value, dict):
        return " ".join(f"{k}={v}" for k, v in sorted(value.items())) or "-"
    return str(value)


async def run_demo(*, nodes: int, tasks: int, out: Any) -> None:
    """Nodes, a gang and a plain application in two dynamic queues: the gang's placeholders,
    their replacement by real tasks through the release handshake, a release, completion."""
    clock = ManualClock()
    rm = RecordingCallback()
    async with start_scheduler(clock=clock) as core:
        await core.register_resource_manager(
            si.RegisterResourceManagerRequest(rm_id=RM, policy_group="default", version="demo"), rm
        )
        await core.update_node(
            si.NodeRequest(
                rm_id=RM,
                nodes=[
                    si.NodeInfo(
                        node_id=f"node-{i}",
                        action=si.ActionFromRM.CREATE,
                        schedulable_resource=si.Resource.of(memory=8_000, vcore=4_000),
                    )
                    for i in range(1, nodes + 1)
                ],
            )
        )
        await core.update_application(
            si.ApplicationRequest(
                rm_id=RM,
                new=[
                    si.AddApplicationRequest(
                        application_id="spark-etl",
                        queue_name="root.batch",
                        ugi=si.UserGroupInformation(user="demo"),
                        placeholder_ask=si.Resource.of(memory=1_000 * tasks, vcore=500 * tasks),
                        gang_scheduling_style="Soft",
                    ),
                    si.AddApplicationRequest(
                        application_id="web-api",
                        queue_name="root.service",
                        ugi=si.UserGroupInformation(user="demo"),
                    ),
                ],
            )
        )
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
        out.write(await _report(core, rm, "after placing the gang's placeholders"))
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
        out.write(await _report(core, rm, "after the real tasks replaced the placeholders"))
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
        await core.settle()
        await clock.advance(31)
        out.write(await _report(core, rm, "after spark-etl finished (31 s later)"))


def _asks(app: str, kind: str, n: int, *, placeholder: bool) -> list[si.AllocationAsk]:
    group = "executors" if app == "spark-etl" else ""
    return [
        si.AllocationAsk(
            allocation_key=f"{app}-{kind}-{i}",
            application_id=app,
            resource_ask=si.Resource.of(memory=1_000, vcore=500),
            max_allocations=1,
            task_group_name=group,
            placeholder=placeholder,
        )
        for i in range(n)
    ]


async def _report(core: Core, rm: RecordingCallback, moment: str) -> str:
    dump = await core.state_dump()
    node_rows, app_rows, alloc_rows, queue_rows, gang_rows = [], [], [], [], []
    for part in dump["partitions"]:
        for n in part["nodes"]:
            node_rows.append(
                (n["nodeID"], n["capacity"], n["allocated"], n["available"], len(n["allocations"]))
            )
        for a in [*part["applications"], *part["terminatedApplications"]]:
            app_rows.append(
                (
                    a["applicationID"],
                    a["queueName"],
                    a["applicationState"],
                    a["usedResource"],
                    a["pendingResource"],
                    len(a["allocations"]),
                )
            )
            alloc_rows += [
                (
                    al["allocationKey"],
                    al["applicationId"],
                    al["nodeId"],
                    al["resource"],
                    "yes" if al["placeholder"] else "",
                )
                for al in a["allocations"]
            ]
            gang_rows += [
                (a["applicationID"], g["taskGroupName"], g["count"], g["replaced"], g["timedout"])
                for g in a["placeholderData"]
            ]
        stack = [part["queues"]]
        while stack:
            q = stack.pop()
            queue_rows.append(
                (
                    q["queuename"],
                    q["status"],
                    q["maxResource"],
                    q["allocatedResource"],
                    q["pendingResource"],
                )
            )
            stack.extend(reversed(q["children"]))
    states = {a: " -> ".join(rm.app_states(a)) for a in ("spark-etl", "web-api")}
    return (
        "\n".join(
            [
                f"== {moment} ==\n",
                table(
                    "Nodes",
                    ("node", "capacity", "allocated", "available", "allocations"),
                    node_rows,
                ),
                table(
                    "Applications",
                    ("application", "queue", "state", "used", "pending", "allocations"),
                    app_rows,
                ),
                table(
                    "Allocations",
                    ("ask", "application", "node", "resource", "placeholder"),
                    alloc_rows,
                ),
                table(
                    "Placeholders",
                    ("application", "task group", "count", "replaced", "timed out"),
                    gang_rows,
                ),
                table("Queues", ("queue", "status", "max", "allocated", "pending"), queue_rows),
                table(
                    "Application states reported to the RM",
                    ("application", "states"),
                    sorted(states.items()),
                ),
            ]
        )
        + "\n"
    )
