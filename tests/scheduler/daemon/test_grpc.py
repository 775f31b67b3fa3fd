"""The SI over gRPC (``si.proto``, ``scheduler serve --grpc``): the codec's round trip of
every SI message, and the daemon scenario of ``test_daemon`` driven over ``grpc://``."""

from __future__ import annotations

import asyncio
import importlib
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import msgspec
import pytest

import scheduler
from scheduler import si
from scheduler.client._grpc import connect_grpc
from scheduler.si import _grpc_codec as codec
from scheduler.si import si_pb2 as pb
from scheduler.testing import ManualClock, RecordingCallback, Scenario

from ..si.test_si import SPEC_FIELDS
from .test_daemon import QUEUES, REPLACED, Daemon, gang_story

# ===================================================================== the codec
Q = si.Quantity
R = si.Resource.of


def _full(name: str) -> msgspec.Struct:
    """An instance of SI message ``name`` with every field set to a value that is not its
    default (nested messages, lists and maps included)."""
    cls: Any = getattr(si, name)
    values: dict[str, Any] = {}
    samples = _SAMPLES
    for field in msgspec.structs.fields(cls):
        values[field.name] = samples.get((name, field.name), samples.get(("*", field.name)))
        if values[field.name] is None:
            raise AssertionError(f"no sample for {name}.{field.name}")
    result: msgspec.Struct = cls(**values)
    return result


ASK = si.AllocationAsk(
    allocation_key="k",
    application_id="app",
    partition_name="default",
    resource_ask=R(memory=10, vcore=1),
    max_allocations=2,
    priority=-3,
    execution_timeout_milliseconds=1 << 40,
    tags={"kubernetes.io/meta/namespace": "ns"},
    task_group_name="tg",
    placeholder=True,
    originator=True,
    preemption_policy=si.PreemptionPolicy(allow_preempt_self=True, allow_preempt_other=True),
)
ALLOCATION = si.Allocation(
    allocation_key="k",
    allocation_tags={"a": "b"},
    uuid="u-1",
    resource_per_alloc=R(memory=1 << 62, vcore=0),
    priority=7,
    node_id="n1",
    application_id="app",
    partition_name="default",
    task_group_name="tg",
    placeholder=True,
)
RELEASE = si.AllocationRelease(
    partition_name="default",
    application_id="app",
    uuid="u",
    termination_type=si.TerminationType.PLACEHOLDER_REPLACED,
    message="m",
    allocation_key="k",
)
ASK_RELEASE = si.AllocationAskRelease(
    partition_name="default",
    application_id="app",
    allocation_key="k",
    termination_type=si.TerminationType.TIMEOUT,
    message="m",
)
_SAMPLES: dict[tuple[str, str], Any] = {
    ("*", "rm_id"): "rm-1",
    ("*", "version"): "1.0",
    ("*", "policy_group"): "queues",
    ("*", "build_info"): {"date": "today"},
    ("*", "config"): "partitions: []",
    ("*", "extra_config"): {"log.level": "debug"},
    ("*", "asks"): [ASK, si.AllocationAsk(allocation_key="empty")],
    ("*", "releases"): si.AllocationReleasesRequest(
        allocations_to_release=[RELEASE], allocation_asks_to_release=[ASK_RELEASE]
    ),
    ("*", "new"): None,
    ("AllocationResponse", "new"): [ALLOCATION],
    ("ApplicationRequest", "new"): [
        si.AddApplicationRequest(
            application_id="app",
            queue_name="root.a",
            partition_name="default",
            ugi=si.UserGroupInformation(user="u", groups=["g1", "g2"]),
            tags={"t": "v"},
            execution_timeout_milliseconds=5,
            placeholder_ask=R(memory=3),
            gang_scheduling_style="Hard",
        )
    ],
    ("*", "remove"): [si.RemoveApplicationRequest(application_id="app", partition_name="p")],
    ("*", "nodes"): [
        si.NodeInfo(
            node_id="n1",
            action=si.ActionFromRM.DRAIN_TO_SCHEDULABLE,
            attributes={si.HOST_NAME: "h"},
            schedulable_resource=R(memory=100, vcore=10),
            occupied_resource=si.Resource(),  # present but empty: kept as such
            existing_allocations=[ALLOCATION],
        )
    ],
    ("*", "released"): [RELEASE],
    ("*", "released_asks"): [ASK_RELEASE],
    ("AllocationResponse", "rejected"): [
        si.RejectedAllocationAsk(allocation_key="k", application_id="a", reason="r")
    ],
    ("ApplicationResponse", "rejected"): [si.RejectedApplication(application_id="a", reason="r")],
    ("NodeResponse", "rejected"): [si.RejectedNode(node_id="n", reason="r")],
    ("ApplicationResponse", "accepted"): [si.AcceptedApplication(application_id="a")],
    ("NodeResponse", "accepted"): [si.AcceptedNode(node_id="n")],
    ("*", "updated"): [
        si.UpdatedApplication(
            application_id="a", state="Running", state_transition_timestamp=-1, message="m"
        )
    ],
    ("*", "application_id"): "app",
    ("*", "state"): "Running",
    ("UpdateContainerSchedulingStateRequest", "state"): si.SchedulingState.FAILED,
    ("*", "state_transition_timestamp"): 123,
    ("*", "message"): "hello",
    ("*", "reason"): "why",
    ("*", "node_id"): "n1",
    ("*", "resources"): {"memory": Q(value=-(1 << 63)), "vcore": Q(value=(1 << 63) - 1)},
    ("*", "value"): 42,
    ("*", "allocation_key"): "k",
    ("*", "partition_name"): "default",
    ("*", "resource_ask"): R(memory=1),
    ("*", "max_allocations"): 3,
    ("*", "priority"): 2,
    ("*", "execution_timeout_milliseconds"): 9,
    ("*", "tags"): {"a": "b", "c": ""},
    ("*", "task_group_name"): "tg",
    ("*", "placeholder"): True,
    ("*", "originator"): True,
    ("*", "preemption_policy"): si.PreemptionPolicy(allow_preempt_other=True),
    ("*", "allow_preempt_self"): True,
    ("*", "allow_preempt_other"): True,
    ("*", "queue_name"): "root.a",
    ("*", "ugi"): si.UserGroupInformation(user="u"),
    ("*", "placeholder_ask"): R(vcore=1),
    ("*", "gang_scheduling_style"): "Soft",
    ("*", "user"): "alice",
    ("*", "groups"): ["a", "b"],
    ("*", "allocation_tags"): {"x": "y"},
    ("*", "uuid"): "uuid-1",
    ("*", "resource_per_alloc"): R(memory=5),
    ("*", "termination_type"): si.TerminationType.STOPPED_BY_RM,
    ("*", "allocations_to_release"): [RELEASE],
    ("*", "allocation_asks_to_release"): [ASK_RELEASE],
    ("*", "action"): si.ActionFromRM.CREATE,
    ("*", "attributes"): {"si/os": "linux"},
    ("*", "schedulable_resource"): R(memory=10),
    ("*", "occupied_resource"): R(memory=1),
    ("*", "existing_allocations"): [ALLOCATION],
    ("*", "allocate"): True,
    ("*", "preempt_allocation_keys"): ["v-1", "v-2", "v-3"],
    ("*", "start_index"): 1,
    ("*", "success"): True,
    ("*", "index"): 2,
    ("*", "type"): si.EventRecordType.QUEUE,
    ("*", "object_id"): "o",
    ("*", "group_id"): "g",
    ("*", "timestamp_nano"): 1_700_000_000_000_000_000,
}


def test_every_si_message_has_its_proto_message() -> None:
    structs = {
        name
        for name in si.__all__
        if isinstance(getattr(si, name), type) and issubclass(getattr(si, name), msgspec.Struct)
    }
    assert set(codec.MESSAGES) == structs == set(SPEC_FIELDS)
    for name in structs:
        assert hasattr(pb, name), name


@pytest.mark.parametrize("name", codec.MESSAGES)
def test_round_trip_of_every_si_message(name: str) -> None:
    cls: Any = getattr(si, name)
    for struct in (cls(), _full(name)):
        message = codec.to_proto(struct)
        assert type(message) is getattr(pb, name)
        wire = message.SerializeToString()
        back = codec.from_proto(type(message).FromString(wire))
        assert back == struct
        assert type(back) is cls
        # Enums come back as the SI enums, not as plain ints.
        for field in msgspec.structs.fields(cls):
            value = getattr(back, field.name)
            if isinstance(getattr(struct, field.name), si.TerminationType | si.ActionFromRM):
                assert type(value) is type(getattr(struct, field.name))


def test_the_proto_field_numbers_are_the_specs() -> None:
    ask = pb.AllocationAsk.DESCRIPTOR.fields_by_name
    assert ask["originator"].number == 11 and ask["originator"].json_name == "Originator"
    allocation = pb.Allocation.DESCRIPTOR.fields_by_name
    assert allocation["node_id"].number == 8 and 7 not in {f.number for f in allocation.values()}
    state = pb.UpdateContainerSchedulingStateRequest.DESCRIPTOR.fields_by_name
    assert state["application_id"].json_name == "applicartionID"
    config = pb.UpdateConfigurationRequest.DESCRIPTOR.fields_by_name
    assert config["rm_id"].number == 2
    assert pb.NodeInfo.DRAIN_TO_SCHEDULABLE == 5
    assert pb.EventRecord.QUEUE == 4
    assert pb.TerminationType.Value("PLACEHOLDER_REPLACED") == 4
    preemption = pb.PreemptionPredicatesArgs.DESCRIPTOR.fields_by_name
    assert [(f, preemption[f].number) for f in preemption] == [
        ("allocation_key", 1),
        ("node_id", 2),
        ("preempt_allocation_keys", 3),
        ("start_index", 4),
    ]
    answer = pb.PreemptionPredicatesResponse.DESCRIPTOR.fields_by_name
    assert [(f, answer[f].number) for f in answer] == [("success", 1), ("index", 2)]


def test_the_spec_json_names_match_si_py() -> None:
    """The proto's json_name of each field is si.py's wire name (the spec's spelling)."""
    for name in codec.MESSAGES:
        cls: Any = getattr(si, name)
        fields = getattr(pb, name).DESCRIPTOR.fields_by_name
        for field in msgspec.structs.fields(cls):
            assert fields[field.name].json_name == field.encode_name, (name, field.name)


def test_a_non_si_value_is_refused() -> None:
    with pytest.raises(TypeError):
        codec.to_proto(si.Resource.of(memory=1).resources["memory"].__class__)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        codec.from_proto(pb.Empty())


# ==================================================================== the daemon
pytestmark_async = pytest.mark.asyncio


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon(tmp_path_factory.mktemp("grpc-daemon"))
    yield d
    assert d.stop() == 0, d.logged()
    assert "Traceback" not in d.logged(), d.logged()


@asynccontextmanager
async def grpc_scenario(address: str, token: str = "") -> AsyncIterator[Scenario]:
    async with scheduler.client.connect(address, token=token) as core:
        yield Scenario(core, ManualClock())


@pytest.mark.asyncio
async def test_the_daemon_prints_its_grpc_address(daemon: Daemon) -> None:
    assert daemon.grpc.startswith("grpc://127.0.0.1:")
    assert int(daemon.grpc.rsplit(":", 1)[1]) > 0


@pytest.mark.asyncio
async def test_the_same_scenario_over_grpc(daemon: Daemon) -> None:
    async with grpc_scenario(daemon.grpc) as s:
        await gang_story(s)


@pytest.mark.asyncio
async def test_predicates_events_and_a_callback_that_calls_the_core(daemon: Daemon) -> None:
    class Choosy(RecordingCallback):
        def __init__(self) -> None:
            super().__init__()
            self.asked: list[str] = []

        async def predicates(self, args: si.PredicatesArgs) -> bool:
            self.asked.append(args.node_id)
            return args.node_id != "n1"

        async def update_allocation(self, response: si.AllocationResponse) -> None:
            await super().update_allocation(response)
            confirm = [
                si.AllocationRelease(
                    partition_name="default",
                    application_id=r.application_id,
                    uuid=r.uuid,
                    termination_type=REPLACED,
                )
                for r in response.released
                if r.termination_type == REPLACED
            ]
            if confirm:
                await remote.update_allocation(
                    si.AllocationRequest(
                        rm_id="rm-1",
                        releases=si.AllocationReleasesRequest(allocations_to_release=confirm),
                    )
                )

    rm = Choosy()
    async with scheduler.client.connect(daemon.grpc) as remote:
        s = Scenario(remote, ManualClock(), rm)
        await s.register(QUEUES)
        await s.add_nodes("n1", "n2")
        await s.submit("app")
        await s.ask("app", count=2)
        assert {a.node_id for a in s.assert_allocated("app", 2)} == {"n2"}
        assert "n1" in rm.asked
        await s.submit_gang("gang", {"workers": 2})
        await s.ask("gang", "w", count=2, task_group="workers")
        s.assert_allocated("gang", 2)  # the callback confirmed, settle waited for it
        assert rm.events, "events travel on the session stream"
        state = await remote.state_dump()
        assert isinstance(state, dict)


@pytest.mark.asyncio
async def test_a_wrong_token_is_refused_over_grpc(tmp_path: Path) -> None:
    d = Daemon(tmp_path, "--token", "s3cret")
    try:
        with pytest.raises(ConnectionError, match="authentication failed"):
            async with connect_grpc(d.grpc, token="wrong"):
                pass
        with pytest.raises(ConnectionError, match="authentication failed"):
            async with scheduler.client.connect(d.grpc):
                pass
        # A plain gRPC call without the token: UNAUTHENTICATED.
        async with grpc.aio.insecure_channel(d.grpc.removeprefix("grpc://")) as channel:
            register = channel.unary_unary(
                "/si.v1.Scheduler/RegisterResourceManager",
                request_serializer=pb.RegisterResourceManagerRequest.SerializeToString,
                response_deserializer=pb.RegisterResourceManagerResponse.FromString,
            )
            with pytest.raises(grpc.aio.AioRpcError) as error:
                await register(pb.RegisterResourceManagerRequest(rm_id="x"))
            assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED
        async with grpc_scenario(d.grpc, token="s3cret") as s:
            await s.register(QUEUES)
            await s.add_nodes("n1")
            assert s.rm.accepted_nodes == ["n1"]
    finally:
        assert d.stop() == 0, d.logged()


@pytest.mark.asyncio
async def test_limits_on_asks_and_ids_are_clear_errors_over_grpc(tmp_path: Path) -> None:
    d = Daemon(tmp_path, "--max-asks", "3", "--max-id", "20")
    try:
        async with grpc_scenario(d.grpc) as s:
            await s.register(QUEUES)
            await s.submit("app")
            asks = [s._ask(f"k{i}", "app", 1, {"memory": 1}, "") for i in range(4)]
            with pytest.raises(scheduler.SchedulerError, match="4 asks, over the limit of 3"):
                await s.send_asks(*asks)
            with pytest.raises(scheduler.SchedulerError, match="over the limit of 20"):
                await s.ask("app", "k" * 21)
            await s.send_asks(*asks[:3])
            assert len((await s.application("app"))["requests"]) == 3
    finally:
        assert d.stop() == 0, d.logged()


@pytest.mark.asyncio
async def test_a_message_over_max_frame_ends_the_connection(tmp_path: Path) -> None:
    d = Daemon(tmp_path, "--max-frame", "2048")
    try:
        async with grpc_scenario(d.grpc) as s:
            await s.register(QUEUES)
            await s.submit("app")
            asks = [s._ask(f"k{i}", "app", 1, {"memory": 1}, "") for i in range(100)]
            with pytest.raises(ConnectionError, match=r"larger than max.*--max-frame"):
                await s.send_asks(*asks)
            with pytest.raises(ConnectionError, match="--max-frame"):
                await s.core.get_partitions()
    finally:
        assert d.stop() == 0, d.logged()


@pytest.mark.asyncio
async def test_a_plain_si_client_without_the_extension(daemon: Daemon) -> None:
    """Only the spec's service: register, then the streams; responses come back on them."""
    async with grpc.aio.insecure_channel(daemon.grpc.removeprefix("grpc://")) as channel:
        register = channel.unary_unary(
            "/si.v1.Scheduler/RegisterResourceManager",
            request_serializer=pb.RegisterResourceManagerRequest.SerializeToString,
            response_deserializer=pb.RegisterResourceManagerResponse.FromString,
        )
        config = QUEUES.replace("name: default", "name: plain")  # a partition of its own
        await register(pb.RegisterResourceManagerRequest(rm_id="plain", config=config))
        nodes = channel.stream_stream(
            "/si.v1.Scheduler/UpdateNode",
            request_serializer=pb.NodeRequest.SerializeToString,
            response_deserializer=pb.NodeResponse.FromString,
        )(None)
        node = codec.to_proto(
            si.NodeInfo(
                node_id="p1",
                action=si.ActionFromRM.CREATE,
                attributes={si.NODE_PARTITION: "plain"},
                schedulable_resource=R(memory=10),
            )
        )
        await nodes.write(pb.NodeRequest(rm_id="plain", nodes=[node]))
        response: Any = await nodes.read()
        assert [n.node_id for n in response.accepted] == ["p1"], response
        nodes.cancel()


@pytest.mark.asyncio
async def test_an_rm_of_a_newer_si_is_told_which_si_the_daemon_speaks(daemon: Daemon) -> None:
    """A plain client of YuniKorn 1.8's SI sends its pods as ``AllocationRequest.allocations``
    (field 4 in yunikorn-scheduler-interface v1.8.0's si.proto), unknown to our SI: the
    stream ends with FAILED_PRECONDITION naming the SI the daemon speaks, rather than the
    request being taken with nothing in it."""
    from scheduler.si._versions import SI_VERSION

    async with grpc.aio.insecure_channel(daemon.grpc.removeprefix("grpc://")) as channel:
        register = channel.unary_unary(
            "/si.v1.Scheduler/RegisterResourceManager",
            request_serializer=pb.RegisterResourceManagerRequest.SerializeToString,
            response_deserializer=pb.RegisterResourceManagerResponse.FromString,
        )
        config = QUEUES.replace("name: default", "name: newer")
        await register(pb.RegisterResourceManagerRequest(rm_id="newer", config=config))
        allocations = channel.stream_stream(
            "/si.v1.Scheduler/UpdateAllocation",
            request_serializer=bytes,
            response_deserializer=pb.AllocationResponse.FromString,
        )(None)
        pod = pb.Allocation(allocation_key="pod-1", application_id="app").SerializeToString()
        raw = pb.AllocationRequest(rm_id="newer").SerializeToString()
        await allocations.write(raw + bytes([4 << 3 | 2, len(pod)]) + pod)
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await asyncio.wait_for(allocations.read(), 30)  # a watchdog: else it never ends
        assert failed.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        details = failed.value.details() or ""
        assert f"SI {SI_VERSION}" in details and "AllocationRequest.allocations" in details


@pytest.mark.asyncio
async def test_sigterm_says_goodbye_over_grpc(tmp_path: Path) -> None:
    d = Daemon(tmp_path)
    async with scheduler.client.connect(d.grpc) as remote:
        s = Scenario(remote, ManualClock())
        await s.register(QUEUES)
        await s.add_nodes("n1")
        assert d.stop() == 0, d.logged()
        with pytest.raises(ConnectionError, match="shutting down"):
            await remote.get_partitions()
    assert "Traceback" not in d.logged(), d.logged()


def test_the_generated_code_is_up_to_date(tmp_path: Path) -> None:
    """si_pb2*.py are what ``nox -s proto`` makes of si.proto today. grpcio-tools is in the
    test extra; without it the check skips, or fails with ``$SCHEDULER_REQUIRE_PROTOC``
    set (``.ci/run`` sets it)."""
    try:
        protoc = importlib.import_module("grpc_tools.protoc")
    except ImportError:
        why = "no grpc_tools (pip install -e '.[test]' brings grpcio-tools)"
        if os.environ.get("SCHEDULER_REQUIRE_PROTOC"):  # .ci/run: the check must run
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    source = Path(pb.__file__).parents[2]
    code = protoc.main(
        [
            "protoc",
            f"-I{source}",
            f"-I{Path(str(protoc.__file__)).parent / '_proto'}",
            f"--python_out={tmp_path}",
            f"--pyi_out={tmp_path}",
            f"--grpc_python_out={tmp_path}",
            str(source / "scheduler" / "si" / "si.proto"),
        ]
    )
    assert code == 0
    for name in ("si_pb2.py", "si_pb2.pyi", "si_pb2_grpc.py"):
        fresh = (tmp_path / "scheduler" / "si" / name).read_text()
        assert fresh == (source / "scheduler" / "si" / name).read_text(), (
            f"run nox -s proto: {name}"
        )


@pytest.mark.asyncio
async def test_an_rm_that_does_not_read_is_disconnected() -> None:
    """The outgoing queues of a session are bounded (--max-backlog): past it, goodbye."""
    from scheduler.daemon._grpc import GrpcServer
    from scheduler.daemon._grpc_session import GrpcSession
    from scheduler.daemon._native import Limits, NativeServer

    async with scheduler.start_scheduler() as core:
        server = GrpcServer(NativeServer(core, limits=Limits(max_backlog=3)))
        session = server.sessions["s1"] = GrpcSession(server, "s1", "test", plain=False)
        queue = session.open_stream(pb.Ack.ALLOCATION)
        for _ in range(5):
            session.push(pb.Ack.ALLOCATION, pb.AllocationResponse())
        assert session.closing.startswith("the RM reads too slowly: 3 messages wait")
        assert "s1" not in server.sessions
        items = [queue.get_nowait() for _ in range(queue.qsize())]
        assert items[-1] is None and len(items) == 4  # three responses, then the end
        goodbye = [m for m in _drain(session.open_stream(0)) if m is not None]
        assert goodbye[-1].goodbye.message == session.closing
        session._worker.cancel()


def _drain(queue: Any) -> list[Any]:
    return [queue.get_nowait() for _ in range(queue.qsize())]


@pytest.mark.asyncio
async def test_nothing_listening_is_a_connection_error() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ConnectionError):
        async with scheduler.client.connect(f"grpc://127.0.0.1:{port}", timeout=5):
            pass
