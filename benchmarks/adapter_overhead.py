"""What coplay's `jaxmarl:<name>` adapter costs over JaxMARL's own environment stepping, in one run, timed in
alternation.

    python benchmarks/adapter_overhead.py                  # every environment, 1 and 1,024 parallel envs
    python benchmarks/adapter_overhead.py --quick          # short timings (smoke run); nothing written
    python benchmarks/adapter_overhead.py --envs hanabi,coin_game --widths 1 --no-write

The claim: an environment built by `coplay.make("jaxmarl:<name>")` steps at least 1 / 1.1 as fast as the same
JaxMARL environment stepped by JaxMARL's own `reset` and `step_env`, i.e. the adapter costs at most 10% more time
per env step. Both sides use the very same JaxMARL object (the adapter's `env.lib`), so the environment's code
and settings are the same.

One timed call of a side is one episode of L steps from a reset, for W environments at once:
`jit` of `vmap(reset)`, one step, then a `lax.scan` of the other L - 1 steps of `vmap(step)`, with no reset
inside the scan. L is less than the episode's length, so no episode reaches its time limit in a call (on the
last step of an episode of STORM or the coin game the adapter keeps the game's observation and rewards where
`step_env` restarts the inner game: the two sides would differ there); a game that ends sooner, a SMAX battle or
a Hanabi game, is stepped on by `step_env` as the library does, on both sides alike. The library's side is
`lib.reset` and `lib.step_env` with dictionaries of actions; the adapter's is `env.reset` and `env.step` with an
[N] array. Both draw the same actions from the same keys, so they play the same trajectories (checked: the
rewards of the last step agree):

- `uniform`: each agent's action uniform over its own action count (one `randint` of [W, N] on both sides);
- `legal` (SMAX and Hanabi, where the library has a mask): uniform over the legal actions; the library's side
  computes its mask from the state (`get_avail_actions`, `get_legal_moves`) each step, as a learner must, and
  the adapter's side reads `ts.action_mask`, which the adapter computes in its step.

What each side keeps of a step (in the scan's carry, returned, so XLA drops none of it as unused), `--outputs`:

- `learner` (the claim): what a learner reads, on both sides the same facts, each in its own form. The library's
  state, observations cast to float32 (as the baselines' networks cast them), rewards, dones and info; the
  adapter's state and its TimeStep without `global_state` (which IPPO and the Q family do not read; XLA then does
  not compute it, as in their runs).
- `all`: everything each side returns, as it returns it: the library's observations in their own dtype, the
  adapter's whole TimeStep (float32 observations, the global state a centralised critic reads, the mask, active,
  truncated, info). The cost of the contract's extra outputs, for a learner that reads them all.

Compile (the first call) is timed apart. The two sides are then timed in turn, `--rounds` rounds of one timing
of >= `--seconds` each; a side's rate is its median over rounds, adapter / library the median of the
per-round ratios (range in brackets), and the overhead is library / adapter - 1, the extra time per env step.

Where a row's overhead is beyond 10%, the row is timed again beside copies of the adapter with one part of its
step switched off (`PARTS`: the global state written as a copy of the observations, the action mask,
STORM's inventory as planes, observations cast to float32), then all of them, in turn with the library: what
each part costs. The copies are the benchmark's (methods replaced on the instance); src/ is unchanged.
`--no-attribution` skips this. Writes benchmarks/results/adapter_overhead.json, then BENCHMARKS.md
(benchmarks/page.py)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    alternate,
    fmt_ratio,
    paired,
    regenerate_page,
    stamp,
    table,
    version,
    write_results,
)

RESULTS = "adapter_overhead.json"
COMMAND = "python benchmarks/adapter_overhead.py"
LIMIT = 0.10            # the claim: at most 10% more time per env step
# (JaxMARL id, the adapter's keyword arguments, label)
ENVS = {
    "HeuristicEnemySMAX": ({"scenario": "3m"}, "SMAX 3m, heuristic enemy"),
    "overcooked": ({"layout": "cramped_room"}, "Overcooked cramped_room"),
    "MPE_simple_spread_v3": ({}, "MPE simple spread"),
    "hanabi": ({}, "Hanabi, 2 players"),
    "coin_game": ({}, "coin game"),
    "storm_2p": ({}, "STORM, 2 players"),
}
MASKED = ("HeuristicEnemySMAX", "hanabi")        # the library has legal actions: also timed with `legal`
STEPS = {1: 100, 1024: 25}                       # L per timed call, by width (less than an episode's length)


def _mode_sampler(mode: str, counts):
    """(key, mask [W, N, A] or None, width) -> [W, N] int32 actions; the same function on both sides."""
    import jax
    import jax.numpy as jnp

    limits = jnp.asarray(counts, jnp.int32)

    def sample(key, mask, width):
        if mode == "uniform":
            return jax.random.randint(key, (width, len(counts)), 0, limits)
        return jax.random.categorical(key, jnp.where(mask, 0.0, -jnp.inf)).astype(jnp.int32)

    return sample


# The parts of the adapter's step that the attribution switches off, one at a time and together, on a copy of
# the adapter (the benchmark's copy; src/ is unchanged): what each costs is the rate gained without it.
PARTS = {
    "global_state": "the global state: where the library has no world state, the adapter writes every agent's "
                    "observation again, flattened and concatenated, as `ts.global_state`, every step",
    "mask": "the action mask: where the library has legal actions (SMAX, Hanabi), the adapter computes them "
            "(`get_avail_actions`, `get_legal_moves`) of every new state for `ts.action_mask`; the library's "
            "side computes them only with `legal` actions",
    "inventory_planes": "STORM's inventory as planes: the adapter appends each agent's inventory to its grid view "
                        "as constant channels, so the grid keeps its shape for a CNN (STORM 2 players: 5 x 5 x 10 "
                        "becomes 5 x 5 x 16, 400 values where the library returns 256)",
    "float_obs": "observations as float32: the library's are uint8 or int8 for some environments (Overcooked, "
                 "the coin game, STORM's inventory)",
}


def applicable(env, part: str) -> bool:
    import jax

    if part == "global_state":
        return not env.has_world_state
    if part == "mask":
        return env._mask_fn is not None
    if part == "inventory_planes":
        return env.env_id in ("storm", "storm_2p")
    if part == "float_obs":
        obs, _ = jax.eval_shape(env.lib.reset, jax.random.PRNGKey(0))
        return any(str(x.dtype) != "float32" for x in jax.tree.leaves(obs))
    raise ValueError(part)


def without(name: str, parts: tuple[str, ...]):
    """A fresh adapter of `name` with `parts` of its step switched off (for the attribution only)."""
    import jax.numpy as jnp

    import coplay

    env = coplay.make(f"jaxmarl:{name}", **ENVS[name][0])
    if "global_state" in parts:
        env._global_state = lambda obs, views: jnp.zeros((0,), jnp.float32)
    if "mask" in parts:
        own = jnp.array([[j < c for j in range(env.spec.num_actions)] for c in env.num_choices], bool)
        env._mask = lambda lib_state: own
    if "inventory_planes" in parts:         # the grid view alone (what the inventory adds, measured)
        view_only = (lambda obs, i: obs["observations"][i]) if name == "storm" else \
            (lambda obs, i: obs[i]["observation"])
        env._agent_obs = view_only
    if "float_obs" in parts:
        def stack(obs, env=env):
            views = [env._agent_obs(obs, i) for i in range(env.n)]
            if env.same_shape:
                return jnp.stack(views)
            size = env.obs_shape[0]
            return jnp.stack([jnp.pad(v.reshape(-1), (0, size - v.size)) for v in views])
        env._stack_obs = stack
    return env


def build(name: str, mode: str, width: int, length: int, outputs: str, variants: dict | None = None):
    """{"library": call, "adapter": call, variant: call, ...}, each `call(key) -> (key, outputs)` jitted; and
    the env. `variants`: {label: parts switched off}."""
    import jax
    import jax.numpy as jnp

    import coplay

    kwargs, _ = ENVS[name]
    env = coplay.make(f"jaxmarl:{name}", **kwargs)
    lib, agents = env.lib, list(env.lib.agents)
    sample = _mode_sampler(mode, env.num_choices)
    width_a = env.spec.num_actions
    lib_mask = getattr(lib, {"HeuristicEnemySMAX": "get_avail_actions", "hanabi": "get_legal_moves"}.get(name, ""),
                       None)

    def library_mask(state):
        if mode == "uniform":
            return None
        avail = jax.vmap(lib_mask)(state)
        return jnp.stack([jnp.pad(jnp.asarray(avail[a]).astype(bool), ((0, 0), (0, width_a - c)))
                          for a, c in zip(agents, env.num_choices)], axis=1)

    def library_step(carry, key):
        state = carry[0]
        k_act, k_step = jax.random.split(key)
        acts = sample(k_act, library_mask(state), width)
        out = jax.vmap(lib.step_env)(jax.random.split(k_step, width), state, {a: acts[:, i] for i, a in
                                                                             enumerate(agents)})
        obs, state, rewards, dones, info = out
        if outputs == "learner":
            obs = jax.tree.map(lambda x: x.astype(jnp.float32), obs)
        return (state, obs, rewards, dones, info), None

    def library_run(key):
        key, k_reset, k_first, k_loop = jax.random.split(key, 4)
        _, state = jax.vmap(lib.reset)(jax.random.split(k_reset, width))
        carry, _ = library_step((state,), k_first)
        carry, _ = jax.lax.scan(library_step, carry, jax.random.split(k_loop, length - 1))
        return key, carry

    def adapter_run_of(adapter):
        def adapter_step(carry, key):
            state, ts = carry
            k_act, k_step = jax.random.split(key)
            acts = sample(k_act, ts.action_mask if mode == "legal" else None, width)
            state, ts = jax.vmap(adapter.step)(state, acts, jax.random.split(k_step, width))
            if outputs == "learner":
                ts = ts.replace(global_state=jnp.zeros((width, 0), jnp.float32))
            return (state, ts), None

        def adapter_run(key):
            key, k_reset, k_first, k_loop = jax.random.split(key, 4)
            carry = jax.vmap(adapter.reset)(jax.random.split(k_reset, width))
            carry, _ = adapter_step(carry, k_first)
            carry, _ = jax.lax.scan(adapter_step, carry, jax.random.split(k_loop, length - 1))
            return key, carry

        return jax.jit(adapter_run)

    fns = {"library": jax.jit(library_run), "adapter": adapter_run_of(env)}
    for label, parts in (variants or {}).items():
        fns[label] = adapter_run_of(without(name, parts))
    return fns, env


def same_play(fns: dict, agents: list) -> bool:
    """Whether the two sides played the same games: the same rewards on the last step of a check call."""
    import jax

    key = jax.random.PRNGKey(7)
    _, (_, _, rewards, _, _) = fns["library"](key)
    _, (_, ts) = fns["adapter"](key)
    lib_rewards = np.stack([np.asarray(rewards[a], np.float32) for a in agents], 1)
    return bool(np.allclose(lib_rewards, np.asarray(ts.reward)))


def _timed(fns: dict, width: int, length: int, rounds: int, seconds: float) -> tuple[dict, dict]:
    """Compile every side (timed), warm it up, then time them in turn: ({side: [rates]}, {side: compile s})."""
    import jax

    compiled, compile_s, holders = {}, {}, {}
    for side, fn in fns.items():
        t0 = time.perf_counter()
        compiled[side] = fn.lower(jax.random.PRNGKey(0)).compile()
        compile_s[side] = time.perf_counter() - t0
        holders[side] = jax.block_until_ready(compiled[side](jax.random.PRNGKey(1)))[0]     # a warm-up call
    steps = width * length

    def rate(side):
        def once():
            calls, t0 = 0, time.perf_counter()
            while True:
                holders[side], out = compiled[side](holders[side])
                jax.block_until_ready(out)
                calls += 1
                dt = time.perf_counter() - t0
                if dt >= seconds:
                    return calls * steps / dt
        return once

    return alternate({side: rate(side) for side in compiled}, rounds), compile_s, compiled


def measure(name: str, mode: str, width: int, length: int, outputs: str, rounds: int, seconds: float) -> dict:
    fns, env = build(name, mode, width, length, outputs)
    rates, compile_s, compiled = _timed(fns, width, length, rounds, seconds)
    agrees = same_play(compiled, list(env.lib.agents))
    ratio = paired(rates["adapter"], rates["library"])
    entry = {"env": name, "kwargs": ENVS[name][0], "mode": mode, "outputs": outputs, "width": width,
             "steps_per_call": length,
             "episode_steps": env.max_steps, "library": {"rates": rates["library"], "compile_s": compile_s["library"],
                                                         "steps_per_s": float(np.median(rates["library"]))},
             "adapter": {"rates": rates["adapter"], "compile_s": compile_s["adapter"],
                         "steps_per_s": float(np.median(rates["adapter"]))},
             "adapter_over_library": ratio, "overhead": 1 / ratio["median"] - 1, "same_rewards": agrees}
    print(f"{name:>22} {mode:>7} {outputs:>7} x{width:<5} L={length:<3} "
          f"library {entry['library']['steps_per_s']:>12,.0f}  "
          f"adapter {entry['adapter']['steps_per_s']:>12,.0f}  adapter/library {fmt_ratio(ratio)}  overhead "
          f"{100 * entry['overhead']:+.1f}%  compile {compile_s['library']:.1f}/{compile_s['adapter']:.1f} s"
          + ("" if agrees else "  (REWARDS DIFFER)"), flush=True)
    return entry


def attribute(entry: dict, rounds: int, seconds: float) -> dict:
    """Time the library, the adapter and the adapter without each applicable part (and without all of them),
    in turn: {label: {"parts", "steps_per_s", "over_library", "overhead"}}."""
    name = entry["env"]
    env = without(name, ())
    # without the mask, `legal` actions would be drawn from every action: other games, not comparable
    parts = [p for p in PARTS if applicable(env, p) and not (p == "mask" and entry["mode"] == "legal")]
    variants = {f"without {p}": (p,) for p in parts}
    if len(parts) > 1:
        variants["without " + " + ".join(parts)] = tuple(parts)
    fns, _ = build(name, entry["mode"], entry["width"], entry["steps_per_call"], entry["outputs"], variants)
    rates, _, _ = _timed(fns, entry["width"], entry["steps_per_call"], rounds, seconds)
    out = {}
    for label in ("adapter", *variants):
        r = paired(rates[label], rates["library"])
        out[label] = {"parts": list(variants.get(label, ())), "steps_per_s": float(np.median(rates[label])),
                      "over_library": r, "overhead": 1 / r["median"] - 1}
        print(f"    {label:>58}: {out[label]['steps_per_s']:>12,.0f}  over library {fmt_ratio(r)}  overhead "
              f"{100 * out[label]['overhead']:+.1f}%", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--envs", default=",".join(ENVS), help="JaxMARL ids, comma-separated")
    ap.add_argument("--widths", default="1,1024", help="parallel environments, comma-separated")
    ap.add_argument("--modes", default="uniform,legal", help="uniform and/or legal (legal: SMAX and Hanabi only)")
    ap.add_argument("--outputs", default="learner,all", help="learner and/or all: what each side keeps of a step")
    ap.add_argument("--rounds", type=int, default=9, help="rounds of one timing of each side, in turn")
    ap.add_argument("--seconds", type=float, default=0.4, help="length of one timing")
    ap.add_argument("--no-attribution", action="store_true",
                    help="skip timing the adapter without each of its parts where a row misses the limit")
    ap.add_argument("--quick", action="store_true", help="2 rounds of 0.1 s; nothing written")
    ap.add_argument("--no-write", action="store_true", help="print only; no results file, no BENCHMARKS.md")
    args = ap.parse_args()
    rounds, seconds = (2, 0.1) if args.quick else (args.rounds, args.seconds)
    envs = [e for e in args.envs.split(",") if e]
    if set(envs) - set(ENVS):
        ap.error(f"--envs: any of {', '.join(ENVS)}")
    widths = [int(w) for w in args.widths.split(",")]
    modes = [m for m in args.modes.split(",") if m]
    outputs = [o for o in args.outputs.split(",") if o]
    if set(outputs) - {"learner", "all"} or set(modes) - {"uniform", "legal"}:
        ap.error("--outputs: learner and/or all; --modes: uniform and/or legal")
    cases = []
    for name in envs:
        episode = without(name, ()).max_steps
        for mode in modes:
            if mode == "legal" and name not in MASKED:
                continue
            for width in widths:
                length = min(STEPS.get(width, 100 if width < 64 else 25), episode - 1)
                for out in outputs:
                    cases.append(measure(name, mode, width, length, out, rounds, seconds))
    if not args.no_attribution:
        for c in cases:
            if c["overhead"] > LIMIT:
                print(f"attribution: {c['env']} {c['mode']} {c['outputs']} x{c['width']}", flush=True)
                c["attribution"] = attribute(c, rounds, seconds)
    if args.quick or args.no_write:
        return
    write_results("adapter_overhead", {**stamp(), "jaxmarl_version": version("jaxmarl"), "rounds": rounds,
                                       "seconds_per_timing": seconds, "limit": LIMIT, "parts": PARTS,
                                       "cases": cases})
    regenerate_page()


# ----- the page ----------------------------------------------------------------------------------------------

TITLE = "The `jaxmarl:<name>` adapter beside JaxMARL's own stepping"


def _fmt(x: float) -> str:
    return f"{x / 1e6:.2f}M" if x >= 1e5 else f"{x / 1e3:.1f}k"


def _holds(c: dict, limit: float) -> str:
    r = c["adapter_over_library"]
    if c["overhead"] <= limit:
        return "yes" if 1 / r["min"] - 1 <= limit else "yes (median; not every round)"
    return "**no**" if 1 / r["max"] - 1 > limit else "**no** (median; some rounds within)"


def section(data: dict) -> str:
    limit = data.get("limit", LIMIT)
    cases = data["cases"]
    lines = [f"## {TITLE}", "",
             f"`{COMMAND}` on {data['machine']}; JaxMARL {data.get('jaxmarl_version') or '?'}. The same JaxMARL "
             "environment object stepped two ways: by JaxMARL's own `reset` and `step_env` (library), and through "
             "`coplay.make(\"jaxmarl:<name>\")`'s `reset` and `step` (adapter: actions as an [N] array, observations "
             "stacked, the action mask, active agents, global state, info converted). One timed call: W parallel "
             "environments (`vmap`) reset, then L steps (`jit`, `lax.scan`), no reset inside the call (L less than an "
             "episode's length; a SMAX battle or Hanabi game that ends sooner is stepped on by `step_env` on both "
             "sides alike). Both sides draw the same actions from the same keys and play the same games: `uniform` "
             "draws each agent's action uniformly over its own action count; `legal` uniformly over its legal "
             "actions (the library computes its mask from the state each step, as a learner must; the adapter's "
             "step returns it). What each side keeps of a step (so that it is not compiled away): `learner`, the "
             "claim, what a learner reads, the same facts on both sides (the library's state, observations cast "
             "to float32 as its baselines' networks cast them, rewards, dones, info; the adapter's TimeStep "
             "without the global state, which IPPO and the Q family do not read); `all`, everything each side "
             "returns as it returns it (the library's observations in their own dtype; the adapter's whole "
             "TimeStep: float32 observations, the global state a centralised critic reads, mask, active, "
             "truncated, info). The two sides "
             f"timed in turn, {data['rounds']} rounds of >= {data['seconds_per_timing']:g} s each; a rate is the "
             "median over rounds, adapter / library the median of the per-round ratios (range in brackets), "
             f"overhead = library / adapter - 1 (extra time per env step). Within {limit:.0%}: the median "
             "overhead, and whether every round was.", ""]
    rows = []
    for c in cases:
        rows.append([ENVS.get(c["env"], (None, c["env"]))[1], c["mode"], c.get("outputs", "all"), f"{c['width']:,}",
                     c["steps_per_call"],
                     _fmt(c["library"]["steps_per_s"]), _fmt(c["adapter"]["steps_per_s"]),
                     fmt_ratio(c["adapter_over_library"]), f"{100 * c['overhead']:+.1f}%", _holds(c, limit),
                     f"{c['library']['compile_s']:.1f} / {c['adapter']['compile_s']:.1f}"])
    lines += table(["environment", "actions", "kept", "W (parallel envs)", "L (steps per call)", "library env-steps/s",
                    "adapter env-steps/s", "adapter / library", "overhead", f"within {limit:.0%}",
                    "compile s (library / adapter)"], rows)
    misses = [c for c in cases if c["overhead"] > limit]
    if misses:
        lines += ["", "Beyond the limit: " + "; ".join(
            f"{ENVS.get(c['env'], (None, c['env']))[1]} ({c['mode']}, {c.get('outputs', 'all')}, {c['width']:,} "
            f"env{'s' if c['width'] > 1 else ''}) {100 * c['overhead']:+.0f}%"
            for c in misses) + "."]
    attributed = [c for c in cases if c.get("attribution")]
    if attributed:
        parts = data.get("parts", PARTS)
        lines += ["", "Where the overhead goes, for each row beyond the limit: the same row timed again (library, "
                  "adapter, and copies of the adapter with one part of its step switched off, then all of them, in "
                  "turn, the same rounds), in the benchmark's copy of the adapter only. The parts:", ""]
        lines += [f"- `{k}`: {v}." for k, v in parts.items()]
        lines += [""]
        rows = []
        for c in attributed:
            for label, a in c["attribution"].items():
                rows.append([ENVS.get(c["env"], (None, c["env"]))[1], c["mode"], c.get("outputs", "all"),
                             f"{c['width']:,}",
                             label.replace("without ", "adapter without ") if label != "adapter" else "adapter",
                             _fmt(a["steps_per_s"]), fmt_ratio(a["over_library"]), f"{100 * a['overhead']:+.1f}%"])
        lines += table(["environment", "actions", "kept", "W", "stepped by", "env-steps/s", "over library", "overhead"],
                       rows)
    if not all(c.get("same_rewards", True) for c in cases):
        lines += ["", "In some rows the two sides' rewards differed on a check game; those rows did not play the "
                      "same games."]
    return "\n".join(lines)


def claims(data: dict) -> list[dict]:
    limit = data.get("limit", LIMIT)
    out = []
    claimed = [c for c in data["cases"] if c.get("outputs", "learner") == "learner"]
    for width in sorted({c["width"] for c in claimed}):
        cs = [c for c in claimed if c["width"] == width]
        worst = min(cs, key=lambda c: c["adapter_over_library"]["median"])
        within = sum(c["overhead"] <= limit for c in cs)
        envs = len({c["env"] for c in cs})
        out.append({"claim": f"`jaxmarl:<name>` adapter stepping beside JaxMARL's own `step_env`: within "
                             f"{limit:.0%} in {within} of {len(cs)} rows",
                    "workload": f"{envs} JaxMARL environments, random actions, what a learner reads, {width:,} "
                                f"parallel "
                                f"env{'s' if width > 1 else ''}",
                    "ratio": f"worst {fmt_ratio(worst['adapter_over_library'])} ({worst['env']}, {worst['mode']})",
                    "machine": data["machine"]})
    return out


if __name__ == "__main__":
    main()
