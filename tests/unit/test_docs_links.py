"""The Markdown docs hold together: every relative link resolves, every project path they name exists, the README stays short.

A link to a file must name one that exists; a link with `#anchor` must name a
heading of its target (GitHub's slugs). Links inside code are not links.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest


def _root() -> Path:
    for directory in Path(__file__).resolve().parents:
        if (directory / "pyproject.toml").is_file():
            return directory
    raise AssertionError("no pyproject.toml above the tests")


ROOT = _root()
README_MAX_LINES = 150

_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"`[^`]*`")
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def markdown_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "ARCHITECTURE.md", ROOT / "benchmarks" / "README.md"]
    return [path for path in files if path.is_file()] + sorted((ROOT / "docs").glob("*.md"))


def outside_fences(text: str) -> list[str]:
    """The lines of `text`, those of fenced code blocks (and the fences) blank."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            lines.append("")
        else:
            lines.append("" if fenced else line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a file's headings; a repeated heading's get -1, -2, ..."""
    seen: dict[str, int] = {}
    for line in outside_fences(path.read_text("utf-8")):
        match = _HEADING.match(line)
        if match is not None:
            base = slug(match.group(1))
            seen[base] = seen.get(base, 0) + 1
    return {base if n == 0 else f"{base}-{n}" for base, count in seen.items() for n in range(count)}


def links(path: Path) -> list[str]:
    """The targets of the file's links, leaving out what sits in code."""
    text = _CODE_SPAN.sub("", "\n".join(outside_fences(path.read_text("utf-8"))))
    return _LINK.findall(text)


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    """The relative links of `path` that name no file under `root`, or no heading of it."""
    broken = []
    for target in links(path):
        if _SCHEME.match(target) or target.startswith("//"):
            continue
        file_part, _, anchor = target.partition("#")
        destination = (path.parent / file_part).resolve() if file_part else path
        if root not in destination.parents:
            broken.append(f"{target}: outside the repository")
        elif not destination.exists():
            broken.append(f"{target}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{target}: no heading #{anchor} in {destination.relative_to(root).as_posix()}")
    return broken


def test_slugs_follow_github():
    assert slug("1. Keep deer-flow's own app, with the journal") == "1-keep-deer-flows-own-app-with-the-journal"
    assert slug("Summarization per assistant (bundled agent)") == "summarization-per-assistant-bundled-agent"
    assert slug("The `history.js` module") == "the-historyjs-module"


def test_a_broken_link_or_anchor_is_reported(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# Title\n\n### Settings\n\n```sh\n# not a heading\n```\n")
    page = tmp_path / "docs" / "page.md"
    page.write_text(
        "[ok](../README.md#settings) [gone](missing.md) [no anchor](../README.md#not-a-heading)\n"
        "[outside](../../elsewhere.md) [web](https://example.com/x.md) `[code](x.md)`\n"
        "```\n[fenced](y.md)\n```\n"
    )
    assert broken_links(page, tmp_path) == [
        "missing.md: no such file",
        "../README.md#not-a-heading: no heading #not-a-heading in README.md",
        "../../elsewhere.md: outside the repository",
    ]


def test_there_are_docs_to_check():
    names = {path.relative_to(ROOT).as_posix() for path in markdown_files()}
    assert {"README.md", "CONTRIBUTING.md", "ARCHITECTURE.md"} <= names
    assert any(name.startswith("docs/") for name in names)


@pytest.mark.parametrize("path", markdown_files(), ids=lambda path: path.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(path: Path):
    broken = broken_links(path)
    assert not broken, f"{path.relative_to(ROOT).as_posix()}: " + "; ".join(broken)


def test_the_readme_stays_short():
    lines = (ROOT / "README.md").read_text("utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move detail into docs/"


# A project path the docs name in code (`tests/e2e/test_auth.py`), so a move shows.
_PROJECT_PATH = re.compile(r"`((?:tests|benchmarks|journal_bridge|graphs|docs|constraints|\.ci)/[\w./-]*\w)`")


def missing_paths(path: Path, root: Path = ROOT) -> list[str]:
    """The project paths named in `path`'s code spans and blocks that do not exist under `root`."""
    return [name for name in _PROJECT_PATH.findall(path.read_text("utf-8")) if not (root / name).exists()]


def test_a_moved_path_is_reported(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "here.py").write_text("")
    page = tmp_path / "page.md"
    page.write_text("`tests/here.py` and `tests/gone.py`, `python3 tasks.py test`\n")
    assert missing_paths(page, tmp_path) == ["tests/gone.py"]


@pytest.mark.parametrize("path", markdown_files(), ids=lambda path: path.relative_to(ROOT).as_posix())
def test_every_project_path_named_exists(path: Path):
    missing = missing_paths(path)
    assert not missing, f"{path.relative_to(ROOT).as_posix()} names paths that do not exist: {missing}"
