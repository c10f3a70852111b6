"""The clipped token loss written twice, in JAX for the compiled GRPO
(`coplay.algos.common.token_loss`) and in PyTorch for the language model's
(`coplay.lm.token_loss`): the same arrays give the same loss and the same
gradient with respect to the log-probabilities, for every token norm, with and
without the KL term, ragged replies included."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from coplay.algos.common import token_loss as jax_loss  # noqa: E402
from coplay.lm import token_loss as torch_loss  # noqa: E402


def _batch(seed: int, replies: int = 7, width: int = 5):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, width + 1, replies)
    tokens = np.arange(width)[None, :] < lengths[:, None]                  # ragged replies
    logp = np.log(rng.uniform(0.05, 0.95, (replies, width)))
    old = logp + rng.normal(0.0, 0.3, logp.shape)                           # some ratios leave the clip range
    ref = logp + rng.normal(0.0, 0.5, logp.shape)
    adv = rng.normal(0.0, 1.0, replies)
    weight = (rng.uniform(size=replies) < 0.8).astype(np.float64)
    adv = adv * weight                       # replies the learner did not say carry nothing
    return logp, old, ref, adv, tokens & (weight[:, None] > 0), weight


@pytest.mark.parametrize("norm", ["sequence", "token", "constant"])
@pytest.mark.parametrize("kl_coef", [0.0, 0.1])
@pytest.mark.parametrize("seed", [0, 1])
def test_jax_and_pytorch_token_losses_agree_in_value_and_gradient(norm, kl_coef, seed):
    assert torch_loss.NORMS == jax_loss.TOKEN_NORMS
    logp, old, ref, adv, tokens, weight = _batch(seed)
    options = {"clip_eps": 0.2, "norm": norm, "max_tokens": 5, "kl_coef": kl_coef}
    with jax.enable_x64(True):
        fixed = [jnp.asarray(x) for x in (old, adv, tokens, weight)]
        value, grad = jax.value_and_grad(lambda lp: jax_loss.clipped_token_loss(
            lp, *fixed, ref_logp=jnp.asarray(ref), **options)[0])(jnp.asarray(logp))
    lp = torch.tensor(logp, dtype=torch.float64, requires_grad=True)
    theirs, _ = torch_loss.clipped_token_loss(lp, torch.tensor(old), torch.tensor(adv), torch.tensor(tokens),
                                              torch.tensor(weight), ref_logp=torch.tensor(ref), **options)
    theirs.backward()
    assert abs(float(theirs.detach()) - float(value)) < 1e-6
    np.testing.assert_allclose(lp.grad.numpy(), np.asarray(grad), atol=1e-6)
    assert np.abs(np.asarray(grad)).sum() > 0 and not np.asarray(grad)[~tokens].any()
