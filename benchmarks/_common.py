"""Shared by the benchmark scripts: BENCHMARKS.md sections, results files and machine facts."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


def cpu_model() -> str:
    try:
        return next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


def write_section(name: str, text: str) -> None:
    """Replace (or append) the block between `<!-- name:start -->` and `<!-- name:end -->` in BENCHMARKS.md."""
    path = ROOT / "BENCHMARKS.md"
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    body = path.read_text() if path.exists() else "# coplay benchmarks\n"
    block = f"{start}\n{text.rstrip()}\n{end}"
    if start in body and end in body:
        body = body[: body.index(start)] + block + body[body.index(end) + len(end):]
    else:
        body = body.rstrip() + "\n\n" + block + "\n"
    path.write_text(body)


def write_results(name: str, data: dict) -> Path:
    """`data` as benchmarks/results/<name>.json."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=1))
    return path


def cores() -> int:
    return os.cpu_count() or 0
