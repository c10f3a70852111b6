"""What this machine allows a PPO update of JaxMARL's IPPO shapes, and coplay's share of it.

    python benchmarks/ceiling.py                  # 5 interleaved repeats
    python benchmarks/ceiling.py --repeats 2 --no-write

The ceiling: a minimal PPO learning phase written here with nothing but JAX and
optax, at the shapes JaxMARL's `ippo_ff_mpe.yaml` sets for spread (16 environments
x 128 steps x 3 agents: 6,144 samples of spread's 18 observation features;
actor and critic MLPs of two 64-unit tanh layers; 4 epochs x 4 shuffled
minibatches of Adam on the clipped surrogate with a clipped value loss,
normalised advantages and an entropy bonus). No environment, no GAE, no
logging: what a PPO update of these shapes cannot do without. Its FLOPs are
XLA's count (`cost_analysis`) of one compiled minibatch step times the 16 steps
(XLA counts a loop's body once, so a whole update's program undercounts), its
rate the achieved FLOP/s.

coplay: IPPO on spread at the same sizes and network (`algo.num_envs=16
algo.rollout_len=128 algo.epochs=4 algo.minibatches=4 algo.hidden_size=64
algo.num_layers=2 algo.activation=tanh algo.clip_value=true
algo.normalize_advantages=true algo.agent_id=false`), a compiled chunk of
`--updates` whole updates (the rollout of 2,048 environment steps, GAE and the
same learning phase) as `coplay train` compiles it. coplay's share = the
minimal learning phase's time / coplay's time for its whole update: 100% would
be coplay's update (the environment, its rollout and GAE included) in the time
the bare learning phase takes. Timed in alternation, one call of each per
repeat; medians.
Results go to benchmarks/results/ceiling.json and BENCHMARKS.md.

Not here yet: JaxMARL's own share (its `ippo_ff_mpe.py` timed beside these),
and the recurrent Q update's ceiling.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import optax

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_results, write_section  # noqa: E402
from train_throughput import machine  # noqa: E402

from coplay.experiment.compiled import FEW_UPDATES, chunk_function, init_state, place, plan  # noqa: E402
from coplay.experiment.config import parse_overrides  # noqa: E402

ENVS, STEPS, AGENTS, OBS, ACTIONS, HIDDEN = 16, 128, 3, 18, 5, 64
EPOCHS, MINIBATCHES, LR, CLIP, ENT, VF, MAX_NORM = 4, 4, 2.5e-4, 0.2, 0.01, 0.5, 0.5
COPLAY = ["algo=ippo", "env=spread", f"algo.num_envs={ENVS}", f"algo.rollout_len={STEPS}", f"algo.epochs={EPOCHS}",
          f"algo.minibatches={MINIBATCHES}", f"algo.hidden_size={HIDDEN}", "algo.num_layers=2",
          "algo.activation=tanh", "algo.clip_value=true", "algo.normalize_advantages=true", "algo.agent_id=false",
          f"algo.lr={LR}", f"algo.ent_coef={ENT}", f"algo.vf_coef={VF}", f"algo.max_grad_norm={MAX_NORM}",
          "seeds=1", "progress=false", "tensorboard=false"]


def flops(compiled) -> float:
    """XLA's FLOP count of a compiled program (a loop's body counted once)."""
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    return float(cost["flops"])


# ----- the minimal update -------------------------------------------------------------------------


def mlp(params: list, x: jax.Array) -> jax.Array:
    for w, b in params[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def init_mlp(key: jax.Array, sizes: list[int]) -> list:
    keys = jax.random.split(key, len(sizes) - 1)
    return [(jax.random.normal(k, (i, o)) / jnp.sqrt(i), jnp.zeros(o)) for k, i, o in zip(keys, sizes, sizes[1:])]


def minimal_update(optimizer):
    """`(update, step)`: `update(params, opt_state, batch, key) -> (params, opt_state)`, EPOCHS x
    MINIBATCHES Adam steps, and `step(carry, minibatch)`, one of them."""

    def loss(params, mb):
        logits = jax.nn.log_softmax(mlp(params["actor"], mb["obs"]))
        logp = jnp.take_along_axis(logits, mb["action"][:, None], axis=-1)[:, 0]
        ratio = jnp.exp(logp - mb["logp"])
        adv = (mb["adv"] - mb["adv"].mean()) / (mb["adv"].std() + 1e-8)
        actor = -jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - CLIP, 1 + CLIP) * adv).mean()
        value = mlp(params["critic"], mb["obs"])[:, 0]
        clipped = mb["value"] + jnp.clip(value - mb["value"], -CLIP, CLIP)
        critic = 0.5 * jnp.maximum((value - mb["target"]) ** 2, (clipped - mb["target"]) ** 2).mean()
        entropy = -(jnp.exp(logits) * logits).sum(-1).mean()
        return actor + VF * critic - ENT * entropy

    def step(carry, mb):
        params, opt_state = carry
        grads = jax.grad(loss)(params, mb)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), None

    def update(params, opt_state, batch, key):
        n = batch["obs"].shape[0]

        def epoch(carry, k):
            order = jax.random.permutation(k, n)
            mbs = jax.tree.map(lambda x: x[order].reshape(MINIBATCHES, n // MINIBATCHES, *x.shape[1:]), batch)
            return jax.lax.scan(step, carry, mbs)[0], None

        return jax.lax.scan(epoch, (params, opt_state), jax.random.split(key, EPOCHS))[0]

    return update, step


def minimal_program():
    k = jax.random.split(jax.random.PRNGKey(0), 8)
    n = ENVS * STEPS * AGENTS
    params = {"actor": init_mlp(k[0], [OBS, HIDDEN, HIDDEN, ACTIONS]),
              "critic": init_mlp(k[1], [OBS, HIDDEN, HIDDEN, 1])}
    batch = {"obs": jax.random.normal(k[2], (n, OBS)), "action": jax.random.randint(k[3], (n,), 0, ACTIONS),
             "logp": jnp.full((n,), -jnp.log(ACTIONS)), "adv": jax.random.normal(k[4], (n,)),
             "value": jax.random.normal(k[5], (n,)), "target": jax.random.normal(k[6], (n,))}
    optimizer = optax.chain(optax.clip_by_global_norm(MAX_NORM), optax.adam(LR))
    update, step = minimal_update(optimizer)
    args = (params, optimizer.init(params), batch, k[7])
    mb = jax.tree.map(lambda x: x[:n // MINIBATCHES], batch)
    per_step = flops(jax.jit(step).lower((args[0], args[1]), mb).compile())
    return jax.jit(update).lower(*args).compile(), args, per_step * EPOCHS * MINIBATCHES


def coplay_program(updates: int):
    exp = parse_overrides(COPLAY + [f"total_steps={ENVS * STEPS * updates * (FEW_UPDATES + 1)}",
                                    f"chunk_steps={ENVS * STEPS * updates}"])
    p = plan(exp)
    assert p.updates_per_chunk == updates and p.num_chunks * p.updates_per_chunk > FEW_UPDATES  # optimised build
    state = place(p, init_state(p))
    compiled = chunk_function(p, state).lower(state).compile()
    p.env.close()
    return compiled, state


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--updates", type=int, default=5, help="coplay updates per timed chunk")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()

    minimal, m_args, m_flops = minimal_program()                          # FLOPs per update
    chunk, state = coplay_program(args.updates)
    jax.block_until_ready(minimal(*m_args))
    state, _ = chunk(state)
    jax.block_until_ready(state)
    times: dict[str, list[float]] = {"minimal": [], "coplay": []}
    for _ in range(args.repeats):
        t = time.perf_counter()
        jax.block_until_ready(minimal(*m_args))
        times["minimal"].append(time.perf_counter() - t)
        t = time.perf_counter()
        state, metrics = chunk(state)
        jax.block_until_ready((state, metrics))
        times["coplay"].append((time.perf_counter() - t) / args.updates)
    m_time, c_time = statistics.median(times["minimal"]), statistics.median(times["coplay"])
    env_steps = ENVS * STEPS
    result = {"machine": machine(), "repeats": args.repeats, "updates_per_chunk": args.updates,
              "learning_flops_per_update": m_flops, "seconds_per_update": times,
              "ceiling_flop_per_s": m_flops / m_time, "coplay_share": m_time / c_time,
              "coplay_env_steps_per_s": env_steps / c_time, "ceiling_env_steps_per_s": env_steps / m_time}
    lines = [
        "## The PPO update's ceiling on this machine, and coplay's share of it", "",
        f"`python benchmarks/ceiling.py --repeats {args.repeats}` on {machine()}. The ceiling is a minimal PPO "
        f"learning phase written with JAX and optax alone at JaxMARL's `ippo_ff_mpe.yaml` shapes ({ENVS} "
        f"environments x {STEPS} steps x {AGENTS} agents of spread, 2x{HIDDEN} tanh actor and critic, {EPOCHS} "
        f"epochs x {MINIBATCHES} minibatches of Adam on the clipped surrogate and clipped value loss); coplay is "
        f"IPPO at the same sizes and network, {args.updates} whole updates (rollout, GAE, learning) per compiled "
        "chunk. The learning phase's FLOPs are XLA's count of one minibatch step times the 16 steps; times "
        "are medians of calls alternating between the two. coplay's share is the minimal learning phase's "
        "time over coplay's whole update's (its environment, rollout and GAE included). JaxMARL's own share "
        "is not measured yet.", "",
        "| program | ms per update | environment steps/s | learning GFLOP/s | share of the ceiling |",
        "|---|---|---|---|---|",
        f"| minimal PPO learning phase (the ceiling) | {m_time * 1e3:,.1f} | "
        f"{result['ceiling_env_steps_per_s']:,.0f} | {m_flops / m_time / 1e9:,.1f} | 100% |",
        f"| coplay IPPO update (rollout + GAE + learning) | {c_time * 1e3:,.1f} | "
        f"{result['coplay_env_steps_per_s']:,.0f} | {m_flops / c_time / 1e9:,.1f} | "
        f"{100 * result['coplay_share']:.0f}% |", "",
        f"The learning phase is {m_flops / 1e9:.2f} GFLOP per update ({m_flops / env_steps / 1e6:.2f} MFLOP per "
        "environment step).",
    ]
    print("\n".join(lines))
    if not args.no_write:
        write_results("ceiling", result)
        write_section("ceiling", "\n".join(lines))


if __name__ == "__main__":
    main()
