"""The token-faithful rollout record `algo=lm_grpo` trains from (`coplay.lm.rollout`), one
test per property, on the tiny random Llama playing Kuhn poker: replies kept as sampled,
the sampler's log-probabilities, the loss mask, who/role/turn/group, the model version,
truncated episodes dropped rather than scored, and the TRL and verl exports."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch", reason="the llm extra: pip install coplay[llm]")

import coplay  # noqa: E402
from coplay.algos.lm_grpo import LMGRPO, Config  # noqa: E402
from coplay.lm.models import tiny_model  # noqa: E402
from coplay.lm.rollout import Rollout  # noqa: E402


@pytest.fixture(scope="module")
def learner():
    env = coplay.make("text:kuhn_poker")
    return LMGRPO(Config(model="tiny", episodes=8, group_size=4, max_new_tokens=3, lr=1e-2, minibatches=2),
                  env, seeds=1, seed=0, loaded=tiny_model(seed=2))


@pytest.fixture(scope="module")
def played(learner):
    return learner.play(0, 0, 8, 4)


def test_replies_are_kept_as_sampled_with_the_samplers_log_probabilities(learner, played):
    rec = played.turns
    assert len(rec) >= 8 and rec.per_token     # a random model forfeits most games at its first reply
    again = learner.player.token_log_probs(rec.prompts, rec.replies)
    for i in range(len(rec)):
        np.testing.assert_allclose(again[i].detach().numpy(), rec.old[i], atol=1e-4)


def test_the_mask_covers_the_agents_own_reply_tokens_only(played):
    rec = played.turns
    for i in range(len(rec)):
        m = rec.mask(i)
        assert m.shape == (len(rec.prompts[i]) + len(rec.replies[i]),)
        assert m[:len(rec.prompts[i])].sum() == 0 and m[len(rec.prompts[i]):].all()


def test_each_reply_names_its_agent_role_turn_group_and_episode():
    env = coplay.make("text:kuhn_poker")
    legal = LMGRPO(Config(model="tiny", episodes=8, group_size=4, max_new_tokens=3, decoding="choose_legal"),
                   env, seeds=1, seed=0, loaded=tiny_model(seed=2))    # legal moves: games of several turns
    played = legal.play(0, 0, 8, 4)
    rec = played.turns
    assert not rec.per_token
    roles = env.spec.roles
    for i in range(len(rec)):
        e, t, a = rec.episode[i], rec.step[i], rec.agent[i]
        assert played.acted[e, t, a] and rec.role[i] == roles[a] and rec.group[i] == played.group[e]
    assert sorted(set(rec.group)) == [0, 1] and set(rec.step) >= {0, 1}
    # in Kuhn poker the players alternate: at each turn of an episode exactly one spoke
    for e in range(8):
        steps = [rec.step[i] for i in range(len(rec)) if rec.episode[i] == e]
        assert steps == sorted(set(steps))


def test_the_model_version_counts_the_adapters_optimiser_steps():
    env = coplay.make("text:kuhn_poker")
    one = LMGRPO(Config(model="tiny", episodes=4, group_size=4, max_new_tokens=3, minibatches=2, epochs=2),
                 env, seeds=1, seed=0, loaded=tiny_model(seed=2))
    assert set(one.play(0, 0, 4, 4).turns.version) == {0}
    one.update(0, 0)
    assert set(one.play(0, 1, 4, 4).turns.version) == {4}     # 2 epochs x 2 minibatches


def test_episodes_cut_by_the_horizon_are_dropped_not_scored_as_zero():
    env = coplay.make("text:kuhn_poker")
    short = LMGRPO(Config(model="tiny", episodes=4, group_size=4, max_new_tokens=3, lr=1e-1,
                          decoding="choose_legal"), env, seeds=1, seed=0, loaded=tiny_model(seed=2))
    short.horizon = 1                      # a Kuhn poker game takes at least two turns
    played = short.play(0, 0, 4, 4)
    assert not played.complete.any() and set(played.turns.status) == {"truncated"}
    assert not played.turns.scored().any()
    assert np.all(short.advantages(0, played) == 0)
    before = [p.detach().clone() for p in short.params["seed0"]]
    metrics = short.update(0, 0)
    assert all((p == b).all() for p, b in zip(short.params["seed0"], before))   # nothing trained on
    assert metrics["truncated"] == 1.0 and np.isnan(metrics["return"]) and metrics["grad_norm"] == 0.0


def test_exports_to_trl_and_verl_field_names(learner, played):
    rec = played.turns
    adv = np.linspace(-1, 1, len(rec))
    trl = rec.to_trl(adv)
    assert {"prompt_ids", "completion_ids", "logprobs", "env_mask"} <= set(trl)      # rollout_func's contract
    assert trl["completion_ids"] == rec.replies and trl["prompt_ids"] == rec.prompts
    assert all(len(lp) == len(c) == len(m) for lp, c, m in zip(trl["logprobs"], trl["completion_ids"], trl["env_mask"]))
    assert trl["model_version"] == rec.version and trl["advantages"] == pytest.approx(list(adv))
    pad = learner.player.pad_id
    verl = rec.to_verl(pad, adv)
    m, r = verl["responses"].shape
    assert m == len(rec) and verl["input_ids"].shape == (m, verl["prompts"].shape[1] + r)
    for i in range(m):
        n = len(rec.replies[i])
        assert verl["response_mask"][i].sum() == n and list(verl["responses"][i, :n]) == rec.replies[i]
        p = verl["prompts"][i]
        assert list(p[len(p) - len(rec.prompts[i]):]) == rec.prompts[i]           # left-padded
        np.testing.assert_allclose(verl["old_log_probs"][i, :n], rec.old[i], rtol=1e-6)
        np.testing.assert_allclose(verl["advantages"][i], adv[i] * verl["response_mask"][i], rtol=1e-6)
    assert verl["attention_mask"].sum() == sum(len(a) + len(b) for a, b in zip(rec.prompts, rec.replies))
    assert list(verl["uid"]) == [str(g) for g in rec.group]


def test_exports_leave_out_episodes_that_are_not_complete_and_refuse_a_record_of_moves():
    rec = Rollout([[1, 2], [1, 4]], [[3], [5, 6]], [np.zeros(1), np.zeros(2)], None, [[0], [0]], [0, 0],
                  agent=[0, 1], role=["a", "b"], episode=[0, 1], group=[0, 0], step=[0, 0], version=[0, 0],
                  texts=["x", "y"])
    rec.finish(["complete", "truncated"])
    assert rec.to_trl()["completion_ids"] == [[3]] and rec.to_trl(keep_all=True)["completion_ids"] == [[3], [5, 6]]
    assert rec.to_verl(0)["responses"].shape == (1, 1) and list(rec.to_verl(0)["status"]) == ["complete"]
    with pytest.raises(ValueError, match="not one of"):
        rec.finish(["complete", "lost"])
    rec.per_token = False
    with pytest.raises(ValueError, match="choose_legal"):
        rec.to_trl()
