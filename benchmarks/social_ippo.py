"""coplay's IPPO beside SocialJax's own IPPO script on Clean Up and Commons Harvest, same run,
at SocialJax's configuration.

    python benchmarks/social_ippo.py --socialjax PATH --socialjax-python PY          # about 35 minutes on 2 cores
    python benchmarks/social_ippo.py --socialjax PATH --socialjax-python PY --quick  # Clean Up, 1 seed, 1 update

SocialJax is not on PyPI: PATH is a checkout of it (cooperativex/SocialJax; the folder
holding `socialjax/` and `algorithms/`). Its IPPO script needs the libraries it pins
(JAX 0.6, distrax 0.1.5 and TensorFlow Probability 0.25, which do not import on coplay's
JAX), so it runs in a child process under PY, a Python with them, made once by

    python -m venv DIR && DIR/bin/pip install jax==0.6.2 jaxlib==0.6.2 flax==0.10.7 optax==0.1.7 \\
        distrax==0.1.5 tensorflow-probability==0.25.0 chex==0.1.84 numpy==1.26.4 scipy==1.12.0 \\
        hydra-core==1.3.2 omegaconf==2.3.0 gymnax==0.0.8 safetensors==0.5.2 wandb==0.27.2 pillow six

(PY is then DIR/bin/python). The child imports `make_train` from SocialJax's
`algorithms/IPPO/ippo_cnn_<env>.py` and builds its config as its hydra entry point composes
it (`ippo_base.yaml`, the environment's file, the reward group), runs it under `jax.jit`
as its runner does, and takes the per-update metrics its script sends to `wandb.log`.

Both sides train 7 agents on 1,000-step episodes for the same number of env steps, one
seed at a time with the sides in turn (SocialJax seed s, then coplay seed s), at
SocialJax's IPPO configuration: 1,000 steps per environment per update, 2 epochs of 500
minibatches, lr 5e-4 annealed linearly, gamma 0.99, GAE lambda 0.95, clip 0.2 with the
value loss clipped too, entropy 0.01, value weight 0.5, gradient-norm clip 0.5, ReLU,
one network shared by all agents with no agent id, a CNN torso (SocialJax: 5x5, 3x3, 3x3
convolutions of 32, a dense 64, then actor and critic heads of 64 on that one torso;
coplay `algo.torso=cnn`: the same convolutions and dense 64, with separate actor and
critic networks, each one hidden layer of 64). The reward group is `individual`, each
agent its own reward (SocialJax's selfish baseline; its default, `common`, gives every
agent the sum of all rewards, which coplay's reward exchange gives as a mean, a scale
that the clipped value loss would feel). The one change from SocialJax's settings is
the number of environments, 256 there and `--num-envs` (2) here, with the budget: at
SocialJax's rate on this machine (about 10-20 env-steps/s) its 1e8 steps would take
months, and one update of 256 x 1,000 steps hours.

Each side's final policy then plays `--eval-episodes` episodes (actions sampled) of its
own environment; the figure is the collective return per episode (the sum of the
agents' returns), beside a uniformly random team on the same environment. The two
environments are not the same game: coplay's follow Melting Pot's maps and rules
(`docs/environments.md`), SocialJax's have their own maps, observations (11 x 11 one-hot
planes with 19 channels in Clean Up, coplay's 7) and apple laws, and its individual
reward pays the number of agents (7) for an apple where coplay's pays 1; so returns are
read against each side's random team, and the apples eaten (the collective return over
what an apple pays) are given beside them. Wall time runs from building
the run to the end of its evaluation (compiling included; SocialJax: `make_train` to its
evaluation's end; coplay: `coplay.train`); interpreter and library imports are outside
it on both sides. The speed ratio is per seed, coplay's rate over SocialJax's.

Writes benchmarks/results/social_ippo.json, then BENCHMARKS.md (benchmarks/page.py)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import fmt_ratio, git_head, keep_condition, paired, same_budget, stamp, table  # noqa: E402

RESULTS = "social_ippo.json"
COMMAND = "python benchmarks/social_ippo.py --socialjax PATH --socialjax-python PY"
# coplay's environment: (SocialJax's, its IPPO script's module and config name)
PAIRS = {"clean_up": ("clean_up", "ippo_cnn_cleanup"),
         "commons_harvest": ("harvest_common_open", "ippo_cnn_harvest_open")}
ROLLOUT, EPOCHS, MINIBATCHES = 1000, 2, 500
# what one apple eaten pays its eater: SocialJax's individual reward is the number of agents (its clean_up.py
# and harvest_open.py: `jnp.where(apple_matches, 1, rewards) * self.num_agents`), coplay's 1 (Melting Pot's)
PER_APPLE = {"socialjax": 7, "coplay": 1}
COPLAY_SETTINGS = ["algo=ippo", "algo.torso=cnn", "algo.hidden_size=64", "algo.num_layers=1",
                   "algo.activation=relu", f"algo.rollout_len={ROLLOUT}", f"algo.epochs={EPOCHS}",
                   f"algo.minibatches={MINIBATCHES}", "algo.lr=5e-4", "algo.anneal_lr=true", "algo.gamma=0.99",
                   "algo.gae_lambda=0.95", "algo.clip_eps=0.2", "algo.clip_value=true", "algo.ent_coef=0.01",
                   "algo.vf_coef=0.5", "algo.max_grad_norm=0.5", "algo.share_params=true", "algo.agent_id=false"]

# SocialJax's IPPO, in a child process under its own libraries: its make_train on its composed
# config (the changes the parent passes as JSON on stdin), jitted as its runner does; then its
# final policy (its network class, its trained parameters) and a uniformly random team play
# episodes of its environment. Prints one JSON line at the end.
TRAIN = r"""
import importlib, json, sys, time
job = json.load(sys.stdin)
import wandb
logged = []
wandb.log = lambda metric: logged.append({k: float(v) for k, v in metric.items()})   # its per-update metrics
import jax, jax.numpy as jnp
from omegaconf import OmegaConf
import socialjax
from algorithms.utils import ActorCritic
configs = job["configs"]
own = OmegaConf.load(configs["env"])
own.pop("defaults")
config = OmegaConf.merge(OmegaConf.load(configs["base"]), own, OmegaConf.load(configs["reward"]))
config = OmegaConf.to_container(config)
config.update(job["set"])
module = importlib.import_module("algorithms.IPPO." + job["module"])
t = time.perf_counter()
train = jax.jit(module.make_train(config))
out = jax.block_until_ready(train(jax.random.PRNGKey(config["SEED"])))
train_s = time.perf_counter() - t
params = out["runner_state"][0].params
env = socialjax.make(config["ENV_NAME"], **config["ENV_KWARGS"])
n, actions, episodes = env.num_agents, env.action_space().n, job["episodes"]
network = ActorCritic(actions, activation=config["ACTIVATION"])

def play(key, policy):
    obs, state = jax.vmap(env.reset)(jax.random.split(key, episodes))
    def step(carry, k):
        obs, state, total = carry
        k_act, k_env = jax.random.split(k)
        flat = jnp.transpose(obs, (1, 0, 2, 3, 4)).reshape(-1, *obs.shape[2:])   # agent-major, as its script
        act = policy(flat, k_act).reshape(n, episodes)
        obs, state, reward, done, info = jax.vmap(env.step)(jax.random.split(k_env, episodes), state,
                                                            [act[i] for i in range(n)])
        return (obs, state, total + jnp.asarray(reward).reshape(episodes, -1).sum(-1)), None
    (_, _, total), _ = jax.lax.scan(step, (obs, state, jnp.zeros(episodes)), jax.random.split(key, job["steps"]))
    return total

t = time.perf_counter()
trained = jax.jit(lambda key: play(key, lambda o, k: network.apply(params, o)[0].sample(seed=k)))(
    jax.random.PRNGKey(1000 + job["seed"]))
trained = [float(x) for x in jax.block_until_ready(trained)]
eval_s = time.perf_counter() - t
rand = jax.jit(lambda key: play(key, lambda o, k: jax.random.randint(k, (o.shape[0],), 0, actions)))(
    jax.random.PRNGKey(2000 + job["seed"]))
print("RESULT " + json.dumps({"train_s": train_s, "eval_s": eval_s, "collective": trained,
                              "random": [float(x) for x in rand], "updates": logged,
                              "jax": jax.__version__}), flush=True)
"""


def socialjax_checkout(path: Path) -> Path:
    if not (path / "socialjax" / "__init__.py").exists() or not (path / "algorithms" / "IPPO").is_dir():
        raise SystemExit(f"--socialjax {path}: not a SocialJax checkout (no socialjax/__init__.py or "
                         "algorithms/IPPO/ there)")
    return path


def socialjax_python(py: Path, checkout: Path) -> Path:
    probe = subprocess.run([str(py), "-c", "import distrax, hydra, omegaconf, wandb, jax; print(jax.__version__)"],
                           capture_output=True, text=True, cwd=checkout)
    if probe.returncode != 0:
        raise SystemExit(f"--socialjax-python {py}: cannot import SocialJax's libraries (distrax, hydra, omegaconf, "
                         "wandb, jax); make it with the pip command in this script's docstring\n"
                         f"{probe.stderr[-1500:]}")
    return py


def run_socialjax(checkout: Path, py: Path, name: str, seed: int, num_envs: int, steps: int, episodes: int) -> dict:
    sj_name, module = PAIRS[name]
    cfg = checkout / "algorithms" / "IPPO" / "config"
    job = {"module": module, "seed": seed, "episodes": episodes, "steps": ROLLOUT,
           "configs": {"base": str(cfg / "ippo_base.yaml"), "env": str(cfg / f"{module}.yaml"),
                       "reward": str(cfg / "reward" / "individual.yaml")},
           "set": {"NUM_ENVS": num_envs, "TOTAL_TIMESTEPS": steps, "SEED": seed, "NUM_SEEDS": 1,
                   "WANDB_MODE": "disabled"}}
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    proc = subprocess.run([str(py), "-c", TRAIN], input=json.dumps(job), capture_output=True, text=True, env=env,
                          cwd=checkout)
    result = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not result:
        raise SystemExit(f"SocialJax's IPPO on {sj_name}, seed {seed}, failed (exit {proc.returncode}):\n"
                         f"{proc.stderr[-3000:]}")
    data = json.loads(result[-1][len("RESULT "):])
    done = int(data["updates"][-1]["env_step"]) if data["updates"] else 0
    return {"collective": data["collective"], "random": data["random"], "seconds": data["train_s"] + data["eval_s"],
            "train_s": data["train_s"], "steps": done, "jax": data["jax"],
            "updates": [{k: u[k] for k in ("env_step", "returned_episode_returns", "clean_action_info")
                         if k in u} for u in data["updates"]]}


def random_team(name: str, episodes: int, seed: int) -> list[float]:
    """Collective return per episode of a uniformly random team on coplay's environment."""
    import jax
    import jax.numpy as jnp

    import coplay

    env = coplay.make(name)
    n, actions, length = env.spec.num_agents, env.spec.action_space.n, env.spec.max_steps

    def play(key):
        state, _ = env.reset(key)

        def step(carry, k):
            state, total = carry
            k_act, k_env = jax.random.split(k)
            state, ts = env.step(state, jax.random.randint(k_act, (n,), 0, actions), k_env)
            return (state, total + ts.reward.sum()), None

        (_, total), _ = jax.lax.scan(step, (state, jnp.zeros(())), jax.random.split(key, length))
        return total

    keys = jax.random.split(jax.random.PRNGKey(3000 + seed), episodes)
    return [float(x) for x in jax.device_get(jax.jit(jax.vmap(play))(keys))]


def run_coplay(name: str, seed: int, num_envs: int, steps: int, episodes: int, out: Path) -> dict:
    from _common import whole_updates

    import coplay

    base = [*COPLAY_SETTINGS, f"env={name}", f"algo.num_envs={num_envs}", "seeds=1", f"seed={seed}",
            f"eval_episodes={episodes}", "eval_every=0", "progress=false", "logger=csv", f"out_dir={out}"]
    args = base + whole_updates(base, steps)
    t = time.perf_counter()
    result = coplay.train(args)
    seconds = time.perf_counter() - t
    n = coplay.make(name).spec.num_agents
    per_agent = float(result.final_return["per_seed"][0])
    return {"collective_mean": per_agent * n, "random": random_team(name, episodes, seed), "seconds": seconds,
            "steps": int(args[-1].split("=")[1]), "args": args}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--socialjax", type=Path, required=True, help="a checkout of cooperativex/SocialJax")
    ap.add_argument("--socialjax-python", type=Path, required=True,
                    help="a Python with SocialJax's libraries (see above)")
    ap.add_argument("--socialjax-commit", default=None, help="the commit PATH holds, where it is not a git checkout")
    ap.add_argument("--envs", default=",".join(PAIRS))
    ap.add_argument("--num-envs", type=int, default=2, help="environments per update on both sides (SocialJax: 256)")
    ap.add_argument("--steps", type=int, default=4000, help="env steps per seed, a multiple of num-envs x 1,000")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--eval-episodes", type=int, default=8)
    ap.add_argument("--quick", action="store_true", help="Clean Up, 1 seed, 1 environment, 1 update, 2 "
                    "episodes; nothing written")
    args = ap.parse_args()
    checkout = socialjax_checkout(args.socialjax.resolve())
    py = socialjax_python(args.socialjax_python, checkout)
    names = [e for e in args.envs.split(",") if e]
    if not names or set(names) - set(PAIRS):
        raise SystemExit(f"--envs {args.envs}: any of {', '.join(PAIRS)}")
    if args.quick:
        names, num_envs, steps, seeds, episodes = ["clean_up"], 1, ROLLOUT, 1, 2
    else:
        num_envs, steps, seeds, episodes = args.num_envs, args.steps, args.seeds, args.eval_episodes
    for what, v in (("--num-envs", num_envs), ("--seeds", seeds), ("--eval-episodes", episodes)):
        if v < 1:
            raise SystemExit(f"{what} {v}: at least 1")
    if steps <= 0 or steps % (num_envs * ROLLOUT):
        raise SystemExit(f"--steps {steps}: a positive multiple of num-envs x {ROLLOUT:,} = {num_envs * ROLLOUT:,}"
                         " (one update)")
    runs: dict[str, dict[str, list[dict]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            runs[name] = {"socialjax": [], "coplay": []}
            for seed in range(seeds):
                sj = run_socialjax(checkout, py, name, seed, num_envs, steps, episodes)
                cp = run_coplay(name, seed, num_envs, steps, episodes, Path(tmp))
                same_budget("SocialJax", sj["steps"], "coplay", cp["steps"])
                runs[name]["socialjax"].append(sj)
                runs[name]["coplay"].append(cp)
                print(f"{name} seed {seed}: SocialJax {np.mean(sj['collective']):.1f} (random "
                      f"{np.mean(sj['random']):.1f}) in {sj['seconds']:.0f} s; coplay {cp['collective_mean']:.1f} "
                      f"(random {np.mean(cp['random']):.1f}) in {cp['seconds']:.0f} s", flush=True)
    data = {**stamp(), "num_envs": num_envs, "steps": steps, "seeds": seeds, "eval_episodes": episodes,
            "socialjax_jax": runs[names[0]]["socialjax"][0]["jax"], "runs": runs,
            "socialjax_commit": args.socialjax_commit or git_head(checkout, "unknown (not a git checkout)")}
    keep_condition("social_ippo", data, args.quick, section)


# ----- the page ----------------------------------------------------------------------------------------------


def _rates(runs: list[dict]) -> list[float]:
    return [r["steps"] / r["seconds"] for r in runs]


def section(data: dict) -> str:
    from coplay.eval.stats import summarize

    lines = ["## IPPO beside SocialJax's own IPPO on Clean Up and Commons Harvest", "",
             f"`{COMMAND}` on {data['machine']} ({data['date']}, coplay {data['commit']}, SocialJax "
             f"{data['socialjax_commit']} on JAX {data['socialjax_jax']}): {data['steps']:,} env steps per seed, "
             f"{data['seeds']} seeds, the sides in turn, at SocialJax's IPPO configuration (1,000 steps per update, "
             "2 epochs of 500 minibatches, lr 5e-4 annealed, gamma 0.99, clipped value loss, gradient clip 0.5, "
             "a shared CNN policy, each agent its own reward) except the number of environments, "
             f"{data['num_envs']} on both sides where SocialJax's config has 256: at its rate on 2 cores one update "
             "of 256 x 1,000 steps takes hours. Collective return per episode (the agents' returns summed) of the "
             f"final policy, {data['eval_episodes']} episodes with sampled actions on each side's own environment, "
             "beside a uniformly random team there (the environments differ in map, observation and apple law, so "
             "each side is read against its own random team; SocialJax's individual reward pays an apple 7, the "
             "number of agents, coplay's 1, so the apples eaten are given too); mean over episodes, then IQM over "
             "seeds with 95% bootstrap interval. env-steps/s from building the run to the end of its evaluation, "
             "compiling included; the speed ratio is per seed.", ""]
    rows = []
    for name, sides in data["runs"].items():
        sj_rates, cp_rates = _rates(sides["socialjax"]), _rates(sides["coplay"])
        for side, label in (("socialjax", "SocialJax IPPO (its script)"), ("coplay", "coplay IPPO")):
            runs = sides[side]
            final = np.asarray([np.mean(r["collective"]) if side == "socialjax" else r["collective_mean"]
                                for r in runs])
            rand = np.asarray([np.mean(r["random"]) for r in runs])
            rates = _rates(runs)
            ratio = "1" if side == "socialjax" else fmt_ratio(paired(cp_rates, sj_rates), "seeds")
            apples = f"{summarize(final / PER_APPLE[side]).value:.1f} / {summarize(rand / PER_APPLE[side]).value:.1f}"
            rows.append([f"`{name}`", label, str(summarize(final)), str(summarize(rand)), apples,
                         f"{np.median(rates):,.1f}", ratio])
    lines += table(["environment", "implementation", "collective return, final policy", "random team, same env",
                    "apples eaten, final / random", "env-steps/s (median)", "speed beside SocialJax"], rows)
    return "\n".join(lines)


def claims(data: dict) -> list[dict]:
    out = []
    for name, sides in data["runs"].items():
        out.append({"claim": f"coplay's IPPO beside SocialJax's IPPO script, `{name}`",
                    "workload": f"its config, {data['num_envs']} envs, {data['steps']:,} env steps per seed",
                    "ratio": fmt_ratio(paired(_rates(sides["coplay"]), _rates(sides["socialjax"])), "seeds"),
                    "machine": data["machine"]})
    return out


if __name__ == "__main__":
    main()
