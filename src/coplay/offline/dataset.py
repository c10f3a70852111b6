"""Offline datasets: episodes recorded from any policy coplay can run, stored in
OG-MARL's layout so that either library reads the other's.

    data = record(coplay.make("spread"), random_policy(env), episodes=100, key=key, quality="poor")
    save(data, "datasets/spread.vlt/poor")          # atomically: a partial dataset is never a whole one
    data = load("datasets/spread.vlt/poor", env=coplay.make("spread"))   # refused for another environment
    dataset_stats(data)                              # returns, lengths, action coverage

The experience is one stream of steps, episodes one after another, every leaf
with a leading buffer axis of 1 and a time axis T, the leaves and shapes of
OG-MARL's vaults:

    observations  [1, T, N, O] float32   what each agent saw
    actions       [1, T, N]    int32     what it did (float32 [1, T, N, d] for continuous actions)
    rewards       [1, T, N]    float32   what it got for it ([1, T, N, K] with K objectives)
    terminals     [1, T, N]    float32   1 where the episode ended with this step by the game itself
    truncations   [1, T, N]    float32   1 where it ended by the time limit
    infos.legals  [1, T, N, A] bool      the legal actions at the observation
    infos.state   [1, T, S]    float32   the global state

A dataset is stored through flashbax's Vault (tensorstore zarr arrays in an
OCDBT store) at `<root>/<name>.vlt/<quality>`, OG-MARL's path scheme, with
coplay's description of it (the environment's spec and settings, the quality,
the seed, the policy) in the vault's metadata under "coplay". It is written to
a hidden sibling directory and renamed into place only once complete, so a
crash leaves no directory that `load` could mistake for a dataset.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from coplay.core.env import Env
from coplay.core.errors import ConfigError, StorageError, did_you_mean
from coplay.core.lock import held
from coplay.core.spaces import Box
from coplay.core.types import EnvSpec

QUALITIES = ("poor", "medium", "good", "replay", "mixed")
LEAVES = ("observations", "actions", "rewards", "terminals", "truncations")

# act(key, obs [E, N, O], mask [E, N, A]) -> actions [E, N(, d)]
Act = Callable[[jax.Array, jax.Array, jax.Array], jax.Array]


@dataclass
class Actor:
    """A policy with a memory, as `record` plays it: `act(key, obs, mask, carry, reset)
    -> (actions, carry)` (reset [E]: the episodes that start now) and `initial_carry(E)`."""

    act: Callable[..., tuple[jax.Array, Any]]
    initial_carry: Callable[[int], Any]


def _actor(act: Act | Actor) -> Actor:
    if isinstance(act, Actor):
        return act
    return Actor(act=lambda key, obs, mask, carry, reset: (act(key, obs, mask), carry),
                 initial_carry=lambda episodes: jnp.zeros(()))


@dataclass
class Dataset:
    """Recorded steps in OG-MARL's layout (module doc) and coplay's description of them."""

    experience: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def steps(self) -> int:
        return int(self.experience["observations"].shape[1])

    @property
    def episode_ends(self) -> np.ndarray:
        """`[episodes]`: the index of each episode's last step."""
        ended = np.maximum(self.experience["terminals"][0], self.experience["truncations"][0]).max(-1) > 0
        return np.flatnonzero(ended)


def spec_record(spec: EnvSpec) -> dict[str, Any]:
    """What a dataset remembers of the environment it was made for: enough to refuse another."""
    return {"name": spec.name, "num_agents": spec.num_agents, "obs_shape": list(spec.obs_space.shape),
            "action_space": repr(spec.action_space), "state_shape": list(spec.global_state_space.shape),
            "reward_dim": spec.reward_dim, "max_steps": spec.max_steps}


def check_recordable(env: Env) -> None:
    """Refuse an environment whose actions a dataset cannot hold: one discrete action or a
    Box per agent are recorded; utterances (a text environment's token arrays) are not."""
    space = env.spec.action_space
    if not env.spec.discrete_actions and not isinstance(space, Box):
        kind = "utterances (token arrays)" if env.spec.name.startswith("text:") else repr(space)
        raise ConfigError(f"env={env.spec.name!r} acts with {kind}: coplay's datasets record one discrete action or "
                          "a Box of actions per agent, so this environment cannot be recorded")


def random_policy(env: Env) -> Act:
    """Uniform over each agent's legal actions (uniform in the bounds for continuous actions)."""
    check_recordable(env)
    if env.spec.discrete_actions:
        return lambda key, obs, mask: jax.random.categorical(key, jnp.where(mask, 0.0, -jnp.inf))
    space = env.spec.action_space
    assert isinstance(space, Box)
    low, high = np.broadcast_to(space.low, space.shape), np.broadcast_to(space.high, space.shape)
    return lambda key, obs, mask: jax.random.uniform(key, obs.shape[:2] + space.shape, jnp.float32, low, high)


def epsilon_mixture(act: Act, env: Env, epsilon: float) -> Act:
    """`act`, with each agent's action replaced by a random legal one with probability `epsilon`."""
    if not 0.0 <= epsilon <= 1.0:
        raise ConfigError(f"epsilon={epsilon} must be in [0, 1]")
    noise = random_policy(env)

    def mixed(key, obs, mask):
        k_act, k_noise, k_coin = jax.random.split(key, 3)
        chosen, random = act(k_act, obs, mask), noise(k_noise, obs, mask)
        coin = jax.random.uniform(k_coin, chosen.shape[:2]) < epsilon
        return jnp.where(coin.reshape(coin.shape + (1,) * (chosen.ndim - 2)), random, chosen)

    return mixed


def record(env: Env, act: Act | Actor, episodes: int, key: jax.Array, quality: str,
           meta: dict | None = None) -> Dataset:
    """`episodes` whole episodes of `act` on `env` (each played from its reset to its end,
    side by side), deterministic from `key`, as one stream of steps. `act` sees each
    agent's observation in the environment's shape, `[E, N, *obs_shape]`; the dataset
    stores it flattened, `[T, N, O]` (OG-MARL's layout)."""
    if quality not in QUALITIES:
        raise ConfigError(f"quality={quality!r} is not one of {', '.join(QUALITIES)}")
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
        raise ConfigError(f"episodes={episodes!r}: a dataset needs a whole number of at least 1 episode")
    check_recordable(env)
    spec = env.spec
    horizon = spec.max_steps
    actor = _actor(act)

    def play(key):
        k_reset, k_run = jax.random.split(key)
        state, ts = jax.vmap(env.reset)(jax.random.split(k_reset, episodes))
        over = jnp.zeros((episodes,), bool)
        memory = actor.initial_carry(episodes)

        def step(carry, k):
            state, ts, over, memory, first = carry
            k_act, k_env = jax.random.split(k)
            action, memory = actor.act(k_act, ts.obs, ts.action_mask, memory, jnp.full((episodes,), first))
            new_state, new_ts = jax.vmap(env.step)(state, action, jax.random.split(k_env, episodes))
            row = {"observations": ts.obs.reshape(episodes, spec.num_agents, -1).astype(jnp.float32),
                   "actions": action, "rewards": new_ts.reward.astype(jnp.float32),
                   "done": new_ts.done, "truncated": new_ts.truncated, "legals": ts.action_mask,
                   "state": ts.global_state.reshape(episodes, -1).astype(jnp.float32), "active": ts.active,
                   "valid": ~over}
            return (new_state, new_ts, over | new_ts.done, memory, jnp.asarray(False)), row

        _, rows = jax.lax.scan(step, (state, ts, over, memory, jnp.asarray(True)), jax.random.split(k_run, horizon))
        return rows

    rows = jax.device_get(jax.jit(play)(key))                                  # each [T, E, ...]
    valid = np.swapaxes(np.asarray(rows["valid"]), 0, 1)                       # [E, T]: the steps each episode had
    take = lambda x: np.swapaxes(np.asarray(x), 0, 1)[valid][None]            # noqa: E731 - episodes one after another
    n = spec.num_agents
    done, truncated = take(rows["done"])[0], take(rows["truncated"])[0]
    per_agent = lambda flag: np.broadcast_to(flag[:, None], (flag.shape[0], n)).astype(np.float32)[None]  # noqa: E731
    experience = {
        "observations": take(rows["observations"]),
        "actions": take(rows["actions"]).astype(np.int32 if spec.discrete_actions else np.float32),
        "rewards": take(rows["rewards"]),
        "terminals": per_agent(done & ~truncated),
        "truncations": per_agent(truncated),
        "infos": {"legals": take(rows["legals"]).astype(bool), "state": take(rows["state"])},
    }
    active = take(rows["active"]).astype(bool)
    if not active.all():       # agents that take turns: which one acted at each step (a leaf OG-MARL's lack)
        experience["infos"]["active"] = active
    description = {"env": spec_record(spec), "quality": quality, "episodes": episodes, **(meta or {})}
    return Dataset(experience, description)


def concatenate(parts: list[Dataset], meta: dict[str, Any]) -> Dataset:
    """The parts' episodes one after another, described by `meta`."""
    experience = jax.tree.map(lambda *xs: np.concatenate(xs, axis=1), *[p.experience for p in parts])
    return Dataset(experience, meta)


def dataset_stats(data: Dataset) -> dict[str, Any]:
    """Episode returns (each agent's, averaged over agents; per objective with several),
    lengths, and for discrete actions the share of each agent's actions taken at least once."""
    ends = data.episode_ends
    starts = np.concatenate([[0], ends[:-1] + 1])
    rewards = data.experience["rewards"][0]
    returns = np.stack([rewards[s:e + 1].sum(0).mean(0) for s, e in zip(starts, ends)]) if len(ends) else np.zeros(0)
    out: dict[str, Any] = {"episodes": int(len(ends)), "steps": data.steps,
                           "return_mean": np.asarray(returns.mean(0)).tolist() if len(ends) else None,
                           "return_min": np.asarray(returns.min(0)).tolist() if len(ends) else None,
                           "return_max": np.asarray(returns.max(0)).tolist() if len(ends) else None,
                           "length_mean": float(np.mean(ends - starts + 1)) if len(ends) else None,
                           "returns": returns.tolist()}
    actions = data.experience["actions"][0]
    legals = data.experience["infos"]["legals"][0]
    if actions.ndim == 2 and legals.shape[-1]:
        taken = np.zeros(legals.shape[1:], bool)                                  # [N, A]
        taken[np.arange(actions.shape[1])[None, :].repeat(len(actions), 0), actions] = True
        out["action_coverage"] = taken.mean(-1).tolist()                          # per agent
    return out


# ----- storage -------------------------------------------------------------------------------------


def _vault_path(path: str | os.PathLike) -> tuple[Path, str, str]:
    """`<root>/<name>.vlt/<uid>` -> (root, name.vlt, uid)."""
    p = Path(path).absolute()
    if not p.parent.name:
        raise ConfigError(f"a dataset path is <directory>/<name>.vlt/<quality>, got {str(path)!r}")
    return p.parent.parent, p.parent.name, p.name


def _quiet() -> contextlib.AbstractContextManager:
    return contextlib.redirect_stdout(io.StringIO())   # flashbax's Vault prints where it writes


def save(data: Dataset, path: str | os.PathLike) -> Path:
    """Write `data` at `path` (`<root>/<name>.vlt/<quality>`), atomically. An existing
    dataset there is refused, not overwritten; a second process writing the same path
    meets `InUseError` (see `writing`)."""
    root, name, uid = _vault_path(path)
    final = root / name / uid
    if data.steps == 0:
        raise ConfigError("the dataset is empty: it has no steps to save")
    with writing(path):
        if final.exists():
            raise ConfigError(f"{final} already exists; remove it or record to another path")
        _write_vault(data, root, name, uid)
    return final


@contextmanager
def writing(path: str | os.PathLike) -> Iterator[Path]:
    """Hold the dataset `path` (`<root>/<name>.vlt/<quality>`) for this process alone while
    inside (`coplay.core.lock`; a second writer meets `InUseError` naming this one), its
    directory made and checked writable first; the unfinished writes that a killed writer
    left are removed. Yields the dataset's directory."""
    root, name, uid = _vault_path(path)
    vault = root / name
    try:
        vault.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=vault):
            pass
    except OSError as e:
        raise StorageError(f"cannot write the dataset {vault / uid}: {e.strerror or e}") from None
    with held(vault / f".{uid}.lock", f"the dataset {vault / uid}"):
        for stale in vault.glob(f".{uid}.partial-*"):      # only a writer holding this lock makes them
            shutil.rmtree(stale, ignore_errors=True)
        yield vault / uid


def _write_vault(data: Dataset, root: Path, name: str, uid: str) -> None:
    from flashbax.buffers.trajectory_buffer import TrajectoryBufferState
    from flashbax.vault import Vault

    final = root / name / uid
    partial = f".{uid}.partial-{os.getpid()}"
    experience = jax.tree.map(jnp.asarray, data.experience)
    state = TrajectoryBufferState(experience=experience, current_index=jnp.asarray(data.steps, jnp.int32),
                                  is_full=jnp.asarray(False))
    meta = {"coplay": json.loads(json.dumps({**data.meta, "steps": data.steps}))}
    with _quiet():
        vault = Vault(vault_name=name, experience_structure=experience, rel_dir=str(root), vault_uid=partial,
                      metadata=meta)
        written = vault.write(state)
    if written != data.steps:
        raise ConfigError(f"writing {final} stored {written} of {data.steps} steps")
    os.replace(root / name / partial, final)             # complete: only now does the dataset exist


def _qualities(directory: str | os.PathLike) -> list[str]:
    """The datasets a `<name>.vlt` directory holds, by quality (its finished ones only)."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(p.name for p in directory.iterdir() if not p.name.startswith(".") and (p / "metadata.json").is_file())


def _missing(vault: Path, uid: str) -> ConfigError:
    """The refusal of `<vault>/<uid>`, which holds no dataset: it may be the `.vlt` directory
    itself (its qualities named), a misspelt quality (the close one and those there named), or
    a write that did not finish."""
    where = vault / uid
    inside = _qualities(where)
    if inside:
        return ConfigError(f"no dataset at {where}: it is a dataset directory, which holds the qualities "
                           f"{', '.join(inside)}; name one of them, e.g. {where / inside[0]}")
    partial = sorted(p.name for p in vault.glob(f".{uid}.partial-*")) if vault.is_dir() else []
    hint = f" (an unfinished write was left as {partial[0]})" if partial else ""
    beside = _qualities(vault)
    if beside:
        hint += f"{did_you_mean(uid, beside) or ';'} {vault} holds the qualities {', '.join(beside)}"
    return ConfigError(f"no dataset at {where}{hint}")


def load(path: str | os.PathLike, env: Env | None = None) -> Dataset:
    """Read the dataset at `path`; with `env`, refuse one made for another environment.
    A vault written by OG-MARL (no coplay description) is read as it is."""
    from flashbax.vault import Vault

    root, name, uid = _vault_path(path)
    where = root / name / uid
    if not (where / "metadata.json").exists():
        raise _missing(root / name, uid)
    try:
        meta = json.loads((where / "metadata.json").read_text()).get("coplay", {})
        with _quiet():
            experience = Vault(vault_name=name, rel_dir=str(root), vault_uid=uid).read().experience
    except Exception as e:   # noqa: BLE001 - tensorstore and json raise their own kinds on damaged files
        raise ConfigError(f"the dataset at {where} cannot be read: {type(e).__name__}: {e}") from None
    experience = jax.tree.map(np.asarray, experience)
    data = Dataset(experience, meta)
    if "steps" in meta and data.steps != meta["steps"]:
        raise ConfigError(f"the dataset at {where} holds {data.steps} steps of the {meta['steps']} it was written "
                          "with: it is truncated or damaged")
    if data.steps == 0:
        raise ConfigError(f"the dataset at {where} is empty")
    if env is not None and "env" in meta and meta["env"] != spec_record(env.spec):
        theirs, ours = meta["env"], spec_record(env.spec)
        diff = ", ".join(f"{k}: {theirs.get(k)} here, {ours[k]} in {env.spec.name!r}" for k in ours
                         if theirs.get(k) != ours[k])
        raise ConfigError(f"the dataset at {where} was made for another environment ({diff})")
    return data
