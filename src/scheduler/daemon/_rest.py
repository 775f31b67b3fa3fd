"""YuniKorn's REST API over a running core, as an ASGI application (Starlette).

``make_app(core)`` serves the paths and JSON field names of YuniKorn's web service
(``pkg/webservice``): the clusters, the application and container history, partitions,
queues, applications, nodes and their utilization buckets, user and group usage, the
full state dump, the configuration in force and its check (``POST /ws/v1/validate-conf``,
which changes nothing: the API is otherwise read-only), the health check and Prometheus
metrics, the preemptions in flight (``/ws/v1/partition/{p}/preemptions``, not YuniKorn's),
each partition's RM state (``rmState``, ``rmStopsAt``: not YuniKorn's either), plus an
OpenAPI document of all of it at ``/ws/v1/openapi.json``. The dashboard's views
(clusters, node utilization) are ``scheduler.daemon._dashboard``; the history is the
core's (``Core.history``), sampled on its clock whether or not anyone asks. Every answer
is built from the core's own queries (``Core.get_*``, ``Core.state_dump``), read when the
request comes; this module reshapes and checks them and keeps no state of its own. ``/``
is a status page, a static file (``scheduler/daemon/web/index.html``) that reads the API
itself; it is outside the OpenAPI document.

The events the core sent to the RMs (``Core.events``, ``scheduler.core._event_log``) are served
as YuniKorn 1.4+ does: ``/ws/v1/events/batch?start=&count=`` pages through the log
(``{"InstanceUUID", "LowestID", "HighestID", "EventRecords"}``; without ``start``, from the
oldest event kept, where YuniKorn starts at id 0; ``HighestID`` is -1 while the log is
empty, where YuniKorn says 0), and ``/ws/v1/events/stream?count=`` sends the
``InstanceUUID``, then each event as it is sent, one JSON document a line
(``application/x-ndjson``). A reader that falls ``DEFAULT_SUBSCRIBER_LIMIT`` events behind
is cut off: the stream's last line, a ``YAPIError``, says why it ended. An event record
carries the SI's ``groupID`` as ``referenceID`` (its SI 1.4 name) and keeps ``reason``.

Errors are YuniKorn's ``dao.YAPIError``, ``{"status_code", "message", "description"}``:
404 for an unknown partition, queue, application, node, user, group or path, 400 for a
malformed path or query (an unknown application state, an invalid queue, user or group
name), 405 for any method but GET (and HEAD, which HTTP ties to GET), or but POST for
validate-conf.

The health check (``scheduler.daemon._health``) and the metrics (``scheduler.daemon._metrics``) are
plain functions of a state dump, so each can be tested on a doctored dump; the OpenAPI
document is ``scheduler.daemon._openapi``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable, Mapping
from functools import cache
from importlib.resources import files
from typing import Any, Final

import anyio
import msgspec
import yaml
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from scheduler._errors import NotFoundError, SchedulerError
from scheduler.config._parser import QUEUE_NAME_RE, parse_config
from scheduler.core import DEFAULT_SUBSCRIBER_LIMIT, AppState, Core, Subscription, event_record
from scheduler.daemon._dashboard import cluster_info, node_utilization
from scheduler.daemon._health import Dump, health_status, partition_name
from scheduler.daemon._metrics import CoreCollector, metrics_registry
from scheduler.daemon._openapi import (
    ACTIVE_STATUSES,
    APPLICATION_STATES,
    GROUP_NAME_RE,
    POST_PATHS,
    USER_NAME_RE,
    openapi_document,
)

__all__ = ["aggregated_state", "make_app"]


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
    page = Route("/", _page, methods=["GET"], include_in_schema=False)  # not in the OpenAPI doc
    app = Starlette(
        routes=[
            *(Route(path, getattr(api, name), methods=_methods(path)) for path, name in _ROUTES),
            page,
        ],
        exception_handlers={
            HTTPException: _http_error,
            NotFoundError: _not_found,
            SchedulerError: _core_error,
        },
    )
    app.state.registry = api.registry
    return app


def _methods(path: str) -> list[str]:
    return ["POST"] if path in POST_PATHS else ["GET"]


_ROUTES: Final = (
    ("/ws/v1/clusters", "clusters"),
    ("/ws/v1/validate-conf", "validate_conf"),
    ("/ws/v1/history/apps", "history_apps"),
    ("/ws/v1/history/containers", "history_containers"),
    ("/ws/v1/scheduler/node-utilizations", "node_utilizations"),
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
    ("/ws/v1/partition/{partition}/usage/user/{user:path}", "one_user_usage"),
    ("/ws/v1/partition/{partition}/usage/group/{group:path}", "one_group_usage"),
    ("/ws/v1/partition/{partition}/preemptions", "preemptions"),
    ("/ws/v1/fullstatedump", "full_state_dump"),
    ("/ws/v1/config", "config"),
    ("/ws/v1/scheduler/healthcheck", "healthcheck"),
    ("/ws/v1/metrics", "metrics"),
    ("/ws/v1/events/batch", "events_batch"),
    ("/ws/v1/events/stream", "events_stream"),
    ("/ws/v1/openapi.json", "openapi"),
)


class _Api:
    """The route handlers: each reads the core and answers."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self.collector = CoreCollector(core)
        self.registry = metrics_registry(self.collector)

    async def _part(self, request: Request, kind: str) -> Any:
        """What one partition answers to the query ``kind``: only what a list
        endpoint reads, never the whole state dump (a 404 for an unknown partition)."""
        core, name = self.core, request.path_params["partition"]
        return await core.query(name, kind)

    async def clusters(self, request: Request) -> Response:
        rms = await self.core.get_resource_managers()
        start = self.core.start_time
        return JSONResponse([cluster_info(p, rms, start) for p in await self.core.get_partitions()])

    async def validate_conf(self, request: Request) -> Response:
        body = await request.body()
        try:
            parse_config(body.decode("utf-8"))
        except UnicodeDecodeError as exc:
            return JSONResponse({"allowed": False, "reason": f"the body is not UTF-8: {exc}"})
        except SchedulerError as exc:
            return JSONResponse({"allowed": False, "reason": str(exc)})
        return JSONResponse({"allowed": True, "reason": ""})

    async def history_apps(self, request: Request) -> Response:
        return JSONResponse(self.core.history.applications())

    async def history_containers(self, request: Request) -> Response:
        return JSONResponse(self.core.history.containers())

    async def node_utilizations(self, request: Request) -> Response:
        out = []
        for part in await self.core.get_partitions():
            with contextlib.suppress(NotFoundError):  # gone since it was listed
                nodes = await self.core.get_nodes(part["name"])
                out.append(node_utilization(part["clusterId"], part["name"], nodes))
        return JSONResponse(out)

    async def partitions(self, request: Request) -> Response:
        parts = await self.core.get_partitions()
        # read after the partitions: the RM of each is registered, or among the Stopped kept
        return JSONResponse(with_rm_states(parts, await self.core.get_resource_managers()))

    async def queues(self, request: Request) -> Response:
        return JSONResponse(await self.core.get_queue(request.path_params["partition"], "root"))

    async def queue(self, request: Request) -> Response:
        queue = await self.core.get_queue(request.path_params["partition"], _queue_path(request))
        if "subtree" not in request.query_params:  # YuniKorn: children only when asked
            queue = {k: v for k, v in queue.items() if k != "children"}
        return JSONResponse(queue)

    async def queue_applications(self, request: Request) -> Response:
        path = _queue_path(request)
        part = await self._part(request, "applications")
        if _find_queue(part["queues"], path) is None:
            raise NotFoundError(f"queue {path!r} not found in partition {partition_name(part)!r}")
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
        part = await self._part(request, "applications")
        state = request.path_params["state"].lower()
        status = request.query_params.get("status", "").lower()
        if state not in APPLICATION_STATES:
            raise HTTPException(
                400, f"application state must be one of {_join(APPLICATION_STATES)}"
            )
        if status and (state != "active" or status not in ACTIVE_STATUSES):
            raise HTTPException(
                400, f"status applies to active applications only: {_join(ACTIVE_STATUSES)}"
            )
        return JSONResponse(_apps_in_state(part, state, status))

    async def application(self, request: Request) -> Response:
        params = request.path_params
        return JSONResponse(
            await self.core.get_application(params["partition"], params["application"])
        )

    async def nodes(self, request: Request) -> Response:
        return JSONResponse(await self._part(request, "nodes"))

    async def node(self, request: Request) -> Response:
        params = request.path_params
        return JSONResponse(await self.core.get_node(params["partition"], params["node"]))

    async def user_usage(self, request: Request) -> Response:
        return JSONResponse(await self.core.get_user_usage(request.path_params["partition"]))

    async def group_usage(self, request: Request) -> Response:
        return JSONResponse(await self.core.get_group_usage(request.path_params["partition"]))

    async def one_user_usage(self, request: Request) -> Response:
        name = request.path_params["user"]
        if not USER_NAME_RE.fullmatch(name):
            raise HTTPException(400, "Invalid user name")
        users = await self.core.get_user_usage(request.path_params["partition"])
        return JSONResponse(_named(users, "userName", name, "User not found"))

    async def one_group_usage(self, request: Request) -> Response:
        name = request.path_params["group"]
        if not GROUP_NAME_RE.fullmatch(name):
            raise HTTPException(400, "Invalid group name")
        groups = await self.core.get_group_usage(request.path_params["partition"])
        return JSONResponse(_named(groups, "groupName", name, "Group not found"))

    async def preemptions(self, request: Request) -> Response:
        return JSONResponse(await self._part(request, "preemptions"))

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
        self.collector.dump = await self.core.state_dump(detail=False)
        try:  # no await in between: the scrape reads this dump and no other
            body = generate_latest(self.registry)
        finally:
            self.collector.dump = None
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    async def openapi(self, request: Request) -> Response:
        return JSONResponse(openapi_document())

    async def events_batch(self, request: Request) -> Response:
        log = self.core.events
        count = _uint(request, "count", log.capacity)
        if count == 0:
            raise HTTPException(400, '0 is not a valid value for "count"')
        start = _uint(request, "start", log.lowest_id)
        return JSONResponse(log.batch(start, count))

    async def events_stream(self, request: Request) -> Response:
        history = _uint(request, "count", 0)
        log = self.core.events
        return _EventStream(
            log.instance_uuid, log.subscribe(DEFAULT_SUBSCRIBER_LIMIT, history=history)
        )


# ============================================================================= the page
async def _page(request: Request) -> Response:
    """The status page (``scheduler/daemon/web/index.html``): static, it reads the API itself."""
    return Response(_page_html(), media_type="text/html; charset=utf-8", headers=_PAGE_HEADERS)


@cache
def _page_html() -> bytes:
    return files("scheduler.daemon").joinpath("web", "index.html").read_bytes()


_PAGE_HEADERS: Final = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": "default-src 'self'; script-src 'unsafe-inline'; "
    "style-src 'unsafe-inline'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
}


# =============================================================================== events
NDJSON: Final = "application/x-ndjson"


def _line(doc: Any) -> bytes:
    return msgspec.json.encode(doc) + b"\n"


async def _stream_lines(instance_uuid: str, sub: Subscription) -> AsyncIterator[bytes]:
    """The instance's id, then one event a line as they are sent, until the subscription
    ends: its last line (a ``YAPIError``) says why."""
    try:
        yield _line({"InstanceUUID": instance_uuid})
        while True:
            records = sub.take()
            if records:
                yield b"".join(_line(event_record(r)) for r in records)
            elif sub.reason is not None:
                message = "Event stream was closed by the producer"
                yield _line({"status_code": 200, "message": message, "description": sub.reason})
                return
            else:
                await sub.wait()
    finally:
        sub.close("the reader went away")


class _EventStream(StreamingResponse):
    """The events of one subscription, one JSON document a line. It ends when the client
    goes away even while no event comes (Starlette watches for the disconnect only below
    ASGI 2.4, and an idle stream writes nothing that could fail), and the subscription
    ends with it."""

    def __init__(self, instance_uuid: str, sub: Subscription) -> None:
        super().__init__(_stream_lines(instance_uuid, sub), media_type=NDJSON)
        self.sub = sub

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            if scope.get("method") == "HEAD":
                await send(
                    {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
                )
                await send({"type": "http.response.body", "body": b""})
                return
            async with anyio.create_task_group() as tg:

                async def stream() -> None:
                    with contextlib.suppress(OSError):  # the client is gone
                        await self.stream_response(send)
                    tg.cancel_scope.cancel()

                tg.start_soon(stream)
                await self.listen_for_disconnect(receive)
                tg.cancel_scope.cancel()
        finally:
            self.sub.close("the reader went away")


# ============================================================================== helpers
def _uint(request: Request, name: str, default: int) -> int:
    """A query parameter that must be a non-negative integer, or ``default``."""
    text = request.query_params.get(name)
    if text is None:
        return default
    if not text.isascii() or not text.isdigit():
        raise HTTPException(400, f"{name} must be a non-negative integer, got {text!r}")
    return int(text)


def _named(entries: list[Any], key: str, name: str, missing: str) -> Any:
    """The entry of ``entries`` whose ``key`` is ``name``, or a 404 with YuniKorn's message."""
    for entry in entries:
        if entry[key] == name:
            return entry
    raise HTTPException(404, missing)


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
    plus the actors' mailbox counters (``Actors``) and each partition's preemptions
    (``Preemptions``, as ``.../preemptions`` shows them). YuniKorn's application and container
    history, cluster info and log level have no counterpart in the core and are left out.
    """
    parts = dump["partitions"]
    return {
        "Timestamp": dump["timestamp"],
        "Partitions": with_rm_states(
            [p["partition"] for p in parts], dump["resourceManagerStates"]
        ),
        "Applications": [
            a for p in parts for a in (*p["applications"], *p["terminatedApplications"])
        ],
        "Nodes": [{"partitionName": partition_name(p), "nodesInfo": p["nodes"]} for p in parts],
        "Queues": [p["queues"] for p in parts],
        "Actors": dump["actors"],
        "Preemptions": [{"partitionName": partition_name(p), **p["preemptions"]} for p in parts],
    }


def with_rm_states(
    partitions: list[dict[str, Any]], rms: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Each partition with its RM's state (``rmState``: ``Running``, ``Paused`` or
    ``Stopped``, as ``Core.get_resource_managers``) and, while it is Paused, when it will
    be Stopped (``rmStopsAt``, ns): a Paused RM's partition keeps its state but allocates
    nothing, where its own ``state`` stays ``Active``."""
    by_id = {rm["rmID"]: rm for rm in rms}
    out = []
    for part in partitions:
        rm = by_id.get(part["clusterId"], {"state": "Stopped"})
        extra = {"rmStopsAt": rm["stopsAt"]} if "stopsAt" in rm else {}
        out.append({**part, "rmState": rm["state"], **extra})
    return out


def _join(names: Iterable[str]) -> str:
    return ", ".join(names)


# ================================================================================= errors
def _error(status: int, message: str, description: str, headers: Any = None) -> JSONResponse:
    body = {"status_code": status, "message": message, "description": description}
    return JSONResponse(body, status_code=status, headers=headers)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        allowed = "POST" if request.url.path in POST_PATHS else "GET"
        detail = f"{request.method} is not allowed: {request.url.path} answers {allowed} only"
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
