"""Data flows one way: no module imports from a layer above its own.

The layers, lowest first: model < host < mapping < store < projection <
delivery < capture < web < the public modules at the top of the package
(server, client, tee, tracking, cli, settings, `__init__`). A module may import
from its own layer and the ones below it. Every import counts: at module level,
inside functions, and under `TYPE_CHECKING`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import journal_bridge

PACKAGE = Path(journal_bridge.__file__).resolve().parent
LAYERS = ("model", "host", "mapping", "store", "projection", "delivery", "capture", "web")
TOP = len(LAYERS)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> int:
    """The layer of `journal_bridge.<...>`: its folder's place, or TOP for the public modules."""
    parts = module.split(".")
    if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir()):
        return LAYERS.index(parts[1])
    return TOP


def _imports(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, imported module) for every import of journal_bridge in `path`, relative ones resolved."""
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, base] if base else anchor)
            # `from journal_bridge import store` imports the module journal_bridge.store.
            found += [(node.lineno, base)]
            if base == "journal_bridge":
                found += [
                    (node.lineno, f"journal_bridge.{alias.name}")
                    for alias in node.names
                    if (PACKAGE / alias.name).is_dir() or (PACKAGE / f"{alias.name}.py").is_file()
                ]
    return [(line, name) for line, name in found if name.split(".")[0] == "journal_bridge"]


def _upward_imports() -> list[str]:
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        own = _layer(module)
        for line, imported in _imports(path, module):
            if imported == "journal_bridge":
                # The package itself: only its public modules re-export through it.
                if own < TOP:
                    upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {imported}")
            elif _layer(imported) > own:
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {imported}")
    return upward


def test_no_module_imports_from_a_layer_above_its_own():
    assert _upward_imports() == []


def test_the_layers_are_the_package_folders():
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert folders == set(LAYERS)


def test_the_check_sees_imports_inside_functions_and_under_type_checking(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from journal_bridge.web import routes\n"
        "def f():\n"
        "    import journal_bridge.store\n"
        "    from journal_bridge import delivery\n"
    )
    found = [name for _, name in _imports(probe, "journal_bridge.model.probe")]
    assert found == ["journal_bridge.web", "journal_bridge.store", "journal_bridge", "journal_bridge.delivery"]
    assert [_layer(name) for name in found[:2]] == [LAYERS.index("web"), LAYERS.index("store")]
