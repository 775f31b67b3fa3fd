"""Every example in ``examples/`` and every Python block of the README runs as written.

Each runs in a fresh interpreter (``sys.executable``) from the repository root, as a user
would run it, with this checkout's ``src`` first on the path. A Python block of the README
must be a whole program: a fragment fails here, so the README cannot show code that does
not run. Blocks in other languages (``sh``, ``yaml``, ``text``) are not run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import scheduler
from scheduler import si
from scheduler.testing import RecordingCallback

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
README = ROOT / "README.md"
GI = 1024**3

#: Lines each example must print (in this order, other lines may come between).
EXPECTED: dict[str, list[str]] = {
    "minimal_rm.py": [
        "node accepted: node-1",
        "application accepted: app-1",
        "allocated: task on node-1",
        "allocated: task on node-1",
        "application app-1 is Running",
        "queuename: root.a",
        "allocatedResource: {'memory': 2147483648, 'vcore': 2000}",
        "pendingResource: {'memory': 1073741824, 'vcore': 1000}",
    ],
    "gang.py": [
        "allocated placeholder ph-0 on node-",
        "allocated placeholder ph-2 on node-",
        "application gang-app is Starting",
        "core releases ph-0 (PLACEHOLDER_REPLACED)",
        "RM confirms the release of ph-0",
        "core confirms the RM's release of ph-0 (STOPPED_BY_RM)",
        "allocated real worker-",
        "applicationState: Running",
        "placeholderData: {'taskGroupName': 'workers', 'count': 3, "
        "'minResource': {'memory': 2147483648, 'vcore': 1000}, 'replaced': 3, 'timedout': 0}",
    ],
    "permit_gang.py": [
        "train/driver: placed 1, bound 0",
        "train/workers: placed 2, bound 0",
        "one response, 4 allocations: driver, worker, worker, worker",
        "event GangSatisfied ([train/driver, train/workers])",
        "train/workers: satisfied True, bound 3",
        "rejected ask trial: permit gang train/sweep timeout",
        "event GangTimeout (train/sweep)",
    ],
    "resilient_rm.py": [
        "the RM holds 3 allocations",
        "killing the daemon",
        "connection lost (lost): reconnecting",
        "recovering 3 allocations",
        "the new daemon holds 3 allocations",
        "allocated: more on node-",
        "the RM holds 4 allocations, reconnected 1x",
        "daemon exited with 0",
    ],
    "remote_rm.py": [
        "daemon listening (native transport)",
        "node accepted: node-1",
        "allocated: task on node-1",
        "allocated: task on node-1",
        "allocatedResource: {'memory': 2147483648, 'vcore': 2000}",
        "daemon exited with 0",
    ],
    "queues_demo.py": [
        "REJECTED: intruder: failed to place application intruder: "
        "application rejected: no placement rule matched",
        "billing (alice): New in root.prod",
        "etl (dave): New in root.namespaces.analytics",
        "notebook (erin): New in root.users.erin",
        "intruder (mallory): Rejected",
        "root.prod guaranteed {'memory': 17179869184, 'vcore': 8000} "
        "max {'memory': 34359738368, 'vcore': 16000}",
    ],
}

_FENCE = re.compile(r"^```([\w+-]*)[^\n]*\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)


def run_python(args: list[str]) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    # the package this test run imports: src/ here, the compiled build in nox -s tests_compiled
    package_root = str(Path(scheduler.__file__).parents[1])
    env["PYTHONPATH"] = os.pathsep.join([package_root, *filter(None, [env.get("PYTHONPATH")])])
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def assert_ran(result: subprocess.CompletedProcess[str], what: str) -> None:
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{what} exited {result.returncode}:\n{output}"
    assert "Traceback" not in output, f"{what} printed a traceback:\n{output}"


def assert_in_order(stdout: str, expected: list[str]) -> None:
    lines = stdout.splitlines()
    at = 0
    for want in expected:
        found = next((i for i in range(at, len(lines)) if want in lines[i]), None)
        assert found is not None, f"{want!r} not printed (after line {at}):\n{stdout}"
        at = found + 1


def python_blocks(markdown: str) -> list[str]:
    return [code for lang, code in _FENCE.findall(markdown) if lang in ("python", "py")]


# ====================================================================== examples
def test_every_example_has_expectations() -> None:
    scripts = {p.name for p in EXAMPLES.glob("*.py")}
    assert scripts == set(EXPECTED), "each example needs its expected output here"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_runs(name: str) -> None:
    result = run_python([str(Path("examples") / name)])
    assert_ran(result, name)
    assert_in_order(result.stdout, EXPECTED[name])
    if name != "queues_demo.py":  # the only example meant to be turned down
        assert "REJECTED" not in result.stdout, result.stdout


@pytest.mark.asyncio
async def test_queues_yaml_loads_through_the_core() -> None:
    config = (EXAMPLES / "queues.yaml").read_text()
    async with scheduler.start_scheduler() as core:
        await core.register_resource_manager(
            si.RegisterResourceManagerRequest(
                rm_id="rm-1", policy_group="default", version="1", config=config
            ),
            RecordingCallback(),
        )
        prod = await core.get_queue("default", "root.prod")
        assert prod["guaranteedResource"] == {"memory": 16 * GI, "vcore": 8000}
        assert prod["maxResource"] == {"memory": 32 * GI, "vcore": 16000}
        root = await core.get_queue("default", "root")
        assert sorted(c["queuename"] for c in root["children"]) == [
            "root.dev",
            "root.namespaces",
            "root.prod",
            "root.users",
        ]


# ======================================================================== README
def test_fences_are_found() -> None:
    text = "x\n```python\nprint(1)\n```\n```sh\nls\n```\n```py\nprint(2)\n```\n"
    assert python_blocks(text) == ["print(1)\n", "print(2)\n"]


def test_the_in_process_guide_shows_the_minimal_example_whole() -> None:
    # The README keeps a short example (run below); docs/in-process.md includes the script
    # itself at build time (pymdownx.snippets), so the guide cannot drift from it.
    guide = (ROOT / "docs" / "in-process.md").read_text()
    assert '```python\n--8<-- "examples/minimal_rm.py"\n```' in guide


@pytest.mark.parametrize("index", range(len(python_blocks(README.read_text()))))
def test_readme_python_block_runs(index: int) -> None:
    code = python_blocks(README.read_text())[index]
    result = run_python(["-c", code])
    assert_ran(result, f"README python block {index}:\n{code}")


def test_the_readme_example_allocates_what_the_readme_says() -> None:
    # "It prints `allocated: task on node-1` twice": on the built-in configuration, which
    # places the application by its namespace tag
    result = run_python(["-c", python_blocks(README.read_text())[0]])
    assert "It prints `allocated: task on node-1` twice." in README.read_text()
    assert result.stdout.splitlines() == ["allocated: task on node-1"] * 2
