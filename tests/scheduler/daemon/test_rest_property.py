"""A property test of the REST API against its OpenAPI document (scheduler.daemon._openapi):
schemathesis generates requests for every operation from the document, path values
mixed with the ids a real in-process core holds (nodes, applications, a gang, queues), and
checks every answer against the document: no 5xx, a documented status code, content type
and headers, and a body that conforms to the schema.

schemathesis drives ASGI apps through Starlette's TestClient, which runs each request in
an event loop of its own; the core's actors live in one loop. So schemathesis generates the
cases and checks the answers, and the requests go through httpx's ASGITransport in the
core's loop (an ``asyncio.Runner`` kept across Hypothesis examples).

``/ws/v1/events/stream`` is left out: it answers as events happen and ends only when the
client goes away, and httpx's ASGITransport returns a response once the app is done with
it. tests/scheduler/test_events.py drives it chunk by chunk.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import APIOperation, Case
from schemathesis.checks import positive_data_acceptance
from schemathesis.core.result import Ok

from scheduler import si
from scheduler.daemon._openapi import openapi_document
from scheduler.daemon._rest import make_app
from scheduler.testing import Scenario, gang_tags, start_scenario

from .test_rest import QUEUES, in_process

Op = APIOperation[Any, Any, Any, Any]
ACase = Case[Any]

SCHEMA = schemathesis.openapi.from_dict(openapi_document())
STREAM = "/ws/v1/events/stream"


def _operations() -> list[Op]:
    """Every GET of the document but the stream; a document schemathesis cannot read
    fails here."""
    ops = []
    for result in SCHEMA.get_all_operations():
        assert isinstance(result, Ok), result.err()
        if result.ok().path != STREAM:
            ops.append(result.ok())
    return ops


OPERATIONS = _operations()
BASE = "http://scheduler"
# ?status= applies to active applications only: a 400 for state=rejected&status=running is
# right, and the document cannot say so (OpenAPI has no constraint across parameters).
ACROSS_PARAMETERS = {"/ws/v1/partition/{partition}/applications/{state}"}

# Values the core knows, mixed into the generated path parameters so the 200s are reached:
# half the cases take a whole row (values that belong together), the others mix
# generated values with known ones, one parameter at a time.
_ROW: dict[str, str] = {"partition": "default", "user": "alice", "group": "devs"}
ROWS: list[dict[str, str]] = [
    {**_ROW, "queue": "root.a", "application": "app-1", "node": "n1"},
    {**_ROW, "queue": "root.b.c", "application": "spark", "node": "n2"},
    {**_ROW, "queue": "root.default", "application": "p-1", "node": "n3"},
    {**_ROW, "queue": "root.a", "application": "old", "node": "n1"},
]
STATES = ["active", "rejected", "completed"]
KNOWN: dict[str, list[str]] = {
    "partition": ["default", "nosuch"],
    "queue": ["root", "root.b", "root.nosuch", *(r["queue"] for r in ROWS)],
    "application": ["big", "lost", "nosuch", *(r["application"] for r in ROWS)],
    "node": ["nosuch", *(r["node"] for r in ROWS)],
    "state": ["Active", "running", *STATES],
    "user": ["alice", "nobody", "bob", "9lives"],
    "group": ["devs", "ops", "-ops"],
}
# test_rest's queues, and a limit that lists the group devs in the group usage.
CONFIG = QUEUES.replace(
    '        submitacl: "*"\n',
    '        submitacl: "*"\n        limits:\n          - limit: devs\n'
    "            groups: [devs]\n            maxapplications: 9\n",
)


async def build(s: Scenario) -> None:
    """Nodes, running and pending applications, a placeholder gang, a permit gang member, a
    reservation, a draining node, a rejected and a completed application, events."""
    await s.add_nodes("n1", "n2")
    await s.submit("app-1", queue="root.a", user="alice")
    await s.ask("app-1", "work", count=2, memory=40, vcore=1)
    await s.submit_gang("spark", {"driver": 1, "executor": 2}, queue="root.b.c")
    await s.submit("p-1", queue="root.default")
    await s.ask("p-1", "m1", tags=gang_tags("g1", 2))
    await s.submit("big", queue="root.default")
    await s.ask("big", "huge", memory=95, vcore=1)
    await s.advance(3)
    await s.add_nodes("n3", memory=20, vcore=2)
    drain = si.NodeInfo(node_id="n3", action=si.ActionFromRM.DRAIN_NODE)
    await s.core.update_node(si.NodeRequest(rm_id=s.rm_id, nodes=[drain]))
    await s.submit("lost", queue="root.nosuch")
    await s.submit("old", queue="root.a")
    await s.remove("old")


class Api:
    """A core with some state in a loop of its own, and a client of its REST app."""

    def __init__(self) -> None:
        self.runner = asyncio.Runner()
        self._scenario = start_scenario(CONFIG)
        self.s = self.runner.run(self._scenario.__aenter__())
        self.runner.run(build(self.s))
        transport = httpx.ASGITransport(app=make_app(in_process(self.s)))
        self.client = httpx.AsyncClient(transport=transport, base_url=BASE)
        self.calls = 0
        self.statuses: dict[str, set[int]] = {}

    def call(self, case: ACase) -> httpx.Response:
        kwargs = case.as_transport_kwargs(base_url=BASE)
        response = self.runner.run(
            self.client.request(
                kwargs["method"],
                kwargs["url"],
                params=kwargs.get("params"),
                headers=kwargs.get("headers"),
                content=kwargs.get("data"),
            )
        )
        self.calls += 1
        self.statuses.setdefault(case.operation.path, set()).add(response.status_code)
        return response

    def close(self) -> None:
        try:
            self.runner.run(self.client.aclose())
            self.runner.run(self._scenario.__aexit__(None, None, None))
        finally:
            self.runner.close()


@pytest.fixture(scope="module")
def api() -> Iterator[Api]:
    a = Api()
    try:
        yield a
    finally:
        a.close()


def cases(op: Op) -> st.SearchStrategy[ACase]:
    """The operation's generated cases, their path parameters often known values."""

    def known(case: ACase) -> st.SearchStrategy[ACase]:
        params = case.path_parameters or {}
        mixed = st.fixed_dictionaries(
            {
                name: st.one_of(st.just(value), st.sampled_from(KNOWN[name]))
                for name, value in params.items()
            }
        )
        rows = st.tuples(st.sampled_from(ROWS), st.sampled_from(STATES)).map(
            lambda row: {n: {**row[0], "state": row[1]}[n] for n in params}
        )

        def with_params(chosen: dict[str, Any]) -> ACase:
            case.path_parameters = chosen
            return case

        return st.one_of(rows, mixed).map(with_params)

    strategy: st.SearchStrategy[ACase] = op.as_strategy()
    return strategy.flatmap(known)


@pytest.mark.parametrize("op", OPERATIONS, ids=[op.label for op in OPERATIONS])
def test_every_answer_conforms_to_the_document(api: Api, op: Op) -> None:
    @settings(
        max_examples=40,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(case=cases(op))
    def check(case: ACase) -> None:
        response = api.call(case)
        assert response.status_code < 500 or response.status_code == 503, response.text
        excluded = [positive_data_acceptance] if op.path in ACROSS_PARAMETERS else None
        case.validate_response(response, excluded_checks=excluded)

    check()
    assert api.statuses[op.path], "no request was made"


def test_known_values_reach_the_answers_that_matter(api: Api) -> None:
    """Runs last in the module: the generated requests met 200s, not only errors."""
    if not api.statuses:
        pytest.skip("run with the conformance test")
    ok = {path for path, codes in api.statuses.items() if 200 in codes}
    assert ok == {op.path for op in OPERATIONS}, sorted({op.path for op in OPERATIONS} - ok)
