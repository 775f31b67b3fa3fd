"""YAML syntax errors in plain words: what is wrong, where, and what to do.

PyYAML describes a syntax error in its parser's terms (``while parsing a block mapping
expected <block end>, but found '<block mapping start>'``). :func:`explain` turns the error
into one sentence a user can act on, placed at the line and column that needs the change:
the line of a key without its ``:``, not the line after it; the end of the file for a
quote never closed, naming where it opened. Both ``parse_config`` and
``scheduler check-config`` read the text with :func:`compose` and use it, so the core and
the check say the same thing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Final, NamedTuple

import yaml

__all__ = ["SyntaxProblem", "TooDeep", "compose", "explain"]


class SyntaxProblem(NamedTuple):
    """A syntax error in plain words; ``line`` and ``column`` count from 1 (0: unknown)."""

    message: str
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        where = f" (line {self.line}, column {self.column})" if self.line else ""
        return f"invalid YAML: {self.message}{where}"


_Mark = tuple[int, int]  # line, column, from 1
# A rule's message from the named groups of its two patterns and the other mark: the
# context's when the problem is placed at the problem's mark, and the other way round.
_Explainer = Callable[[Mapping[str, str], _Mark], str]


def _at(mark: _Mark) -> str:
    return f"line {mark[0]}, column {mark[1]}"


def _found(thing: str) -> str:
    """PyYAML's token name (``'<scalar>'``, ``'-'``) as a reader sees it."""
    return {
        "'<scalar>'": "more text",
        "'<stream end>'": "the end of the file",
        "':'": "a ':'",
        "'<document start>'": "a '---' line",
    }.get(thing, thing)


# (context pattern, problem pattern, message, placed at the context's mark rather than the
# problem's): the first rule whose patterns match explains the error.
_RULES: Final[tuple[tuple[str, str, _Explainer, bool], ...]] = (
    (
        "",
        r"found character '\\t' that cannot start any token",
        lambda m, c: "a tab character: YAML indents with spaces only; replace the tab with spaces",
        False,
    ),
    (
        "",
        r"found character '(?P<char>.+)' that cannot start any token",
        lambda m, c: f"a value cannot start with {m['char']!r}: put the value in quotes",
        False,
    ),
    (
        "",
        r"mapping values are not allowed here",
        lambda m, c: (
            "a ':' followed by a space inside a value: put the value in quotes, "
            "or put the nested key on a line of its own, indented"
        ),
        False,
    ),
    (
        r"while scanning a (double-|single-)?quoted scalar",
        r"found unexpected end of stream",
        lambda m, c: "this quoted text is never closed: add the closing quote",
        True,
    ),
    (
        r"while scanning a (double-|single-)?quoted scalar",
        r"found unexpected document separator",
        lambda m, c: (
            f"this quoted text is not closed before the '---' line at {_at(c)}: "
            "add the closing quote"
        ),
        True,
    ),
    (
        r"while scanning a double-quoted scalar",
        r"expected escape sequence of (?P<digits>\d+) hexadecimal numbers",
        lambda m, c: (
            f"an escape ('\\x', '\\u', '\\U') here needs {m['digits']} hexadecimal "
            "digits: complete it, or use single quotes"
        ),
        False,
    ),
    (
        r"while scanning a double-quoted scalar",
        r"found unknown escape character '(?P<char>.*)'",
        lambda m, c: (
            f"'\\{m['char']}' is not an escape double-quoted text knows: write "
            "'\\\\' for a backslash, or use single quotes"
        ),
        False,
    ),
    (
        "",
        r"found undefined alias '(?P<name>.*)'",
        lambda m, c: (
            f"'*{m['name']}' refers to no anchor: define '&{m['name']}' on a value "
            "before it, or remove the '*'"
        ),
        False,
    ),
    (
        r"found duplicate anchor '(?P<name>.*)'; first occurrence",
        r"second occurrence",
        lambda m, c: (
            f"the anchor '&{m['name']}' is defined twice (first at {_at(c)}): "
            "give each anchor its own name"
        ),
        False,
    ),
    (
        r"while scanning an? (anchor|alias)",
        r"expected alphabetic or numeric character",
        lambda m, c: (
            "an anchor ('&name') or alias ('*name') needs a name of letters and "
            "digits right after the '&' or '*'"
        ),
        False,
    ),
    (
        r"while parsing a flow mapping",
        r"expected ',' or '}', but got (?P<found>.*)",
        lambda m, c: (
            f"this '{{' is not closed before {_found(m['found'])} at {_at(c)}: "
            "add the missing '}' (or a ',' between its entries)"
        ),
        True,
    ),
    (
        r"while parsing a flow sequence",
        r"expected ',' or '\]', but got (?P<found>.*)",
        lambda m, c: (
            f"this '[' is not closed before {_found(m['found'])} at {_at(c)}: "
            "add the missing ']' (or a ',' between its entries)"
        ),
        True,
    ),
    (
        "",
        r"expected the node content, but found '<stream end>'",
        lambda m, c: (
            "the file ends where a value is expected: "
            "complete the value, or close the open '[' or '{'"
        ),
        False,
    ),
    (
        "",
        r"expected the node content, but found (?P<found>.*)",
        lambda m, c: (
            f"a value is expected here, not {_found(m['found'])}: "
            "write the value, or put it in quotes"
        ),
        False,
    ),
    (
        r"while scanning a simple key",
        r"could not find expected ':'",
        lambda m, c: (
            "this line is neither a 'key: value' nor a list entry ('- '): "
            "add ': ' after the key, or join it to the line above"
        ),
        True,
    ),
    (
        r"while parsing a block (mapping|collection)",
        r"expected <block end>, but found '<scalar>'",
        lambda m, c: (
            "more text after a complete value: put the whole value in quotes, "
            "or start a comment with ' #'"
        ),
        False,
    ),
    (
        r"while parsing a block (mapping|collection)",
        r"expected <block end>, but found '(?P<found>[\]}])'",
        lambda m, c: (
            f"a '{m['found']}' that closes nothing: remove it, "
            f"or open it with '{'[' if m['found'] == ']' else '{'}'"
        ),
        False,
    ),
    (
        r"while parsing a block (mapping|collection)",
        r"expected <block end>, but found '-'",
        lambda m, c: (
            "a list entry ('- ') among the keys of the block that starts at "
            f"{_at(c)}: indent the list under the key it belongs to"
        ),
        False,
    ),
    (
        r"while parsing a block (mapping|collection)",
        r"expected <block end>, but found",
        lambda m, c: (
            "this line is indented differently from the entries of the block that "
            f"starts at {_at(c)}: indent it as they are"
        ),
        False,
    ),
    (
        r"expected a single document in the stream",
        r"but found another document",
        lambda m, c: (
            f"a second document ('---') starts here: {m['document']} holds one; "
            "remove the '---' line or what follows it"
        ),
        False,
    ),
    (
        "",
        r"found incompatible YAML document",
        lambda m, c: "only YAML 1.x is read: remove the '%YAML' line or make it '%YAML 1.1'",
        False,
    ),
    (
        "",
        r"expected '<document start>', but found",
        lambda m, c: (
            "a line that starts with '%' is a YAML directive: put that text in "
            "quotes, or end the directives with a '---' line"
        ),
        False,
    ),
    (
        r"while (parsing|scanning) a tag",
        r"",
        lambda m, c: "a value that starts with '!' is a YAML tag: put the value in quotes",
        True,
    ),
    (
        r"while scanning a block scalar",
        r"",
        lambda m, c: (
            "after '|' or '>' only '+', '-' or a digit may follow on the same "
            "line: move the text to the next line, indented"
        ),
        False,
    ),
)


class TooDeep(yaml.YAMLError):
    """Lists and maps nested too deeply for the YAML reader, which recurses once per level
    (Python's recursion limit would end it with a ``RecursionError``)."""


def compose(text: str) -> yaml.Node | None:
    """The YAML node tree of ``text`` (the safe loader), or None for an empty document.

    Raises:
        yaml.YAMLError: a syntax error; :class:`TooDeep` for nesting the reader cannot
            follow (``"[" * 5000``), which would otherwise end in a ``RecursionError``.
    """
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except RecursionError:
        raise TooDeep() from None


def _too_deep(text: str, document: str) -> SyntaxProblem:
    """Where ``[`` and ``{`` first nest more than ``_DEEP`` levels, if they do."""
    depth, line, column = 0, 1, 0
    for char in text:
        column += 1
        if char == "\n":
            line, column = line + 1, 0
        elif char in "[{":
            depth += 1
            if depth > _DEEP:
                break
        elif char in "]}":
            depth = max(0, depth - 1)
    else:
        line = column = 0
    levels = " (a partition, its queues and theirs)" if document == "a queues.yaml" else ""
    return SyntaxProblem(
        f"lists or maps are nested too deeply to read here: {document} needs a few "
        f"levels{levels}; look for unbalanced '[' or '{{'",
        line,
        column,
    )


_DEEP: Final = 100  # levels of flow nesting reported as the place (the reader fails later)


def explain(exc: yaml.YAMLError, text: str, *, document: str = "a queues.yaml") -> SyntaxProblem:
    """``exc`` (raised reading ``text``) in plain words, at the place that needs the change;
    ``document`` names what the text is (``a scenario file``)."""
    if isinstance(exc, TooDeep):
        return _too_deep(text, document)
    if isinstance(exc, yaml.reader.ReaderError):
        before = text[: exc.position]
        line, column = before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1
        code = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[0])
        return SyntaxProblem(
            f"the character U+{code:04X} is not allowed in YAML: remove it", line, column
        )
    if not isinstance(exc, yaml.MarkedYAMLError):
        return SyntaxProblem("the file cannot be read as YAML")
    problem_mark, context_mark = _mark(exc.problem_mark), _mark(exc.context_mark)
    place = problem_mark or context_mark or (0, 0)
    for context, problem, build, at_context in _RULES:
        c = re.fullmatch(context, exc.context or "") if context else None
        if context and c is None:
            continue
        p = re.match(problem, exc.problem or "")
        if p is None:
            continue
        groups = {**(c.groupdict() if c else {}), **p.groupdict(), "document": document}
        if at_context and context_mark:
            return SyntaxProblem(build(groups, place), *context_mark)
        return SyntaxProblem(build(groups, context_mark or place), *place)
    return SyntaxProblem(
        "the text here cannot be read as YAML: check its indentation and quote values "
        "with special characters",
        *place,
    )


def _mark(mark: yaml.Mark | None) -> _Mark | None:
    return (mark.line + 1, mark.column + 1) if mark is not None else None
