"""mkdocs hooks: README.md (outside docs/) becomes the site's home page, and links to files of the
repository that are not pages (config/default.toml, lua/README.md, source files) become plain
text on the site, since the site has no copy of them. On GitHub every link works as written;
tests/unit/test_docs_links.py checks them there."""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
_LINK = re.compile(r"(!?)\[((?:[^\]\[]|\[[^\]]*\])*)\]\(([^)\s]+)\)")


def on_files(files: Files, config: Any) -> Files:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    files.append(File.generated(config, "index.md", content=readme))
    return files


def _site_link(match: re.Match[str], page_dir: str) -> str:
    bang, text, target = match.groups()
    if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
        return match.group(0)
    path, _, fragment = target.partition("#")
    # where the link points, relative to the repository root
    repo_path = posixpath.normpath(posixpath.join(page_dir, path))
    if repo_path == "README.md":
        return f"{bang}[{text}](index.md{'#' + fragment if fragment else ''})"
    if repo_path.startswith("docs/"):
        inside = posixpath.relpath(repo_path, "docs")
        return f"{bang}[{text}]({inside}{'#' + fragment if fragment else ''})"
    return text  # a file of the repository that the site does not carry


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    src = page.file.src_uri
    page_dir = "" if src == "index.md" else posixpath.dirname("docs/" + src)
    out, fenced = [], False
    for line in markdown.splitlines(keepends=True):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        out.append(line if fenced else _LINK.sub(lambda m: _site_link(m, page_dir), line))
    return "".join(out)
