"""Every relative link and #anchor in README.md and docs/*.md resolves, as GitHub renders them;
and, where mkdocs is installed, the site builds with ``mkdocs build --strict`` (mkdocs.yml turns
broken links and anchors into warnings, which --strict makes errors)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_HTML_ID = re.compile(r"""<a\s+(?:id|name)=["']([^"']+)["']""")
# [text](target) and ![alt](target), target without spaces, optional "title"
_LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_INLINE_CODE = re.compile(r"`+[^`]*`+")


def _prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks, inline code blanked (links there are not links)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def github_slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation removed
    (letters, digits, '-' and '_' stay), each space a hyphen."""
    text = re.sub(r"<[^>]+>", "", heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link keeps its text
    text = text.replace("`", "").lower()
    kept = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in "-_ " or cat[0] in "LN" or cat == "Mn":
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Heading slugs (with GitHub's -1, -2 suffixes for repeats) and explicit <a id> anchors."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    text = page.read_text(encoding="utf-8")
    for line in _prose_lines(text):
        found.update(_HTML_ID.findall(line))
        match = _HEADING.match(line)
        if match:
            slug = github_slug(match.group(2))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def links(page: Path) -> list[str]:
    out = []
    for line in _prose_lines(page.read_text(encoding="utf-8")):
        out.extend(_LINK.findall(_INLINE_CODE.sub("", line)))
    return out


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """What is wrong with each link of a page, named relative to root."""
    problems = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...
            continue
        path_part, _, fragment = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.exists():
            problems.append(f"{page.relative_to(root)}: {target}: no such file")
            continue
        if fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            problems.append(f"{page.relative_to(root)}: {target}: no such anchor")
    return problems


def test_github_slugs_follow_githubs_rules() -> None:
    assert github_slug("When Redis is in trouble") == "when-redis-is-in-trouble"
    assert github_slug("2026-11-26: what the key schema costs a new broker") == (
        "2026-11-26-what-the-key-schema-costs-a-new-broker"
    )
    assert github_slug("Operations kit: dashboard and alerts") == "operations-kit-dashboard-and-alerts"
    assert github_slug("Full runs with Java 4.9.8 (the last)") == "full-runs-with-java-498-the-last"
    assert github_slug("`namesrv events export`") == "namesrv-events-export"


def test_the_checker_sees_a_broken_anchor_and_a_missing_file(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[ok](#title) [bad](#nope) [gone](other.md)\n\n```\n[code](#x)\n```\n")
    assert broken_links(page, root=tmp_path) == [
        "page.md: #nope: no such anchor",
        "page.md: other.md: no such file",
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    assert broken_links(page) == []


def unclosed_fences(page: Path) -> list[int]:
    """Line numbers of code fences that open a block never closed, or close one with text after
    the fence (which Markdown reads as the start of another block, swallowing the page)."""
    problems, opened = [], 0
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        fence = re.match(r"^\s*(```|~~~)(.*)$", line)
        if not fence:
            continue
        if opened and fence.group(2).strip():
            problems.append(number)
        opened = 0 if opened else number
    return problems + ([opened] if opened else [])


def test_the_checker_sees_a_fence_with_text_and_one_never_closed(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# T\n\n```sh\nx\n``` text\n\nmore\n```toml\na = 1\n")
    assert unclosed_fences(page) == [5, 8]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_code_block_is_closed(page: Path) -> None:
    assert unclosed_fences(page) == []


def test_readme_stays_short() -> None:
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 300


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="mkdocs not installed (group docs)")
def test_the_site_builds_strict(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # Material's end-of-life banner
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert (tmp_path / "site" / "index.html").is_file()
