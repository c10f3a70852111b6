"""Runs of a language model trained on the host (`algo=lm_grpo`), with the same run
directory as every coplay run:

    config.yaml      the resolved config (reads back with resume=)
    metrics.csv      one row per chunk and seed: the updates' means, then the evaluation's
    events.*         TensorBoard
    summary.json     the final evaluation, IQM over seeds with a 95% bootstrap CI
    curve.png        exploitability (Kuhn poker, Leduc hold'em) or evaluation return
    checkpoints/     every adapter, Adam's moments and RAE's baselines, msgpack, atomic
    samples.txt      the last evaluation's first dialogues, as the model read and wrote them

A chunk is `chunk_steps` environment steps reserved per seed, counted as for
`algo=grpo` (`num_envs` x the environment's max_steps per update). After each chunk
every seed is evaluated: `eval_episodes` episodes of self-play (return per agent,
invalid replies per turn) and, on a game with an exact tree, the exploitability and
NashConv of the model's strategy (`coplay.eval.text_policies.score_lm_player`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from coplay.algos.base import Policy
from coplay.core.errors import ConfigError
from coplay.core.registry import ENVS
from coplay.envs.text.tree_games import TextTreeGame
from coplay.eval.text_policies import score_lm_player
from coplay.experiment import checkpoint
from coplay.experiment.config import Experiment
from coplay.experiment.report import MetricsLog, plot_curve, read_metrics, write_summary


def evaluate(learner: Any, env: Any, seed: int, number: int, episodes: int) -> tuple[dict[str, np.ndarray], list]:
    """Seed `seed`'s evaluation: per-episode `return` and `invalid` (replies per turn that
    named no legal move) over `episodes` self-play episodes (groups of one), and on an
    exact game `exploitability`, `nash_conv` and `invalid_mass` (one value each)."""
    played = learner.play(seed, number, episodes, 1, purpose=2)
    spoke = played.acted.any(1)
    turns = np.maximum(played.acted.sum((1, 2)), 1)
    out = {"return": np.where(spoke, played.reward.sum(1), 0.0).sum(1) / env.spec.num_agents,
           "invalid": played.invalid / turns}
    if isinstance(env, TextTreeGame):   # play() left seed `seed`'s adapters speaking
        score = score_lm_player(env, learner.player)
        for k, v in (("exploitability", score.exploitability), ("nash_conv", score.nash_conv),
                     ("invalid_mass", np.mean(np.asarray(score.invalid)))):
            out[k] = np.full(episodes, float(v))
    dialogues = []
    for e in range(min(3, episodes)):
        lines = [f"{env.spec.roles[a] if env.spec.roles else a}: {t!r}"
                 for a, t, ep in zip(played.turns.agent, played.turns.texts, played.turns.episode) if ep == e]
        dialogues.append(lines + [f"returns: {played.reward[e].sum(0).tolist()}"])
    return out, dialogues


def train_lm(exp: Experiment, *, stop_after_chunks: int | None = None) -> Any:
    """Train `exp` (algo=lm_grpo) and return a `RunResult` (see the module's doc)."""
    from coplay.experiment.runner import RunResult, _Interrupt, _sigint, config_key, new_run_dir, resume_command
    from coplay.lm.grpo import LMGRPO

    exp.validate()
    run, c = exp.run, exp.algo_config
    for name in ("init_from", "scalarise"):
        if getattr(run, name) is not None:
            raise ConfigError(f"{name}= is not offered for algo=lm_grpo (it starts from algo.model)")
    env, learner, (per_update, per_chunk, chunks) = _build(exp)   # refused here, before a run directory

    resume_dir = Path(run.resume) if run.resume else None
    run_dir = resume_dir or new_run_dir(run.out_dir, run.name, exp.algo, exp.env)
    ckpt_dir = run_dir / "checkpoints"
    start, earlier = 0, 0.0
    evals: list[tuple[int, dict[str, np.ndarray]]] = []
    if resume_dir is None:
        checkpoint.atomic_write(run_dir / "config.yaml", exp.to_yaml().encode())
    else:
        checkpoint.remove_temporaries(ckpt_dir)
        if checkpoint.list_checkpoints(ckpt_dir):
            meta, path = _load_newest(exp, learner, ckpt_dir)
            start, earlier = int(meta["chunk"]) + 1, float(meta.get("wall_time_s", 0.0))
            evals = [(int(s), {k: np.asarray(v) for k, v in e.items()}) for s, e in meta.get("evals", [])]
            print(f"resuming {run_dir} from {path.name} (chunk {start}/{chunks})", flush=True)
    log = MetricsLog(run_dir, run.tensorboard)
    log.truncate(start - 1)
    interrupt = _Interrupt()
    t_start = time.time() - earlier
    dialogues: list = []
    try:
        with _sigint(interrupt):
            for chunk in range(start, chunks):
                per_seed: dict[str, list[float]] = {}
                results: dict[str, list[np.ndarray]] = {}
                for seed in range(run.seeds):
                    rows = [learner.update(seed, chunk * per_chunk + u) for u in range(per_chunk)]
                    for k in rows[0]:
                        per_seed.setdefault(k, []).append(float(np.mean([r[k] for r in rows])))
                    out, talk = evaluate(learner, env, seed, chunk, run.eval_episodes)
                    dialogues = talk if seed == 0 else dialogues
                    for k, v in out.items():
                        results.setdefault(k, []).append(v)
                final = {k: np.stack(v) for k, v in results.items()}         # [S, episodes]
                env_steps = (chunk + 1) * per_chunk * per_update
                evals.append((env_steps, final))
                metrics = {k: np.asarray(v) for k, v in per_seed.items()}
                metrics.update({f"eval/{k}": v.mean(-1) for k, v in final.items()})
                log.write(chunk, env_steps, metrics, time.time() - t_start)
                last = chunk == chunks - 1
                stopping = not last and (interrupt.requested or (
                    stop_after_chunks is not None and chunk + 1 - start >= stop_after_chunks))
                if last or stopping or (chunk + 1) % run.checkpoint_every == 0:
                    checkpoint.save(ckpt_dir, chunk, learner.state(), {
                        "chunk": chunk, "env_steps": env_steps, "wall_time_s": time.time() - t_start,
                        "config": config_key(exp),
                        "evals": [(s, {k: v.tolist() for k, v in e.items()}) for s, e in evals]},
                        keep=run.keep_checkpoints)
                if run.progress:
                    shown = "exploitability" if "exploitability" in final else "return"
                    print(f"chunk {chunk + 1}/{chunks}: {shown} {final[shown].mean():.4f}, invalid "
                          f"{final['invalid'].mean():.3f} ({time.time() - t_start:.0f} s)", flush=True)
                if stopping:
                    return RunResult(run_dir, {"interrupted": True, "resume": resume_command(run_dir)},
                                     interrupted=True)
    finally:
        log.close()
        env.close()
    rows = read_metrics(run_dir)
    key = "eval/exploitability" if "exploitability" in evals[-1][1] else "eval/return"
    plot_curve(run_dir, rows, key, f"{exp.algo} ({c.estimator}) on {exp.env}")
    if dialogues:
        checkpoint.atomic_write(run_dir / "samples.txt", "\n\n".join(
            f"dialogue {i + 1}:\n" + "\n".join(f"  {line}" for line in d) for i, d in enumerate(dialogues)).encode())
    summary = write_summary(run_dir, evals[-1][1], {
        "algo": exp.algo, "env": exp.env, "seeds": run.seeds, "model": c.model, "estimator": c.estimator,
        "env_steps_per_seed": chunks * per_chunk * per_update, "updates_per_seed": chunks * per_chunk,
        "eval_episodes_per_seed": run.eval_episodes, "return_convention": LMGRPO.return_convention,
        "wall_time_s": round(time.time() - t_start, 2),
        "curve": [{"env_steps": s, **{k: float(np.mean(v)) for k, v in e.items()}} for s, e in evals],
    })
    return RunResult(run_dir, summary)


@dataclass
class LoadedLMRun:
    """An lm_grpo run's newest checkpoint, ready to play: `policy` speaks with the seed
    its parameter names (`params [S]`: the seeds' indices), as `LoadedRun` does."""

    exp: Experiment
    policy: Policy
    params: Any
    meta: dict
    path: Path


def _build(exp: Experiment) -> tuple[Any, Any, tuple[int, int, int]]:
    """(environment, learner, chunk schedule) of `exp`; the environment and the model are
    checked before the learner is built (`LMGRPO` checks the budget and the tokenizer)."""
    from coplay.experiment.runner import chunk_schedule
    from coplay.lm.grpo import LMGRPO, check
    from coplay.lm.models import load_model

    c, run = exp.algo_config, exp.run
    env = ENVS.make(exp.env, **exp.env_config)
    check(c, env)
    schedule = chunk_schedule(exp, env.spec)
    learner = LMGRPO(c, env, load_model(c.model, seed=c.model_seed), run.seeds, run.seed, schedule[1] * schedule[2])
    return env, learner, schedule


def _load_newest(exp: Experiment, learner: Any, directory: Path) -> tuple[dict, Path]:
    """Load the newest usable checkpoint of `exp`'s run into `learner`: (its meta, its path)."""
    from coplay.experiment.runner import check_checkpoint_config

    state, meta, path = checkpoint.latest(directory, learner.state(), lambda m, f: check_checkpoint_config(m, exp, f))
    learner.load_state(state)
    return meta, path


def _restore(run_dir: Path) -> tuple[Experiment, Any, Any, dict, Path]:
    """(config, environment, learner with the newest adapters, checkpoint meta, its path)."""
    exp = Experiment.load(run_dir / "config.yaml")
    env, learner, _ = _build(exp)
    meta, path = _load_newest(exp, learner, run_dir / "checkpoints")
    return exp, env, learner, meta, path


def load_lm_run(run_dir: Path) -> LoadedLMRun:
    """The model of an lm_grpo run directory with its newest adapters."""
    from coplay.lm.acting import lm_policy

    exp, _, learner, meta, path = _restore(Path(run_dir))
    return LoadedLMRun(exp, lm_policy(learner.player, learner.use_seed), np.arange(exp.run.seeds), meta, path)


def evaluate_lm_run(run_dir: Path, episodes: int, seed: int) -> dict:
    """`coplay eval` of an lm_grpo run: each seed's evaluation as in training
    (`evaluate`), with its own random streams (`seed`), in `evaluate_run`'s shape."""
    from coplay.eval.stats import summarize

    exp, env, learner, meta, path = _restore(Path(run_dir))
    results: dict[str, list[float]] = {}
    talks: list = []
    for k in range(exp.run.seeds):
        out, dialogues = evaluate(learner, env, k, 1_000_000 + seed, episodes)
        talks = dialogues if k == 0 else talks
        for name, v in out.items():
            results.setdefault(name, []).append(float(np.mean(v)))
    per_seed = np.asarray(results.pop("return"))
    return {"checkpoint": str(path), "env_steps": meta.get("env_steps"), "per_seed": per_seed.tolist(),
            "return": summarize(per_seed), "episodes": episodes, "gif": None, "dialogues": talks,
            "measures": {k: float(np.mean(v)) for k, v in results.items()}}
