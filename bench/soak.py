"""Soak: drive a ``scheduler serve`` daemon for a long time and check that it stays bounded.

A daemon (a subprocess, with ``--http``) and ``--rms`` RMs in this process, alternately
over the native transport (``tcp://``) and gRPC (``grpc://``), each through a TCP proxy of
its own, each with ``reconnect=`` and a ``recover=`` hook (``bench/_soak_rm.py``). Each RM
churns without pause: nodes added and decommissioned, applications submitted (plain asks,
placeholder gangs whose real asks replace the placeholders, permit gangs) and completed
(released and removed). Now and then its proxy cuts the connection (the client resumes
its session), stays shut past the daemon's ``--rm-timeout`` (the RM is Stopped and the
client's recover hook registers again and reports the RM's state), or the RM closes its
client and connects a new one (registering again, recovering its state the same way).

Every ``--sample`` seconds: the daemon's RSS and open fds (``/proc/<pid>``), the event
ring (``LowestID``/``HighestID`` of ``/ws/v1/events/batch``), live actors
(``yunikorn_actor_live`` of ``/ws/v1/metrics``) and the RMs' allocations per second; one
line on stderr each. After ``--duration`` seconds the RMs stop and check the core holds
exactly what each holds, once; then the health check, and the daemon must exit 0 on
SIGTERM having logged no error.

Bounded after the warm-up (``--warmup``, seconds or a fraction; a third by default): the
post-warm-up samples are split in two halves by time; the second half's median RSS may
exceed the first's by at most ``--max-rss-growth`` MiB, RSS's least-squares slope must be
at most ``--max-rss-slope`` MiB/min, the fd and actor medians may grow by at most
``--max-fds-growth`` and ``--max-actors-growth``, and the event ring never holds more than
its capacity. Any failed check exits 1, naming it.

The report goes into ``--out`` (default ``bench/results/soak-<timestamp>/``):
``samples.csv``, ``summary.json`` (figures, thresholds, each check), ``report.md``,
``rss.png`` (RSS, fds and actors, the event ring and allocations/s over time; needs
matplotlib: ``pip install 'pyscheduler-core[soak]'``) and the daemon's log.

    python bench/soak.py [--duration 60] [--rms 4] [--sample 2] [--warmup 0.33]
        [--seed 1] [--out DIR] [--no-plot] [thresholds]

``nox -s soak`` runs it for a minute; ``nox -s soak -- --duration 3600`` for an hour.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime
import json
import os
import random
import shlex
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from _common import RESULTS, commit_info, load_average, machine_info
from _soak_report import (
    PLOT_MISSING,
    Check,
    Sample,
    Thresholds,
    check_json,
    figures_of,
    judge,
    parse_warmup,
    plot,
    write_report,
)
from _soak_rm import Proxy, Schedule, SoakRM
from scheduler.testing import DaemonProcess

MIB = 1024 * 1024
HTTP_TIMEOUT = 10.0
RM_TIMEOUT = 4.0  # the daemon's --rm-timeout: an outage outlasts it, a cut does not
KEEP_TERMINATED = 500  # the daemon's --keep-terminated: reached in seconds, not minutes


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of churn (60)")
    parser.add_argument("--rms", type=int, default=4, help="RMs, over --transports in turn")
    parser.add_argument(
        "--transports",
        default="tcp,grpc",
        help="the RMs' transports, taken in turn: tcp, grpc, or both (default)",
    )
    parser.add_argument("--sample", type=float, default=2.0, help="seconds between samples (2)")
    parser.add_argument(
        "--warmup", default="0.33", help="seconds (20, 20s) or a fraction of --duration (0.33)"
    )
    parser.add_argument("--seed", type=int, default=1, help="the RMs' random choices")
    parser.add_argument("--out", type=Path, help="the report's folder")
    parser.add_argument("--no-plot", action="store_true", help="no rss.png (no matplotlib)")
    parser.add_argument("--pace", type=float, default=0.0, help="seconds an RM waits per step")
    parser.add_argument(
        "--keep-terminated",
        type=int,
        default=KEEP_TERMINATED,
        help=f"the daemon's --keep-terminated ({KEEP_TERMINATED}: full within the warm-up)",
    )
    parser.add_argument("--cut-every", type=float, default=8.0, help="seconds between cuts")
    parser.add_argument("--outage-every", type=float, default=25.0, help="between outages")
    parser.add_argument("--restart-every", type=float, default=25.0, help="between restarts")
    t = Thresholds()
    parser.add_argument("--max-rss-growth", type=float, default=t.rss_growth_mib, help="MiB")
    parser.add_argument(
        "--max-rss-slope", type=float, default=t.rss_slope_mib_per_min, help="MiB/min"
    )
    parser.add_argument("--max-fds-growth", type=float, default=t.fds_growth)
    parser.add_argument("--max-actors-growth", type=float, default=t.actors_growth)
    args = parser.parse_args(argv)
    args.transports = [t.strip() for t in args.transports.split(",") if t.strip()]
    if not args.transports or set(args.transports) - {"tcp", "grpc"}:
        parser.error("--transports: say tcp, grpc, or tcp,grpc")
    if args.rms < len(args.transports):
        parser.error(f"--rms must be at least {len(args.transports)} (one per transport)")
    if args.duration <= 0 or args.sample <= 0:
        parser.error("--duration and --sample must be above 0")
    try:
        args.warmup_seconds = parse_warmup(args.warmup, args.duration)
    except ValueError as exc:
        parser.error(str(exc))
    if args.out is None:
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        args.out = RESULTS / f"soak-{stamp}"
    return args


# -- sampling ----------------------------------------------------------------------------


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024 / MIB
    raise RuntimeError(f"no VmRSS for {pid}")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def http_get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT) as response:
        body: bytes = response.read()
        return body


def live_actors(metrics: str) -> int:
    return int(
        sum(
            float(line.rsplit(" ", 1)[1])
            for line in metrics.splitlines()
            if line.startswith("yunikorn_actor_live{")
        )
    )


class Sampler:
    """Samples the daemon and the RMs; prints a line per sample."""

    def __init__(self, daemon: DaemonProcess, rms: list[SoakRM], started: float) -> None:
        self.daemon, self.rms, self.started = daemon, rms, started
        self.samples: list[Sample] = []
        self.errors: list[str] = []  # failed REST requests

    async def sample(self) -> Sample:
        pid = self.daemon.proc.pid
        before = self.samples[-1] if self.samples else None
        try:
            batch, metrics = await asyncio.gather(
                asyncio.to_thread(http_get, f"{self.daemon.http}/ws/v1/events/batch?count=1"),
                asyncio.to_thread(http_get, f"{self.daemon.http}/ws/v1/metrics"),
            )
            events = json.loads(batch)
            low, high = int(events["LowestID"]), int(events["HighestID"])
            actors = live_actors(metrics.decode())
        except OSError as exc:  # HTTPError too: counted, and a check fails on it
            self.errors.append(f"{time.monotonic() - self.started:.1f}s: {exc}")
            print(f"sample failed: {exc}", file=sys.stderr, flush=True)
            low = before.events_lowest if before else 0
            high = before.events_highest if before else -1
            actors = before.actors if before else 0
        t = time.monotonic() - self.started
        allocations = sum(rm.allocations for rm in self.rms)
        rate = (allocations - before.allocations) / max(t - before.t, 1e-9) if before else 0.0
        sample = Sample(
            t=round(t, 2),
            rss_mib=round(rss_mib(pid), 2),
            fds=open_fds(pid),
            actors=actors,
            events_lowest=low,
            events_highest=high,
            events_size=high - low + 1 if high >= 0 else 0,
            allocations=allocations,
            alloc_rate=round(rate, 1),
            reconnects=sum(rm.reconnects for rm in self.rms),
            recoveries=sum(rm.recoveries for rm in self.rms),
            live_apps=sum(len(rm.apps) for rm in self.rms),
            load1=(load_average() or [0.0])[0],
        )
        self.samples.append(sample)
        print(
            f"{sample.t:7.1f}s  rss {sample.rss_mib:7.1f} MiB  fds {sample.fds:4d}  "
            f"actors {sample.actors:4d}  events {sample.events_size:6d} (id {high:8d})  "
            f"allocs/s {sample.alloc_rate:7.1f}  apps {sample.live_apps:3d}  "
            f"reconnects {sample.reconnects:4d}  load {sample.load1:.2f}",
            file=sys.stderr,
            flush=True,
        )
        return sample

    async def run(self, every: float, until: asyncio.Event) -> None:
        next_at = time.monotonic()
        while not until.is_set():
            await self.sample()
            next_at += every
            try:
                async with asyncio.timeout(max(0.0, next_at - time.monotonic())):
                    await until.wait()
            except TimeoutError:
                pass


# -- the run -----------------------------------------------------------------------------


async def run_rm(rm: SoakRM, stop_at: float) -> None:
    try:
        async with asyncio.timeout(stop_at - time.monotonic() + 120):
            await rm.run(stop_at)
    except Exception as exc:  # the others go on; the check says what happened
        rm.problems.append(f"the RM stopped: {exc!r}")


async def drive(
    args: argparse.Namespace, daemon: DaemonProcess, checks: list[Check]
) -> tuple[list[Sample], list[SoakRM]]:
    schedule = Schedule(
        cut_every=args.cut_every,
        outage_every=args.outage_every,
        restart_every=args.restart_every,
        outage_seconds=RM_TIMEOUT + 1.5,
    )
    native = daemon.native.removeprefix("tcp://").rsplit(":", 1)
    grpc = daemon.grpc.removeprefix("grpc://").rsplit(":", 1)
    rms: list[SoakRM] = []
    for i in range(args.rms):
        transport = args.transports[i % len(args.transports)]
        host, port = native if transport == "tcp" else grpc
        proxy = Proxy((host, int(port)))
        await proxy.start()
        rng = random.Random(args.seed * 1000 + i)
        rms.append(SoakRM(f"rm{i}", transport, proxy, rng, schedule, pace=args.pace))
    started = time.monotonic()
    sampler = Sampler(daemon, rms, started)
    done = asyncio.Event()
    stop_at = started + args.duration
    try:
        async with asyncio.TaskGroup() as tg:
            sampling = tg.create_task(sampler.run(args.sample, done))
            async with asyncio.TaskGroup() as churn:
                for rm in rms:
                    churn.create_task(run_rm(rm, stop_at))
            done.set()
            await sampling
        await sampler.sample()  # after the RMs' final check
    finally:
        for rm in rms:
            await rm.proxy.close()
    checks.append(
        Check(
            "rest",
            not sampler.errors,
            f"{len(sampler.errors)} samples' requests failed: {sampler.errors[:3]}"
            if sampler.errors
            else "every request answered",
            len(sampler.errors),
        )
    )
    return sampler.samples, rms


def health(daemon: DaemonProcess) -> Check:
    try:
        doc = json.loads(http_get(f"{daemon.http}/ws/v1/scheduler/healthcheck"))
    except OSError as exc:
        return Check("health", False, f"no health check: {exc}")
    failed = [c["Name"] for c in doc.get("HealthChecks", []) if not c.get("Succeeded")]
    return Check("health", bool(doc.get("Healthy")), f"failed: {failed}" if failed else "healthy")


def rm_checks(rms: list[SoakRM]) -> list[Check]:
    checks = []
    for rm in rms:
        ok = rm.verified and not rm.problems
        detail = (
            f"{len(rm.held)} allocations held, each on the core once"
            if ok
            else "; ".join(rm.problems[:5]) or "not verified"
        )
        checks.append(Check(f"held_{rm.rm_id}", ok, f"{rm.transport}: {detail}"))
    return checks


def daemon_checks(daemon: DaemonProcess) -> list[Check]:
    code = daemon.stop()
    log = daemon.log.read_text()
    errors = [line for line in log.splitlines() if "| ERROR" in line or "| CRITICAL" in line] + (
        ["Traceback"] if "Traceback" in log else []
    )
    return [
        Check("daemon_exit", code == 0, f"exit code {code} on SIGTERM", code),
        Check(
            "daemon_errors",
            not errors,
            f"{len(errors)} errors logged: {errors[:3]}" if errors else "no error logged",
            len(errors),
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.no_plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print(PLOT_MISSING, file=sys.stderr)
            return 2
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    thresholds = Thresholds(
        rss_growth_mib=args.max_rss_growth,
        rss_slope_mib_per_min=args.max_rss_slope,
        fds_growth=args.max_fds_growth,
        actors_growth=args.max_actors_growth,
    )
    started = datetime.datetime.now(datetime.UTC)
    machine = machine_info()
    print(
        f"soak: {args.duration:g}s, {args.rms} RMs, a sample every {args.sample:g}s, "
        f"warm-up {args.warmup_seconds:g}s; report in {out}",
        file=sys.stderr,
    )
    daemon = DaemonProcess(
        *("--rm-timeout", str(RM_TIMEOUT)),
        *("--keep-terminated", str(args.keep_terminated)),
        log=out / "daemon.log",
    )
    try:
        checks: list[Check] = []
        samples, rms = asyncio.run(drive(args, daemon, checks))
        checks = judge(samples, args.warmup_seconds, thresholds) + checks
        checks += rm_checks(rms)
        checks.append(health(daemon))
    finally:
        checks_after = daemon_checks(daemon)
    checks += checks_after
    command = shlex.join(["python", "bench/soak.py", *(argv if argv is not None else sys.argv[1:])])
    summary: dict[str, Any] = {
        "passed": all(c.passed for c in checks),
        "command": command,
        "started": started.isoformat(timespec="seconds"),
        "duration_seconds": args.duration,
        "warmup_seconds": args.warmup_seconds,
        "sample_seconds": args.sample,
        "seed": args.seed,
        "thresholds": dataclasses.asdict(thresholds),
        "checks": [check_json(c) for c in checks],
        "figures": figures_of(samples, args.warmup_seconds),
        "rms": [rm.figures() for rm in rms],
        "machine": dict(machine, load_average_end=load_average()),
        "commit": commit_info(),
        "plot": None,
    }
    if not args.no_plot:
        title = (
            f"Soak: {args.duration / 60:g} min, {args.rms} RMs, "
            f"{summary['figures']['allocations']['total']:,} allocations"
        )
        plot(out / "rss.png", samples, args.warmup_seconds, title)
        summary["plot"] = "rss.png"
    write_report(out, samples, summary)
    for check in checks:
        print(check.line())
    print(f"wrote {out}", file=sys.stderr)
    failed = [c.name for c in checks if not c.passed]
    if failed:
        print(f"soak failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
