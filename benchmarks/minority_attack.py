"""How far one adversarial agent lowers a trained team's return, beside a random or idle
agent in the same seat, with and without AMI's influence reward.

    python benchmarks/minority_attack.py            # about 5 minutes on 2 cores
    python benchmarks/minority_attack.py --quick    # smoke run, nothing written

An IPPO team trains on `spread` (3 agents, 99,200 steps, seed 0 is the team). Then an
IPPO adversary trains in seat 2 (`minority=<team>@0:seat=2`, 4 seeds, `--steps` each),
rewarded with minus the victims' reward, the victims playing their frozen policy; a second
adversary likewise, plus `--influence` times how much its action moves the victims'
policies `--horizon` steps on (`minority=<team>@0:seat=2:influence=B:horizon=H`). In
spread every agent receives the team's reward, so the victims' return is the team's.
The rows: the intact team, seat 2 played by uniformly random actions and by the no-op
(`coplay.eval.shapley.coalition_value`, 512 episodes, normal 95% interval over
episodes), and by each trained adversary (its final evaluation, 256 episodes per seed;
interquartile mean over the adversary's seeds, 95% bootstrap interval).

Writes benchmarks/results/minority_attack.json, then BENCHMARKS.md (benchmarks/page.py).
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import regenerate_page, stamp, table, write_results  # noqa: E402

RESULTS = "minority_attack.json"
COMMAND = "python benchmarks/minority_attack.py"
SEAT = 2


def main() -> None:
    import jax

    import coplay
    from coplay.eval.shapley import coalition_value
    from coplay.experiment.playback import load_run

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=200_000, help="adversary's environment steps per seed")
    ap.add_argument("--influence", type=float, default=1.0,
                    help="weight of AMI's influence reward for the second adversary")
    ap.add_argument("--horizon", type=int, default=2,
                    help="steps after the adversary's action at which the victims' policies are compared (in spread "
                         "an action shows in the others' view two steps on)")
    ap.add_argument("--quick", action="store_true", help="short trainings, nothing written")
    args = ap.parse_args()
    team_steps, steps, episodes = (3200, 3200, 32) if args.quick else (99_200, args.steps, 512)
    common = ["progress=false", "logger=csv"]
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        team = coplay.train(["algo=ippo", "env=spread", f"total_steps={team_steps}", "seeds=1", "name=team",
                             "eval_episodes=64", f"out_dir={tmp}", *common])
        run = load_run(team.run_dir)
        env = coplay.make("spread")
        params = jax.tree.map(lambda x: x[0], run.params)
        # the intact team is the coalition of all three (played once, with the first stand-in), then seat
        # 2 left out: played by each stand-in on the same episode keys
        stand_ins = {}
        for name in ("random", "noop"):
            value = coalition_value(env, run.policy, params, replacement=name, episodes=episodes)
            seats = [[True, True, False]] if stand_ins else [[True, True, True], [True, True, False]]
            v = np.asarray(value(jax.numpy.asarray(seats), jax.random.PRNGKey(1)), np.float64)
            if not stand_ins:
                stand_ins["intact team"] = v[0].tolist()
            stand_ins[f"seat {SEAT}: {name}"] = v[-1].tolist()
        found = {}
        seat = f"minority={team.run_dir}@0:seat={SEAT}"
        for name, field in (("adversary", seat),
                            ("influence", f"{seat}:influence={args.influence}:horizon={args.horizon}")):
            adversary = coplay.train(["algo=ippo", "env=spread", field, f"total_steps={steps}", "seeds=4",
                                      f"name={name}", "eval_episodes=256", f"out_dir={tmp}", *common])
            rows = list(csv.DictReader((adversary.run_dir / "metrics.csv").open()))
            last = max(int(float(r["env_steps"])) for r in rows if r.get("eval/victims_reward"))
            final = [r for r in rows if r.get("eval/victims_reward") and int(float(r["env_steps"])) == last]
            found[name] = {"victims": [float(r["eval/victims_reward"]) for r in final],
                           "influence": [float(r["eval/influence"]) for r in final if r.get("eval/influence")]}
            print(f"{name}: victims {np.round(found[name]['victims'], 2).tolist()}, influence "
                  f"{[f'{i:.3g}' for i in found[name]['influence']]}", flush=True)
        seconds = time.perf_counter() - t
    print(f"intact {np.mean(stand_ins['intact team']):.2f}, random seat "
          f"{np.mean(stand_ins[f'seat {SEAT}: random']):.2f} ({seconds:.0f} s)", flush=True)
    if args.quick:
        return
    write_results("minority_attack", {**stamp(), "team_steps": team_steps, "adversary_steps": steps,
                                      "episodes": episodes, "seat": SEAT, "stand_ins": stand_ins,
                                      "adversary_victims_return": found["adversary"]["victims"],
                                      "influence_weight": args.influence, "influence_horizon": args.horizon,
                                      "influence_victims_return": found["influence"]["victims"],
                                      "influence_per_episode": found["influence"]["influence"],
                                      "seconds": seconds})
    regenerate_page()


# ----- the page ----------------------------------------------------------------------------------------------


def section(data: dict) -> str:
    from coplay.eval.stats import summarize

    def normal(x: list[float]) -> str:
        a = np.asarray(x)
        half = 1.96 * a.std(ddof=1) / np.sqrt(len(a))
        return f"{a.mean():.2f} [{a.mean() - half:.2f}, {a.mean() + half:.2f}]"

    lines = ["## A minority adversary in a trained spread team", "",
             f"`{COMMAND}` on {data['machine']} ({data['date']}, coplay {data['commit']}): an IPPO team on `spread` "
             f"({data['team_steps']:,} steps); seat {data['seat']} then played by uniformly random actions, by the "
             f"no-op, or by an IPPO adversary trained for {data['adversary_steps']:,} steps per seed "
             f"(`minority=<team>@0:seat={data['seat']}`, rewarded with minus the victims' reward). The victims' "
             "episode return per agent (in spread every agent gets the team's reward); intact team and stand-ins: "
             f"{data['episodes']} episodes, normal 95% interval; adversary: the IQM over its 4 seeds' final "
             "evaluations (256 episodes each), 95% bootstrap interval.", ""]
    rows = [[name, normal(v)] for name, v in data["stand_ins"].items()]
    adversary = summarize(np.asarray(data["adversary_victims_return"]))
    rows.append([f"seat {data['seat']}: trained adversary", str(adversary)])
    if "influence_victims_return" in data:
        influence = summarize(np.asarray(data["influence_victims_return"]))
        rows.append([f"seat {data['seat']}: trained adversary, influence weight {data['influence_weight']:g}",
                     str(influence)])
    lines += table(["seat played by", "victims' return per agent"], rows)
    if "influence_victims_return" in data:
        moved = summarize(np.asarray(data["influence_per_episode"]))
        lines += ["", f"The second adversary (`minority=<team>@0:seat={data['seat']}:influence="
                  f"{data['influence_weight']:g}:horizon={data['influence_horizon']}`) is also rewarded for moving "
                  "the victims' policies: AMI's influence term, the KL of the victims' policy "
                  f"{data['influence_horizon']} steps after its action to their mean policy over its legal actions "
                  "(`coplay.wrappers.minority`; in spread an agent moves with its previous velocity, so an action "
                  "shows in the others' view two steps on). Its influence summed over an episode, IQM over its "
                  f"seeds: {moved.value:.3g} [{moved.low:.3g}, {moved.high:.3g}] (the adversary's reward per "
                  f"episode is minus the victims' return plus {data['influence_weight']:g} times that)."]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
