"""Beyond one machine: a Ray cluster simulated on this one (`ray.cluster_utils.Cluster`),
a head without CPUs and two worker nodes of one CPU each, so that every trial and task
must run on a worker node. A sweep's trials run on both workers; one worker is removed
while its trial runs, and the trial, retried on the other, ends exactly as the same run
made alone in this process. A tournament's matches and PSRO's meta-game, played as Ray
tasks over both workers, equal the tables made here.

One cluster serves the class (starting it takes seconds); the tests share the "ray"
xdist group with the other tests that start Ray."""

import csv
import json
import os
import signal
import threading
import time
import warnings
from pathlib import Path

import jax
import numpy as np
import pytest
from tiny_run import TINY

import coplay
from coplay.cli.main import main
from coplay.experiment import checkpoint
from coplay.experiment.sweep import read_attempts, sweep
from coplay.experiment.sweep_plan import plan_sweep

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")

SMALL = [a for a in TINY if a != "progress=false"]


class SimulatedCluster:
    """A head node with no CPUs (the driver, this process, connects to it) and worker nodes of one CPU."""

    def __init__(self) -> None:
        self.workers: list = []
        with warnings.catch_warnings():  # JAX warns of any fork; Ray forks only to exec its processes
            warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called")
            self.cluster = cluster_utils.Cluster(initialize_head=True,
                                                 head_node_args={"num_cpus": 0, "include_dashboard": False})
            self.ensure_workers(2)
            ray.init(address=self.cluster.address, include_dashboard=False, logging_level="warning")

    @property
    def address(self) -> str:
        return self.cluster.address

    def worker_ids(self) -> set[str]:
        return {n.node_id for n in self.workers}

    def ensure_workers(self, count: int) -> None:
        """Add worker nodes until `count` are alive (a test may have removed one)."""
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called")
            while len(self.workers) < count:
                self.workers.append(self.cluster.add_node(num_cpus=1))
        self.cluster.wait_for_nodes()

    def remove(self, node_id: str) -> None:
        node = next(n for n in self.workers if n.node_id == node_id)
        self.cluster.remove_node(node)
        self.workers.remove(node)

    def shutdown(self) -> None:
        ray.shutdown()
        self.cluster.shutdown()


def test_a_tournament_address_that_is_not_ray_is_refused_before_any_game(tmp_path, capsys):
    code = main(["tournament", "random", "minimax", "env=tic_tac_toe", "--address", "nonsense",
                 "--out", str(tmp_path / "t")])
    assert code == 2 and "not a Ray address" in capsys.readouterr().err
    assert not (tmp_path / "t").exists()


@pytest.fixture(scope="class")
def cluster():
    c = SimulatedCluster()
    yield c
    c.shutdown()


@pytest.mark.xdist_group("ray")
@pytest.mark.slow
class TestOnASimulatedCluster:
    def test_tournament_matches_played_over_the_workers_equal_the_local_table(self, cluster, tmp_path, capsys):
        cluster.ensure_workers(2)
        args = ["tournament", "random", "minimax", "env=tic_tac_toe", "--games", "30", "--bootstrap", "50"]
        assert main([*args, "--out", str(tmp_path / "here")]) == 0
        assert main([*args, "--out", str(tmp_path / "there"), "--address", cluster.address]) == 0
        # Two grids of matches (each bot in seat 0 once), one Ray task each, one on each worker.
        assert "matches played as 2 Ray tasks on 2 nodes" in capsys.readouterr().out
        here, there = (json.loads((tmp_path / d / "tournament.json").read_text()) for d in ("here", "there"))
        assert there["counts"] == here["counts"] and there["ratings"] == here["ratings"]
        assert sum(map(sum, here["counts"][0])) == sum(map(sum, here["counts"][1])) == 30

    def test_psro_meta_game_played_over_the_workers_equals_the_local_one(self, cluster):
        from coplay.algos import psro_ppo
        from coplay.scale.ray_tasks import RayDispatch

        cluster.ensure_workers(2)
        game = coplay.make("tic_tac_toe")
        config = psro_ppo.Config(iterations=1, br_updates=1, meta_games=32, num_envs=8, rollout_len=4,
                                 minibatches=1, hidden_size=8, num_layers=1)
        here = psro_ppo.run(game, config, jax.random.PRNGKey(3))
        dispatch = RayDispatch(cluster.address)
        there = psro_ppo.run(game, config, jax.random.PRNGKey(3), dispatch=dispatch)
        # Three times the new member against the population (members 0 and 1, then the
        # final response), each seating a task: six tasks, spread over both workers.
        assert len(dispatch.nodes) == 6 and set(dispatch.nodes) == cluster.worker_ids()
        np.testing.assert_array_equal(there.details["payoffs"], here.details["payoffs"])
        assert there.details["final_br_value"] == here.details["final_br_value"]
        np.testing.assert_array_equal(there.exploitability, here.exploitability)
        assert np.any(here.details["payoffs"] != 0)  # the members differ: the table says something

    def test_sweep_trials_run_on_both_workers_and_a_lost_node_costs_no_result(self, cluster, tmp_path):
        cluster.ensure_workers(2)
        workers = cluster.worker_ids()
        # The victim runs 20 chunks and is stopped after its first; the other trial runs 4.
        args = [*(a for a in SMALL if not a.startswith("total_steps")), "total_steps=8000,1600", "seeds=1"]
        out = tmp_path / "sweep"
        plan = plan_sweep(args, out=out)
        victim = plan.trials[0]
        record: dict = {}
        remover = threading.Thread(target=_remove_node_after_first_checkpoint,
                                   args=(cluster, victim.run_dir, victim.id, record), daemon=True)
        remover.start()
        result = sweep(args, out=out, max_failures=2, verbose=0)
        remover.join(timeout=0)
        assert "node" in record, "no node was removed"
        assert not record["finished_before"]

        # Where each attempt ran: the two trials started on the two workers; the victim's
        # node was lost, and Tune ran it again on the other, from its checkpoint.
        assert result.failed == {}
        attempts = {t.id: read_attempts(t.run_dir, t.id) for t in plan.trials}
        other = plan.trials[1].id
        assert {attempts[victim.id][0]["node"], attempts[other][0]["node"]} == workers
        assert [a["node"] for a in attempts[victim.id]] == [record["node"], attempts[other][0]["node"]]
        assert attempts[victim.id][1]["resumed_at_chunk"] >= 1 and len(attempts[other]) == 1
        assert all(r["seeds"] == 1 and r["return"] is not None for r in result.table)

        # The victim ends exactly as the same run made alone in this process: metrics and state.
        alone = coplay.train([*(o for o in victim.overrides if not o.startswith("out_dir=")),
                              f"out_dir={tmp_path / 'alone'}"])
        assert json.loads((victim.run_dir / "summary.json").read_text())["final"] == alone.summary["final"]
        assert _rows(victim.run_dir) == _rows(alone.run_dir) and len(_rows(alone.run_dir)) == 20
        lost, whole = (checkpoint.arrays(checkpoint.list_checkpoints(d / "checkpoints")[-1])
                       for d in (victim.run_dir, alone.run_dir))
        assert jax.tree.structure(lost) == jax.tree.structure(whole)
        for a, b in zip(jax.tree.leaves(lost), jax.tree.leaves(whole)):
            np.testing.assert_array_equal(a, b)


def _rows(run_dir: Path) -> list[dict]:
    with (run_dir / "metrics.csv").open() as f:
        return [{k: v for k, v in r.items() if k != "wall_time"} for r in csv.DictReader(f)]


def _remove_node_after_first_checkpoint(cluster: SimulatedCluster, run_dir: Path, trial_id: str,
                                        record: dict) -> None:
    """Once the trial has written its first checkpoint, freeze its worker process (so that
    it cannot finish meanwhile), remove the node it runs on, and end the frozen process:
    the machine is gone."""
    while not list((run_dir / "checkpoints").glob("ckpt_*.msgpack")):
        time.sleep(0.01)
    attempt = read_attempts(run_dir, trial_id)[0]
    if attempt.get("node") not in cluster.worker_ids():
        return  # the attempt does not say where it runs: nothing to remove, and the test fails
    os.kill(attempt["pid"], signal.SIGSTOP)
    record["finished_before"] = (run_dir / "summary.json").exists()
    try:
        cluster.remove(attempt["node"])
    finally:
        try:
            os.kill(attempt["pid"], signal.SIGKILL)
        except ProcessLookupError:
            pass
    record["node"] = attempt["node"]
