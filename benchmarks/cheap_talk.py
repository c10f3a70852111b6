"""Adversarial and cooperative cheap talk on spread: a speaker that only appends a message
to the victims' observations, trained by evolution strategies over victims that learn
from scratch (Lu et al., ICML 2023), beside a silent and a random speaker.

    python benchmarks/cheap_talk.py              # about 40 minutes on 2 cores
    python benchmarks/cheap_talk.py --speed      # victims per second of one generation only (a quiet machine)
    python benchmarks/cheap_talk.py --quick      # smoke run, nothing written

The victims: the three agents of `spread`, IPPO (`algo.num_envs=16 algo.rollout_len=32`,
defaults otherwise) for `--updates` updates from scratch; their score is the mean episode
return of the last `--tail` updates. The speaker: `linear_speaker` (tanh of a linear map of
the global state, 2 numbers) heard by all three. OpenAI-ES (evosax's `Open_ES`: population
`--population`, antithetic, centred ranks, sigma 0.5, Adam 0.1), `--victim-seeds` victim
runs per member, `--generations` generations, once lowering the victims' score
(adversarial) and once raising it (cooperative). Then every speaker (silent: every message
0; random: Gaussian parameters of the ES's sigma; the two trained ones) is heard by
`--seeds` fresh victim runs: interquartile mean with 95% bootstrap intervals.

Writes benchmarks/results/cheap_talk.json (`--speed` replaces only its speed figure), then
BENCHMARKS.md (benchmarks/page.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import load, regenerate_page, stamp, table, write_results  # noqa: E402

RESULTS = "cheap_talk.json"
COMMAND = "python benchmarks/cheap_talk.py"
OVERRIDES = {"num_envs": 16, "rollout_len": 32}


def main() -> None:
    from coplay.eval.cheap_talk import random_speaker, score_speaker, train_cheap_talk

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--generations", type=int, default=30)
    ap.add_argument("--population", type=int, default=16)
    ap.add_argument("--victim-seeds", type=int, default=2)
    ap.add_argument("--updates", type=int, default=40)
    ap.add_argument("--tail", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=16, help="fresh victim runs scoring each speaker")
    ap.add_argument("--speed", action="store_true", help="measure victims per second only")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.generations, args.population, args.updates, args.tail, args.seeds = 2, 4, 4, 2, 2
    common = dict(overrides=OVERRIDES, victim_updates=args.updates, tail=args.tail)
    es = dict(population=args.population, victim_seeds=args.victim_seeds, **common)
    if args.speed:
        run = train_cheap_talk("spread", generations=4, **es)
        old = load(RESULTS) or {}
        old["speed"] = {"victims_per_second": run.victims_per_second, "generation_s": run.seconds, **stamp()}
        if not args.quick:
            write_results(RESULTS.removesuffix(".json"), old)
            regenerate_page()
        print(json.dumps(old["speed"], default=str))
        return
    t = time.perf_counter()
    trained = {mode: train_cheap_talk("spread", mode=mode, generations=args.generations, verbose=True, **es)
               for mode in ("adversarial", "cooperative")}
    speakers = {"silent": None, "random": random_speaker("spread", scale=0.5),
                **{m: r.params for m, r in trained.items()}}
    scores = {}
    for name, params in speakers.items():
        est, values = score_speaker("spread", params, seeds=args.seeds, **common)
        scores[name] = {**est.as_dict(), "values": values.tolist()}
        print(name, est, flush=True)
    data = {"settings": {**vars(args), "overrides": OVERRIDES}, "scores": scores,
            "curves": {m: r.fitness for m, r in trained.items()},
            "es_victims_per_second_contended": {m: r.victims_per_second for m, r in trained.items()},
            "seconds": time.perf_counter() - t, **stamp()}
    old = load(RESULTS) or {}
    if "speed" in old:
        data["speed"] = old["speed"]
    if args.quick:
        print(section(data))
        return
    write_results(RESULTS.removesuffix(".json"), data)
    regenerate_page()


def section(d: dict) -> str:
    s, sc = d["settings"], d["scores"]
    rows = [[name, f"{v['iqm']:.2f} [{v['ci_low']:.2f}, {v['ci_high']:.2f}]"] for name, v in sc.items()]
    curves = d["curves"]
    lines = ["## Cheap talk: a speaker that only talks, trained against and for the victims", "",
             f"`{COMMAND} --generations {s['generations']} --population {s['population']} --victim-seeds "
             f"{s['victim_seeds']} --updates {s['updates']} --tail {s['tail']} --seeds {s['seeds']}` on "
             f"{d['machine']}. Victims: the three agents of `spread`, IPPO "
             f"(`algo.num_envs={d['settings']['overrides']['num_envs']} "
             f"algo.rollout_len={d['settings']['overrides']['rollout_len']}`) from scratch for {s['updates']} "
             f"updates, scored by the mean return of their last {s['tail']} updates; each speaker heard by "
             f"{s['seeds']} fresh victim runs (interquartile mean, 95% bootstrap interval). The speaker appends "
             "two numbers, a tanh of a linear map of the global state, to every victim's observation; it acts on "
             "nothing. Adversarial and cooperative speakers trained by OpenAI-ES (evosax).", "",
             *table(["speaker", "victims' return"], rows), "",
             f"ES generations, the population's mean victims' return: adversarial {curves['adversarial'][0]:.2f} "
             f"-> {curves['adversarial'][-1]:.2f}, cooperative {curves['cooperative'][0]:.2f} -> "
             f"{curves['cooperative'][-1]:.2f} (the two modes draw the same victims each generation, shared by all "
             "the generation's members, so their curves swing together with the draw)."]
    adv, coop, silent = sc["adversarial"], sc["cooperative"], sc["silent"]
    apart = adv["ci_high"] < coop["ci_low"]
    lines += ["", ("The adversarial speaker's interval lies below the cooperative one's: "
                   if apart else "**The paper's qualitative result is not reproduced at this budget**: the "
                   "adversarial and the cooperative speaker's intervals overlap ") +
              f"(adversarial {adv['iqm']:.2f} [{adv['ci_low']:.2f}, {adv['ci_high']:.2f}], cooperative "
              f"{coop['iqm']:.2f} [{coop['ci_low']:.2f}, {coop['ci_high']:.2f}], silent {silent['iqm']:.2f})."]
    speed = d.get("speed")
    if speed:
        lines += ["", f"One ES generation trains {speed['victims_per_second']:.1f} victim runs per second "
                      f"({s['updates']} updates of {OVERRIDES['num_envs'] * OVERRIDES['rollout_len']} steps each; "
                      f"median of the generations after the first; `{COMMAND} --speed` on {speed['machine']}, "
                      "alone on the machine)."]
    else:
        lines += ["", f"**Needs a rerun** (victims per second, timed alone on the machine): `{COMMAND} --speed`."]
    lines += ["", f"{d['date']}; commit {d['commit']}; {d['seconds'] / 60:.0f} min."]
    return "\n".join(lines)


def load_results() -> dict | None:
    data = load(RESULTS)
    return data if data and "scores" in data else None


if __name__ == "__main__":
    main()
