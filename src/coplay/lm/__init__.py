"""Pretrained language models as players of coplay's text environments.

Installed with the `llm` extra (`pip install coplay[llm]`: torch, transformers,
peft, gguf). JAX stays the core: the language model runs on the host, in PyTorch,
and plays the same compiled text environments (rendered to text through the
model's chat template), scored by the same exact evaluation. This layer is the
model, as `coplay.nets` is for the compiled learners; the learner that trains it,
`algo=lm_grpo`, is an algorithm like every other (`coplay.algos.lm_grpo`).

    models     load_model (a directory, a .gguf file, smollm2, tiny, a hub id), fetch_smollm2
    prompts    the system and user messages an agent reads
    policy     LMPlayer: sample replies, score moves, replies as utterances
    acting     lm_policy: an LMPlayer as a coplay Policy (tournaments, evaluation loops)

Importing this package loads neither torch nor transformers.
"""
