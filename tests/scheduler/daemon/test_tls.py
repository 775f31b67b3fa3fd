"""``scheduler serve --tls-cert --tls-key``: TLS on all three listeners (native ``tls://``,
HTTP ``https://``, gRPC ``grpcs://``), reached by ``scheduler.client.connect(..., tls=CA)``
with a throwaway CA made here; a plain or untrusting client is refused cleanly; bad
certificate options are clear errors."""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import trustme

import scheduler
from scheduler.client import connect
from scheduler.testing import ManualClock, Scenario

from .test_daemon import Daemon, gang_story


@dataclass
class Pki:
    ca: Path  # the CA certificate clients trust
    cert: Path  # the daemon's certificate (for 127.0.0.1 and localhost)
    key: Path
    authority: trustme.CA


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    where = tmp_path_factory.mktemp("pki")
    authority = trustme.CA()
    issued = authority.issue_cert("127.0.0.1", "localhost")
    pki = Pki(where / "ca.pem", where / "server.pem", where / "server.key", authority)
    authority.cert_pem.write_to_path(str(pki.ca))
    for i, blob in enumerate(issued.cert_chain_pems):
        blob.write_to_path(str(pki.cert), append=i > 0)
    issued.private_key_pem.write_to_path(str(pki.key))
    return pki


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[Daemon]:
    d = Daemon(
        tmp_path_factory.mktemp("tls-daemon"),
        "--tls-cert",
        str(pki.cert),
        "--tls-key",
        str(pki.key),
    )
    yield d
    assert d.stop() == 0, d.logged()
    assert "Traceback" not in d.logged(), d.logged()


@pytest.mark.asyncio
async def test_the_daemon_prints_its_tls_addresses(daemon: Daemon) -> None:
    assert daemon.address.startswith("tls://127.0.0.1:")
    assert daemon.http.startswith("https://127.0.0.1:")
    assert daemon.grpc.startswith("grpcs://127.0.0.1:")


@pytest.mark.asyncio
async def test_the_scenario_over_native_tls(daemon: Daemon, pki: Pki) -> None:
    async with connect(daemon.address, tls=pki.ca) as core:
        await gang_story(Scenario(core, ManualClock()))


@pytest.mark.asyncio
async def test_the_scenario_over_grpc_tls(daemon: Daemon, pki: Pki) -> None:
    async with connect(daemon.grpc, tls=str(pki.ca)) as core:
        await gang_story(Scenario(core, ManualClock()))


@pytest.mark.asyncio
async def test_an_ssl_context_and_the_localhost_name(daemon: Daemon, pki: Pki) -> None:
    context = ssl.create_default_context()
    pki.authority.configure_trust(context)
    async with connect(f"tls://localhost:{daemon.port}", tls=context) as core:
        assert isinstance(await core.get_partitions(), list)
    grpc_port = daemon.grpc.rsplit(":", 1)[1]
    async with connect(f"grpcs://localhost:{grpc_port}", tls=pki.ca) as core:
        assert isinstance(await core.get_partitions(), list)


@pytest.mark.asyncio
async def test_rest_over_https(daemon: Daemon, pki: Pki) -> None:
    verify = ssl.create_default_context(cafile=str(pki.ca))
    async with httpx.AsyncClient(base_url=daemon.http, verify=verify) as http:
        response = await http.get("/ws/v1/partitions")
    assert response.status_code == 200
    assert isinstance(response.json(), list)
    async with httpx.AsyncClient(base_url=daemon.http) as untrusting:
        with pytest.raises(httpx.ConnectError):
            await untrusting.get("/ws/v1/partitions")
    plain = "http" + daemon.http.removeprefix("https")
    async with httpx.AsyncClient(base_url=plain) as http:
        with pytest.raises(httpx.HTTPError):
            await http.get("/ws/v1/partitions")


@pytest.mark.asyncio
async def test_a_plain_client_on_the_tls_port_fails_cleanly(daemon: Daemon) -> None:
    with pytest.raises(ConnectionError):
        async with connect(f"tcp://127.0.0.1:{daemon.port}", timeout=10):
            pass
    grpc_port = daemon.grpc.rsplit(":", 1)[1]
    with pytest.raises(ConnectionError):
        async with connect(f"grpc://127.0.0.1:{grpc_port}", timeout=10):
            pass


@pytest.mark.asyncio
async def test_a_client_that_does_not_trust_the_ca_is_refused(
    daemon: Daemon, tmp_path: Path
) -> None:
    with pytest.raises(ConnectionError, match=r"TLS failed.*CERTIFICATE_VERIFY_FAILED"):
        async with connect(daemon.address, timeout=10):  # the system's trust store
            pass
    other = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other))
    with pytest.raises(ConnectionError):
        async with connect(daemon.address, tls=other, timeout=10):
            pass
    with pytest.raises(ConnectionError):
        async with connect(daemon.grpc, tls=other, timeout=10):
            pass
    with pytest.raises(ConnectionError):
        async with connect(daemon.grpc, timeout=10):
            pass


@pytest.mark.asyncio
async def test_the_daemon_still_serves_after_refusals(daemon: Daemon, pki: Pki) -> None:
    async with connect(daemon.address, tls=pki.ca) as core:
        assert isinstance(await core.get_partitions(), list)
    assert "native: a TLS handshake with 127.0.0.1:" in daemon.logged()


@pytest.mark.asyncio
async def test_tls_arguments_that_do_not_fit_are_refused(tmp_path: Path) -> None:
    with pytest.raises(scheduler.SchedulerError, match="tls= is for tls:// and grpcs://"):
        async with connect("tcp://127.0.0.1:1", tls=tmp_path / "ca.pem"):
            pass
    with pytest.raises(scheduler.SchedulerError, match=r"tls= .*nope\.pem"):
        async with connect("tls://127.0.0.1:1", tls=tmp_path / "nope.pem"):
            pass
    with pytest.raises(scheduler.SchedulerError, match=r"not an ssl\.SSLContext"):
        async with connect("grpcs://127.0.0.1:1", tls=ssl.create_default_context()):
            pass
    with pytest.raises(scheduler.SchedulerError, match="tls://host:port"):
        async with connect("tls://nohost"):
            pass


# ============================================================== bad certificate options
def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    package_root = str(Path(scheduler.__file__).parents[1])
    env["PYTHONPATH"] = os.pathsep.join([package_root, *filter(None, [env.get("PYTHONPATH")])])
    command = [sys.executable, "-m", "scheduler", "serve", "--native", "tcp://127.0.0.1:0"]
    return subprocess.run(
        [*command, "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def _refused(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    assert "ready" not in result.stdout
    for word in words:
        assert word in result.stderr, result.stderr


def test_a_certificate_without_a_key_is_a_clear_error(pki: Pki) -> None:
    _refused(_serve("--tls-cert", str(pki.cert)), "--tls-cert needs --tls-key")
    _refused(_serve("--tls-key", str(pki.key)), "--tls-key needs --tls-cert")
    _refused(_serve("--native", "tls://127.0.0.1:0"), "tls:// needs --tls-cert")


def test_unreadable_and_invalid_files_are_named(pki: Pki, tmp_path: Path) -> None:
    missing = tmp_path / "missing.pem"
    _refused(_serve("--tls-cert", str(missing), "--tls-key", str(pki.key)), str(missing))
    _refused(_serve("--tls-cert", str(pki.cert), "--tls-key", str(missing)), str(missing))
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("hello\n")
    _refused(_serve("--tls-cert", str(garbage), "--tls-key", str(pki.key)), str(garbage))
    _refused(_serve("--tls-cert", str(pki.cert), "--tls-key", str(garbage)), str(garbage))
    broken = tmp_path / "broken.pem"
    broken.write_text("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    _refused(_serve("--tls-cert", str(broken), "--tls-key", str(pki.key)), str(broken))
    other_key = tmp_path / "other.key"
    trustme.CA().issue_cert("127.0.0.1").private_key_pem.write_to_path(str(other_key))
    _refused(
        _serve("--tls-cert", str(pki.cert), "--tls-key", str(other_key)),
        str(other_key),
        "not a valid private key",
    )
