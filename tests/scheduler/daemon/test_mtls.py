"""``scheduler serve --tls-client-ca FILE``: mutual TLS on all three listeners (native
``tls://``, HTTP ``https://``, gRPC ``grpcs://``). A client with a certificate that CA
signed gets in; one without, or with another CA's, is refused in the handshake; bad files
are clear errors (exit 2, the file named)."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import grpc.aio
import httpx
import pytest
import trustme

from scheduler.client import connect
from scheduler.si import si_pb2 as pb
from scheduler.testing import ManualClock, Scenario

from .test_daemon import Daemon, gang_story
from .test_tls import _refused, _serve


@dataclass
class Pki:
    ca: Path  # the CA that signed the daemon's certificate (clients trust it)
    cert: Path
    key: Path
    client_ca: Path  # the CA the daemon trusts for client certificates
    client_cert: Path  # a client certificate (and its key) that CA signed
    client_key: Path
    authority: trustme.CA
    client_authority: trustme.CA
    client: trustme.LeafCert


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    where = tmp_path_factory.mktemp("mtls-pki")
    authority, client_authority = trustme.CA(), trustme.CA()
    server = authority.issue_cert("127.0.0.1", "localhost")
    client = client_authority.issue_cert("rm-1@example.org")
    pki = Pki(
        ca=where / "ca.pem",
        cert=where / "server.pem",
        key=where / "server.key",
        client_ca=where / "client-ca.pem",
        client_cert=where / "client.pem",
        client_key=where / "client.key",
        authority=authority,
        client_authority=client_authority,
        client=client,
    )
    authority.cert_pem.write_to_path(str(pki.ca))
    client_authority.cert_pem.write_to_path(str(pki.client_ca))
    for leaf, cert, key in ((server, pki.cert, pki.key), (client, pki.client_cert, pki.client_key)):
        for i, blob in enumerate(leaf.cert_chain_pems):
            blob.write_to_path(str(cert), append=i > 0)
        leaf.private_key_pem.write_to_path(str(key))
    return pki


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[Daemon]:
    args = ("--tls-cert", str(pki.cert), "--tls-key", str(pki.key))
    d = Daemon(tmp_path_factory.mktemp("mtls-daemon"), *args, "--tls-client-ca", str(pki.client_ca))
    yield d
    assert d.stop() == 0, d.logged()
    assert "Traceback" not in d.logged(), d.logged()


def _context(pki: Pki, *, with_cert: bool = True) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca))
    if with_cert:
        context.load_cert_chain(pki.client_cert, pki.client_key)
    return context


@pytest.mark.asyncio
async def test_the_scenario_over_native_mutual_tls(daemon: Daemon, pki: Pki) -> None:
    assert daemon.address.startswith("tls://")
    async with connect(daemon.address, tls=_context(pki)) as core:
        await gang_story(Scenario(core, ManualClock()))


@pytest.mark.asyncio
async def test_a_native_client_without_a_certificate_is_refused(daemon: Daemon, pki: Pki) -> None:
    with pytest.raises(ConnectionError, match="wants a client certificate"):
        async with connect(daemon.address, tls=_context(pki, with_cert=False), timeout=10) as c:
            await c.get_partitions()
    other = trustme.CA().issue_cert("rm-2@example.org")  # signed by a CA it does not trust
    context = ssl.create_default_context(cafile=str(pki.ca))
    other.configure_cert(context)
    with pytest.raises(ConnectionError):
        async with connect(daemon.address, tls=context, timeout=10) as c:
            await c.get_partitions()
    async with connect(daemon.address, tls=_context(pki)) as core:  # it still serves
        assert isinstance(await core.get_partitions(), list)
    assert "the client needs a certificate it signed" in daemon.logged()


@pytest.mark.asyncio
async def test_rest_over_mutual_tls(daemon: Daemon, pki: Pki) -> None:
    async with httpx.AsyncClient(base_url=daemon.http, verify=_context(pki)) as http:
        response = await http.get("/ws/v1/partitions")
    assert response.status_code == 200
    without = _context(pki, with_cert=False)
    async with httpx.AsyncClient(base_url=daemon.http, verify=without) as http:
        with pytest.raises(httpx.HTTPError):
            await http.get("/ws/v1/partitions")


def _credentials(pki: Pki, *, with_cert: bool = True) -> grpc.ChannelCredentials:
    if not with_cert:
        return grpc.ssl_channel_credentials(pki.ca.read_bytes())
    return grpc.ssl_channel_credentials(
        pki.ca.read_bytes(), pki.client_key.read_bytes(), pki.client_cert.read_bytes()
    )


async def _settle(target: str, credentials: grpc.ChannelCredentials) -> None:
    async with grpc.aio.secure_channel(target, credentials) as channel:
        settle = channel.unary_unary(
            "/si.v1.SchedulerExtensions/Settle",
            request_serializer=pb.Empty.SerializeToString,
            response_deserializer=pb.SettleResponse.FromString,
        )
        await settle(pb.Empty(), timeout=10)


@pytest.mark.asyncio
async def test_grpc_over_mutual_tls(daemon: Daemon, pki: Pki) -> None:
    target = daemon.grpc.removeprefix("grpcs://")
    await _settle(target, _credentials(pki))
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await _settle(target, _credentials(pki, with_cert=False))
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    with pytest.raises(ConnectionError):
        async with connect(daemon.grpc, tls=pki.ca, timeout=10) as core:
            await core.get_partitions()


def test_bad_client_ca_options_are_clear_errors(tmp_path: Path) -> None:
    authority = trustme.CA()
    leaf = authority.issue_cert("127.0.0.1")
    cert, key = tmp_path / "server.pem", tmp_path / "server.key"
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    tls = ("--tls-cert", str(cert), "--tls-key", str(key))
    missing = tmp_path / "missing.pem"
    _refused(_serve(*tls, "--tls-client-ca", str(missing)), "--tls-client-ca", str(missing))
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("hello\n")
    _refused(_serve(*tls, "--tls-client-ca", str(garbage)), str(garbage), "not a PEM")
    broken = tmp_path / "broken.pem"
    broken.write_text("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    _refused(_serve(*tls, "--tls-client-ca", str(broken)), str(broken))
    ca = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(ca))
    _refused(_serve("--tls-client-ca", str(ca)), "--tls-client-ca needs --tls-cert")
