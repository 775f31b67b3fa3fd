"""``queues.yaml`` fuzzed, as the wire decoders are (``tests/scheduler/si/test_wire.py``):
whatever text an operator or a script hands the core, the parser either takes it or
refuses it with a ``ConfigError`` that says why, and ``scheduler check-config`` reports
a problem for every text the parser refuses. Never another exception: a bad file must
never crash the core or the daemon that reloads it.

Three kinds of input: any text; documents shaped like ``queues.yaml`` with keys from its
schema and values of any YAML type; and a valid file with one value replaced by junk.
The first found a character YAML refuses (``\x1b``) escaping ``check_config`` as a
``yaml.reader.ReaderError``."""

from __future__ import annotations

import os
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.config._check import Problem, check_config
from scheduler.config._parser import ConfigError, SchedulerConfig, parse_config

# ``CONFIG_FUZZ_EXAMPLES=5000 pytest tests/scheduler/config/test_config_fuzz.py``: deeper.
EXAMPLES = int(os.environ.get("CONFIG_FUZZ_EXAMPLES", "300"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def parsed_or_refused(text: str) -> SchedulerConfig | None:
    """The parser's answer: a configuration, or None for a ``ConfigError`` with a reason.
    Any other exception fails the test."""
    try:
        return parse_config(text)
    except ConfigError as exc:
        assert str(exc).strip(), "a ConfigError must say what is wrong"
        return None


def agrees_with_check_config(text: str) -> None:
    config = parsed_or_refused(text)
    result = check_config(text)  # never raises: it reports
    if config is None:
        assert result.problems, f"check-config found nothing in a file the core refuses:\n{text}"
    for problem in result.problems:
        assert problem.message.strip()
        assert problem.line >= 0 and problem.column >= 0


# ============================================================================ any text
@FUZZ
@given(st.text(max_size=400))
def test_any_text_is_taken_or_refused_with_a_reason(text: str) -> None:
    agrees_with_check_config(text)


@FUZZ
@given(
    st.lists(
        st.sampled_from(
            [
                "partitions:",
                "  - name: default",
                "    queues:",
                "      - name: root",
                "        queues:",
                "          - name: a",
                "        submitacl: '*'",
                "            resources:",
                "              max: {memory: 10}",
                "              guaranteed: {vcore: 1}",
                "            properties:",
                "              preemption.policy: fence",
                "              preemption.delay: 5s",
                "    placementrules:",
                "      - name: tag",
                "        value: namespace",
                "        create: true",
                "    preemption:",
                "      enabled: true",
                "    limits:",
                "      - limit: x",
                "        users: ['*']",
                "        maxapplications: 2",
                "    nodesortpolicy:",
                "      type: binpacking",
                "  - name: GPU",
                "\t",
                "- [",
                "{",
                "&a x",
                "*a",
                "!!python/object:os.system",
                "%YAML 1.1",
                "---",
                "...",
                "key: value: other",
                "'",
                '"',
            ]
        ),
        max_size=30,
    )
)
def test_lines_of_queues_yaml_in_any_order(lines: list[str]) -> None:
    agrees_with_check_config("\n".join(lines))


# ============================================================ documents of the schema
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(
        [
            "10",
            "1Gi",
            "100m",
            "-1",
            "30s",
            "fence",
            "default",
            "disabled",
            "*",
            "root",
            "user",
            "tag",
            "provided",
            "fixed",
            "fair",
            "fifo",
            "binpacking",
            "true",
            "yes",
            "0x10",
            "1e3",
            " ",
            "a.b",
            "root.a",
        ]
    ),
)
QUEUE_KEYS = [
    "name",
    "parent",
    "resources",
    "maxapplications",
    "properties",
    "adminacl",
    "submitacl",
    "childtemplate",
    "queues",
    "limits",
    "max",
    "guaranteed",
    "bogus",
]
PARTITION_KEYS = [
    "name",
    "queues",
    "placementrules",
    "limits",
    "nodesortpolicy",
    "preemption",
    "statedumpfilepath",
    "bogus",
]
PROPERTY_KEYS = [
    "application.sort.policy",
    "application.sort.priority",
    "priority.policy",
    "priority.offset",
    "preemption.policy",
    "preemption.delay",
    "other",
]


def values(depth: int) -> st.SearchStrategy[Any]:
    if depth <= 0:
        return SCALARS
    inner = values(depth - 1)
    return st.one_of(
        SCALARS,
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(QUEUE_KEYS + PARTITION_KEYS + PROPERTY_KEYS), inner, max_size=4
        ),
        st.dictionaries(
            st.sampled_from(["memory", "vcore", "gpu", "max", "guaranteed"]), inner, max_size=3
        ),
    )


@st.composite
def queue(draw: st.DrawFn, depth: int = 2) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in draw(st.lists(st.sampled_from(QUEUE_KEYS), max_size=6, unique=True)):
        if key == "queues" and depth > 0:
            out[key] = draw(st.lists(queue(depth - 1), max_size=3))
        elif key == "properties":
            out[key] = draw(st.dictionaries(st.sampled_from(PROPERTY_KEYS), SCALARS, max_size=3))
        else:
            out[key] = draw(values(1))
    if draw(st.booleans()):
        out["name"] = draw(st.sampled_from(["root", "a", "b", "a.b", "", "x" * 70]))
    return out


@st.composite
def document(draw: st.DrawFn) -> Any:
    partitions = []
    for _ in range(draw(st.integers(0, 2))):
        p: dict[str, Any] = {}
        for key in draw(st.lists(st.sampled_from(PARTITION_KEYS), max_size=5, unique=True)):
            if key == "queues":
                p[key] = (
                    [{"name": "root", **draw(queue())}]
                    if draw(st.booleans())
                    else draw(st.lists(queue(), max_size=2))
                )
            else:
                p[key] = draw(values(2))
        partitions.append(p)
    doc: Any = {"partitions": partitions}
    if draw(st.booleans()):
        doc = draw(st.sampled_from([partitions, {"partitions": None}, doc, [doc]]))
    return doc


@FUZZ
@given(document())
def test_documents_shaped_like_queues_yaml_are_taken_or_refused(doc: Any) -> None:
    agrees_with_check_config(yaml.safe_dump(doc, sort_keys=False))


# ======================================================== a valid file, one value off
VALID = {
    "partitions": [
        {
            "name": "default",
            "placementrules": [{"name": "tag", "value": "namespace", "create": True}],
            "limits": [{"limit": "all", "users": ["*"], "maxapplications": 10}],
            "nodesortpolicy": {"type": "fair"},
            "preemption": {"enabled": True},
            "queues": [
                {
                    "name": "root",
                    "submitacl": "*",
                    "queues": [
                        {
                            "name": "a",
                            "resources": {"guaranteed": {"memory": 10}, "max": {"memory": 20}},
                            "properties": {"preemption.policy": "fence"},
                        },
                        {
                            "name": "b",
                            "parent": True,
                            "childtemplate": {"resources": {"max": {"vcore": 2}}},
                        },
                    ],
                }
            ],
        }
    ]
}


def paths(node: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at] if at else []
    if isinstance(node, dict):
        for key, value in node.items():
            out += paths(value, (*at, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += paths(value, (*at, i))
    return out


def test_the_valid_file_is_valid() -> None:
    assert parsed_or_refused(yaml.safe_dump(VALID)) is not None


@FUZZ
@given(st.sampled_from(paths(VALID)), values(2))
def test_a_valid_file_with_one_value_replaced(path: tuple[Any, ...], junk: Any) -> None:
    doc = yaml.safe_load(yaml.safe_dump(VALID))  # a deep copy
    node = doc
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = junk
    agrees_with_check_config(yaml.safe_dump(doc, sort_keys=False))


def test_a_character_yaml_refuses_is_a_problem_with_its_place() -> None:
    (problem,) = check_config("partitions:\n  - name: de\x1bfault\n").problems
    assert problem == Problem(
        "invalid YAML: the character U+001B is not allowed in YAML: remove it", 2, 13
    )
