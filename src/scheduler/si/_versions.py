"""Which Scheduler Interface this scheduler speaks, and a request of a newer one.

Our ``si.proto`` has every message and field of the SI of yunikorn-scheduler-interface
v1.3.0 (YuniKorn 1.3: v1.2 with the preemption messages). Later versions add fields that
protobuf keeps as unknown fields when it decodes them, so without a check their content
would be dropped without a word: SI 1.4 adds ``AllocationRequest.allocations`` (field 4,
which YuniKorn 1.8's RMs send instead of asks), SI 1.5 ``Allocation.allocationID`` (13),
``originator`` (14) and ``preemptionPolicy`` (15), and ``AllocationRelease.allocationID`` (7).
``newer_fields`` finds them in an RM's request, so the daemon can refuse the request with an
error naming the SI version it speaks. It looks at the request itself, its releases and
its nodes' existing allocations: never at each ask, so the common request pays one look.
No SI version added a field to ``AllocationAsk`` (v1.3.0 to v1.5.2 have its fields 1 to
12; v1.6.0 drops the message, and its asks come in the request's field 4), so looking into
asks would find nothing a YuniKorn RM sends, and cost a look per ask on the gRPC path.
"""

from __future__ import annotations

from typing import Final

from google.protobuf import unknown_fields
from google.protobuf.message import Message

from scheduler.si import si_pb2 as pb

__all__ = ["SI_VERSION", "newer_fields", "newer_si_message"]

SI_VERSION: Final = "1.3.0"
"""The yunikorn-scheduler-interface version whose messages and fields ``si.proto`` has."""

# The fields of later SI versions, by message and number: what their RMs send.
_LATER: Final[dict[str, dict[int, str]]] = {
    "AllocationRequest": {4: "allocations (SI 1.4+; YuniKorn 1.8 sends it instead of asks)"},
    "Allocation": {
        13: "allocationID (SI 1.5+)",
        14: "originator (SI 1.5+)",
        15: "preemptionPolicy (SI 1.5+)",
    },
    "AllocationRelease": {7: "allocationID (SI 1.5+)"},
}


def _unknown(message: Message) -> list[str]:
    name = message.DESCRIPTOR.name
    later = _LATER.get(name, {})
    unknown = unknown_fields.UnknownFieldSet(message)
    numbers = sorted({unknown[i].field_number for i in range(len(unknown))})
    return [f"{name}.{later.get(n, f'field {n}')}" for n in numbers]


def newer_fields(request: Message) -> list[str]:
    """The fields of ``request`` (an ``AllocationRequest`` or a ``NodeRequest``) that the
    SI we speak does not have, named with the version that added them where known
    (``AllocationRequest.allocations (SI 1.4+; ...)``); empty for a request of our SI."""
    found = _unknown(request)
    if isinstance(request, pb.AllocationRequest):
        if request.HasField("releases"):
            for release in request.releases.allocations_to_release:
                found.extend(_unknown(release))
    elif isinstance(request, pb.NodeRequest):
        for node in request.nodes:
            for alloc in node.existing_allocations:
                found.extend(_unknown(alloc))
    return list(dict.fromkeys(found))


def newer_si_message(fields: list[str]) -> str:
    """What an RM that sent ``fields`` (``newer_fields``) is told."""
    return (
        f"the request carries fields of a newer Scheduler Interface than this scheduler "
        f"speaks (SI {SI_VERSION}, as YuniKorn 1.3): {', '.join(fields)}; they would be "
        f"ignored, so the request is refused. Use an RM built for SI {SI_VERSION} or older"
    )
