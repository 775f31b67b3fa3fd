"""Placement rules and ACLs of ``examples/queues.yaml`` at work.

Run it: ``python examples/queues_demo.py``. Four users submit an application each; the
placement rules put each in a queue (creating dynamic ones) or the ACLs reject it, with
the reason the RM callback receives.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import scheduler
from scheduler import si

RM = "rm-1"
GI = 1024**3
CONFIG = Path(__file__).with_name("queues.yaml")

# (application id, user, groups, queue it names, tags)
SUBMISSIONS = [
    ("billing", "alice", [], "root.prod", {}),  # rule 1: the queue it names
    ("etl", "dave", ["developers"], "", {"namespace": "analytics"}),  # rule 2: its namespace
    ("notebook", "erin", ["developers"], "", {}),  # rule 3: a queue of its user's own
    ("intruder", "mallory", [], "root.prod", {}),  # no rule names a queue whose ACLs let mallory in
]


class PlacementRM(scheduler.ResourceManagerCallback):
    async def update_application(self, response: si.ApplicationResponse) -> None:
        for app in response.accepted:
            print(f"accepted: {app.application_id}")
        for bad_app in response.rejected:
            print(f"REJECTED: {bad_app.application_id}: {bad_app.reason}")


async def main() -> None:
    async with scheduler.start_scheduler() as core:
        await core.register_resource_manager(
            si.RegisterResourceManagerRequest(
                rm_id=RM, policy_group="default", version="1", config=CONFIG.read_text()
            ),
            PlacementRM(),
        )
        await core.update_node(
            si.NodeRequest(
                rm_id=RM,
                nodes=[
                    si.NodeInfo(
                        node_id="node-1",
                        action=si.ActionFromRM.CREATE,
                        schedulable_resource=si.Resource.of(memory=64 * GI, vcore=32_000),
                    )
                ],
            )
        )
        await core.update_application(
            si.ApplicationRequest(
                rm_id=RM,
                new=[
                    si.AddApplicationRequest(
                        application_id=app_id,
                        queue_name=queue,
                        partition_name="default",
                        ugi=si.UserGroupInformation(user=user, groups=groups),
                        tags=tags,
                    )
                    for app_id, user, groups, queue, tags in SUBMISSIONS
                ],
            )
        )
        await core.settle()

        print("--- where each application went (New: no asks yet)")
        for app_id, user, *_ in SUBMISSIONS:
            app = await core.get_application("default", app_id)
            where = app["queueName"] or "-"
            print(f"{app_id} ({user}): {app['applicationState']} in {where}")

        print("--- the configured quotas, in SI units (bytes, milli-vcores)")
        prod = await core.get_queue("default", "root.prod")
        print(f"root.prod guaranteed {prod['guaranteedResource']} max {prod['maxResource']}")
        root = await core.get_queue("default", "root")
        print("queues:", ", ".join(sorted(_paths(root))))


def _paths(queue: dict[str, object]) -> list[str]:
    children = queue.get("children") or []
    assert isinstance(children, list)
    return [str(queue["queuename"])] + [p for child in children for p in _paths(child)]


if __name__ == "__main__":
    asyncio.run(main())
