"""YAML syntax errors in plain words (``scheduler.config._syntax``): each kind of error
``scheduler check-config`` and the core's parser meet, placed at the line and column to
change, saying what is wrong and what to do, in no YAML parser's terms.

YuniKorn reads ``queues.yaml`` with ``yaml.UnmarshalStrict`` (``configs.ParseAndValidateConfig``)
and passes the library's message on; these are ours, one per kind of error PyYAML reports.
"""

from __future__ import annotations

import re

import pytest
import yaml

from scheduler._errors import ConfigError
from scheduler.config._check import check_config
from scheduler.config._parser import parse_config
from scheduler.config._syntax import explain

# Words of PyYAML's messages that mean nothing to a reader of queues.yaml.
JARGON = re.compile(
    r"while |scalar|token|<|stream|node content|block end|simple key|found character|"
    r"flow (mapping|sequence)|mapping values|chomping|occurrence"
)

CASES = [
    pytest.param(
        "partitions:\n  - name: a\n\tqueues: []\n",
        (3, 1),
        "a tab character: YAML indents with spaces only; replace the tab with spaces",
        id="tab",
    ),
    pytest.param(
        "partitions:\n  - name: a: b\n",
        (2, 12),
        "a ':' followed by a space inside a value: put the value in quotes",
        id="colon-in-value",
    ),
    pytest.param(
        'partitions:\n  - name: "abc\n',
        (2, 11),
        "this quoted text is never closed: add the closing quote",
        id="unclosed-quote",
    ),
    pytest.param(
        "partitions:\n  - name: a\n    queues: {name: root\n",
        (3, 13),
        "this '{' is not closed before the end of the file at line 4, column 1: "
        "add the missing '}'",
        id="unclosed-brace",
    ),
    pytest.param(
        "partitions: [{name: a}\nx: 1\n",
        (1, 13),
        "this '[' is not closed before more text at line 2, column 1: add the missing ']'",
        id="unclosed-bracket",
    ),
    pytest.param(
        "partitions:\n  - name: a\n    queues: [\n",
        (4, 1),
        "the file ends where a value is expected: complete the value, or close the open",
        id="file-ends-early",
    ),
    pytest.param(
        "partitions:\n  - name: a\n    queues:\n      - name: root\n     submitacl: '*'\n",
        (5, 6),
        "this line is indented differently from the entries of the block that starts at "
        "line 2, column 5: indent it as they are",
        id="indentation",
    ),
    pytest.param(
        "partitions:\n  - name: a\n    queues:\n    - name: root\n  - name: b\n",
        None,
        None,
        id="valid-indentation-is-no-problem",
    ),
    pytest.param(
        "checksum: x\n- name: a\n",
        (2, 1),
        "a list entry ('- ') among the keys of the block that starts at line 1, column 1: "
        "indent the list under the key it belongs to",
        id="list-among-keys",
    ),
    pytest.param(
        "partitions: []\nqueues\nchecksum: x\n",
        (2, 1),
        "this line is neither a 'key: value' nor a list entry ('- '): add ': ' after the key",
        id="key-without-colon",
    ),
    pytest.param(
        "partitions:\n  - name: 'a' b\n",
        (2, 15),
        "more text after a complete value: put the whole value in quotes",
        id="text-after-value",
    ),
    pytest.param(
        "partitions:\n  - name: a]\n    queues: [{name: root}]]\n",
        (3, 27),
        "a ']' that closes nothing: remove it, or open it with '['",
        id="stray-bracket",
    ),
    pytest.param(
        "partitions:\n  - name: a\n    queues: *roots\n",
        (3, 13),
        "'*roots' refers to no anchor: define '&roots' on a value before it",
        id="undefined-alias",
    ),
    pytest.param(
        "partitions:\n  - name: &n a\n    queues: [{name: &n root}]\n",
        (3, 21),
        "the anchor '&n' is defined twice (first at line 2, column 11): give each anchor its own",
        id="duplicate-anchor",
    ),
    pytest.param(
        "partitions:\n  - name: & a\n",
        (2, 12),
        "an anchor ('&name') or alias ('*name') needs a name of letters and digits",
        id="anchor-without-name",
    ),
    pytest.param(
        'partitions:\n  - name: "a\\qb"\n',
        (2, 14),
        "'\\q' is not an escape double-quoted text knows: write '\\\\' for a backslash, "
        "or use single quotes",
        id="unknown-escape",
    ),
    pytest.param(
        "partitions:\n  - name: @a\n",
        (2, 11),
        "a value cannot start with '@': put the value in quotes",
        id="reserved-character",
    ),
    pytest.param(
        'partitions:\n  - name: "a\n---\n"\n',
        (2, 11),
        "this quoted text is not closed before the '---' line at line 3, column 1: add the",
        id="quote-across-documents",
    ),
    pytest.param(
        'partitions:\n  - name: "\\x4"\n',
        (2, 14),
        "an escape ('\\x', '\\u', '\\U') here needs 2 hexadecimal digits: complete it, or use",
        id="short-escape",
    ),
    pytest.param(
        "partitions:\n  - name: [a\n---\n",
        (2, 11),
        "this '[' is not closed before a '---' line at line 3, column 1: add the missing ']'",
        id="bracket-across-documents",
    ),
    pytest.param(
        "partitions: []\n---\npartitions: []\n",
        (2, 1),
        "a second document ('---') starts here: a queues.yaml holds one",
        id="two-documents",
    ),
    pytest.param(
        "%YAML 2.0\n---\npartitions: []\n",
        (1, 1),
        "only YAML 1.x is read: remove the '%YAML' line or make it '%YAML 1.1'",
        id="yaml-version",
    ),
    pytest.param(
        "%partitions\npartitions: []\n",
        (2, 1),
        "a line that starts with '%' is a YAML directive: put that text in quotes",
        id="directive",
    ),
    pytest.param(
        "partitions:\n  - name: !<a\n",
        (2, 11),
        "a value that starts with '!' is a YAML tag: put the value in quotes",
        id="tag",
    ),
    pytest.param(
        "partitions:\n  - name: |a\n",
        (2, 12),
        "after '|' or '>' only '+', '-' or a digit may follow on the same line",
        id="block-text",
    ),
    pytest.param(
        "partitions:\n  - name: a\x07b\n",
        (2, 12),
        "the character U+0007 is not allowed in YAML: remove it",
        id="control-character",
    ),
]


@pytest.mark.parametrize(("text", "place", "expected"), CASES)
def test_check_config_explains_a_syntax_error_where_to_change_it(
    text: str, place: tuple[int, int] | None, expected: str | None
) -> None:
    problems = check_config(text).problems
    if place is None:  # the control case: the text is YAML, so no syntax problem
        assert not any(p.message.startswith("invalid YAML") for p in problems)
        return
    (problem,) = problems
    assert (problem.line, problem.column) == place
    assert problem.message.startswith(f"invalid YAML: {expected}")
    assert not JARGON.search(problem.message), problem.message


@pytest.mark.parametrize(("text", "place", "expected"), [c for c in CASES if c.values[1]])
def test_the_core_refuses_a_syntax_error_with_the_same_words(
    text: str, place: tuple[int, int], expected: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config(text)
    message = str(refused.value)
    assert message.startswith(f"invalid YAML: {expected}")
    assert message.endswith(f"(line {place[0]}, column {place[1]})")
    assert "\n" not in message and not JARGON.search(message)


def test_an_unforeseen_syntax_error_still_gets_plain_words_and_its_place() -> None:
    """A message no rule knows (a later PyYAML's): a general sentence, at the error's mark."""
    mark = yaml.Mark("<text>", 0, 4, 2, "", 0)
    exc = yaml.MarkedYAMLError(problem="found a brand-new kind of trouble", problem_mark=mark)
    explained = explain(exc, "")
    assert (explained.line, explained.column) == (5, 3)
    assert explained.message.startswith("the text here cannot be read as YAML: check its")
    assert "brand-new" not in explained.message
    assert str(explained).endswith("(line 5, column 3)")


@pytest.mark.parametrize(
    ("text", "place"),
    [
        ("[" * 5000, (1, 101)),
        ("partitions:\n  - name: default\n    queues: " + "{a: " * 3000, (3, 413)),
    ],
)
def test_nesting_too_deep_for_the_reader_is_a_syntax_error_not_a_crash(
    text: str, place: tuple[int, int]
) -> None:
    """PyYAML's reader recurses once per level: thousands of '[' ended in a RecursionError
    out of parse_config (an RM's registration, check-config, validate-conf). Now both say
    so in words, placed where the nesting passes 100 levels."""
    with pytest.raises(ConfigError) as refused:
        parse_config(text)
    message = str(refused.value)
    assert message.startswith("invalid YAML: lists or maps are nested too deeply to read here")
    assert message.endswith(f"(line {place[0]}, column {place[1]})")
    [problem] = check_config(text).problems
    assert (problem.line, problem.column) == place
    assert problem.message in message
