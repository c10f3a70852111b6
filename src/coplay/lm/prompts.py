"""What a language model reads: the rules and its role as the system message, the
environment's own view of the game as the user message, through the model's chat
template.

The user message is the view exactly as the text environment writes it for the
agent (`VOCAB.decode` of its observation: the same words a token-level policy
reads), followed by the moves the agent may say now. Both are functions of the
agent's information alone, so the prompt at an information set of Kuhn poker or
Leduc hold'em is one string, and the model's strategy there is exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# The rules of each text environment, as a system message says them. An environment
# without an entry gets the generic line and its list of moves.
RULES: dict[str, str] = {
    "text:kuhn_poker": (
        "You are playing Kuhn poker, a two-player card game. The deck has three cards: jack, queen, king "
        "(king is highest). Each player antes 1 chip and is dealt one card. Player 0 moves first. A player "
        "may pass or bet 1 chip. After a bet, the other player may bet (call) or pass (fold and lose the "
        "pot). If both pass, or a bet is called, the higher card wins the pot."),
    "text:leduc_holdem": (
        "You are playing Leduc hold'em, a two-player poker game with six cards: two jacks, two queens, two "
        "kings. Each player antes 1 chip and gets one private card. There are two betting rounds (raises of "
        "2 chips in the first round, 4 in the second, at most two raises a round); a public card is shown "
        "before the second. You may fold, call (or check) or raise. A pair with the public card wins, "
        "otherwise the higher card wins."),
    "text:tic_tac_toe": (
        "You are playing tic-tac-toe. The board is written row by row, rows separated by '/', '_' for an empty "
        "square. Squares are numbered 1 to 9, left to right and top to bottom. Get three of your marks in a "
        "row, column or diagonal to win."),
    "text:connect_four": (
        "You are playing connect four on a board of 6 rows and 7 columns, written row by row from the top, "
        "rows separated by '/'. Name the column (1 to 7) to drop your piece into. Get four in a row to win."),
    "text:nim": (
        "You are playing nim. Players take turns taking one or more objects from a single pile. The player who "
        "takes the last object wins."),
}

GENERIC = "You are playing a game against or alongside other players. Play to get the highest reward."


def system_message(env_name: str, role: str) -> str:
    rules = RULES.get(env_name, GENERIC)
    return f"{rules} You play as {role.replace('_', ' ')}. Reply with your move only, exactly as written."


def user_message(view: str, moves: Sequence[str], limit: int = 16) -> str:
    """The view, then the moves allowed now (at most `limit` named)."""
    shown = list(moves[:limit])
    more = f" (and {len(moves) - limit} more)" if len(moves) > limit else ""
    return f"{view}\nYour moves: {', '.join(shown)}{more}."


# A free-text game (TextArena's) explains itself in its first message; the system message says only how to answer.
FREE_TEXT = ("You are playing a game with other players. Read the game's messages and reply with your move only, "
             "written exactly in the format the game asks for, for example [4] or [check].")


def free_text_messages(observation: str, legal: Sequence[str] | None = None) -> list[dict[str, str]]:
    """A free-text game's turn: the game's messages to the player as they are, then the legal
    moves where the game lists them."""
    text = observation + ("\nYour legal moves: " + ", ".join(legal) + "." if legal else "")
    return [{"role": "system", "content": FREE_TEXT}, {"role": "user", "content": text}]


def first_line(text: str) -> str:
    """A free-text reply as the game reads it: its first line, stripped."""
    return text.strip().split("\n", 1)[0].strip()


Example = tuple[str, tuple[str, ...], str]   # a view, the moves allowed then, the reply


def messages(env_name: str, role: str, view: str, moves: Sequence[str],
             examples: Sequence[Example] = ()) -> list[dict[str, str]]:
    """The system message, then each worked example as an earlier exchange of the chat (the
    view and moves as a user message, the reply as the model's), then the turn itself."""
    shown = [m for v, ms, reply in examples
             for m in ({"role": "user", "content": user_message(v, ms)}, {"role": "assistant", "content": reply})]
    return [{"role": "system", "content": system_message(env_name, role)}, *shown,
            {"role": "user", "content": user_message(view, moves)}]


def worked_examples(env: Any, count: int, seed: int = 0) -> list[Example]:
    """`count` turns of a text environment played by random legal moves from `seed`: the
    acting agent's view, its legal moves and the move played. Shown before every prompt
    (`LMPlayer(..., examples=count)`), they teach a model the reply format, not a strategy:
    each example's move is the legal move the examples so far used least (ties drawn at
    random), so the replies shown differ where the game allows it."""
    import jax
    import numpy as np

    from coplay.envs.text.vocab import VOCAB

    rng = np.random.default_rng(seed)
    reset, step, mask = jax.jit(env.reset), jax.jit(env.step), jax.jit(env.move_mask)
    t_max = int(env.spec.action_space.shape[-1])
    used: dict[str, int] = {}
    out: list[Example] = []
    key = jax.random.PRNGKey(seed)
    for _ in range(100 * count):        # games, until `count` turns are shown
        if len(out) >= count:
            break
        key, k_reset = jax.random.split(key)
        state, ts = reset(k_reset)
        for t in range(env.spec.max_steps):
            if bool(np.asarray(ts.done)) or len(out) >= count:
                break
            legal, active = np.asarray(mask(state)), np.asarray(ts.active)
            actions = np.zeros((env.spec.num_agents, t_max), np.int32)
            for a in np.flatnonzero(active):
                allowed = [int(m) for m in np.flatnonzero(legal[a])]
                texts = [env.move_texts[m] for m in allowed]
                fewest = min(used.get(x, 0) for x in texts)
                move = allowed[int(rng.choice([i for i, x in enumerate(texts) if used.get(x, 0) == fewest]))]
                text = env.move_texts[move]
                actions[a] = np.asarray(VOCAB.encode(text, t_max, end=len(text.split()) < t_max))
                if len(out) < count:
                    out.append((VOCAB.decode(np.asarray(ts.obs)[a]), tuple(texts), text))
                    used[text] = used.get(text, 0) + 1
            state, ts = step(state, jax.numpy.asarray(actions), jax.random.fold_in(key, t))
    if len(out) < count:
        from coplay.core.errors import ConfigError

        raise ConfigError(f"algo.examples={count}: {env.spec.name!r} gave {len(out)} turns in {100 * count} random "
                          "games; give fewer examples")
    return out
