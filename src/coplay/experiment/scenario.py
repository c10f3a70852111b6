"""`coplay scenario`: focal populations scored against background populations
(Melting Pot 2.0's protocol, `coplay.eval.scenarios`).

    coplay scenario runs/harvest cooperator env=commons_harvest --episodes 16
    coplay scenario runs/a@0 env=clean_up --kinds visitor --background cleaner,mixed,runs/b

A focal population is a run directory (each seed an independent population), `<run
dir>@<seed>` (that seed), or a scripted player's name (`coplay.algos.common.social_bots`).
The environment comes from `env=` (with `env.<field>=` overrides) or from the runs.
The background populations (`--background`, comma-separated) are scripted players
by name, `mixed` (all of the substrate's scripted players), or run directories
(each seed a member drawn per episode); by default each scripted player alone and
`mixed`. The reference populations of the normalisation are every scripted player of
the substrate and the random player.

Writes to the output directory: `scenarios.json` (every row, the references'
scores), `scenarios.md` (the table, and each focal population's mean normalised
score) and `scenarios.png`.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import jax
import numpy as np

from coplay.algos.common.social_bots import bots_for
from coplay.core.errors import ConfigError
from coplay.core.registry import ENVS
from coplay.eval.scenarios import KINDS, Member, default_backgrounds, evaluate_scenarios, scenarios, substrate_roster
from coplay.experiment import checkpoint
from coplay.experiment.outputs import check_output
from coplay.experiment.playback import LoadedRun, load_run
from coplay.experiment.rundir import portable
from coplay.experiment.tournament import _common_env, _split_seed, parse_env, run_seeds


def run_scenarios(entries: list[str], overrides: list[str] | None = None, background: str | None = None,
                  kinds: str | None = None, episodes: int = 16, out_dir: str | Path | None = None,
                  seed: int = 0, bootstrap: int = 2000) -> dict[str, Any]:
    """Resolve the focal and background populations, play every scenario, write the table."""
    env_name, env_fields = parse_env(overrides or [])
    kind_list = KINDS if kinds is None else tuple(k.strip() for k in kinds.split(",") if k.strip())
    bad = [k for k in kind_list if k not in KINDS]
    if bad or not kind_list:
        raise ConfigError(f"--kinds {kinds!r}: valid kinds are {', '.join(KINDS)}")
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 2:
        raise ConfigError(f"--episodes {episodes!r} must be an integer >= 2")
    if not entries:
        raise ConfigError("name at least one focal population: a run directory, <run dir>@<seed> or a scripted player")
    out = check_output(out_dir, what="scenario directory") if out_dir else None

    # run directories among the focal and the background populations
    bg_entries = [] if background is None else [b.strip() for b in background.split(",") if b.strip()]
    runs: dict[str, LoadedRun] = {}
    for entry in [*entries, *bg_entries]:
        path, _ = _split_seed(entry)
        if Path(path).is_dir() and path not in runs:
            runs[path] = load_run(path)
    if env_name is None:
        if not runs:
            raise ConfigError("name the substrate with env=<name> when no population is a run directory")
        env_name, env_fields = _common_env(runs, False, env_fields)
    env = ENVS.make(env_name, **env_fields)
    bots = bots_for(env)
    roster = substrate_roster(env)          # refuses environments that are not social substrates
    scripted = [m.name for m in roster]
    if out is None:
        out = check_output(Path("runs") / portable(f"scenario-{datetime.now():%Y%m%d-%H%M%S}-{env_name}"),
                           what="scenario directory")

    def unknown(entry: str, role: str) -> ConfigError:
        return ConfigError(f"{role} {entry!r} is neither a scripted player of {env_name!r} "
                           f"({', '.join(scripted)}{', mixed' if role == 'background' else ''}) nor a run directory")

    backgrounds: dict[str, tuple[str, ...]] = {}
    if not bg_entries:
        backgrounds = default_backgrounds(bots)
    for entry in bg_entries:
        path, _ = _split_seed(entry)
        if entry == "mixed":
            backgrounds["mixed"] = tuple(bots)
        elif entry in scripted:
            backgrounds[entry] = (entry,)
        elif path in runs:
            run = runs[path]
            names = []
            for k in run_seeds(entry, run):
                name = f"{Path(path).name}@{k}"
                if name not in {m.name for m in roster}:
                    roster.append(Member(name, run.policy, jax.tree.map(lambda x, k=k: x[k], run.params)))
                names.append(name)
            backgrounds[Path(path).name + entry[len(path):]] = tuple(names)       # the run's name, and @<seed>
        else:
            raise unknown(entry, "background")

    focals: list[tuple[str, Any, Any]] = []
    for entry in entries:
        path, _ = _split_seed(entry)
        if entry in scripted:
            focals.append((entry, next(m.policy for m in roster if m.name == entry), None))
        elif path in runs:
            run = runs[path]
            chosen = np.asarray(run_seeds(entry, run))
            focals.append((Path(path).name + entry[len(path):], run.policy,
                           jax.tree.map(lambda x, chosen=chosen: x[chosen], run.params)))
        else:
            raise unknown(entry, "focal population")

    evaluation = evaluate_scenarios(env, roster, focals, scenarios(env.spec.num_agents, backgrounds, kind_list),
                                    [m.name for m in roster[:len(bots) + 1]], episodes=episodes,
                                    key=jax.random.PRNGKey(seed), reps=bootstrap)
    summary = evaluation.summary()
    text = (f"# Scenarios of {env_name}: {episodes} episodes per scenario and population\n\n"
            "Per-capita return of the focal seats (IQM over seeds and episodes, 95% bootstrap interval), and the "
            "same normalised between the lowest (0) and highest (1) reference population's mean.\n\n"
            + evaluation.table() + "\n\nMean normalised score over the scenarios: "
            + ", ".join(f"{k} {v:.3f}" for k, v in summary.items()) + "\n")
    out.mkdir(parents=True, exist_ok=True)
    checkpoint.atomic_write(out / "scenarios.md", text.encode())
    record = {"env": env_name, "env_config": env_fields, "episodes": episodes, "seed": seed,
              "backgrounds": {k: list(v) for k, v in backgrounds.items()}, "rows": [r.as_dict() for r in
                                                                                  evaluation.rows],
              "references": evaluation.references, "summary": summary}
    checkpoint.atomic_write(out / "scenarios.json", json.dumps(_finite(record), indent=2).encode())
    evaluation.plot(str(out / "scenarios.png"), title=f"Scenarios of {env_name}")
    return {"out_dir": out, "evaluation": evaluation, "text": text, "summary": summary}


def _finite(x: Any) -> Any:
    """`x` with every non-finite float (an undefined normalised score) as None, for JSON."""
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_finite(v) for v in x]
    return None if isinstance(x, float) and not np.isfinite(x) else x
