"""The SI messages: spec names on the wire, proto3 defaults, enums, codecs."""

from __future__ import annotations

import enum
import inspect
import types

import msgspec
import pytest

from scheduler import si

# Every message of the spec with its fields' wire names, in the spec's order.
# fmt: off
SPEC_FIELDS: dict[str, list[str]] = {
    "RegisterResourceManagerRequest": [
        "rmID", "version", "policyGroup", "buildInfo", "config", "extraConfig",
    ],
    "RegisterResourceManagerResponse": [],
    "AllocationRequest": ["asks", "releases", "rmID"],
    "ApplicationRequest": ["new", "remove", "rmID"],
    "NodeRequest": ["nodes", "rmID"],
    "AllocationResponse": ["new", "released", "releasedAsks", "rejected"],
    "ApplicationResponse": ["rejected", "accepted", "updated"],
    "NodeResponse": ["rejected", "accepted"],
    "UpdatedApplication": ["applicationID", "state", "stateTransitionTimestamp", "message"],
    "RejectedApplication": ["applicationID", "reason"],
    "AcceptedApplication": ["applicationID"],
    "RejectedNode": ["nodeID", "reason"],
    "AcceptedNode": ["nodeID"],
    "Resource": ["resources"],
    "Quantity": ["value"],
    "AllocationAsk": [
        "allocationKey", "applicationID", "partitionName", "resourceAsk", "maxAllocations",
        "priority", "executionTimeoutMilliSeconds", "tags", "taskGroupName", "placeholder",
        "Originator", "preemptionPolicy",
    ],
    "PreemptionPolicy": ["allowPreemptSelf", "allowPreemptOther"],
    "AddApplicationRequest": [
        "applicationID", "queueName", "partitionName", "ugi", "tags",
        "executionTimeoutMilliSeconds", "placeholderAsk", "gangSchedulingStyle",
    ],
    "RemoveApplicationRequest": ["applicationID", "partitionName"],
    "UserGroupInformation": ["user", "groups"],
    "Allocation": [
        "allocationKey", "allocationTags", "UUID", "resourcePerAlloc", "priority", "nodeID",
        "applicationID", "partitionName", "taskGroupName", "placeholder",
    ],
    "AllocationReleasesRequest": ["allocationsToRelease", "allocationAsksToRelease"],
    "AllocationRelease": [
        "partitionName", "applicationID", "UUID", "terminationType", "message", "allocationKey",
    ],
    "AllocationAskRelease": [
        "partitionName", "applicationID", "allocationKey", "terminationType", "message",
    ],
    "NodeInfo": [
        "nodeID", "action", "attributes", "schedulableResource", "occupiedResource",
        "existingAllocations",
    ],
    "RejectedAllocationAsk": ["allocationKey", "applicationID", "reason"],
    "PredicatesArgs": ["allocationKey", "nodeID", "allocate"],
    "PreemptionPredicatesArgs": [
        "allocationKey", "nodeID", "preemptAllocationKeys", "startIndex",
    ],
    "PreemptionPredicatesResponse": ["success", "index"],
    "UpdateContainerSchedulingStateRequest": [
        "applicartionID", "allocationKey", "state", "reason",
    ],
    "UpdateConfigurationRequest": ["rmID", "policyGroup", "config", "extraConfig"],
    "EventRecord": ["type", "objectID", "groupID", "reason", "message", "timestampNano"],
}
# fmt: on

MESSAGES = sorted(SPEC_FIELDS)

# Every field whose wire name is not the plain lowerCamelCase of its attribute.
RENAMED: list[tuple[str, str, str]] = [
    ("RegisterResourceManagerRequest", "rm_id", "rmID"),
    ("AllocationRequest", "rm_id", "rmID"),
    ("ApplicationRequest", "rm_id", "rmID"),
    ("NodeRequest", "rm_id", "rmID"),
    ("UpdateConfigurationRequest", "rm_id", "rmID"),
    ("UpdatedApplication", "application_id", "applicationID"),
    ("RejectedApplication", "application_id", "applicationID"),
    ("AcceptedApplication", "application_id", "applicationID"),
    ("AllocationAsk", "application_id", "applicationID"),
    ("AddApplicationRequest", "application_id", "applicationID"),
    ("RemoveApplicationRequest", "application_id", "applicationID"),
    ("Allocation", "application_id", "applicationID"),
    ("AllocationRelease", "application_id", "applicationID"),
    ("AllocationAskRelease", "application_id", "applicationID"),
    ("RejectedAllocationAsk", "application_id", "applicationID"),
    ("UpdateContainerSchedulingStateRequest", "application_id", "applicartionID"),
    ("RejectedNode", "node_id", "nodeID"),
    ("AcceptedNode", "node_id", "nodeID"),
    ("Allocation", "node_id", "nodeID"),
    ("NodeInfo", "node_id", "nodeID"),
    ("PredicatesArgs", "node_id", "nodeID"),
    ("PreemptionPredicatesArgs", "node_id", "nodeID"),
    ("Allocation", "uuid", "UUID"),
    ("AllocationRelease", "uuid", "UUID"),
    ("AllocationAsk", "originator", "Originator"),
    ("AllocationAsk", "execution_timeout_milliseconds", "executionTimeoutMilliSeconds"),
    ("AddApplicationRequest", "execution_timeout_milliseconds", "executionTimeoutMilliSeconds"),
    ("EventRecord", "object_id", "objectID"),
    ("EventRecord", "group_id", "groupID"),
]

# Plain camelCase renames worth pinning down explicitly.
CAMEL: list[tuple[str, str, str]] = [
    ("AllocationReleasesRequest", "allocation_asks_to_release", "allocationAsksToRelease"),
    ("AllocationReleasesRequest", "allocations_to_release", "allocationsToRelease"),
    ("Allocation", "resource_per_alloc", "resourcePerAlloc"),
    ("UpdatedApplication", "state_transition_timestamp", "stateTransitionTimestamp"),
    ("EventRecord", "timestamp_nano", "timestampNano"),
    ("AllocationResponse", "released_asks", "releasedAsks"),
    ("AddApplicationRequest", "gang_scheduling_style", "gangSchedulingStyle"),
    ("AddApplicationRequest", "placeholder_ask", "placeholderAsk"),
    ("PreemptionPredicatesArgs", "preempt_allocation_keys", "preemptAllocationKeys"),
    ("PreemptionPredicatesArgs", "start_index", "startIndex"),
]


def _fields(name: str) -> tuple[msgspec.structs.FieldInfo, ...]:
    return msgspec.structs.fields(getattr(si, name))


# --------------------------------------------------------------------------- samples

RES = si.Resource.of(memory=1024, vcore=250)
ALLOC = si.Allocation(
    allocation_key="ask-1",
    allocation_tags={"kubernetes.io/meta/namespace": "default"},
    uuid="uuid-1",
    resource_per_alloc=RES,
    priority=3,
    node_id="node-1",
    application_id="app-1",
    partition_name="default",
    task_group_name="tg",
    placeholder=True,
)
ASK = si.AllocationAsk(
    allocation_key="ask-1",
    application_id="app-1",
    partition_name="default",
    resource_ask=RES,
    max_allocations=2,
    priority=-1,
    execution_timeout_milliseconds=60_000,
    tags={"kubernetes.io/label/x": "y"},
    task_group_name="tg",
    placeholder=True,
    originator=True,
    preemption_policy=si.PreemptionPolicy(allow_preempt_self=True, allow_preempt_other=True),
)
RELEASE = si.AllocationRelease(
    partition_name="default",
    application_id="app-1",
    uuid="uuid-1",
    termination_type=si.TerminationType.PLACEHOLDER_REPLACED,
    message="replaced",
    allocation_key="ask-1",
)
ASK_RELEASE = si.AllocationAskRelease(
    partition_name="default",
    application_id="app-1",
    allocation_key="ask-1",
    termination_type=si.TerminationType.TIMEOUT,
    message="timed out",
)
RELEASES = si.AllocationReleasesRequest(
    allocations_to_release=[RELEASE], allocation_asks_to_release=[ASK_RELEASE]
)
UGI = si.UserGroupInformation(user="alice", groups=["dev", "ops"])
ADD_APP = si.AddApplicationRequest(
    application_id="app-1",
    queue_name="root.a",
    partition_name="default",
    ugi=UGI,
    tags={si.APP_TAG_STATE_AWARE_DISABLE: "true"},
    execution_timeout_milliseconds=900_000,
    placeholder_ask=si.Resource.of(memory=2048),
    gang_scheduling_style="Hard",
)
REMOVE_APP = si.RemoveApplicationRequest(application_id="app-1", partition_name="default")
NODE = si.NodeInfo(
    node_id="node-1",
    action=si.ActionFromRM.DRAIN_TO_SCHEDULABLE,
    attributes={si.HOST_NAME: "host-1", si.NODE_READY_ATTRIBUTE: "true"},
    schedulable_resource=si.Resource.of(memory=10_737_418_240, vcore=8000),
    occupied_resource=si.Resource.of(memory=1),
    existing_allocations=[ALLOC],
)
REJECTED_ASK = si.RejectedAllocationAsk(
    allocation_key="ask-2", application_id="app-1", reason="too big"
)
UPDATED_APP = si.UpdatedApplication(
    application_id="app-1",
    state="Running",
    state_transition_timestamp=1_700_000_000_000_000_000,
    message="ok",
)

SAMPLES: dict[str, msgspec.Struct] = {
    "RegisterResourceManagerRequest": si.RegisterResourceManagerRequest(
        rm_id="rm-1",
        version="1.0",
        policy_group="queues",
        build_info={"buildVersion": "1.2.3"},
        config="partitions: []\n",
        extra_config={"log.level": "debug"},
    ),
    "RegisterResourceManagerResponse": si.RegisterResourceManagerResponse(),
    "AllocationRequest": si.AllocationRequest(asks=[ASK], releases=RELEASES, rm_id="rm-1"),
    "ApplicationRequest": si.ApplicationRequest(new=[ADD_APP], remove=[REMOVE_APP], rm_id="rm-1"),
    "NodeRequest": si.NodeRequest(nodes=[NODE], rm_id="rm-1"),
    "AllocationResponse": si.AllocationResponse(
        new=[ALLOC], released=[RELEASE], released_asks=[ASK_RELEASE], rejected=[REJECTED_ASK]
    ),
    "ApplicationResponse": si.ApplicationResponse(
        rejected=[si.RejectedApplication(application_id="app-2", reason="no queue")],
        accepted=[si.AcceptedApplication(application_id="app-1")],
        updated=[UPDATED_APP],
    ),
    "NodeResponse": si.NodeResponse(
        rejected=[si.RejectedNode(node_id="node-2", reason="duplicate")],
        accepted=[si.AcceptedNode(node_id="node-1")],
    ),
    "UpdatedApplication": UPDATED_APP,
    "RejectedApplication": si.RejectedApplication(application_id="app-2", reason="no queue"),
    "AcceptedApplication": si.AcceptedApplication(application_id="app-1"),
    "RejectedNode": si.RejectedNode(node_id="node-2", reason="duplicate"),
    "AcceptedNode": si.AcceptedNode(node_id="node-1"),
    "Resource": RES,
    "Quantity": si.Quantity(value=-(2**63)),
    "AllocationAsk": ASK,
    "PreemptionPolicy": si.PreemptionPolicy(allow_preempt_self=True, allow_preempt_other=True),
    "AddApplicationRequest": ADD_APP,
    "RemoveApplicationRequest": REMOVE_APP,
    "UserGroupInformation": UGI,
    "Allocation": ALLOC,
    "AllocationReleasesRequest": RELEASES,
    "AllocationRelease": RELEASE,
    "AllocationAskRelease": ASK_RELEASE,
    "NodeInfo": NODE,
    "RejectedAllocationAsk": REJECTED_ASK,
    "PredicatesArgs": si.PredicatesArgs(allocation_key="ask-1", node_id="node-1", allocate=True),
    "PreemptionPredicatesArgs": si.PreemptionPredicatesArgs(
        allocation_key="ask-1",
        node_id="node-1",
        preempt_allocation_keys=["victim-1", "victim-2", "victim-3"],
        start_index=1,
    ),
    "PreemptionPredicatesResponse": si.PreemptionPredicatesResponse(success=True, index=2),
    "UpdateContainerSchedulingStateRequest": si.UpdateContainerSchedulingStateRequest(
        application_id="app-1",
        allocation_key="ask-1",
        state=si.SchedulingState.RESERVED,
        reason="reserved on node-1",
    ),
    "UpdateConfigurationRequest": si.UpdateConfigurationRequest(
        rm_id="rm-1",
        policy_group="queues",
        config="partitions: []\n",
        extra_config={"k": "v"},
    ),
    "EventRecord": si.EventRecord(
        type=si.EventRecordType.QUEUE,
        object_id="root.a",
        group_id="root",
        reason="created",
        message="queue created",
        timestamp_nano=1_700_000_000_123_456_789,
    ),
}


# --------------------------------------------------------------------------- shape


def test_spec_tables_cover_every_message() -> None:
    assert set(SPEC_FIELDS) == set(SAMPLES)
    structs = {
        name
        for name, obj in vars(si).items()
        if isinstance(obj, type) and issubclass(obj, msgspec.Struct) and not name.startswith("_")
    }
    assert structs == set(SPEC_FIELDS)


@pytest.mark.parametrize("name", MESSAGES)
def test_message_is_a_keyword_only_mutable_struct(name: str) -> None:
    cls = getattr(si, name)
    assert issubclass(cls, msgspec.Struct)
    config = cls.__struct_config__
    assert not config.frozen
    assert config.eq
    for param in inspect.signature(cls).parameters.values():
        assert param.kind is inspect.Parameter.KEYWORD_ONLY, param
    if SPEC_FIELDS[name]:
        with pytest.raises(TypeError):
            cls("positional")


@pytest.mark.parametrize("name", MESSAGES)
def test_fields_and_wire_names_follow_the_spec(name: str) -> None:
    assert [f.encode_name for f in _fields(name)] == SPEC_FIELDS[name]


@pytest.mark.parametrize(("name", "attribute", "wire"), RENAMED + CAMEL)
def test_renamed_field(name: str, attribute: str, wire: str) -> None:
    by_attribute = {f.name: f.encode_name for f in _fields(name)}
    assert by_attribute[attribute] == wire
    sample = SAMPLES[name]
    encoded = msgspec.json.decode(si.encode_json(sample))
    assert wire in encoded
    assert attribute not in encoded or attribute == wire


def test_renamed_table_is_complete() -> None:
    """Every attribute whose wire name is not its plain camelCase is in RENAMED."""

    def camel(attribute: str) -> str:
        head, *rest = attribute.split("_")
        return head + "".join(part.capitalize() for part in rest)

    irregular = {
        (name, f.name, f.encode_name)
        for name in MESSAGES
        for f in _fields(name)
        if f.encode_name != camel(f.name)
    }
    assert irregular == set(RENAMED)


@pytest.mark.parametrize("name", MESSAGES)
def test_every_field_has_the_proto3_default(name: str) -> None:
    cls = getattr(si, name)
    first, second = cls(), cls()
    assert first == second
    for f in _fields(name):
        value = getattr(first, f.name)
        assert value in ("", 0, False, None, [], {}), (f.name, value)
        if isinstance(value, list | dict):
            assert getattr(second, f.name) is not value, f"{f.name} default is shared"
        if isinstance(value, enum.IntEnum):
            assert value == 0 and type(value) is f.type


def test_nested_messages_default_to_none_and_are_optional() -> None:
    assert si.AllocationAsk().resource_ask is None
    assert si.AllocationAsk().preemption_policy is None
    assert si.AllocationRequest().releases is None
    assert si.AddApplicationRequest().ugi is None
    assert si.NodeInfo().schedulable_resource is None
    assert si.Allocation().resource_per_alloc is None


def test_messages_are_mutable_and_compare_by_value() -> None:
    ask = si.AllocationAsk(allocation_key="a")
    assert ask == si.AllocationAsk(allocation_key="a")
    ask.max_allocations = 3
    ask.tags["k"] = "v"
    assert ask != si.AllocationAsk(allocation_key="a")
    assert ask == si.AllocationAsk(allocation_key="a", max_allocations=3, tags={"k": "v"})


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("name", MESSAGES)
def test_samples_set_every_field(name: str) -> None:
    """The samples are representative: no field is left at its default."""
    sample = SAMPLES[name]
    for f in _fields(name):
        assert getattr(sample, f.name) not in ("", 0, False, None, [], {}), f.name


@pytest.mark.parametrize("name", MESSAGES)
def test_json_round_trip(name: str) -> None:
    sample = SAMPLES[name]
    cls = type(sample)
    data = si.encode_json(sample)
    assert si.decode_json(data, cls) == sample
    assert si.decode_json(data.decode(), cls) == sample
    assert msgspec.json.decode(data, type=cls) == sample
    assert set(msgspec.json.decode(data)) == set(SPEC_FIELDS[name])


@pytest.mark.parametrize("name", MESSAGES)
def test_msgpack_round_trip(name: str) -> None:
    sample = SAMPLES[name]
    cls = type(sample)
    data = si.encode_msgpack(sample)
    assert si.decode_msgpack(data, cls) == sample
    assert msgspec.msgpack.decode(data, type=cls) == sample
    assert set(msgspec.msgpack.decode(data)) == set(SPEC_FIELDS[name])


def test_decoded_enums_are_enum_members() -> None:
    node = si.decode_json(si.encode_json(NODE), si.NodeInfo)
    assert node.action is si.ActionFromRM.DRAIN_TO_SCHEDULABLE
    release = si.decode_msgpack(si.encode_msgpack(RELEASE), si.AllocationRelease)
    assert release.termination_type is si.TerminationType.PLACEHOLDER_REPLACED


def test_codecs_handle_containers_of_messages() -> None:
    events = [SAMPLES["EventRecord"], si.EventRecord(type=si.EventRecordType.APP)]
    assert si.decode_json(si.encode_json(events), list[si.EventRecord]) == events
    assert si.decode_msgpack(si.encode_msgpack(events), list[si.EventRecord]) == events


# --------------------------------------------------------------------------- spec documents


ALLOCATION_REQUEST_DOC = """
{
  "rmID": "rm-1",
  "asks": [{
    "allocationKey": "ask-1", "applicationID": "app-1", "partitionName": "default",
    "resourceAsk": {"resources": {"memory": {"value": 1024}, "vcore": {"value": 250}}},
    "maxAllocations": 2, "priority": -1, "executionTimeoutMilliSeconds": 60000,
    "tags": {"kubernetes.io/label/x": "y"}, "taskGroupName": "tg", "placeholder": true,
    "Originator": true,
    "preemptionPolicy": {"allowPreemptSelf": true, "allowPreemptOther": true}
  }],
  "releases": {
    "allocationsToRelease": [{
      "partitionName": "default", "applicationID": "app-1", "UUID": "uuid-1",
      "terminationType": 4, "message": "replaced", "allocationKey": "ask-1"
    }],
    "allocationAsksToRelease": [{
      "partitionName": "default", "applicationID": "app-1", "allocationKey": "ask-1",
      "terminationType": 2, "message": "timed out"
    }]
  }
}
"""


def test_decode_a_document_written_from_the_spec() -> None:
    decoded = si.decode_json(ALLOCATION_REQUEST_DOC, si.AllocationRequest)
    assert decoded == SAMPLES["AllocationRequest"]


def test_decode_more_spec_documents() -> None:
    node_doc = b"""{"nodes": [{"nodeID": "node-1", "action": 1,
        "attributes": {"si/hostname": "host-1"},
        "schedulableResource": {"resources": {"memory": {"value": 100}}},
        "existingAllocations": [{"allocationKey": "k", "UUID": "u", "nodeID": "node-1",
            "applicationID": "app-1", "resourcePerAlloc": {"resources": {}}}]}],
        "rmID": "rm-1"}"""
    request = si.decode_json(node_doc, si.NodeRequest)
    assert request == si.NodeRequest(
        rm_id="rm-1",
        nodes=[
            si.NodeInfo(
                node_id="node-1",
                action=si.ActionFromRM.CREATE,
                attributes={si.HOST_NAME: "host-1"},
                schedulable_resource=si.Resource.of(memory=100),
                existing_allocations=[
                    si.Allocation(
                        allocation_key="k",
                        uuid="u",
                        node_id="node-1",
                        application_id="app-1",
                        resource_per_alloc=si.Resource(),
                    )
                ],
            )
        ],
    )

    state_doc = b'{"applicartionID": "app-1", "allocationKey": "ask-1", "state": 1}'
    state = si.decode_json(state_doc, si.UpdateContainerSchedulingStateRequest)
    assert state.application_id == "app-1"
    assert state.state is si.SchedulingState.SKIPPED

    event_doc = b'{"type": 2, "objectID": "app-1", "groupID": "root.a", "timestampNano": 5}'
    event = si.decode_json(event_doc, si.EventRecord)
    assert event == si.EventRecord(
        type=si.EventRecord.Type.APP, object_id="app-1", group_id="root.a", timestamp_nano=5
    )

    app_doc = b"""{"applicationID": "a", "executionTimeoutMilliSeconds": 1000,
        "placeholderAsk": {"resources": {"memory": {"value": 7}}},
        "gangSchedulingStyle": "Soft", "ugi": {"user": "u", "groups": ["g"]}}"""
    app = si.decode_json(app_doc, si.AddApplicationRequest)
    assert app.execution_timeout_milliseconds == 1000
    assert app.placeholder_ask == si.Resource.of(memory=7)
    assert app.ugi == si.UserGroupInformation(user="u", groups=["g"])


def test_preemption_predicates_documents_of_the_spec() -> None:
    """SI 1.3's preemption messages as a Go RM encodes them (protojson's names)."""
    args_doc = b"""{"allocationKey": "ask-1", "nodeID": "node-1",
        "preemptAllocationKeys": ["v-1", "v-2"], "startIndex": 1}"""
    assert si.decode_json(args_doc, si.PreemptionPredicatesArgs) == si.PreemptionPredicatesArgs(
        allocation_key="ask-1",
        node_id="node-1",
        preempt_allocation_keys=["v-1", "v-2"],
        start_index=1,
    )
    # proto3 leaves out a default: an empty answer is a refusal at index 0
    assert si.decode_json(b"{}", si.PreemptionPredicatesResponse) == (
        si.PreemptionPredicatesResponse(success=False, index=0)
    )
    answer = si.decode_json(b'{"success": true, "index": 1}', si.PreemptionPredicatesResponse)
    assert (answer.success, answer.index) == (True, 1)
    assert si.PreemptionPredicatesArgs().preempt_allocation_keys == []


def test_missing_fields_take_defaults_and_unknown_fields_are_ignored() -> None:
    ask = si.decode_json(b'{"allocationKey": "a", "someFutureField": [1, 2]}', si.AllocationAsk)
    assert ask == si.AllocationAsk(allocation_key="a")
    assert si.decode_json(b"{}", si.NodeInfo) == si.NodeInfo()
    assert si.decode_json(b'{"releases": null}', si.AllocationRequest) == si.AllocationRequest()


def test_snake_case_names_are_not_the_wire_names() -> None:
    """A document that uses the Python attribute names does not fill the renamed fields."""
    ask = si.decode_json(b'{"allocation_key": "a", "application_id": "x"}', si.AllocationAsk)
    assert ask == si.AllocationAsk()


@pytest.mark.parametrize(
    "doc",
    [
        b'{"maxAllocations": "2"}',
        b'{"placeholder": 1}',
        b'{"resourceAsk": {"resources": {"memory": 10}}}',
        b'{"tags": {"k": 1}}',
    ],
)
def test_malformed_documents_raise_validation_errors(doc: bytes) -> None:
    with pytest.raises(msgspec.ValidationError):
        si.decode_json(doc, si.AllocationAsk)


def test_unknown_enum_number_is_a_validation_error() -> None:
    with pytest.raises(msgspec.ValidationError):
        si.decode_json(b'{"action": 99}', si.NodeInfo)
    with pytest.raises(msgspec.ValidationError):
        si.decode_msgpack(msgspec.msgpack.encode({"terminationType": 9}), si.AllocationRelease)


def test_garbage_is_a_decode_error() -> None:
    with pytest.raises(msgspec.DecodeError):
        si.decode_json(b"{not json", si.NodeInfo)


# --------------------------------------------------------------------------- enums


def test_enums_keep_the_spec_numbers() -> None:
    expected: dict[type[enum.IntEnum], dict[str, int]] = {
        si.TerminationType: {
            "UNKNOWN_TERMINATION_TYPE": 0,
            "STOPPED_BY_RM": 1,
            "TIMEOUT": 2,
            "PREEMPTED_BY_SCHEDULER": 3,
            "PLACEHOLDER_REPLACED": 4,
        },
        si.ActionFromRM: {
            "UNKNOWN_ACTION_FROM_RM": 0,
            "CREATE": 1,
            "UPDATE": 2,
            "DRAIN_NODE": 3,
            "DECOMISSION": 4,
            "DRAIN_TO_SCHEDULABLE": 5,
        },
        si.EventRecordType: {
            "UNKNOWN_EVENTRECORD_TYPE": 0,
            "REQUEST": 1,
            "APP": 2,
            "NODE": 3,
            "QUEUE": 4,
        },
        si.SchedulingState: {
            "UNKNOWN_SCHEDULING_STATE": 0,
            "SKIPPED": 1,
            "SCHEDULED": 2,
            "RESERVED": 3,
            "FAILED": 4,
        },
    }
    for cls, members in expected.items():
        assert issubclass(cls, enum.IntEnum)
        assert {m.name: m.value for m in cls} == members


def test_nested_enum_names() -> None:
    assert si.NodeInfo.ActionFromRM is si.ActionFromRM
    assert si.EventRecord.Type is si.EventRecordType
    assert si.UpdateContainerSchedulingStateRequest.SchedulingState is si.SchedulingState
    # Nested enums are class attributes, not fields.
    assert "ActionFromRM" not in {f.name for f in _fields("NodeInfo")}
    assert "Type" not in {f.name for f in _fields("EventRecord")}


def test_enum_fields_are_typed_with_their_enum() -> None:
    types_by_field = {
        ("NodeInfo", "action"): si.ActionFromRM,
        ("AllocationRelease", "termination_type"): si.TerminationType,
        ("AllocationAskRelease", "termination_type"): si.TerminationType,
        ("UpdateContainerSchedulingStateRequest", "state"): si.SchedulingState,
        ("EventRecord", "type"): si.EventRecordType,
    }
    for (name, attribute), enum_type in types_by_field.items():
        (field,) = [f for f in _fields(name) if f.name == attribute]
        assert field.type is enum_type


def test_enums_encode_as_numbers() -> None:
    wire = msgspec.json.decode(si.encode_json(si.NodeInfo(action=si.ActionFromRM.DECOMISSION)))
    assert wire["action"] == 4


# --------------------------------------------------------------------------- resources


def test_resource_shorthand() -> None:
    assert si.Resource.of(memory=10, vcore=1) == si.Resource(
        resources={"memory": si.Quantity(value=10), "vcore": si.Quantity(value=1)}
    )
    assert si.Resource.of() == si.Resource()
    assert si.Resource.of(**{si.MEMORY: 5, si.CPU: 2}) == si.Resource.of(memory=5, vcore=2)


def test_resource_to_dict() -> None:
    assert si.Resource.of(memory=10, vcore=1).to_dict() == {"memory": 10, "vcore": 1}
    assert si.Resource().to_dict() == {}
    resource = si.Resource.of(memory=3)
    assert si.Resource.of(**resource.to_dict()) == resource


def test_resource_wire_shape() -> None:
    wire = msgspec.json.decode(si.encode_json(si.Resource.of(memory=10, vcore=1)))
    assert wire == {"resources": {"memory": {"value": 10}, "vcore": {"value": 1}}}


# --------------------------------------------------------------------------- constants


def test_constants() -> None:
    assert (si.ARCH, si.HOST_NAME, si.RACK_NAME, si.OS) == (
        "si/arch",
        "si/hostname",
        "si/rackname",
        "si/os",
    )
    assert (si.INSTANCE_TYPE, si.FAILURE_DOMAIN_ZONE, si.FAILURE_DOMAIN_REGION) == (
        "si/instance-type",
        "si/zone",
        "si/region",
    )
    assert (si.LOCAL_IMAGES, si.NODE_PARTITION) == ("si/local-images", "si/node-partition")
    assert (si.APPLICATION_ID, si.CONTAINER_IMAGE, si.CONTAINER_PORTS) == (
        "si/application-id",
        "si/container-image",
        "si/container-ports",
    )
    assert (si.DOMAIN_K8S, si.DOMAIN_YUNIKORN) == ("kubernetes.io/", "yunikorn.apache.org/")
    assert (si.GROUP_META, si.GROUP_LABEL, si.GROUP_ANNOTATION) == (
        "meta/",
        "label/",
        "annotation/",
    )
    assert (si.KEY_POD_NAME, si.KEY_NAMESPACE, si.KEY_REQUIRED_NODE) == (
        "podName",
        "namespace",
        "requiredNode",
    )
    assert (si.KEY_ALLOW_PREEMPTION, si.CREATION_TIME) == ("allowPreemption", "creationTime")
    assert si.DOMAIN_K8S + si.GROUP_META + si.KEY_NAMESPACE == "kubernetes.io/meta/namespace"
    assert (si.MEMORY, si.CPU) == ("memory", "vcore")
    assert si.APP_TAG_NAMESPACE_RESOURCE_QUOTA == "namespace.resourcequota"
    assert si.APP_TAG_STATE_AWARE_DISABLE == "application.stateaware.disable"
    assert si.NODE_READY_ATTRIBUTE == "ready"


# --------------------------------------------------------------------------- exports

# fmt: off
CONSTANTS = {
    "ARCH", "HOST_NAME", "RACK_NAME", "OS", "INSTANCE_TYPE", "FAILURE_DOMAIN_ZONE",
    "FAILURE_DOMAIN_REGION", "LOCAL_IMAGES", "NODE_PARTITION", "APPLICATION_ID",
    "CONTAINER_IMAGE", "CONTAINER_PORTS", "DOMAIN_K8S", "DOMAIN_YUNIKORN", "GROUP_META",
    "GROUP_LABEL", "GROUP_ANNOTATION", "KEY_POD_NAME", "KEY_NAMESPACE", "KEY_REQUIRED_NODE",
    "KEY_ALLOW_PREEMPTION", "CREATION_TIME", "MEMORY", "CPU",
    "APP_TAG_NAMESPACE_RESOURCE_QUOTA", "APP_TAG_STATE_AWARE_DISABLE", "NODE_READY_ATTRIBUTE",
}
# fmt: on
ENUMS = {"TerminationType", "ActionFromRM", "EventRecordType", "SchedulingState"}
CODECS = {"encode_json", "decode_json", "encode_msgpack", "decode_msgpack"}


def test_all_lists_every_public_name() -> None:
    assert len(si.__all__) == len(set(si.__all__))
    assert set(si.__all__) == set(SPEC_FIELDS) | ENUMS | CONSTANTS | CODECS
    for name in si.__all__:
        assert hasattr(si, name), name


def test_nothing_public_is_left_out_of_all() -> None:
    """Public names not in __all__ are only imports (modules, typing helpers, __future__)."""
    imported = {"annotations", "Annotated", "Any", "Final", "TypeVar"}
    for name, obj in vars(si).items():
        if name.startswith("_") or name in si.__all__:
            continue
        assert isinstance(obj, types.ModuleType) or name in imported, name
