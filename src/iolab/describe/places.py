"""Where things are in a suite's YAML text: the line of each place (``("workloads", 2, "bs")``), a
place as the user spells it (``workloads[2].bs``), and the document read with its limits (a key
given twice, nesting too deep, too many values), so every error names file, line and place.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import yaml

from ..errors import SuiteError


def yaml_lines(text: str) -> dict[tuple[Any, ...], int]:
    """Map each place in the YAML document (``("workloads", 2, "bs")``) to its line number."""
    try:
        root = yaml.compose(text)
    except (yaml.YAMLError, RecursionError):
        return {}
    return _node_lines(root)[0] if root is not None else {}


def _node_lines(root: yaml.Node) -> tuple[dict[tuple[Any, ...], int], list[tuple[tuple[Any, ...], int, int]]]:
    """The line of each place under ``root``, and the keys a mapping gives twice: (place, first line,
    second line). A node an alias repeats is walked once (``&a``/``*a`` can repeat one node
    exponentially often)."""
    lines: dict[tuple[Any, ...], int] = {}
    twice: list[tuple[tuple[Any, ...], int, int]] = []
    seen: set[int] = set()
    todo: list[tuple[yaml.Node, tuple[Any, ...]]] = [(root, ())]
    while todo:  # iterative: a deeply nested document must not exhaust Python's stack here
        node, path = todo.pop()
        lines.setdefault(path, node.start_mark.line + 1)
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[Any, int] = {}
            for key, value in node.value:
                line = key.start_mark.line + 1
                if isinstance(key, yaml.ScalarNode) and key.value in first:
                    twice.append(((*path, key.value), first[key.value], line))
                first.setdefault(key.value if isinstance(key, yaml.ScalarNode) else id(key), line)
                lines.setdefault((*path, key.value), line)
                todo.append((value, (*path, key.value)))
        elif isinstance(node, yaml.SequenceNode):
            todo.extend((item, (*path, i)) for i, item in enumerate(node.value))
    return lines, twice


def place(loc: Sequence[Any], msg: str) -> tuple[str, tuple[Any, ...]]:
    """Turn pydantic's location plus our ``[2].bs: ...`` message prefix into ``workloads[2].bs``."""
    path = [p for p in loc if p not in ("str", "TargetModel")]
    match = re.match(r"^((?:\[\d+\]|\.?[A-Za-z_][A-Za-z0-9_]*)+): (.*)$", msg, re.S)
    if match and (match.group(1).startswith("[") or path[-1:] in (["defaults"], ["tune"], ["precondition"],
                                                                   ["observe"], ["tiers"])):
        for part in re.findall(r"\[(\d+)\]|([A-Za-z_][A-Za-z0-9_]*)", match.group(1)):
            path.append(int(part[0]) if part[0] else part[1])
        msg = match.group(2)
    text = "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p)) for i, p in enumerate(path))
    return text, tuple(path)


def parse_yaml(text: str, source: str) -> Any:
    """The YAML document in ``text``. Raises ``SuiteError`` naming the line for invalid YAML, a key
    given twice in one mapping (YAML's loaders would keep the last silently), or nesting too deep to
    be a suite."""
    depth, line = _flow_depth(text)
    if depth > MAX_DEPTH:
        raise _too_deep(source, line)
    loader = None
    try:
        loader = yaml.SafeLoader(text)
        root = loader.get_single_node()
        if root is None:
            return None
        lines, twice = _node_lines(root)
        if twice:
            path, first, second = twice[0]
            where, _ = place(path, "")
            raise SuiteError(f"{source}:{second}: {where}: given twice (lines {first} and {second})",
                             hint="give each key once; YAML keeps only the last")
        if len(lines) > MAX_PLACES:
            raise SuiteError(f"{source}: {len(lines)} values; a suite has at most {MAX_PLACES}")
        return loader.construct_document(root)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else text.count("\n", 0, getattr(exc, "position", 0)) + 1
        problem = getattr(exc, "problem", None) or getattr(exc, "reason", None) or str(exc).split("\n")[0]
        raise SuiteError(f"{source}:{line}: not valid YAML: {problem}") from None
    except RecursionError:
        raise _too_deep(source, _flow_depth(text)[1]) from None
    finally:
        if loader is not None:
            loader.dispose()


def _flow_depth(text: str) -> tuple[int, int]:
    """How deep ``[`` and ``{`` nest outside quotes and comments, and the line where that depth is first
    reached. A cheap look before parsing: PyYAML's scanner slows down quadratically with the depth."""
    depth = deepest = at = 0
    quote = ""
    for i, char in enumerate(text):
        if quote:
            if char == quote or char == "\n":
                quote = ""
        elif char in "'\"#":
            quote = "\n" if char == "#" else char
        elif char in "[{":
            depth += 1
            if depth > deepest:
                deepest, at = depth, i
        elif char in "]}":
            depth -= 1
    return deepest, text.count("\n", 0, at) + 1


def _too_deep(source: str, line: int) -> SuiteError:
    return SuiteError(f"{source}:{line}: nested too deeply to be a suite",
                      hint="a suite nests a few levels (workloads, a list of options, a list of values)")

#: The most values a suite file may hold and the deepest its ``[``/``{`` may nest: well above any real
#: suite, far below what would make reading it slow.
MAX_PLACES = 100_000

MAX_DEPTH = 32


