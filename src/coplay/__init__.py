"""coplay: reinforcement learning of agents that interact, compiled end to end with JAX."""

from coplay import envs as _envs  # noqa: F401  (registers the built-in environments)
from coplay.core import ENVS, Env, EnvSpec, TimeStep
from coplay.interop import gymnasium as _gymnasium  # noqa: F401  (registers gym:<id>)
from coplay.interop import jaxmarl as _jaxmarl  # noqa: F401  (registers jaxmarl:<name>; jaxmarl itself loads on use)
from coplay.interop import jumanji as _jumanji  # noqa: F401  (registers jumanji:<name>; jumanji itself loads on use)
from coplay.interop import pettingzoo_host as _pettingzoo_host  # noqa: F401  (registers pettingzoo:<module>)
from coplay.interop import pgx as _pgx  # noqa: F401  (registers pgx's games; pgx itself loads on use)
from coplay.interop import textarena as _textarena  # noqa: F401  (registers textarena:<id>; textarena loads on use)

__version__ = "0.1.0"


def make(name: str, **kwargs) -> Env:
    """Build a registered environment: `coplay.make("spread", n_agents=4)`."""
    return ENVS.make(name, **kwargs)


def list_envs() -> list[str]:
    return ENVS.names()


def train(config=None, **overrides):
    """Train from Python: `coplay.train({"algo": {"name": "ippo"}, "seeds": 2})`,
    `coplay.train(["algo=ippo", "seeds=2"])` or `coplay.train(seeds=2)`.
    Returns a `RunResult` (run directory, summary, final state)."""
    from coplay.experiment.runner import train as _train

    return _train(config, **overrides)


def solve(config=None, **overrides):
    """Solve a game from Python: `coplay.solve(["algo=cfr", "env=tree:leduc_holdem"])`,
    `coplay.solve({"algo": {"name": "psro", "iterations": 10}})` or `coplay.solve(algo="cfr")`.
    Returns a `SolveRun` (run directory, summary, the solver's `SolveResult`)."""
    from coplay.experiment.solve import solve as _solve

    return _solve(config, **overrides)


__all__ = ["Env", "EnvSpec", "TimeStep", "list_envs", "make", "solve", "train"]
