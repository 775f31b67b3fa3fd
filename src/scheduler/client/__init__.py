"""A Python RM's connection to a scheduler daemon (``scheduler serve``).

``connect(target)`` gives the same coroutine methods as the in-process core
(``scheduler.start_scheduler``), with the same callback class, so one RM (or one scenario
test) runs unchanged against either::

    async with scheduler.client.connect("tcp://127.0.0.1:9091") as core:
        await core.register_resource_manager(request, MyRM())
        await core.update_node(si.NodeRequest(rm_id="rm-1", nodes=[...]))
        await core.settle()

Targets: ``tcp://host:port`` or ``unix:///path`` (the native transport: SI structs as
length-prefixed MessagePack frames), ``tls://host:port`` (the same inside TLS, for a
daemon served with ``--tls-cert``), ``grpc://host:port`` or ``grpcs://host:port`` (the SI
over gRPC, plain or TLS). ``tls=`` names a CA file to trust for the TLS schemes.

The RM's callbacks are called one at a time, in the order the core made them, from a task
of the connection; a callback may call the core. ``settle()`` returns once the daemon has
settled and every callback it caused has run here (and what those callbacks sent has
settled in turn).

Errors come back as they do in-process: ``scheduler.SchedulerError`` (and its
``ConfigError``), ``scheduler.NotFoundError``. A connection the daemon closes, or that
breaks, fails every call waiting on it with ``ConnectionError`` naming the reason. Then
``core.closed`` says how it ended (a ``ConnectionClosed``: goodbye, lost or refused),
``await core.wait_closed()`` returns it, the callback's ``connection_lost`` hears it, and
later calls fail too, unless the client reconnects (``reconnect=``): then later calls wait
until it is connected again and the RM's session resumed (or recovered: ``recover=``).

The package holds the native client (``_native``: ``RemoteCore``) and the gRPC client
(``_grpc``: ``GrpcRemoteCore``); it may import the daemon's transport pieces it shares
(TLS), ``scheduler.si`` and ``scheduler._errors``, never the core: a client reaches the
core only over the wire.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

from scheduler._errors import SchedulerError
from scheduler.client._native import RemoteCore, connect_native
from scheduler.client._reconnect import Reconnect, Recover
from scheduler.daemon._tls import TLSArg
from scheduler.si._callback import ConnectionClosed
from scheduler.si._wire import MAX_FRAME

__all__ = ["ConnectionClosed", "Reconnect", "Recover", "RemoteCore", "connect"]


@contextlib.asynccontextmanager
async def connect(
    target: str,
    *,
    token: str = "",
    max_frame: int = MAX_FRAME,
    timeout: float = 30.0,
    tls: TLSArg = None,
    reconnect: Reconnect | None = None,
    recover: Recover | None = None,
    idle_timeout: float = 60.0,
) -> AsyncIterator[RemoteCore]:
    """Connect to a daemon; leaving the block closes the connection.

    Args:
        target: ``tcp://host:port`` or ``unix:///path`` (the native transport), or
            ``grpc://host:port`` (the daemon's ``--grpc``: the SI over gRPC); with TLS
            (``scheduler serve --tls-cert``): ``tls://host:port`` (native) or
            ``grpcs://host:port``.
        token: The daemon's shared token (``scheduler serve --token``), if it has one.
        max_frame: The largest frame accepted from the daemon, in bytes.
        timeout: Seconds to connect and be welcomed.
        tls: For ``tls://`` and ``grpcs://``: a CA file (PEM) that signed the daemon's
            certificate, trusted in place of the system's trust store (None: that store),
            or, for ``tls://`` only, the ``ssl.SSLContext`` to connect with.
        reconnect: Reconnect when the connection is lost, waiting as it says between
            attempts (``Reconnect()``: from 0.1 s, doubling, up to 10 s, with jitter), and
            resume the RM's session: the daemon keeps what the RM is sent while it is away
            (for ``--rm-timeout``) and sends it then. None: a lost connection is the end.
        recover: With ``reconnect``: called with the core when the daemon no longer has
            the RM's session (it restarted, or the RM was Stopped); it registers the RM
            again and reports its state (its applications, then its nodes with the
            allocations on them: the SI's recovery). Without it, that is the end.
        idle_timeout: A connection on which nothing came from the daemon for this many
            seconds is lost (a daemon whose host vanished leaves a connection that looks
            open): the client pings after part of that silence (native: ``Ping`` after a
            third; gRPC: HTTP/2 keepalive after half), and a live daemon answers. Over
            gRPC keep it at or above the daemon's ``--idle-timeout``: a daemon drops a
            connection that pings more often than a third of its own.

    Raises:
        SchedulerError: ``target`` is not a target this client can reach, or ``tls`` is
            given for a target without TLS, or is not a usable CA file.
        ConnectionError: The daemon cannot be reached, or refused the connection (a wrong
            token, a different protocol version), or its certificate is not trusted.
    """
    if not 0 < idle_timeout <= 86_400:
        raise SchedulerError(f"idle_timeout={idle_timeout!r}: say seconds above 0, at most a day")
    scheme = urlsplit(target).scheme
    if tls is not None and scheme not in ("tls", "grpcs"):
        raise SchedulerError(f"target {target!r}: tls= is for tls:// and grpcs:// targets")
    if scheme in ("grpc", "grpcs"):  # the SI over gRPC: scheduler.client._grpc
        from scheduler.client._grpc import connect_grpc

        async with connect_grpc(
            target,
            token=token,
            max_frame=max_frame,
            timeout=timeout,
            tls=tls,
            reconnect=reconnect,
            recover=recover,
            idle_timeout=idle_timeout,
        ) as core:
            yield core
        return
    async with connect_native(
        target,
        token=token,
        max_frame=max_frame,
        timeout=timeout,
        tls=tls,
        reconnect=reconnect,
        recover=recover,
        idle_timeout=idle_timeout,
    ) as core:
        yield core
