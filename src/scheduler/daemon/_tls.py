"""TLS for the daemon's three listeners and for ``scheduler.client``.

``scheduler serve --tls-cert FILE --tls-key FILE`` serves TLS on every listener:

* native: ``tls://host:port`` (the native transport's frames inside TLS; ``unix://``
  sockets stay plain, guarded by file permissions);
* HTTP: ``https://host:port``;
* gRPC: ``grpcs://host:port``.

With ``--tls-client-ca FILE`` too, all three require a client certificate signed by a CA
of that file (mutual TLS); a client without one is refused in the handshake.

The client reaches them with those schemes; ``tls=`` names a CA file (PEM) to trust in
place of the system's trust store, or (native only) a whole ``ssl.SSLContext``.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import AnyByteStream, SocketAttribute
from anyio.streams.tls import TLSListener
from loguru import logger

from scheduler._errors import SchedulerError

__all__ = [
    "QuietTLSListener",
    "ServerTLS",
    "TLSArg",
    "client_context",
    "load_server_tls",
    "read_ca",
]

_log = logger.bind(component="tls")

TLSArg = str | os.PathLike[str] | ssl.SSLContext | None
"""What ``scheduler.client.connect(tls=...)`` takes: a CA file, an SSL context, or None
(the system's trust store)."""


@dataclass(frozen=True)
class ServerTLS:
    """The daemon's certificate and key, checked: as files (uvicorn), as bytes (gRPC), and
    as a server ``ssl.SSLContext`` (the native listener)."""

    cert: Path
    key: Path
    cert_pem: bytes
    key_pem: bytes
    context: ssl.SSLContext
    client_ca: Path | None = None  # mutual TLS: client certificates signed by this CA
    client_ca_pem: bytes | None = None


def load_server_tls(
    cert: Path | None, key: Path | None, client_ca: Path | None = None
) -> ServerTLS | None:
    """``--tls-cert`` and ``--tls-key``, read and checked (both, or neither: None), and
    ``--tls-client-ca`` (which needs them).

    Raises:
        SchedulerError: only one is given, or a file is unreadable or not what it should
            be (the message names the file).
    """
    if cert is None and key is None:
        if client_ca is not None:
            raise SchedulerError("--tls-client-ca needs --tls-cert and --tls-key too")
        return None
    if cert is None or key is None:
        given, missing = ("--tls-cert", "--tls-key") if cert else ("--tls-key", "--tls-cert")
        raise SchedulerError(f"{given} needs {missing} too (give both, or neither)")
    cert_pem = _read(cert, "--tls-cert")
    key_pem = _read(key, "--tls-key")
    if b"-----BEGIN CERTIFICATE-----" not in cert_pem:
        raise SchedulerError(f"--tls-cert {cert}: not a PEM certificate")
    try:
        ssl.create_default_context(cadata=cert_pem.decode("ascii", "replace"))
    except (ssl.SSLError, ValueError) as exc:
        raise SchedulerError(f"--tls-cert {cert}: not a valid PEM certificate ({exc})") from None
    if b"PRIVATE KEY-----" not in key_pem:
        raise SchedulerError(f"--tls-key {key}: not a PEM private key")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        raise SchedulerError(
            f"--tls-key {key}: not a valid private key for the certificate {cert} "
            f"({exc.reason or exc})"
        ) from None
    except OSError as exc:  # the files were readable a moment ago
        raise SchedulerError(f"--tls-cert {cert} / --tls-key {key}: {exc}") from None
    if client_ca is None:
        return ServerTLS(cert, key, cert_pem, key_pem, context)
    ca_pem = _read(client_ca, "--tls-client-ca")
    if b"-----BEGIN CERTIFICATE-----" not in ca_pem:
        raise SchedulerError(f"--tls-client-ca {client_ca}: not a PEM certificate")
    try:
        context.load_verify_locations(cadata=ca_pem.decode("ascii", "replace"))
    except (ssl.SSLError, ValueError) as exc:
        raise SchedulerError(
            f"--tls-client-ca {client_ca}: not a valid PEM certificate ({exc})"
        ) from None
    context.verify_mode = ssl.CERT_REQUIRED
    return ServerTLS(cert, key, cert_pem, key_pem, context, client_ca, ca_pem)


def _read(path: Path, option: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise SchedulerError(f"{option} {path}: cannot read it: {exc.strerror or exc}") from None


class QuietTLSListener(TLSListener):
    """anyio's TLS listener, logging a failed handshake (a plain-TCP client, a client
    that does not trust the certificate) as one line instead of a traceback."""

    @staticmethod
    async def handle_handshake_error(exc: BaseException, stream: AnyByteStream) -> None:
        try:
            address: Any = stream.extra(SocketAttribute.remote_address)
            peer = f"{address[0]}:{address[1]}" if isinstance(address, tuple) else str(address)
        except (anyio.TypedAttributeLookupError, OSError):
            peer = "?"
        await anyio.aclose_forcefully(stream)
        if isinstance(exc, anyio.get_cancelled_exc_class()) or not isinstance(exc, Exception):
            raise exc
        reason = str(exc) or type(exc).__name__
        if isinstance(exc, anyio.EndOfStream | anyio.BrokenResourceError):
            reason = "the client closed the connection (does it trust the certificate?)"
        elif isinstance(exc, ssl.SSLError) and "CERTIFICATE" in str(exc).upper():
            reason = f"{reason} (--tls-client-ca: the client needs a certificate it signed)"
        _log.warning("native: a TLS handshake with {} failed: {}", peer, reason)


def read_ca(tls: TLSArg, target: str) -> bytes | None:
    """The CA certificates (PEM) of ``tls`` for gRPC, or None (the system's trust store)."""
    if tls is None:
        return None
    if isinstance(tls, ssl.SSLContext):
        raise SchedulerError(
            f"target {target!r}: gRPC takes tls= as a CA file (PEM), not an ssl.SSLContext"
        )
    try:
        return Path(tls).read_bytes()
    except OSError as exc:
        raise SchedulerError(f"tls= {os.fspath(tls)}: cannot read it: {exc.strerror}") from None


def client_context(tls: TLSArg) -> ssl.SSLContext:
    """The client SSL context for the native transport: ``tls`` itself if it is one, else
    one that trusts the CA file ``tls`` (None: the system's trust store)."""
    if isinstance(tls, ssl.SSLContext):
        return tls
    if tls is None:
        return ssl.create_default_context()
    try:
        return ssl.create_default_context(cafile=os.fspath(tls))
    except OSError as exc:  # ssl.SSLError too: not a certificate
        reason: Any = getattr(exc, "reason", None) or exc.strerror or exc
        raise SchedulerError(
            f"tls= {os.fspath(tls)}: cannot use it as a CA file: {reason}"
        ) from None
