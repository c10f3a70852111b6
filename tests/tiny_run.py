"""The one small run that the tests of the runner's plumbing share (run directories,
resume, interrupts, many seeds, devices, sweeps): IPPO on a 10-round climbing game,
4 chunks of 400 steps, evaluated after each.

Tests vary only what they check (seeds, the learning rate, a longer budget), so that
runs of one shape compile one program: the session's compilation cache then hands it
to every later test, and to the processes tests start (CLI runs, Ray workers)."""

TINY = ["algo=ippo", "env=matrix", "env.game=climbing", "env.rounds=10", "algo.num_envs=8", "algo.rollout_len=10",
        "algo.hidden_size=16", "chunk_steps=400", "total_steps=1600", "eval_episodes=4", "progress=false",
        "logger=csv"]
