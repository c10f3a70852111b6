"""Compiling programs that run once.

On the CPU, XLA spends about half of a program's compile time optimising its
machine code (LLVM). For a program that runs once or a handful of times (a
trainer's initialisation, the uniform-policy baseline, the evaluator of a run
that evaluates at most three times or plays few evaluation episodes, the chunk
of a run of a few updates, a tournament's grid of a few thousand games, the
environment contract checks) that optimisation costs more than it gives back:
compiled without it, such a program
compiles about twice as fast (a trainer's initialisation: 2.2 s against 5.2 s)
and runs about 2.5x slower (a Q-learning update chunk: 2.4 s against 0.9 s),
which for these programs is milliseconds. Programs that run over and over
(training chunks, environment steps, the evaluator of a run that evaluates often)
keep the full optimisation.

The results can differ from a fully optimised compile in the last bits of a
float (about 1e-6 relative), as between any two compiles of different
optimisation; they are the same on every run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

# XLA's LLVM optimisation level for programs that run once (0: none; the default is 3).
RUN_ONCE_OPTIONS: dict[str, Any] = {"xla_backend_optimization_level": 0}


def jit_once(fun: Callable, **jit_kwargs: Any) -> Callable:
    """`jax.jit(fun, **jit_kwargs)` for a program that runs once or a few times:
    compiled without machine-code optimisation (see the module's doc)."""
    return jax.jit(fun, compiler_options=RUN_ONCE_OPTIONS, **jit_kwargs)


def call_once(fun: Callable, *args: Any) -> Any:
    """`fun(*args)` as one program: called outside any trace, compiled like `jit_once`
    (op by op, a network or a tree's sums would compile a small program per operation);
    given traced values (inside `jit` or `vmap`), staged into the surrounding program."""
    if any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(args)):
        return jax.jit(fun)(*args)
    return jit_once(fun)(*args)
