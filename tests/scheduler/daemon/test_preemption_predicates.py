"""SI 1.3's preemption predicates over both transports: the core's question
(``CheckPreemptionPredicates``, asked of the RM's callback actor) reaches a remote RM whose
callback overrides ``preemption_predicates`` and its answer comes back, bounded by the
daemon's predicates timeout; an RM gone or silent refuses, and an RM that does not name
the method (an older client) is never asked and taken to accept. The daemon runs in this
process, so the test can ask the callback actor of the RM it serves."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
from anyio.abc import SocketAttribute

import scheduler
from scheduler import si
from scheduler.client import RemoteCore, connect
from scheduler.client import _grpc as grpc_client
from scheduler.client import _native as native_client
from scheduler.daemon._grpc import GrpcServer
from scheduler.daemon._native import Limits, NativeServer
from scheduler.testing import RecordingCallback

from ..core.test_callback_actor import QUESTION, ask_preemption

TRANSPORTS = ["native", "grpc"]
REFUSED = si.PreemptionPredicatesResponse(success=False, index=-1)


@asynccontextmanager
async def serving(
    predicates_timeout: float = 30.0,
) -> AsyncIterator[tuple[scheduler.Core, dict[str, str]]]:
    """A core served on the native transport and gRPC; yields it and the two targets."""
    async with scheduler.start_scheduler() as core:
        native = NativeServer(core, limits=Limits(predicates_timeout=predicates_timeout))
        grpc_server = GrpcServer(native)
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        port = listener.extra(SocketAttribute.local_port)
        targets = {"native": f"tcp://127.0.0.1:{port}"}
        targets["grpc"] = await grpc_server.start("127.0.0.1:0")
        async with listener, anyio.create_task_group() as tg:
            tg.start_soon(native.serve, listener)
            try:
                yield core, targets
            finally:
                await native.shut_down("the test is over", 1)
                await grpc_server.shut_down("the test is over", 1)
                tg.cancel_scope.cancel()


async def register(remote: RemoteCore, rm: scheduler.ResourceManagerCallback) -> None:
    await remote.register_resource_manager(si.RegisterResourceManagerRequest(rm_id="rm"), rm)


class Checking(RecordingCallback):
    """Answers with ``answer`` and records what it was asked."""

    def __init__(self, answer: si.PreemptionPredicatesResponse) -> None:
        super().__init__()
        self.answer = answer
        self.asked: list[si.PreemptionPredicatesArgs] = []

    async def preemption_predicates(
        self, args: si.PreemptionPredicatesArgs
    ) -> si.PreemptionPredicatesResponse:
        self.asked.append(args)
        return self.answer


ARGS = si.PreemptionPredicatesArgs(
    allocation_key="ask-1",
    node_id="n1",
    preempt_allocation_keys=["v-0", "v-1", "v-2", "v-3"],
    start_index=1,
)


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_rm_is_asked_over_the_wire_and_its_answer_comes_back(transport: str) -> None:
    async with serving() as (core, targets):
        for answer in (
            si.PreemptionPredicatesResponse(success=True, index=3),
            si.PreemptionPredicatesResponse(success=False, index=-1),
        ):
            rm = Checking(answer)
            async with connect(targets[transport]) as remote:
                await register(remote, rm)
                assert await ask_preemption(core) == answer
            assert rm.asked == [ARGS]


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_rm_that_does_not_name_the_method_is_not_asked_and_accepts(
    transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client older than preemption_predicates does not name it at registration: the
    daemon never asks it, and the core takes it to accept (index = start_index)."""

    def older(callback: scheduler.ResourceManagerCallback) -> list[str]:
        return [m for m in own(callback) if m != "preemption_predicates"]

    own = native_client.overridden
    monkeypatch.setattr(native_client, "overridden", older)
    monkeypatch.setattr(grpc_client, "overridden", older)
    rm = Checking(si.PreemptionPredicatesResponse(success=False, index=-1))
    async with serving() as (core, targets), connect(targets[transport]) as remote:
        await register(remote, rm)
        answer = await ask_preemption(core)
        assert answer == si.PreemptionPredicatesResponse(success=True, index=QUESTION.start_index)
        assert rm.asked == []


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_rm_that_does_not_answer_in_time_refuses(transport: str) -> None:
    late = asyncio.Event()

    class Slow(Checking):
        async def preemption_predicates(
            self, args: si.PreemptionPredicatesArgs
        ) -> si.PreemptionPredicatesResponse:
            await late.wait()  # past the daemon's predicates timeout
            return await super().preemption_predicates(args)

    rm = Slow(si.PreemptionPredicatesResponse(success=True, index=1))
    async with (
        serving(predicates_timeout=0.2) as (core, targets),
        connect(targets[transport]) as remote,
    ):
        await register(remote, rm)
        assert await asyncio.wait_for(ask_preemption(core), 10) == REFUSED
        late.set()
        await remote.settle()  # the late answer is dropped
        assert len(rm.asked) == 1
        rm.answer = si.PreemptionPredicatesResponse(success=True, index=2)
        assert await ask_preemption(core) == rm.answer  # and the next one is heard


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_rm_that_disconnects_while_asked_refuses(transport: str) -> None:
    asked = asyncio.Event()

    class Gone(RecordingCallback):
        async def preemption_predicates(
            self, args: si.PreemptionPredicatesArgs
        ) -> si.PreemptionPredicatesResponse:
            asked.set()
            await asyncio.Event().wait()  # never answers: the connection goes first
            raise AssertionError("not reached")

    async with serving() as (core, targets):
        async with connect(targets[transport]) as remote:
            await register(remote, Gone())
            pending = asyncio.create_task(ask_preemption(core))
            await asyncio.wait_for(asked.wait(), 10)
        # well before the 30 s predicates timeout
        assert await asyncio.wait_for(pending, 10) == REFUSED


@pytest.mark.asyncio
@pytest.mark.logs_errors("the RM's callback raised")
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_rm_answer_that_is_not_a_response_refuses_and_the_rm_stays(
    transport: str,
) -> None:
    class Sloppy(Checking):
        async def preemption_predicates(  # type: ignore[override]
            self, args: si.PreemptionPredicatesArgs
        ) -> object:
            await super().preemption_predicates(args)
            return True if len(self.asked) == 1 else self.answer

    rm = Sloppy(si.PreemptionPredicatesResponse(success=True, index=1))
    async with serving() as (core, targets), connect(targets[transport]) as remote:
        await register(remote, rm)
        assert await ask_preemption(core) == REFUSED
        assert await ask_preemption(core) == rm.answer  # the connection is still there
