"""Group-relative policy optimisation of a pretrained language model with LoRA (`algo=lm_grpo`).

A `HostTrainer`: the host-side counterpart of `coplay.algos.grpo`: the environment is the same
compiled text environment (reset and step jitted and vmapped over the update's
episodes), the advantages are the same estimators
(`coplay.algos.common.group_advantages`, `algo.estimator`), and the model is a
`transformers` causal LM (`coplay.lm.models`) playing through its chat template
(`coplay.lm.policy.LMPlayer`), trained with `peft`'s LoRA adapters in PyTorch.

One update, for each seed: `episodes` episodes in groups of `group_size` that
start from the same state (one reset key per group) and differ in their
sampling; every seat is played by the model (self-play: one model, every role).
Each reply is scored by the estimator from the episode's rewards, and the
adapters take `epochs` x `minibatches` PPO-clipped steps on the generated tokens
only (the prompt's tokens carry no loss; `coplay.lm.token_loss`, the PyTorch twin
of `coplay.algos.common.token_loss`):

    l_t = -min(r_t A, clip(r_t, 1 - eps, 1 + eps) A) + kl_coef (exp(q_t) - q_t - 1),
    r_t = pi(y_t | prompt, y_<t) / pi_old(y_t | prompt, y_<t),   q_t = log pi_base(y_t) - log pi(y_t)

averaged as `token_norm` says (as in `algo=grpo`). The reference of the KL is
the base model, the adapters switched off (no second copy of the model is held),
or with `reference_every=K` the adapters as they were at the last multiple of K
updates (a copy of the adapters alone): the regularised Nash dynamics of
`algo=grpo`. With
`decoding=choose_legal` a reply is one draw among the legal moves, and its
log-probability (renormalised over them) is the one "token" of the ratio.

Free-text games (`env=textarena:<id>`, `coplay.envs.text.host_game`) are played on the
host: a copy per episode, the copies of a group reset with one seed, the model's reply
in free text (decoding=free) parsed by the game, the game's rewards at its end. An
episode that did not end by the game's rules (cut by the horizon, or a game that raised)
has no result: it enters the estimators as unscorable and its replies are not trained
on. Every update's replies are a `coplay.lm.rollout.Rollout`, the token-faithful record
(with each reply's role, group, model version and status) that exports to TRL and verl.

Adapters (`adapters`): `shared`, one adapter per seed that speaks in every
role; `per_role`, one adapter per role and seed on the one frozen base model
(a proposer and a solver that differ at the cost of a small adapter each).
Seeds are adapters on the same base model, trained one after another.

Everything random is drawn from the run's seed, the seed's index and the update's
number (JAX keys for the environment, a torch.Generator for sampling), so the
state that a checkpoint holds (adapters, Adam's moments, RAE's baselines) is the
whole truth and a resumed run repeats an uninterrupted one exactly.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

import jax
import jax.numpy as jnp
import numpy as np

from coplay.algos.base import Capabilities, HostTrainer
from coplay.algos.common.group_advantages import Episodes, estimator
from coplay.algos.common.group_rl import GroupRLConfig, check_group_rl
from coplay.core.config import param, param_default
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.policy import Policy
from coplay.envs.text.base import TextEnv
from coplay.envs.text.host_game import HostTextEnv
from coplay.envs.text.scoring import score_lm_player
from coplay.envs.text.tree_games import TextTreeGame
from coplay.lm.acting import lm_policy
from coplay.lm.models import LoadedModel, load_model, require_llm
from coplay.lm.policy import DECODINGS, Decoding, LMPlayer
from coplay.lm.rollout import FreeTextPlay, Played, Rollout, TextPlay
from coplay.lm.token_loss import clipped_token_loss, token_mean

Adapters = Literal["shared", "per_role"]
ADAPTERS: tuple[str, ...] = get_args(Adapters)
CAPABILITIES = Capabilities(discrete_actions=False, utterances=True, turn_based=True, free_text=True,
                            image_obs=False)   # a language model: its observations are token ids or text


@dataclass(frozen=True)
class Config(GroupRLConfig):
    episodes: int = param_default(GroupRLConfig, "episodes", 16)
    group_size: int = param_default(GroupRLConfig, "group_size", 4)
    lr: float = param_default(GroupRLConfig, "lr", 1e-4)
    epochs: int = param_default(GroupRLConfig, "epochs", 1)
    model: str = param("smollm2", "the language model: smollm2 (SmolLM2-135M-Instruct, after `coplay lm "
                                  "fetch-smollm2`), tiny (a 2-layer Llama with random weights), a directory saved "
                                  "by transformers, a .gguf file, or a model id of a hub you can reach")
    model_seed: int = param(0, "algo.model=tiny: the seed of its random weights", min=0)
    adapters: Adapters = param("shared", "shared: one LoRA adapter plays every role; per_role: one adapter per role on "
                                    "the one frozen base model", choices=ADAPTERS)
    lora_rank: int = param(8, "LoRA rank", min=1)
    lora_alpha: int = param(16, "LoRA scale numerator (the update is scaled by alpha / rank)", min=1)
    max_new_tokens: int = param(8, "the most tokens of one reply", min=1)
    decoding: Decoding = param("free", "free: any reply, parsed by the environment (the format is learned); "
                                  "choose_legal: one of the legal moves, chosen by the model's probability of each "
                                  "move's whole reply (algo=grpo's legal writes legal moves token by token)",
                          choices=DECODINGS)
    examples: int = param(0, "worked examples of the reply format before every prompt: this many turns of a random "
                             "game of the environment (its view, its legal moves, a reply) shown as earlier exchanges "
                             "of the chat (coplay.lm.prompts.worked_examples); 0: none. Coplay text games only",
                          min=0)
    batch_size: int = param(32, "sequences per forward pass without gradients (playing, scoring)", min=1,
                            affects_results=False)
    grad_batch_size: int = param(4, "sequences per forward and backward pass of the loss: what bounds a step's "
                                    "memory (a minibatch's gradient is summed over passes of this many)", min=1,
                                 affects_results=False)


def check(config: Config, env: Any) -> None:
    """Refuse what cannot train, before any model is loaded (the capabilities are
    checked by `HostTrainer`)."""
    spec = env.spec
    check_group_rl(config, env, "lm_grpo")
    if isinstance(env, HostTextEnv) and config.decoding != "free":
        raise ConfigError(f"algo.decoding={config.decoding} chooses among a coplay text game's moves; {spec.name!r} "
                          "is a free-text game, whose replies the game parses: use algo.decoding=free")
    if isinstance(env, HostTextEnv) and config.examples:
        raise ConfigError(f"algo.examples={config.examples} shows turns of a coplay text game; {spec.name!r} is a "
                          "free-text game, which explains its own format: use algo.examples=0")
    if config.adapters == "per_role" and spec.num_agents < 2:
        raise ConfigError(f"algo.adapters=per_role gives each role an adapter, and {spec.name!r} has one role; "
                          f"use algo.adapters=shared")


def release_memory() -> None:
    """Hand the memory freed since to the operating system, where the C library can (glibc's
    `malloc_trim`): a backward pass frees its graph in pieces of every size, which the heap
    would otherwise keep, and the next pass would add to."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _glibc() -> Any:
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


_LIBC = _glibc()


def _stack(torch: Any, rows: Sequence[Any], width: int) -> Any:
    """`[B, width]`: each reply's per-token values, padded with zeros (gradients kept)."""
    return torch.stack([torch.nn.functional.pad(x, (0, width - len(x))) for x in rows])


class LMGRPO(HostTrainer[Config]):
    """The learner (see the module's doc). `update(seed, number)` trains one seed once.
    `loaded`: the model to train (by default `algo.model`, loaded here)."""

    name = "lm_grpo"
    config_class = Config
    capabilities = CAPABILITIES
    return_convention = ("episode return averaged over agents, the model in every seat (0 by construction in a "
                         "zero-sum game against itself; on kuhn_poker and leduc_holdem see eval/exploitability)")

    def __init__(self, config: Config, env: Env, num_updates: int = 0, *, seeds: int, seed: int,
                 loaded: LoadedModel | None = None):
        super().__init__(config, env, num_updates, seeds=seeds, seed=seed)
        check(config, env)
        require_llm()
        import torch
        from peft import LoraConfig, get_peft_model

        if loaded is None:
            loaded = load_model(config.model, seed=config.model_seed)
        run_seed = seed
        assert isinstance(env, (TextEnv, HostTextEnv))
        self.free_text = isinstance(env, HostTextEnv)
        if config.anneal_lr and num_updates < 1:
            raise ConfigError("algo.anneal_lr=true needs the run's number of updates")
        self.torch, self.env = torch, env
        spec = env.spec
        self.num_agents, self.horizon = spec.num_agents, spec.max_steps
        roles = range(spec.num_agents) if config.adapters == "per_role" else [None]
        self.adapter_names = [[f"seed{s}" if r is None else f"seed{s}_role{r}" for r in roles] for s in range(seeds)]
        lora = LoraConfig(r=config.lora_rank, lora_alpha=config.lora_alpha, lora_dropout=0.0,
                          target_modules="all-linear", task_type="CAUSAL_LM")
        names = [n for row in self.adapter_names for n in row]
        model: Any = None
        for i, name in enumerate(names):   # each adapter's random start from the run's seed and its place
            with torch.random.fork_rng(), warnings.catch_warnings():
                # peft reads the model's `is_gradient_checkpointing`, which transformers deprecates with a
                # FutureWarning on every read; nothing here can read the new name instead
                warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated",
                                        category=FutureWarning)
                torch.manual_seed(run_seed * 100_003 + i)
                if model is None:
                    model = get_peft_model(loaded.model, lora, adapter_name=name)
                else:
                    model.add_adapter(name, lora)
        self.model = model
        self.player = LMPlayer(LoadedModel(model, loaded.tokenizer, loaded.stop_ids, loaded.name),
                               None if isinstance(env, HostTextEnv) else env,
                               max_new_tokens=config.max_new_tokens, temperature=config.temperature,
                               decoding=config.decoding, batch_size=config.batch_size, examples=config.examples)
        self.player.speaking_as = self.speaking_as   # type: ignore[method-assign]
        self.params = {n: [p for k, p in model.named_parameters() if f".{n}." in k] for n in names}
        self.optimizers = {n: torch.optim.Adam(self.params[n], lr=config.lr) for n in names}
        # reference_every: each adapter's weights as they were at the last refresh
        self.reference = {n: [p.detach().clone() for p in self.params[n]] for n in names} \
            if config.reference_every else {}
        self.baselines = np.zeros((seeds, 1, spec.num_agents), np.float32)   # rae: per seed, [games, roles]
        self.estimate = estimator(config.estimator)
        self.estimator_options = config.estimator_options()
        self.text_play: TextPlay | FreeTextPlay = (FreeTextPlay(self.player, env) if isinstance(env, HostTextEnv)
                                                   else TextPlay(self.player, env))
        self.seed = 0
        self._samples: list[list[str]] = []

    # ----- adapters ---------------------------------------------------------------------------
    def use_seed(self, seed: int) -> None:
        """Speak with seed `seed`'s adapters from now on."""
        self.seed = seed

    def adapter(self, seed: int, agent: int) -> str:
        row = self.adapter_names[seed]
        return row[agent] if len(row) > 1 else row[0]

    def version(self, agent: int) -> int:
        """The optimiser steps that `agent`'s adapter (of the current seed) has taken: the model
        version of what it samples now."""
        first = self.params[self.adapter(self.seed, agent)][0]
        step = self.optimizers[self.adapter(self.seed, agent)].state.get(first, {}).get("step")
        return 0 if step is None else int(step)

    @contextlib.contextmanager
    def speaking_as(self, agent: int) -> Iterator[None]:
        """The current seed's adapter for `agent` is active inside."""
        self.model.set_adapter(self.adapter(self.seed, agent))
        yield

    def _by_adapter(self, agents: Sequence[int]) -> list[tuple[int, list[int]]]:
        """Turn indices grouped by the adapter that speaks them: [(an agent of it, indices)]."""
        if len(self.adapter_names[self.seed]) == 1:
            return [(agents[0], list(range(len(agents))))] if len(agents) else []
        return [(a, [i for i, x in enumerate(agents) if x == a]) for a in sorted(set(agents))]

    # ----- random streams ---------------------------------------------------------------------
    def _keys(self, seed: int, number: int, purpose: int) -> tuple[jax.Array, Any]:
        key = jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(
            jax.random.PRNGKey(self.run_seed), seed), number), purpose)
        torch_seed = int(jax.random.randint(jax.random.fold_in(key, 7), (), 0, 2**31 - 1))
        return key, self.torch.Generator().manual_seed(torch_seed)

    # ----- playing ----------------------------------------------------------------------------
    def _log_probs(self, turns: Rollout, idx: Sequence[int], grad: bool) -> list[Any]:
        """Log-probabilities of the replies `idx` under the active adapter (per token; with
        decoding=choose_legal, [1]: the move's, renormalised over the legal moves)."""
        torch = self.torch
        prompts = [turns.prompts[i] for i in idx]
        with torch.set_grad_enabled(grad):
            if self.config.decoding == "choose_legal":
                scored = self.player.move_log_probs(prompts, [turns.legal[i] for i in idx], grad=True)
                return [torch.log_softmax(row, 0)[turns.legal[i].index(turns.moves[i])][None]
                        for i, row in zip(idx, scored)]
            return self.player.token_log_probs(prompts, [turns.replies[i] for i in idx])

    def play(self, seed: int, number: int, episodes: int, group_size: int, purpose: int = 0) -> Played:
        """`episodes` episodes of self-play by seed `seed`'s adapters, groups of `group_size`
        from one reset key each; `(number, purpose)` picks the random streams."""
        self.seed = seed
        key, generator = self._keys(seed, number, purpose)
        return self.text_play.play(key, generator, episodes, group_size, groups=self._by_adapter,
                                   speaking_as=self.speaking_as, version=self.version,
                                   reference=self._reference_log_probs if self.config.kl_coef > 0 else None,
                                   horizon=self.horizon)

    def _reference_log_probs(self, turns: Rollout, start: int) -> list[np.ndarray]:
        """The KL reference's log-probabilities of the replies from `start` on: the base
        model (adapters off), or the adapters' weights at the last refresh, swapped in."""
        torch = self.torch
        idx = range(start, len(turns.prompts))
        if not self.reference:
            with self.model.disable_adapter():
                ref = self._log_probs(turns, idx, grad=False)
            return [np.asarray(x.detach().numpy(), np.float64) for x in ref]
        out: list[Any] = [None] * len(idx)
        for agent, part in self._by_adapter([turns.agent[i] for i in idx]):
            name = self.adapter(self.seed, agent)
            now = [p.detach().clone() for p in self.params[name]]
            with torch.no_grad():
                for p, r in zip(self.params[name], self.reference[name]):
                    p.copy_(r)
                with self.speaking_as(agent):
                    ref = self._log_probs(turns, [start + i for i in part], grad=False)
                for p, r in zip(self.params[name], now):
                    p.copy_(r)
            for i, x in zip(part, ref):
                out[i] = np.asarray(x.detach().numpy(), np.float64)
        return out

    # ----- learning ---------------------------------------------------------------------------
    def advantages(self, seed: int, played: Played) -> np.ndarray:
        """`[E, T, N]` from the estimator (RAE's baseline carried per seed). An episode that
        did not end within the horizon has no result: its rewards enter as NaN, the
        estimators' mark of an unscorable episode (no statistic, no advantage)."""
        reward = np.where(played.complete[:, None, None], played.reward, np.nan).astype(np.float32)
        ep = Episodes(jnp.asarray(reward), jnp.asarray(played.acted), jnp.asarray(played.group),
                      state=jnp.asarray(played.state) if self.estimate.needs_state else None)
        if self.estimate.stateful:
            adv, baseline = self.estimate.fn(ep, jnp.asarray(self.baselines[seed]), **self.estimator_options)
            self.baselines[seed] = np.asarray(baseline)
        else:
            adv = self.estimate.fn(ep, **self.estimator_options)
        return np.asarray(adv, np.float64)

    def update(self, seed: int, number: int) -> dict[str, float]:
        """Play one update's episodes for `seed` and train its adapters on them."""
        torch, c = self.torch, self.config
        if self.reference and number % c.reference_every == 0:   # refresh before the update's episodes
            for name in self.adapter_names[seed]:
                for p, r in zip(self.params[name], self.reference[name]):
                    r.copy_(p.detach())
        lr = c.lr * (1.0 - number / self.num_updates) if c.anneal_lr else c.lr
        for name in self.adapter_names[seed]:
            for group in self.optimizers[name].param_groups:
                group["lr"] = lr
        played = self.play(seed, number, c.episodes, c.group_size)
        turns = played.turns
        adv_all = self.advantages(seed, played)
        adv = np.asarray([adv_all[e, t, a] for e, t, a in zip(turns.episode, turns.step, turns.agent)])
        _, generator = self._keys(seed, number, 1)
        m = len(turns.prompts)
        scored = turns.scored()   # the replies of truncated episodes are dropped, not trained on as a 0
        keep = set(np.flatnonzero(scored).tolist())
        stats: dict[str, list[float]] = {"loss": [], "clip_frac": [], "kl": [], "grad_norm": []}
        for _ in range(c.epochs):
            order = [i for i in torch.randperm(m, generator=generator).tolist() if i in keep]
            for part in np.array_split(np.asarray(order, np.int64), c.minibatches):
                if len(part):
                    self._step_on([int(i) for i in part], turns, adv, stats)
        complete = played.complete
        returns = played.reward.sum(1)[complete]   # [E', N]
        spoke = np.asarray(np.any(played.acted, axis=1))[complete]
        return {"return": (float(np.where(spoke, returns, 0.0).sum(1).mean() / max(1, self.num_agents))
                           if complete.any() else float("nan")),
                "invalid": float(played.invalid.sum() / max(1, m)),
                "truncated": float(1.0 - complete.mean()),
                "reply_tokens": float(np.mean([len(r) for r in turns.replies])) if m else 0.0,
                "advantage_abs": float(np.abs(adv[scored]).mean()) if scored.any() else 0.0,
                **{k: float(np.mean(v)) if v else 0.0 for k, v in stats.items()}}

    def _step_on(self, idx: list[int], turns: Rollout, adv: np.ndarray, stats: dict[str, list[float]]) -> None:
        """One step of every adapter on the replies `idx`: the clipped token loss of the
        minibatch (`coplay.lm.token_loss`, the PyTorch twin of the compiled GRPO's).

        The loss is a sum over replies divided by what the minibatch's spoken tokens
        and weights fix in advance, so its gradient is the sum of the gradients of the
        replies' parts: the replies are scored `grad_batch_size` at a time (alike
        prompts together), each part's gradient taken (while its adapter is active)
        and its graph freed before the next is scored, the other replies held at their
        sampling-time values. Memory is that of one forward and backward pass of
        `grad_batch_size` replies, whatever the minibatch's size."""
        torch, c = self.torch, self.config
        if not idx:
            return
        old = [torch.as_tensor(turns.old[i], dtype=torch.float32) for i in idx]
        width = max(len(x) for x in old)

        def padded(rows: Sequence[Any]) -> Any:
            return torch.stack([torch.nn.functional.pad(torch.as_tensor(r, dtype=torch.float32), (0, width - len(r)))
                                for r in rows])

        tokens = padded([np.ones(len(x)) for x in old]) > 0
        fixed = {"old_logp": padded(old), "adv": torch.as_tensor(adv[idx], dtype=torch.float32),
                 "tokens": tokens, "weight": torch.ones(len(idx), dtype=torch.float32),
                 "ref_logp": None if turns.ref is None else padded([turns.ref[i] for i in idx])}
        options: dict[str, Any] = {"clip_eps": c.clip_eps, "norm": c.token_norm, "max_tokens": c.max_new_tokens,
                   "kl_coef": c.kl_coef}
        scored: list[Any] = list(old)          # each reply's log-probabilities now, detached, once scored
        for agent, part in self._by_adapter([turns.agent[i] for i in idx]):
            prompts = [turns.prompts[idx[j]] for j in part]
            with self.speaking_as(agent), self.player.reading_after(prompts):
                for batch in self.player.batches(prompts, c.grad_batch_size):
                    rows = [part[k] for k in batch]
                    live = self._log_probs(turns, [idx[j] for j in rows], grad=True)
                    logp = list(old)
                    for j, x in zip(rows, live):
                        logp[j] = x
                        scored[j] = x.detach()
                    loss, _ = clipped_token_loss(_stack(torch, logp, width), **fixed, **options)
                    loss.backward()
                    del live, logp, loss
                    release_memory()
        loss, parts = clipped_token_loss(_stack(torch, scored, width), **fixed, **options)
        stats["loss"].append(float(loss))
        stats["clip_frac"].append(float(token_mean(((parts["ratio"] - 1).abs() > c.clip_eps).float(), tokens)))
        if parts["kl"] is not None:
            stats["kl"].append(float(token_mean(parts["kl"], tokens)))
        for name in {self.adapter(self.seed, turns.agent[i]) for i in idx}:
            norm = torch.nn.utils.clip_grad_norm_(self.params[name], c.max_grad_norm)
            stats["grad_norm"].append(float(norm))
            self.optimizers[name].step()
            self.optimizers[name].zero_grad(set_to_none=True)

    # ----- evaluation ---------------------------------------------------------------------------
    def evaluate(self, seed: int, number: int, episodes: int) -> dict[str, np.ndarray]:
        """Per-episode `return` and `invalid` (replies per turn that named no legal move)
        over `episodes` self-play episodes (groups of one), and on a game with an exact
        tree `exploitability`, `nash_conv` and `invalid_mass` (the strategy's, repeated
        per episode). Seed 0's first dialogues are kept for `samples()`."""
        env = self.env
        played = self.play(seed, number, episodes, 1, purpose=2)
        spoke = played.acted.any(1)
        turns = np.maximum(played.acted.sum((1, 2)), 1)
        returns = np.where(spoke, played.reward.sum(1), 0.0).sum(1) / env.spec.num_agents
        out = {"return": np.where(played.complete, returns, np.nan),   # an unscored game has no return
               "invalid": played.invalid / turns}
        if self.free_text:
            out["complete"] = played.complete.astype(np.float64)
        if isinstance(env, TextTreeGame):   # play() left seed `seed`'s adapters speaking
            out.update({k: np.asarray(v) for k, v in score_lm_player(env, self.player).measures(episodes).items()})
        if seed == 0:
            roles = env.spec.roles
            self._samples = [
                [f"{roles[a] if roles else a}: {t!r}"
                 for a, t, ep in zip(played.turns.agent, played.turns.texts, played.turns.episode) if ep == e]
                + [f"returns: {played.reward[e].sum(0).tolist()}"] for e in range(min(3, episodes))]
        return out

    def samples(self) -> list[list[str]]:
        return self._samples

    def policy(self) -> Policy:
        """The model as a Policy of its text environment; params: a seed's index."""
        if self.free_text:
            raise ConfigError(f"{self.env.spec.name!r} is a free-text game, played on the host: a model trained on it "
                              "plays in text matches (coplay.eval.text_match, with coplay.lm.text_agent.LMTextAgent), "
                              "not as a compiled Policy")
        return lm_policy(self.player, self.use_seed)

    # ----- the state a checkpoint holds -------------------------------------------------------
    def state(self) -> dict[str, np.ndarray]:
        """Every adapter's weights, Adam's moments and step counts, and RAE's baselines,
        as named arrays (written by `coplay.experiment.checkpoint`)."""
        out: dict[str, np.ndarray] = {"baselines": self.baselines.copy()}
        for name, weights in self.reference.items():
            for i, r in enumerate(weights):
                out[f"{name}/reference{i}"] = r.numpy().copy()
        for name, params in self.params.items():
            opt = self.optimizers[name].state
            for i, p in enumerate(params):
                out[f"{name}/param{i}"] = p.detach().numpy().copy()
                s = opt.get(p, {})
                for k in ("exp_avg", "exp_avg_sq", "step"):
                    v = s.get(k)
                    shape = () if k == "step" else tuple(p.shape)
                    out[f"{name}/param{i}/{k}"] = (np.zeros(shape, np.float32) if v is None
                                                   else v.detach().numpy().astype(np.float32).copy())
        return out

    def load_state(self, state: Mapping[str, np.ndarray]) -> None:
        torch = self.torch
        self.baselines = np.asarray(state["baselines"], np.float32).copy()
        for name, weights in self.reference.items():
            for i, r in enumerate(weights):
                r.copy_(torch.as_tensor(np.array(state[f"{name}/reference{i}"])))
        for name, params in self.params.items():
            opt = self.optimizers[name]
            with torch.no_grad():
                for i, p in enumerate(params):
                    p.copy_(torch.as_tensor(np.array(state[f"{name}/param{i}"])))
                    step = float(np.asarray(state[f"{name}/param{i}/step"]))
                    if step > 0:
                        opt.state[p] = {"step": torch.tensor(step),
                                        "exp_avg": torch.as_tensor(np.array(state[f"{name}/param{i}/exp_avg"])),
                                        "exp_avg_sq": torch.as_tensor(
                                            np.array(state[f"{name}/param{i}/exp_avg_sq"]))}
                    else:
                        opt.state.pop(p, None)
