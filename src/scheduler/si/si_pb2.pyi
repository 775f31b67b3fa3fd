from google.protobuf import descriptor_pb2 as _descriptor_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TerminationType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UNKNOWN_TERMINATION_TYPE: _ClassVar[TerminationType]
    STOPPED_BY_RM: _ClassVar[TerminationType]
    TIMEOUT: _ClassVar[TerminationType]
    PREEMPTED_BY_SCHEDULER: _ClassVar[TerminationType]
    PLACEHOLDER_REPLACED: _ClassVar[TerminationType]
UNKNOWN_TERMINATION_TYPE: TerminationType
STOPPED_BY_RM: TerminationType
TIMEOUT: TerminationType
PREEMPTED_BY_SCHEDULER: TerminationType
PLACEHOLDER_REPLACED: TerminationType
SI_SECRET_FIELD_NUMBER: _ClassVar[int]
si_secret: _descriptor.FieldDescriptor

class RegisterResourceManagerRequest(_message.Message):
    __slots__ = ("rm_id", "version", "policy_group", "build_info", "config", "extra_config")
    class BuildInfoEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class ExtraConfigEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    RM_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    POLICY_GROUP_FIELD_NUMBER: _ClassVar[int]
    BUILD_INFO_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    EXTRA_CONFIG_FIELD_NUMBER: _ClassVar[int]
    rm_id: str
    version: str
    policy_group: str
    build_info: _containers.ScalarMap[str, str]
    config: str
    extra_config: _containers.ScalarMap[str, str]
    def __init__(self, rm_id: _Optional[str] = ..., version: _Optional[str] = ..., policy_group: _Optional[str] = ..., build_info: _Optional[_Mapping[str, str]] = ..., config: _Optional[str] = ..., extra_config: _Optional[_Mapping[str, str]] = ...) -> None: ...

class RegisterResourceManagerResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AllocationRequest(_message.Message):
    __slots__ = ("asks", "releases", "rm_id")
    ASKS_FIELD_NUMBER: _ClassVar[int]
    RELEASES_FIELD_NUMBER: _ClassVar[int]
    RM_ID_FIELD_NUMBER: _ClassVar[int]
    asks: _containers.RepeatedCompositeFieldContainer[AllocationAsk]
    releases: AllocationReleasesRequest
    rm_id: str
    def __init__(self, asks: _Optional[_Iterable[_Union[AllocationAsk, _Mapping]]] = ..., releases: _Optional[_Union[AllocationReleasesRequest, _Mapping]] = ..., rm_id: _Optional[str] = ...) -> None: ...

class ApplicationRequest(_message.Message):
    __slots__ = ("new", "remove", "rm_id")
    NEW_FIELD_NUMBER: _ClassVar[int]
    REMOVE_FIELD_NUMBER: _ClassVar[int]
    RM_ID_FIELD_NUMBER: _ClassVar[int]
    new: _containers.RepeatedCompositeFieldContainer[AddApplicationRequest]
    remove: _containers.RepeatedCompositeFieldContainer[RemoveApplicationRequest]
    rm_id: str
    def __init__(self, new: _Optional[_Iterable[_Union[AddApplicationRequest, _Mapping]]] = ..., remove: _Optional[_Iterable[_Union[RemoveApplicationRequest, _Mapping]]] = ..., rm_id: _Optional[str] = ...) -> None: ...

class NodeRequest(_message.Message):
    __slots__ = ("nodes", "rm_id")
    NODES_FIELD_NUMBER: _ClassVar[int]
    RM_ID_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[NodeInfo]
    rm_id: str
    def __init__(self, nodes: _Optional[_Iterable[_Union[NodeInfo, _Mapping]]] = ..., rm_id: _Optional[str] = ...) -> None: ...

class AllocationResponse(_message.Message):
    __slots__ = ("new", "released", "released_asks", "rejected")
    NEW_FIELD_NUMBER: _ClassVar[int]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    RELEASED_ASKS_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    new: _containers.RepeatedCompositeFieldContainer[Allocation]
    released: _containers.RepeatedCompositeFieldContainer[AllocationRelease]
    released_asks: _containers.RepeatedCompositeFieldContainer[AllocationAskRelease]
    rejected: _containers.RepeatedCompositeFieldContainer[RejectedAllocationAsk]
    def __init__(self, new: _Optional[_Iterable[_Union[Allocation, _Mapping]]] = ..., released: _Optional[_Iterable[_Union[AllocationRelease, _Mapping]]] = ..., released_asks: _Optional[_Iterable[_Union[AllocationAskRelease, _Mapping]]] = ..., rejected: _Optional[_Iterable[_Union[RejectedAllocationAsk, _Mapping]]] = ...) -> None: ...

class ApplicationResponse(_message.Message):
    __slots__ = ("rejected", "accepted", "updated")
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    UPDATED_FIELD_NUMBER: _ClassVar[int]
    rejected: _containers.RepeatedCompositeFieldContainer[RejectedApplication]
    accepted: _containers.RepeatedCompositeFieldContainer[AcceptedApplication]
    updated: _containers.RepeatedCompositeFieldContainer[UpdatedApplication]
    def __init__(self, rejected: _Optional[_Iterable[_Union[RejectedApplication, _Mapping]]] = ..., accepted: _Optional[_Iterable[_Union[AcceptedApplication, _Mapping]]] = ..., updated: _Optional[_Iterable[_Union[UpdatedApplication, _Mapping]]] = ...) -> None: ...

class NodeResponse(_message.Message):
    __slots__ = ("rejected", "accepted")
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    rejected: _containers.RepeatedCompositeFieldContainer[RejectedNode]
    accepted: _containers.RepeatedCompositeFieldContainer[AcceptedNode]
    def __init__(self, rejected: _Optional[_Iterable[_Union[RejectedNode, _Mapping]]] = ..., accepted: _Optional[_Iterable[_Union[AcceptedNode, _Mapping]]] = ...) -> None: ...

class UpdatedApplication(_message.Message):
    __slots__ = ("application_id", "state", "state_transition_timestamp", "message")
    APPLICATION_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STATE_TRANSITION_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    application_id: str
    state: str
    state_transition_timestamp: int
    message: str
    def __init__(self, application_id: _Optional[str] = ..., state: _Optional[str] = ..., state_transition_timestamp: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class RejectedApplication(_message.Message):
    __slots__ = ("application_id", "reason")
    APPLICATION_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    application_id: str
    reason: str
    def __init__(self, application_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class AcceptedApplication(_message.Message):
    __slots__ = ("application_id",)
    APPLICATION_ID_FIELD_NUMBER: _ClassVar[int]
    application_id: str
    def __init__(self, application_id: _Optional[str] = ...) -> None: ...

class RejectedNode(_message.Message):
    __slots__ = ("node_id", "reason")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    reason: str
    def __init__(self, node_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class AcceptedNode(_message.Message):
    __slots__ = ("node_id",)
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    def __init__(self, node_id: _Optional[str] = ...) -> None: ...

class Resource(_message.Message):
    __slots__ = ("resources",)
    class ResourcesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Quantity
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Quantity, _Mapping]] = ...) -> None: ...
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    resources: _containers.MessageMap[str, Quantity]
    def __init__(self, resources: _Optional[_Mapping[str, Quantity]] = ...) -> None: ...

class Quantity(_message.Message):
    __slots__ = ("value",)
    VALUE_FIELD_NUMBER: _ClassVar[int]
    value: int
    def __init__(self, value: _Optional[int] = ...) -> None: ...

class AllocationAsk(_message.Message):
    __slots__ = ("allocation_key", "application_id", "partition_name", "resource_ask", "max_allocations", "priority", "execution_timeout_milliseconds", "tags", "task_group_name", "placeholder", "originator", "preemption_policy")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ALLOCATION_KEY_FIELD_NUMBER: _ClassVar[int]
    APPLICATION_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_NAME_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ASK_FIELD_NUMBER: _ClassVar[int]
    MAX_ALLOCATIONS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_TIMEOUT_MILLISECONDS_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    TASK_GROUP_NAME_FIELD_NUMBER: _ClassVar[int]
    PLACEHOLDER_FIELD_NUMBER: _ClassVar[int]
    ORIGINATOR_FIELD_NUMBER: _ClassVar[int]
    PREEMPTION_POLICY_FIELD_NUMBER: _ClassVar[int]
    allocation_key: str
    application_id: str
    partition_name: str
    resource_ask: Resource
    max_allocations: int
    priority: int
    execution_timeout_milliseconds: int
    tags: _containers.ScalarMap[str, str]
    task_group_name: str
    placeholder: bool
    originator: bool
    preemption_policy: PreemptionPolicy
    def __init__(self, allocation_key: _Optional[str] = ..., application_id: _Optional[str] = ..., partition_name: _Optional[str] = ..., resource_ask: _Optional[_Union[Resource, _Mapping]] = ..., max_allocations: _Optional[int] = ..., priority: _Optional[int] = ..., execution_timeout_milliseconds: _Optional[int] = ..., tags: _Optional[_Mapping[str, str]] = ..., task_group_name: _Optional[str] = ..., placeholder: _Optional[bool] = ..., originator: _Optional[bool] = ..., preemption_policy: _Optional[_Union[PreemptionPolicy, _Mapping]] = ...) -> None: ...

class PreemptionPolicy(_message.Message):
    __slots__ = ("allow_preempt_self", "allow_preempt_other")
    ALLOW_PREEMPT_SELF_FIELD_NUMBER: _ClassVar[int]
    ALLOW_PREEMPT_OTHER_FIELD_NUMBER: _ClassVar[int]
    allow_preempt_self: bool
    allow_preempt_other: bool
    def __init__(self, allow_preempt_self: _Optional[bool] = ..., allow_preempt_other: _Optional[bool] = ...) -> None: ...

class AddApplicationRequest(_message.Message):
    __slots__ = ("application_id", "queue_name", "partition_name", "ugi", "tags", "execution_timeout_milliseconds", "placeholder_ask", "gang_scheduling_style")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    APPLICATION_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITION_NAME_FIELD_NUMBER: _ClassVar[int]
    UGI_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_TIMEOUT_MILLISECONDS_FIELD_NUMBER: _ClassVar[int]
    PLACEHOLDER_ASK_FIELD_NUMBER: _ClassVar[int]
    GANG_SCHEDULING_STYLE_FIELD_NUMBER: _ClassVar[int]
    application_id: str
    queue_name: str
    partition_name: str
    ugi: UserGroupInformation
    tags: _containers.ScalarMap[str, str]
    execution_timeout_milliseconds: int
    placeholder_ask: Resource
    gang_scheduling_style: str
    def __init__(self, application_id: _Optional[str] = ..., queue_name: _Optional[str] = ..., partition_name: _Optional[str] = ..., ugi: _Optional[_Union[UserGroupInformation, _Mapping]] = ..., tags: _Optional[_Mapping[str, str]] = ..., execution_timeout_milliseconds: _Optional[int] = ..., placeholder_ask: _Optional[_Union[Resource, _Mapping]] = ..., gang_scheduling_style: _Optional[str] = ...) -> None: ...

class RemoveApplicationRequest(_message.Message):
    __slots__ = ("application_id", "partition_name")
    APPLICATION_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_NAME_FIELD_NUMBER: _ClassVar[int]
    application_id: str
    partition_name: str
    def __init__(self, application_id: _Optional[str] = ..., partition_name: _Optional[str] = ...) -> None: ...

class UserGroupInformation(_message.Message):
    __slots__ = ("user", "groups")
    USER_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    user: str
    groups: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, user: _Optional[str] = ..., groups: _Optional[_Iterable[str]] = ...) -> None: ...

class Allocation(_message.Message):
    __slots__ = ("allocation_key", "allocation_tags", "uuid", "resource_per_alloc", "priority", "node_id", "application_id", "partition_name", "task_group_name", "placeholder")
    class AllocationTagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ALLOCATION_KEY_FIELD_NUMBER: _ClassVar[int]
    ALLOCATION_TAGS_FIELD_NUMBER: _ClassVar[int]
    UUID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_PER_ALLOC_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    APPLICATION_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_NAME_FIELD_NUMBER: _ClassVar[int]
    TASK_GROUP_NAME_FIELD_NUMBER: _ClassVar[int]
    PLACEHOLDER_FIELD_NUMBER: _ClassVar[int]
    allocation_key: str
    allocation_tags: _containers.ScalarMap[str, str]
    uuid: str
    resource_per_alloc: Resource
    priority: int
    node_id: str
    application_id: str
    partition_name: str
    task_group_name: str
    placeholder: bool
    def __init__(self, allocation_key: _Optional[str] = ..., allocation_tags: _Optional[_Mapping[str, str]] = ..., uuid: _Optional[str] = ..., resource_per_alloc: _Optional[_Union[Resource, _Mapping]] = ..., priority: _Optional[int] = ..., node_id: _Optional[str] = ..., application_id: _Optional[str] = ..., partition_name: _Optional[str] = ..., task_group_name: _Optional[str] = ..., placeholder: _Optional[bool] = ...) -> None: ...

class AllocationReleasesRequest(_message.Message):
    __slots__ = ("allocations_to_release", "allocation_asks_to_release")
    ALLOCATIONS_TO_RELEASE_FIELD_NUMBER: _ClassVar[int]
    ALLOCATION_ASKS_TO_RELEASE_FIELD_NUMBER: _ClassVar[int]
    allocations_to_release: _containers.RepeatedCompositeFieldContainer[AllocationRelease]
    allocation_asks_to_release: _containers.RepeatedCompositeFieldContainer[AllocationAskRelease]
    def __init__(self, allocations_to_release: _Optional[_Iterable[_Union[AllocationRelease, _Mapping]]] = ..., allocation_asks_to_release: _Optional[_Iterable[_Union[AllocationAskRelease, _Mapping]]] = ...) -> None: ...

class AllocationRelease(_message.Message):
    __slots__ = ("partition_name", "application_id", "uuid", "termination_type", "message", "allocation_key")
    PARTITION_NAME_FIELD_NUMBER: _ClassVar[int]
    APPLICATION_ID_FIELD_NUMBER: _ClassVar[int]
    UUID_FIELD_NUMBER: _ClassVar[int]
    TERMINATION_TYPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ALLOCATION_KEY_FIELD_NUMBER: _ClassVar[int]
    partition_name: str
    application_id: str
    uuid: str
    termination_type: TerminationType
    message: str
    allocation_key: str
    def __init__(self, partition_name: _Optional[str] = ..., application_id: _Optional[str] = ..., uuid: _Optional[str] = ..., termination_type: _Optional[_Union[TerminationType, str]] = ..., message: _Optional[str] = ..., allocation_key: _Optional[str] = ...) -> None: ...

class AllocationAskRelease(_message.Message):
    __slots__ = ("partition_name", "application_id", "allocation_key", "termination_type", "message")
    PARTITION_NAME_FIELD_NUMBER: _ClassVar[int]
    APPLICATION_ID_FIELD_NUMBER: _ClassVar[int]
    ALLOCATION_KEY_FIELD_NUMBER: _ClassVar[int]
    TERMINATION_TYPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    partition_name: str
    application_id: str
    allocation_key: str
    termination_type: TerminationType
    message: str
    def __init__(self, partition_name: _Optional[str] = ..., application_id: _Optional[str] = ..., allocation_key: _Optional[str] = ..., termination_type: _Optional[_Union[TerminationType, str]] = ..., message: _Optional[str] = ...) -> None: ...

class NodeInfo(_message.Message):
    __slots__ = ("node_id", "action", "attributes", "schedulable_resource", "occupied_resource", "existing_allocations")
    class ActionFromRM(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        UNKNOWN_ACTION_FROM_RM: _ClassVar[NodeInfo.ActionFromRM]
        CREATE: _ClassVar[NodeInfo.ActionFromRM]
        UPDATE: _ClassVar[NodeInfo.ActionFromRM]
        DRAIN_NODE: _ClassVar[NodeInfo.ActionFromRM]
        DECOMISSION: _ClassVar[NodeInfo.ActionFromRM]
        DRAIN_TO_SCHEDULABLE: _ClassVar[NodeInfo.ActionFromRM]
    UNKNOWN_ACTION_FROM_RM: NodeInfo.ActionFromRM
    CREATE: NodeInfo.ActionFromRM
    UPDATE: NodeInfo.ActionFromRM
    DRAIN_NODE: NodeInfo.ActionFromRM
    DECOMISSION: NodeInfo.ActionFromRM
    DRAIN_TO_SCHEDULABLE: NodeInfo.ActionFromRM
    class AttributesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    SCHEDULABLE_RESOURCE_FIELD_NUMBER: _ClassVar[int]
    OCCUPIED_RESOURCE_FIELD_NUMBER: _ClassVar[int]
    EXISTING_ALLOCATIONS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    action: NodeInfo.ActionFromRM
    attributes: _containers.ScalarMap[str, str]
    schedulable_resource: Resource
    occupied_resource: Resource
    existing_allocations: _containers.RepeatedCompositeFieldContainer[Allocation]
    def __init__(self, node_id: _Optional[str] = ..., action: _Optional[_Union[NodeInfo.ActionFromRM, str]] = ..., attributes: _Optional[_Mapping[str, str]] = ..., schedulable_resource: _Optional[_Union[Resource, _Mapping]] = ..., occupied_resource: _Optional[_Union[Resource, _Mapping]] = ..., existing_allocations: _Optional[_Iterable[_Union[Allocation, _Mapping]]] = ...) -> None: ...

class RejectedAllocationAsk(_message.Message):
    __slots__ = ("allocation_key", "application_id", "reason")
    ALLOCATION_KEY_FIELD_NUMBER: _ClassVar[int]
    APPLICATION_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    allocation_key: str
    application_id: str
    reason: str
    def __init__(self, allocation_key: _Optional[str] = ..., application_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class PredicatesArgs(_message.Message):
    __slots__ = ("allocation_key", "node_id", "allocate")
    ALLOCATION_KEY_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ALLOCATE_FIELD_NUMBER: _ClassVar[int]
    allocation_key: str
    node_id: str
    allocate: bool
    def __init__(self, allocation_key: _Optional[str] = ..., node_id: _Optional[str] = ..., allocate: _Optional[bool] = ...) -> None: ...

class PreemptionPredicatesArgs(_message.Message):
    __slots__ = ("allocation_key", "node_id", "preempt_allocation_keys", "start_index")
    ALLOCATION_KEY_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    PREEMPT_ALLOCATION_KEYS_FIELD_NUMBER: _ClassVar[int]
    START_INDEX_FIELD_NUMBER: _ClassVar[int]
    allocation_key: str
    node_id: str
    preempt_allocation_keys: _containers.RepeatedScalarFieldContainer[str]
    start_index: int
    def __init__(self, allocation_key: _Optional[str] = ..., node_id: _Optional[str] = ..., preempt_allocation_keys: _Optional[_Iterable[str]] = ..., start_index: _Optional[int] = ...) -> None: ...

class PreemptionPredicatesResponse(_message.Message):
    __slots__ = ("success", "index")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    success: bool
    index: int
    def __init__(self, success: _Optional[bool] = ..., index: _Optional[int] = ...) -> None: ...

class UpdateContainerSchedulingStateRequest(_message.Message):
    __slots__ = ("application_id", "allocation_key", "state", "reason")
    class SchedulingState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        UNKNOWN_SCHEDULING_STATE: _ClassVar[UpdateContainerSchedulingStateRequest.SchedulingState]
        SKIPPED: _ClassVar[UpdateContainerSchedulingStateRequest.SchedulingState]
        SCHEDULED: _ClassVar[UpdateContainerSchedulingStateRequest.SchedulingState]
        RESERVED: _ClassVar[UpdateContainerSchedulingStateRequest.SchedulingState]
        FAILED: _ClassVar[UpdateContainerSchedulingStateRequest.SchedulingState]
    UNKNOWN_SCHEDULING_STATE: UpdateContainerSchedulingStateRequest.SchedulingState
    SKIPPED: UpdateContainerSchedulingStateRequest.SchedulingState
    SCHEDULED: UpdateContainerSchedulingStateRequest.SchedulingState
    RESERVED: UpdateContainerSchedulingStateRequest.SchedulingState
    FAILED: UpdateContainerSchedulingStateRequest.SchedulingState
    APPLICATION_ID_FIELD_NUMBER: _ClassVar[int]
    ALLOCATION_KEY_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    application_id: str
    allocation_key: str
    state: UpdateContainerSchedulingStateRequest.SchedulingState
    reason: str
    def __init__(self, application_id: _Optional[str] = ..., allocation_key: _Optional[str] = ..., state: _Optional[_Union[UpdateContainerSchedulingStateRequest.SchedulingState, str]] = ..., reason: _Optional[str] = ...) -> None: ...

class UpdateConfigurationRequest(_message.Message):
    __slots__ = ("rm_id", "policy_group", "config", "extra_config")
    class ExtraConfigEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    RM_ID_FIELD_NUMBER: _ClassVar[int]
    POLICY_GROUP_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    EXTRA_CONFIG_FIELD_NUMBER: _ClassVar[int]
    rm_id: str
    policy_group: str
    config: str
    extra_config: _containers.ScalarMap[str, str]
    def __init__(self, rm_id: _Optional[str] = ..., policy_group: _Optional[str] = ..., config: _Optional[str] = ..., extra_config: _Optional[_Mapping[str, str]] = ...) -> None: ...

class EventRecord(_message.Message):
    __slots__ = ("type", "object_id", "group_id", "reason", "message", "timestamp_nano")
    class Type(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        UNKNOWN_EVENTRECORD_TYPE: _ClassVar[EventRecord.Type]
        REQUEST: _ClassVar[EventRecord.Type]
        APP: _ClassVar[EventRecord.Type]
        NODE: _ClassVar[EventRecord.Type]
        QUEUE: _ClassVar[EventRecord.Type]
    UNKNOWN_EVENTRECORD_TYPE: EventRecord.Type
    REQUEST: EventRecord.Type
    APP: EventRecord.Type
    NODE: EventRecord.Type
    QUEUE: EventRecord.Type
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_NANO_FIELD_NUMBER: _ClassVar[int]
    type: EventRecord.Type
    object_id: str
    group_id: str
    reason: str
    message: str
    timestamp_nano: int
    def __init__(self, type: _Optional[_Union[EventRecord.Type, str]] = ..., object_id: _Optional[str] = ..., group_id: _Optional[str] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., timestamp_nano: _Optional[int] = ...) -> None: ...

class Empty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Hello(_message.Message):
    __slots__ = ("client", "resume")
    CLIENT_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    client: str
    resume: Resume
    def __init__(self, client: _Optional[str] = ..., resume: _Optional[_Union[Resume, _Mapping]] = ...) -> None: ...

class Resume(_message.Message):
    __slots__ = ("rm_id", "registration", "received")
    RM_ID_FIELD_NUMBER: _ClassVar[int]
    REGISTRATION_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_FIELD_NUMBER: _ClassVar[int]
    rm_id: str
    registration: str
    received: Received
    def __init__(self, rm_id: _Optional[str] = ..., registration: _Optional[str] = ..., received: _Optional[_Union[Received, _Mapping]] = ...) -> None: ...

class Received(_message.Message):
    __slots__ = ("allocation", "application", "node", "session")
    ALLOCATION_FIELD_NUMBER: _ClassVar[int]
    APPLICATION_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    allocation: int
    application: int
    node: int
    session: int
    def __init__(self, allocation: _Optional[int] = ..., application: _Optional[int] = ..., node: _Optional[int] = ..., session: _Optional[int] = ...) -> None: ...

class Welcome(_message.Message):
    __slots__ = ("session", "resumed", "not_resumed")
    SESSION_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    NOT_RESUMED_FIELD_NUMBER: _ClassVar[int]
    session: str
    resumed: bool
    not_resumed: str
    def __init__(self, session: _Optional[str] = ..., resumed: _Optional[bool] = ..., not_resumed: _Optional[str] = ...) -> None: ...

class Ack(_message.Message):
    __slots__ = ("stream", "seq", "error", "message")
    class Stream(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        UNKNOWN_STREAM: _ClassVar[Ack.Stream]
        ALLOCATION: _ClassVar[Ack.Stream]
        APPLICATION: _ClassVar[Ack.Stream]
        NODE: _ClassVar[Ack.Stream]
    UNKNOWN_STREAM: Ack.Stream
    ALLOCATION: Ack.Stream
    APPLICATION: Ack.Stream
    NODE: Ack.Stream
    STREAM_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    stream: Ack.Stream
    seq: int
    error: str
    message: str
    def __init__(self, stream: _Optional[_Union[Ack.Stream, str]] = ..., seq: _Optional[int] = ..., error: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class PredicatesQuestion(_message.Message):
    __slots__ = ("id", "args")
    ID_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    id: int
    args: PredicatesArgs
    def __init__(self, id: _Optional[int] = ..., args: _Optional[_Union[PredicatesArgs, _Mapping]] = ...) -> None: ...

class PredicatesAnswer(_message.Message):
    __slots__ = ("id", "allowed")
    ID_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_FIELD_NUMBER: _ClassVar[int]
    id: int
    allowed: bool
    def __init__(self, id: _Optional[int] = ..., allowed: _Optional[bool] = ...) -> None: ...

class PreemptionPredicatesQuestion(_message.Message):
    __slots__ = ("id", "args")
    ID_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    id: int
    args: PreemptionPredicatesArgs
    def __init__(self, id: _Optional[int] = ..., args: _Optional[_Union[PreemptionPredicatesArgs, _Mapping]] = ...) -> None: ...

class PreemptionPredicatesAnswer(_message.Message):
    __slots__ = ("id", "response")
    ID_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    id: int
    response: PreemptionPredicatesResponse
    def __init__(self, id: _Optional[int] = ..., response: _Optional[_Union[PreemptionPredicatesResponse, _Mapping]] = ...) -> None: ...

class Events(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[EventRecord]
    def __init__(self, events: _Optional[_Iterable[_Union[EventRecord, _Mapping]]] = ...) -> None: ...

class Goodbye(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class FromRM(_message.Message):
    __slots__ = ("hello", "predicates_answer", "preemption_predicates_answer", "received")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    PREDICATES_ANSWER_FIELD_NUMBER: _ClassVar[int]
    PREEMPTION_PREDICATES_ANSWER_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_FIELD_NUMBER: _ClassVar[int]
    hello: Hello
    predicates_answer: PredicatesAnswer
    preemption_predicates_answer: PreemptionPredicatesAnswer
    received: Received
    def __init__(self, hello: _Optional[_Union[Hello, _Mapping]] = ..., predicates_answer: _Optional[_Union[PredicatesAnswer, _Mapping]] = ..., preemption_predicates_answer: _Optional[_Union[PreemptionPredicatesAnswer, _Mapping]] = ..., received: _Optional[_Union[Received, _Mapping]] = ...) -> None: ...

class FromDaemon(_message.Message):
    __slots__ = ("welcome", "ack", "predicates", "events", "scheduling_state", "goodbye", "preemption_predicates")
    WELCOME_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    PREDICATES_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    SCHEDULING_STATE_FIELD_NUMBER: _ClassVar[int]
    GOODBYE_FIELD_NUMBER: _ClassVar[int]
    PREEMPTION_PREDICATES_FIELD_NUMBER: _ClassVar[int]
    welcome: Welcome
    ack: Ack
    predicates: PredicatesQuestion
    events: Events
    scheduling_state: UpdateContainerSchedulingStateRequest
    goodbye: Goodbye
    preemption_predicates: PreemptionPredicatesQuestion
    def __init__(self, welcome: _Optional[_Union[Welcome, _Mapping]] = ..., ack: _Optional[_Union[Ack, _Mapping]] = ..., predicates: _Optional[_Union[PredicatesQuestion, _Mapping]] = ..., events: _Optional[_Union[Events, _Mapping]] = ..., scheduling_state: _Optional[_Union[UpdateContainerSchedulingStateRequest, _Mapping]] = ..., goodbye: _Optional[_Union[Goodbye, _Mapping]] = ..., preemption_predicates: _Optional[_Union[PreemptionPredicatesQuestion, _Mapping]] = ...) -> None: ...

class SettleResponse(_message.Message):
    __slots__ = ("pushed",)
    PUSHED_FIELD_NUMBER: _ClassVar[int]
    pushed: int
    def __init__(self, pushed: _Optional[int] = ...) -> None: ...

class QueryRequest(_message.Message):
    __slots__ = ("method", "args")
    METHOD_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    method: str
    args: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, method: _Optional[str] = ..., args: _Optional[_Iterable[str]] = ...) -> None: ...

class QueryResponse(_message.Message):
    __slots__ = ("json",)
    JSON_FIELD_NUMBER: _ClassVar[int]
    json: str
    def __init__(self, json: _Optional[str] = ...) -> None: ...
