"""The benchmarks stay readable: one script per question, listed in their README, short functions, one-way imports.

`benchmarks/` holds scripts only; what they share with each other and with
their tests lives in `tests/harness/bench/`. Benchmarks may import the test
harness; no test imports a benchmark, so a script can change its output or
its options without breaking a test.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
SHARED = ROOT / "tests" / "harness" / "bench"
LONGEST_FUNCTION = 80


def functions_longer_than(path: Path, limit: int, root: Path = ROOT) -> list[str]:
    """`name (lines)` of every function or method in `path` longer than `limit` lines, decorators left out."""
    tree = ast.parse(path.read_text("utf-8"), filename=str(path))
    return [
        f"{path.relative_to(root).as_posix()}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno + 1 > limit
    ]


def imported_modules(path: Path) -> set[str]:
    """Every module `path` imports, absolute (`from . import x` is left out: it stays in its package)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def is_script(path: Path) -> bool:
    """Whether a module runs as a program (`python -m benchmarks.NAME`)."""
    tree = ast.parse(path.read_text("utf-8"), filename=str(path))
    return any(
        isinstance(node, ast.If) and "__name__" in ast.unparse(node.test) and "__main__" in ast.unparse(node.test)
        for node in tree.body
    )


def test_a_long_function_is_reported(tmp_path):
    module = tmp_path / "long.py"
    module.write_text("def short():\n    pass\n\n\nclass C:\n    async def long(self):\n" + "        x = 1\n" * 5)
    assert functions_longer_than(module, 5, tmp_path) == ["long.py:6 long (6 lines)"]


def test_an_import_of_the_benchmarks_is_found_however_written(tmp_path):
    module = tmp_path / "test_x.py"
    module.write_text("import benchmarks.bridge\nfrom benchmarks import store\nfrom . import benchmarks\nimport os\n")
    assert imported_modules(module) == {"benchmarks.bridge", "benchmarks", "benchmarks.store", "os"}


@pytest.mark.parametrize("folder", [BENCHMARKS, SHARED], ids=["benchmarks", "tests/harness/bench"])
def test_no_benchmark_function_is_longer_than_80_lines(folder):
    long = [entry for path in sorted(folder.rglob("*.py")) for entry in functions_longer_than(path, LONGEST_FUNCTION)]
    assert not long, "split these: " + "; ".join(long)


def test_no_test_imports_the_benchmarks():
    importing = [
        path.relative_to(ROOT).as_posix()
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if any(name == "benchmarks" or name.startswith("benchmarks.") for name in imported_modules(path))
    ]
    assert not importing, f"move what these use from benchmarks/ into tests/harness/bench/: {importing}"


def test_every_benchmark_module_is_a_script_its_readme_names():
    readme = (BENCHMARKS / "README.md").read_text("utf-8")
    modules = sorted(path for path in BENCHMARKS.glob("*.py") if path.name != "__init__.py")
    assert modules
    helpers = [path.name for path in modules if not is_script(path)]
    assert not helpers, f"not scripts (shared code goes to tests/harness/bench/): {helpers}"
    unnamed = [path.name for path in modules if f"`{path.name}`" not in readme]
    assert not unnamed, f"benchmarks/README.md does not say what these answer: {unnamed}"
