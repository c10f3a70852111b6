"""The memory a compiled run needs, estimated from shapes before anything is built
(`coplay.experiment.memory`), and the refusal of a run that cannot fit."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tiny_run import TINY

from coplay.cli.main import main
from coplay.core.errors import ConfigError
from coplay.experiment import compiled, memory
from coplay.experiment.config import parse_overrides
from coplay.experiment.runner import build_engine, train


def test_the_state_estimate_is_the_size_of_the_state_the_run_initialises():
    exp = parse_overrides([*TINY, "seeds=3"])
    engine = build_engine(exp)
    try:
        state = compiled.init_state(engine.plan)
    finally:
        engine.close()
    assert engine.memory.state_bytes == sum(x.nbytes for x in jax.tree.leaves(state))
    assert engine.memory.state["params"] == sum(x.nbytes for x in jax.tree.leaves(state.params))


def test_working_memory_counts_what_a_loop_stacks_and_what_lives_at_once():
    def stacked(x, n):
        return jax.lax.scan(lambda c, _: (c + 1.0, c * 2.0), x, None, length=n)

    x = jnp.zeros(1000, jnp.float32)
    ten = memory.peak_bytes(jax.make_jaxpr(lambda x: stacked(x, 10))(x).jaxpr)
    hundred = memory.peak_bytes(jax.make_jaxpr(lambda x: stacked(x, 100))(x).jaxpr)
    assert 10 * 4000 <= ten < 14 * 4000             # the stacked outputs, and a step's values
    assert hundred - ten == 90 * 4000                 # grows by exactly what the longer loop stacks

    def two_alive(x):
        a, b = jnp.sin(x), jnp.cos(x)                 # both alive until the sum, beside the input
        return (a + b + x).sum()

    def one_at_a_time(x):
        return jnp.sin(jnp.cos(x)).sum()              # each value read once, its buffer reused

    assert memory.peak_bytes(jax.make_jaxpr(two_alive)(x).jaxpr) >= 2 * 4000
    assert memory.peak_bytes(jax.make_jaxpr(one_at_a_time)(x).jaxpr) < 2 * 4000


def test_a_run_that_cannot_fit_is_refused_before_anything_is_built_naming_the_seeds_that_fit(tmp_path, monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda: (2 * memory.GB, "a test's limit"))
    monkeypatch.setattr(memory, "process_bytes", lambda: memory.GB // 2)      # whatever this worker holds
    monkeypatch.setattr(compiled, "init_state", lambda p: pytest.fail("the state was built"))
    with pytest.raises(ConfigError, match=r"the run needs about .* GB of memory and 2\.00 GB is available "
                                          r"\(a test's limit\).*lower seeds \(at most \d+ fit\).*check_memory=false"):
        train(["algo=ippo", "env=spread", "seeds=20000", f"out_dir={tmp_path}"])
    assert not any(tmp_path.iterdir())                # no run directory


def test_check_memory_false_lets_a_run_the_estimate_refuses_start(monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda: (1, "a test's limit"))
    with pytest.raises(ConfigError, match="needs about"):
        build_engine(parse_overrides(TINY)).close()
    engine = build_engine(parse_overrides([*TINY, "check_memory=false"]))
    engine.close()
    assert not engine.memory.fits() and engine.memory.most_seeds() == 0


def test_train_plan_prints_the_schedule_and_the_estimate_and_writes_nothing(tmp_path, capsys):
    assert main(["train", *TINY, "seeds=100000", f"out_dir={tmp_path}", "--plan"]) == 0
    out = capsys.readouterr().out
    assert "100000 seeds" in out
    assert "20 updates of 80 environment steps per seed (1600 of total_steps=1600), in 4 chunks of up to 5" in out
    state = float(out.split("state of 100000 seeds: ")[1].split()[0])
    assert np.isfinite(state) and "working memory, every seed" in out and "available on this machine" in out
    assert not any(tmp_path.iterdir())
