"""BENCHMARKS.md is what `python benchmarks/page.py` writes from benchmarks/results/: nothing trained or timed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _page():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import page

    return page


@pytest.mark.slow     # about 20 s on 2 cores: the pages' bootstrap intervals, computed again from the results
def test_benchmarks_md_is_written_from_the_results():
    diff = _page().check()
    assert not diff, ("BENCHMARKS.md is not what `python benchmarks/page.py` writes from benchmarks/results/; run "
                      "it:\n" + "\n".join(diff[:60]))


def test_the_page_opens_with_the_headline_table_and_repeats_no_section_title():
    page = _page()
    text = (ROOT / "BENCHMARKS.md").read_text()
    first = next(line for line in text.splitlines()[1:] if line.startswith(("|", "## ")))
    assert first.startswith("| claim | workload | same-run ratio | machine | section |")
    titles = page.titles(text)
    assert len(titles) == len(set(titles)), sorted(t for t in titles if titles.count(t) > 1)
    anchors = {page.anchor(t) for t in titles}
    for line in text.splitlines():
        if line.startswith("| ") and "](#" in line:
            assert line.rsplit("](#", 1)[1].split(")")[0] in anchors, line
