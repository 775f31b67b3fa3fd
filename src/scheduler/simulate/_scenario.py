"""Reading a scenario file strictly: unknown keys, wrong types and bad values are errors
with the file, line and column, as ``scheduler check-config`` reports a queues.yaml.

It reads the YAML with the configuration room's reader (``scheduler.config._syntax`` for
syntax errors in plain words, ``scheduler.config._reader`` for each node's shape,
quantities as queues.yaml writes them, Go durations); the queue configuration, inline or
in a file beside the scenario, is checked by the core's own parser. ``docs/simulate.md``
has the full format.
"""

from __future__ import annotations

import re
import stat
from importlib import resources as package_files
from pathlib import Path
from typing import Final

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from scheduler._errors import ConfigError
from scheduler.config._duration import format_duration, parse_duration
from scheduler.config._parser import DEFAULT_SCHEDULER_CONFIG, parse_config
from scheduler.config._reader import (
    fail,
    is_null,
    join,
    mapping,
    number,
    pairs,
    resources,
    seq,
    str_map,
    text,
    truth,
    uint,
)
from scheduler.config._syntax import compose, explain
from scheduler.simulate._model import (
    JOB_KINDS,
    Arrivals,
    Burst,
    ClusterEvent,
    Configuration,
    Gang,
    JobSpec,
    NodeGroup,
    Poisson,
    Runtime,
    Scenario,
    ScenarioError,
    Shim,
    Workload,
)
from scheduler.simulate._shim import PARTITION

__all__ = [
    "MAX_JOBS",
    "MAX_JOBS_PER_WORKLOAD",
    "MAX_NODES",
    "MAX_PODS",
    "MAX_SAMPLES",
    "MAX_TICKS",
    "builtin_scenario",
    "check_limits",
    "load_scenario",
    "parse_scenario",
]

# What one run may ask for, so that a typo (a duration in ms taken as seconds, a rate per
# second meant per hour) is refused at load rather than hanging the run or filling the
# memory without a word. Each is well above what the suite and the benchmark play (the
# benchmark: 5,000 nodes, two virtual hours in 1 s ticks, about 100,000 pods).
MAX_TICKS: Final = 10_000_000  # virtual ticks played: duration / tick
MAX_SAMPLES: Final = 100_000  # queue samples kept: duration / sample_every
MAX_NODES: Final = 100_000  # nodes of all groups, with those events add
MAX_JOBS_PER_WORKLOAD: Final = 1_000_000  # fixed times + burst counts + rate x window
MAX_JOBS: Final = 2_000_000  # jobs planned by the whole scenario
MAX_PODS: Final = 10_000_000  # pods planned by the whole scenario: jobs x pods

_AT: Final = re.compile(r"^(?P<message>.*) \(line (?P<line>\d+), column (?P<column>\d+)\)$", re.S)
_RATE: Final = re.compile(r"^\s*(?P<n>[0-9]*\.?[0-9]+)\s*/\s*(?P<unit>s|sec|m|min|h|hour)\s*$")
_PER: Final = {"s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "hour": 3600.0}
_NAME: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")

_TOP: Final = frozenset(
    {
        "name",
        "seed",
        "duration",
        "sample_every",
        "tick",
        "nodes",
        "queues",
        "queues_file",
        "configurations",
        "workloads",
        "events",
        "shim",
    }
)
_GROUP: Final = frozenset({"group", "count", "capacity", "attributes"})
_CONFIGURATION: Final = frozenset({"name", "queues", "queues_file", "node_sorting", "gang_style"})
_WORKLOAD: Final = frozenset({"name", "queue", "namespace", "user", "arrivals", "job"})
_ARRIVALS: Final = frozenset({"fixed", "poisson", "burst"})
_POISSON: Final = frozenset({"rate", "start", "until"})
_BURST: Final = frozenset({"at", "count"})
_JOB: Final = frozenset(
    {"kind", "pods", "resource", "driver", "runtime", "gang", "priority", "preemption"}
)
_RUNTIME: Final = frozenset({"fixed", "uniform", "exponential", "lognormal"})
_LOGNORMAL: Final = frozenset({"median", "sigma"})
_GANG: Final = frozenset({"style", "timeout"})
_PREEMPTION: Final = frozenset({"allow_preempt_self", "allow_preempt_other"})
_EVENT: Final = frozenset({"at", "nodes_added", "nodes_drained", "nodes_removed", "rm_restart"})
_NODE_EVENT: Final = frozenset({"group", "count"})
_SHIM: Final = frozenset({"confirm_latency"})
_STYLES: Final = ("Hard", "Soft")
_SORTING: Final = ("fair", "binpacking")


def load_scenario(source: str | Path, *, name: str = "") -> Scenario:
    """A scenario from a file path, or from YAML text when ``source`` is a ``str`` holding
    a newline (``name`` then names it in messages).

    Raises:
        ScenarioError: The file cannot be read, or says something the simulator cannot
            play; the message has the file, line and column.
    """
    if isinstance(source, str) and "\n" in source:
        return parse_scenario(source, source=name or "<scenario>", base=Path.cwd())
    path = Path(source)
    try:
        content = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ScenarioError(f"cannot read the scenario: {reason}", source=str(path)) from None
    return parse_scenario(content, source=name or str(path), base=path.parent)


def builtin_scenario() -> Scenario:
    """The scenario ``scheduler simulate`` plays without an argument (``builtin.yaml``)."""
    content = (package_files.files("scheduler.simulate") / "builtin.yaml").read_text("utf-8")
    return parse_scenario(content, source="<built-in scenario>", base=Path.cwd())


def parse_scenario(
    content: str, *, source: str = "<scenario>", base: Path | None = None
) -> Scenario:
    """A scenario from YAML text; ``base`` is where ``queues_file`` paths start."""
    try:
        scenario = _Reader(content, source, base or Path.cwd()).scenario()
    except ConfigError as exc:
        raise _located(exc, source) from None
    check_limits(scenario)
    return scenario


def check_limits(scenario: Scenario) -> None:
    """Refuse a scenario that asks more than one run may (``MAX_TICKS``, ``MAX_SAMPLES``,
    ``MAX_NODES``, ``MAX_JOBS_PER_WORKLOAD``, ``MAX_JOBS``, ``MAX_PODS``). Loading calls it;
    call it again after ``with_overrides`` (``--duration`` changes the ticks and samples).

    Raises:
        ScenarioError: at the line and column of the value that crosses a limit, naming the
            limit and what to change.
    """
    s = scenario

    def refuse(keys: tuple[str, ...], message: str) -> ScenarioError:
        line, column = next((s.places[k] for k in keys if k in s.places), (0, 0))
        return ScenarioError(message, source=s.source, line=line, column=column)

    duration = format_duration(s.duration)
    ticks = s.duration / s.tick
    if ticks > MAX_TICKS:
        raise refuse(
            ("tick", "duration"),
            f"a duration of {duration} in ticks of {format_duration(s.tick)} is "
            f"{ticks:,.0f} ticks; at most {MAX_TICKS:,} (MAX_TICKS) are played: "
            "shorten the duration or lengthen the tick",
        )
    samples = s.duration / s.sample_every
    if samples > MAX_SAMPLES:
        raise refuse(
            ("sample_every", "duration"),
            f"a duration of {duration} sampled every {format_duration(s.sample_every)} is "
            f"{samples:,.0f} samples; at most {MAX_SAMPLES:,} (MAX_SAMPLES) are kept: "
            "sample less often or shorten the duration",
        )
    nodes = 0
    counted = [(f"nodes[{i}]", g.count) for i, g in enumerate(s.nodes)]
    counted += [
        (f"events[{i}]", e.count) for i, e in enumerate(s.events) if e.kind == "nodes_added"
    ]
    for key, count in counted:
        nodes += count
        if nodes > MAX_NODES:
            raise refuse(
                (key,),
                f"{nodes:,} nodes by here (the node groups' and those events add); at most "
                f"{MAX_NODES:,} (MAX_NODES) are simulated: use fewer nodes, or larger ones",
            )
    jobs = pods = 0
    for i, w in enumerate(s.workloads):
        planned: list[tuple[str, float, str]] = [
            (f"workloads[{i}].fixed", len(w.arrivals.fixed), "fixed times")
        ]
        planned += [
            (f"workloads[{i}].poisson[{j}]", p.rate * (p.until - p.start), "Poisson arrivals")
            for j, p in enumerate(w.arrivals.poisson)
        ]
        planned += [
            (f"workloads[{i}].burst[{j}]", b.count, "jobs in a burst")
            for j, b in enumerate(w.arrivals.bursts)
        ]
        own = 0.0
        for key, many, what in planned:
            own += many
            if own > MAX_JOBS_PER_WORKLOAD:
                raise refuse(
                    (key, f"workloads[{i}]"),
                    f"workload {w.name!r} plans {own:,.0f} jobs by here ({many:,.0f} {what}); "
                    f"at most {MAX_JOBS_PER_WORKLOAD:,} per workload (MAX_JOBS_PER_WORKLOAD): "
                    "lower the count or the rate, or shorten the window",
                )
            if jobs + own > MAX_JOBS:
                raise refuse(
                    (key, f"workloads[{i}]"),
                    f"the workloads plan {jobs + own:,.0f} jobs by here; at most {MAX_JOBS:,} "
                    "in a scenario (MAX_JOBS): lower the counts or the rates",
                )
        jobs += int(own)
        pods += int(own) * w.job.pods
        if pods > MAX_PODS:
            raise refuse(
                (f"workloads[{i}].pods", f"workloads[{i}]"),
                f"the workloads plan {pods:,} pods by here (jobs x pods); at most "
                f"{MAX_PODS:,} in a scenario (MAX_PODS): fewer pods per job, or fewer jobs",
            )


def _located(exc: ConfigError, source: str) -> ScenarioError:
    at = _AT.match(str(exc))
    if at is None:
        return ScenarioError(str(exc), source=source)
    return ScenarioError(
        at["message"], source=source, line=int(at["line"]), column=int(at["column"])
    )


class _Reader:
    def __init__(self, content: str, source: str, base: Path) -> None:
        self.content = content
        self.source = source
        self.base = base
        self.places: dict[str, tuple[int, int]] = {}  # Scenario.places

    def scenario(self) -> Scenario:
        try:
            document = compose(self.content)
        except yaml.YAMLError as exc:
            problem = explain(exc, self.content, document="a scenario file")
            raise ScenarioError(
                f"invalid YAML: {problem.message}",
                source=self.source,
                line=problem.line,
                column=problem.column,
            ) from None
        if document is None:
            raise ScenarioError("the scenario is empty", source=self.source)
        top = mapping(document, "", _TOP)
        for key in ("nodes", "workloads"):
            if key not in top or not seq(top[key], key):
                raise self._error(
                    top.get(key) or document, f"the scenario needs {key!r} (a non-empty list)"
                )
        name = text(top.get("name"), "name") or Path(self.source).stem or "scenario"
        duration = self._duration(top.get("duration"), "duration", default=3600.0)
        if duration <= 0:
            raise fail("duration", top.get("duration"), "must be above 0")
        tick = self._duration(top.get("tick"), "tick", default=1.0)
        if tick <= 0:
            raise fail("tick", top.get("tick"), "must be above 0")
        sample_every = self._duration(top.get("sample_every"), "sample_every", default=30.0)
        if sample_every < tick:
            raise fail("sample_every", top.get("sample_every"), "must be at least one tick")
        groups = tuple(
            self._group(n, f"nodes[{i}]") for i, n in enumerate(seq(top["nodes"], "nodes"))
        )
        names = [g.name for g in groups]
        for i, g in enumerate(groups):
            if g.name in names[:i]:
                node = _value(seq(top["nodes"], "nodes")[i], "group")
                raise fail(f"nodes[{i}].group", node, f"duplicate group {g.name!r}")
        queues = self._queues(top, "")
        configurations = self._configurations(top.get("configurations"), queues)
        workloads = tuple(
            self._workload(w, f"workloads[{i}]")
            for i, w in enumerate(seq(top["workloads"], "workloads"))
        )
        seen: set[str] = set()
        for i, w in enumerate(workloads):
            if w.name in seen:
                node = _value(seq(top["workloads"], "workloads")[i], "name")
                raise fail(f"workloads[{i}].name", node, f"duplicate workload {w.name!r}")
            seen.add(w.name)
        events = tuple(
            self._event(e, f"events[{i}]", set(names))
            for i, e in enumerate(seq(top.get("events"), "events"))
        )
        for key in ("duration", "tick", "sample_every"):
            self._place(key, top.get(key))
        for i, entry in enumerate(seq(top["nodes"], "nodes")):
            self._place(f"nodes[{i}]", _value(entry, "count"))
        event_nodes = seq(top.get("events"), "events")
        for i, k in enumerate(sorted(range(len(events)), key=lambda k: events[k].at)):
            kind = _value(event_nodes[k], events[k].kind)
            self._place(f"events[{i}]", _value(kind, "count") if kind else event_nodes[k])
        shim_keys = mapping(top.get("shim"), "shim", _SHIM)
        latency = self._duration(
            shim_keys.get("confirm_latency"), "shim.confirm_latency", default=1.0
        )
        return Scenario(
            name=name,
            seed=uint(top.get("seed"), "seed"),
            duration=duration,
            sample_every=sample_every,
            nodes=groups,
            configurations=configurations,
            workloads=workloads,
            events=tuple(sorted(events, key=lambda e: e.at)),
            shim=Shim(confirm_latency=max(latency, tick)),
            tick=tick,
            source=self.source,
            places=self.places,
        )

    # ------------------------------------------------------------------ pieces
    def _place(self, key: str, node: Node | None) -> None:
        if node is not None and node.start_mark is not None:
            self.places[key] = (node.start_mark.line + 1, node.start_mark.column + 1)

    def _error(self, node: Node, message: str) -> ScenarioError:
        mark = node.start_mark
        return ScenarioError(
            message, source=self.source, line=mark.line + 1, column=mark.column + 1
        )

    def _duration(self, node: Node | None, path: str, *, default: float) -> float:
        """A Go duration (``90s``, ``1h30m``) or a plain number of seconds."""
        if node is None or is_null(node):
            return default
        if isinstance(node, ScalarNode) and node.tag.endswith((":int", ":float")):
            value = number(node, path)
            if value < 0:
                raise fail(path, node, "expected a duration of 0 or more")
            return value
        raw = text(node, path)
        try:
            value = parse_duration(raw)
        except ValueError as exc:
            raise fail(path, node, f"{exc}: write a duration such as 90s, 30m or 1h30m") from None
        if value < 0:
            raise fail(path, node, "expected a duration of 0 or more")
        return value

    def _name(self, node: Node | None, path: str) -> str:
        value = text(node, path)
        if not _NAME.match(value):
            raise fail(
                path, node, "expected a name of letters, digits, '_', '.' and '-' (up to 63)"
            )
        return value

    def _count(self, node: Node | None, path: str, *, least: int = 1) -> int:
        if least == 0:
            return uint(node, path)
        try:
            value = uint(node, path)
        except ConfigError:
            value = -1
        if value < least:
            raise fail(path, node, f"expected a whole number of at least {least}")
        return value

    def _group(self, node: Node, path: str) -> NodeGroup:
        keys = mapping(node, path, _GROUP)
        for key in ("group", "count", "capacity"):
            if key not in keys:
                raise self._error(node, f"{path}: a node group needs {key!r}")
        capacity = resources(keys["capacity"], join(path, "capacity"), "node capacity")
        if not capacity or not any(capacity.values()):
            raise fail(join(path, "capacity"), keys["capacity"], "a node needs some capacity")
        return NodeGroup(
            name=self._name(keys["group"], join(path, "group")),
            count=self._count(keys["count"], join(path, "count"), least=0),
            capacity=capacity,
            attributes=str_map(keys.get("attributes"), join(path, "attributes")),
        )

    def _queues(self, keys: dict[str, Node], path: str) -> str | None:
        """The queues.yaml text of ``queues``/``queues_file`` (None: neither given), checked
        by the core's parser; its problems are placed in the scenario or the queues file."""
        inline, file = keys.get("queues"), keys.get("queues_file")
        if inline is not None and file is not None:
            raise fail(join(path, "queues"), inline, "give 'queues' or 'queues_file', not both")
        if inline is not None:
            if not isinstance(inline, MappingNode):
                raise fail(join(path, "queues"), inline, "expected a queues.yaml mapping")
            body, line0, col0 = self._slice(inline)
            try:
                _check_partitions(body)
            except ConfigError as exc:
                at = _AT.match(str(exc))
                if at is None:
                    raise self._error(inline, f"queues: {exc}") from None
                raise ScenarioError(
                    f"queues: {at['message']}",
                    source=self.source,
                    line=line0 + int(at["line"]),
                    column=int(at["column"]) + col0,
                ) from None
            return body
        if file is not None:
            where = self.base / text(file, join(path, "queues_file"))
            try:
                if not stat.S_ISREG(where.stat().st_mode):  # a device or a FIFO: no end
                    raise fail(
                        join(path, "queues_file"),
                        file,
                        f"{str(where)!r} is not a regular file: give the path of a queues.yaml",
                    )
                body = where.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                raise fail(
                    join(path, "queues_file"), file, f"cannot read {str(where)!r}: {reason}"
                ) from None
            try:
                _check_partitions(body)
            except ConfigError as exc:
                raise _located(exc, str(where)) from None
            return body
        return None

    def _slice(self, node: Node) -> tuple[str, int, int]:
        """The text of a block or flow mapping, dedented to column 0, and the line and
        column (from 0) it starts at in the scenario."""
        start, end = node.start_mark, node.end_mark
        every = self.content.splitlines()
        if end.column == 0 and end.line > start.line:  # a block ends where the next begins
            lines = every[start.line : end.line]
        else:
            lines = every[start.line : end.line + 1]
            if lines:
                lines[-1] = lines[-1][: end.column]
        out = []
        for i, line in enumerate(lines):
            if i == 0:
                out.append(line[start.column :])
            else:
                cut = min(start.column, len(line) - len(line.lstrip(" ")))
                out.append(line[cut:])
        return "\n".join(out) + "\n", start.line, start.column

    def _configurations(self, node: Node | None, queues: str | None) -> tuple[Configuration, ...]:
        entries = seq(node, "configurations")
        if not entries:
            return (Configuration(name="default", queues=queues or ""),)
        out: list[Configuration] = []
        for i, entry in enumerate(entries):
            path = f"configurations[{i}]"
            keys = mapping(entry, path, _CONFIGURATION)
            if "name" not in keys:
                raise self._error(entry, f"{path}: a configuration needs a 'name'")
            name = self._name(keys["name"], join(path, "name"))
            if any(c.name == name for c in out):
                raise fail(join(path, "name"), keys["name"], f"duplicate configuration {name!r}")
            own = self._queues(keys, path)
            body = own if own is not None else (queues or "")
            sorting = keys.get("node_sorting")
            if sorting is not None:
                policy = text(sorting, join(path, "node_sorting"))
                if policy not in _SORTING:
                    raise fail(
                        join(path, "node_sorting"),
                        sorting,
                        f"expected one of {', '.join(_SORTING)}",
                    )
                body = _with_node_sorting(body, policy)
            style = text(keys.get("gang_style"), join(path, "gang_style"))
            if style and style not in _STYLES:
                raise fail(join(path, "gang_style"), keys["gang_style"], "expected Hard or Soft")
            out.append(Configuration(name=name, queues=body, gang_style=style))
        return tuple(out)

    def _workload(self, node: Node, path: str) -> Workload:
        keys = mapping(node, path, _WORKLOAD)
        for key in ("name", "arrivals", "job"):
            if key not in keys:
                raise self._error(node, f"{path}: a workload needs {key!r}")
        queue = text(keys.get("queue"), join(path, "queue"))
        namespace = text(keys.get("namespace"), join(path, "namespace"))
        if not queue and not namespace:
            raise self._error(node, f"{path}: a workload needs a 'queue' or a 'namespace'")
        self._place(path, node)
        self._place(join(path, "pods"), _value(keys["job"], "pods"))
        return Workload(
            name=self._name(keys["name"], join(path, "name")),
            user=text(keys.get("user"), join(path, "user")) or "nobody",
            queue=queue,
            namespace=namespace,
            arrivals=self._arrivals(keys["arrivals"], join(path, "arrivals")),
            job=self._job(keys["job"], join(path, "job")),
        )

    def _arrivals(self, node: Node, path: str) -> Arrivals:
        keys = mapping(node, path, _ARRIVALS)
        if not keys:
            raise fail(path, node, "say when jobs arrive: 'fixed', 'poisson' or 'burst'")
        workload = path.rsplit(".", 1)[0]
        self._place(join(workload, "fixed"), keys.get("fixed"))
        fixed = tuple(
            self._duration(t, f"{path}.fixed[{i}]", default=0.0)
            for i, t in enumerate(seq(keys.get("fixed"), join(path, "fixed")))
        )
        poisson: list[Poisson] = []
        for i, p in enumerate(_one_or_many(keys.get("poisson"))):
            where = f"{path}.poisson" + (f"[{i}]" if _is_list(keys.get("poisson")) else "")
            pk = mapping(p, where, _POISSON)
            if "rate" not in pk or "until" not in pk:
                raise fail(where, p, "a Poisson process needs 'rate' (such as 2/min) and 'until'")
            start = self._duration(pk.get("start"), join(where, "start"), default=0.0)
            until = self._duration(pk["until"], join(where, "until"), default=0.0)
            if until <= start:
                raise fail(join(where, "until"), pk["until"], "must be after 'start'")
            self._place(f"{workload}.poisson[{i}]", pk["rate"])
            poisson.append(
                Poisson(rate=self._rate(pk["rate"], join(where, "rate")), start=start, until=until)
            )
        bursts: list[Burst] = []
        for i, b in enumerate(_one_or_many(keys.get("burst"))):
            where = f"{path}.burst" + (f"[{i}]" if _is_list(keys.get("burst")) else "")
            bk = mapping(b, where, _BURST)
            if "at" not in bk or "count" not in bk:
                raise fail(where, b, "a burst needs 'at' and 'count'")
            self._place(f"{workload}.burst[{i}]", bk["count"])
            bursts.append(
                Burst(
                    at=self._duration(bk["at"], join(where, "at"), default=0.0),
                    count=self._count(bk["count"], join(where, "count")),
                )
            )
        return Arrivals(fixed=fixed, poisson=tuple(poisson), bursts=tuple(bursts))

    def _rate(self, node: Node, path: str) -> float:
        raw = text(node, path)
        m = _RATE.match(raw)
        if m is None or float(m["n"]) <= 0:
            raise fail(path, node, f"{raw!r} is not a rate: write one such as 2/min, 30/h or 0.5/s")
        return float(m["n"]) / _PER[m["unit"]]

    def _job(self, node: Node, path: str) -> JobSpec:
        keys = mapping(node, path, _JOB)
        for key in ("kind", "resource"):
            if key not in keys:
                raise self._error(node, f"{path}: a job needs {key!r}")
        kind = text(keys["kind"], join(path, "kind"))
        if kind not in JOB_KINDS:
            raise fail(join(path, "kind"), keys["kind"], f"expected one of {', '.join(JOB_KINDS)}")
        resource = resources(keys["resource"], join(path, "resource"), "pod resource")
        if not resource or not any(resource.values()):
            raise fail(join(path, "resource"), keys["resource"], "a pod needs some resource")
        runtime = self._runtime(keys.get("runtime"), join(path, "runtime"))
        if runtime is None and kind != "service":
            raise self._error(node, f"{path}: a {kind} job needs a 'runtime'")
        if "driver" in keys and kind != "spark":
            raise fail(join(path, "driver"), keys["driver"], "only a spark job has a driver")
        if "gang" in keys and kind != "spark":
            raise fail(join(path, "gang"), keys["gang"], "only a spark job has a placeholder gang")
        gk = mapping(keys.get("gang"), join(path, "gang"), _GANG)
        style = text(gk.get("style"), join(path, "gang.style")) or "Soft"
        if style not in _STYLES:
            raise fail(join(path, "gang.style"), gk.get("style"), "expected Hard or Soft")
        pk = mapping(keys.get("preemption"), join(path, "preemption"), _PREEMPTION)
        priority = number(keys.get("priority"), join(path, "priority"))
        if priority != int(priority) or not -(2**31) <= priority <= 2**31 - 1:
            raise fail(join(path, "priority"), keys.get("priority"), "expected a 32-bit integer")
        driver = resources(keys.get("driver"), join(path, "driver"), "driver resource") or resource
        return JobSpec(
            kind=kind,
            pods=self._count(keys.get("pods"), join(path, "pods")) if "pods" in keys else 1,
            resource=resource,
            runtime=runtime,
            driver=driver if kind == "spark" else {},
            gang=Gang(
                style=style,
                timeout=self._duration(gk.get("timeout"), join(path, "gang.timeout"), default=0.0),
            ),
            priority=int(priority),
            allow_preempt_self=truth(
                pk["allow_preempt_self"], join(path, "preemption.allow_preempt_self")
            )
            if "allow_preempt_self" in pk
            else None,
            allow_preempt_other=truth(
                pk["allow_preempt_other"], join(path, "preemption.allow_preempt_other")
            )
            if "allow_preempt_other" in pk
            else None,
        )

    def _runtime(self, node: Node | None, path: str) -> Runtime | None:
        if node is None or is_null(node):
            return None
        if isinstance(node, ScalarNode):  # a plain duration is a fixed run time
            return Runtime("fixed", self._duration(node, path, default=0.0))
        keys = mapping(node, path, _RUNTIME)
        if len(keys) != 1:
            raise fail(path, node, "give one of fixed, uniform, exponential or lognormal")
        kind, value = next(iter(keys.items()))
        where = join(path, kind)
        if kind == "uniform":
            bounds = seq(value, where)
            if len(bounds) != 2:
                raise fail(where, value, "expected [shortest, longest]")
            lo = self._duration(bounds[0], f"{where}[0]", default=0.0)
            hi = self._duration(bounds[1], f"{where}[1]", default=0.0)
            if hi < lo:
                raise fail(where, value, "the longest is shorter than the shortest")
            return Runtime("uniform", lo, hi)
        if kind == "lognormal":
            lk = mapping(value, where, _LOGNORMAL)
            if "median" not in lk:
                raise fail(where, value, "a lognormal run time needs 'median' (and 'sigma')")
            sigma = number(lk.get("sigma"), join(where, "sigma")) if "sigma" in lk else 0.5
            if sigma < 0:
                raise fail(join(where, "sigma"), lk.get("sigma"), "expected 0 or more")
            return Runtime(
                "lognormal", self._duration(lk["median"], join(where, "median"), default=0.0), sigma
            )
        return Runtime(kind, self._duration(value, where, default=0.0))

    def _event(self, node: Node, path: str, groups: set[str]) -> ClusterEvent:
        keys = mapping(node, path, _EVENT)
        if "at" not in keys:
            raise self._error(node, f"{path}: an event needs 'at'")
        at = self._duration(keys["at"], join(path, "at"), default=0.0)
        kinds = [k for k in keys if k != "at"]
        if len(kinds) != 1:
            raise self._error(
                node, f"{path}: give one of nodes_added, nodes_drained, nodes_removed, rm_restart"
            )
        kind = kinds[0]
        if kind == "rm_restart":
            restart = keys[kind]
            if isinstance(restart, MappingNode) and restart.value:
                key_node = restart.value[0][0]
                raise fail(
                    join(path, f"{kind}.{key_node.value}"),
                    key_node,
                    f"unknown key {key_node.value!r}: rm_restart takes no keys (rm_restart: {{}})",
                )
            mapping(restart, join(path, kind), frozenset())
            return ClusterEvent(at=at, kind=kind)
        nk = mapping(keys[kind], join(path, kind), _NODE_EVENT)
        if "group" not in nk:
            raise fail(join(path, kind), keys[kind], "name the node 'group'")
        group = text(nk["group"], join(path, kind) + ".group")
        if group not in groups:
            raise fail(join(path, kind) + ".group", nk["group"], f"no node group {group!r}")
        count = self._count(nk.get("count"), join(path, kind) + ".count") if "count" in nk else 1
        return ClusterEvent(at=at, kind=kind, group=group, count=count)


def _check_partitions(body: str) -> None:
    """``body`` checked by the core's parser, and refused unless it has the partition the
    simulated RM plays (``PARTITION``): its apps and nodes would go to no partition."""
    names = [p.name for p in parse_config(body).partitions]
    if PARTITION in names:
        return
    place: Node | None = None
    document = compose(body)
    if isinstance(document, MappingNode):
        place = pairs(document, "").get("partitions", (None, None))[1]
        if isinstance(place, SequenceNode) and place.value:
            first = place.value[0]
            if isinstance(first, MappingNode) and "name" in pairs(first, ""):
                place = pairs(first, "")["name"][1]
    which = ", ".join(repr(n) for n in names)
    them = "name it" if len(names) == 1 else "name one of them"
    raise fail(
        "partitions",
        place,
        f"scheduler simulate plays the partition {PARTITION!r}; this configuration has "
        f"{which}: {them} {PARTITION}",
    )


def _value(node: Node | None, key: str) -> Node | None:
    """The value of ``key`` in a mapping node already read (None: not there)."""
    if not isinstance(node, MappingNode):
        return None
    return pairs(node, "").get(key, (None, None))[1]


def _is_list(node: Node | None) -> bool:
    return node is not None and not isinstance(node, (MappingNode, ScalarNode))


def _one_or_many(node: Node | None) -> list[Node]:
    if node is None or is_null(node):
        return []
    if isinstance(node, MappingNode):
        return [node]
    return seq(node, "")


def _with_node_sorting(body: str, policy: str) -> str:
    """The queues.yaml ``body`` with every partition's node sort policy set to ``policy``."""
    document = yaml.safe_load(body or DEFAULT_SCHEDULER_CONFIG)
    for partition in document.get("partitions") or []:
        partition["nodesortpolicy"] = {"type": policy}
    return yaml.safe_dump(document, sort_keys=False)
