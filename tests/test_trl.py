"""TRL's GRPOTrainer trained on a coplay game through `coplay.scale.trl.GameRollout` (its
rollout_func), on CPU with a tiny model: rows token-faithful to what was sampled, coplay's
per-turn advantage as the reward (which TRL's centring leaves unchanged), decisions that
did not happen unscorable, and a few of TRL's steps that move the weights."""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("trl")
pytest.importorskip("torch", reason="the llm extra: pip install coplay[llm]")

import torch  # noqa: E402

from coplay.core.errors import ConfigError  # noqa: E402
from coplay.lm.models import tiny_model  # noqa: E402
from coplay.scale.trl import GameRollout  # noqa: E402

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


def _model():
    """The tiny random Llama, leaning towards Kuhn poker's words and the end of a reply (a
    fixed bias on its output, the same for the sampler and the trainer), so that some of its
    replies are moves and the games differ."""
    loaded = tiny_model(seed=0)
    tok = loaded.tokenizer
    bias = torch.zeros(loaded.model.config.vocab_size)
    for w in ("pass", "bet"):
        bias[tok.encode(w, add_special_tokens=False)] = 6.0
    bias[tok.eos_token_id] = 6.0
    loaded.model.lm_head.register_forward_hook(lambda module, inputs, out: out + bias)
    return loaded


@pytest.fixture(scope="module")
def trainer_and_game(tmp_path_factory):
    from trl import GRPOConfig, GRPOTrainer

    loaded = _model()
    game = GameRollout("text:kuhn_poker", loaded.tokenizer, max_new_tokens=2)
    args = GRPOConfig(output_dir=str(tmp_path_factory.mktemp("trl")), per_device_train_batch_size=8,
                      num_generations=8, max_steps=4, use_cpu=True, report_to="none", logging_steps=1,
                      max_completion_length=2, bf16=False, scale_rewards="none", save_strategy="no", beta=0.0,
                      learning_rate=5e-2, seed=0)
    trainer = GRPOTrainer(model=loaded.model, processing_class=loaded.tokenizer, reward_funcs=game.reward,
                          train_dataset=game.dataset(16, seats=[0], turns=[0]), rollout_func=game, args=args)
    return trainer, game, loaded


def test_rows_are_the_sampled_replies_scored_by_coplays_per_turn_advantage(trainer_and_game):
    trainer, game, loaded = trainer_and_game
    prompts = ["text:kuhn_poker seed=1 seat=0 turn=0"] * 8 + ["text:kuhn_poker seed=1 seat=1 turn=0"] * 8
    out = game(prompts, trainer)
    rec, played = game.last.turns, game.last
    assert {len(out[k]) for k in ("prompt_ids", "completion_ids", "logprobs", "coplay_reward")} == {16}
    for row in range(8):                                  # seat 0's first reply of episode `row`
        i = next(j for j in range(len(rec)) if rec.episode[j] == row and rec.agent[j] == 0)
        assert out["prompt_ids"][row] == rec.prompts[i] and out["completion_ids"][row] == rec.replies[i]
        assert out["logprobs"][row] == pytest.approx(list(rec.old[i]))
    again = game._play.player.token_log_probs(out["prompt_ids"][:8], out["completion_ids"][:8])
    for a, lp in zip(again, out["logprobs"][:8]):
        np.testing.assert_allclose(a.detach().numpy(), lp, atol=1e-4)
    # both seats' rows come from the same episodes: seat 1 spoke exactly where seat 0 made a move
    spoke = [played.acted[e, :, 1].any() for e in range(8)]
    assert [r is not None for r in out["coplay_reward"][8:]] == spoke
    assert 0 < sum(spoke) < 8, "the biased model should make a move in some games and not in others"
    # turn_rloo averages to zero over a group's scored rows, so TRL's centring leaves it as it is
    seat0 = np.asarray(out["coplay_reward"][:8], float)
    assert abs(seat0.mean()) < 1e-6 and seat0.std() > 0
    assert out["coplay_reward"][:8] == game.reward(coplay_reward=out["coplay_reward"][:8])


def test_trls_trainer_takes_steps_on_the_game(trainer_and_game):
    trainer, game, loaded = trainer_and_game
    before = [p.detach().clone() for p in loaded.model.parameters()]
    trainer.train()
    logs = [h for h in trainer.state.log_history if "grad_norm" in h]
    assert len(logs) == 4 and any(h["grad_norm"] > 0 for h in logs)
    assert any((p != b).any() for p, b in zip(loaded.model.parameters(), before))


def test_bad_prompts_and_estimators_are_refused_by_name():
    loaded = tiny_model(seed=0)
    game = GameRollout("text:kuhn_poker", loaded.tokenizer, max_new_tokens=2)
    with pytest.raises(ConfigError, match="seed=<deal> seat=<player>"):
        game._parse("what is 2 + 2?")
    with pytest.raises(ConfigError, match="seats 0 to 1"):
        game.prompts(2, seats=[2])
    with pytest.raises(ConfigError, match="baseline"):
        GameRollout("text:kuhn_poker", loaded.tokenizer, estimator="rae")
    with pytest.raises(ConfigError, match="text games"):
        GameRollout("spread", loaded.tokenizer)
    assert game.prompts(1) == ["text:kuhn_poker seed=0 seat=0 turn=0", "text:kuhn_poker seed=0 seat=0 turn=1",
                               "text:kuhn_poker seed=0 seat=1 turn=0", "text:kuhn_poker seed=0 seat=1 turn=1"]
