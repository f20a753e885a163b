"""The package type-checks, and says what it hands around instead of `Any`.

mypy runs as `pyproject.toml` configures it (`[tool.mypy]`: strict on the
public modules, `check_untyped_defs` on the rest) on the version set this
venv holds, so the newest and the oldest pass each check against their own
libraries. Its cache lives in the venv: each set keeps its own.

`Any` in signatures is counted per 1,000 source lines: every parameter and
return annotation that holds `Any`, directly or through an alias defined with
it. `python tests/unit/test_type_check.py` prints the figure and the files
with the most.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import journal_bridge

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(journal_bridge.__file__).resolve().parent
# `Any` in parameter and return annotations, per 1,000 lines of the package.
MAX_ANY_PER_1000_LINES = 10.0


def test_mypy_finds_no_errors() -> None:
    cache = Path(sys.prefix) / ".mypy_cache"
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(cache), "--no-color-output"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _mentions(node: ast.AST | None, names: set[str]) -> bool:
    """Whether an annotation holds one of `names` (as a name, an attribute or in a string)."""
    if node is None:
        return False
    for inner in ast.walk(node):
        if isinstance(inner, ast.Name) and inner.id in names:
            return True
        if isinstance(inner, ast.Attribute) and inner.attr in names:
            return True
        if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
            try:
                parsed = ast.parse(inner.value, mode="eval")
            except SyntaxError:
                continue
            if _mentions(parsed, names):
                return True
    return False


def _aliases_of_any(trees: list[ast.Module]) -> set[str]:
    """The names the package binds at module level to a type holding `Any`, and those
    bound to such a name in turn: an alias hides no `Any` from the count."""
    names = {"Any"}
    assignments: list[tuple[str, ast.AST]] = []
    for tree in trees:
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                assignments.append((node.targets[0].id, node.value))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                assignments.append((node.target.id, node.value))
    grew = True
    while grew:
        grew = False
        for name, value in assignments:
            if name not in names and _mentions(value, names):
                names.add(name)
                grew = True
    return names


def _annotations(tree: ast.Module) -> Iterator[ast.expr | None]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            arguments = node.args
            parameters = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
            parameters += [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
            yield from (parameter.annotation for parameter in parameters)
            yield node.returns


def any_in_signatures(package: Path = PACKAGE) -> tuple[int, int, dict[str, int]]:
    """(annotations holding `Any`, source lines, per file) of every module under `package`."""
    sources = {path: path.read_text("utf-8") for path in sorted(package.rglob("*.py"))}
    trees = {path: ast.parse(text, str(path)) for path, text in sources.items()}
    names = _aliases_of_any(list(trees.values()))
    per_file = {
        str(path.relative_to(package.parent)): sum(_mentions(a, names) for a in _annotations(tree))
        for path, tree in trees.items()
    }
    lines = sum(len(text.splitlines()) for text in sources.values())
    return sum(per_file.values()), lines, per_file


def test_any_in_signatures_is_rare() -> None:
    count, lines, per_file = any_in_signatures()
    figure = count * 1000 / lines
    worst = sorted(per_file.items(), key=lambda item: -item[1])[:5]
    assert figure <= MAX_ANY_PER_1000_LINES, f"{figure:.1f} per 1,000 lines ({count} in {lines}); most in {worst}"


def test_the_count_sees_any_directly_in_strings_and_through_aliases(tmp_path: Path) -> None:
    (tmp_path / "probe.py").write_text(
        "from typing import Any\n"
        "import typing\n"
        "Json = dict[str, Any]\n"
        "Rows = list[Json]\n"
        "def a(x: Any, y: 'list[Any]', z: typing.Any) -> Rows: ...\n"
        "async def b(*args: object, **kwargs: Json) -> int: ...\n"
        "def c(x: dict[str, object]) -> None: ...\n"
    )
    count, lines, _ = any_in_signatures(tmp_path)
    assert (count, lines) == (5, 7)


if __name__ == "__main__":
    count, lines, per_file = any_in_signatures()
    print(f"{count} annotations with Any in {lines} lines: {count * 1000 / lines:.1f} per 1,000")
    for name, found in sorted(per_file.items(), key=lambda item: -item[1])[:15]:
        print(f"{found:4d}  {name}")
