"""The Scheduler Interface (SI) messages, enums and constants.

Every protobuf message of the Scheduler Interface spec is a ``msgspec.Struct`` here,
named as in the spec (``AllocationAsk``, ``NodeInfo``, ...). Two naming worlds meet:

* **Python attributes** are the snake_case of the spec's field names: ``rmID`` is ``rm_id``,
  ``applicationID`` is ``application_id``, ``UUID`` is ``uuid``, ``Originator`` is
  ``originator``, ``executionTimeoutMilliSeconds`` is ``execution_timeout_milliseconds``,
  and the spec's typo ``applicartionID`` (``UpdateContainerSchedulingStateRequest``) is
  ``application_id`` too.
* **On the wire** (JSON or MessagePack, encoded by ``msgspec``) every field carries the
  spec's own name, exactly as spelled there (``rmID``, ``UUID``, ``applicartionID``, ...),
  so a document written from the spec decodes. Unknown fields are ignored, missing fields
  take their default.

Every field has its proto3 default: ``""``, ``0``, ``False``, an empty list or dict, and
``None`` for a nested message, so ``AllocationAsk(allocation_key="a")`` is a valid message.
All structs are keyword-only, mutable and compare by value.

Enums are ``enum.IntEnum`` with the spec's numbers and are encoded as integers. Those
the spec nests in a message are reachable both ways: ``NodeInfo.ActionFromRM`` is
``ActionFromRM``, ``UpdateContainerSchedulingStateRequest.SchedulingState`` is
``SchedulingState`` and ``EventRecord.Type`` is ``EventRecordType``.

Quantities are plain integers: memory in bytes, ``vcore`` in milli-vcores. On the wire a
quantity is the spec's ``int64``: decoding a document whose quantity does not fit raises
``msgspec.ValidationError``. Building a message in-process checks nothing (msgspec
validates when it decodes); the core's RM proxy rejects a quantity that is negative or does
not fit, however the message was made.

Use ``encode_json`` / ``decode_json`` and ``encode_msgpack`` /
``decode_msgpack`` to cross the wire; their encoders and decoders are built once.

The room ``scheduler.si`` (this package) also holds the wire below these messages: the
proto (``si.proto``) and its generated code (``si_pb2``, ``si_pb2_grpc``), both codecs
(``_wire``: native MessagePack frames; ``_grpc_codec``: structs to and from protobuf;
``_versions``: the SI version the proto has, and a request of a newer one), and
the RM's side of the interface (``_callback``: ``ResourceManagerCallback`` and the check of
an RM's callback). It is the bottom room: it may import ``msgspec``, ``protobuf`` and
``scheduler._errors``, nothing else of ``scheduler``.
"""

from __future__ import annotations

import enum
from typing import Annotated, Any, Final, TypeVar

import msgspec

__all__ = [
    "APPLICATION_ID",
    "APP_TAG_NAMESPACE_RESOURCE_QUOTA",
    "APP_TAG_STATE_AWARE_DISABLE",
    "ARCH",
    "CONTAINER_IMAGE",
    "CONTAINER_PORTS",
    "CPU",
    "CREATION_TIME",
    "DOMAIN_K8S",
    "DOMAIN_YUNIKORN",
    "FAILURE_DOMAIN_REGION",
    "FAILURE_DOMAIN_ZONE",
    "GROUP_ANNOTATION",
    "GROUP_LABEL",
    "GROUP_META",
    "HOST_NAME",
    "INSTANCE_TYPE",
    "KEY_ALLOW_PREEMPTION",
    "KEY_NAMESPACE",
    "KEY_POD_NAME",
    "KEY_REQUIRED_NODE",
    "LOCAL_IMAGES",
    "MEMORY",
    "NODE_PARTITION",
    "NODE_READY_ATTRIBUTE",
    "OS",
    "RACK_NAME",
    "AcceptedApplication",
    "AcceptedNode",
    "ActionFromRM",
    "AddApplicationRequest",
    "Allocation",
    "AllocationAsk",
    "AllocationAskRelease",
    "AllocationRelease",
    "AllocationReleasesRequest",
    "AllocationRequest",
    "AllocationResponse",
    "ApplicationRequest",
    "ApplicationResponse",
    "EventRecord",
    "EventRecordType",
    "NodeInfo",
    "NodeRequest",
    "NodeResponse",
    "PredicatesArgs",
    "PreemptionPolicy",
    "PreemptionPredicatesArgs",
    "PreemptionPredicatesResponse",
    "Quantity",
    "RegisterResourceManagerRequest",
    "RegisterResourceManagerResponse",
    "RejectedAllocationAsk",
    "RejectedApplication",
    "RejectedNode",
    "RemoveApplicationRequest",
    "Resource",
    "SchedulingState",
    "TerminationType",
    "UpdateConfigurationRequest",
    "UpdateContainerSchedulingStateRequest",
    "UpdatedApplication",
    "UserGroupInformation",
    "decode_json",
    "decode_msgpack",
    "encode_json",
    "encode_msgpack",
]

_T = TypeVar("_T")


# --------------------------------------------------------------------------- wire names

# Spec names that are not the plain lowerCamelCase of the Python attribute.
_IRREGULAR_WIRE_NAMES: Final[dict[str, str]] = {
    "rm_id": "rmID",
    "application_id": "applicationID",
    "node_id": "nodeID",
    "object_id": "objectID",
    "group_id": "groupID",
    "uuid": "UUID",
    "originator": "Originator",
    "execution_timeout_milliseconds": "executionTimeoutMilliSeconds",
}


def _wire_name(attribute: str) -> str:
    """The spec's name of the field whose Python attribute is ``attribute``."""
    irregular = _IRREGULAR_WIRE_NAMES.get(attribute)
    if irregular is not None:
        return irregular
    head, *rest = attribute.split("_")
    return head + "".join(part.capitalize() for part in rest)


class _Message(msgspec.Struct, kw_only=True, rename=_wire_name):
    """Base of every SI message: spec names on the wire (``rename`` is inherited).

    ``kw_only`` only applies to the fields of the class that sets it, so every message
    repeats it.
    """


# --------------------------------------------------------------------------- enums


class TerminationType(enum.IntEnum):
    """Why an allocation or ask was released; the confirmation carries the same type."""

    UNKNOWN_TERMINATION_TYPE = 0
    STOPPED_BY_RM = 1
    TIMEOUT = 2
    PREEMPTED_BY_SCHEDULER = 3
    PLACEHOLDER_REPLACED = 4


class EventRecordType(enum.IntEnum):
    """``EventRecord.Type``: the kind of object an event is about."""

    UNKNOWN_EVENTRECORD_TYPE = 0
    REQUEST = 1
    APP = 2
    NODE = 3
    QUEUE = 4


# --------------------------------------------------------------------------- registration


class RegisterResourceManagerRequest(_Message, kw_only=True):
    """An RM registers: its id, version, policy group and queues configuration.

    Registering an ``rm_id`` again drops all earlier state of that RM.
    """

    rm_id: str = ""
    version: str = ""
    policy_group: str = ""
    build_info: dict[str, str] = msgspec.field(default_factory=dict)
    config: str = ""
    extra_config: dict[str, str] = msgspec.field(default_factory=dict)


class RegisterResourceManagerResponse(_Message, kw_only=True):
    """Intentionally empty."""


# --------------------------------------------------------------------------- resources


# The spec's int64, checked when a message is decoded.
_Int64 = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]


# Quantity, Resource and Allocation hold no reference back to a message, so they cannot be
# part of a reference cycle: ``gc=False`` keeps them (and the dicts of Quantity they hold)
# out of the cyclic garbage collector, which the core makes one of per allocation.


class Quantity(_Message, kw_only=True, gc=False):
    """One quantity, the spec's ``int64``: memory in bytes, ``vcore`` in milli-vcores."""

    value: _Int64 = 0


class Resource(_Message, kw_only=True, gc=False):
    """A sparse map of resource name to ``Quantity``."""

    resources: dict[str, Quantity] = msgspec.field(default_factory=dict)

    @classmethod
    def of(cls, **quantities: int) -> Resource:
        """``Resource.of(memory=10, vcore=1)``: a resource from plain integer quantities."""
        return cls(resources={name: Quantity(value=value) for name, value in quantities.items()})

    def to_dict(self) -> dict[str, int]:
        """The quantities as a plain ``{name: value}`` map."""
        return {name: quantity.value for name, quantity in self.resources.items()}


# --------------------------------------------------------------------------- asks and apps


class PreemptionPolicy(_Message, kw_only=True):
    """Whether an ask may be preempted (``allow_preempt_self``) or preempt others."""

    allow_preempt_self: bool = False
    allow_preempt_other: bool = False


class AllocationAsk(_Message, kw_only=True):
    """A request for ``max_allocations`` allocations of ``resource_ask`` each.

    The RM and the scheduler track it by its ``allocation_key``; an ask with a key that exists
    already updates that ask.
    """

    allocation_key: str = ""
    application_id: str = ""
    partition_name: str = ""
    resource_ask: Resource | None = None
    max_allocations: int = 0
    priority: int = 0
    execution_timeout_milliseconds: int = 0
    tags: dict[str, str] = msgspec.field(default_factory=dict)
    task_group_name: str = ""
    placeholder: bool = False
    originator: bool = False
    preemption_policy: PreemptionPolicy | None = None


class UserGroupInformation(_Message, kw_only=True):
    """The user that owns an application and their groups."""

    user: str = ""
    groups: list[str] = msgspec.field(default_factory=list)


class AddApplicationRequest(_Message, kw_only=True):
    """A new application: its queue, partition, owner and tags.

    A gang's application also carries its ``placeholder_ask`` and ``gang_scheduling_style``
    (``Hard`` or ``Soft``: what happens when its placeholders time out).
    """

    application_id: str = ""
    queue_name: str = ""
    partition_name: str = ""
    ugi: UserGroupInformation | None = None
    tags: dict[str, str] = msgspec.field(default_factory=dict)
    execution_timeout_milliseconds: int = 0
    placeholder_ask: Resource | None = None
    gang_scheduling_style: str = ""


class RemoveApplicationRequest(_Message, kw_only=True):
    """An application the RM removes from a partition."""

    application_id: str = ""
    partition_name: str = ""


# --------------------------------------------------------------------------- allocations


class Allocation(_Message, kw_only=True, gc=False):
    """A recovered allocation (RM to scheduler) or a new one (scheduler to RM).

    Field 7 (``queueName``) is reserved by the spec and not present.
    """

    allocation_key: str = ""
    allocation_tags: dict[str, str] = msgspec.field(default_factory=dict)
    uuid: str = ""
    resource_per_alloc: Resource | None = None
    priority: int = 0
    node_id: str = ""
    application_id: str = ""
    partition_name: str = ""
    task_group_name: str = ""
    placeholder: bool = False


class AllocationRelease(_Message, kw_only=True):
    """Release of an allocation, in either direction; the answer repeats the type."""

    partition_name: str = ""
    application_id: str = ""
    uuid: str = ""
    termination_type: TerminationType = TerminationType.UNKNOWN_TERMINATION_TYPE
    message: str = ""
    allocation_key: str = ""


class AllocationAskRelease(_Message, kw_only=True):
    """Release of asks: one ask (``allocation_key``) or every ask of an application."""

    partition_name: str = ""
    application_id: str = ""
    allocation_key: str = ""
    termination_type: TerminationType = TerminationType.UNKNOWN_TERMINATION_TYPE
    message: str = ""


class AllocationReleasesRequest(_Message, kw_only=True):
    """The allocations and the asks an RM releases."""

    allocations_to_release: list[AllocationRelease] = msgspec.field(default_factory=list)
    allocation_asks_to_release: list[AllocationAskRelease] = msgspec.field(default_factory=list)


# --------------------------------------------------------------------------- nodes


class NodeInfo(_Message, kw_only=True):
    """A node the RM creates, updates or drains: attributes, resources, existing allocations."""

    class ActionFromRM(enum.IntEnum):
        """What the RM asks the scheduler to do with a node."""

        UNKNOWN_ACTION_FROM_RM = 0
        CREATE = 1
        UPDATE = 2
        DRAIN_NODE = 3
        DECOMISSION = 4
        DRAIN_TO_SCHEDULABLE = 5

    node_id: str = ""
    action: ActionFromRM = ActionFromRM.UNKNOWN_ACTION_FROM_RM
    attributes: dict[str, str] = msgspec.field(default_factory=dict)
    schedulable_resource: Resource | None = None
    occupied_resource: Resource | None = None
    existing_allocations: list[Allocation] = msgspec.field(default_factory=list)


ActionFromRM = NodeInfo.ActionFromRM
"""``NodeInfo.ActionFromRM``, at module level."""


# --------------------------------------------------------------------------- RM requests


class AllocationRequest(_Message, kw_only=True):
    """An RM's asks and releases."""

    asks: list[AllocationAsk] = msgspec.field(default_factory=list)
    releases: AllocationReleasesRequest | None = None
    rm_id: str = ""


class ApplicationRequest(_Message, kw_only=True):
    """Applications an RM adds and removes."""

    new: list[AddApplicationRequest] = msgspec.field(default_factory=list)
    remove: list[RemoveApplicationRequest] = msgspec.field(default_factory=list)
    rm_id: str = ""


class NodeRequest(_Message, kw_only=True):
    """Nodes an RM creates, updates or drains."""

    nodes: list[NodeInfo] = msgspec.field(default_factory=list)
    rm_id: str = ""


# --------------------------------------------------------------------------- responses


class RejectedAllocationAsk(_Message, kw_only=True):
    """An ask the scheduler rejected, with a human-readable reason."""

    allocation_key: str = ""
    application_id: str = ""
    reason: str = ""


class UpdatedApplication(_Message, kw_only=True):
    """An application's new state, the time of the transition and a message."""

    application_id: str = ""
    state: str = ""
    state_transition_timestamp: int = 0
    message: str = ""


class RejectedApplication(_Message, kw_only=True):
    """An application the scheduler rejected, with a human-readable reason."""

    application_id: str = ""
    reason: str = ""


class AcceptedApplication(_Message, kw_only=True):
    """An application the scheduler accepted."""

    application_id: str = ""


class RejectedNode(_Message, kw_only=True):
    """A node the scheduler rejected, with a human-readable reason."""

    node_id: str = ""
    reason: str = ""


class AcceptedNode(_Message, kw_only=True):
    """A node the scheduler accepted."""

    node_id: str = ""


class AllocationResponse(_Message, kw_only=True):
    """Scheduler to RM: new allocations, released allocations and asks, rejected asks."""

    new: list[Allocation] = msgspec.field(default_factory=list)
    released: list[AllocationRelease] = msgspec.field(default_factory=list)
    released_asks: list[AllocationAskRelease] = msgspec.field(default_factory=list)
    rejected: list[RejectedAllocationAsk] = msgspec.field(default_factory=list)


class ApplicationResponse(_Message, kw_only=True):
    """Scheduler to RM: rejected, accepted and updated applications."""

    rejected: list[RejectedApplication] = msgspec.field(default_factory=list)
    accepted: list[AcceptedApplication] = msgspec.field(default_factory=list)
    updated: list[UpdatedApplication] = msgspec.field(default_factory=list)


class NodeResponse(_Message, kw_only=True):
    """Scheduler to RM: rejected and accepted nodes."""

    rejected: list[RejectedNode] = msgspec.field(default_factory=list)
    accepted: list[AcceptedNode] = msgspec.field(default_factory=list)


# --------------------------------------------------------------------------- plugins


class PredicatesArgs(_Message, kw_only=True):
    """A predicates check of the scheduler plugin: an ask on a node, to allocate or reserve."""

    allocation_key: str = ""
    node_id: str = ""
    allocate: bool = False


class PreemptionPredicatesArgs(_Message, kw_only=True):
    """A preemption check of the scheduler plugin (SI 1.3): may the ask ``allocation_key``
    run on ``node_id`` once some of the allocations there are preempted?

    ``preempt_allocation_keys`` are the victims the core picked on that node, in the order
    it would preempt them. ``start_index`` is the index of the last victim of the first
    attempt: victims ``0..start_index`` must all go for the ask to fit by resources, so the
    RM removes them first, checks, and if the ask still does not fit removes the next
    victim (``start_index + 1``, ...) and checks again, until the ask fits or the list ends.
    """

    allocation_key: str = ""
    node_id: str = ""
    preempt_allocation_keys: list[str] = msgspec.field(default_factory=list)
    start_index: int = 0


class PreemptionPredicatesResponse(_Message, kw_only=True):
    """The RM's answer to ``PreemptionPredicatesArgs``.

    ``success``: the ask fits on the node once victims ``0..index`` are preempted. ``index``
    is the index (in ``preempt_allocation_keys``) of the last victim that had to go, so at
    least ``start_index``; ignored when ``success`` is false (YuniKorn's shim sends -1).
    """

    success: bool = False
    index: int = 0


class UpdateContainerSchedulingStateRequest(_Message, kw_only=True):
    """Where the scheduler is with an ask, told to the RM (an autoscaler may act on ``FAILED``)."""

    class SchedulingState(enum.IntEnum):
        """Where the scheduler is with a container (an ask)."""

        UNKNOWN_SCHEDULING_STATE = 0
        SKIPPED = 1
        SCHEDULED = 2
        RESERVED = 3
        FAILED = 4

    # The spec spells this field ``applicartionID``; the typo stays on the wire only.
    application_id: str = msgspec.field(default="", name="applicartionID")
    allocation_key: str = ""
    state: SchedulingState = SchedulingState.UNKNOWN_SCHEDULING_STATE
    reason: str = ""


SchedulingState = UpdateContainerSchedulingStateRequest.SchedulingState
"""``UpdateContainerSchedulingStateRequest.SchedulingState``, at module level."""


class UpdateConfigurationRequest(_Message, kw_only=True):
    """An RM replaces its queues configuration.

    Field 1 (``configs``) is reserved by the spec and not present.
    """

    rm_id: str = ""
    policy_group: str = ""
    config: str = ""
    extra_config: dict[str, str] = msgspec.field(default_factory=dict)


class EventRecord(_Message, kw_only=True):
    """An event about a scheduler object (an ask, application, node or queue) sent to the RM."""

    # The spec nests this enum as ``EventRecord.Type``. It is defined at module level as
    # ``EventRecordType`` (so it reprs as such); this alias serves attribute access, e.g.
    # ``EventRecord.Type.APP`` (type checkers accept it as a value, not as an annotation).
    Type = EventRecordType

    type: EventRecordType = EventRecordType.UNKNOWN_EVENTRECORD_TYPE
    object_id: str = ""
    group_id: str = ""
    reason: str = ""
    message: str = ""
    timestamp_nano: int = 0


# --------------------------------------------------------------------------- constants

# Node attributes.
ARCH: Final = "si/arch"
HOST_NAME: Final = "si/hostname"
RACK_NAME: Final = "si/rackname"
OS: Final = "si/os"
INSTANCE_TYPE: Final = "si/instance-type"
FAILURE_DOMAIN_ZONE: Final = "si/zone"
FAILURE_DOMAIN_REGION: Final = "si/region"
LOCAL_IMAGES: Final = "si/local-images"
NODE_PARTITION: Final = "si/node-partition"

# Allocation attributes.
APPLICATION_ID: Final = "si/application-id"
CONTAINER_IMAGE: Final = "si/container-image"
CONTAINER_PORTS: Final = "si/container-ports"

# Allocation tags: domain, then optional group, then key ("kubernetes.io/meta/namespace").
DOMAIN_K8S: Final = "kubernetes.io/"
DOMAIN_YUNIKORN: Final = "yunikorn.apache.org/"
GROUP_META: Final = "meta/"
GROUP_LABEL: Final = "label/"
GROUP_ANNOTATION: Final = "annotation/"
KEY_POD_NAME: Final = "podName"
KEY_NAMESPACE: Final = "namespace"
KEY_REQUIRED_NODE: Final = "requiredNode"
KEY_ALLOW_PREEMPTION: Final = "allowPreemption"
CREATION_TIME: Final = "creationTime"

# Core and shim: resource names and other values.
MEMORY: Final = "memory"
CPU: Final = "vcore"
APP_TAG_NAMESPACE_RESOURCE_QUOTA: Final = "namespace.resourcequota"
APP_TAG_STATE_AWARE_DISABLE: Final = "application.stateaware.disable"
NODE_READY_ATTRIBUTE: Final = "ready"


# --------------------------------------------------------------------------- codecs

_JSON_ENCODER: Final = msgspec.json.Encoder()
_MSGPACK_ENCODER: Final = msgspec.msgpack.Encoder()
_JSON_DECODERS: dict[Any, msgspec.json.Decoder[Any]] = {}
_MSGPACK_DECODERS: dict[Any, msgspec.msgpack.Decoder[Any]] = {}


def encode_json(msg: object) -> bytes:
    """``msg`` (a message, or any structure of messages) as JSON with the spec's names."""
    return _JSON_ENCODER.encode(msg)


def decode_json(data: bytes | bytearray | memoryview | str, type: type[_T]) -> _T:
    """Decode JSON ``data`` as ``type``; raises ``msgspec.ValidationError`` or
    ``msgspec.DecodeError`` on a malformed document."""
    decoder = _JSON_DECODERS.get(type)
    if decoder is None:
        decoder = _JSON_DECODERS[type] = msgspec.json.Decoder(type)
    result: _T = decoder.decode(data)
    return result


def encode_msgpack(msg: object) -> bytes:
    """``msg`` (a message, or any structure of messages) as MessagePack with the spec's names."""
    return _MSGPACK_ENCODER.encode(msg)


def decode_msgpack(data: bytes | bytearray | memoryview, type: type[_T]) -> _T:
    """Decode MessagePack ``data`` as ``type``; raises like ``decode_json``."""
    decoder = _MSGPACK_DECODERS.get(type)
    if decoder is None:
        decoder = _MSGPACK_DECODERS[type] = msgspec.msgpack.Decoder(type)
    result: _T = decoder.decode(data)
    return result
