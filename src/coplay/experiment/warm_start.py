"""Start a run from another run's trained networks: `init_from=<run dir>`.

    coplay train algo=cfcql env=spread algo.dataset=data/spread.vlt/medium name=offline
    coplay train algo=qmix env=spread init_from=runs/offline algo.eps_start=0.1

The second run is the first one fine-tuned online: it builds its trainer as
usual and then replaces the parameter groups it shares with the source run
(the top-level entries of the trainer state's `params`: `agent` and `mixer` for
the Q family, `actor` and `critic` for PPO's) with the source's newest
checkpoint, target networks included. Everything else starts fresh: the
optimiser, the replay buffer, the exploration schedule, the environments.
`init_params=agent:actor` names the groups to copy, `source:destination`,
where the names differ (behaviour cloning's `agent` network is the same
network as MAPPO's `actor` when their sizes agree).

The source is read from its checkpoint file alone (its dataset, an offline
run's, need not still exist); it must have been made for the same environment
and have one seed or as many as this run. Everything is checked, and a mismatch
named, before the run's training program compiles. A resumed run continues
from its own checkpoint and does not read the source again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from coplay.core.errors import ConfigError
from coplay.experiment import checkpoint
from coplay.experiment.config import Experiment


def pairs(spec: str | None, source: set[str], destination: set[str]) -> list[tuple[str, str]]:
    """The (source group, destination group) pairs to copy: those `spec` names
    ("agent:actor,mixer" -- a bare name keeps its name), else every group both have."""
    if spec is None:
        shared = sorted(source & destination)
        if not shared:
            raise ConfigError(f"init_from: the source run's parameter groups ({', '.join(sorted(source))}) and this "
                              f"run's ({', '.join(sorted(destination))}) share no name; say which to copy with "
                              "init_params=<source>:<destination>")
        return [(g, g) for g in shared]
    out = []
    for part in spec.split(","):
        src, _, dst = part.strip().partition(":")
        dst = dst or src
        if src not in source:
            raise ConfigError(f"init_params={spec!r}: the source run has no parameter group {src!r}; it has "
                              f"{', '.join(sorted(source))}")
        if dst not in destination:
            raise ConfigError(f"init_params={spec!r}: this run has no parameter group {dst!r}; it has "
                              f"{', '.join(sorted(destination))}")
        out.append((src, dst))
    return out


def source_run(exp: Experiment) -> tuple[Path, dict[str, Any]]:
    """The source run's newest readable checkpoint (its path, and its arrays by name),
    refused if the directory is not a run of this environment or has none."""
    directory = Path(str(exp.run.init_from))
    if not (directory / "config.yaml").exists():
        raise ConfigError(f"init_from={directory}: not a coplay run directory (no config.yaml)")
    source = Experiment.load(directory / "config.yaml")
    if (source.env, source.env_config) != (exp.env, exp.env_config):
        raise ConfigError(f"init_from={directory}: that run trained on env={source.env} {source.env_config}, this "
                          f"one on env={exp.env} {exp.env_config}; start from a run of the same environment")
    errors = []
    for path in reversed(checkpoint.list_checkpoints(directory / "checkpoints")):
        try:
            return path, checkpoint.arrays(path)
        except checkpoint.CheckpointError as e:
            errors.append(str(e))
    raise ConfigError(f"init_from={directory}: no usable checkpoint ({'; '.join(errors) or 'none written'})")


def groups(arrays: dict[str, Any]) -> set[str]:
    """The parameter groups of a checkpoint's arrays (names like `.params['agent']...`)."""
    return {name[len(".params['"):].split("']")[0] for name in arrays if name.startswith(".params['")}


def copied_params(exp: Experiment, params: dict) -> tuple[dict, list[tuple[str, str]], Path]:
    """`params` (every seed's, stacked: `[S, ...]` leaves, or their abstract shapes)
    with the copied groups taken from the source run's newest checkpoint, the
    (source, destination) groups copied and that checkpoint's path; refused, naming
    the difference, where the networks or the seed counts do not fit."""
    path, arrays = source_run(exp)
    where = f"init_from={exp.run.init_from}"
    seeds = exp.run.seeds
    out = dict(params)
    named = pairs(exp.run.init_params, groups(arrays), set(params))
    for src, dst in named:
        leaves, treedef = jax.tree_util.tree_flatten_with_path(params[dst])
        held = sum(name.startswith(f".params['{src}']") for name in arrays)
        if held != len(leaves):
            raise ConfigError(f"{where}: that run's {src!r} network has {held} arrays and this run's {dst!r} "
                              f"{len(leaves)}: the networks differ (hidden_size, num_layers, recurrent and "
                              "share_params must match)")
        copied = []
        for key_path, want in leaves:
            leaf = jax.tree_util.keystr(key_path)
            got = arrays.get(f".params['{src}']{leaf}")
            if got is None or np.shape(got)[1:] != tuple(want.shape[1:]):
                found = "none" if got is None else str(np.shape(got)[1:])
                raise ConfigError(f"{where}: this run's {dst}{leaf} is {tuple(want.shape[1:])} and that run's "
                                  f"{src}{leaf} {found}: the networks differ (hidden_size, num_layers, recurrent "
                                  "and share_params must match)")
            if np.shape(got)[0] not in (1, seeds):
                raise ConfigError(f"{where}: that run has {np.shape(got)[0]} seeds and this one {seeds}; start from "
                                  f"a run of one seed (copied to every seed) or of {seeds}")
            copied.append(jnp.broadcast_to(jnp.asarray(got, want.dtype), want.shape))
        out[dst] = jax.tree_util.tree_unflatten(treedef, copied)
    return out, named, path


def check(exp: Experiment, shapes: Any) -> None:
    """Everything `apply` would refuse, from the abstract shapes of a seed's state
    (`jax.eval_shape(trainer.init, key)`): before anything compiles."""
    if not isinstance(getattr(shapes, "params", None), dict):
        raise ConfigError(f"init_from: algo={exp.algo} keeps no parameter groups a run can start from (its state "
                          "has no `params` groups); init_from fills those of the Q-learning, offline and PPO trainers")
    stacked = jax.tree.map(lambda x: jax.ShapeDtypeStruct((exp.run.seeds, *x.shape), x.dtype), shapes.params)
    copied_params(exp, stacked)


def apply(exp: Experiment, state: Any) -> Any:
    """`state` (every seed's, stacked) with the copied groups replaced by the source
    run's, in its target networks too where it keeps them (a copy of the online ones,
    as every fresh trainer starts its target)."""
    params, named, path = copied_params(exp, state.params)
    print(f"init_from: {', '.join(s if s == d else f'{s} -> {d}' for s, d in named)} from {path}", flush=True)
    new = {"params": params}
    target = getattr(state, "target_params", None)
    if isinstance(target, dict):
        # copies: the training program donates its input, and one buffer cannot be donated twice
        new["target_params"] = {k: jax.tree.map(jnp.copy, params[k]) if k in params else v
                                for k, v in target.items()}
    return state.replace(**new)
