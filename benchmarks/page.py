"""BENCHMARKS.md, written from benchmarks/results/ and nothing else.

    python benchmarks/page.py            # write BENCHMARKS.md
    python benchmarks/page.py --check    # exit 1 if BENCHMARKS.md is not what it would write

The page opens with one table of headline claims (each script's `claims`), then one
section per script (its `section`), in the order of `ORDER` below: the comparisons with
other libraries first, then the learning results; a study (a folder of runs under
benchmarks/results/<study>/, with its README.md) enters as one summary table. Every
figure on the page is computed from a results file; nothing is written by hand.
A script that cannot be imported, or lacks the protocol, is named on the page and skipped;
one with no results yet is listed at the end.

The page's bootstrap intervals (several hundred, about half a second each) are kept in
benchmarks/page_intervals.json, by what determines each (its scores, resamples, seed, the
bootstrap's code and rliable's, arch's and numpy's versions: `coplay.eval.stats.remembered`),
and read back while they hold; a changed result or bootstrap computes its interval anew.
The page writes the file with the intervals it used; `--check` checks the page, not this cache
(another rliable, arch or numpy reads none of it and computes them all, for the same page)."""

from __future__ import annotations

import argparse
import difflib
import importlib
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from _common import ROOT, load  # noqa: E402

from coplay.eval.stats import Remembered, remembered  # noqa: E402

PAGE = ROOT / "BENCHMARKS.md"
INTERVALS = HERE / "page_intervals.json"

# (script, part): part None is the script's RESULTS, section and claims; a part "x" is its X, x_section
# (and load_x, where given), e.g. "study": STUDY and study_section.
ORDER: list[tuple[str, str | None]] = [
    # beside other libraries, the largest and most-asked first
    ("env_throughput", None),
    ("social_throughput", None),
    ("adapter_overhead", None),
    ("host_envs", None),
    ("train_throughput", None),
    ("q_throughput", None),
    ("happo_harl", None),
    ("social_ippo", None),
    ("jaxmarl_tables", None),
    ("rware_mava", None),
    ("mo_front", None),
    ("beach_native", None),
    ("cfr", None),
    ("selfplay", None),
    ("selfplay_paired", None),
    ("offline_speed", None),
    ("ceiling", None),
    ("compile_levels", None),
    # learning results
    ("fidelity_curves", None),
    ("momaland_envs", None),
    ("offline_matrix", None),
    ("offline_table", None),
    ("offline_greedy", None),
    ("offline_table", "scaling"),
    ("offline_table", "study"),
    ("grpo_text", None),
    ("grpo_text", "study"),
    ("grpo_estimators", None),
    ("grpo_gigpo", None),
    ("grpo_roles", None),
    ("grpo_roles", "study"),
    ("grpo_tic_tac_toe", None),
    ("lm_smollm2", None),
    ("lm_smollm2_curves", None),
    ("lm_smollm2_format", None),
    ("lm_memory", None),
    ("lm_tiny_kuhn", None),
    ("lm_tournament", None),
    ("textarena_games", None),
    ("lm_textarena", None),
    ("q_foraging", None),
    ("social_dynamics", None),
    ("social_punishment", None),
    ("social_learning", None),
    ("shapley_teams", None),
    ("happo_compare", None),
    ("minority_attack", None),
    ("cheap_talk", None),
]



def anchor(title: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", title.strip().lower())
    return text.replace(" ", "-")


def titles(text: str) -> list[str]:
    return [line[3:].strip() for line in text.splitlines() if line.startswith("## ")]


def _part(name: str, part: str | None) -> tuple[str | None, list[dict], str | None]:
    """(section text, claims, why skipped) of one entry of ORDER."""
    try:
        mod = importlib.import_module(name)
    except Exception as e:  # noqa: BLE001 - a script that cannot be imported is named on the page
        return None, [], f"`benchmarks/{name}.py` could not be imported ({type(e).__name__}: {e})"
    results_attr, section_attr = ("RESULTS", "section") if part is None else (part.upper(), f"{part}_section")
    if not hasattr(mod, results_attr) or not callable(getattr(mod, section_attr, None)):
        return None, [], (f"`benchmarks/{name}.py` does not follow the page's protocol yet "
                          f"(`{results_attr}` and `{section_attr}(data)`)")
    loader = getattr(mod, "load_results" if part is None else f"load_{part}", None)
    data = loader() if callable(loader) else load(getattr(mod, results_attr))
    if data is None:
        return None, [], None
    text = getattr(mod, section_attr)(data).strip()
    found = titles(text)
    if not text.startswith("## ") or not found:
        raise ValueError(f"benchmarks/{name}.py: its section must start with '## <title>'")
    claims = []
    if part is None and callable(getattr(mod, "claims", None)):
        for c in mod.claims(data):
            missing = {"claim", "workload", "ratio", "machine"} - set(c)
            if missing:
                raise ValueError(f"benchmarks/{name}.py: a claim lacks {sorted(missing)}")
            title = c.get("section", found[0])
            if title not in found:
                raise ValueError(f"benchmarks/{name}.py: a claim links to {title!r}, not a section it writes")
            claims.append({**c, "section": title})
    return text, claims, None


def render(memo: Remembered | None = None) -> str:
    """The whole page; with `memo`, its intervals are read from and added to `memo`."""
    if memo is None:
        return _render()
    with remembered(memo):
        return _render()


def _kept_intervals() -> Remembered:
    """The intervals kept in INTERVALS (none where the file is missing or unreadable)."""
    try:
        intervals = json.loads(INTERVALS.read_text())
    except (OSError, ValueError):
        intervals = {}
    return Remembered(intervals if isinstance(intervals, dict) else {})


def _intervals_text(memo: Remembered) -> str:
    return json.dumps({k: memo.intervals[k] for k in sorted(memo.used)}, indent=0) + "\n"


def _render() -> str:
    sections, claims, skipped, empty = [], [], [], []
    for name, part in ORDER:
        text, found, why = _part(name, part)
        if why:
            skipped.append(why)
        elif text is None:
            empty.append(f"`benchmarks/{name}.py`" + (" (its study)" if part else ""))
        else:
            sections.append(text)
            claims += found
    body = "\n\n".join(sections)
    seen: dict[str, int] = {}
    for t in titles(body):
        seen[t] = seen.get(t, 0) + 1
    repeated = [t for t, n in seen.items() if n > 1]
    if repeated:
        raise ValueError(f"repeated section titles: {repeated}")
    lines = ["# coplay benchmarks", "",
             "Written by `python benchmarks/page.py` from the results files in `benchmarks/results/`; do not edit "
             "it by hand. [benchmarks/README.md](benchmarks/README.md) says which script backs each section, its "
             "command and how long it runs. A ratio is given only where both sides ran in the same run, on the same "
             "budget, timed in alternation; where a results file cannot support one, the row says what rerun it "
             "needs.", "",
             "| claim | workload | same-run ratio | machine | section |", "|---|---|---|---|---|"]
    for c in claims:
        lines.append(f"| {c['claim']} | {c['workload']} | {c['ratio']} | {c['machine']} | "
                     f"[{c['section']}](#{anchor(c['section'])}) |")
    if skipped:
        lines += ["", *[f"> Not on this page: {why}." for why in skipped]]
    lines += ["", body]
    if empty:
        lines += ["", "## Scripts without results yet", "",
                  "These scripts have no results file in `benchmarks/results/`, so no section: "
                  + ", ".join(empty) + "."]
    return "\n".join(lines).rstrip() + "\n"


def write() -> None:
    from coplay.experiment.checkpoint import atomic_write

    memo = _kept_intervals()
    text = render(memo)
    atomic_write(INTERVALS, _intervals_text(memo).encode())
    atomic_write(PAGE, text.encode())   # a crash while writing leaves the last good page


def check(memo: Remembered | None = None) -> list[str]:
    """The differences between BENCHMARKS.md and what `write` writes (empty: none). `memo`: the
    kept intervals to read, by default INTERVALS's; the caller may check the ones read back
    (`memo.read`) against a fresh bootstrap. INTERVALS itself is not checked: it is a cache,
    and another rliable, arch or numpy than the one that wrote it (a fresh install) reads none
    of it and computes every interval, which is slower and must give the same page."""
    memo = _kept_intervals() if memo is None else memo
    want = render(memo)
    have = PAGE.read_text() if PAGE.exists() else ""
    if want == have:
        return []
    return list(difflib.unified_diff(have.splitlines(), want.splitlines(), "BENCHMARKS.md", "page.py", lineterm="",
                                     n=1))


def stale_intervals(memo: Remembered) -> bool:
    """INTERVALS does not hold exactly the intervals a `render` with `memo` used."""
    return (INTERVALS.read_text() if INTERVALS.exists() else "") != _intervals_text(memo)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if BENCHMARKS.md differs from what would be written")
    args = ap.parse_args()
    if args.check:
        memo = _kept_intervals()
        diff = check(memo)
        if diff:
            print("\n".join(diff[:80]))
            print(f"\nBENCHMARKS.md is not what benchmarks/page.py writes ({len(diff)} diff lines); run "
                  "`python benchmarks/page.py`.", file=sys.stderr)
            sys.exit(1)
        stale = (f" {INTERVALS.relative_to(ROOT)}, a cache, is not what the page used now; `python benchmarks/page.py` "
                 "writes it again.") if stale_intervals(memo) else ""
        print("BENCHMARKS.md is up to date." + stale)
        return
    write()
    print(f"wrote {PAGE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
