"""Datasets of the standard qualities, recorded from a training run: `coplay record`.

    coplay record runs/<run> --quality good --episodes 1000 --out datasets/spread.vlt
    coplay record random env=spread env.n_agents=3 --quality poor --episodes 1000 --out datasets/spread.vlt

The qualities are recipes over the run's kept checkpoints (train with
`keep_checkpoints` as large as the number of chunks to keep its whole history),
each checkpoint's policy scored by `eval_episodes` episodes in the environment:

    poor     uniform random play over the legal actions
    medium   the checkpoint whose score is nearest halfway between random play and the best checkpoint
    good     the best checkpoint
    replay   every checkpoint in training order, the episodes shared evenly (the run's history)
    mixed    half medium, half good

`--epsilon` replaces each agent's action by a random legal one with that
probability, on top of any recipe. Everything is deterministic from `--seed`.
The dataset is written at `<out>/<quality>` (OG-MARL's `<name>.vlt/<quality>`)
with the recipe, the checkpoints, their scores and the environment's spec in
its metadata, atomically; its statistics (episode returns, each agent's action
coverage) are drawn beside it, at `<name>.<quality>.png`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jax
import numpy as np

from coplay.algos.common.evaluation import make_evaluator
from coplay.core.compile import jit_once
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.registry import ENVS
from coplay.experiment import checkpoint
from coplay.experiment.compiled import init_state, plan
from coplay.experiment.config import Experiment, parse_overrides, seeds_named
from coplay.experiment.loop import check_checkpoint_config
from coplay.experiment.rundir import check_writable
from coplay.offline.dataset import (
    QUALITIES,
    Act,
    Actor,
    Dataset,
    check_recordable,
    concatenate,
    dataset_stats,
    epsilon_mixture,
    random_policy,
    record,
    save,
    writing,
)
from coplay.wrappers.agent_id import agent_id_shape, agent_id_view


def _policy_actor(trainer: Any, params: Any, env: Env) -> Actor:
    """A trained policy acting on the environment's own observations: the agent ids its
    network was trained with are appended here."""
    policy = trainer.policy()
    ours, theirs = tuple(env.spec.obs_space.shape), tuple(policy.env.spec.obs_space.shape)
    n = env.spec.num_agents
    if theirs == ours:
        view = lambda obs: obs                 # noqa: E731
    elif theirs == agent_id_shape(ours, n):
        view = lambda obs: agent_id_view(obs, ours)   # noqa: E731
    else:
        raise ConfigError(f"the run's policy sees observations of shape {theirs}, the environment's are {ours}: "
                          "coplay record plays policies that see the environment's observation (with agent ids or "
                          "without)")

    def act(key, obs, mask, carry, reset):
        return policy.act(params, view(obs), mask, key, carry, reset)

    return Actor(act=act, initial_carry=lambda e: policy.initial_carry((e,)))


def plot_stats(stats: dict[str, Any], path: Path, title: str) -> Path:
    """The dataset's episode returns as a histogram (one per objective), with the mean
    marked, and each agent's action coverage when actions are discrete."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from coplay.experiment.report import save_figure

    returns = np.asarray(stats["returns"], np.float64).reshape(stats["episodes"], -1)     # [episodes, K]
    coverage = stats.get("action_coverage")
    panels = returns.shape[1] + (coverage is not None)
    fig, axes = plt.subplots(1, panels, figsize=(4.5 * panels, 3.5), dpi=100, squeeze=False)
    for k in range(returns.shape[1]):
        ax = axes[0, k]
        ax.hist(returns[:, k], bins=min(40, max(5, stats["episodes"] // 10)), color="C0", alpha=0.8)
        ax.axvline(returns[:, k].mean(), color="C3", label=f"mean {returns[:, k].mean():.3g}")
        ax.set_xlabel("episode return (per agent)" + (f", objective {k}" if returns.shape[1] > 1 else ""))
        ax.set_ylabel("episodes")
        ax.legend()
    if coverage is not None:
        ax = axes[0, -1]
        ax.bar(np.arange(len(coverage)), coverage, color="C2")
        ax.set_ylim(0, 1)
        ax.set_xlabel("agent")
        ax.set_ylabel("share of legal actions taken")
    fig.suptitle(f"{title}: {stats['episodes']} episodes, {stats['steps']} steps")
    return save_figure(fig, path)


def _scores(evaluate, params_list: list[Any], key: jax.Array) -> list[float]:
    return [float(np.mean(evaluate(p, key)["return"])) for p in params_list]


def record_dataset(source: str, quality: str, episodes: int, out: str | Path, *, seed: int = 0,
                   epsilon: float = 0.0, run_seed: int = 0, eval_episodes: int = 32,
                   env_overrides: list[str] | None = None) -> dict[str, Any]:
    """Record `episodes` episodes of the recipe `quality` (module doc) from the run
    directory `source` (its seed `run_seed`), or from random play (`source="random"`,
    quality poor, on the environment `env_overrides` names). Returns the dataset's
    path, its statistics and the checkpoints used with their scores."""
    if quality not in QUALITIES:
        raise ConfigError(f"quality={quality!r} is not one of {', '.join(QUALITIES)}")
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
        raise ConfigError(f"episodes={episodes!r}: a dataset needs a whole number of at least 1 episode")
    if not 0.0 <= epsilon <= 1.0:
        raise ConfigError(f"epsilon={epsilon} must be in [0, 1]")
    out = Path(out)
    if not out.name.endswith(".vlt"):
        raise ConfigError(f"--out {out}: a dataset directory is named <name>.vlt (OG-MARL's layout), the quality "
                          "goes inside it")
    if source == "random":
        if quality != "poor":
            raise ConfigError(f"random play records quality 'poor', not {quality!r}: record the others from a run "
                              "directory")
        exp = parse_overrides(["algo=ippo", *(env_overrides or [])])
        env = ENVS.make(exp.env, **exp.env_config)
        check_recordable(env)
        with _output(out, quality):
            key = jax.random.PRNGKey(seed)
            noise = epsilon_mixture(random_policy(env), env, epsilon)
            data = record(env, noise, episodes, key, quality, {"source": "random", "seed": seed, "epsilon": epsilon})
            return _written(data, out, quality, {"checkpoints": []})
    if env_overrides:
        raise ConfigError(f"{' '.join(env_overrides)}: a run's dataset is recorded on the run's own environment")
    run_dir = Path(source)
    if not (run_dir / "config.yaml").exists():
        raise ConfigError(f"{source!r} is neither 'random' nor a coplay run directory (no config.yaml)")
    exp = Experiment.load(run_dir / "config.yaml")
    seeds_named(run_seed, exp.run.seeds, f"--run-seed {run_seed}")
    p = plan(exp)
    check_recordable(p.env)
    paths = checkpoint.list_checkpoints(run_dir / "checkpoints")
    if not paths:
        raise ConfigError(f"{run_dir} has no checkpoint to record from")
    with _output(out, quality):
        return _from_run(p, exp, run_dir, paths, quality, episodes, out, seed=seed, epsilon=epsilon,
                         run_seed=run_seed, eval_episodes=eval_episodes)


@contextmanager
def _output(out: Path, quality: str) -> Iterator[None]:
    """The dataset `out/quality` held by this process, checked new and writable (with the
    folder its statistics are drawn in) before any episode is played."""
    with writing(out / quality):
        if (out / quality).exists():
            raise ConfigError(f"{out / quality} already exists; remove it or record to another --out")
        check_writable(out.parent)
        yield


def _from_run(p: Any, exp: Experiment, run_dir: Path, paths: list[Path], quality: str, episodes: int, out: Path, *,
              seed: int, epsilon: float, run_seed: int, eval_episodes: int) -> dict[str, Any]:
    key = jax.random.PRNGKey(seed)
    env, trainer = p.env, p.trainer
    target = init_state(p)
    params, steps = [], []
    for path in paths:
        state, meta = checkpoint.load(path, target, lambda m, f: check_checkpoint_config(m, exp, f))
        params.append(jax.tree.map(lambda x: x[run_seed], trainer.policy_params(state)))
        steps.append(meta.get("env_steps"))
    evaluate = jit_once(make_evaluator(trainer.policy(), eval_episodes, vmapped=False))
    k_eval, k_record = jax.random.split(key)
    scores = _scores(evaluate, params, k_eval)
    random_score = float(np.mean(dataset_stats(record(env, random_policy(env), eval_episodes, k_eval,
                                                      "poor"))["return_mean"]))
    best = int(np.argmax(scores))
    middle = (random_score + scores[best]) / 2
    medium = int(np.argmin([abs(s - middle) for s in scores]))
    recipe = {"good": [best], "medium": [medium], "mixed": [medium, best], "replay": list(range(len(paths))),
              "poor": [-1]}[quality]
    shares = np.diff(np.linspace(0, episodes, len(recipe) + 1).round().astype(int))
    parts = []
    for i, (which, count) in enumerate(zip(recipe, shares)):
        if count == 0:
            continue
        act: Act | Actor = random_policy(env) if which < 0 else _policy_actor(trainer, params[which], env)
        if epsilon > 0:
            act = _noisy(act, env, epsilon)
        parts.append(record(env, act, int(count), jax.random.fold_in(k_record, i), quality))
    used = [{"checkpoint": paths[w].name, "env_steps": steps[w], "score": scores[w]} for w in recipe if w >= 0]
    meta = {**parts[0].meta, "episodes": episodes, "source": str(run_dir), "run_seed": run_seed, "seed": seed,
            "epsilon": epsilon, "random_score": random_score, "checkpoints": used}
    data = concatenate(parts, meta) if len(parts) > 1 else Dataset(parts[0].experience, meta)
    env.close()
    return _written(data, out, quality, {"checkpoints": used, "random_score": random_score})


def _written(data: Dataset, out: Path, quality: str, extra: dict[str, Any]) -> dict[str, Any]:
    """Save the dataset and draw its statistics beside it, `<out without .vlt>.<quality>.png`."""
    path = save(data, out / quality)
    stats = dataset_stats(data)
    plot = plot_stats(stats, out.parent / f"{out.name[:-len('.vlt')]}.{quality}.png", f"{out.name}/{quality}")
    return {"path": str(path), "stats": stats, "plot": str(plot), **extra}


def _noisy(act: Act | Actor, env: Env, epsilon: float) -> Act | Actor:
    """`act` with each agent's action replaced by a random legal one with probability epsilon."""
    if not isinstance(act, Actor):
        return epsilon_mixture(act, env, epsilon)
    inner = act

    def noisy(key, obs, mask, carry, reset):
        k_act, k_mix = jax.random.split(key)
        action, carry = inner.act(k_act, obs, mask, carry, reset)
        return epsilon_mixture(lambda k, o, m: action, env, epsilon)(k_mix, obs, mask), carry

    return Actor(act=noisy, initial_carry=inner.initial_carry)
