"""``scheduler simulate --replay``: a recorded daemon session replayed against an
in-process core decides the same (over either transport, rotated files included); with
another node sorting policy, or a doctored recording, the replay names each decision that
differs, with what was recorded and what was replayed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import msgspec
import pytest

from scheduler import SchedulerError, si
from scheduler.client import connect
from scheduler.daemon._record import read_records
from scheduler.si._wire import AllocationPush
from scheduler.simulate._replay import Difference, replay
from scheduler.testing import ManualClock, Scenario

from ..daemon.test_record import QUEUES, serving, session

pytestmark = pytest.mark.asyncio

BINPACKING = QUEUES.replace(
    "  - name: default\n", "  - name: default\n    nodesortpolicy: {type: binpacking}\n", 1
)


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Recordings made once for the module: a native session with a gang, the same over
    gRPC, a native session without one, and a rotated one."""
    import asyncio

    tmp = tmp_path_factory.mktemp("recordings")
    paths = {
        "native": tmp / "native.rec",
        "grpc": tmp / "grpc.rec",
        "plain": tmp / "plain.rec",
        "rotated": tmp / "rotated.rec",
        "refused": tmp / "refused.rec",
    }

    async def record() -> None:
        async with serving(paths["native"]) as addresses:
            await session(addresses["native"])
        async with serving(paths["grpc"]) as addresses:
            await session(addresses["grpc"])
        async with serving(paths["plain"]) as addresses:
            await session(addresses["native"], gang=False)
        async with serving(paths["rotated"], record_max_bytes=1024, record_keep=50) as addresses:
            await session(addresses["native"])
        async with serving(paths["refused"]) as addresses, connect(addresses["native"]) as core:
            s = Scenario(core, ManualClock())
            await s.register(QUEUES)
            bad = si.UpdateConfigurationRequest(rm_id="rm-1", config="partitions: [")
            with pytest.raises(SchedulerError):
                await core.update_configuration(bad)
            await s.add_nodes("n1")

    asyncio.run(record())
    return paths


@pytest.mark.parametrize("transport", ["native", "grpc"])
async def test_a_recorded_session_replays_with_the_same_decisions(
    recordings: dict[str, Path], transport: str
) -> None:
    report = await replay(recordings[transport])
    assert report.differences == [], report.differences
    assert report.same and not report.notes
    assert report.requests == 11
    # plain's ask of 3, the gang's 2 placeholders and its 2 real asks
    assert report.matched["allocation"] == 7
    assert report.matched["released"] >= 3  # 2 placeholders replaced, 1 released by the RM
    assert report.matched["node"] == 2
    assert report.matched["application"] == 2
    assert report.to_dict()["same"] is True


async def test_the_replay_follows_the_replacements_by_key(recordings: dict[str, Path]) -> None:
    """The real allocations name the placeholders they replaced, on both sides, although
    the replaying core gave every allocation another uuid."""
    recorded = [
        a
        for r in read_records(recordings["native"])
        if r.type == "AllocationResponse"
        for a in _push(r).response.new
    ]
    report = await replay(recordings["native"])
    replaced = [d for d in report.differences if d.kind == "allocation"]
    assert replaced == []
    assert {a.allocation_key for a in recorded if not a.placeholder} >= {"w"}


def _push(record: object) -> AllocationPush:
    message = record.decode()  # type: ignore[attr-defined]
    assert isinstance(message, AllocationPush)
    return message


async def test_another_node_sorting_policy_shows_where_allocations_differ(
    recordings: dict[str, Path],
) -> None:
    report = await replay(recordings["plain"], config=BINPACKING)
    recorded = await replay(recordings["plain"])
    assert recorded.same
    [diff] = report.differences
    assert (diff.kind, diff.key) == ("allocation", "p")
    assert diff.recorded == "n1, n1, n2"  # fair: spread (sorted)
    assert diff.replayed == "n1, n1, n1"  # binpacking: the fullest node that fits
    assert diff.time > 0
    # The RM's release named an allocation by the recorded uuid: mapped to the replaying
    # core's allocation of the same key (no note of a uuid it could not map), released
    # there too; the application's removal released the other two on both sides.
    assert report.matched["released"] == 3
    assert not report.notes


async def test_a_doctored_recording_is_reported_precisely(
    recordings: dict[str, Path], tmp_path: Path
) -> None:
    """The recording says plain's ask ``p`` went to n9 three times: the replay shows that
    against what the core decides."""
    doctored = tmp_path / "doctored.rec"
    out = bytearray()
    for record in read_records(recordings["plain"]):
        if record.type == "AllocationResponse":
            push = _push(record)
            for a in push.response.new:
                if a.allocation_key == "p":
                    a.node_id = "n9"
            record.message = msgspec.Raw(msgspec.msgpack.encode(push))
        data = msgspec.msgpack.encode(record)
        out += len(data).to_bytes(4, "big") + data
    doctored.write_bytes(bytes(out))
    report = await replay(doctored)
    assert report.differences == [
        Difference(
            time=report.differences[0].time,
            kind="allocation",
            key="p",
            recorded="n9, n9, n9",
            replayed="n1, n1, n2",
        )
    ]
    # The RM released one of p's allocations by its recorded uuid: mapped by key.
    assert not report.notes
    json.dumps(report.to_dict())  # what the CLI prints or writes


async def test_rotated_files_replay_in_order(recordings: dict[str, Path]) -> None:
    path = recordings["rotated"]
    assert Path(f"{path}.1").exists()
    whole = await replay(path, rotated=True)
    assert whole.same, whole.differences
    assert len(whole.files) > 2 and whole.files[-1] == str(path)
    assert whole.requests == 11
    assert whole.matched["allocation"] == 7
    part = await replay(path)  # the last file alone: it starts mid-session
    assert part.notes and "mid-session" in part.notes[0]


async def test_a_refused_request_is_refused_again(recordings: dict[str, Path]) -> None:
    progress: list[tuple[int, int]] = []
    report = await replay(recordings["refused"], on_progress=lambda *p: progress.append(p))
    assert report.same, report.differences
    assert report.matched["refused"] == 1 and report.matched["node"] == 1
    assert progress[-1] == (report.records, report.records)
    # With a configuration of its own the replay skips the recorded update: not refused.
    doctored = await replay(recordings["refused"], config=QUEUES)
    [diff] = doctored.differences
    assert (diff.kind, diff.recorded, diff.replayed) == ("refused", "ConfigError", "")


async def test_not_a_recording_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SchedulerError, match="no recording at"):
        await replay(tmp_path / "none.rec")
    junk = tmp_path / "junk.rec"
    junk.write_bytes(b"\x00\x00\x00\x03abc")
    with pytest.raises(SchedulerError, match=re.escape(f"{junk}: a malformed record")):
        await replay(junk)


@pytest.mark.parametrize(
    "content",
    [b"", b"name: tiny\nduration: 10m\n", b"abc", bytes(range(256)) * 4],
    ids=["empty", "a scenario file", "three bytes", "binary"],
)
async def test_a_file_that_is_no_recording_is_said_to_be_none(
    tmp_path: Path, content: bytes
) -> None:
    """Empty, text or random bytes: never an IndexError or a frame-size complaint, but what
    the file is not (a tester's find: the replay indexed its first record)."""
    path = tmp_path / "si.rec"
    path.write_bytes(content)
    with pytest.raises(SchedulerError, match="is not a recording of scheduler serve --record"):
        await replay(path)
