"""`coplay explain`: the Shapley value of each agent (or team) of a trained run
(`coplay.eval.shapley`).

    coplay explain runs/spread                        # each agent, absent agents play random actions
    coplay explain runs/spread@1 --replace noop       # seed 1 of the run; absent agents stand still
    coplay explain runs/teams --teams --replace runs/other@0 --episodes 256

The team is one seed of the run (`<run dir>@<seed>`, seed 0 by default). `--replace`
says who plays the agents outside a coalition: `noop`, `random`, `teammate`, a scripted
player of the environment, or another run (`<run dir>[@<seed>]`) trained on it.
Exact over every coalition up to `--exact-up-to` players (8), sampled permutations
beyond (or with `--method permutations`).

Writes to the output directory: `shapley.md` (the table), `shapley.json` and
`shapley.png` (the values with their 95% intervals).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import jax

from coplay.algos.common.bots import BOTS, make_bot
from coplay.core.errors import ConfigError
from coplay.core.registry import ENVS
from coplay.eval.shapley import METHODS, REPLACEMENTS, Shapley, shapley
from coplay.experiment import checkpoint
from coplay.experiment.host import HostEngine
from coplay.experiment.outputs import check_output
from coplay.experiment.playback import load_run
from coplay.experiment.rundir import portable
from coplay.experiment.tournament import _split_seed, run_seeds


def _one_seed(entry: str) -> tuple[Any, Any, int]:
    """(loaded run, that seed's params, seed) of `<run dir>[@<seed>]`."""
    path, _ = _split_seed(entry)
    if not Path(path).is_dir():
        raise ConfigError(f"{entry!r} is not a run directory")
    run = load_run(path)
    seed = run_seeds(entry, run)[0]
    return run, jax.tree.map(lambda x: x[seed], run.params), seed


def run_explain(entry: str, replace: str = "random", episodes: int = 128, teams: bool = False,
                method: str = "auto", exact_up_to: int = 8, permutations: int = 128, seed: int = 0,
                out_dir: str | Path | None = None) -> dict[str, Any]:
    """Load the run, check every input and the output directory, then play the coalitions."""
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 2:
        raise ConfigError(f"--episodes {episodes!r} must be an integer >= 2")
    if method not in METHODS:
        raise ConfigError(f"--method {method!r}: valid methods are {', '.join(METHODS)}")
    if isinstance(permutations, bool) or not isinstance(permutations, int) or permutations < 2:
        raise ConfigError(f"--permutations {permutations!r} must be an integer >= 2")
    out = check_output(out_dir, what="explanation directory") if out_dir else None
    run, params, run_seed = _one_seed(entry)
    if isinstance(run.engine, HostEngine):
        raise ConfigError(f"{entry!r} was trained on the host engine; coplay explain plays compiled teams")
    env = ENVS.make(run.exp.env, **run.exp.env_config)
    replacement: str | tuple[Any, Any]
    if replace in REPLACEMENTS:
        replacement = replace
    elif replace in BOTS:
        replacement = (make_bot(replace, env), None)
    elif Path(_split_seed(replace)[0]).is_dir():
        other, other_params, _ = _one_seed(replace)
        replacement = (other.policy, other_params)
    else:
        raise ConfigError(f"--replace {replace!r}: valid stand-ins are {', '.join(REPLACEMENTS)}, a scripted "
                          f"player ({', '.join(BOTS)}) or a run directory [@<seed>]")
    name = Path(_split_seed(entry)[0]).name
    if out is None:
        out = check_output(Path("runs") / portable(f"explain-{datetime.now():%Y%m%d-%H%M%S}-{name}"),
                           what="explanation directory")
    result: Shapley = shapley(env, run.policy, params, replacement=replacement, episodes=episodes, teams=teams,
                              method=method, exact_up_to=exact_up_to, permutations=permutations,
                              key=jax.random.PRNGKey(seed), name=replace)
    text = (f"# Shapley values of {name} (seed {run_seed}) in {run.exp.env}\n\n" + result.table() + "\n\n"
            "Each value is what the player adds to the team's return (the mean over agents of the episode "
            f"return) over the stand-in `{replace}`, averaged over every order of joining the team.\n")
    out.mkdir(parents=True, exist_ok=True)
    checkpoint.atomic_write(out / "shapley.md", text.encode())
    record = {"run": str(Path(_split_seed(entry)[0])), "seed": run_seed, "env": run.exp.env,
              "replace": replace, "episode_seed": seed, **result.as_dict()}
    checkpoint.atomic_write(out / "shapley.json", json.dumps(record, indent=2).encode())
    result.plot(out / "shapley.png")
    return {"out_dir": out, "result": result, "text": text}
