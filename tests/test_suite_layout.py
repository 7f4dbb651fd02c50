"""The suite's own layout: a test module shares through conftest (fixtures), support and
fuzzing (helpers), never by importing another test module, whose tests pytest would then
collect twice under two names and whose edits would break a neighbour."""

import ast

from support import ROOT


def test_no_test_module_imports_another():
    offenders = []
    for path in sorted((ROOT / "tests").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.name}: {name}" for name in names
                          if name.split(".")[0].startswith("test_") or name == "conftest"]
    assert offenders == []
