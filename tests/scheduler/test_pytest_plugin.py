"""The pytest plugin, run for real: inner test files under pytest-asyncio (strict and auto
mode) and anyio's plugin, loaded with ``-p`` and through the declared entry point."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import scheduler

pytest_plugins = ["pytester"]

PLUGIN = "scheduler.pytest_plugin"
# By module, whether or not the installed metadata has the entry point yet (loaded both ways,
# one module would be registered twice).
LOAD = ("-p", "no:scheduler", "-p", PLUGIN)
ANYIO = "anyio.pytest_plugin"
ASYNCIO = "pytest_asyncio.plugin"
ROOT = Path(__file__).parents[2]
PYPROJECT = ROOT / "pyproject.toml"
EXAMPLE = ROOT / "docs" / "examples" / "test_scenario_example.py"

# {mark} is the module's pytestmark. The watchdog turns a core started on another event loop
# than the test's (it would never answer) into a failure instead of a hang.
INNER = '''
import anyio
import pytest

QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: a
            resources:
              max: {{memory: 30, vcore: 3}}
"""

pytestmark = [{mark}]


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def test_fixtures_share_one_core(
    scheduler_scenario, scheduler_core, scheduler_clock, scheduler_rm
):
    s = scheduler_scenario
    assert (s.core, s.clock, s.rm) == (scheduler_core, scheduler_clock, scheduler_rm)
    with anyio.fail_after(10):
        await s.add_nodes("n1")
        # the built-in default configuration places by the namespace tag: root.default
        await s.submit("app-1", tags={{"namespace": "default"}})
        await s.ask("app-1", count=2)
        await scheduler_clock.advance(1)
    s.assert_allocated("app-1", 2)
    assert scheduler_rm.accepted_nodes == ["n1"]


@pytest.mark.scheduler_config(QUEUES)
async def test_marker_gives_the_configuration(scheduler_scenario):
    s = scheduler_scenario
    with anyio.fail_after(10):
        await s.add_nodes("n1")
        await s.submit("app-1", queue="root.a")
        await s.ask("app-1", count=5)
    s.assert_allocated("app-1", 3)  # root.a's max
'''

OVERRIDE = """
import pytest
from test_inner import QUEUES, anyio_backend, pytestmark


@pytest.fixture
def scheduler_config():
    return QUEUES


async def test_fixture_override_gives_the_configuration(scheduler_scenario):
    await scheduler_scenario.submit("app-1", queue="root.a")
    assert scheduler_scenario.rm.accepted_apps == ["app-1"]
    await scheduler_scenario.submit("app-2", queue="root.b")  # not configured, not created
    assert [r.application_id for r in scheduler_scenario.rm.rejected_apps] == ["app-2"]
"""


def write(pytester: pytest.Pytester, mark: str, *, asyncio: bool = True) -> None:
    pytester.makepyfile(test_inner=INNER.format(mark=mark), test_override=OVERRIDE)
    write_ini(pytester, asyncio=asyncio)


def write_ini(pytester: pytest.Pytester, *, asyncio: bool = True, in_process: bool = True) -> None:
    loop_scope = "asyncio_default_fixture_loop_scope = function\n" if asyncio else ""
    warnings = "error"
    if in_process:  # the outer run imported the plugin already: pytest cannot rewrite it
        warnings += "\n    ignore:Module already imported:pytest.PytestAssertRewriteWarning"
    pytester.makeini(f"[pytest]\n{loop_scope}filterwarnings =\n    {warnings}\n")


def run(pytester: pytest.Pytester, mark: str, *args: str, asyncio: bool = True) -> None:
    write(pytester, mark, asyncio=asyncio)
    pytester.inline_run("-p", "no:cacheprovider", *args).assertoutcome(passed=3)


def test_pytest_asyncio_strict_mode(pytester: pytest.Pytester) -> None:
    run(pytester, "pytest.mark.asyncio", *LOAD, "-o", "asyncio_mode=strict")


def test_pytest_asyncio_auto_mode(pytester: pytest.Pytester) -> None:
    run(pytester, "", *LOAD, "-o", "asyncio_mode=auto")


def test_anyio_without_pytest_asyncio(pytester: pytest.Pytester) -> None:
    run(pytester, "pytest.mark.anyio", *LOAD, "-p", "no:asyncio", asyncio=False)


def test_anyio_beside_pytest_asyncio_in_any_order(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With anyio's hook registered first, pytest-asyncio's hook would get the fixtures first
    # and start the core on its own loop: the plugin hands anyio tests undeclared copies.
    # Loaded before pytest-asyncio, the plugin must not import it (pytest would warn).
    # Subprocesses, so that a hang ends at its timeout and nothing is imported already.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("PYTHONPATH", str(Path(scheduler.__file__).parents[1]))
    write(pytester, "pytest.mark.anyio")
    write_ini(pytester, in_process=False)
    for plugins in [ANYIO, ASYNCIO, PLUGIN], [ASYNCIO, ANYIO, PLUGIN], [PLUGIN, ANYIO, ASYNCIO]:
        args = [arg for plugin in plugins for arg in ("-p", plugin)]
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=60)
        result.assert_outcomes(passed=3)


def test_entry_point_is_declared() -> None:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"scheduler": PLUGIN}


def test_entry_point_loads_the_plugin(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What an installed package provides, built from pyproject.toml's own declaration.
    entry_points = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"]["pytest11"]
    dist = pytester.path / "site" / "scheduler_plugin_check-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: scheduler-plugin-check\n")
    lines = [f"{name} = {target}" for name, target in entry_points.items()]
    (dist / "entry_points.txt").write_text("[pytest11]\n" + "\n".join(lines) + "\n")
    monkeypatch.syspath_prepend(str(dist.parent))
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    run(pytester, "pytest.mark.asyncio")


def test_the_documented_example_passes(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_scenario_example=EXAMPLE.read_text())
    write_ini(pytester)
    result = pytester.inline_run("-p", "no:cacheprovider", *LOAD)
    result.assertoutcome(passed=5)


def test_the_documentation_shows_the_example_as_it_is() -> None:
    doc = (ROOT / "docs" / "testing.md").read_text()
    assert f"```python\n{EXAMPLE.read_text()}```\n" in doc
