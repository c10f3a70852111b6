"""Language models as players and learners (`coplay.lm`, `algo=lm_grpo`), on a tiny
Llama with random weights built here: sampled log-probabilities recomputed for the
PPO ratio, one LoRA step moving a move's probability the way its advantage says,
the exact exploitability of a model's strategy, bad input refused before a run
directory exists, and a run resumed exactly. SmolLM2 itself, where its GGUF file is
in the cache (`coplay lm fetch-smollm2`, which CI runs), in one slow test."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch", reason="the llm extra: pip install coplay[llm]")

import torch  # noqa: E402

import coplay  # noqa: E402
from coplay.core.errors import ConfigError  # noqa: E402
from coplay.envs.trees.values import TreeArrays, exploitability  # noqa: E402
from coplay.envs.text.scoring import score_lm_player  # noqa: E402
from coplay.experiment import checkpoint  # noqa: E402
from coplay.experiment.playback import evaluate_run  # noqa: E402
from coplay.experiment.tournament import run_tournament  # noqa: E402
from coplay.algos.lm_grpo import LMGRPO, Config  # noqa: E402
from coplay.lm.rollout import Rollout  # noqa: E402
from coplay.lm.models import LoadedModel, load_model, smollm2_path, tiny_model  # noqa: E402
from coplay.lm import policy as lm_policy  # noqa: E402
from coplay.algos import lm_grpo  # noqa: E402
from coplay.lm.policy import LMPlayer, utterance  # noqa: E402

KUHN_VIEW = "kuhn poker , you are player 0 , your card : king , actions : none , your move"
TINY = ["algo=lm_grpo", "env=text:kuhn_poker", "algo.model=tiny", "progress=false", "logger=csv"]


@pytest.fixture(scope="module")
def kuhn():
    return coplay.make("text:kuhn_poker")


@pytest.mark.parametrize("decoding", ["free", "choose_legal"])
def test_sampled_log_probabilities_are_what_training_recomputes(kuhn, decoding):
    player = LMPlayer(tiny_model(seed=3), kuhn, max_new_tokens=4, decoding=decoding)
    prompt = player.prompt(KUHN_VIEW, 0, ["pass", "bet"])
    replies = player.sample([prompt] * 24, torch.Generator().manual_seed(0), [[0, 1]] * 24)
    if decoding == "free":
        again = player.token_log_probs([prompt] * 24, [r.tokens for r in replies])
        assert {len(r.tokens) for r in replies} != {4} or any(r.tokens[-1] in player.stop for r in replies)
        for r, a in zip(replies, again):
            np.testing.assert_allclose(a.detach().numpy(), r.log_probs, atol=1e-4)
    else:
        scored = player.move_log_probs([prompt], [[0, 1]])[0]
        expected = scored - np.logaddexp(*scored)
        assert {r.move for r in replies} == {0, 1}      # the tiny model is near uniform over the moves
        for r in replies:
            np.testing.assert_allclose(r.log_probs, [expected[r.move]], atol=1e-5)


@pytest.mark.parametrize("decoding", ["free", "choose_legal"])
def test_a_batch_read_with_its_shared_prefix_once_scores_as_each_prompt_read_alone(kuhn, decoding):
    player = LMPlayer(tiny_model(seed=3), kuhn, max_new_tokens=4, decoding=decoding, batch_size=8)
    views = [KUHN_VIEW, KUHN_VIEW.replace("king", "jack"), KUHN_VIEW.replace("player 0", "player 1")]
    prompts = [player.prompt(v, a, ["pass", "bet"]) for v in views for a in (0, 1)]
    assert lm_policy._shared_prefix(prompts) >= lm_policy.MIN_SHARED     # the system prompt is shared
    replies = [[5, 6, 7][: 1 + i % 3] for i in range(len(prompts))]     # of different lengths
    if decoding == "free":
        batch = player.token_log_probs(prompts, replies)
        alone = [player.token_log_probs([p], [r])[0] for p, r in zip(prompts, replies)]
    else:
        batch = player.move_log_probs(prompts, [[0, 1]] * len(prompts))
        alone = [player.move_log_probs([p], [[0, 1]])[0] for p in prompts]
    for b, a in zip(batch, alone):
        np.testing.assert_allclose(np.asarray(b.detach() if hasattr(b, "detach") else b),
                                   np.asarray(a.detach() if hasattr(a, "detach") else a), atol=1e-5)


def test_a_step_holds_the_graphs_of_at_most_grad_batch_size_replies_and_takes_the_whole_minibatchs_gradient(
        kuhn, monkeypatch):
    def step(grad_batch_size):
        learner = LMGRPO(Config(model="tiny", decoding="choose_legal", grad_batch_size=grad_batch_size,
                                episodes=8, group_size=4), kuhn, seeds=1, seed=0, loaded=tiny_model(seed=1))
        played = learner.play(0, 0, 8, 4)
        turns = played.turns
        adv = np.linspace(-1.0, 1.0, len(turns.prompts))
        widest: list[int] = []
        real = lm_grpo._stack

        def counted(torch_, rows, width):       # the rows of one loss: those with a graph are live
            widest.append(sum(1 for row in rows if row.requires_grad))
            return real(torch_, rows, width)

        monkeypatch.setattr(lm_grpo, "_stack", counted)
        for p in learner.optimizers.values():
            p.step = lambda: None                    # keep the gradient, take no step
            p.zero_grad = lambda set_to_none=True: None
        stats = {"loss": [], "clip_frac": [], "kl": [], "grad_norm": []}
        learner._step_on(list(range(len(turns.prompts))), turns, adv, stats)
        monkeypatch.setattr(lm_grpo, "_stack", real)
        grads = [p.grad.clone() for ps in learner.params.values() for p in ps]
        return len(turns.prompts), max(widest), grads, stats["loss"][0]

    n, widest_small, small, loss_small = step(2)
    _, widest_all, whole, loss_all = step(64)
    assert n > 4 and widest_small == 2 and widest_all == n
    assert loss_small == pytest.approx(loss_all, abs=1e-6)
    for a, b in zip(small, whole):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-4)


def test_worked_examples_are_the_games_own_turns_with_legal_replies_that_differ_shown_before_the_turn(kuhn):
    player = LMPlayer(tiny_model(seed=3), kuhn, max_new_tokens=4, examples=2)
    (v0, m0, r0), (v1, m1, r1) = player.examples
    assert r0 in m0 and r1 in m1 and r0 != r1 and v0.endswith("your move") and v1.endswith("your move")
    assert player.examples == LMPlayer(tiny_model(seed=3), kuhn, examples=2).examples      # from a fixed seed
    text = player.tokenizer.decode(player.prompt(KUHN_VIEW, 0, ["pass", "bet"]))
    assert text.index(v0) < text.index(v1) < text.rindex(KUHN_VIEW)
    for r in (r0, r1):                                               # each example's reply as the model's turn
        assert f"assistant {r} <|im_end|>" in text
    assert LMPlayer(tiny_model(seed=3), kuhn).prompt(KUHN_VIEW, 0, ["pass", "bet"]) != \
        player.prompt(KUHN_VIEW, 0, ["pass", "bet"])
    with pytest.raises(ConfigError, match="algo.examples=2: worked examples come from a coplay text game"):
        LMPlayer(tiny_model(seed=3), None, examples=2)


def test_replies_become_utterances_that_the_environment_parses(kuhn):
    assert kuhn.move_of(np.asarray(utterance("Bet.", 3))) == 1
    assert kuhn.move_of(np.asarray(utterance("[pass]\nbecause", 3))) == 0
    assert kuhn.move_of(np.asarray(utterance("I bet", 3))) == -1          # the environment's parser decides
    assert kuhn.move_of(np.asarray(utterance("wager", 3))) == -1          # not a word of the vocabulary


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_one_lora_step_moves_a_moves_probability_the_way_its_advantage_says(kuhn, sign):
    learner = LMGRPO(Config(model="tiny", lr=1e-2), kuhn, seeds=1, seed=0, loaded=tiny_model(seed=1))
    player = learner.player
    prompt = player.prompt(KUHN_VIEW, 0, ["pass", "bet"])

    def p_bet():
        with learner.speaking_as(0):
            return float(np.exp(player.move_log_probs([prompt], [[1]])[0][0]))

    before = p_bet()
    old = player.token_log_probs([prompt], [player.move_ids[1]])[0].detach().numpy()
    turns = Rollout([prompt], [player.move_ids[1]], [old], None, [[0, 1]], [1], agent=[0], episode=[0], step=[0],
                    texts=["bet"])
    stats: dict = {"loss": [], "clip_frac": [], "kl": [], "grad_norm": []}
    learner._step_on([0], turns, np.asarray([sign]), stats)
    after = p_bet()
    assert np.log(after / before) * sign > 0.1, (before, after)
    assert stats["grad_norm"][0] > 0


def test_a_uniform_model_is_scored_exactly_as_uniform_play_of_kuhn_and_leduc(kuhn):
    loaded = tiny_model(seed=0)
    with torch.no_grad():                # zero embeddings (tied to the output): every token equally likely
        loaded.model.get_input_embeddings().weight.zero_()
    score = score_lm_player(kuhn, LMPlayer(loaded, kuhn, decoding="choose_legal"))
    np.testing.assert_allclose(np.asarray(score.strategy), 0.5, atol=1e-6)
    np.testing.assert_allclose(float(score.exploitability), 0.458333, atol=1e-4)   # uniform Kuhn play
    leduc = coplay.make("text:leduc_holdem")         # 288 information sets, two or three legal moves each
    score = score_lm_player(leduc, LMPlayer(loaded, leduc, decoding="choose_legal"))
    legal = np.asarray(leduc.game.tree.legal)
    uniform = legal / legal.sum(-1, keepdims=True)
    np.testing.assert_allclose(np.asarray(score.strategy), uniform, atol=1e-6)
    np.testing.assert_allclose(float(score.exploitability),
                               float(exploitability(TreeArrays.from_tree(leduc.game.tree), uniform)), rtol=1e-5)


def test_bad_input_is_refused_before_a_run_directory_exists(tmp_path, kuhn):
    out = tmp_path / "runs"
    cases = [
        (["algo.model=" + str(tmp_path / "missing")], "no such file or directory"),
        (["algo.episodes=10", "algo.group_size=4"], "algo.group_size=4 must divide algo.episodes=10"),
        (["env=text:nim", "algo.max_new_tokens=2"], "algo.max_new_tokens=2 is too short"),
        (["env=spread"], "algorithm 'lm_grpo' cannot train on environment 'spread'"),
        (["algo.adapters=per_role", "env=text:gridworld"], "algo.adapters=per_role gives each role an adapter"),
    ]
    for extra, words in cases:
        with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)")):
            coplay.train(TINY + extra + [f"out_dir={out}"])
    assert not out.exists()
    # a model without a chat template, saved where a user would keep one
    loaded = tiny_model()
    loaded.model.save_pretrained(tmp_path / "plain")
    loaded.tokenizer.chat_template = None
    loaded.tokenizer.save_pretrained(tmp_path / "plain")
    with pytest.raises(ConfigError, match="has no chat template"):
        load_model(str(tmp_path / "plain"))
    # a tokenizer that cannot write the game's words back
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    narrow = Tokenizer(models.WordLevel(vocab={"<unk>": 0, "<pad>": 1, "<|im_end|>": 2, "pass": 3},
                                        unk_token="<unk>"))
    narrow.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=narrow, unk_token="<unk>", pad_token="<pad>",
                                  eos_token="<|im_end|>")
    with pytest.raises(ConfigError, match="cannot represent words of 'text:kuhn_poker'"):
        LMPlayer(LoadedModel(loaded.model, tok, (2,), "narrow"), kuhn)


@pytest.mark.slow
def test_an_lm_grpo_run_resumes_exactly_scores_its_exploitability_and_plays_a_tournament(tmp_path):
    args = TINY + ["algo.decoding=choose_legal", "algo.adapters=per_role", "algo.estimator=rae", "algo.kl_coef=0.1",
                   "algo.episodes=8", "algo.group_size=4", "seeds=2", "total_steps=48", "chunk_steps=24",
                   "eval_episodes=4", f"out_dir={tmp_path}"]
    whole = coplay.train(args + ["name=whole"])
    part = coplay.train(args + ["name=part"], stop_after_chunks=1)
    assert part.interrupted
    resumed = coplay.train(args + ["name=part", f"resume={part.run_dir}"])
    a = checkpoint.arrays(checkpoint.list_checkpoints(whole.run_dir / "checkpoints")[-1])
    b = checkpoint.arrays(checkpoint.list_checkpoints(resumed.run_dir / "checkpoints")[-1])
    assert a.keys() == b.keys() and any("seed1_role1" in k for k in a)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    assert whole.summary["final"] == resumed.summary["final"]
    assert resumed.summary["curve"] == whole.summary["curve"]   # the first part's evaluation, from the checkpoint
    curve = whole.summary["curve"]
    assert len(curve) == 2 and all(0 <= c["exploitability"] < 1.5 for c in curve)
    assert (whole.run_dir / "curve.png").exists() and (whole.run_dir / "samples.txt").exists()
    evaluated = evaluate_run(whole.run_dir, episodes=2)        # `coplay eval` of the run
    assert len(evaluated["per_seed"]) == 2 and 0 <= evaluated["measures"]["exploitability"] < 1.5
    # both seeds' models play the game under the words, against a bot, through the host callback
    table = run_tournament([str(whole.run_dir), "random"], games=4, out_dir=tmp_path / "tournament")
    assert list(table["results"].players) == ["whole@0", "whole@1", "random"]
    assert np.asarray(table["results"].counts).sum() > 0
    # the adapters moved: trained LoRA weights differ from where the run started
    fresh = LMGRPO(Config(model="tiny", adapters="per_role"), coplay.make("text:kuhn_poker"), seeds=2, seed=0,
                   loaded=tiny_model()).state()
    weights = [k for k in fresh if k.count("/") == 1 and "/param" in k]     # the adapters, not Adam's moments
    assert any(not np.array_equal(fresh[k], a[f"['{k}']"]) for k in weights)


@pytest.mark.slow
@pytest.mark.skipif(not smollm2_path().exists(), reason="SmolLM2 is not in the cache: coplay lm fetch-smollm2")
def test_smollm2_samples_what_it_scores_and_finishes_a_short_self_play_run_with_its_exploitability(kuhn, tmp_path):
    loaded = load_model("smollm2")
    player = LMPlayer(loaded, kuhn, max_new_tokens=4)
    prompt = player.prompt(KUHN_VIEW, 0, ["pass", "bet"])
    replies = player.sample([prompt] * 4, torch.Generator().manual_seed(0))
    again = player.token_log_probs([prompt] * 4, [r.tokens for r in replies])
    for r, a in zip(replies, again):
        np.testing.assert_allclose(a.detach().numpy(), r.log_probs, atol=1e-3)
    # a short self-play run through `coplay train`: one update of two episodes from one deal, the model
    # in both seats, then its evaluation (two episodes and the exact exploitability)
    run = coplay.train(["algo=lm_grpo", "env=text:kuhn_poker", "algo.model=smollm2", "algo.decoding=choose_legal",
                        "algo.episodes=2", "algo.group_size=2", "seeds=1", "total_steps=6", "chunk_steps=6",
                        "eval_episodes=2", "progress=false", "logger=csv", f"out_dir={tmp_path}"])
    assert run.summary["updates_per_seed"] == 1 and run.summary["final"]["invalid"]["iqm"] == 0.0
    assert 0.0 < run.summary["final"]["exploitability"]["iqm"] <= 2.0


def test_a_run_written_with_the_old_decoding_and_episode_names_loads_and_the_command_line_takes_only_the_new(tmp_path):
    from coplay.experiment.config import Experiment, parse_overrides

    exp = parse_overrides(TINY + ["algo.decoding=choose_legal", "algo.episodes=12"])
    older = exp.to_yaml().replace("choose_legal", "legal").replace("episodes: 12", "num_envs: 12")
    (tmp_path / "config.yaml").write_text(older)   # as older coplay wrote it
    assert "decoding: legal" in older and "num_envs: 12" in older
    loaded = Experiment.load(tmp_path / "config.yaml").algo_config
    assert loaded.decoding == "choose_legal" and loaded.episodes == 12
    with pytest.raises(ConfigError, match="free, choose_legal"):
        parse_overrides(TINY + ["algo.decoding=legal"])   # grpo's legal writes legal moves token by token
