"""The smallest complete resource manager: one node, one application, one ask for three.

Run it: ``python examples/minimal_rm.py``.
"""

from __future__ import annotations

import asyncio

import scheduler
from scheduler import si

RM = "rm-1"
GI = 1024**3  # SI messages carry plain integers: memory in bytes, vcore in milli-vcores

# Without an ACL nobody may submit: every application would be rejected.
QUEUES_YAML = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: a
            resources:
              max: {memory: 4Gi, vcore: 2}
"""


class PrintingRM(scheduler.ResourceManagerCallback):
    """Prints every outcome, rejections with their reasons: the core says "no" only here."""

    async def update_node(self, response: si.NodeResponse) -> None:
        for node in response.accepted:
            print(f"node accepted: {node.node_id}")
        for bad_node in response.rejected:
            print(f"node REJECTED: {bad_node.node_id}: {bad_node.reason}")

    async def update_application(self, response: si.ApplicationResponse) -> None:
        for app in response.accepted:
            print(f"application accepted: {app.application_id}")
        for bad_app in response.rejected:
            print(f"application REJECTED: {bad_app.application_id}: {bad_app.reason}")
        for change in response.updated:
            print(f"application {change.application_id} is {change.state}")

    async def update_allocation(self, response: si.AllocationResponse) -> None:
        for alloc in response.new:
            print(f"allocated: {alloc.allocation_key} on {alloc.node_id}")
        for ask in response.rejected:
            print(f"ask REJECTED: {ask.allocation_key}: {ask.reason}")
        for release in response.released:
            print(f"released: {release.uuid} ({release.termination_type.name})")


async def main() -> None:
    async with scheduler.start_scheduler() as core:
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
                        action=si.ActionFromRM.CREATE,  # the default action does nothing
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
                        resource_ask=si.Resource.of(memory=1 * GI, vcore=1000),
                        max_allocations=3,  # the queue's max (2 vcores) lets two run
                    )
                ],
            )
        )
        await core.settle()  # everything above, and all it caused, has happened
        queue = await core.get_queue("default", "root.a")
        for key in ("queuename", "maxResource", "allocatedResource", "pendingResource"):
            print(f"{key}: {queue[key]}")


if __name__ == "__main__":
    asyncio.run(main())
