"""A language model as a player of coplay's text environments (on the host, in PyTorch).

`LMPlayer` reads an agent's view of a text environment, writes a reply through the
model's chat template (`coplay.lm.prompts`), and turns the reply into an utterance
of coplay's vocabulary for the environment to parse: the reply's first line,
lower-cased, without surrounding quotes, brackets or a final full stop, split into
words. The environment's own parser decides whether it names a legal move, and the
environment's rule for an invalid utterance applies (a forfeit by default): the LM
is judged exactly like every other text policy.

Decoding (`decoding`):

    free    sampling token by token at `temperature` from the whole vocabulary, up to
            `max_new_tokens` tokens or an end-of-turn token: the format is the model's to
            get right
    choose_legal  one of the moves legal now, drawn with probability proportional to the
            model's probability of that move's canonical reply (the move's text and the
            end-of-turn token): a restriction of the model to legal replies

The probability of a move is the probability of its canonical reply, `move_log_probs`;
on Kuhn poker and Leduc hold'em these, renormalised over the legal moves at every
information set, are the strategy that the game's tree scores exactly. Sampling
keeps each reply's per-token log-probabilities (`Reply.log_probs`), which
`reply_log_probs` recomputes with gradients for the PPO ratio.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np

from coplay.core.errors import ConfigError
from coplay.envs.text.base import TextEnv
from coplay.envs.text.vocab import END, VOCAB, reply_words, utterance
from coplay.lm import prompts
from coplay.lm.models import LoadedModel

Decoding = Literal["free", "choose_legal"]     # any reply, or a choice among the legal moves
DECODINGS: tuple[str, ...] = get_args(Decoding)


@dataclass
class Reply:
    tokens: list[int]        # the reply's token ids, its end-of-turn token included where it wrote one
    text: str                # decoded, special tokens dropped
    log_probs: np.ndarray    # [len(tokens)] at sampling time; decoding=choose_legal: [1], the move's renormalised one
    move: int = -1           # decoding=choose_legal: the index (in the environment's moves) of the move drawn


# A prefix shared by a batch's prompts (the system prompt and the rules, in every text
# environment) is read once when it is at least this long.
MIN_SHARED = 8


def _shared_prefix(sequences: Sequence[Sequence[int]]) -> int:
    """The length of the longest prefix every sequence starts with."""
    first, n = sequences[0], min(len(s) for s in sequences)
    for i in range(n):
        token = first[i]
        if any(s[i] != token for s in sequences):
            return i
    return n


def _cache_of(out: Any) -> Any:
    return out.cache if getattr(out, "cache", None) is not None else out.past_key_values


class LMPlayer:
    """A causal language model playing `env` (see the module's doc)."""

    def __init__(self, loaded: LoadedModel, env: TextEnv | None, *, max_new_tokens: int = 8,
                 temperature: float = 1.0, decoding: str = "free", batch_size: int = 32, examples: int = 0):
        """`env` None: a model that writes free text for prompts it is given (`sample` with
        decoding=free; `coplay.lm.text_agent` plays free-text games so), with no moves of
        coplay's vocabulary to check or score. `examples`: worked examples of the reply format
        shown before every prompt (`prompts.worked_examples`; 0: none)."""
        import torch

        if decoding not in DECODINGS:
            raise ConfigError(f"algo.decoding={decoding!r} is not one of {', '.join(DECODINGS)}")
        if temperature <= 0:
            raise ConfigError(f"algo.temperature={temperature} must be above 0")
        self.torch = torch
        self.loaded, self.env = loaded, env
        self.model, self.tokenizer = loaded.model, loaded.tokenizer
        self.stop = set(loaded.stop_ids)
        self.end_id = int(loaded.tokenizer.eos_token_id)
        self.pad_id = int(loaded.tokenizer.pad_token_id)
        self.max_new_tokens, self.temperature, self.decoding = max_new_tokens, temperature, decoding
        self.batch_size = batch_size
        self._start: tuple[int, Any] | None = None      # a prefix read once, see `reading_after`
        if examples < 0 or (examples and env is None):
            raise ConfigError(f"algo.examples={examples}: worked examples come from a coplay text game's own turns"
                              + (" (a free-text game explains its format itself): use 0" if examples > 0
                                 else "; give 0 or more"))
        if env is None and decoding != "free":
            raise ConfigError(f"decoding={decoding!r} chooses among a coplay text environment's moves; a model "
                              "without one writes free text (decoding=free)")
        self.moves = tuple(env.move_texts) if env is not None else ()
        self.examples = prompts.worked_examples(env, examples) if env is not None and examples else []
        self.max_tokens = int(env.spec.action_space.shape[-1]) if env is not None else 0
        self.roles = (tuple(env.spec.roles or [f"player_{i}" for i in range(env.spec.num_agents)])
                      if env is not None else ())
        if env is not None:
            self._check_tokenizer()
        # transformers 5.24 renamed the key-value cache argument `past_key_values` to `cache`
        base = self.model.get_base_model() if hasattr(self.model, "get_base_model") else self.model
        forward = inspect.signature(base.forward).parameters
        self._cache_arg = "cache" if "cache" in forward else "past_key_values"
        self.move_ids = [self.tokenizer.encode(m, add_special_tokens=False) + [self.end_id] for m in self.moves]
        longest = max((len(ids) for ids in self.move_ids), default=0)
        if env is not None and max_new_tokens < longest:
            raise ConfigError(f"algo.max_new_tokens={max_new_tokens} is too short for a move of {env.spec.name!r}: "
                              f"the longest, {self.moves[int(np.argmax([len(i) for i in self.move_ids]))]!r}, "
                              f"takes {longest} tokens with the end of the reply; give at least {longest}")

    @contextlib.contextmanager
    def speaking_as(self, agent: int) -> Iterator[None]:
        """Inside, the model speaks as `agent` (a trainer with an adapter per role switches
        to that role's here); the model itself has one voice."""
        del agent
        yield

    # ----- prompts -----------------------------------------------------------------------------
    def _check_tokenizer(self) -> None:
        """Refuse a tokenizer that cannot write the environment's words back exactly: the
        words of coplay's shared text vocabulary (every text environment writes in it) and
        the environment's moves."""
        assert self.env is not None
        words = [w for w in VOCAB.words[3:]] + list(self.moves)
        bad = []
        unk = getattr(self.tokenizer, "unk_token_id", None)
        for w in dict.fromkeys(words):
            ids = self.tokenizer.encode(w, add_special_tokens=False)
            if (unk is not None and unk in ids) or self.tokenizer.decode(ids).strip() != w:
                bad.append(w)
        if bad:
            raise ConfigError(f"the tokenizer of {self.loaded.name!r} cannot represent words of "
                              f"{self.env.spec.name!r}'s text (coplay's text vocabulary and its moves: "
                              f"{', '.join(map(repr, bad[:8]))}): they do not come back from encode/decode; use a "
                              f"model whose tokenizer covers plain English text")

    def chat(self, msgs: list[dict[str, str]]) -> list[int]:
        """The token ids of chat messages `msgs` through the model's template, ready for its reply."""
        ids = self.tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
        if not isinstance(ids, list):   # a BatchEncoding in some versions
            ids = ids["input_ids"]
        return [int(i) for i in ids]

    def prompt(self, view: str, agent: int, moves: Sequence[str]) -> list[int]:
        """The token ids of the prompt for `agent` reading `view`, allowed `moves` now."""
        if self.env is None:
            raise ValueError("a player without a coplay text environment reads prompts it is given")
        return self.chat(prompts.messages(self.env.spec.name, self.roles[agent], view, moves, self.examples))

    # ----- the model ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def reading_after(self, prompts_: Sequence[Sequence[int]]) -> Iterator[None]:
        """Inside, batches of `prompts_` are read after the prefix they all share, read
        once here (with gradients where they are on): the key-value states of that
        prefix become leaves that every batch reads, their gradients summed over the
        batches, and pass back through the prefix once, on the way out. A step of many
        small batches then reads and differentiates the common prefix once, not once per
        batch. (Where the model's cache cannot be rebuilt from its tensors, nothing changes.)"""
        torch = self.torch
        shared = _shared_prefix(prompts_) if len(prompts_) > 1 else 0
        shared = min(shared, min(len(p) for p in prompts_) - 1)
        if shared < MIN_SHARED or self._start is not None:
            yield
            return
        from transformers import DynamicCache

        head = self.model(input_ids=torch.as_tensor([list(prompts_[0][:shared])]), use_cache=True, logits_to_keep=1)
        states = [(layer.keys, layer.values) for layer in _cache_of(head).layers]
        leaves = [(k.detach().requires_grad_(k.requires_grad), v.detach().requires_grad_(v.requires_grad))
                  for k, v in states]
        config = getattr(self.model, "config", None)
        self._start = (shared, lambda: DynamicCache(ddp_cache_data=leaves, config=config))
        try:
            yield
        finally:
            self._start = None
        pairs = [(t, leaf.grad) for (k, v), (lk, lv) in zip(states, leaves) for t, leaf in ((k, lk), (v, lv))
                 if leaf.grad is not None and t.requires_grad]
        if pairs:
            torch.autograd.backward([t for t, _ in pairs], [g for _, g in pairs])

    def _read_prompts(self, prompts_: Sequence[Sequence[int]], keep: int = 1) -> tuple[Any, Any, Any, Any]:
        """Read a batch of prompts: the prefix they all share once (a batch of one, its
        key-value cache then repeated for every prompt), then each prompt's rest,
        left-padded after it. Returns `(cache, logits [B, keep, V] of the last `keep`
        positions, attention mask [B, L], position ids [B, L])`. Only the positions kept
        are turned into logits: the vocabulary's projection of every prompt position
        would cost a fifth of the forward pass and, kept for a backward pass, most of
        its memory."""
        torch = self.torch
        b = len(prompts_)
        shared = _shared_prefix(prompts_) if b > 1 else 0
        shared = min(shared, min(len(p) for p in prompts_) - keep)    # the positions kept are every row's own
        past: dict[str, Any] = {}
        start = self._start if self._start is not None and self._start[0] <= shared else None
        if start is not None or shared >= MIN_SHARED:
            done, cache = (0, None) if start is None else (start[0], start[1]())
            if shared - done >= MIN_SHARED or cache is None:
                head = self.model(input_ids=torch.as_tensor([list(prompts_[0][done:shared])]), use_cache=True,
                                  logits_to_keep=1, **({} if cache is None else {self._cache_arg: cache}))
                cache = _cache_of(head)
            else:
                shared = done
            cache.batch_repeat_interleave(b)
            past = {self._cache_arg: cache}
        else:
            shared = 0
        ids, mask, position = self._left_padded([p[shared:] for p in prompts_])
        mask = torch.cat([torch.ones((b, shared), dtype=torch.long), mask], 1)
        position = position + shared
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=position, use_cache=True,
                         logits_to_keep=keep, **past)
        return _cache_of(out), out.logits.float(), mask, position

    def token_log_probs(self, prompts_: Sequence[Sequence[int]], replies: Sequence[Sequence[int]]) -> list[Any]:
        """Per-token log-probabilities of each reply after its prompt (torch tensors, with
        gradients where the model has them), one forward pass per `batch_size` pairs."""
        out: list[Any] = [None] * len(prompts_)
        for batch in self.batches(prompts_):
            for i, r in zip(batch, self._reply_log_probs([prompts_[i] for i in batch], [replies[i] for i in batch])):
                out[i] = r
        return out

    def batches(self, prompts_: Sequence[Sequence[int]], size: int | None = None) -> list[list[int]]:
        """The indices of `prompts_` in batches of at most `size` (default `batch_size`),
        alike prompts together (in the order of their tokens), so that each batch shares
        a long prefix (`_read_prompts` reads it once)."""
        size = size or self.batch_size
        order = sorted(range(len(prompts_)), key=lambda i: list(prompts_[i]))
        return [order[k:k + size] for k in range(0, len(order), size)]

    def _reply_log_probs(self, prompts_: Sequence[Sequence[int]], replies: Sequence[Sequence[int]]) -> list[Any]:
        """Each prompt followed by its reply, read as one left-padded sequence: its last
        `len(reply) + 1` positions score the reply's tokens (position t scores token t+1)."""
        torch = self.torch
        keep = max(len(r) for r in replies) + 1
        _, logits, _, _ = self._read_prompts([list(p) + list(r) for p, r in zip(prompts_, replies)], keep)
        logp = torch.log_softmax(logits / self.temperature, dim=-1)        # [B, keep, V]
        out = []
        for i, r in enumerate(replies):
            pos = torch.arange(keep - 1 - len(r), keep - 1)
            out.append(logp[i, pos, torch.as_tensor(list(r), dtype=torch.long)])
        return out

    def move_log_probs(self, prompts_: Sequence[Sequence[int]], moves: Sequence[Sequence[int]] | None = None,
                       grad: bool = False) -> list[Any]:
        """For each prompt, the log-probability of each move's canonical reply (its text and
        the end-of-turn token): `moves[i]` lists the moves (indices into the environment's)
        scored for prompt i, all of them by default. Returns one `[len(moves[i])]` tensor
        per prompt (numpy arrays unless `grad`). Each prompt is read once: its key-value
        cache is repeated for the moves, which are read after it."""
        torch = self.torch
        chosen = [list(m) for m in moves] if moves is not None else [list(range(len(self.moves)))] * len(prompts_)
        out: list[Any] = [None] * len(prompts_)
        with torch.set_grad_enabled(grad):
            for batch in self.batches(prompts_):
                rows = self._score_moves([prompts_[i] for i in batch], [chosen[i] for i in batch])
                for i, r in zip(batch, rows):
                    out[i] = r if grad else r.detach().numpy().astype(np.float64)
        return out

    def _score_moves(self, prompts_: Sequence[Sequence[int]], chosen: Sequence[Sequence[int]]) -> list[Any]:
        torch = self.torch
        cache, logits, mask, position = self._read_prompts(prompts_)
        first = torch.log_softmax(logits[:, -1] / self.temperature, -1)
        a = max(1, max(len(ms) for ms in chosen))
        replies = [[self.move_ids[m] for m in ms] + [[self.end_id]] * (a - len(ms)) for ms in chosen]
        longest = max(len(r) for row in replies for r in row)
        logp = first.repeat_interleave(a, 0)[:, None, :]                      # [B*A, 1, V]: each reply's first
        if longest > 1:   # the replies' other tokens, read after the prompt from its repeated cache
            cache.batch_repeat_interleave(a)
            tokens = torch.full((len(prompts_) * a, longest - 1), self.pad_id, dtype=torch.long)
            seen = torch.zeros((len(prompts_) * a, longest - 1), dtype=torch.long)
            for k, r in enumerate(r for row in replies for r in row):
                tokens[k, : len(r) - 1] = torch.as_tensor(r[:-1])
                seen[k, : len(r) - 1] = 1
            rest = self.model(input_ids=tokens, use_cache=True,
                              attention_mask=torch.cat([mask.repeat_interleave(a, 0), seen], 1),
                              position_ids=position[:, -1:].repeat_interleave(a, 0) + 1 + torch.arange(longest - 1),
                              **{self._cache_arg: cache})
            logp = torch.cat([logp, torch.log_softmax(rest.logits.float() / self.temperature, -1)], 1)
        rows = []
        for i, ms in enumerate(chosen):
            totals = [sum(logp[i * a + j, t, tok] for t, tok in enumerate(self.move_ids[m])) for j, m in enumerate(ms)]
            rows.append(torch.stack(totals) if totals else torch.zeros(0))
        return rows

    def _left_padded(self, prompts_: Sequence[Sequence[int]]) -> tuple[Any, Any, Any]:
        """`(ids, mask, position ids)` `[B, L]` of prompts padded on the left."""
        torch = self.torch
        b, length = len(prompts_), max(len(p) for p in prompts_)
        ids = torch.full((b, length), self.pad_id, dtype=torch.long)
        mask = torch.zeros((b, length), dtype=torch.long)
        for i, p in enumerate(prompts_):
            ids[i, length - len(p):] = torch.as_tensor(list(p))
            mask[i, length - len(p):] = 1
        return ids, mask, (mask.cumsum(-1) - 1).clamp(min=0)

    def sample(self, prompts_: Sequence[Sequence[int]], generator: Any,
               legal: Sequence[Sequence[int]] | None = None) -> list[Reply]:
        """One reply per prompt. `generator`: a torch.Generator (the run's random stream).
        `legal` (decoding=choose_legal): the moves each prompt may draw from."""
        with self.torch.no_grad():
            if self.decoding == "choose_legal":
                if legal is None:
                    raise ValueError("decoding=choose_legal needs the legal moves of each prompt")
                return self._sample_moves(prompts_, legal, generator)
            out: list[Reply | None] = [None] * len(prompts_)
            for batch in self.batches(prompts_):
                for i, r in zip(batch, self._generate([prompts_[i] for i in batch], generator)):
                    out[i] = r
            return out   # type: ignore[return-value]

    def _sample_moves(self, prompts_: Sequence[Sequence[int]], legal: Sequence[Sequence[int]],
                      generator: Any) -> list[Reply]:
        torch = self.torch
        scores = self.move_log_probs(prompts_, legal)
        out = []
        for row, ms in zip(scores, legal):
            logp = torch.log_softmax(torch.as_tensor(row), 0)
            k = int(torch.multinomial(logp.exp(), 1, generator=generator))
            out.append(Reply(self.move_ids[ms[k]], self.moves[ms[k]], np.asarray([float(logp[k])]), ms[k]))
        return out

    def _generate(self, prompts_: Sequence[Sequence[int]], generator: Any) -> list[Reply]:
        """Token-by-token sampling with the model's key-value cache, left-padded prompts."""
        torch = self.torch
        b = len(prompts_)
        past, logits, mask, position = self._read_prompts(prompts_)
        logits, last = logits[:, -1], position[:, -1]
        tokens: list[list[int]] = [[] for _ in range(b)]
        logps: list[list[float]] = [[] for _ in range(b)]
        done = torch.zeros(b, dtype=torch.bool)
        for _ in range(self.max_new_tokens):
            logp = torch.log_softmax(logits / self.temperature, dim=-1)
            nxt = torch.multinomial(logp.exp(), 1, generator=generator)[:, 0]
            for i in range(b):
                if not done[i]:
                    tokens[i].append(int(nxt[i]))
                    logps[i].append(float(logp[i, nxt[i]]))
            done |= torch.as_tensor([int(t) in self.stop for t in nxt])
            if bool(done.all()):
                break
            mask = torch.cat([mask, torch.ones((b, 1), dtype=torch.long)], dim=1)
            last = last + 1
            out = self.model(input_ids=nxt[:, None], attention_mask=mask, position_ids=last[:, None],
                             use_cache=True, logits_to_keep=1, **{self._cache_arg: past})
            past, logits = _cache_of(out), out.logits[:, -1].float()
        return [Reply(t, self.tokenizer.decode(t, skip_special_tokens=True), np.asarray(lp))
                for t, lp in zip(tokens, logps)]

    def to_utterance(self, reply: Reply) -> np.ndarray:
        """The reply as the utterance `[T]` the environment parses."""
        if self.decoding == "choose_legal":
            return VOCAB.encode(self.moves[reply.move], self.max_tokens,
                                end=len(self.moves[reply.move].split()) < self.max_tokens)
        return utterance(reply.text, self.max_tokens)


__all__ = ["DECODINGS", "END", "LMPlayer", "Reply", "reply_words", "utterance"]
