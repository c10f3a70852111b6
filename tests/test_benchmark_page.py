"""BENCHMARKS.md is what `python benchmarks/page.py` writes from benchmarks/results/: nothing trained or timed."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _page():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import page

    return page


def test_benchmarks_md_is_written_from_the_results():
    # The page's intervals are read from benchmarks/page_intervals.json where their inputs, the
    # bootstrap's code and rliable's, arch's and numpy's versions are unchanged; otherwise (a fresh
    # install of other versions) they are all computed again, about 80 s on 2 cores. Three of those
    # read back are computed again here, and must be the kept ones to the bit.
    page = _page()
    memo = page._kept_intervals()
    diff = page.check(memo)
    assert not diff, ("BENCHMARKS.md is not what `python benchmarks/page.py` writes from benchmarks/results/; run "
                      "it:\n" + "\n".join(diff[:60]))
    from coplay.eval.stats import iqm_ci

    read = sorted(memo.read, key=lambda r: memo.key(*r))
    for scores, reps, confidence, seed in read[:: max(1, len(read) // 3)][:3]:
        kept = memo.intervals[memo.key(scores, reps, confidence, seed)]
        fresh = iqm_ci(scores, reps, confidence, seed)
        assert kept == [[e.low for e in fresh], [e.high for e in fresh]], (scores, kept, fresh)


def test_a_kept_interval_is_read_back_only_for_the_same_scores_and_bootstrap():
    from coplay.eval.stats import Remembered, iqm_ci, remembered

    scores = np.array([[1.0, 4.0], [2.0, 5.0], [3.0, 9.0]])
    with remembered(Remembered({})) as memo:
        first = iqm_ci(scores, reps=500)
        assert len(memo.intervals) == 1 and not memo.read
        (key,) = memo.intervals
        memo.intervals[key] = [[-1.0, -2.0], [7.0, 8.0]]        # what a kept file says, read back as it is
        assert [(e.low, e.high) for e in iqm_ci(scores, reps=500)] == [(-1.0, 7.0), (-2.0, 8.0)]
        assert len(memo.read) == 1
        iqm_ci(scores + 1e-12, reps=500)                        # other scores, resamples, seed: computed
        iqm_ci(scores[:2], reps=500)
        iqm_ci(scores, reps=501)
        iqm_ci(scores, reps=500, seed=1)
        assert len(memo.intervals) == 5 and len(memo.read) == 1 and len(memo.used) == 5
    assert iqm_ci(scores, reps=500) == first                     # outside: always computed


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
