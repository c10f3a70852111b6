"""The examples of README.md and docs/ run as written.

Every fenced block of those pages is one of:

    ```python    run as a script of its own (fresh globals: it imports what it uses)
    ```bash      every line that starts with `coplay ` runs, in order; other lines
                 (pip, tensorboard, python -m pytest) are shown, not run
    ```text, ```console, ```yaml, ``` (no tag)   shown, not run

The blocks of one page run in order in one temporary directory, so a chain (train,
then record, then train offline, then fine-tune) runs whole and its parts must agree
with each other. `coplay` lines run in-process through `coplay.cli.main.main`, or as a
subprocess where the line sets environment variables (`XLA_FLAGS=... coplay train ...`).

An HTML comment right before a block's fence (invisible on the rendered page) says
what the test does differently, always with a reason:

    <!-- skip: REASON -->            the block is not run (a placeholder, a cluster, a GPU)
    <!-- requires: MODULE -->        not run unless MODULE imports (an extra that `dev` leaves out)
    <!-- test-budget: k=v ... -->    appended to each `coplay train` or `coplay solve` line
                                     (the last value of a key wins); allowed only in a block
                                     that states its full budget's time in words

A comment in a Python block that promises a figure is asserted:

    expr  # -> LITERAL          expr == LITERAL (a Python literal)
    expr  # about V ± T         |expr - V| <= T
    expr  # below V             expr < V         (and `# above V`: expr > V)

where `print(x)` checks x. A comment that says "about" a number in any other form
fails the test, so no promised figure goes unchecked.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import os
import re
import resource
import shlex
import subprocess
import sys
import time
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = {"python", "bash"}
SHOWN = {"text", "console", "yaml", "toml", ""}
MARKER = re.compile(r"^<!--\s*(skip|requires|test-budget):\s*(.*?)\s*-->$")
FENCE = re.compile(r"^```(\S*)\s*$")
# A block that is shortened by the test says how long its full budget takes.
TIME_WORDS = re.compile(r"\b(seconds?|minutes?|hours?)\b")
CHECK = re.compile(r"^#\s*(?:->\s*(?P<literal>.+)|about\s+(?P<about>\S+)\s*±\s*(?P<tol>\S+)"
                   r"|(?P<cmp>below|above)\s+(?P<bound>\S+))\s*$")
# A figure in a comment that is not a time ("about 40 seconds on 2 cores" is a time, and is not checked).
UNCHECKED_FIGURE = re.compile(r"(\b(about|approximately|roughly)\s+|≈\s*|~\s*)-?\d[\d.,]*"
                              r"(?!\d|[\d.,]*\s*(s|seconds?|minutes?|hours?)\b)")
# Pages whose examples take less than about 10 s on 2 cores; the others are marked slow (tests/conftest.py).
QUICK = {"environments.md", "reliability.md", "run-directory.md", "index.md"}


@dataclass
class Block:
    page: Path
    line: int            # the fence's line, 1-based
    lang: str
    text: str
    marks: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of `page`, with the markers on the lines right before each."""
    lines = page.read_text().splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        marks = {}
        j = i - 1
        while j >= 0 and (mm := MARKER.match(lines[j].strip())):
            marks[mm.group(1)] = mm.group(2)
            j -= 1
        end = next((k for k in range(i + 1, len(lines)) if lines[k].startswith("```")), None)
        assert end is not None, f"{page.name}:{i + 1}: a fence that is never closed"
        out.append(Block(page, i + 1, m.group(1), "\n".join(lines[i + 1:end]) + "\n", marks))
        i = end + 1
    return out


def cli_lines(block: Block) -> list[str]:
    """The `coplay ...` lines of a bash block (continuations joined, comments dropped),
    with an environment-variable prefix kept."""
    joined = block.text.replace("\\\n", " ")
    out = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        rest = words
        while rest and re.match(r"^[A-Z_][A-Z0-9_]*=", rest[0]):
            rest = rest[1:]
        if rest and rest[0] == "coplay":
            out.append(line)
    return out


# ----- conventions, for every page (cheap) ---------------------------------------------------------------------------


def test_every_block_follows_the_conventions():
    problems = []
    for page in PAGES:
        for b in blocks(page):
            if b.lang not in RUN | SHOWN:
                problems.append(f"{b.where}: block tagged {b.lang!r} (use python, bash, text, console or yaml)")
            if "skip" in b.marks and not b.marks["skip"]:
                problems.append(f"{b.where}: a skip without a reason")
            if "test-budget" in b.marks:
                if not TIME_WORDS.search(b.text):
                    problems.append(f"{b.where}: test-budget on a block that does not state its full budget's time")
                if not all("=" in w for w in b.marks["test-budget"].split()):
                    problems.append(f"{b.where}: test-budget takes key=value pairs")
            if b.lang == "bash":
                for line in b.text.splitlines():
                    comment = line.partition("#")[2]
                    if UNCHECKED_FIGURE.search(comment):
                        problems.append(f"{b.where}: a command's comment promises a figure the test cannot check: "
                                        f"{line.strip()!r}")
            if b.lang == "python":
                try:
                    _checked_source(b)
                except (AssertionError, SyntaxError) as e:
                    problems.append(f"{b.where}: {e}")
    assert problems == []


def test_the_readme_gives_the_test_command_ci_runs():
    readme = [b.text.strip() for b in blocks(ROOT / "README.md")]
    assert "python -m pytest -q" in readme


def test_the_readmes_links_resolve():
    """The README is read on a forge, outside the docs site that `mkdocs build --strict` checks."""
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", (ROOT / "README.md").read_text())
    missing = [t for t in targets if not re.match(r"^[a-z]+:", t) and not (ROOT / t).exists()]
    assert missing == []


# ----- running a page ------------------------------------------------------------------------------------------------


def _check(where: str, value, kind: str, *args) -> None:
    print(f"{where}: {value!r}")
    if kind == "literal":
        assert value == args[0], f"{where}: {value!r}, the page says {args[0]!r}"
    elif kind == "about":
        assert abs(value - args[0]) <= args[1], f"{where}: {value!r}, the page says about {args[0]} ± {args[1]}"
    elif kind == "below":
        assert value < args[0], f"{where}: {value!r}, the page says below {args[0]}"
    else:
        assert value > args[0], f"{where}: {value!r}, the page says above {args[0]}"


def _checked_source(block: Block) -> str:
    """The block's source with every figure-promising comment turned into a `_check` call."""
    src = block.text
    tree = ast.parse(src)
    comments = {tok.start[0]: tok.string for tok in tokenize.generate_tokens(io.StringIO(src).readline)
                if tok.type == tokenize.COMMENT}
    lines = src.splitlines()
    statements = {node.lineno: node for node in ast.walk(tree) if isinstance(node, ast.stmt)}
    for lineno, comment in comments.items():
        m = CHECK.match(comment)
        if m is None:
            assert not UNCHECKED_FIGURE.search(comment), \
                f"line {lineno}: comment {comment!r} promises a figure; write it '# about V ± T'"
            continue
        node = statements.get(lineno)
        assert isinstance(node, ast.Expr) and node.end_lineno == lineno, \
            f"line {lineno}: a checked comment must follow a one-line expression"
        value = node.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "print" \
                and len(value.args) == 1:
            value = value.args[0]
        expr = ast.get_source_segment(src, value)
        where = f"{block.where}+{lineno}"
        if m["literal"]:
            args = f"'literal', {m['literal']}"
            ast.literal_eval(m["literal"])
        elif m["about"]:
            args = f"'about', {float(m['about'])!r}, {float(m['tol'])!r}"
        else:
            args = f"{m['cmp']!r}, {float(m['bound'])!r}"
        indent = lines[lineno - 1][:node.col_offset]
        lines[lineno - 1] = f"{indent}_check({where!r}, ({expr}), {args})"
    return "\n".join(lines) + "\n"


def _run_python(block: Block) -> None:
    code = compile(_checked_source(block), block.where, "exec")
    namespace = {"__name__": "__main__", "_check": _check}
    exec(code, namespace)


def _run_cli(block: Block, line: str) -> None:
    from coplay.cli.main import main

    words = shlex.split(line, comments=True)
    env = {}
    while not words[0].startswith("coplay"):
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    argv = words[1:]
    if "test-budget" in block.marks and argv[0] in ("train", "solve"):
        argv += block.marks["test-budget"].split()
    print(f"$ coplay {' '.join(argv)}")
    if env:   # the variables must be set before JAX starts: a process of its own
        done = subprocess.run([sys.executable, "-m", "coplay.cli.main", *argv], capture_output=True, text=True,
                              env={**os.environ, **env}, timeout=600)
        print(done.stdout[-4000:])
        assert done.returncode == 0, f"{block.where}: {line!r} exited {done.returncode}:\n{done.stderr[-4000:]}"
        return
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            rc = main(argv)
    except SystemExit as e:   # argparse's own --help
        rc = e.code or 0
    print(out.getvalue()[-4000:])
    assert rc == 0, f"{block.where}: {line!r} exited {rc}:\n{out.getvalue()[-4000:]}"


@contextlib.contextmanager
def _timed(what: str):
    """Prints the wall and CPU seconds (this process's threads and its children) of what runs inside."""
    def cpu() -> float:
        return time.process_time() + resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime

    wall, used = time.perf_counter(), cpu()
    yield
    print(f"{what}: {time.perf_counter() - wall:.1f} s, {cpu() - used:.1f} CPU-s")


def _params():
    for page in PAGES:
        if not any(b.lang in RUN for b in blocks(page)):
            continue
        marks = [] if page.name in QUICK else [pytest.mark.slow]
        if any("coplay sweep" in b.text and "skip" not in b.marks for b in blocks(page)):
            marks.append(pytest.mark.xdist_group("ray"))   # with tests/test_sweep.py's local Ray instance
        yield pytest.param(page, id=str(page.relative_to(ROOT)), marks=marks)


@pytest.mark.parametrize("page", list(_params()))
def test_page_examples_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ran, skipped = 0, []
    for b in blocks(page):
        if b.lang not in RUN:
            continue
        if "skip" in b.marks:
            skipped.append(f"{b.where}: {b.marks['skip']}")
            continue
        if "requires" in b.marks and importlib.util.find_spec(b.marks["requires"]) is None:
            skipped.append(f"{b.where}: needs {b.marks['requires']}, which is not installed")
            continue
        if b.lang == "python":
            with _timed(f"{b.where}: python block"):
                _run_python(b)
            ran += 1
        else:
            for line in cli_lines(b):
                with _timed(f"{b.where}: {line.split('#')[0].strip()[:80]}"):
                    _run_cli(b, line)
                ran += 1
    print(f"{page.name}: {ran} blocks and command lines run; skipped: {skipped}")
    assert ran or skipped
