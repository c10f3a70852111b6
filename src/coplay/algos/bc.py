"""BC: behaviour cloning from a dataset.

Each agent's network is trained to give the dataset's action the highest
probability at the observation it was taken from, by the cross-entropy over its
legal actions (active agents only):

    L = - mean_{t, i active} log softmax(f_i(o_t^i))[a_t^i]

and acts greedily on the result (`algo.acting=sample`: draws from it, as the
data's policy did). One network for every agent (with a one-hot
agent id, `algo.share_params=true`) or one per agent. It learns nothing the
data does not show, so it is the floor every offline method should clear on
good data and the reference the others are read against. The dataset, the
windows and the run are the offline trainers' (`coplay.algos.common.offline`).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from coplay.algos.common import q_learning as ql
from coplay.algos.common.offline import OfflineNetConfig
from coplay.algos.common.q_trainer import QLoop
from coplay.nets import distributions


@dataclass(frozen=True)
class Config(OfflineNetConfig):
    pass


class BC(QLoop):
    name = "bc"
    config_class = Config
    config: Config
    loss_name = "loss/bc"

    def loss(self, params: dict, target_params: dict, w: dict[str, jax.Array]) -> tuple[jax.Array, dict]:
        t = self.train_len
        logits = self.unroll(params["agent"], w)[:t]                                   # [T, B, N, A]
        w = {k: v[self.burn_in:self.burn_in + t] for k, v in w.items()}
        log_p = jax.nn.log_softmax(distributions.masked_logits(logits, w["action_mask"]), axis=-1)
        nll = -ql.chosen(log_p, w["action"])
        agree = (ql.greedy(logits, w["action_mask"]) == w["action"]).astype(jnp.float32)
        return ql.masked_mean(nll, w["active"]), {"accuracy": ql.masked_mean(agree, w["active"])}
