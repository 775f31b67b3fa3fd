"""The OpenAPI 3 document of the REST API (``/ws/v1/openapi.json``), written by hand: every
route of ``scheduler.daemon._rest``, its parameters, and the shapes of its answers with
YuniKorn's field names. A test holds it against the routes and every answer."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from scheduler.config._parser import QUEUE_NAME_RE
from scheduler.core import TERMINAL_STATES, AppState

__all__ = [
    "ACTIVE_STATUSES",
    "APPLICATION_STATES",
    "GROUP_NAME_RE",
    "POST_PATHS",
    "USER_NAME_RE",
    "method",
    "openapi_document",
]

#: The states of ``/ws/v1/partition/{p}/applications/{state}`` (YuniKorn's handlers.go):
#: ``active`` is every application not yet terminated, ``rejected`` the rejected ones and
#: ``completed`` the other terminated ones (Completed, Failed, Expired).
APPLICATION_STATES: Final = ("active", "rejected", "completed")
#: What ``?status=`` may name for active applications: their states, lower case.
ACTIVE_STATUSES: Final = tuple(s.lower() for s in AppState if s not in TERMINAL_STATES)

# Written by hand from the views (scheduler.core._views) and this module; test_rest checks the
# routes against the app's and every JSON answer against its schema.
_INT: Final = {"type": "integer", "format": "int64"}
_STR: Final = {"type": "string"}
_BOOL: Final = {"type": "boolean"}
_STRINGS: Final = {"type": "array", "items": _STR}
_STR_MAP: Final = {"type": "object", "additionalProperties": _STR}


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _arr(items: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items}


def _obj(props: Mapping[str, Any], *, optional: tuple[str, ...] = ()) -> dict[str, Any]:
    required = [name for name in props if name not in optional]
    return {"type": "object", "properties": dict(props), "required": required}


def _map_of(values: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": values}


_RES: Final = _ref("Resource")


def _schemas() -> dict[str, Any]:
    return {
        "Resource": {
            **_map_of(_INT),
            "description": "Quantities by resource name: memory in bytes, vcore in "
            "milli-vcores, other resources as counts.",
        },
        "YAPIError": _obj({"status_code": _INT, "message": _STR, "description": _STR}),
        "PartitionInfo": _partition_schema(),
        "QueueInfo": _queue_schema(),
        "AskInfo": _ask_schema(),
        "AllocationInfo": _allocation_schema(),
        "ApplicationInfo": _application_schema(),
        "PermitGang": _gang_schema(),
        "NodeInfo": _node_schema(),
        "Preemptions": _preemptions_schema(),
        "UsageQueue": _obj(
            {
                "queuePath": _STR,
                "resourceUsage": _RES,
                "runningApplications": _STRINGS,
                "maxResources": _RES,
                "maxApplications": _INT,
                "children": _arr(_ref("UsageQueue")),
            }
        ),
        "TemplateInfo": _template_schema(),
        "ClusterInfo": _cluster_schema(),
        "AppHistory": _obj({"timestamp": _INT, "totalApplications": _STR}),
        "ContainerHistory": _obj({"timestamp": _INT, "totalContainers": _STR}),
        "PartitionNodesUtil": _node_util_schema(),
        "ValidateConf": _obj({"allowed": _BOOL, "reason": _STR}),
        "UserUsage": _obj({"userName": _STR, "groups": _STR_MAP, "queues": _ref("UsageQueue")}),
        "GroupUsage": _obj(
            {"groupName": _STR, "applications": _STRINGS, "queues": _ref("UsageQueue")}
        ),
        "ActorStats": _obj(
            {
                "queued": _INT,
                "peak": _INT,
                "processed": _INT,
                "handler_time": {"type": "number"},
                "failures": _INT,
                "suspended": _INT,
                "resumed": _INT,
            }
        ),
        "StateDump": _obj(
            {
                "Timestamp": _INT,
                "Partitions": _arr(_ref("PartitionInfo")),
                "Applications": _arr(_ref("ApplicationInfo")),
                "Nodes": _arr(_obj({"partitionName": _STR, "nodesInfo": _arr(_ref("NodeInfo"))})),
                "Queues": _arr(_ref("QueueInfo")),
                "Actors": _map_of(_ref("ActorStats")),
                "Preemptions": _arr(_preemptions_schema(named=True)),
            }
        ),
        "Config": {
            **_obj({"partitions": _arr({"type": "object"}), "checksum": _STR}),
            "description": "The queues.yaml document in force (resources as quantities).",
        },
        "HealthCheck": _obj(
            {"Name": _STR, "Succeeded": _BOOL, "Description": _STR, "DiagnosisMessage": _STR}
        ),
        "SchedulerHealth": _obj({"Healthy": _BOOL, "HealthChecks": _arr(_ref("HealthCheck"))}),
        "EventRecord": {
            **_obj(
                {
                    "type": {**_INT, "description": "0 unknown, 1 request, 2 app, 3 node, 4 queue"},
                    "objectID": _STR,
                    "referenceID": {
                        **_STR,
                        "description": "The SI's groupID (SI 1.4: referenceID)",
                    },
                    "reason": _STR,
                    "message": _STR,
                    "timestampNano": _INT,
                }
            ),
            "description": "An event the core sent to an RM (si.EventRecord).",
        },
        "EventRecords": _obj(
            {
                "InstanceUUID": {**_STR, "description": "Ids start again at 0 with a new one"},
                "LowestID": {**_INT, "minimum": 0},
                "HighestID": {**_INT, "minimum": -1, "description": "-1 before the first event"},
                "EventRecords": _arr(_ref("EventRecord")),
            }
        ),
    }


def _partition_schema() -> dict[str, Any]:
    return _obj(
        {
            "clusterId": _STR,
            "name": _STR,
            "state": _STR,
            "capacity": _obj(
                {"capacity": _RES, "usedCapacity": _RES, "utilization": _map_of(_INT)}
            ),
            "nodeSortingPolicy": _obj(
                {"type": _STR, "resourceWeights": _map_of({"type": "number"})}
            ),
            "preemptionEnabled": {**_BOOL, "description": "The partition's preemption.enabled"},
            "totalNodes": _INT,
            "applications": {
                **_map_of(_INT),
                "description": "Applications by state, and their total under 'total'.",
            },
            "totalContainers": _INT,
            "rmState": {
                **_STR,
                "enum": ["Running", "Paused", "Stopped"],
                "description": "The state of the partition's RM (not YuniKorn's): a Paused "
                "RM's partition keeps its state but allocates nothing.",
            },
            "rmStopsAt": {
                **_INT,
                "description": "While the RM is Paused: when it will be Stopped, in ns.",
            },
        },
        optional=("rmStopsAt",),
    )


def _queue_schema() -> dict[str, Any]:
    return _obj(
        {
            "queuename": _STR,
            "status": _STR,
            "partition": _STR,
            "maxResource": _RES,
            "guaranteedResource": _RES,
            "allocatedResource": _RES,
            "preemptingResource": {
                **_RES,
                "description": "The queue's (and its children's) victims released to the RM "
                "with PREEMPTED_BY_SCHEDULER and not gone yet",
            },
            "pendingResource": _RES,
            "isLeaf": _BOOL,
            "isManaged": _BOOL,
            "properties": _STR_MAP,
            "parent": _STR,
            "children": _arr(_ref("QueueInfo")),
            "template": {
                **_ref("TemplateInfo"),
                "description": "The child template new dynamic leaves below take (parents "
                "only: their own or the nearest one above)",
            },
            "absUsedCapacity": {
                **_map_of(_INT),
                "description": "Per resource of maxResource, allocatedResource as a whole "
                "percentage of it (100 when the maximum is 0)",
            },
            "runningApps": _INT,
            "maxRunningApps": _INT,
            "currentPriority": _INT,
            "preemptionEnabled": {**_BOOL, "description": "preemption.policy is not disabled"},
            "isPreemptionFence": {**_BOOL, "description": "preemption.policy is fence"},
            "preemptionDelay": {
                **_STR,
                "description": "preemption.delay as a Go duration (30s unless a leaf sets one)",
            },
            "applications": _STRINGS,
        },
        optional=("children", "template"),
    )


def _template_schema() -> dict[str, Any]:
    return _obj(
        {
            "maxApplications": _INT,
            "maxResource": _RES,
            "guaranteedResource": _RES,
            "properties": _STR_MAP,
        },
        optional=("maxApplications", "maxResource", "guaranteedResource", "properties"),
    )


def _cluster_schema() -> dict[str, Any]:
    counts = (
        "totalApplications",
        "failedApplications",
        "pendingApplications",
        "runningApplications",
        "completedApplications",
        "totalContainers",
        "failedContainers",
        "pendingContainers",
        "runningContainers",
        "activeNodes",
        "totalNodes",
        "failedNodes",
    )
    return {
        **_obj(
            {
                "startTime": {**_INT, "description": "When the core started (Unix ns)"},
                "rmBuildInformation": _arr(_STR_MAP),
                "partition": _STR,
                "clusterName": _STR,
                **{name: {**_STR, "pattern": "^[0-9]*$"} for name in counts},
            }
        ),
        "description": "YuniKorn's ClusterDAOInfo: the counts are decimal strings as YuniKorn "
        "1.2 writes them, empty where the core counts nothing.",
    }


def _node_util_schema() -> dict[str, Any]:
    bucket = _obj(
        {"bucketName": _STR, "numOfNodes": _INT, "nodeNames": _STRINGS},
        optional=("numOfNodes", "nodeNames"),
    )
    return _obj(
        {
            "clusterId": _STR,
            "partition": _STR,
            "utilizations": _arr(
                _obj({"type": _STR, "utilization": _arr(bucket)}, optional=("utilization",))
            ),
        },
        optional=("utilizations",),
    )


def _ask_schema() -> dict[str, Any]:
    return _obj(
        {
            "allocationKey": _STR,
            "allocationTags": _STR_MAP,
            "requestTime": _INT,
            "resource": _RES,
            "pendingCount": _INT,
            "maxAllocations": _INT,
            "priority": _STR,
            "requiredNodeId": _STR,
            "applicationId": _STR,
            "partition": _STR,
            "placeholder": _BOOL,
            "taskGroupName": _STR,
            "triggeredPreemption": {
                **_BOOL,
                "description": "The ask has preempted allocations to make room for itself",
            },
            "originator": _BOOL,
        }
    )


def _allocation_schema() -> dict[str, Any]:
    return _obj(
        {
            "allocationKey": _STR,
            "allocationTags": _STR_MAP,
            "requestTime": _INT,
            "allocationTime": _INT,
            "allocationDelay": _INT,
            "uuid": _STR,
            "resource": _RES,
            "priority": _STR,
            "nodeId": _STR,
            "applicationId": _STR,
            "partition": _STR,
            "placeholder": _BOOL,
            "taskGroupName": _STR,
            "preempted": {
                **_BOOL,
                "description": "Released to the RM with PREEMPTED_BY_SCHEDULER: a victim on "
                "its way out",
            },
            "originator": _BOOL,
            "releasePending": _STR,
            "tentative": _BOOL,
        }
    )


def _application_schema() -> dict[str, Any]:
    return _obj(
        {
            "applicationID": _STR,
            "usedResource": _RES,
            "maxUsedResource": _RES,
            "pendingResource": _RES,
            "partition": _STR,
            "queueName": _STR,
            "submissionTime": _INT,
            "finishedTime": {**_INT, "nullable": True},
            "requests": _arr(_ref("AskInfo")),
            "allocations": _arr(_ref("AllocationInfo")),
            "applicationState": _STR,
            "user": _STR,
            "groups": _STRINGS,
            "rejectedMessage": _STR,
            "stateLog": _arr(_obj({"time": _INT, "applicationState": _STR})),
            "placeholderData": _arr(
                _obj(
                    {
                        "taskGroupName": _STR,
                        "count": _INT,
                        "minResource": _RES,
                        "replaced": _INT,
                        "timedout": _INT,
                    }
                )
            ),
            "hasReserved": _BOOL,
            "reservations": {**_STRINGS, "description": "'<node id>|<allocation key>'"},
            "gangs": _arr(_ref("PermitGang")),
        }
    )


def _gang_schema() -> dict[str, Any]:
    return _obj(
        {
            "gangId": _STR,
            "mode": _STR,
            "minAvailable": _INT,
            "totalNumber": _INT,
            "waitingTime": {"type": "number"},
            "gangGroup": _STRINGS,
            "createTime": _INT,
            "placed": _INT,
            "bound": _INT,
            "satisfied": _BOOL,
            "timedOut": _BOOL,
        }
    )


def _preemptions_schema(*, named: bool = False) -> dict[str, Any]:
    """The preemptions of a partition; ``named``: with its name (the state dump's)."""
    victim = _obj({"uuid": _STR, "allocationKey": _STR, "applicationId": _STR, "queueName": _STR})
    in_flight = _obj(
        {
            "applicationID": _STR,
            "allocationKey": {**_STR, "description": "The preemptor's ask"},
            "queueName": _STR,
            "nodeID": {**_STR, "description": "The node held for the ask meanwhile"},
            "requiredNode": {**_BOOL, "description": "The ask must run on that node"},
            "startTime": _INT,
            "victimsTotal": _INT,
            "victims": {**_arr(victim), "description": "Those the RM has not confirmed yet"},
        }
    )
    totals = _obj(
        {
            "started": _INT,
            "requiredNode": {**_INT, "description": "Of those started, on a required node"},
            "confirmed": {**_INT, "description": "Ended with every victim confirmed"},
            "timedOut": {**_INT, "description": "Ended with victims not confirmed in time"},
            "cancelled": {**_INT, "description": "Ended as the ask or its node went"},
            "victims": {**_INT, "description": "Released with PREEMPTED_BY_SCHEDULER"},
            "victimsConfirmed": _INT,
        }
    )
    name = {"partitionName": _STR} if named else {}
    return {
        **_obj({**name, "inFlight": _arr(in_flight), "totals": totals}),
        "description": "Not in YuniKorn's API: the preemptions whose ask waits for the RM to "
        "confirm its victims, oldest first, and the partition's totals since it started.",
    }


def _node_schema() -> dict[str, Any]:
    return _obj(
        {
            "nodeID": _STR,
            "hostName": _STR,
            "rackName": _STR,
            "attributes": _STR_MAP,
            "capacity": _RES,
            "allocated": _RES,
            "occupied": _RES,
            "available": _RES,
            "utilized": _map_of(_INT),
            "allocations": _arr(_ref("AllocationInfo")),
            "schedulable": _BOOL,
            "isReserved": _BOOL,
            "reservations": {**_STRINGS, "description": "'<application id>|<allocation key>'"},
        }
    )


_PARAMETERS: Final = {
    "partition": "The partition's name.",
    "queue": "The queue's full path, such as root.default.",
    "application": "The application's id.",
    "node": "The node's id.",
    "state": "active (not terminated), rejected, or completed (terminated otherwise).",
    "user": "The user's name.",
    "group": "The group's name.",
}
_QUERIES: Final = {
    "status": ("An active application's state, in any case.", list(ACTIVE_STATUSES)),
    "subtree": ("Present: the queue's children are included.", None),
    "rm": ("The resource manager whose configuration to show.", None),
}


def _any_case(words: Iterable[str]) -> str:
    """A pattern for ``words`` in any case: the handlers lower-case these values, as
    YuniKorn's do (``Active`` is ``active``), and the document must not call that invalid."""
    alternatives = ("".join(f"[{c.upper()}{c}]" if c.isalpha() else c for c in w) for w in words)
    return "^(" + "|".join(alternatives) + ")$"


# What the handlers accept of a path parameter, where it is not any string.
_QUEUE_NAME: Final = QUEUE_NAME_RE.pattern  # YuniKorn's, as _rest checks it
#: YuniKorn 1.8's UserRegExp and GroupRegExp (pkg/common/configs/configvalidator.go), which
#: its usage/user/{user} and usage/group/{group} check before they look the name up.
USER_NAME_RE: Final = re.compile(r"[_a-zA-Z][a-zA-Z0-9:#/_.@-]*[$]?")
GROUP_NAME_RE: Final = re.compile(r"[_a-zA-Z][a-zA-Z0-9:_.-]*")
_PATH_SCHEMAS: Final = {
    "queue": {**_STR, "pattern": f"^{_QUEUE_NAME}(\\.{_QUEUE_NAME})*$"},
    "user": {**_STR, "pattern": f"^{USER_NAME_RE.pattern}$"},
    "group": {**_STR, "pattern": f"^{GROUP_NAME_RE.pattern}$"},
    "state": {**_STR, "pattern": _any_case(APPLICATION_STATES)},
}
# Query parameters that are non-negative integers.
_UINT_QUERIES: Final = {
    "start": "The id of the first event (default: the oldest kept).",
    "count": "How many events at most: the batch's size (default and most: all kept, 0 is "
    "refused), or the stream's past events to send first (default 0).",
}

# path: (summary, 200 schema, query parameters, errors besides 405)
_OPERATIONS: Final[dict[str, tuple[str, Any, tuple[str, ...], tuple[int, ...]]]] = {
    "/ws/v1/clusters": (
        "Each partition with the core's start time, the RMs' build information and counts",
        _arr(_ref("ClusterInfo")),
        (),
        (),
    ),
    "/ws/v1/history/apps": (
        "Running applications, sampled once a minute of the core's clock (the last 1440)",
        _arr(_ref("AppHistory")),
        (),
        (),
    ),
    "/ws/v1/history/containers": (
        "Allocations held, sampled once a minute of the core's clock (the last 1440)",
        _arr(_ref("ContainerHistory")),
        (),
        (),
    ),
    "/ws/v1/scheduler/node-utilizations": (
        "Per partition and resource, the nodes in ten buckets of utilization",
        _arr(_ref("PartitionNodesUtil")),
        (),
        (),
    ),
    "/ws/v1/validate-conf": (
        "Checks a queues.yaml document (the request body); changes nothing",
        _ref("ValidateConf"),
        (),
        (),
    ),
    "/ws/v1/partitions": ("Every partition", _arr(_ref("PartitionInfo")), (), ()),
    "/ws/v1/partition/{partition}/queues": (
        "The partition's queue tree, from root",
        _ref("QueueInfo"),
        (),
        (404,),
    ),
    "/ws/v1/partition/{partition}/queue/{queue}": (
        "One queue",
        _ref("QueueInfo"),
        ("subtree",),
        (400, 404),
    ),
    "/ws/v1/partition/{partition}/queue/{queue}/applications": (
        "The queue's applications, live then terminated",
        _arr(_ref("ApplicationInfo")),
        (),
        (400, 404),
    ),
    "/ws/v1/partition/{partition}/queue/{queue}/application/{application}": (
        "One application of the queue",
        _ref("ApplicationInfo"),
        (),
        (400, 404),
    ),
    "/ws/v1/partition/{partition}/applications/{state}": (
        "The partition's applications in a state",
        _arr(_ref("ApplicationInfo")),
        ("status",),
        (400, 404),
    ),
    "/ws/v1/partition/{partition}/application/{application}": (
        "One application, in any state until it expires",
        _ref("ApplicationInfo"),
        (),
        (404,),
    ),
    "/ws/v1/partition/{partition}/nodes": (
        "The partition's nodes",
        _arr(_ref("NodeInfo")),
        (),
        (404,),
    ),
    "/ws/v1/partition/{partition}/node/{node}": ("One node", _ref("NodeInfo"), (), (404,)),
    "/ws/v1/partition/{partition}/usage/users": (
        "What each user runs below each queue, against its limits",
        _arr(_ref("UserUsage")),
        (),
        (404,),
    ),
    "/ws/v1/partition/{partition}/usage/user/{user}": (
        "What one user runs below each queue, against its limits",
        _ref("UserUsage"),
        (),
        (400, 404),
    ),
    "/ws/v1/partition/{partition}/usage/group/{group}": (
        "What one group runs below each queue, against its limits",
        _ref("GroupUsage"),
        (),
        (400, 404),
    ),
    "/ws/v1/partition/{partition}/usage/groups": (
        "What each group runs below each queue, against its limits",
        _arr(_ref("GroupUsage")),
        (),
        (404,),
    ),
    "/ws/v1/partition/{partition}/preemptions": (
        "The preemptions in flight and the totals (not in YuniKorn's API)",
        _ref("Preemptions"),
        (),
        (404,),
    ),
    "/ws/v1/fullstatedump": ("Everything, in one document", _ref("StateDump"), (), ()),
    "/ws/v1/config": (
        "The queue configuration in force (YAML, or JSON for Accept: application/json)",
        _ref("Config"),
        ("rm",),
        (400, 404),
    ),
    "/ws/v1/scheduler/healthcheck": (
        "Consistency checks of the core's state; 503 when one fails",
        _ref("SchedulerHealth"),
        (),
        (503,),
    ),
    "/ws/v1/metrics": ("Prometheus metrics (text format)", None, (), ()),
    "/ws/v1/openapi.json": ("This document", {"type": "object"}, (), ()),
    "/ws/v1/events/batch": (
        "The events sent to the RMs, from the id 'start' on (YuniKorn's batch events)",
        _ref("EventRecords"),
        ("start", "count"),
        (400,),
    ),
    "/ws/v1/events/stream": (
        "The events as they are sent, one JSON document a line: the InstanceUUID, then "
        "one EventRecord each; a reader that falls behind is cut off, and the last line, "
        "a YAPIError, says why the stream ended",
        {**_STR, "description": "Newline-delimited JSON"},
        ("count",),
        (400,),
    ),
}


def _operation(path: str) -> dict[str, Any]:
    summary, schema, queries, errors = _OPERATIONS[path]
    params: list[dict[str, Any]] = [
        {
            "name": name,
            "in": "path",
            "required": True,
            "description": doc,
            "schema": _PATH_SCHEMAS.get(name, _STR),
        }
        for name, doc in _PARAMETERS.items()
        if "{" + name + "}" in path
    ]
    for name in queries:
        if name in _UINT_QUERIES:
            least = 1 if (path, name) == ("/ws/v1/events/batch", "count") else 0
            query_schema: dict[str, Any] = {**_INT, "minimum": least}
            doc = _UINT_QUERIES[name]
        else:
            doc, enum = _QUERIES[name]
            query_schema = {**_STR, "pattern": _any_case(enum)} if enum else _STR
        params.append({"name": name, "in": "query", "description": doc, "schema": query_schema})
    error = {"application/json": {"schema": _ref("YAPIError")}}
    responses: dict[str, Any] = {"200": {"description": "OK", "content": _content(path, schema)}}
    for code in (*errors, 405):
        if code == 503:
            responses["503"] = {"description": "Unhealthy", "content": _content(path, schema)}
        else:
            responses[str(code)] = {"description": _ERRORS[code], "content": error}
    operation_id = path.removeprefix("/ws/v1/").replace("/", "_").replace("{", "").replace("}", "")
    operation: dict[str, Any] = {
        "summary": summary,
        "operationId": operation_id.replace(".", "_").replace("-", "_"),
        "parameters": params,
        "responses": responses,
    }
    if method(path) == "post":
        text = {"schema": {**_STR, "description": "A queues.yaml document"}}
        operation["requestBody"] = {"required": False, "content": {"text/plain": text}}
    return operation


#: The paths answered to POST (and to no other method); the others answer GET and HEAD.
POST_PATHS: Final = frozenset({"/ws/v1/validate-conf"})


def method(path: str) -> str:
    """The one method of ``path`` in the document, lower case."""
    return "post" if path in POST_PATHS else "get"


_ERRORS: Final = {
    400: "Malformed path or query",
    404: "Unknown partition, queue, application, node or resource manager",
    405: "Any method but GET and HEAD (POST for validate-conf)",
}


def _content(path: str, schema: Any) -> dict[str, Any]:
    if path == "/ws/v1/metrics":
        return {"text/plain": {"schema": _STR}}
    if path == "/ws/v1/events/stream":
        return {"application/x-ndjson": {"schema": schema}}
    if path == "/ws/v1/config":
        return {"application/x-yaml": {"schema": schema}, "application/json": {"schema": schema}}
    return {"application/json": {"schema": schema}}


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3 description of every route of ``make_app``: paths, parameters and
    response schemas with YuniKorn's field names."""
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "Scheduler core REST API (YuniKorn's, read-only)",
            "version": "1",
            "description": "YuniKorn's /ws/v1 paths and JSON field names over the core's "
            "state. Errors are YAPIError bodies.",
        },
        "paths": {path: {method(path): _operation(path)} for path in _OPERATIONS},
        "components": {"schemas": _schemas()},
    }
