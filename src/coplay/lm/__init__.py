"""Pretrained language models as players and learners of coplay's text environments.

Installed with the `llm` extra (`pip install coplay[llm]`: torch, transformers,
peft, gguf). JAX stays the core: the language model runs on the host, in PyTorch,
and plays the same compiled text environments (rendered to text through the
model's chat template), is scored by the same exact evaluation, and learns from
the same group-relative estimators as the token-level policies of
`coplay.algos.grpo`.

    models     load_model (a directory, a .gguf file, smollm2, tiny, a hub id), fetch_smollm2
    prompts    the system and user messages an agent reads
    policy     LMPlayer: sample replies, score moves, replies as utterances
    grpo       LMGRPO: LoRA self-play with any estimator (algo=lm_grpo)

Importing this package loads neither torch nor transformers; it registers
`algo=lm_grpo`, whose config (`coplay.lm.config`) is checked before any model
is loaded.
"""

from coplay.algos import ALGOS
from coplay.lm.config import CAPABILITIES, Config

LM_KIND = "language model"


def _lm_grpo(*args, **kwargs):
    from coplay.lm.grpo import LMGRPO

    return LMGRPO(*args, **kwargs)


if "lm_grpo" not in ALGOS.names():
    ALGOS.register("lm_grpo", _lm_grpo, kind=LM_KIND, config=Config, capabilities=CAPABILITIES,
                   description="a pretrained language model (transformers) trained with LoRA (peft) on text "
                               "environments, self-play, any group-relative estimator; on the host")

__all__ = ["LM_KIND", "Config"]
