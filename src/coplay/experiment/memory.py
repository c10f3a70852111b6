"""How much memory a compiled run needs, known from shapes before anything is built,
and what the machine has: a run that cannot fit is refused with the estimate and what
to lower, instead of dying by the kernel's hand once it has filled the machine.

    estimate = state of every seed, twice (the run's, and the copy a checkpoint writes)
             + every seed's working memory in one update or one evaluation, whichever is larger
             + what the process already holds (JAX, the libraries, the environment)

The state's size is exact (`jax.eval_shape` of the trainer's `init`). The working memory
is the peak of the values alive at once in the traced program of one seed's update
(and evaluation), walked in order, nested loops included, with an output counted in the
place of an input of its shape that dies there (as XLA reuses buffers); it is within a
factor of about 1.5 of XLA's own buffer assignment, above it more often than below, and
scales with the seeds as the vmapped program does.
"""

from __future__ import annotations

import os
import resource
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np
from jax.extend.core import Literal

GB = 1024 ** 3

# Fields that size what grows, in the order the advice names them.
SIZE_FIELDS = ("num_envs", "rollout_len", "buffer_size", "batch_size", "group_size", "hidden_size")


@dataclass
class MemoryEstimate:
    seeds: int
    state: dict[str, int]          # bytes of every seed's state, by the state's top-level field
    update: int                    # bytes of working memory of one update, every seed
    evaluation: int                # bytes of working memory of one evaluation, every seed
    process: int                   # bytes the process holds already
    available: int | None          # bytes the machine can give this run; None where unknown
    where: str = "memory"          # what `available` counts
    notes: list[str] = field(default_factory=list)

    @property
    def state_bytes(self) -> int:
        return sum(self.state.values())

    @property
    def total(self) -> int:
        return self.process + 2 * self.state_bytes + max(self.update, self.evaluation)

    @property
    def per_seed(self) -> float:
        return (2 * self.state_bytes + max(self.update, self.evaluation)) / self.seeds

    def fits(self) -> bool:
        return self.available is None or self.total <= self.available

    def most_seeds(self) -> int:
        """The most seeds that would fit beside what the process holds."""
        if self.available is None:
            return self.seeds
        return max(0, int((self.available - self.process) // max(self.per_seed, 1)))

    def lines(self) -> list[str]:
        parts = ", ".join(f"{name} {gb(b)}" for name, b in sorted(self.state.items(), key=lambda kv: -kv[1]) if b)
        out = [f"memory, estimated: {gb(self.total)} in all",
               f"  state of {self.seeds} seeds: {gb(self.state_bytes)} ({parts}), twice: the run's and a "
               "checkpoint's copy",
               f"  working memory, every seed: {gb(self.update)} in an update, {gb(self.evaluation)} in an "
               "evaluation",
               f"  this process already: {gb(self.process)}"]
        if self.available is not None:
            out.append(f"  available on this machine: {gb(self.available)} ({self.where})")
        return out + [f"  {n}" for n in self.notes]


def gb(n: float) -> str:
    return f"{n / GB:.2f} GB" if n >= GB / 100 else f"{n / 2**20:.1f} MB"


def _bytes(aval: Any) -> int:
    shape, dtype = getattr(aval, "shape", None), getattr(aval, "dtype", None)
    if shape is None or dtype is None:
        return 0
    try:
        return int(np.prod(shape)) * np.dtype(dtype).itemsize
    except TypeError:   # a key type or another extended dtype
        return int(np.prod(shape)) * int(getattr(dtype, "itemsize", 8))


def _inner(eqn: Any) -> list[Any]:
    found = []
    for value in eqn.params.values():
        for v in value if isinstance(value, (tuple, list)) else (value,):
            if hasattr(v, "jaxpr") and hasattr(v, "consts"):
                found.append(v.jaxpr)
            elif hasattr(v, "eqns"):
                found.append(v)
    return found


def peak_bytes(jaxpr: Any) -> int:
    """The most bytes of intermediate values alive at once in `jaxpr` (its inputs not
    counted): values live from the equation that makes them to the last that reads
    them; an output takes the place of an input of its shape and dtype read for the
    last time there; a nested program (a loop's body, a branch) adds its own peak."""
    last: dict[Any, int] = {}
    for i, eqn in enumerate(jaxpr.eqns):
        for v in eqn.invars:
            if not isinstance(v, Literal):
                last[v] = i
    for v in jaxpr.outvars:
        if not isinstance(v, Literal):
            last[v] = len(jaxpr.eqns)
    sizes: dict[Any, int] = {}
    live = best = 0
    for i, eqn in enumerate(jaxpr.eqns):
        inner = max((peak_bytes(j) for j in _inner(eqn)), default=0)
        dying = list(dict.fromkeys(v for v in eqn.invars if not isinstance(v, Literal) and last.get(v) == i))
        cost = 0
        for out in eqn.outvars:
            shape, dtype = getattr(out.aval, "shape", None), getattr(out.aval, "dtype", None)
            reused = next((v for v in dying if getattr(v.aval, "shape", ()) == shape
                           and getattr(v.aval, "dtype", None) == dtype), None)
            if reused is not None:
                dying.remove(reused)
                sizes[out] = sizes.pop(reused, 0)
            else:
                sizes[out] = _bytes(out.aval)
                cost += sizes[out]
        best = max(best, live + inner + cost)
        live += cost
        for v in dying:
            live -= sizes.pop(v, 0)
        for out in eqn.outvars:
            if out not in last:
                live -= sizes.pop(out, 0)
    return best


def _traced_peak(fn: Any, *args: Any) -> int:
    return peak_bytes(jax.make_jaxpr(fn)(*args).jaxpr)


def _statm(field: int) -> int | None:
    """/proc/self/statm's field (0: mapped, 1: resident) in bytes; None off Linux."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[field]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def process_bytes() -> int:
    """The resident memory of this process now."""
    resident = _statm(1)
    if resident is not None:
        return resident
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def available_bytes() -> tuple[int | None, str]:
    """What this process may still take: the memory the kernel calls available, less where
    a cgroup (a container, a job scheduler) or an address-space limit allows less."""
    choices: list[tuple[int, str]] = []
    try:
        with open("/proc/meminfo") as f:
            info = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in f if line.split()[1:]}
        if "MemAvailable" in info:
            choices.append((info["MemAvailable"], "the memory the kernel calls available"))
    except (OSError, ValueError):
        pass
    if not choices and hasattr(os, "sysconf"):
        try:
            choices.append((os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "the machine's memory"))
        except (ValueError, OSError):
            pass
    v1 = "/sys/fs/cgroup/memory/memory."
    for limit, usage in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                         (v1 + "limit_in_bytes", v1 + "usage_in_bytes")):
        try:
            with open(limit) as f, open(usage) as g:
                raw = f.read().strip()
                if raw != "max" and int(raw) < 2 ** 60:
                    choices.append((int(raw) - int(g.read().strip()), "the cgroup's memory limit, less its use"))
        except (OSError, ValueError):
            continue
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        choices.append((soft - (_statm(0) or 0), "the address-space limit (ulimit -v), less what is mapped"))
    if not choices:
        return None, "unknown"
    return min(choices)


def estimate(trainer: Any, seeds: int, eval_episodes: int) -> MemoryEstimate:
    """The memory a compiled run of `trainer` with `seeds` seeds needs; nothing is built."""
    key = jax.random.PRNGKey(0)
    one = jax.eval_shape(trainer.init, key)
    parts: Counter[str] = Counter()
    for path, leaf in jax.tree_util.tree_flatten_with_path(one)[0]:
        name = jax.tree_util.keystr(path[:1]).strip(".[]'\"") or "state"
        parts[name] += _bytes(leaf) * seeds
    update = _traced_peak(trainer.update, one) * seeds
    params = jax.eval_shape(trainer.policy_params, one)
    evaluation = _traced_peak(trainer.evaluator(eval_episodes), params, key) * seeds
    available, where = available_bytes()
    notes = []
    if jax.default_backend() != "cpu":
        notes.append(f"the state and working memory live on the {jax.default_backend()} device; the device's "
                     "own memory is checked by XLA when the program compiles")
    return MemoryEstimate(seeds, dict(parts), update, evaluation, process_bytes(), available, where, notes)


def advice(est: MemoryEstimate, config: Any) -> str:
    """What to lower: the seeds that fit, and the fields that size the largest part."""
    fields = [f"algo.{name}" for name in SIZE_FIELDS if hasattr(config, name)]
    most = est.most_seeds()
    seeds = (f"seeds (at most {most} fit)" if 0 < most < est.seeds else
             "seeds (not even one fits beside what this process holds)" if most == 0 else "seeds")
    largest = max(est.state, key=lambda k: est.state[k]) if est.state else None
    where = (f"; the largest part of the state is {largest} ({gb(est.state[largest])})"
             if largest and est.state[largest] > max(est.update, est.evaluation) else "")
    return f"lower {seeds}" + (f", or {', '.join(fields)}" if fields else "") + where


def for_seeds(one: MemoryEstimate, seeds: int) -> MemoryEstimate:
    """`one` seed's estimate scaled to `seeds` (a vmapped program's buffers grow with its
    batch), with the process and the machine read now."""
    available, where = available_bytes()
    return MemoryEstimate(seeds, {k: v * seeds for k, v in one.state.items()}, one.update * seeds,
                          one.evaluation * seeds, process_bytes(), available, where, list(one.notes))
