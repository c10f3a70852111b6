"""The one figure a run is judged by, and what a uniformly random policy scores on it.

Every kind of run has a headline measure, chosen from what its evaluation reports:

    exploitability   a game with an exact tree (kuhn_poker, leduc_holdem, their text forms):
                     a property of the policy, 0 at a Nash equilibrium; lower is better
    hypervolume      a trainer of several objectives: the hypervolume of each seed's front
                     (summary.json adds its share of the true front's, where the true front is known)
    win              self-play of a board game: the rate of games won against random legal moves;
                     a team of one side (SMAX against its built-in enemy): the rate of episodes
                     the environment scores as won (its info["win"])
    return           everything else: the episode's summed reward, averaged over agents

The end-of-run lines, `curve.png` and summary.json show it beside its random baseline:
the same measure for a policy that plays uniformly among the legal actions, on the same
environment (for a game in words, uniformly among the game's legal moves; none is
computed for continuous actions).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import jax
import numpy as np

from coplay.algos.common.arena import against_random
from coplay.algos.common.evaluation import make_evaluator
from coplay.algos.common.matches import bare_env, random_policy
from coplay.core.compile import jit_once
from coplay.envs.text.games import TextGame
from coplay.envs.trees.tree import GameTree
from coplay.envs.trees.values import TreeArrays, exploitability
from coplay.wrappers.episode_stats import EpisodeStats


@dataclass(frozen=True)
class Headline:
    metric: str             # the evaluation's entry
    label: str              # what it is, in words
    lower_is_better: bool = False

    def as_dict(self) -> dict:
        return asdict(self)


# What an evaluation reports about the policy itself, repeated in every episode's entry
# (exact values from a game's tree), not a per-episode figure.
POLICY_MEASURES = frozenset({"exploitability", "nash_conv", "invalid_mass", "hypervolume", "expected_utility",
                             "below_reference"})

EXPLOITABILITY = Headline("exploitability", "exploitability (of the policy: 0 at a Nash equilibrium)", True)
HYPERVOLUME = Headline("hypervolume", "hypervolume of the front")
WIN = Headline("win", "win rate against random legal moves")
TEAM_WIN = Headline("win", "win rate (episodes the environment scores as won)")
RETURN = Headline("return", "episode return (summed over steps, mean over agents)")


def headline_of(measures: Any, wins: str | None = "rivals") -> Headline:
    """The headline of a run whose evaluation reports `measures` (names). `wins`: what a
    `win` means on the run's environment: "rivals" (won against random play), "team" (one
    team's own wins, as the environment reports them), None (nothing: a game of one team,
    whose headline is then its return)."""
    names = set(measures)
    if EXPLOITABILITY.metric in names:
        return EXPLOITABILITY
    if HYPERVOLUME.metric in names:
        return HYPERVOLUME
    if WIN.metric in names and wins is not None:
        return TEAM_WIN if wins == "team" else WIN
    return RETURN


def game_tree(env: Any) -> GameTree | None:
    """The exact game tree under `env` (through wrappers and text views), if any."""
    seen = 0
    while env is not None and seen < 16:
        tree = getattr(env, "tree", None)
        if isinstance(tree, GameTree):
            return tree
        env = getattr(env, "game", None) or getattr(env, "env", None)
        seen += 1
    return None


def tree_baseline(env: Any) -> float | None:
    """The exploitability of uniform play among the legal moves, where `env` has a tree."""
    tree = game_tree(env)
    if tree is None:
        return None
    return float(exploitability(TreeArrays.from_tree(tree), tree.uniform_policy()))


def compiled_baseline(headline: Headline, trainer: Any, env: Any, reference: np.ndarray | None,
                      episodes: int, seed: int) -> float | None:
    """The random policy's score on `headline` for a compiled run of `trainer` on `env`
    (`reference`: the run's hypervolume reference point). Played on the trainer's own
    wrapped environment, `episodes` episodes from `seed`."""
    if headline is EXPLOITABILITY:
        return tree_baseline(env)
    key = jax.random.PRNGKey(seed)
    played = trainer.policy().env
    text = bare_env(played)
    if isinstance(text, TextGame):   # a game in words: random legal moves of the game underneath
        played = EpisodeStats(text.game)
    if headline is WIN:   # random legal moves against random legal moves, in every seat in turn
        return float(np.mean(jit_once(against_random(played, random_policy(played), episodes))(None, key)["win"]))
    if not played.spec.discrete_actions:
        return None
    out = jit_once(make_evaluator(random_policy(played), episodes, vmapped=False))(None, key)
    if headline is TEAM_WIN:
        return float(np.mean(out["win"]))
    if headline is HYPERVOLUME:
        from coplay.eval.multi_objective import hypervolume

        assert reference is not None, "a run of several objectives has a reference point"
        point = np.array([[float(np.mean(out[f"objective/{n}"])) for n in env.spec.objective_names]])
        return hypervolume(point, reference) if np.all(point >= reference) else 0.0
    return float(np.mean(out["return"]))


def _seeds(n: int) -> str:
    return f"{n} seed" + ("" if n == 1 else "s")


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def summary_lines(summary: dict) -> list[str]:
    """What a finished run prints: its headline figure (IQM over seeds, 95% CI) beside the
    random baseline, then the steps run, the wall time and the rate."""
    head = summary.get("headline") or RETURN.as_dict()
    final = summary.get("final", {}).get(head["metric"])
    lines = []
    if final is not None:
        line = (f"{head['label']}: {_fmt(final['iqm'])} [{_fmt(final['ci_low'])}, {_fmt(final['ci_high'])}] "
                f"(IQM over {_seeds(summary['seeds'])}, 95% CI)")
        base = head.get("random_baseline")
        line += "; uniformly random policy: " + ("not computed for this run" if base is None else _fmt(base))
        lines.append(line)
        truth = summary.get("front", {}).get("true_hypervolume")
        if head["metric"] == HYPERVOLUME.metric and truth:
            lines.append(f"share of the true front's hypervolume ({_fmt(truth)}): {100 * final['iqm'] / truth:.1f}%")
    steps, unit = summary.get("env_steps_per_seed"), summary.get("step_unit", "environment steps")
    if steps is not None and "wall_time_s" in summary:
        rate = summary.get("steps_per_s")
        lines.append(f"{steps:,} {unit} per seed x {_seeds(summary['seeds'])} in {summary['wall_time_s']:.1f} s"
                     + (f" ({rate:,.0f} {unit}/s, compiling included)" if rate else ""))
    return lines
