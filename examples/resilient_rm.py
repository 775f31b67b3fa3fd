"""An RM that outlives its daemon: it reconnects, and recovers what it holds.

Run it: ``python examples/resilient_rm.py``. It starts ``scheduler serve`` on a free port,
connects with ``reconnect=`` and a ``recover=`` hook, and gets three allocations. Then the
daemon is killed (SIGKILL: it says nothing, and keeps nothing) and a new one is started on
the same address. The client reconnects by itself with backoff; the new daemon does not
know the RM's session, so the client calls the RM's ``recover``, which does what the SI's
recovery says: register again, send the applications, then the nodes with the allocations
the RM holds on them. The new core knows every one of them, and the RM goes on asking.

Had only the connection been lost (a network that broke, a daemon that cut off a slow RM)
while the daemon lived, the client would have resumed the RM's session instead: the daemon
keeps what it sends a Paused RM (for ``--rm-timeout``) and delivers it then, and the RM
notices nothing but ``connection_lost``.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import sys

import scheduler
import scheduler.client
from scheduler import si

RM = "rm-1"
GI = 1024**3
NODES = {"node-1": 4, "node-2": 4}  # node id -> GiB of memory

QUEUES_YAML = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: a
"""


class ResilientRM(scheduler.ResourceManagerCallback):
    """Keeps what it holds (its own record: the daemon keeps nothing on disk), and hears
    when its connection ends."""

    def __init__(self) -> None:
        self.held: dict[str, si.Allocation] = {}  # uuid -> allocation

    async def update_allocation(self, response: si.AllocationResponse) -> None:
        for alloc in response.new:
            self.held[alloc.uuid] = alloc
            print(f"allocated: {alloc.allocation_key} on {alloc.node_id}")
        for release in response.released:
            self.held.pop(release.uuid, None)

    async def connection_lost(self, closed: scheduler.client.ConnectionClosed) -> None:
        then = "the end" if closed.final else "reconnecting"
        print(f"connection lost ({closed.kind}): {then}")

    # ---------------------------------------------------------------- what it reports
    async def register(self, core: scheduler.client.RemoteCore) -> None:
        request = si.RegisterResourceManagerRequest(
            rm_id=RM, policy_group="default", version="1", config=QUEUES_YAML
        )
        await core.register_resource_manager(request, self)
        app = si.AddApplicationRequest(
            application_id="app-1",
            queue_name="root.a",
            partition_name="default",
            ugi=si.UserGroupInformation(user="alice"),
        )
        await core.update_application(si.ApplicationRequest(rm_id=RM, new=[app]))
        nodes = [
            si.NodeInfo(
                node_id=node_id,
                action=si.ActionFromRM.CREATE,
                schedulable_resource=si.Resource.of(memory=gib * GI, vcore=4000),
                existing_allocations=[a for a in self.held.values() if a.node_id == node_id],
            )
            for node_id, gib in NODES.items()
        ]
        await core.update_node(si.NodeRequest(rm_id=RM, nodes=nodes))

    async def recover(self, core: scheduler.client.RemoteCore) -> None:
        """The hook ``connect(recover=...)`` calls when the daemon lost the RM's session:
        the SI's recovery, from the RM's own record."""
        print(f"recovering {len(self.held)} allocations")
        await self.register(core)

    async def ask(self, core: scheduler.client.RemoteCore, key: str, count: int) -> None:
        ask = si.AllocationAsk(
            allocation_key=key,
            application_id="app-1",
            partition_name="default",
            resource_ask=si.Resource.of(memory=GI, vcore=1000),
            max_allocations=count,
        )
        await core.update_allocation(si.AllocationRequest(rm_id=RM, asks=[ask]))
        await core.settle()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def start_daemon(port: int) -> asyncio.subprocess.Process:
    """``scheduler serve`` on ``port`` (its REST API on a free port, no gRPC)."""
    daemon = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "scheduler", "serve", "--native", f"tcp://127.0.0.1:{port}"),
        *("--http", "127.0.0.1:0", "--grpc", "", "--log-level", "ERROR"),
        stdout=asyncio.subprocess.PIPE,
    )
    assert daemon.stdout is not None
    async with asyncio.timeout(30):
        while (await daemon.stdout.readline()).decode().strip() != "ready":
            if daemon.returncode is not None:
                raise SystemExit(f"the daemon did not start (is port {port} free?)")
    return daemon


async def main() -> None:
    port = free_port()
    daemon = await start_daemon(port)
    rm = ResilientRM()
    reconnect = scheduler.client.Reconnect(first=0.1, most=2.0)
    try:
        async with scheduler.client.connect(
            f"tcp://127.0.0.1:{port}", reconnect=reconnect, recover=rm.recover, timeout=30
        ) as core:
            await rm.register(core)
            await rm.ask(core, "task", 3)
            print(f"the RM holds {len(rm.held)} allocations")

            print("killing the daemon (SIGKILL: no goodbye, nothing kept)")
            daemon.kill()
            await daemon.wait()
            daemon = await start_daemon(port)  # a new one, on the same address

            await core.settle()  # waits while the client reconnects and the RM recovers
            app = await core.get_application("default", "app-1")
            print(f"the new daemon holds {len(app['allocations'])} allocations")
            await rm.ask(core, "more", 1)
            print(f"the RM holds {len(rm.held)} allocations, reconnected {core.reconnects}x")
    finally:
        daemon.send_signal(signal.SIGTERM)
        print(f"daemon exited with {await daemon.wait()}")


if __name__ == "__main__":
    asyncio.run(main())
