"""How every output shows a resource quantity (``format_quantity``, ``format_resources``):
``scheduler demo``'s tables, ``check-config``'s messages and the status page's ``formatResource()``
(checked here in Node.js against the Python function, value for value), so that a user
reads the same ``8Gi`` and ``500m`` everywhere. YuniKorn's own outputs are raw integers
(bytes, milli-vcores); the units follow its quantity suffixes (``pkg/common/resources/
quantity.go``: binary ``Ki``..``Ei``, vcore's ``m``)."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from scheduler.config._quantity import format_quantity, format_resources, parse_resource_conf

PAGE = Path(__file__).parents[3] / "src" / "scheduler" / "daemon" / "web" / "index.html"
GI, MI = 1 << 30, 1 << 20


@pytest.mark.parametrize(
    ("name", "value", "shown"),
    [
        ("memory", 8 * GI, "8Gi"),
        ("memory", 512 * MI, "512Mi"),
        ("memory", 1536 * MI, "1.5Gi"),  # not a whole Gi: one decimal
        ("memory", 2 * 10**9, "1.9Gi"),  # 2G as written in queues.yaml
        ("memory", 1024**3 - 42 * 1024, "1.0Gi"),  # 1023.96Mi rounds up into Gi
        ("memory", 5 * GI // 4, "1.3Gi"),  # 1.25 rounds half up
        ("memory", 1000, "1000"),  # below 1Ki: bytes
        ("memory", 0, "0"),
        ("memory", -3 * MI, "-3Mi"),
        ("ephemeral-storage", 20 * GI, "20Gi"),
        ("memory", 2**63 - 1, "8.0Ei"),
        ("vcore", 4000, "4"),
        ("vcore", 500, "500m"),
        ("vcore", 2500, "2500m"),
        ("vcore", 0, "0"),
        ("pods", 12_345, "12,345"),
    ],
)
def test_a_quantity_is_shown_in_the_units_of_its_resource(
    name: str, value: int, shown: str
) -> None:
    assert format_quantity(name, value) == shown


def test_a_whole_quantity_reads_back_as_the_same_value() -> None:
    """What check-config shows for a whole number of units can be pasted into queues.yaml."""
    for res in ({"memory": 8 * GI, "vcore": 500}, {"memory": 512 * MI, "vcore": 4000}):
        shown = dict(part.split(": ") for part in format_resources(res).split(", "))
        assert parse_resource_conf(shown) == res


def test_memory_and_vcore_come_first_then_the_others_by_name() -> None:
    res = {"vcore": 500, "nvidia.com/gpu": 2, "memory": 2 * GI, "ephemeral-storage": GI}
    assert format_resources(res) == (
        "memory: 2Gi, vcore: 500m, ephemeral-storage: 1Gi, nvidia.com/gpu: 2"
    )
    assert format_resources(res, sep="=").startswith("memory=2Gi, vcore=500m, ")
    assert format_resources({}) == ""


def _page_format_resource() -> str:
    """The page's ``formatResource`` function, as its script defines it."""
    text = PAGE.read_text(encoding="utf-8")
    start = text.index("  function formatResource(name, v) {")
    end = text.index("\n  }\n", start) + len("\n  }\n")
    return text[start:end]


def test_the_status_page_shows_quantities_as_the_cli_does() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed")
    rng = random.Random(22)
    print("seed 22")
    values = [0, 1, 1023, 1024, 1536, 10**9, 2 * 10**9, 5 * GI // 4, 1024**3 - 42 * 1024]
    values += [rng.randrange(0, 1 << 52) for _ in range(300)]
    values += [rng.randrange(0, 1 << 34) for _ in range(300)]
    values += [rng.randrange(1, 400) * 1024 ** rng.randrange(1, 5) for _ in range(100)]
    cases = [(n, v) for v in values for n in ("memory", "vcore", "pods")]
    script = _page_format_resource() + (
        "const cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));\n"
        "process.stdout.write(JSON.stringify(cases.map(([n, v]) => formatResource(n, v))));\n"
    )
    shown = subprocess.run(
        [node, "-e", script], input=json.dumps(cases), capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(shown) == [format_quantity(n, v) for n, v in cases]
