"""The project's own design document: every lint rule the code emits is in its catalogue with the
same source, and every citation of a design document in the code, README, manual and lint texts points to it."""

from __future__ import annotations

import ast
import re

from paths import ROOT

DESIGN = ROOT / "docs" / "design.md"


def _findings_in_lint() -> dict[str, set[str]]:
    """Rule id -> the sources the lint modules give it (the fifth argument of each ``Finding``): lint.py
    and the modules that hold a rule of its catalogue (power.py: P15)."""
    found: dict[str, set[str]] = {}
    nodes = [node for name in ("lint.py", "power.py")
             for node in ast.walk(ast.parse((ROOT / "src" / "iolab" / "check" / name).read_text()))]
    assert any(isinstance(n, ast.Constant) and n.value == "P15" for n in nodes)
    for node in nodes:
        if (isinstance(node, ast.Call) and len(node.args) >= 5 and isinstance(node.args[0], ast.Constant)
                and re.fullmatch(r"P\d+", str(node.args[0].value)) and isinstance(node.args[4], ast.Constant)):
            found.setdefault(node.args[0].value, set()).add(node.args[4].value)
    return found


def test_the_catalogue_lists_every_rule_with_its_sources():
    text = DESIGN.read_text()
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| (P\d+|FIO) \|.*$", text, re.M)}
    for rule, sources in _findings_in_lint().items():
        assert rule in rows, rule
        for source in sources:
            for part in source.replace("iolab docs/design.md, P1", "").split(";"):
                words = part.strip().replace(",", "").split()
                assert all(w.strip("()") in rows[rule].replace(",", "").replace("`", "") for w in words), \
                    (rule, part, rows[rule])
    assert {"P16", "FIO"} <= set(rows)
    for section in ("## 1. Data flow", "## 2. Methodology lint", "## 3. Safety", "## 4. Steady state"):
        assert section in text
    assert "20 %" in text and "10 %" in text and "last 5 rounds" in text


def test_every_citation_points_to_the_projects_design_document():
    cited = []
    pages = [p for p in (ROOT / "docs").rglob("*.md") if p != DESIGN]
    for path in [*(ROOT / "src").rglob("*.py"), ROOT / "README.md", *pages]:
        text = path.read_text()
        assert "DESIGN.md" not in text, path
        cited += [(path, m.group(1)) for m in re.finditer(r"docs/design\.md(?:, section (\d))?", text)]
    assert len(cited) >= 6
    headings = set(re.findall(r"^## (\d)\. ", DESIGN.read_text(), re.M))
    for path, section in cited:
        assert section is None or section in headings, (path, section)
