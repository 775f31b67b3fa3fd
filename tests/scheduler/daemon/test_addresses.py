"""The daemon's addresses: a bad one, or one that is taken, stops ``scheduler serve`` with a
message that names the option and the address (exit 2, no traceback), before anything is
served. Before, ``--http 127.0.0.1:99999`` ended in an ``OverflowError``, ``--native
tcp://127.0.0.1:99999`` in a ``ValueError``, ``--grpc 127.0.0.1:70000`` bound port 4464
(70000 - 65536), and a taken port was reported as "cannot listen on <all three>"."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import scheduler
from scheduler import SchedulerError
from scheduler.daemon._address import host_port
from scheduler.daemon._serve import DaemonOptions, run_daemon

FREE = {"native": "tcp://127.0.0.1:0", "http": "127.0.0.1:0", "grpc": "127.0.0.1:0"}


def test_host_port_reads_host_and_port() -> None:
    assert host_port("--http", "127.0.0.1:9080", "x") == ("127.0.0.1", 9080)
    assert host_port("--http", "[::1]:0", "x") == ("::1", 0)
    assert host_port("--http", "localhost:65535", "x") == ("localhost", 65535)


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("127.0.0.1:65536", "the port must be 0 (any free port) to 65535"),
        ("127.0.0.1:99999", "the port must be 0 (any free port) to 65535"),
        ("127.0.0.1", "say host:port"),
        (":9080", "say host:port"),
        ("127.0.0.1:-1", "say host:port"),
        ("127.0.0.1:http", "say host:port"),
    ],
)
def test_a_bad_host_port_says_what_is_wrong(address: str, why: str) -> None:
    with pytest.raises(SchedulerError, match=re.escape(why)) as raised:
        host_port("--grpc", address, "127.0.0.1:9090")
    assert str(raised.value).startswith(f"--grpc {address!r}: ")
    assert "e.g. 127.0.0.1:9090" in str(raised.value)


@pytest.mark.parametrize(
    ("option", "address", "why"),
    [
        ("http", "127.0.0.1:99999", "the port must be 0 (any free port) to 65535"),
        ("native", "tcp://127.0.0.1:99999", "the port must be 0 (any free port) to 65535"),
        ("grpc", "127.0.0.1:70000", "the port must be 0 (any free port) to 65535"),
        ("native", "tcp://:9091", "say host:port"),
        ("native", "tcp://127.0.0.1:0/path", "say tcp://127.0.0.1:9091"),
    ],
)
@pytest.mark.asyncio
async def test_a_bad_address_stops_the_daemon_before_it_serves(
    option: str, address: str, why: str
) -> None:
    options = DaemonOptions(**{**FREE, option: address})  # type: ignore[arg-type]
    with pytest.raises(SchedulerError, match=re.escape(why)) as raised:
        await run_daemon(options)
    assert str(raised.value).startswith(f"--{option} {address!r}: ")


@pytest.fixture
def taken() -> Iterator[int]:
    """A port something else listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield sock.getsockname()[1]


@pytest.mark.asyncio
@pytest.mark.parametrize("option", ["native", "http", "grpc"])
async def test_a_taken_port_is_named_with_its_option(option: str, taken: int) -> None:
    address = f"127.0.0.1:{taken}"
    if option == "native":
        address = f"tcp://{address}"
    options = DaemonOptions(**{**FREE, option: address})  # type: ignore[arg-type]
    with pytest.raises(SchedulerError, match="cannot listen there") as raised:
        await run_daemon(options)
    assert str(raised.value).startswith(f"--{option} {address}: cannot listen there: ")


def test_scheduler_serve_says_which_address_is_taken(taken: int) -> None:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "scheduler", "serve", "--native", "tcp://127.0.0.1:0"),
            *("--grpc", "", "--http", f"127.0.0.1:{taken}"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(scheduler.__file__).parents[1])},
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert f"scheduler serve: --http 127.0.0.1:{taken}: cannot listen there: " in done.stderr
    assert "Traceback" not in done.stderr
