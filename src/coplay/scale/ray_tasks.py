"""Calls as Ray tasks spread over the nodes of a cluster: a `Dispatch`
(`coplay.core.dispatch`) for the work a population needs that splits into
independent compiled pieces, a round robin's match grids and PSRO's meta-game.

    with RayDispatch(address="auto") as dispatch:
        results = round_robin(env, players, games, key, dispatch=dispatch)
    dispatch.nodes      # the Ray node id that made each call so far, in the order of the calls

Each call is one task, its arguments (policies, parameters, keys) sent as one
object, so that what they share stays shared on the worker; tasks are spread over
the nodes (Ray's SPREAD strategy) and the results come back in the order of the
calls. A task whose node is lost is run again elsewhere (Ray retries tasks lost to
a failed node); the callers' calls depend on their arguments alone, so a task run
again, or run on another node, returns the same result.

Ray is an optional dependency (`pip install coplay[ray]`), imported when a
`RayDispatch` is made.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from coplay.interop import require
from coplay.scale.ray_trials import check_address, connect, current_node


class RayDispatch:
    """Make calls as Ray tasks (see the module's doc); a `coplay.core.dispatch.Dispatch`.

    `address`: None or "local" starts a local Ray instance (`num_cpus` CPUs, all by
    default), "auto", "host:port" or "ray://host:port" joins a running cluster; a
    connection this process already has is used as it is and left open. Used as a
    context manager, it connects on entry and disconnects on exit if it connected;
    otherwise it connects at its first call and stays connected. `cpus_per_call`:
    the CPUs each task reserves. `feature` names what needs Ray in the error that
    asks for the extra."""

    def __init__(self, address: str | None = None, *, num_cpus: int | None = None, cpus_per_call: float = 1.0,
                 feature: str = "calls on Ray") -> None:
        self.ray = require("ray", "ray", feature)
        check_address(address)
        self.address = address
        self.num_cpus = num_cpus
        self.cpus_per_call = cpus_per_call
        self.nodes: list[str | None] = []
        self._started = False

    def __enter__(self) -> RayDispatch:
        self._connect()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._started:
            self.ray.shutdown()
            self._started = False

    def _connect(self) -> None:
        if not self.ray.is_initialized():
            self._started = connect(self.ray, self.address, self.num_cpus)

    def __call__(self, fn: Callable[..., Any], calls: Sequence[tuple]) -> list[Any]:
        """`[fn(*args) for args in calls]`, each call a Ray task; `nodes` grows by where each ran."""
        self._connect()
        task = self.ray.remote(num_cpus=self.cpus_per_call, scheduling_strategy="SPREAD")(_call)
        refs = [task.remote(fn, tuple(args)) for args in calls]
        try:
            done = self.ray.get(refs)
        except self.ray.exceptions.RayTaskError as e:
            # The task's own exception (a coplay error, say), not Ray's wrapper of it.
            raise e.as_instanceof_cause() from None
        self.nodes += [node for _, node in done]
        return [result for result, _ in done]


def _call(fn: Callable[..., Any], args: tuple) -> tuple[Any, str | None]:
    # Runs in a Ray worker: the arguments came as one object, so what they share stays shared.
    return fn(*args), current_node()
