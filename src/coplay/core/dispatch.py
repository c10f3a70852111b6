"""Independent calls that may run elsewhere: the contract between code that splits its
work into calls and code that decides where the calls run.

    results = dispatch(fn, [(a1, b1), (a2, b2)])   # [fn(a1, b1), fn(a2, b2)], in this order

A `Dispatch` takes a module-level function and a list of argument tuples and returns
the results in the order of the calls. `in_process` makes the calls here, one after the
other; `coplay.scale.ray_tasks.RayDispatch` makes them as Ray tasks spread over a
cluster's nodes. Code that splits its work this way (a round robin's match grids,
PSRO's meta-game) makes each call depend on its arguments alone, random keys
included, so where and in what order the calls run leaves the results unchanged, bit
for bit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Dispatch = Callable[[Callable[..., Any], Sequence[tuple]], list[Any]]


def in_process(fn: Callable[..., Any], calls: Sequence[tuple]) -> list[Any]:
    """`[fn(*args) for args in calls]`: every call in this process, in order."""
    return [fn(*args) for args in calls]
