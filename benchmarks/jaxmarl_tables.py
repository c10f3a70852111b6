"""JaxMARL's published tables reproduced beside JaxMARL's own scripts, in the same run, on the same environment
code: MAPPO and IPPO on SMAX `3m` and `2s3z`, IPPO on Overcooked `cramped_room`, QMIX on SMAX `3m`.

    python benchmarks/jaxmarl_tables.py --jaxmarl PATH/TO/JaxMARL --budget 2000000 --seeds 3
    python benchmarks/jaxmarl_tables.py --jaxmarl ... --rows ippo-smax-3m,qmix-smax-3m --budget 20000 --seeds 1 \\
        --no-write                                             # a smoke run: prints, writes nothing

Each row pairs a coplay trainer on `jaxmarl:<name>` (coplay's adapter over the JaxMARL environment) with the
JaxMARL baseline script that produced the published figure, loaded from a JaxMARL checkout (`--jaxmarl`: the
checkout, or its `baselines` directory) and driven as its own `main` does (`jit(make_train(config))` on one
key), with its config file read and the budget and seed set:

    row                            coplay                         JaxMARL script (config)
    mappo-smax-3m, mappo-smax-2s3z algo=mappo, GRU                MAPPO/mappo_rnn_smax.py (mappo_homogenous_rnn_smax)
    ippo-smax-3m, ippo-smax-2s3z   algo=ippo, GRU                 IPPO/ippo_rnn_smax.py (ippo_rnn_smax)
    ippo-overcooked-cramped_room   algo=ippo, MLP on the grid     IPPO/ippo_ff_overcooked.py (ippo_ff_overcooked)
    ippo-cnn-overcooked-cramped_room algo=ippo algo.torso=cnn     IPPO/ippo_cnn_overcooked.py (ippo_cnn_overcooked);
                                                                  only where coplay's PPO has `algo.torso`
    qmix-smax-3m                   algo=qmix, GRU                 QLearning/qmix_rnn.py (config + alg/ql_rnn_smax)

JaxMARL 0.2 has no QMIX config of its own for SMAX: `qmix_rnn.py` reads `alg/ql_rnn_smax.yaml`, whose header
says it is "valid for iql, vdn, qmix"; that pair is the Q-learning row (map 3m; the file's own map is 3s_vs_5z).
The environment is the installed `jaxmarl` on both sides (the checkout's `jaxmarl` package is not put on the
path; its baseline scripts import the installed one). The scripts' other imports (distrax, hydra-core, omegaconf,
flashbax, wandb) must import: `--pythonpath DIR` adds a directory holding them.

Every JaxMARL config field is mapped onto coplay's fields (`mapping`, from the config file as read, and from
what the script fixes in its code), and what cannot be mapped is listed with the row. The budget (`--budget`
env steps per seed, JaxMARL's TOTAL_TIMESTEPS, which its configs set to 5e6 or 1e7) is the same for both sides:
JaxMARL runs `TOTAL_TIMESTEPS // NUM_STEPS // NUM_ENVS` updates, coplay as many of the same size, in one
compiled chunk (a pair whose steps differ is refused), compiled as coplay compiles a long run (coplay compiles
a run of at most 24 updates without machine-code optimisation, `coplay.experiment.compiled.FEW_UPDATES`, which
the benchmark sets to 0: a short budget would otherwise time that mode, hundreds of times slower for a CNN).
Seeds 0..N-1 (`--seeds`), each seed coplay then JaxMARL, so drift of the machine reaches both; coplay /
JaxMARL is the median of the per-seed ratios of env-steps/s.

Timing: compile (`lower().compile()`, JaxMARL's `make_train` and coplay's state initialisation included) apart
from the steady state; env-steps/s is the steady state, which for JaxMARL's PPO scripts includes the per-update
host callback their code makes to `wandb.log` (here a recorder, as in train_throughput.py).

Learning result at the matched budget, IQM and 95% bootstrap CI over seeds (`coplay.eval.stats.summarize`):

- SMAX, PPO rows: the win rate of the training episodes that ended in the last 5% of updates, JaxMARL's logged
  `win_rate` (its mean of SMAXLogWrapper's `returned_won_episode` over the episodes that ended) and coplay's
  training `win` alike; and coplay's evaluation `win` of the final policy (sampled, `--eval-episodes`).
- SMAX, QMIX: the final greedy policy's win rate over `--eval-episodes` episodes, each side by its own code
  (JaxMARL's in-training test is switched off, as q_throughput.py does: it would be timed with the training;
  its network is run here after training, through its own CTRolloutManager, on the first episode of each env).
- Overcooked: the per-agent return of the training episodes of the last 5% of updates (JaxMARL's logged
  `returned_episode_returns`, the delivery reward without its shaping), and coplay's evaluation return.

Results go to benchmarks/results/jaxmarl_tables.json (`--rows` replaces those rows, keeping the others; each row
states its own budget and seeds), then BENCHMARKS.md (benchmarks/page.py)."""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    RESULTS as RESULTS_DIR,
)
from _common import (
    WandbRecorder,
    fmt_ratio,
    git_blob,
    jaxmarl_imports,
    paired,
    regenerate_page,
    same_budget,
    stamp,
    table,
    version,
    whole_updates,
    write_results,
)

RESULTS = "jaxmarl_tables.json"
COMMAND = "python benchmarks/jaxmarl_tables.py --jaxmarl PATH/TO/JaxMARL"
DEFAULT_BUDGET = 1_000_000
DEFAULT_SEEDS = 3
LAST = 0.05          # the share of the last updates whose training episodes give the learning result


@dataclass(frozen=True)
class Row:
    algo: str                    # coplay's trainer
    env: str                     # JaxMARL id, as `jaxmarl:<env>`
    where: dict                  # the map or layout: {"MAP_NAME": "3m"} or {"layout": "cramped_room"}
    script: str                  # under baselines/
    configs: tuple[str, ...]     # under baselines/, merged in order
    kind: str                    # "ppo_rnn_smax", "ppo_overcooked", "qmix"
    measure: str                 # "win" or "return"
    torso: str | None = None     # coplay's algo.torso, where the row needs one


ROWS = {
    "mappo-smax-3m": Row("mappo", "HeuristicEnemySMAX", {"MAP_NAME": "3m"}, "MAPPO/mappo_rnn_smax.py",
                         ("MAPPO/config/mappo_homogenous_rnn_smax.yaml",), "ppo_rnn_smax", "win"),
    "mappo-smax-2s3z": Row("mappo", "HeuristicEnemySMAX", {"MAP_NAME": "2s3z"}, "MAPPO/mappo_rnn_smax.py",
                           ("MAPPO/config/mappo_homogenous_rnn_smax.yaml",), "ppo_rnn_smax", "win"),
    "ippo-smax-3m": Row("ippo", "HeuristicEnemySMAX", {"MAP_NAME": "3m"}, "IPPO/ippo_rnn_smax.py",
                        ("IPPO/config/ippo_rnn_smax.yaml",), "ppo_rnn_smax", "win"),
    "ippo-smax-2s3z": Row("ippo", "HeuristicEnemySMAX", {"MAP_NAME": "2s3z"}, "IPPO/ippo_rnn_smax.py",
                          ("IPPO/config/ippo_rnn_smax.yaml",), "ppo_rnn_smax", "win"),
    "ippo-overcooked-cramped_room": Row("ippo", "overcooked", {"layout": "cramped_room"}, "IPPO/ippo_ff_overcooked.py",
                                        ("IPPO/config/ippo_ff_overcooked.yaml",), "ppo_overcooked", "return",
                                        torso="mlp"),
    "ippo-cnn-overcooked-cramped_room": Row("ippo", "overcooked", {"layout": "cramped_room"},
                                            "IPPO/ippo_cnn_overcooked.py", ("IPPO/config/ippo_cnn_overcooked.yaml",),
                                            "ppo_overcooked", "return", torso="cnn"),
    "qmix-smax-3m": Row("qmix", "HeuristicEnemySMAX", {"MAP_NAME": "3m"}, "QLearning/qmix_rnn.py",
                        ("QLearning/config/config.yaml", "QLearning/config/alg/ql_rnn_smax.yaml"), "qmix", "win"),
}

# ----- the configs: JaxMARL's fields onto coplay's -----------------------------------------------------------

PPO_FIELDS = {"NUM_ENVS": "num_envs", "NUM_STEPS": "rollout_len", "UPDATE_EPOCHS": "epochs",
              "NUM_MINIBATCHES": "minibatches", "LR": "lr", "ANNEAL_LR": "anneal_lr", "GAMMA": "gamma",
              "GAE_LAMBDA": "gae_lambda", "CLIP_EPS": "clip_eps", "ENT_COEF": "ent_coef", "VF_COEF": "vf_coef",
              "MAX_GRAD_NORM": "max_grad_norm", "ACTIVATION": "activation"}
# What the PPO scripts fix in their code, in coplay's fields: the value loss clipped by CLIP_EPS around the
# rollout's values, advantages normalised per minibatch, and actors' observations without an agent id.
PPO_CODE = {"clip_value": True, "normalize_advantages": True, "agent_id": False}
# ippo_rnn_smax / mappo_rnn_smax: Dense(FC_DIM_SIZE) relu -> GRU(GRU_HIDDEN_DIM) -> Dense(GRU_HIDDEN_DIM or
# FC_DIM_SIZE) relu -> head; coplay's recurrent AgentNet: Dense(H) -> GRU(H) -> num_layers - 1 Dense(H) -> head.
RNN_CODE = {"recurrent": True, "num_layers": 2}
# ippo_ff_overcooked: actor and critic each Dense 64 -> Dense 64 -> head, on the flattened grid.
FF_CODE = {"hidden_size": 64, "num_layers": 2}
# ippo_cnn_overcooked: one CNN (32 channels: 5x5, 3x3, 3x3; Dense 64) shared by the heads; the critic's head is
# Dense 64 -> 1, the actor's a Dense straight from the CNN's 64 (its Dense 64 is computed and left unused).
CNN_CODE = {"hidden_size": 64, "num_layers": 1}
Q_FIELDS = {"NUM_ENVS": "num_envs", "NUM_STEPS": "rollout_len", "BUFFER_BATCH_SIZE": "batch_size",
            "HIDDEN_SIZE": "hidden_size", "MIXER_EMBEDDING_DIM": "mixer_embed",
            "MIXER_HYPERNET_HIDDEN_DIM": "hypernet_hidden", "MIXER_INIT_SCALE": "mixer_init_scale",
            "EPS_START": "eps_start", "EPS_FINISH": "eps_finish", "EPS_DECAY": "eps_decay",
            "MAX_GRAD_NORM": "max_grad_norm", "TAU": "tau", "NUM_EPOCHS": "grad_steps", "LR": "lr",
            "LR_LINEAR_DECAY": "anneal_lr", "GAMMA": "gamma"}
# qmix_rnn: Dense(HIDDEN) relu -> GRU(HIDDEN) -> Dense(actions); double Q (the online network's best valid
# action, valued by the target network); observations with a one-hot agent id (CTRolloutManager); a greedy test.
Q_CODE = {"recurrent": True, "num_layers": 1, "double_q": True, "agent_id": True, "eval_epsilon": 0.0,
          "loss": "mse", "n_step": 1}


def _fmt_value(v) -> str:
    return (repr(v) if v else "") if isinstance(v, str) else str(v)


def mapping(name: str, row: Row, config: dict, has_torso: bool, files: dict) -> tuple[list[str], list[dict],
                                                                                     list[str]]:
    """(coplay overrides, the mapping table's rows, what cannot be mapped) for `row` and JaxMARL's `config`
    (`files`: the config files' own values of what the row sets, `file_values`)."""
    over: list[str] = []
    rows: list[dict] = []
    unmapped: list[str] = []

    def put(jm: str, field: str, value, note: str = "") -> None:
        over.append(f"algo.{field}={value}")
        rows.append({"jaxmarl": jm, "jaxmarl_value": config.get(jm, "(code)") if not jm.startswith("(") else "",
                     "coplay": field, "coplay_value": value, "note": note})

    if row.kind in ("ppo_rnn_smax", "ppo_overcooked"):
        for jm, field in PPO_FIELDS.items():
            put(jm, field, config[jm])
        for field, value in PPO_CODE.items():
            put("(in the script's code)", field, value)
        if config.get("SCALE_CLIP_EPS"):
            unmapped.append("SCALE_CLIP_EPS=True divides CLIP_EPS by the number of agents inside make_train")
        unmapped.append("the learning rate anneals once per update in JaxMARL (`count // (minibatches * epochs)`), "
                        "once per minibatch step in coplay (both linearly to 0 over the run)")
    if row.kind == "ppo_rnn_smax":
        if config["GRU_HIDDEN_DIM"] != config["FC_DIM_SIZE"]:
            unmapped.append(f"FC_DIM_SIZE={config['FC_DIM_SIZE']} differs from GRU_HIDDEN_DIM="
                            f"{config['GRU_HIDDEN_DIM']}: coplay's GRU network has one width (GRU_HIDDEN_DIM used)")
        put("GRU_HIDDEN_DIM", "hidden_size", config["GRU_HIDDEN_DIM"], "FC_DIM_SIZE too (coplay has one width)")
        for field, value in RNN_CODE.items():
            put("(in the script's code)", field, value)
        if row.algo == "ippo":
            unmapped.append("ippo_rnn_smax.py's actor and critic share one network (Dense, GRU) with two heads, "
                            "one Adam and one gradient-norm clip over both; coplay's IPPO has a separate actor "
                            "and critic (each its own GRU, optimiser and clip)")
        else:
            if not config.get("OBS_WITH_AGENT_ID", True):
                unmapped.append("OBS_WITH_AGENT_ID=False: coplay's MAPPO critic always appends the agent's id to "
                                "the world state")
            rows.append({"jaxmarl": "OBS_WITH_AGENT_ID", "jaxmarl_value": config.get("OBS_WITH_AGENT_ID"),
                         "coplay": "(MAPPO's critic: world state + one-hot id, always)", "coplay_value": "",
                         "note": ""})
    if row.kind == "ppo_overcooked":
        code = CNN_CODE if row.torso == "cnn" else FF_CODE
        for field, value in code.items():
            put("(in the script's code)", field, value)
        if has_torso:
            put("(the script's network)", "torso", row.torso)
        put("(in the script's code: info['shaped_reward'])", "shaped_reward", "shaped_reward",
            "added to the delivery reward the policy learns from, on both sides")
        put("REW_SHAPING_HORIZON", "shaping_steps", int(config["REW_SHAPING_HORIZON"]),
            "the shaped reward's weight falls linearly from 1 to 0 over these steps per seed")
        unmapped.append("one network and optimiser for actor and critic in JaxMARL (one gradient-norm clip over "
                        "both" + ("; one CNN shared by both heads" if row.torso == "cnn" else "")
                        + "); coplay clips and steps actor and critic apart, each with its own torso")
        if row.torso == "cnn":
            unmapped.append("JaxMARL's CNN actor puts its head straight on the CNN's 64 features; coplay's actor "
                            "has the same Dense 64 layer as its critic before the head")
            emitted, declared = _overcooked_shapes(row.where["layout"])
            if emitted != declared:
                unmapped.append(f"ippo_cnn_overcooked.py reshapes each observation to the shape Overcooked "
                                f"declares, {declared}, where the environment emits {emitted}: its CNN sees the grid "
                                "reshaped, not transposed (neighbouring cells are not neighbours); kept as the "
                                "script does it. coplay's CNN reads the observation as emitted")
    if row.kind == "qmix":
        for jm, field in Q_FIELDS.items():
            put(jm, field, config[jm])
        rollouts = config["BUFFER_SIZE"] // config["NUM_ENVS"]
        put("BUFFER_SIZE", "buffer_size", rollouts * config["NUM_ENVS"] * config["NUM_STEPS"],
            f"JaxMARL keeps BUFFER_SIZE // NUM_ENVS = {rollouts} rollouts of NUM_STEPS per env")
        put("TARGET_UPDATE_INTERVAL", "target_interval", config["TARGET_UPDATE_INTERVAL"] * config["NUM_EPOCHS"],
            "JaxMARL counts updates; coplay gradient steps (NUM_EPOCHS per update)")
        put("NUM_STEPS", "seq_len", config["NUM_STEPS"], "JaxMARL trains on whole rollouts")
        # JaxMARL learns once `timesteps > LEARNING_STARTS` and its buffer `can_sample`: BUFFER_BATCH_SIZE
        # rollouts stored per env, one per update
        first = config["BUFFER_BATCH_SIZE"] * config["NUM_STEPS"] * config["NUM_ENVS"]
        put("LEARNING_STARTS", "learning_starts", max(config["LEARNING_STARTS"], first),
            f"JaxMARL's buffer samples only once it holds BUFFER_BATCH_SIZE rollouts per env ({first:,} steps)")
        for field, value in Q_CODE.items():
            put("(in the script's code)", field, value)
        put("(in the script's code)", "mixer_init", "weights_and_value",
            "JaxMARL starts every mixer layer orthogonal with gain MIXER_INIT_SCALE (coplay's "
            "algo.mixer_init=orthogonal); the row starts small only the layers that emit Q_tot's parts (the "
            "mixing weights, the first bias, the state value)")
        put("(in the script's code)", "optimizer", "radam", "JaxMARL's Q-learning scripts step with optax.radam")
        put("REW_SCALE", "reward_scale", config.get("REW_SCALE", 1.0), "rewards stored in replay scaled, on both sides")
        unmapped += ["MIXER_INIT_SCALE: coplay's mixer_init_scale (given the same number) is the variance scale "
                     "of the small layers (see mixer_init), not JaxMARL's orthogonal gain",
                     "JaxMARL resets every environment at the start of each update, so each stored rollout of "
                     "NUM_STEPS starts an episode; coplay's rollouts run on across updates and its windows of "
                     "seq_len steps start where they fall",
                     "TEST_DURING_TRAINING, TEST_INTERVAL, TEST_NUM_ENVS, TEST_NUM_STEPS: JaxMARL's in-training "
                     "greedy test is switched off here; both final policies are evaluated after training"]
    env_kwargs = {k: v for k, v in config.get("ENV_KWARGS", {}).items() if k != "layout"}
    if row.env == "HeuristicEnemySMAX":
        over.append(f"env.scenario={config['MAP_NAME']}")
        rows.append({"jaxmarl": "MAP_NAME", "jaxmarl_value": f"{files['MAP_NAME']} in the file; {config['MAP_NAME']} "
                     "here", "coplay": "env.scenario", "coplay_value": config["MAP_NAME"],
                     "note": "the published table's map, on both sides"})
        for k, v in env_kwargs.items():
            over.append(f"env.{k}={v}")
            rows.append({"jaxmarl": f"ENV_KWARGS.{k}", "jaxmarl_value": v, "coplay": f"env.{k}", "coplay_value": v,
                         "note": ""})
    else:
        layout = row.where["layout"]
        over.append(f"env.layout={layout}")
        rows.append({"jaxmarl": "ENV_KWARGS.layout", "jaxmarl_value": f"{files['layout']} in the file; "
                     f"{layout} here", "coplay": "env.layout", "coplay_value": layout,
                     "note": "the published table's layout, on both sides"})
    rows.append({"jaxmarl": "TOTAL_TIMESTEPS", "jaxmarl_value": f"{files['TOTAL_TIMESTEPS']:g} in the file; "
                 f"{config['TOTAL_TIMESTEPS']:,} here", "coplay": "total_steps", "coplay_value": "the same, "
                 "whole updates", "note": "--budget on both sides"})
    return [f"algo={row.algo}", f"env=jaxmarl:{row.env}", *over], rows, unmapped


def _overcooked_shapes(layout: str) -> tuple[tuple, tuple]:
    """(the shape Overcooked's observations have, the shape its observation_space declares) for `layout`."""
    import jax
    import jaxmarl
    from jaxmarl.environments.overcooked import overcooked_layouts

    env = jaxmarl.make("overcooked", layout=overcooked_layouts[layout])
    obs, _ = jax.eval_shape(env.reset, jax.random.PRNGKey(0))
    return tuple(obs[env.agents[0]].shape), tuple(env.observation_space(env.agents[0]).shape)


def has_torso_field(algo: str) -> bool:
    from coplay.experiment.config import parse_overrides

    return hasattr(parse_overrides([f"algo={algo}"]).algo_config, "torso")


# ----- JaxMARL's side ------------------------------------------------------------------------------------------


def baselines_dir(path: Path) -> Path:
    for d in (path, path / "baselines"):
        if (d / "IPPO" / "ippo_rnn_smax.py").exists() and (d / "QLearning" / "qmix_rnn.py").exists():
            return d
    raise SystemExit(f"--jaxmarl {path}: no IPPO/ippo_rnn_smax.py and QLearning/qmix_rnn.py there or in "
                     "baselines/ below it")


def read_config(base: Path, row: Row, budget: int, seed: int) -> dict:
    """The row's config files as the script's hydra entry point reads them (merged in order), with the row's map
    or layout, the budget and the seed set."""
    from omegaconf import OmegaConf

    config: dict = {}
    for f in row.configs:
        config.update(OmegaConf.to_container(OmegaConf.load(base / f)))
    if "MAP_NAME" in row.where:
        config["MAP_NAME"] = row.where["MAP_NAME"]
    if "layout" in row.where:
        config.setdefault("ENV_KWARGS", {})["layout"] = row.where["layout"]
    config.update(TOTAL_TIMESTEPS=budget, SEED=seed, NUM_SEEDS=1)
    return config


def file_values(base: Path, row: Row) -> dict:
    """The config files' own values of what `read_config` sets: the map or layout, the budget."""
    from omegaconf import OmegaConf

    config: dict = {}
    for f in row.configs:
        config.update(OmegaConf.to_container(OmegaConf.load(base / f)))
    return {"MAP_NAME": config.get("MAP_NAME"), "layout": config.get("ENV_KWARGS", {}).get("layout"),
            "TOTAL_TIMESTEPS": config.get("TOTAL_TIMESTEPS")}


_MODULES: dict[str, object] = {}


def load_script(base: Path, script: str):
    """The script as a module (each once), its directory on the path for its own imports."""
    path = base / script
    if script not in _MODULES:
        if str(path.parent) not in sys.path:
            sys.path.insert(0, str(path.parent))
        spec = importlib.util.spec_from_file_location(f"jaxmarl_baseline_{path.stem}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _MODULES[script] = mod
    return _MODULES[script]


OVERCOOKED_SHIM = ("the Overcooked scripts call `env.action_space()` with no agent, which jaxmarl 0.2's Overcooked "
                   "refuses (its `action_space(agent)` takes one): the script's environment is given `agent_0` by "
                   "default (both agents have the same 6 actions); nothing else of it is changed")


class _DefaultAgentSpace:
    """`jaxmarl` as the Overcooked scripts see it: `make` builds the environment, whose `action_space` then
    takes its agent by default (OVERCOOKED_SHIM)."""

    def make(self, name: str, **kwargs):
        import jaxmarl

        env = jaxmarl.make(name, **kwargs)
        space = env.action_space
        env.action_space = lambda agent=env.agents[0]: space(agent)
        return env


def _late(values, fraction: float = LAST) -> float:
    """Mean of the finite values among the last `fraction` of them (at least one); where none of those is
    finite (no episode ended in those updates: coplay's NaN), the last finite value before them."""
    import numpy as np

    v = np.asarray(values, np.float64).reshape(-1)
    tail = v[-max(1, math.ceil(fraction * v.size)):]
    tail = tail[np.isfinite(tail)]
    if tail.size:
        return float(tail.mean())
    finite = v[np.isfinite(v)]
    return float(finite[-1]) if finite.size else float("nan")


def jaxmarl_run(base: Path, row: Row, budget: int, seed: int, episodes: int) -> dict:
    import jax
    import numpy as np

    mod = load_script(base, row.script)
    config = read_config(base, row, budget, seed)
    out: dict = {"library": "jaxmarl", "seed": seed}
    recorder, saved = WandbRecorder(), getattr(mod, "wandb", None)
    mod.wandb = recorder
    try:
        t0 = time.perf_counter()
        if row.kind == "qmix":
            config.update(TEST_DURING_TRAINING=False, WANDB_MODE="disabled")
            env, _ = mod.env_from_config(copy.deepcopy(config))
            train = jax.jit(mod.make_train(config, env))
        else:
            cfg = copy.deepcopy(config)
            if row.kind == "ppo_overcooked":
                from jaxmarl.environments.overcooked import overcooked_layouts

                cfg["ENV_KWARGS"]["layout"] = overcooked_layouts[row.where["layout"]]
                mod.jaxmarl = _DefaultAgentSpace()
                out["shim"] = OVERCOOKED_SHIM
            train = jax.jit(mod.make_train(cfg))
            config = {**cfg, "ENV_KWARGS": config.get("ENV_KWARGS")}
        key = jax.random.PRNGKey(seed)
        compiled = train.lower(key).compile()
        t_compile = time.perf_counter() - t0
        t0 = time.perf_counter()
        result = jax.block_until_ready(compiled(key))
        t_train = time.perf_counter() - t0
    finally:
        mod.wandb = saved
        if row.kind == "ppo_overcooked":
            import jaxmarl

            mod.jaxmarl = jaxmarl
    steps = int(config["NUM_UPDATES"]) * config["NUM_STEPS"] * config["NUM_ENVS"]
    out.update(env_steps_per_seed=steps, updates=int(config["NUM_UPDATES"]), compile_s=t_compile,
               train_s=t_train, env_steps_per_s=steps / t_train, logged_updates=len(recorder.logged))
    if row.kind == "ppo_rnn_smax":
        wins = [float(m.get("win_rate", np.nan)) for _, m in recorder.logged]
        rets = [float(m.get("returns", np.nan)) for _, m in recorder.logged]
        out.update(training_win=_late(wins), training_return=_late(rets), curve_win=wins)
    elif row.kind == "ppo_overcooked":
        rets = np.asarray(result["metrics"]["returned_episode_returns"]).reshape(-1)
        out.update(training_return=_late(rets), curve_return=rets.tolist())
    else:
        params = result["runner_state"][0].params
        out.update(qmix_greedy(mod, config, env, params, episodes, seed))
    return out


def qmix_greedy(mod, config: dict, env, params, episodes: int, seed: int) -> dict:
    """The greedy policy of qmix_rnn.py, by its own network and CTRolloutManager, for `episodes` episodes (the
    first of each env): win rate (SMAXLogWrapper's `returned_won_episode`) and per-agent return."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jaxmarl.wrappers.baselines import CTRolloutManager

    test_env = CTRolloutManager(env, batch_size=episodes)
    net = mod.RNNQNetwork(action_dim=test_env.max_action_space, hidden_dim=config["HIDDEN_SIZE"])
    agents = env.agents
    params = params["agent"]

    def run(key):
        k_reset, k_steps = jax.random.split(key)
        obs, state = test_env.batch_reset(k_reset)
        hidden = mod.ScannedRNN.initialize_carry(config["HIDDEN_SIZE"], len(agents), episodes)
        dones = jnp.zeros((len(agents), episodes), bool)
        zeros = jnp.zeros((episodes,))

        def step(carry, k):
            obs, state, hidden, dones, finished, won, ret = carry
            stacked = jnp.stack([obs[a] for a in agents])[:, None]
            hidden, q = jax.vmap(net.apply, in_axes=(None, 0, 0, 0))(params, hidden, stacked, dones[:, None])
            valid = test_env.get_valid_actions(state.env_state)
            q = q[:, 0] - (1 - jnp.stack([valid[a] for a in agents])) * 1e10
            actions = {a: jnp.argmax(q[i], -1) for i, a in enumerate(agents)}
            obs, state, rewards, done, info = test_env.batch_step(k, state, actions)
            ended = done["__all__"] & ~finished
            won = jnp.where(ended, info["returned_won_episode"][:, 0], won)
            ret = ret + jnp.stack([rewards[a] for a in agents]).mean(0) * ~finished
            return (obs, state, hidden, jnp.stack([done[a] for a in agents]), finished | done["__all__"], won,
                    ret), None

        carry = (obs, state, hidden, dones, jnp.zeros((episodes,), bool), zeros, zeros)
        (_, _, _, _, finished, won, ret), _ = jax.lax.scan(step, carry, jax.random.split(k_steps, 128))
        return finished, won, ret

    finished, won, ret = jax.jit(run)(jax.random.PRNGKey(10_000 + seed))
    if not bool(np.all(np.asarray(finished))):
        raise RuntimeError("JaxMARL's greedy evaluation: an episode did not end in 128 steps")
    return {"final_win": float(np.mean(won)), "final_return": float(np.mean(ret)), "eval_episodes": episodes}


# ----- coplay's side -------------------------------------------------------------------------------------------


def coplay_run(overrides: list[str], budget: int, seed: int, episodes: int) -> dict:
    """Train like `coplay train`, one seed, the whole updates that fit in `budget` in one chunk; compile timed
    apart; then the final policy's evaluation."""
    import jax
    import numpy as np

    from coplay.experiment import compiled as compiled_module
    from coplay.experiment.compiled import chunk_function, eval_keys, evaluation_function, init_state, plan
    from coplay.experiment.config import parse_overrides

    # A run of few updates (or evaluations) is compiled by coplay without machine-code optimisation, to compile
    # faster; its steady state is then not coplay's, and a GRU of 512 or a CNN runs hundreds of times slower.
    # The benchmark compiles every run as a long one is compiled.
    compiled_module.FEW_UPDATES = compiled_module.FEW_EVALUATIONS = compiled_module.FEW_EVALUATION_EPISODES = 0
    overrides = [*overrides, *whole_updates(overrides, budget), "seeds=1", f"seed={seed}",
                 f"eval_episodes={episodes}", "progress=false", "logger=csv"]
    p = plan(parse_overrides(overrides))
    t0 = time.perf_counter()
    state = jax.block_until_ready(init_state(p))
    compiled = chunk_function(p).lower(state).compile()
    t_compile = time.perf_counter() - t0
    t0 = time.perf_counter()
    state, metrics = compiled(state)
    metrics = jax.device_get(jax.block_until_ready(metrics))
    t_train = time.perf_counter() - t0
    results = jax.device_get(evaluation_function(p)(p.trainer.policy_params(state), eval_keys(p.exp, p.num_chunks)))
    steps = p.num_chunks * p.steps_per_chunk
    p.env.close()
    out = {"library": "coplay", "seed": seed, "overrides": overrides, "env_steps_per_seed": steps,
           "updates": p.schedule.num_updates, "compile_s": t_compile, "train_s": t_train,
           "env_steps_per_s": steps / t_train, "eval_episodes": episodes,
           "final_return": float(np.mean(results["return"]))}
    for name in ("win", "return"):
        if name in metrics:
            curve = np.asarray(metrics[name])[0]
            out[f"training_{name}"] = _late(curve)
            out[f"curve_{name}"] = curve.tolist()
    if "win" in results:
        out["final_win"] = float(np.mean(results["win"]))
    return out


# ----- a row -------------------------------------------------------------------------------------------------


def run_row(name: str, base: Path, args) -> dict:
    row = ROWS[name]
    torso = has_torso_field(row.algo)
    config = read_config(base, row, args.budget, 0)
    overrides, table_rows, unmapped = mapping(name, row, config, torso, file_values(base, row))
    t_row = time.perf_counter()
    runs: dict[str, list[dict]] = {"coplay": [], "jaxmarl": []}
    for seed in range(args.seeds):
        c = coplay_run(overrides, args.budget, seed, args.eval_episodes)
        j = jaxmarl_run(base, row, args.budget, seed, args.eval_episodes)
        same_budget(f"coplay {name} (seed {seed})", c["env_steps_per_seed"], f"JaxMARL {row.script} (seed {seed})",
                    j["env_steps_per_seed"])
        runs["coplay"].append(c)
        runs["jaxmarl"].append(j)
        for r in (c, j):
            print(f"[{name} seed {seed}] {r['library']:>7}: {r['env_steps_per_seed']:,} steps, "
                  f"{r['env_steps_per_s']:,.0f} env-steps/s, compile {r['compile_s']:.1f} s, train "
                  f"{r['train_s']:.1f} s; " + ", ".join(f"{k} {r[k]:.3f}" for k in
                                                        ("training_win", "training_return", "final_win",
                                                         "final_return") if k in r), flush=True)
    out = {"row": name, "budget": args.budget, "seeds": args.seeds, "eval_episodes": args.eval_episodes,
           "algo": row.algo, "env": row.env, "where": row.where, "kind": row.kind,
           "measure": row.measure, "script": row.script, "configs": list(row.configs),
           "script_blob": git_blob(base / row.script), "config_blobs": [git_blob(base / f) for f in row.configs],
           "jaxmarl_config": config, "overrides": overrides, "mapping": table_rows, "unmapped": unmapped,
           "torso": (row.torso if torso else "mlp (coplay's PPO has no algo.torso field: the grid is flattened)")
           if row.kind == "ppo_overcooked" else None,
           "shims": sorted({j["shim"] for j in runs["jaxmarl"] if j.get("shim")}),
           "runs": runs, "ratio": paired([c["env_steps_per_s"] for c in runs["coplay"]],
                                         [j["env_steps_per_s"] for j in runs["jaxmarl"]]),
           "row_s": time.perf_counter() - t_row}
    print(f"[{name}] coplay / JaxMARL env-steps/s {fmt_ratio(out['ratio'], 'seeds')}; row took {out['row_s']:.0f} s",
          flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jaxmarl", type=Path, required=True, help="a JaxMARL checkout, or its baselines directory")
    ap.add_argument("--budget", type=int, default=DEFAULT_BUDGET, help=f"env steps per seed and side "
                    f"(default {DEFAULT_BUDGET:,}; JaxMARL's configs ask 5e6 to 1e7)")
    ap.add_argument("--seeds", type=int, default=DEFAULT_SEEDS, help="seeds 0..N-1, each coplay then JaxMARL")
    ap.add_argument("--rows", default=",".join(ROWS), help="comma-separated: " + ", ".join(ROWS))
    ap.add_argument("--eval-episodes", type=int, default=128, help="episodes of each final policy's evaluation")
    ap.add_argument("--pythonpath", action="append", default=[],
                    help="a directory added to sys.path for the scripts' imports (distrax, hydra, omegaconf)")
    ap.add_argument("--no-write", action="store_true", help="print the section; write no results file")
    args = ap.parse_args()
    for d in args.pythonpath:
        sys.path.append(d)
    rows = [r for r in args.rows.split(",") if r]
    if set(rows) - set(ROWS):
        ap.error(f"--rows: any of {', '.join(ROWS)}")
    base = baselines_dir(args.jaxmarl)
    stand_ins = jaxmarl_imports(None)        # the installed jaxmarl; brax and wandb stood in for where absent
    done: list[dict] = []
    results = {**stamp(), "jaxmarl_version": version("jaxmarl"), "stand_ins": stand_ins,
               "eval_episodes": args.eval_episodes, "rows": done}
    for name in rows:
        if ROWS[name].torso == "cnn" and not has_torso_field(ROWS[name].algo):
            print(f"[{name}] skipped: coplay's {ROWS[name].algo} has no algo.torso field", flush=True)
            continue
        done.append(run_row(name, base, args))     # `results["rows"]` is `done`
        if not args.no_write:        # after every row: a row finished is not lost to a later one's failure
            write_results("jaxmarl_tables", merged(results))
    if args.no_write:
        print(section(results))
        return
    regenerate_page()


def merged(results: dict) -> dict:
    """`results` with the rows of the results file that were not run now (each row states its budget, seeds
    and evaluation episodes)."""
    path = RESULTS_DIR / RESULTS
    if not path.exists():
        return results
    old = json.loads(path.read_text())
    ran = {r["row"] for r in results["rows"]}
    rows = [r for r in old["rows"] if r["row"] not in ran and "budget" in r] + results["rows"]
    rows.sort(key=lambda r: list(ROWS).index(r["row"]) if r["row"] in ROWS else len(ROWS))
    return {**results, "rows": rows}


# ----- the page ----------------------------------------------------------------------------------------------

TITLE = "JaxMARL's published tables beside JaxMARL's own scripts, in the same run"


def _estimate(values: list[float], digits: int = 2) -> str:
    import numpy as np

    from coplay.eval.stats import summarize

    v = np.asarray([x for x in values if x is not None and math.isfinite(x)], np.float64)
    if not v.size:
        return "–"
    e = summarize(v)
    if e.n < 2:
        return f"{e.value:.{digits}f} (1 seed)"
    return f"{e.value:.{digits}f} [{e.low:.{digits}f}, {e.high:.{digits}f}]"


def _median(xs: list[float]) -> float:
    import statistics

    return statistics.median(xs)


def _episodes(rows: list[dict], default) -> str:
    """How many episodes each final policy was evaluated on: one number, or each with its rows."""
    by: dict = {}
    for r in rows:
        by.setdefault(r.get("eval_episodes", default), []).append(f"`{r['row']}`")
    if len(by) == 1:
        return f"{next(iter(by))} episodes per policy"
    return "; ".join(f"{n} episodes per policy ({', '.join(names)})" for n, names in sorted(by.items()))


def section(data: dict) -> str:
    rows = data["rows"]
    lines = [f"## {TITLE}", "",
             f"`{COMMAND} --rows ROW --budget B --seeds S` on {data['machine']}; JaxMARL "
             f"{data.get('jaxmarl_version') or '?'} (the installed package, for both sides), its baseline scripts "
             "from a checkout, each driven as its own `main` does. Each row trains the env steps per seed of its "
             "column on both sides (JaxMARL's configs ask 5e6 to 1e7; a row runs its config's budget where 2 cores "
             "afford it, less where not; the steps run are whole updates), each seed coplay then JaxMARL. "
             "Env-steps/s: steady state, "
             "compile apart (coplay's run compiled as a long run is, whatever the budget), median over seeds; "
             "coplay / JaxMARL: the median of the per-seed ratios (range in brackets). Results: IQM over seeds "
             "with a 95% bootstrap CI. SMAX PPO: the win rate of the training "
             f"episodes of the last {LAST:.0%} of updates (JaxMARL's logged `win_rate`, coplay's training `win`), "
             "and coplay's final policy evaluated (sampled); SMAX QMIX: each final greedy policy evaluated by its "
             "own library; Overcooked: the per-agent training return of the last updates (the delivery reward; "
             "the shaped reward both sides learn from is not counted) and coplay's final policy. Evaluations: "
             + _episodes(rows, data.get("eval_episodes")) + ".", ""]
    body = []
    for r in rows:
        c, j = r["runs"]["coplay"], r["runs"]["jaxmarl"]
        if r["kind"] == "qmix":
            jm_res, cp_train, cp_eval = ([x.get("final_win") for x in j], None, [x.get("final_win") for x in c])
        elif r["measure"] == "win":
            jm_res, cp_train, cp_eval = ([x.get("training_win") for x in j], [x.get("training_win") for x in c],
                                         [x.get("final_win") for x in c])
        else:
            jm_res, cp_train, cp_eval = ([x.get("training_return") for x in j],
                                         [x.get("training_return") for x in c], [x.get("final_return") for x in c])
        what = {"win": "win rate", "return": "return"}[r["measure"]]
        body.append([f"`{r['row']}`", f"`{Path(r['script']).name}`", f"{c[0]['env_steps_per_seed']:,}", len(c),
                     f"{_median([x['env_steps_per_s'] for x in j]):,.0f}",
                     f"{_median([x['env_steps_per_s'] for x in c]):,.0f}", fmt_ratio(r["ratio"], "seeds"),
                     f"{_median([x['compile_s'] for x in j]):.0f} / {_median([x['compile_s'] for x in c]):.0f}",
                     what, _estimate(jm_res), "–" if cp_train is None else _estimate(cp_train), _estimate(cp_eval)])
    lines += table(["row", "JaxMARL script", "env steps per seed", "seeds", "JaxMARL env-steps/s", "coplay env-steps/s",
                    "coplay / JaxMARL", "compile s (JaxMARL / coplay)", "measure", "JaxMARL",
                    "coplay, training", "coplay, final policy"], body)
    for r in rows:
        lines += ["", f"`{r['row']}`: coplay `{' '.join(r['overrides'])}`"
                  + (f"; torso: {r['torso']}" if r.get("torso") else "") + f". JaxMARL `{r['script']}` with "
                  + ", ".join(f"`{f}`" for f in r["configs"]) + ". Mapped:", ""]
        lines += table(["JaxMARL", "its value", "coplay", "coplay's value", "note"],
                       [[m["jaxmarl"] if m["jaxmarl"].startswith("(") else f"`{m['jaxmarl']}`",
                         _fmt_value(m["jaxmarl_value"]), f"`{m['coplay']}`" if not m["coplay"].startswith("(")
                         else m["coplay"], _fmt_value(m["coplay_value"]), m["note"]] for m in r["mapping"]])
        if r["unmapped"]:
            lines += ["", "Not mapped:", "", *[f"- {u}." for u in r["unmapped"]]]
        if r.get("shims"):
            lines += ["", "Changed in JaxMARL's script to run at all: " + "; ".join(r["shims"]) + "."]
    if data.get("stand_ins"):
        lines += ["", "Imports stood in for (absent here): " + "; ".join(data["stand_ins"]) + "."]
    return "\n".join(lines)


def claims(data: dict) -> list[dict]:
    return [{"claim": f"{r['algo'].upper()} training env-steps/s beside JaxMARL's `{Path(r['script']).name}`",
             "workload": f"{r['env']} {next(iter(r['where'].values()))}, JaxMARL's config, "
                         f"{r['runs']['coplay'][0]['env_steps_per_seed']:,} steps, {len(r['runs']['coplay'])} seeds",
             "ratio": fmt_ratio(r["ratio"], "seeds"), "machine": data["machine"]} for r in data["rows"]]


if __name__ == "__main__":
    main()
