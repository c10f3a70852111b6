"""The game solvers that are not trainers, and what they share: one call shape,
one result, one registry.

    result = cfr.run(coplay.make("tree:leduc_holdem"), cfr.Config(iterations=1000), jax.random.PRNGKey(0))
    result.exploitability[-1], result.measure     # the curve's last point, and what the curve measures

Every solver module (`cfr`, `psro`, `psro_ppo`, `fictitious_play`) has a
`Config` of `param()` fields, the iteration budget among them, and

    run(game: Env, config: Config, key: jax.Array, *, log=None) -> SolveResult

where `game` is a coplay environment: an exact tree (`tree:kuhn_poker`,
`tree:leduc_holdem`) for the tabular solvers, the `matrix` environment for
fictitious play, any two-player environment for PSRO with PPO best responses.
A game a solver cannot use is refused, before anything is computed, with a
`ConfigError` that names the environment, what the solver uses and the solvers
that can use it. `log`, where given, receives one dict per point of the curve
(`step`, `exploitability`, and what else the solver reports).

`SOLVERS` holds them by name with their config class and their `GameSupport`
(the registrations are in `coplay.algos`, beside the trainers'), for
`coplay solve algo=NAME env=NAME`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np

from coplay.algos.common.matches import bare_env
from coplay.core.compile import jit
from coplay.core.config import check
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.registry import Registry
from coplay.envs.trees import GameTree, tree_names
from coplay.envs.trees.env import TreeGameEnv

SOLVERS = Registry("solver")

# Rows a solver passes to `run(..., log=...)`: one per point of its curve.
Log = Callable[[dict], None]


@dataclass(frozen=True)
class SolveResult:
    """What a solver returns.

    exploitability: [P] the curve, how far the solution was from an equilibrium
        at each of `steps` (what exactly: `measure`)
    steps: [P] int, the iteration of each curve point (0: before the first)
    measure: what the curve is, in words: a short name (exact exploitability,
        NashConv, approximate exploitability, ...), a colon, how it is computed
    policy: the solution: an `[I, A]` behaviour policy on a game tree, `[2, A]`
        mixtures on a matrix game, a population with its meta-strategy, ...
    details: solver-specific results (populations, meta-strategies, payoff tables, ...)
    """

    exploitability: np.ndarray
    steps: np.ndarray
    measure: str
    policy: Any
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def final(self) -> float:
        """The curve's last point: the returned solution's figure."""
        return float(self.exploitability[-1])

    @property
    def measure_name(self) -> str:
        """The measure's short name (what precedes the colon)."""
        return self.measure.split(":", 1)[0]


@dataclass(frozen=True)
class GameSupport:
    """Which games a solver can use: `problem(game)` says why one cannot be used
    (None when it can), `uses` says in words what can, for messages, and
    `default` names the environment `coplay solve` picks when none is given.
    `check(game, config)`, where given, refuses a config that cannot work on
    that game (e.g. sizes that must divide each other), before any computation."""

    uses: str
    default: str
    problem: Callable[[Env], str | None]
    check: Callable[[Env, Any], None] | None = None
    measure: str = "exploitability"    # the short name of what the solver's curve measures (SolveResult.measure_name)


def solver_config_class(name: str) -> type:
    """The config dataclass of the registered solver `name`."""
    config = SOLVERS.get(name).config
    assert config is not None, f"solver {name!r} was registered without a config class"
    return config


def validate(solver: str, game: Env, config: Any) -> None:
    """Refuse, before any computation, a config of the wrong class or with a value out
    of range, and a game `solver` cannot use (naming the solvers that can)."""
    config_class = solver_config_class(solver)
    if not isinstance(config, config_class):
        raise ConfigError(f"solver {solver!r} needs a {config_class.__module__}.{config_class.__qualname__}, "
                          f"got {type(config).__name__}")
    check(config, "algo.")
    support: GameSupport = SOLVERS.get(solver).capabilities
    problem = support.problem(game)
    if problem is not None:
        name = game.spec.name
        able = [n for n, e in SOLVERS.items() if e.capabilities.problem(game) is None]
        raise ConfigError(
            f"solver {solver!r} cannot use environment {name!r} ({problem}); it uses {support.uses}. "
            f"Solvers that can use {name!r}: {', '.join(able) or 'none'}")
    if support.check is not None:
        support.check(game, config)


# ----- games -----------------------------------------------------------------------------------------------------

TREE_GAMES = "coplay's exact game trees (" + ", ".join(f"tree:{n}" for n in tree_names()) + ")"


def game_tree(game: Env) -> GameTree | None:
    """The exact tree `game` plays (`tree:<name>` environments), None for any other game."""
    bare = bare_env(game)
    return bare.tree if isinstance(bare, TreeGameEnv) else None


def exact_tree(game: Env) -> GameTree:
    """The exact tree `game` plays; a `ConfigError` naming `game` where it has none."""
    tree = game_tree(game)
    if tree is None:
        raise ConfigError(f"environment {game.spec.name!r} has no exact game tree; tabular solvers use {TREE_GAMES}")
    return tree


def tree_problem(game: Env) -> str | None:
    """Why a tabular solver cannot use `game`, None when it is an exact tree."""
    return None if game_tree(game) is not None else "it has no exact game tree"


# ----- iterations in compiled blocks, measured between blocks -------------------------------------------------

# At most this many host calls per run (so a progress bar moves); each call runs many blocks.
MAX_CALLS = 50


def block_lengths(iterations: int, every: int) -> np.ndarray:
    """`[B]` iterations per block: 0 (to measure the start), then `every` until
    `iterations` are done (the last block may be shorter)."""
    full, rest = divmod(iterations, every)
    return np.array([0] + [every] * full + ([rest] if rest else []), np.int32)


def measured_loop(iterate: Callable[[Any], Any], measure: Callable[[Any], dict[str, jax.Array]], state: Any,
                  iterations: int, every: int, log: Log | None = None) -> tuple[Any, np.ndarray, dict[str, np.ndarray]]:
    """Run `iterations` of `iterate(state) -> state`, calling `measure(state)` (a dict
    of arrays) at the start, after every `every` iterations and at the end.

    The iterations between measurements run in compiled loops (`lax.fori_loop`
    with the block's length as a traced value, so every block, the shorter last
    one included, is the same program), and many blocks run in one compiled call
    (`lax.scan` over their lengths): the host is visited at most `MAX_CALLS`
    times a run, never once per iteration. `log`, where given, receives
    `{"step": step, **scalar measurements}` for each point.

    Returns (final state, steps [P], each measurement stacked on a leading [P] axis)."""
    lengths = block_lengths(iterations, every)
    per_call = math.ceil(lengths.size / min(lengths.size, MAX_CALLS))
    calls = math.ceil(lengths.size / per_call)
    # The last call is padded with empty blocks, so every call is one program; their
    # measurements repeat the final state's and are dropped below.
    padded = np.zeros(calls * per_call, np.int32)
    padded[: lengths.size] = lengths

    def block(s, n):
        s = jax.lax.fori_loop(0, n, lambda _, x: iterate(x), s)
        return s, measure(s)

    advance = jit(lambda s, ns: jax.lax.scan(block, s, ns))
    steps = np.cumsum(lengths)
    outputs = []
    for c in range(calls):
        state, out = advance(state, padded[c * per_call:(c + 1) * per_call])
        outputs.append(out)
        if log is not None:
            out = jax.device_get(out)
            for i, k in enumerate(range(c * per_call, min((c + 1) * per_call, lengths.size))):
                log({"step": int(steps[k]), **{name: float(v[i]) for name, v in out.items() if np.ndim(v) == 1}})
    stacked = {name: np.concatenate([np.asarray(o[name]) for o in outputs])[: lengths.size] for name in outputs[0]}
    return state, steps, stacked
