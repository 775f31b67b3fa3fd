"""Permit gangs (Koordinator's gang scheduling): members declared through ask tags are
placed tentatively and reach the RM together, once every gang of their GangGroup has its
minimum.

Run it: ``python examples/permit_gang.py``. It runs on a manual clock, so the waiting time
passes when the script says so.

1. A training job: a GangGroup of two gangs, ``train/driver`` (1 member) and
   ``train/workers`` (3 members). The cluster has room for three members: they are placed
   but the RM hears nothing, and the application query shows the gangs' progress.
2. A node is added: the last member fits, and all four arrive in one response.
3. A Strict gang with a 30 s waiting time never gets its third member: when the time is
   up its members are rejected with a reason naming the gang and ``timeout``.
"""

from __future__ import annotations

import asyncio

import scheduler
from scheduler import gang_tags, si
from scheduler.testing import ManualClock

RM = "rm-1"
GI = 1024**3
MEMBER = {"memory": 2 * GI, "vcore": 1000}
GROUP = ["train/driver", "train/workers"]

QUEUES_YAML = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: jobs
"""


class PrintingRM(scheduler.ResourceManagerCallback):
    async def update_allocation(self, response: si.AllocationResponse) -> None:
        if response.new:
            keys = sorted(a.allocation_key for a in response.new)
            print(f"one response, {len(keys)} allocations: {', '.join(keys)}")
        for ask in response.rejected:
            print(f"rejected ask {ask.allocation_key}: {ask.reason}")

    async def send_event(self, events: list[si.EventRecord]) -> None:
        for event in events:
            if event.reason.startswith("Gang"):
                print(f"event {event.reason} ({event.group_id})")


def member(key: str, app_id: str, tags: dict[str, str], count: int = 1) -> si.AllocationAsk:
    return si.AllocationAsk(
        allocation_key=key,
        application_id=app_id,
        partition_name="default",
        resource_ask=si.Resource.of(**MEMBER),
        max_allocations=count,
        tags={**tags, "kubernetes.io/meta/namespace": "train"},
    )


def node(node_id: str, members: int) -> si.NodeInfo:
    return si.NodeInfo(
        node_id=node_id,
        action=si.ActionFromRM.CREATE,
        schedulable_resource=si.Resource.of(**{k: v * members for k, v in MEMBER.items()}),
    )


async def main() -> None:
    clock = ManualClock()
    async with scheduler.start_scheduler(clock=clock) as core:
        await core.register_resource_manager(
            si.RegisterResourceManagerRequest(
                rm_id=RM, policy_group="default", version="1", config=QUEUES_YAML
            ),
            PrintingRM(),
        )
        await core.update_node(si.NodeRequest(rm_id=RM, nodes=[node("node-1", 3)]))
        await core.update_application(
            si.ApplicationRequest(
                rm_id=RM,
                new=[
                    si.AddApplicationRequest(
                        application_id=app_id,
                        queue_name="root.jobs",
                        partition_name="default",
                        ugi=si.UserGroupInformation(user="alice"),
                    )
                    for app_id in ("training", "sweep")
                ],
            )
        )

        print("--- a GangGroup of a driver and three workers; room for three members")
        driver = gang_tags("driver", 1, groups=GROUP)
        workers = gang_tags("workers", 3, mode="NonStrict", groups=GROUP)
        asks = [member("driver", "training", driver), member("worker", "training", workers, 3)]
        await core.update_allocation(si.AllocationRequest(rm_id=RM, asks=asks))
        await core.settle()
        app = await core.get_application("default", "training")
        for gang in app["gangs"]:
            print(f"{gang['gangId']}: placed {gang['placed']}, bound {gang['bound']}")

        print("--- a node is added")
        await core.update_node(si.NodeRequest(rm_id=RM, nodes=[node("node-2", 3)]))
        await core.settle()
        app = await core.get_application("default", "training")
        for gang in app["gangs"]:
            print(f"{gang['gangId']}: satisfied {gang['satisfied']}, bound {gang['bound']}")

        print("--- a Strict gang of three with a 30s waiting time gets two members")
        sweep = gang_tags("sweep", 3, waiting_time="30s")
        asks = [member("trial", "sweep", sweep, 2)]
        await core.update_allocation(si.AllocationRequest(rm_id=RM, asks=asks))
        await core.settle()
        await clock.advance(30)
        await core.settle()


if __name__ == "__main__":
    asyncio.run(main())
