"""How coplay compiles its programs: `jit` for programs that run over and over,
`jit_once` for programs that run once or a few times.

On the CPU, XLA spends about half of a program's compile time optimising its
machine code (LLVM). XLA's default, level 3, buys nothing over level 2 on
coplay's training chunks: compiled at level 2 they run as fast (0.98-1.02x) and
compile 8-23% faster (QMIX on foraging: 4.8 s against 6.2 s; MAPPO on spread,
self-play PPO on connect four, GRPO on Kuhn poker in words; `python
benchmarks/compile_levels.py`, BENCHMARKS.md). `jit` compiles at level 2.

For a program that runs once or a handful of times (a trainer's initialisation,
the uniform-policy baseline, the evaluator of a run that evaluates at most three
times or plays few evaluation episodes, the chunk of a run of a few updates, a
tournament's grid of a few thousand games, the environment contract checks) even
that optimisation costs more than it gives back: compiled without it (`jit_once`,
level 0), such a program compiles about twice as fast (a trainer's
initialisation: 2.2 s against 5.2 s) and runs about 2.5x slower (a Q-learning
update chunk: 2.4 s against 0.9 s), which for these programs is milliseconds.

The results can differ between optimisation levels in the last bits of a float
(about 1e-6 relative), as between any two compiles of different optimisation;
they are the same on every run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

# XLA's LLVM optimisation level for programs that run over and over (XLA's default is 3),
# and for programs that run once (0: none).
RUN_OPTIONS: dict[str, Any] = {"xla_backend_optimization_level": 2}
RUN_ONCE_OPTIONS: dict[str, Any] = {"xla_backend_optimization_level": 0}


def jit(fun: Callable, *, once: bool = False, **jit_kwargs: Any) -> Callable:
    """`jax.jit(fun, **jit_kwargs)` with coplay's compiler options: `once=True` for a
    program that runs once or a few times (no machine-code optimisation), otherwise
    for one that runs over and over (see the module's doc). Only for a program called
    outside any trace: JAX refuses compiler options on a `jit` nested in another (use
    `jax.jit` there; the surrounding program's options apply)."""
    return jax.jit(fun, compiler_options=RUN_ONCE_OPTIONS if once else RUN_OPTIONS, **jit_kwargs)


def jit_once(fun: Callable, **jit_kwargs: Any) -> Callable:
    """`jit(fun, once=True, **jit_kwargs)`: a program that runs once or a few times."""
    return jit(fun, once=True, **jit_kwargs)


def call_once(fun: Callable, *args: Any) -> Any:
    """`fun(*args)` as one program: called outside any trace, compiled like `jit_once`
    (op by op, a network or a tree's sums would compile a small program per operation);
    given traced values (inside `jit` or `vmap`), staged into the surrounding program."""
    if any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(args)):
        return jax.jit(fun)(*args)
    return jit_once(fun)(*args)
