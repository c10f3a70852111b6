"""Leduc hold'em's exact tree (Southey et al., 2005), with OpenSpiel's rules.

Six cards: two suits of J, Q, K. Both players ante 1 and get one private
card. Two betting rounds, raises of 2 in the first and 4 in the second, at
most two raises per round; after the first round one public card is dealt.
A player whose private card pairs the public card wins; otherwise the higher
private card wins; equal ranks split the pot. Folding is legal only when
facing a raise. Player 0 starts both rounds.

Actions are 0 fold, 1 call (or check), 2 raise. Information sets read like
`"K|Q|rc|r"`: the owner's private rank, the public rank (empty before it is
dealt), then each round's betting (`c` call/check, `r` raise, `f` fold).
"""

from __future__ import annotations

from coplay.envs.trees.tree import CHANCE, RANK_WORDS, Rules

FOLD, CALL, RAISE = 0, 1, 2
_LETTERS = "fcr"
_RANKS = "JQK"
_RAISE_SIZE = (2, 4)
_MAX_RAISES = 2


def _round_over(bets: str) -> bool:
    """A betting round ends on a fold, a call of a raise, or check-check."""
    if not bets:
        return False
    if bets[-1] == "f":
        return True
    return bets == "cc" or (bets[-1] == "c" and "r" in bets)


class LeducRules(Rules):
    name = "leduc_holdem"
    num_actions = 3
    action_names = ("fold", "call", "raise")

    # A history is (card0, card1, round-1 bets as str, public card or None,
    # round-2 bets as str), grown as the game goes on. Cards are 0..5; rank = card // 2.
    def initial(self):
        return ()

    def _parts(self, h):
        cards = h[:2]
        first = h[2] if len(h) > 2 else ""
        public = h[3] if len(h) > 3 else None
        second = h[4] if len(h) > 4 else ""
        return cards, first, public, second

    def is_terminal(self, h) -> bool:
        _, first, public, second = self._parts(h)
        if first.endswith("f"):
            return True
        return public is not None and _round_over(second)

    def player(self, h) -> int:
        if len(h) < 2:
            return CHANCE
        _, first, public, second = self._parts(h)
        if not _round_over(first):
            return len(first) % 2
        if public is None:
            return CHANCE
        return len(second) % 2

    def chance_outcomes(self, h):
        used = [c for c in h[:2]] + ([h[3]] if len(h) > 3 else [])
        remaining = [c for c in range(6) if c not in used]
        return [(c, 1.0 / len(remaining)) for c in remaining]

    def _current_bets(self, h) -> str:
        _, first, public, second = self._parts(h)
        return second if public is not None else first

    def legal_actions(self, h):
        bets = self._current_bets(h)
        facing = bets.endswith("r")
        actions = [FOLD] if facing else []
        actions.append(CALL)
        if bets.count("r") < _MAX_RAISES:
            actions.append(RAISE)
        return actions

    def child(self, h, action: int):
        if len(h) < 2:
            return h + (action,)
        _, first, public, second = self._parts(h)
        if not _round_over(first):
            return (h[0], h[1], first + _LETTERS[action])
        if public is None:
            return (h[0], h[1], first, action, "")
        return (h[0], h[1], first, public, second + _LETTERS[action])

    def _contributions(self, h) -> list[float]:
        """What each player has put in the pot so far."""
        _, first, public, second = self._parts(h)
        put = [1.0, 1.0]
        for rnd, bets in enumerate((first, second)):
            for k, letter in enumerate(bets):
                p = k % 2
                if letter == "c":
                    put[p] = put[1 - p]
                elif letter == "r":
                    put[p] = put[1 - p] + _RAISE_SIZE[rnd]
        return put

    def utility(self, h) -> float:
        (c0, c1), first, public, second = self._parts(h)
        put = self._contributions(h)
        last = second if second else first
        if last.endswith("f"):
            folder = (len(last) - 1) % 2
            return -put[0] if folder == 0 else put[1]
        r0, r1, rp = c0 // 2, c1 // 2, public // 2
        s0 = (2, r0) if r0 == rp else (1, r0)
        s1 = (2, r1) if r1 == rp else (1, r1)
        if s0 == s1:
            return 0.0
        return put[1] if s0 > s1 else -put[0]

    def infoset_key(self, h) -> str:
        return self.observation_key(h, self.player(h))

    def observation_key(self, h, player: int) -> str:
        (c0, c1), first, public, second = self._parts(h)
        own = (c0, c1)[player] // 2
        board = "" if public is None else _RANKS[public // 2]
        return f"{_RANKS[own]}|{board}|{first}|{second}"

    def text_view(self, h, player: int) -> str:
        (c0, c1), first, public, second = self._parts(h)
        board = "hidden" if public is None else RANK_WORDS[public // 2]

        def said(bets: str) -> str:
            return " ".join(self.action_names[_LETTERS.index(b)] for b in bets) or "none"

        return (f"leduc holdem , you are player {player} , your card : {RANK_WORDS[(c0, c1)[player] // 2]} , "
                f"public card : {board} , first round : {said(first)} , second round : {said(second)} , "
                f"{self.text_status(h, player)}")
