"""YuniKorn's read-only REST API over a running core, as an ASGI application (Starlette).

``make_app(core)`` serves the paths and JSON field names of YuniKorn's web service
(``pkg/webservice``): partitions, queues, applications, nodes, user and group usage, the
full state dump, the configuration in force, the health check and Prometheus metrics, plus
an OpenAPI document of all of it at ``/ws/v1/openapi.json``. Every answer is built from the
core's own queries (``Core.get_*``, ``Core.state_dump``), read when the request comes; this
module reshapes and checks them and keeps no state of its own.

Errors are YuniKorn's ``dao.YAPIError``, ``{"status_code", "message", "description"}``:
404 for an unknown partition, queue, application, node or path, 400 for a malformed path
or query (an unknown application state, an invalid queue name), 405 for any method but
GET (and HEAD, which HTTP ties to GET).

The health check and the metrics are plain functions of a state dump
(``health_status``, ``metric_families``), so each can be tested on a doctored dump.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final

import yaml
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from scheduler._application import TERMINAL_STATES, AppState
from scheduler._config import QUEUE_NAME_RE
from scheduler._core import Core
from scheduler._errors import NotFoundError, SchedulerError

__all__ = [
    "APPLICATION_STATES",
    "HEALTH_CHECKS",
    "actor_kind",
    "aggregated_state",
    "check_application_allocations",
    "check_negative_applications",
    "check_negative_nodes",
    "check_negative_partitions",
    "check_negative_queues",
    "check_node_allocations",
    "check_node_capacity",
    "check_node_totals",
    "check_orphans_on_apps",
    "check_orphans_on_nodes",
    "check_partition_allocated",
    "check_partition_capacity",
    "check_queue_allocations",
    "check_reservations",
    "health_status",
    "make_app",
    "metric_families",
    "metric_name",
    "openapi_document",
]

Dump = Mapping[str, Any]
HealthCheck = dict[str, Any]

#: The states of ``/ws/v1/partition/{p}/applications/{state}`` (YuniKorn's handlers.go):
#: ``active`` is every application not yet terminated, ``rejected`` the rejected ones and
#: ``completed`` the other terminated ones (Completed, Failed, Expired).
APPLICATION_STATES: Final = ("active", "rejected", "completed")
_ACTIVE_STATUSES: Final = tuple(s.lower() for s in AppState if s not in TERMINAL_STATES)


# ================================================================================ the app
def make_app(core: Core) -> Starlette:
    """The REST API of ``core`` as an ASGI application.

    Run it in the core's event loop (``uvicorn``'s ``Server.serve()`` inside the
    ``start_scheduler()`` block, or ``httpx.ASGITransport`` in a test): every request asks
    the core's actors.

    Args:
        core: A running core, as ``scheduler.start_scheduler()`` yields it.

    Returns:
        A Starlette application; ``app.state.registry`` is its Prometheus registry.
    """
    api = _Api(core)
    app = Starlette(
        routes=[Route(path, getattr(api, name), methods=["GET"]) for path, name in _ROUTES],
        exception_handlers={
            HTTPException: _http_error,
            NotFoundError: _not_found,
            SchedulerError: _core_error,
        },
    )
    app.state.registry = api.registry
    return app


_ROUTES: Final = (
    ("/ws/v1/partitions", "partitions"),
    ("/ws/v1/partition/{partition}/queues", "queues"),
    ("/ws/v1/partition/{partition}/queue/{queue}", "queue"),
    ("/ws/v1/partition/{partition}/queue/{queue}/applications", "queue_applications"),
    (
        "/ws/v1/partition/{partition}/queue/{queue}/application/{application:path}",
        "queue_application",
    ),
    ("/ws/v1/partition/{partition}/applications/{state}", "applications_by_state"),
    ("/ws/v1/partition/{partition}/application/{application:path}", "application"),
    ("/ws/v1/partition/{partition}/nodes", "nodes"),
    ("/ws/v1/partition/{partition}/node/{node:path}", "node"),
    ("/ws/v1/partition/{partition}/usage/users", "user_usage"),
    ("/ws/v1/partition/{partition}/usage/groups", "group_usage"),
    ("/ws/v1/fullstatedump", "full_state_dump"),
    ("/ws/v1/config", "config"),
    ("/ws/v1/scheduler/healthcheck", "healthcheck"),
    ("/ws/v1/metrics", "metrics"),
    ("/ws/v1/openapi.json", "openapi"),
)


class _Api:
    """The route handlers: each reads the core and answers."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self.collector = _CoreCollector()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.collector)

    async def partitions(self, request: Request) -> Response:
        return JSONResponse(await self.core.get_partitions())

    async def queues(self, request: Request) -> Response:
        return JSONResponse(await self.core.get_queue(request.path_params["partition"], "root"))

    async def queue(self, request: Request) -> Response:
        queue = await self.core.get_queue(request.path_params["partition"], _queue_path(request))
        if "subtree" not in request.query_params:  # YuniKorn: children only when asked
            queue = {k: v for k, v in queue.items() if k != "children"}
        return JSONResponse(queue)

    async def queue_applications(self, request: Request) -> Response:
        path = _queue_path(request)
        part = _partition(await self.core.state_dump(), request.path_params["partition"])
        if _find_queue(part["queues"], path) is None:
            raise NotFoundError(f"queue {path!r} not found in partition {_name(part)!r}")
        return JSONResponse(_queue_apps(part, path))

    async def queue_application(self, request: Request) -> Response:
        partition, path = request.path_params["partition"], _queue_path(request)
        await self.core.get_queue(partition, path)  # an unknown queue is a 404 of its own
        app_id = request.path_params["application"]
        app = await self.core.get_application(partition, app_id)
        if app["queueName"] != path or app["applicationState"] == AppState.REJECTED:
            raise NotFoundError(f"application {app_id!r} not found in queue {path!r}")
        return JSONResponse(app)

    async def applications_by_state(self, request: Request) -> Response:
        part = _partition(await self.core.state_dump(), request.path_params["partition"])
        state = request.path_params["state"].lower()
        status = request.query_params.get("status", "").lower()
        if state not in APPLICATION_STATES:
            raise HTTPException(
                400, f"application state must be one of {_join(APPLICATION_STATES)}"
            )
        if status and (state != "active" or status not in _ACTIVE_STATUSES):
            raise HTTPException(
                400, f"status applies to active applications only: {_join(_ACTIVE_STATUSES)}"
            )
        return JSONResponse(_apps_in_state(part, state, status))

    async def application(self, request: Request) -> Response:
        params = request.path_params
        return JSONResponse(
            await self.core.get_application(params["partition"], params["application"])
        )

    async def nodes(self, request: Request) -> Response:
        part = _partition(await self.core.state_dump(), request.path_params["partition"])
        return JSONResponse(part["nodes"])

    async def node(self, request: Request) -> Response:
        params = request.path_params
        return JSONResponse(await self.core.get_node(params["partition"], params["node"]))

    async def user_usage(self, request: Request) -> Response:
        return JSONResponse(await self.core.get_user_usage(request.path_params["partition"]))

    async def group_usage(self, request: Request) -> Response:
        return JSONResponse(await self.core.get_group_usage(request.path_params["partition"]))

    async def full_state_dump(self, request: Request) -> Response:
        return JSONResponse(aggregated_state(await self.core.state_dump()))

    async def config(self, request: Request) -> Response:
        configs = await self.core.get_config()
        doc = _pick_config(configs, request.query_params.get("rm"))
        if "application/json" in request.headers.get("accept", ""):
            return JSONResponse(doc)
        text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
        return Response(text, media_type="application/x-yaml; charset=UTF-8")

    async def healthcheck(self, request: Request) -> Response:
        status = health_status(await self.core.state_dump())
        return JSONResponse(status, status_code=200 if status["Healthy"] else 503)

    async def metrics(self, request: Request) -> Response:
        self.collector.dump = await self.core.state_dump()
        try:  # no await in between: the scrape reads this dump and no other
            body = generate_latest(self.registry)
        finally:
            self.collector.dump = None
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    async def openapi(self, request: Request) -> Response:
        return JSONResponse(openapi_document())


# ============================================================================== helpers
def _queue_path(request: Request) -> str:
    """The ``{queue}`` of the path, checked as YuniKorn's ``validateQueue`` does."""
    path: str = request.path_params["queue"]
    bad = [part for part in path.split(".") if not QUEUE_NAME_RE.fullmatch(part)]
    if bad:
        raise HTTPException(
            400,
            f"invalid queue path {path!r}: {bad[0]!r} is not a queue name (1 to 64 letters, "
            "digits, '-' or '_')",
        )
    return path


def _name(part: Dump) -> str:
    return str(part["partition"]["name"])


def _partition(dump: Dump, name: str) -> Dump:
    """One partition of a state dump, or the core's 404."""
    part: Dump
    for part in dump["partitions"]:
        if _name(part) == name:
            return part
    raise NotFoundError(f"partition {name!r} not found")


def _find_queue(queue: Dump, path: str) -> Dump | None:
    if queue["queuename"] == path:
        return queue
    for child in queue["children"]:
        if path == child["queuename"] or path.startswith(child["queuename"] + "."):
            return _find_queue(child, path)
    return None


def _queue_apps(part: Dump, path: str) -> list[Any]:
    """The queue's applications, then its terminated ones (YuniKorn v1.2 lists both)."""
    live = [a for a in part["applications"] if a["queueName"] == path]
    done = [
        a
        for a in part["terminatedApplications"]
        if a["queueName"] == path and a["applicationState"] != AppState.REJECTED
    ]
    return live + done


def _apps_in_state(part: Dump, state: str, status: str) -> list[Any]:
    if state == "active":
        apps = part["applications"]
        return [a for a in apps if not status or a["applicationState"].lower() == status]
    rejected = state == "rejected"
    return [
        a
        for a in part["terminatedApplications"]
        if (a["applicationState"] == AppState.REJECTED) == rejected
    ]


def _pick_config(configs: Mapping[str, Any], rm_id: str | None) -> Any:
    """The configuration of one RM: the only one registered, or the one ``?rm=`` names."""
    if rm_id is not None:
        if rm_id not in configs:
            raise HTTPException(404, f"resource manager {rm_id!r} is not registered")
        return configs[rm_id]
    if not configs:
        raise HTTPException(404, "no resource manager is registered")
    if len(configs) > 1:
        raise HTTPException(
            400, f"several resource managers are registered: name one with ?rm= ({_join(configs)})"
        )
    return next(iter(configs.values()))


def aggregated_state(dump: Dump) -> dict[str, Any]:
    """A state dump in YuniKorn's ``/ws/v1/fullstatedump`` layout (``AggregatedStateInfo``),
    plus the actors' mailbox counters (``Actors``). YuniKorn's application and container
    history, cluster info and log level have no counterpart in the core and are left out.
    """
    parts = dump["partitions"]
    return {
        "Timestamp": dump["timestamp"],
        "Partitions": [p["partition"] for p in parts],
        "Applications": [
            a for p in parts for a in (*p["applications"], *p["terminatedApplications"])
        ],
        "Nodes": [{"partitionName": _name(p), "nodesInfo": p["nodes"]} for p in parts],
        "Queues": [p["queues"] for p in parts],
        "Actors": dump["actors"],
    }


def _join(names: Iterable[str]) -> str:
    return ", ".join(names)


# ================================================================================= errors
def _error(status: int, message: str, description: str, headers: Any = None) -> JSONResponse:
    body = {"status_code": status, "message": message, "description": description}
    return JSONResponse(body, status_code=status, headers=headers)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        detail = f"{request.method} is not allowed: the API is read-only (GET)"
        return _error(405, "Method Not Allowed", detail, exc.headers)
    if exc.status_code == 404 and exc.detail == "Not Found":
        return _error(404, "Not Found", f"no such path: {request.url.path}")
    return _error(exc.status_code, exc.detail, exc.detail, exc.headers)


async def _not_found(request: Request, exc: Exception) -> Response:
    """The core's ``NotFoundError``, with YuniKorn's short message (``Partition not
    found``, ...) and the core's own words as the description."""
    text = str(exc)
    kind = text.split(" ", 1)[0]
    message = f"{kind.capitalize()} not found" if kind in _KINDS else "Not found"
    return _error(404, message, text)


_KINDS: Final = frozenset({"partition", "queue", "application", "node"})


async def _core_error(request: Request, exc: Exception) -> Response:
    return _error(500, "Internal Server Error", str(exc))


# =========================================================================== health check
# YuniKorn's scheduler health checks (pkg/scheduler/health_checker.go) that a state dump
# can answer, by YuniKorn's names, and the consistency checks of the core's own totals.
# YuniKorn's "Scheduling errors" and "Failed nodes" read counters the core does not keep.
def _check(name: str, description: str, label: str, bad: list[str]) -> HealthCheck:
    return {
        "Name": name,
        "Succeeded": not bad,
        "Description": description,
        "DiagnosisMessage": f"{label}: {json.dumps(sorted(set(bad)))}",
    }


def _nz(res: Mapping[str, int]) -> dict[str, int]:
    return {k: v for k, v in res.items() if v}


def _plus(resources: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for res in resources:
        for k, v in res.items():
            total[k] = total.get(k, 0) + v
    return _nz(total)


def _negative(*resources: Mapping[str, int]) -> bool:
    return any(v < 0 for res in resources for v in res.values())


def _nodes(dump: Dump) -> Iterator[tuple[str, Dump]]:
    for part in dump["partitions"]:
        for node in part["nodes"]:
            yield f"{_name(part)}/{node['nodeID']}", node


def _apps(dump: Dump) -> Iterator[tuple[str, Dump]]:
    for part in dump["partitions"]:
        for app in (*part["applications"], *part["terminatedApplications"]):
            yield f"{_name(part)}/{app['applicationID']}", app


def _walk(queue: Dump) -> Iterator[Dump]:
    yield queue
    for child in queue["children"]:
        yield from _walk(child)


def _queues(dump: Dump) -> Iterator[tuple[str, Dump]]:
    for part in dump["partitions"]:
        for queue in _walk(part["queues"]):
            yield f"{_name(part)}/{queue['queuename']}", queue


def check_negative_partitions(dump: Dump) -> HealthCheck:
    """No partition has a negative capacity or usage."""
    bad = [
        _name(p)
        for p in dump["partitions"]
        if _negative(
            p["partition"]["capacity"]["capacity"], p["partition"]["capacity"]["usedCapacity"]
        )
    ]
    return _check(
        "Negative resources",
        "Check for negative resources in the partitions",
        "Partitions with negative resources",
        bad,
    )


def check_negative_nodes(dump: Dump) -> HealthCheck:
    """No node has a negative capacity, allocation, occupied or available resource."""
    bad = [
        key
        for key, n in _nodes(dump)
        if _negative(n["capacity"], n["allocated"], n["occupied"], n["available"])
        or any(_negative(a["resource"]) for a in n["allocations"])
    ]
    return _check(
        "Negative resources",
        "Check for negative resources in the nodes and their allocations",
        "Nodes with negative resources",
        bad,
    )


def check_negative_queues(dump: Dump) -> HealthCheck:
    """No queue has a negative allocated or pending resource."""
    bad = [
        key for key, q in _queues(dump) if _negative(q["allocatedResource"], q["pendingResource"])
    ]
    return _check(
        "Negative resources",
        "Check for negative allocated or pending resources in the queues",
        "Queues with negative resources",
        bad,
    )


def check_negative_applications(dump: Dump) -> HealthCheck:
    """No application has a negative used or pending resource, nor an ask a negative one."""
    bad = [
        key
        for key, a in _apps(dump)
        if _negative(a["usedResource"], a["pendingResource"])
        or any(_negative(r["resource"]) for r in a["requests"])
    ]
    return _check(
        "Negative resources",
        "Check for negative used or pending resources in the applications and their asks",
        "Applications with negative resources",
        bad,
    )


def check_partition_allocated(dump: Dump) -> HealthCheck:
    """A partition's used capacity is what its nodes have allocated."""
    bad = [
        _name(p)
        for p in dump["partitions"]
        if _nz(p["partition"]["capacity"]["usedCapacity"])
        != _plus(n["allocated"] for n in p["nodes"])
    ]
    return _check(
        "Consistency of data",
        "Check if the partition's used capacity == sum of the nodes' allocated resources",
        "Partitions with inconsistent data",
        bad,
    )


def check_partition_capacity(dump: Dump) -> HealthCheck:
    """A partition's capacity is the sum of its nodes' capacities."""
    bad = [
        _name(p)
        for p in dump["partitions"]
        if _nz(p["partition"]["capacity"]["capacity"]) != _plus(n["capacity"] for n in p["nodes"])
    ]
    return _check(
        "Consistency of data",
        "Check if the partition's capacity == sum of the nodes' capacities",
        "Partitions with inconsistent data",
        bad,
    )


def check_node_totals(dump: Dump) -> HealthCheck:
    """A node's capacity is its allocated, occupied and available resources together."""
    bad = [
        key
        for key, n in _nodes(dump)
        if _nz(n["capacity"]) != _plus((n["allocated"], n["occupied"], n["available"]))
    ]
    return _check(
        "Consistency of data",
        "Check if a node's capacity == allocated + occupied + available resources",
        "Nodes with inconsistent data",
        bad,
    )


def check_node_capacity(dump: Dump) -> HealthCheck:
    """No node has more allocated than its capacity."""
    bad = [
        key
        for key, n in _nodes(dump)
        if any(v > n["capacity"].get(k, 0) for k, v in n["allocated"].items())
    ]
    return _check(
        "Consistency of data",
        "Check if a node's capacity >= the resources allocated on it",
        "Nodes with inconsistent data",
        bad,
    )


def check_node_allocations(dump: Dump) -> HealthCheck:
    """A node's allocated resource is the sum of its allocations."""
    bad = [
        key
        for key, n in _nodes(dump)
        if _nz(n["allocated"]) != _plus(a["resource"] for a in n["allocations"])
    ]
    return _check(
        "Consistency of data",
        "Check if a node's allocated resource == sum of the allocations on it",
        "Nodes with inconsistent data",
        bad,
    )


def check_application_allocations(dump: Dump) -> HealthCheck:
    """An application's used resource is the sum of its allocations."""
    bad = [
        key
        for key, a in _apps(dump)
        if _nz(a["usedResource"]) != _plus(x["resource"] for x in a["allocations"])
    ]
    return _check(
        "Consistency of data",
        "Check if an application's used resource == sum of its allocations",
        "Applications with inconsistent data",
        bad,
    )


def check_queue_allocations(dump: Dump) -> HealthCheck:
    """A queue's allocated resource is what its applications use plus what its children
    have allocated; every application it lists is live."""
    bad: list[str] = []
    for part in dump["partitions"]:
        live = {a["applicationID"]: a for a in part["applications"]}
        for q in _walk(part["queues"]):
            apps = [live.get(app_id) for app_id in q["applications"]]
            used = [a["usedResource"] for a in apps if a is not None]
            used += [c["allocatedResource"] for c in q["children"]]
            if None in apps or _nz(q["allocatedResource"]) != _plus(used):
                bad.append(f"{_name(part)}/{q['queuename']}")
    return _check(
        "Consistency of data",
        "Check if a queue's allocated resource == sum of its applications' used resources "
        "and its children's allocated resources",
        "Queues with inconsistent data",
        bad,
    )


def check_orphans_on_nodes(dump: Dump) -> HealthCheck:
    """Every allocation on a node names that node and an application that holds it."""
    bad: list[str] = []
    for part in dump["partitions"]:
        held = _allocations_by_app(part)
        for node in part["nodes"]:
            for a in node["allocations"]:
                uuids = held.get(a["applicationId"], set())
                if a["nodeId"] != node["nodeID"] or a["uuid"] not in uuids:
                    bad.append(f"{_name(part)}/{node['nodeID']}/{a['uuid']}")
    return _check(
        "Orphan allocation on node check",
        "Check if every allocation on a node belongs to an application that holds it",
        "Orphan allocations",
        bad,
    )


def check_orphans_on_apps(dump: Dump) -> HealthCheck:
    """Every allocation of an application is on a node that exists and lists it."""
    bad: list[str] = []
    for part in dump["partitions"]:
        on_nodes = {n["nodeID"]: {a["uuid"] for a in n["allocations"]} for n in part["nodes"]}
        for app in (*part["applications"], *part["terminatedApplications"]):
            for a in app["allocations"]:
                if a["uuid"] not in on_nodes.get(a["nodeId"], set()):
                    bad.append(f"{_name(part)}/{app['applicationID']}/{a['uuid']}")
    return _check(
        "Orphan allocation on app check",
        "Check if every allocation of an application is on an existing node that lists it",
        "Orphan allocations",
        bad,
    )


def _allocations_by_app(part: Dump) -> dict[str, set[str]]:
    apps = (*part["applications"], *part["terminatedApplications"])
    return {a["applicationID"]: {x["uuid"] for x in a["allocations"]} for a in apps}


def check_reservations(dump: Dump) -> HealthCheck:
    """Every reservation names an existing node and application, and both list it."""
    bad: list[str] = []
    for part in dump["partitions"]:
        apps = {a["applicationID"]: set(a["reservations"]) for a in part["applications"]}
        nodes = {n["nodeID"]: set(n["reservations"]) for n in part["nodes"]}
        for app_id, keys in apps.items():
            bad += [f"{_name(part)}/{app_id}/{k}" for k in keys if not _mirrored(k, nodes, app_id)]
        for node_id, keys in nodes.items():
            bad += [f"{_name(part)}/{node_id}/{k}" for k in keys if not _mirrored(k, apps, node_id)]
    return _check(
        "Reservation check",
        "Check if every reservation names an existing node and application that both list it",
        "Broken reservations",
        bad,
    )


def _mirrored(key: str, others: Mapping[str, set[str]], own_id: str) -> bool:
    """``key`` is ``<other id>|<allocation key>`` (either id may hold a '|'): some
    ``other`` exists and lists ``<own_id>|<allocation key>``."""
    for i, char in enumerate(key):
        if char == "|" and key[:i] in others and f"{own_id}|{key[i + 1 :]}" in others[key[:i]]:
            return True
    return False


#: Every check of ``/ws/v1/scheduler/healthcheck``, in the order it reports them.
HEALTH_CHECKS: Final[tuple[Callable[[Dump], HealthCheck], ...]] = (
    check_negative_partitions,
    check_negative_nodes,
    check_negative_queues,
    check_negative_applications,
    check_partition_allocated,
    check_partition_capacity,
    check_node_totals,
    check_node_capacity,
    check_node_allocations,
    check_application_allocations,
    check_queue_allocations,
    check_orphans_on_nodes,
    check_orphans_on_apps,
    check_reservations,
)


def health_status(dump: Dump) -> dict[str, Any]:
    """YuniKorn's ``dao.SchedulerHealthDAOInfo`` for a state dump: every check of
    ``HEALTH_CHECKS``, and ``Healthy`` when all of them succeeded."""
    checks = [check(dump) for check in HEALTH_CHECKS]
    return {"Healthy": all(c["Succeeded"] for c in checks), "HealthChecks": checks}


# ================================================================================ metrics
# YuniKorn v1.2's names (pkg/metrics): namespace ``yunikorn``; scheduler metrics under the
# subsystem ``scheduler``; each queue's metrics under its path as the subsystem
# (``yunikorn_root_default_queue_app``). Everything is a gauge of the state at the scrape:
# the core keeps no counters of attempts or submissions, and no latency histograms.
_USAGE_BUCKETS: Final = (
    "[0,10%]",
    "(10%, 20%]",
    "(20%,30%]",
    "(30%,40%]",
    "(40%,50%]",
    "(50%,60%]",
    "(60%,70%]",
    "(70%,80%]",
    "(80%,90%]",
    "(90%,100%]",
)


class _CoreCollector:
    """Prometheus collector over the state dump that the scrape in progress read."""

    def __init__(self) -> None:
        self.dump: Dump | None = None

    def collect(self) -> Iterable[Metric]:
        return metric_families(self.dump) if self.dump is not None else []


def metric_name(text: str) -> str:
    """YuniKorn's ``formatMetricName``: every byte that may not be in a Prometheus name
    becomes ``_``, and a name starting with a digit gets a ``_`` in front."""
    name = "".join(c if c.isascii() and (c.isalnum() or c in "_:") else "_" for c in text)
    return "_" + name if name[:1].isdigit() else name


def metric_families(dump: Dump) -> list[Metric]:
    """Every metric of ``/ws/v1/metrics`` for a state dump."""
    return [*_scheduler_metrics(dump), *_queue_metrics(dump), *_actor_metrics(dump)]


def _scheduler_metrics(dump: Dump) -> list[Metric]:
    apps = GaugeMetricFamily(
        "yunikorn_scheduler_application_total",
        "Applications known to the scheduler, by state (live, and terminated until they expire).",
        labels=["state"],
    )
    states = Counter(a["applicationState"] for _k, a in _apps(dump))
    for state in AppState:
        apps.add_metric([state.lower()], states[state])
    nodes = GaugeMetricFamily(
        "yunikorn_scheduler_node",
        "Nodes, by state: active (all registered), draining (not schedulable).",
        labels=["state"],
    )
    all_nodes = [n for _k, n in _nodes(dump)]
    nodes.add_metric(["active"], len(all_nodes))
    nodes.add_metric(["draining"], sum(not n["schedulable"] for n in all_nodes))
    return [apps, nodes, *_node_usage(all_nodes)]


def _node_usage(nodes: list[Dump]) -> list[Metric]:
    """Nodes by how much of each resource they have allocated, in tenths of the capacity."""
    buckets: dict[str, list[int]] = {}
    for node in nodes:
        for resource, percent in node["utilized"].items():
            index = min(max(math.ceil(percent / 10) - 1, 0), 9)
            buckets.setdefault(resource, [0] * 10)[index] += 1
    families: list[Metric] = []
    for resource, counts in sorted(buckets.items()):
        family = GaugeMetricFamily(
            f"yunikorn_scheduler_{metric_name(resource)}_node_usage_total",
            "Total resource usage of node, by resource name.",
            labels=["range"],
        )
        for label, count in zip(_USAGE_BUCKETS, counts, strict=True):
            family.add_metric([label], count)
        families.append(family)
    return families


_QUEUE_RESOURCES: Final = (
    ("guaranteed", "guaranteedResource"),
    ("max", "maxResource"),
    ("allocated", "allocatedResource"),
    ("pending", "pendingResource"),
)


def _queue_metrics(dump: Dump) -> list[Metric]:
    """Per queue: its resources by kind, and its applications by state (live, and
    terminated until they expire), labelled with the partition too: two partitions may
    have queues of the same path."""
    resources: dict[str, dict[tuple[str, ...], float]] = {}
    apps: dict[str, Counter[tuple[str, ...]]] = {}
    for part in dump["partitions"]:
        pname = _name(part)
        for q in _walk(part["queues"]):
            samples = resources.setdefault(_queue_metric(q["queuename"], "resource"), {})
            for state, key in _QUEUE_RESOURCES:
                for resource, value in sorted(q[key].items()):
                    samples[(state, resource, pname)] = value
        for app in (*part["applications"], *part["terminatedApplications"]):
            if app["queueName"] and app["applicationState"] != AppState.REJECTED:
                counts = apps.setdefault(_queue_metric(app["queueName"], "app"), Counter())
                counts[(app["applicationState"].lower(), pname)] += 1
    families: list[Metric] = []
    for name, values in resources.items():
        doc = "Queue resource metrics, by state (guaranteed, max, allocated, pending)."
        families.append(_gauge(name, doc, ["state", "resource", "partition"], values))
    for name, counts in apps.items():
        doc = "Queue application metrics, by application state."
        families.append(_gauge(name, doc, ["state", "partition"], dict(counts)))
    return families


def _queue_metric(path: str, kind: str) -> str:
    return f"yunikorn_{metric_name(path)}_queue_{kind}"


def _gauge(
    name: str, doc: str, labels: list[str], values: Mapping[tuple[str, ...], float]
) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=labels)
    for label_values, value in values.items():
        family.add_metric(list(label_values), value)
    return family


def actor_kind(name: str, dump: Dump) -> str:
    """The kind of an actor from its name, ``rm:<rm>#<n>/partition:<p>[/queue:..|/app:..]``
    or ``rm:<rm>#<n>/callback``: ``partition``, ``queue``, ``app``, ``callback`` or
    ``other``. The RM ids and partition names come from the dump, so ids holding a '/' or
    a ':' are read right."""
    rest = _after_rm(name, dump["resourceManagers"])
    if rest is None:
        return "other"
    if rest == "callback":
        return "callback"
    for pname in sorted((_name(p) for p in dump["partitions"]), key=len, reverse=True):
        prefix = f"partition:{pname}"
        if rest == prefix:
            return "partition"
        if rest.startswith(prefix + "/"):
            kind = rest[len(prefix) + 1 :].split(":", 1)[0]
            return kind if kind in ("queue", "app") else "other"
    return "other"


def _after_rm(name: str, rm_ids: Iterable[str]) -> str | None:
    for rm_id in sorted(rm_ids, key=len, reverse=True):
        prefix = f"rm:{rm_id}#"
        if name.startswith(prefix):
            generation, _sep, rest = name[len(prefix) :].partition("/")
            if generation.isdigit():
                return rest
    return None


_ACTOR_GAUGES: Final = (
    ("yunikorn_actor_live", "Live actors, by kind."),
    ("yunikorn_actor_mailbox_depth", "Messages waiting in the mailboxes, by actor kind."),
    ("yunikorn_actor_mailbox_peak", "The largest mailbox length seen by one actor of the kind."),
    ("yunikorn_actor_messages_processed", "Messages handled by the live actors of the kind."),
    ("yunikorn_actor_handler_seconds", "Wall time spent in the handlers of the live actors."),
    ("yunikorn_actor_handler_latency_seconds", "Mean handler time per message, by actor kind."),
    ("yunikorn_actor_handler_failures", "Handler and hook exceptions of the live actors."),
)


def _actor_metrics(dump: Dump) -> list[Metric]:
    """Mailbox depth and handler latency per actor kind, from the runtime's counters of
    the live actors (an actor's counters go with it when it stops, so these are gauges)."""
    by_kind: dict[str, list[Dump]] = {}
    for name, stats in dump["actors"].items():
        by_kind.setdefault(actor_kind(name, dump), []).append(stats)
    families = {name: GaugeMetricFamily(name, doc, labels=["kind"]) for name, doc in _ACTOR_GAUGES}
    for kind, stats in sorted(by_kind.items()):
        processed = sum(s["processed"] for s in stats)
        seconds = sum(s["handler_time"] for s in stats)
        values = (
            len(stats),
            sum(s["queued"] for s in stats),
            max(s["peak"] for s in stats),
            processed,
            seconds,
            seconds / processed if processed else 0.0,
            sum(s["failures"] for s in stats),
        )
        for (name, _doc), value in zip(_ACTOR_GAUGES, values, strict=True):
            families[name].add_metric([kind], value)
    return list(families.values())


# ================================================================================ OpenAPI
# Written by hand from the views (scheduler._views) and this module; test_rest checks the
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
            "totalNodes": _INT,
            "applications": {
                **_map_of(_INT),
                "description": "Applications by state, and their total under 'total'.",
            },
            "totalContainers": _INT,
        }
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
            "pendingResource": _RES,
            "isLeaf": _BOOL,
            "isManaged": _BOOL,
            "properties": _STR_MAP,
            "parent": _STR,
            "children": _arr(_ref("QueueInfo")),
            "runningApps": _INT,
            "maxRunningApps": _INT,
            "currentPriority": _INT,
            "applications": _STRINGS,
        },
        optional=("children",),
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
}
_QUERIES: Final = {
    "status": ("An active application's state, lower case.", list(_ACTIVE_STATUSES)),
    "subtree": ("Present: the queue's children are included.", None),
    "rm": ("The resource manager whose configuration to show.", None),
}

# path: (summary, 200 schema, query parameters, errors besides 405)
_OPERATIONS: Final[dict[str, tuple[str, Any, tuple[str, ...], tuple[int, ...]]]] = {
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
    "/ws/v1/partition/{partition}/usage/groups": (
        "What each group runs below each queue, against its limits",
        _arr(_ref("GroupUsage")),
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
}


def _operation(path: str) -> dict[str, Any]:
    summary, schema, queries, errors = _OPERATIONS[path]
    params: list[dict[str, Any]] = [
        {"name": name, "in": "path", "required": True, "description": doc, "schema": _STR}
        for name, doc in _PARAMETERS.items()
        if "{" + name + "}" in path
    ]
    for name in queries:
        doc, enum = _QUERIES[name]
        query_schema = {**_STR, "enum": enum} if enum else _STR
        params.append({"name": name, "in": "query", "description": doc, "schema": query_schema})
    error = {"application/json": {"schema": _ref("YAPIError")}}
    responses: dict[str, Any] = {"200": {"description": "OK", "content": _content(path, schema)}}
    for code in (*errors, 405):
        if code == 503:
            responses["503"] = {"description": "Unhealthy", "content": _content(path, schema)}
        else:
            responses[str(code)] = {"description": _ERRORS[code], "content": error}
    operation_id = path.removeprefix("/ws/v1/").replace("/", "_").replace("{", "").replace("}", "")
    return {
        "summary": summary,
        "operationId": operation_id.replace(".", "_"),
        "parameters": params,
        "responses": responses,
    }


_ERRORS: Final = {
    400: "Malformed path or query",
    404: "Unknown partition, queue, application, node or resource manager",
    405: "Any method but GET and HEAD",
}


def _content(path: str, schema: Any) -> dict[str, Any]:
    if path == "/ws/v1/metrics":
        return {"text/plain": {"schema": _STR}}
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
        "paths": {path: {"get": _operation(path)} for path in _OPERATIONS},
        "components": {"schemas": _schemas()},
    }
