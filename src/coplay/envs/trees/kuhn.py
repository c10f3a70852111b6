"""Kuhn poker's exact tree (Kuhn, 1950).

Three cards (J < Q < K), one dealt to each player; both ante 1. Player 0 acts
first: pass or bet 1. After pass, player 1 may pass (showdown for 1) or bet;
facing a bet, a player calls (showdown for 2) or passes (folds). The game
value for player 0 is -1/18.

Information sets are written like OpenSpiel's: the owner's card (0 = J,
1 = Q, 2 = K) followed by the actions so far (`p` pass, `b` bet), e.g. `"1pb"`.
"""

from __future__ import annotations

from coplay.envs.trees.tree import CHANCE, RANK_WORDS, Rules

PASS, BET = 0, 1
_LETTERS = "pb"


class KuhnRules(Rules):
    name = "kuhn_poker"
    num_actions = 2
    action_names = ("pass", "bet")

    # A history is (card of player 0, card of player 1, actions...); cards are
    # None until dealt.
    def initial(self):
        return ()

    def _bets(self, h) -> str:
        return "".join(_LETTERS[a] for a in h[2:])

    def is_terminal(self, h) -> bool:
        return len(h) >= 2 and self._bets(h) in ("pp", "bb", "bp", "pbp", "pbb")

    def player(self, h) -> int:
        if len(h) < 2:
            return CHANCE
        return (len(h) - 2) % 2

    def chance_outcomes(self, h):
        remaining = [c for c in range(3) if c not in h]
        return [(c, 1.0 / len(remaining)) for c in remaining]

    def legal_actions(self, h):
        return [PASS, BET]

    def child(self, h, action: int):
        return h + (action,)

    def utility(self, h) -> float:
        bets = self._bets(h)
        winner = 0 if h[0] > h[1] else 1
        if bets == "bp":
            return 1.0  # player 1 folds
        if bets == "pbp":
            return -1.0  # player 0 folds
        stake = 2.0 if "b" in bets else 1.0
        return stake if winner == 0 else -stake

    def infoset_key(self, h) -> str:
        return self.observation_key(h, self.player(h))

    def observation_key(self, h, player: int) -> str:
        return f"{h[player]}{self._bets(h)}"

    def text_view(self, h, player: int) -> str:
        actions = " ".join(self.action_names[a] for a in h[2:]) or "none"
        return (f"kuhn poker , you are player {player} , your card : {RANK_WORDS[h[player]]} , "
                f"actions : {actions} , {self.text_status(h, player)}")
