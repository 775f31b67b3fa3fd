"""``scheduler serve``: the core as a long-lived daemon that RMs reach over the network.

One process, one event loop: the core (``start_scheduler``), the native transport's listener
(``scheduler.daemon._native``), the REST API (``scheduler.daemon._rest`` under uvicorn, on a
socket bound here), the configuration watcher, and the signal handler, all tasks of one task
group. SIGTERM or SIGINT: stop taking connections and HTTP requests, let every RM's calls
and the requests in flight finish, say goodbye to the RMs, stop the core, exit 0 (within
``grace`` seconds).

The configuration file (``--config``) is what an RM that registers without one gets, and
is watched: a change is checked first (``parse_config``) and, if valid, applied to every RM
registered here through ``update_configuration`` (validate, then swap); an invalid one
is logged with its reason and the old configuration stays in force.

With ``--record FILE`` every SI request and response goes to a recording
(``scheduler.daemon._record``), written by a task of the same task group and flushed at
shutdown.
"""

from __future__ import annotations

import contextlib
import hashlib
import signal
import socket
import ssl
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

import anyio
import uvicorn
from anyio.abc import Listener, SocketAttribute
from loguru import logger

from scheduler import si
from scheduler._errors import ConfigError, SchedulerError
from scheduler.config._parser import parse_config
from scheduler.config._timeouts import Timeouts
from scheduler.core import Core, start_scheduler
from scheduler.daemon._address import cannot_listen, host_port
from scheduler.daemon._http_liveness import timed_protocol
from scheduler.daemon._native import Limits, NativeServer
from scheduler.daemon._record import Recorder, RecordingCore, check_record_path
from scheduler.daemon._rest import make_app
from scheduler.daemon._tls import QuietTLSListener, ServerTLS, load_server_tls

__all__ = ["DaemonOptions", "run_daemon"]

_log = logger.bind(component="daemon")


@dataclass
class DaemonOptions:
    """What ``scheduler serve`` was told."""

    config: Path | None = None
    native: str = "tcp://127.0.0.1:9091"
    http: str = "127.0.0.1:9080"
    grpc: str = "127.0.0.1:9090"  # host:port of the SI gRPC service; "" serves none
    token: str = ""
    tls_cert: Path | None = None  # with tls_key: TLS on every listener (scheduler.daemon._tls)
    tls_key: Path | None = None
    tls_client_ca: Path | None = None  # mutual TLS: every listener asks for a client cert
    watch_interval: float = 1.0  # seconds between looks at the configuration file
    grace: float = 10.0  # seconds a shutdown waits for RMs to be answered
    rm_timeout: float = 60.0  # seconds an RM that lost its connection stays Paused
    keep_terminated: int = Timeouts.terminated_kept  # terminated applications per partition
    limits: Limits = field(default_factory=Limits)
    record: Path | None = None  # --record: the SI traffic, for scheduler simulate --replay
    record_max_bytes: int = 100 << 20  # a recording file past this is rotated
    record_keep: int = 3  # recording files kept, the current one included


async def run_daemon(
    options: DaemonOptions,
    *,
    out: TextIO | None = None,
    ready: Callable[[dict[str, str]], None] | None = None,
) -> int:
    """Serve until SIGTERM or SIGINT; returns the exit code.

    Prints the addresses it bound (``native tcp://127.0.0.1:40123``), one a line, then
    ``ready``, to ``out`` (stdout); ``ready`` (tests) is called with them too.
    """
    out = out or sys.stdout
    config_text = ""
    if options.config is not None:
        config_text = _read_config(options.config)
    tls = load_server_tls(options.tls_cert, options.tls_key, options.tls_client_ca)
    if options.record is not None:
        check_record_path(options.record)
    timeouts = Timeouts()
    timeouts.rm_paused = options.rm_timeout  # Paused -> Stopped (Core.rm_disconnected)
    timeouts.terminated_kept = options.keep_terminated
    async with start_scheduler(timeouts=timeouts) as core:
        recorder = _recorder(options, core)
        edge = None if recorder is None else RecordingCore(core, recorder)
        server = NativeServer(core, token=options.token, limits=options.limits, edge=edge)
        server.config = config_text
        # Until every listener is bound, those bound so far are closed if the next fails
        # (a bad or taken address); then the serving tasks own them.
        async with contextlib.AsyncExitStack() as binding:
            if recorder is not None:
                binding.push_async_callback(recorder.aclose)
            listener, address = await _listen(options.native, tls)
            binding.push_async_callback(listener.aclose)
            http_socket, http_address = _bind_http(options.http)
            binding.callback(http_socket.close)
            if tls is not None:
                http_address = "https" + http_address.removeprefix("http")
            addresses = {"http": http_address, "native": address}
            grpc_server = None
            if options.grpc:
                from scheduler.daemon._grpc import GrpcServer  # grpc loads only when served

                grpc_server = GrpcServer(server)
                addresses["grpc"] = await grpc_server.start(
                    options.grpc,
                    tls=None if tls is None else (tls.cert_pem, tls.key_pem),
                    client_ca=None if tls is None else tls.client_ca_pem,
                )
            binding.pop_all()
        http = _HttpServer(
            uvicorn.Config(
                make_app(core),
                http=timed_protocol(options.limits.hello_timeout, options.limits.write_timeout),
                log_config=None,
                access_log=False,
                lifespan="off",
                ssl_certfile=None if tls is None else tls.cert,
                ssl_keyfile=None if tls is None else tls.key,
                **_client_ca_options(tls),
            )
        )
        # SIGTERM and SIGINT are the daemon's before it says "ready": one sent right after
        # (by a supervisor, a test) found Python's default there, and killed it.
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            for kind, where in addresses.items():
                print(f"{kind} {where}", file=out, flush=True)
            print("ready", file=out, flush=True)
            _log.info("serving: {}", addresses)
            if ready is not None:
                ready(addresses)
            async with anyio.create_task_group() as tg:
                accepting = anyio.CancelScope()

                async def accept() -> None:
                    with accepting:
                        async with listener:
                            await server.serve(listener)

                http_done = anyio.Event()

                async def serve_http() -> None:
                    try:
                        await http.serve([http_socket])
                    finally:
                        http_done.set()

                tg.start_soon(accept)
                tg.start_soon(serve_http)
                if recorder is not None:
                    tg.start_soon(recorder.run)
                if options.config is not None:
                    tg.start_soon(
                        _watch, server, options.config, options.watch_interval, config_text
                    )
                async for signum in signals:
                    _log.info("{}: shutting down", signal.Signals(signum).name)
                    break
                http.should_exit = True  # uvicorn: no new requests, those in flight finish
                core.events.close("the daemon is shutting down")  # event streams finish too
                await server.shut_down("the daemon is shutting down", options.grace)
                if grpc_server is not None:
                    await grpc_server.shut_down("the daemon is shutting down", options.grace)
                accepting.cancel()
                with anyio.move_on_after(options.grace):
                    await http_done.wait()
                if recorder is not None:
                    await recorder.aclose()  # everything the RMs were told is written
                tg.cancel_scope.cancel()
    _log.info("stopped")
    return 0


def _recorder(options: DaemonOptions, core: Core) -> Recorder | None:
    """The recording of ``--record``, begun (its header written), on the core's clock."""
    if options.record is None:
        return None
    clock = core.clock
    wall = getattr(clock, "wall_ns", None) or (lambda t: int(t * 1e9))
    recorder = Recorder(
        options.record,
        wall=lambda: int(wall(clock.now())),
        max_bytes=options.record_max_bytes,
        keep=options.record_keep,
    )
    recorder.open()
    _log.info("recording the SI traffic to {}", options.record)
    return recorder


class _HttpServer(uvicorn.Server):
    """uvicorn in the daemon's loop: the daemon owns SIGTERM and SIGINT, not uvicorn."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _bind_http(address: str) -> tuple[socket.socket, str]:
    """A listening socket on ``host:port`` (port 0: a free one), and its URL."""
    host, port = host_port("--http", address, "127.0.0.1:9080")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise cannot_listen("--http", address, exc) from None
    sock.setblocking(False)
    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if family == socket.AF_INET6 else bound_host
    return sock, f"http://{shown}:{bound_port}"


def _read_config(path: Path) -> str:
    try:
        text = path.read_text()
    except OSError as exc:
        raise SchedulerError(f"cannot read the configuration {path}: {exc.strerror}") from None
    try:
        parse_config(text)
    except ConfigError as exc:
        raise SchedulerError(f"{path}: {exc}") from None
    return text


def _client_ca_options(tls: ServerTLS | None) -> dict[str, Any]:
    """uvicorn's options for mutual TLS (``--tls-client-ca``): none without it."""
    if tls is None or tls.client_ca is None:
        return {}
    return {"ssl_ca_certs": str(tls.client_ca), "ssl_cert_reqs": ssl.CERT_REQUIRED}


async def _listen(address: str, tls: ServerTLS | None = None) -> tuple[Listener[Any], str]:
    """A listener on ``tcp://host:port`` (port 0: a free one) or ``unix:///path``, and
    the address it is bound to. With ``tls``, a TCP listener serves TLS and its address
    is ``tls://host:port`` (``--native tls://...`` says the same); a Unix socket stays
    plain."""
    parts = urlsplit(address)
    if parts.scheme == "tls" and tls is None:
        raise SchedulerError(f"--native {address!r}: tls:// needs --tls-cert and --tls-key")
    if parts.scheme in ("tcp", "tls"):
        example = f"{parts.scheme}://127.0.0.1:9091"
        if parts.path or parts.query or parts.fragment:
            raise SchedulerError(f"--native {address!r}: say {example}")
        host, port = host_port("--native", parts.netloc, example, address)
        try:
            tcp = await anyio.create_tcp_listener(local_host=host, local_port=port)
        except OSError as exc:
            raise cannot_listen("--native", address, exc) from None
        bound: Any = tcp.extra(SocketAttribute.local_address)
        host, port = bound[0], bound[1]
        shown = f"[{host}]" if ":" in str(host) else host
        if tls is None:
            return tcp, f"tcp://{shown}:{port}"
        listener = QuietTLSListener(
            tcp, tls.context, standard_compatible=False, handshake_timeout=10.0
        )
        return listener, f"tls://{shown}:{port}"
    if parts.scheme == "unix":
        if not parts.path:
            raise SchedulerError(f"--native {address!r}: say unix:///path/to/socket")
        path = Path(parts.path)
        if path.is_socket():
            path.unlink()  # left behind by a daemon that did not stop cleanly
        try:
            return await anyio.create_unix_listener(path), f"unix://{path}"
        except OSError as exc:
            raise cannot_listen("--native", address, exc) from None
    raise SchedulerError(f"--native {address!r}: the scheme must be tcp://, tls:// or unix://")


async def _watch(server: NativeServer, path: Path, interval: float, current: str) -> None:
    """Look at the configuration file every ``interval`` seconds; apply a valid change."""
    digest = _digest(current)
    while True:
        await anyio.sleep(interval)
        try:
            text = path.read_text()
        except OSError as exc:
            _log.warning("configuration {} unreadable ({}): the old one stays", path, exc)
            continue
        if _digest(text) == digest:
            continue
        digest = _digest(text)
        try:
            parse_config(text)
        except ConfigError as exc:
            _log.error("configuration {} is invalid, the old one stays: {}", path, exc)
            continue
        server.config = text
        known = await server.core.get_resource_managers()
        registered = {rm["rmID"] for rm in known if rm["state"] != "Stopped"}
        for rm_id in sorted(server.rm_ids & registered):  # a Stopped RM is not registered
            try:
                await server.edge.update_configuration(
                    si.UpdateConfigurationRequest(rm_id=rm_id, config=text)
                )
            except SchedulerError as exc:
                _log.error("configuration {} not applied to {}: {}", path, rm_id, exc)
                continue
            _log.info("configuration {} reloaded for {}", path, rm_id)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
