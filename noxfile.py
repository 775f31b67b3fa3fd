"""One session per concern: tests, contract, lint, types, docs, bench, soak, demo,
simulate, tests_compiled, proto."""

from __future__ import annotations

import ast
from pathlib import Path

import nox

nox.options.sessions = ["tests", "contract"]
nox.options.reuse_existing_virtualenvs = True

ROOT = Path(__file__).parent
CONTRACT = ROOT.parent / "shared" / "contract"


@nox.session
def tests(session: nox.Session) -> None:
    """The project's own test suite."""
    session.install("-e", ".[test]")
    session.run("pytest", *(session.posargs or ["-q"]))


@nox.session
def contract(session: nox.Session) -> None:
    """The public contract's shape checks, in ../shared/contract."""
    session.install("-e", ".[test]")
    if not CONTRACT.exists():
        session.skip(f"no contract at {CONTRACT}")
    session.run(
        "pytest",
        str(CONTRACT),
        "-q",
        "-p",
        "no:cacheprovider",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
    )


def compiled_modules() -> list[str]:
    """The dotted names of the modules ``setup.py`` compiles (its ``COMPILED`` list)."""
    for node in ast.parse((ROOT / "setup.py").read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "COMPILED":
            paths: list[str] = ast.literal_eval(node.value)
            return [p.removesuffix(".py").replace("/", ".") for p in paths]
    raise RuntimeError("setup.py has no COMPILED list")


@nox.session
def tests_compiled(session: nox.Session) -> None:
    """The whole suite and the contract check against the mypyc build, installed (not editable).

    Builds with ``SCHEDULER_COMPILE=1`` (setup.py), checks that the compiled modules are the
    ones imported, and runs pytest with nothing from ``src/`` on the path.
    """
    session.install(".[test,compile]")  # the dependencies (and a pure build, replaced next)
    env = {"SCHEDULER_COMPILE": "1", "PYTHONPATH": ""}
    session.install("--no-build-isolation", "--no-deps", "--force-reinstall", ".", env=env)
    modules = compiled_modules()
    check = (
        "import importlib\n"
        f"for name in {modules!r}:\n"
        "    path = importlib.import_module(name).__file__ or ''\n"
        "    assert path.endswith('.so') and '/src/' not in path, (name, path)\n"
        f"print('{len(modules)} compiled modules imported')\n"
    )
    run_env = {"PYTHONPATH": ""}
    session.run("python", "-c", check, env=run_env)
    session.run("pytest", "-p", "no:cacheprovider", *(session.posargs or ["-q"]), env=run_env)
    if not CONTRACT.exists():
        session.log(f"no contract at {CONTRACT}: its check is skipped")
    else:
        session.run(
            "pytest",
            str(CONTRACT),
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "asyncio_default_fixture_loop_scope=function",
            env=run_env,
        )


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and format check."""
    session.install("ruff")
    session.run("ruff", "check", "src", "tests", "bench", "examples")
    session.run("ruff", "format", "--check", "src", "tests", "bench", "examples")


@nox.session
def types(session: nox.Session) -> None:
    """Strict mypy over src, tests and examples."""
    session.install("-e", ".[dev]")
    session.run("mypy")


@nox.session
def docs(session: nox.Session) -> None:
    """The API reference and the guides in docs/, built into site/; a warning fails it."""
    session.install("-e", ".[docs]", "ruff")  # ruff lays out the long signatures
    session.run("mkdocs", "build", "--strict", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks: print tables and write JSON into bench/results/.

    Positional arguments ending in ``.py`` pick the scripts (default: every bench_*.py); the
    others go to each script: ``nox -s bench -- --check`` fails when a target is missed,
    ``nox -s bench -- bench_gang.py --quick`` is a fast run of one.
    """
    session.install("-e", ".")
    scripts = [a for a in session.posargs if a.endswith(".py")]
    args = [a for a in session.posargs if not a.endswith(".py")]
    for script in scripts or sorted(p.name for p in (ROOT / "bench").glob("bench_*.py")):
        session.run("python", str(ROOT / "bench" / script), *args)


@nox.session
def soak(session: nox.Session) -> None:
    """Drive a daemon with churning, reconnecting RMs and check it stays bounded.

    A minute by default; the arguments go to bench/soak.py: ``nox -s soak -- --duration
    3600`` runs an hour. The report (samples.csv, summary.json, report.md, rss.png) goes to
    bench/results/soak-<timestamp>/; a failed check fails the session.
    """
    session.install("-e", ".[soak]")
    session.run("python", str(ROOT / "bench" / "soak.py"), *session.posargs)


@nox.session
def soak_ci(session: nox.Session) -> None:
    """The soak as CI runs it: one minute, a smoke test. The store of ended applications
    is small (50 a partition) so that it fills in the warm-up (half the run), and RSS may
    rise by 10 MiB/min at most (2 to 3.3 measured; the leaks the soak found grew it by 30
    to 100 MiB/min). The hour run (``nox -s soak -- --duration 3600``) holds the daemon to
    the default bounds."""
    session.install("-e", ".[soak]")
    ci = ["--duration", "60", "--keep-terminated", "50", "--warmup", "0.5"]
    session.run(
        "python", str(ROOT / "bench" / "soak.py"), *ci, "--max-rss-slope", "10", *session.posargs
    )


@nox.session
def demo(session: nox.Session) -> None:
    """A short in-process scenario on the default configuration."""
    session.install("-e", ".")
    session.run("scheduler", "demo", *session.posargs)


@nox.session
def proto(session: nox.Session) -> None:
    """Regenerate src/scheduler/si/si_pb2.py, si_pb2.pyi and si_pb2_grpc.py from si.proto
    (commit the result; grpcio-tools is needed here only, not at install time)."""
    session.install("grpcio-tools>=1.85.1,<1.86")
    session.run(
        "python",
        "-m",
        "grpc_tools.protoc",
        "-I",
        "src",
        "--python_out=src",
        "--pyi_out=src",
        "--grpc_python_out=src",
        "src/scheduler/si/si.proto",
    )


@nox.session
def simulate(session: nox.Session) -> None:
    """``scheduler simulate`` with the session's arguments (none: the built-in scenario),
    with the ``simulate`` extra (the report's plots)."""
    session.install("-e", ".[simulate]")
    session.run("scheduler", "simulate", *session.posargs)
