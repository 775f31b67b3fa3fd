"""An RM that talks to a scheduler daemon over the network.

Run it: ``python examples/remote_rm.py``. It starts ``scheduler serve`` itself (as you
would run it in a terminal, on a free port), connects with ``scheduler.client.connect``,
registers, adds a node, asks for two allocations, queries the queue, and stops the daemon
with SIGTERM. The RM's code is the same as in-process: only ``connect(...)`` replaces
``start_scheduler()``.
"""

from __future__ import annotations

import asyncio
import signal
import sys

import scheduler.client
from scheduler import si

RM = "rm-1"
GI = 1024**3

QUEUES_YAML = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: a
"""


class PrintingRM(scheduler.ResourceManagerCallback):
    async def update_node(self, response: si.NodeResponse) -> None:
        for node in response.accepted:
            print(f"node accepted: {node.node_id}")

    async def update_allocation(self, response: si.AllocationResponse) -> None:
        for alloc in response.new:
            print(f"allocated: {alloc.allocation_key} on {alloc.node_id}")
        for ask in response.rejected:
            print(f"ask REJECTED: {ask.allocation_key}: {ask.reason}")


async def start_daemon() -> tuple[asyncio.subprocess.Process, str]:
    """``scheduler serve`` on free ports; returns it and the native address it bound."""
    daemon = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "scheduler",
        "serve",
        "--native",
        "tcp://127.0.0.1:0",
        "--http",  # a free port for the REST API too, and no gRPC: 9080 and 9090 may be taken
        "127.0.0.1:0",
        "--grpc",
        "",
        "--log-level",
        "WARNING",
        stdout=asyncio.subprocess.PIPE,
    )
    assert daemon.stdout is not None
    address = ""
    async with asyncio.timeout(30):
        while (line := (await daemon.stdout.readline()).decode().strip()) != "ready":
            if line.startswith("native "):
                address = line.split(" ", 1)[1]
            if not line and daemon.returncode is not None:
                raise SystemExit("the daemon did not start")
    print("daemon listening (native transport)")
    return daemon, address


async def main() -> None:
    daemon, address = await start_daemon()
    try:
        async with scheduler.client.connect(address) as core:
            await core.register_resource_manager(
                si.RegisterResourceManagerRequest(
                    rm_id=RM, policy_group="default", version="1", config=QUEUES_YAML
                ),
                PrintingRM(),
            )
            await core.update_node(
                si.NodeRequest(
                    rm_id=RM,
                    nodes=[
                        si.NodeInfo(
                            node_id="node-1",
                            action=si.ActionFromRM.CREATE,
                            schedulable_resource=si.Resource.of(memory=8 * GI, vcore=4000),
                        )
                    ],
                )
            )
            await core.update_application(
                si.ApplicationRequest(
                    rm_id=RM,
                    new=[
                        si.AddApplicationRequest(
                            application_id="app-1",
                            queue_name="root.a",
                            partition_name="default",
                            ugi=si.UserGroupInformation(user="alice"),
                        )
                    ],
                )
            )
            await core.update_allocation(
                si.AllocationRequest(
                    rm_id=RM,
                    asks=[
                        si.AllocationAsk(
                            allocation_key="task",
                            application_id="app-1",
                            partition_name="default",
                            resource_ask=si.Resource.of(memory=GI, vcore=1000),
                            max_allocations=2,
                        )
                    ],
                )
            )
            await core.settle()  # the daemon settled, and every callback it caused ran here
            queue = await core.get_queue("default", "root.a")
            print(f"allocatedResource: {queue['allocatedResource']}")
    finally:
        daemon.send_signal(signal.SIGTERM)
        print(f"daemon exited with {await daemon.wait()}")


if __name__ == "__main__":
    asyncio.run(main())
