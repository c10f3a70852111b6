"""MkDocs hooks (mkdocs.yml): the repository's BENCHMARKS.md as the site's benchmark page.

The pages link to `../BENCHMARKS.md`, which is where the file is in the repository (so
the links work on a forge's file view too); the site has it as `BENCHMARKS.md` beside
them. Its own links to files of the repository outside docs/ (the benchmark scripts)
are checked to exist, as `mkdocs build --strict` checks every other link, and shown
as the path of the file."""

from __future__ import annotations

import logging
import re
from pathlib import Path

from mkdocs.structure.files import File

log = logging.getLogger("mkdocs.hooks.benchmarks")
ROOT = Path(__file__).resolve().parents[1]
PAGE = "BENCHMARKS.md"
LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


def on_files(files, config):
    files.append(File.generated(config, PAGE, content=(ROOT / PAGE).read_text()))
    return files


def _outside(match: re.Match) -> str:
    text, target = match.group(1), match.group(2)
    if re.match(r"^[a-z]+:|^#", target):
        return match.group(0)
    path = target.split("#", 1)[0]
    if not (ROOT / path).exists():
        log.warning(f"{PAGE} links to {target}, which is not in the repository")
    return f"{text} (`{path}`)" if text.strip("`") != path else f"`{path}`"


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri == PAGE:
        return LINK.sub(_outside, markdown)
    # ../BENCHMARKS.md from a page in docs/ is BENCHMARKS.md on the site (from docs/api/, ../BENCHMARKS.md).
    depth = page.file.src_uri.count("/")
    return markdown.replace("](" + "../" * (depth + 1) + PAGE, "](" + "../" * depth + PAGE)
