"""A request of a newer Scheduler Interface than ours is recognised by the fields protobuf
keeps as unknown (field numbers from yunikorn-scheduler-interface v1.8.0's si.proto:
``AllocationRequest.allocations = 4``, from v1.5.0's: ``Allocation.allocationID = 13``,
``AllocationRelease.allocationID = 7``)."""

from __future__ import annotations

from scheduler.si import si_pb2 as pb
from scheduler.si._versions import SI_VERSION, newer_fields, newer_si_message


def _field(number: int, payload: bytes) -> bytes:
    """``payload`` as length-delimited field ``number`` (its tag and length fit a byte)."""
    assert number < 16 and len(payload) < 128
    return bytes([number << 3 | 2, len(payload)]) + payload


def test_a_request_of_our_si_has_no_newer_fields() -> None:
    release = pb.AllocationRelease(application_id="a", uuid="u", allocation_key="k")
    request = pb.AllocationRequest(
        rm_id="rm",
        asks=[pb.AllocationAsk(allocation_key="k", application_id="a")],
        releases=pb.AllocationReleasesRequest(allocations_to_release=[release]),
    )
    assert newer_fields(request) == []
    node = pb.NodeInfo(node_id="n", existing_allocations=[pb.Allocation(allocation_key="k")])
    assert newer_fields(pb.NodeRequest(rm_id="rm", nodes=[node])) == []


def test_yunikorn_1_8_allocations_instead_of_asks_are_named() -> None:
    """YuniKorn 1.8's shim sends its pods as ``AllocationRequest.allocations``."""
    alloc = pb.Allocation(allocation_key="pod-1", application_id="a").SerializeToString()
    raw = pb.AllocationRequest(rm_id="rm").SerializeToString() + _field(4, alloc)
    request = pb.AllocationRequest.FromString(raw)
    assert not request.asks  # protobuf dropped them into the unknown fields
    (field,) = newer_fields(request)
    assert field.startswith("AllocationRequest.allocations (SI 1.4+")
    message = newer_si_message([field])
    assert f"SI {SI_VERSION}" in message and "refused" in message


def test_allocation_ids_of_si_1_5_are_named_in_releases_and_existing_allocations() -> None:
    release = pb.AllocationRelease(application_id="a", allocation_key="k").SerializeToString()
    release += _field(7, b"alloc-1")
    releases = _field(1, release)  # AllocationReleasesRequest.allocationsToRelease
    raw = pb.AllocationRequest(rm_id="rm").SerializeToString() + _field(2, releases)
    request = pb.AllocationRequest.FromString(raw)
    assert newer_fields(request) == ["AllocationRelease.allocationID (SI 1.5+)"]

    alloc = pb.Allocation(allocation_key="k").SerializeToString() + _field(13, b"alloc-1")
    node = pb.NodeInfo(node_id="n").SerializeToString() + _field(6, alloc)
    nodes = pb.NodeRequest.FromString(_field(1, node))
    assert newer_fields(nodes) == ["Allocation.allocationID (SI 1.5+)"]


def test_an_unknown_field_of_no_known_version_is_named_by_number() -> None:
    raw = pb.AllocationRequest(rm_id="rm").SerializeToString() + _field(9, b"x")
    assert newer_fields(pb.AllocationRequest.FromString(raw)) == ["AllocationRequest.field 9"]
