"""Sampling actions with one random number per row: the categorical over logits
(inverse CDF), a uniform choice among legal actions, and random legal play for
every agent row. Frequencies are checked with a chi-square test at a fixed seed;
the edge cases (extreme logits, draws at the ends of [0, 1), rows with nothing
legal) are checked exactly."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from coplay.algos.common.matches import random_legal_actions, sample_from_mask
from coplay.nets.distributions import Categorical, masked_logits, prefix_sum, sample

DRAWS = 200_000
P_FLOOR = 1e-4  # a chi-square p-value below this fails; with a fixed seed the test is deterministic

# Compiled once for the many-draw tests (the tests that replace the random source run eagerly).
sample_jit = jax.jit(sample)
sample_from_mask_jit = jax.jit(sample_from_mask)
random_legal_actions_jit = jax.jit(random_legal_actions, static_argnums=2)


def _assert_frequencies(draws: np.ndarray, probs: np.ndarray) -> None:
    """draws [n] int in 0..A-1 follow probs [A]: never where probs is 0, chi-square elsewhere."""
    probs = np.asarray(probs, np.float64)
    counts = np.bincount(draws, minlength=len(probs))
    assert counts[probs == 0].sum() == 0, f"impossible actions drawn: {counts}"
    live = probs > 0
    if live.sum() < 2:
        return
    _, p = stats.chisquare(counts[live], probs[live] / probs[live].sum() * len(draws))
    assert p > P_FLOOR, f"counts {counts} do not follow {probs} (chi-square p = {p:.2g})"


def _softmax(logits: np.ndarray) -> np.ndarray:
    z = np.exp(logits - logits.max())
    return z / z.sum()


def _widen(logits: jax.Array, mask: jax.Array, width: int) -> tuple[jax.Array, jax.Array]:
    """Rows padded to `width` actions with masked ones of large logits (up to 32 actions
    the categorical sums in order, past that by a parallel prefix sum)."""
    extra = width - logits.shape[-1]
    pad = [(0, 0)] * (logits.ndim - 1) + [(0, extra)]
    return jnp.pad(logits, pad, constant_values=50.0), jnp.pad(mask, pad, constant_values=False)


WIDTHS = pytest.mark.parametrize("width", [5, 40])


# ----------------------------------------------------------------------------- categorical


@WIDTHS
def test_categorical_samples_follow_the_softmax_of_the_legal_logits(width):
    logits = jnp.array([[2.0, 0.5, -1.0, 0.0, 1.0],
                        [3.0, 7.0, 0.0, 9.0, -2.0],
                        [0.01, 0.0, -0.01, 0.02, 0.0]])
    mask = jnp.array([[True, True, True, True, True],
                      [True, False, True, False, True],
                      [False, True, True, True, False]])
    logits, mask = _widen(logits, mask, width)
    prepared = Categorical().prepare(logits, mask)
    draws = np.asarray(sample_jit(jax.random.PRNGKey(0), jnp.broadcast_to(prepared, (DRAWS, *prepared.shape))))
    assert draws.shape == (DRAWS, 3) and draws.dtype == np.int32
    for row in range(3):
        probs = np.where(np.asarray(mask[row]), _softmax(np.where(mask[row], logits[row], -np.inf)), 0.0)
        _assert_frequencies(draws[:, row], probs)


@WIDTHS
def test_categorical_never_draws_a_masked_action_whatever_the_logits(width):
    # Masked actions with the largest raw logits, legal ones far apart or huge.
    logits = jnp.array([[1e30, -1e4, 1e30, -1e4 + 3.0, 1e30],
                        [-80.0, 1e30, 80.0, 5.0, -1e6],
                        [-1e8, 3e38, -1e8, -1e8, 0.0],
                        [0.0, 0.0, 0.0, 0.0, 0.0]])
    mask = jnp.array([[False, True, False, True, False],
                      [True, False, True, False, False],
                      [True, False, True, True, False],
                      [False, False, False, False, True]])
    logits, mask = _widen(logits, mask, width)
    prepared = masked_logits(logits, mask)
    draws = np.asarray(sample_jit(jax.random.PRNGKey(1), jnp.broadcast_to(prepared, (DRAWS, 4, width))))
    legal = np.asarray(mask)
    for row in range(4):
        assert legal[row, draws[:, row]].all(), f"row {row} drew a masked action"
    # Legal logits 3 apart: the larger is drawn e**3 times as often.
    _assert_frequencies(draws[:, 0], np.array([0, 1, 0, np.e**3] + [0] * (width - 4)))
    assert (draws[:, 1] == 2).all() and (draws[:, 3] == 4).all()


@WIDTHS
@pytest.mark.parametrize("u, expected", [(0.0, [1, 1, 2]), (np.nextafter(np.float32(1), np.float32(0)), [3, 2, 2])])
def test_categorical_draws_at_the_ends_of_the_unit_interval_stay_legal(monkeypatch, u, expected, width):
    # u = 0 takes the first action with positive probability, u just below 1 the last:
    # rounding of u * total up to the total must not go past the last legal action.
    monkeypatch.setattr(jax.random, "uniform", lambda key, shape, dtype=jnp.float32: jnp.full(shape, u, dtype))
    logits = jnp.array([[0.0, 0.1, 0.2, 0.3, 9.0],
                        [5.0, 1.0, -3.0, 9.0, 9.0],
                        [9.0, 9.0, 1.0, 9.0, 9.0]])
    mask = jnp.array([[False, True, True, True, False],
                      [False, True, True, False, False],
                      [False, False, True, False, False]])
    logits, mask = _widen(logits, mask, width)
    fresh = jax.jit(lambda key, x: sample(key, x))  # traced now, with the stand-in random source
    assert np.asarray(fresh(jax.random.PRNGKey(0), masked_logits(logits, mask))).tolist() == expected


@pytest.mark.parametrize("width", [4, 40])
def test_categorical_rows_with_nothing_legal(width):
    # masked_logits leaves a row with no legal action unmasked: it samples its raw logits.
    logits = jnp.linspace(1.0, -1.0, width)
    prepared = masked_logits(logits, jnp.zeros(width, bool))
    draws = np.asarray(sample_jit(jax.random.PRNGKey(2), jnp.broadcast_to(prepared, (DRAWS, width))))
    _assert_frequencies(draws, _softmax(np.asarray(logits)))
    # Every logit -1e9 (all masked by hand): uniform. Every logit -inf: no distribution, 0.
    draws = np.asarray(sample_jit(jax.random.PRNGKey(3), jnp.full((DRAWS, width), -1e9)))
    _assert_frequencies(draws, np.full(width, 1 / width))
    assert np.asarray(sample_jit(jax.random.PRNGKey(4), jnp.full((5, width), -jnp.inf))).tolist() == [0] * 5


def test_categorical_sample_shapes_and_low_precision_logits():
    key = jax.random.PRNGKey(5)
    for batch in [(), (7,), (4, 3, 2)]:
        out = sample_jit(key, jnp.zeros((*batch, 6)))
        assert out.shape == batch and out.dtype == jnp.int32
    # bfloat16 logits (about log 2, 0, 0) are summed in float32.
    logits = jnp.log(jnp.array([2.0, 1.0, 1.0])).astype(jnp.bfloat16)
    draws = np.asarray(sample_jit(key, jnp.broadcast_to(logits, (DRAWS, 3))))
    _assert_frequencies(draws, _softmax(np.asarray(logits, np.float32)))


def test_prefix_sum_is_the_cumulative_sum():
    x = np.random.default_rng(6).integers(0, 5, (3, 4, 37))
    np.testing.assert_array_equal(jax.jit(prefix_sum)(x), np.cumsum(x, axis=-1))
    y = np.random.default_rng(7).random((5, 300), np.float32)
    np.testing.assert_allclose(jax.jit(prefix_sum)(y), np.cumsum(y, axis=-1), rtol=1e-5)


# ----------------------------------------------------------------------------- uniform over a mask


# Up to 32 actions a row is packed into one 32-bit word; longer rows take prefix sums.
@pytest.mark.parametrize("width", [7, 32, 33, 75])
def test_sample_from_mask_is_uniform_over_each_rows_true_entries(width):
    rng = np.random.default_rng(width)
    mask = np.stack([rng.random(width) < 0.5, np.arange(width) == width - 1, np.ones(width, bool)])
    mask[0, [0, width // 2]] = True, False
    draws = np.asarray(sample_from_mask_jit(jax.random.PRNGKey(8), jnp.broadcast_to(mask, (DRAWS, 3, width))))
    assert draws.shape == (DRAWS, 3) and draws.dtype == np.int32
    for row in range(3):
        _assert_frequencies(draws[:, row], mask[row].astype(float))


@pytest.mark.parametrize("width", [6, 32, 40])
def test_sample_from_mask_picks_the_ranked_true_entry_and_0_for_empty_rows(monkeypatch, width):
    # Random numbers 0, 1, 2, ...: the k-th draw is the (k mod count)-th True entry.
    monkeypatch.setattr(jax.random, "bits", lambda key, shape, dtype=jnp.uint32:
                        jnp.arange(np.prod(shape), dtype=dtype).reshape(shape))
    mask = np.zeros(width, bool)
    mask[[1, 3, 4, width - 1]] = True
    key = jax.random.PRNGKey(0)

    def draw(mask):  # traced now, with the stand-in random source
        return np.asarray(jax.jit(lambda k, m: sample_from_mask(k, m))(key, jnp.asarray(mask))).tolist()

    last = width - 1
    assert draw(np.broadcast_to(mask, (9, width))) == [1, 3, 4, last, 1, 3, 4, last, 1]
    monkeypatch.setattr(jax.random, "bits", lambda key, shape, dtype=jnp.uint32: jnp.full(shape, 2**32 - 1, dtype))
    # 2**32 - 1 = 3 (mod 4) and = 0 (mod 3)
    assert draw(mask) == last
    mask[last] = False
    assert draw(mask) == 1
    assert draw(np.zeros((2, width), bool)) == [0, 0]


def test_random_legal_actions_turn_based_and_simultaneous():
    # Two agents, different masks; in a turn-based game they share the game's one number,
    # in a simultaneous game they draw apart. Each row is uniform over its own mask either way.
    mask = jnp.array([[True, True, False, True], [False, True, True, False]])
    batch = jnp.broadcast_to(mask, (DRAWS, 2, 4))
    for turn_based in (True, False):
        draws = np.asarray(random_legal_actions_jit(jax.random.PRNGKey(9), batch, turn_based))
        assert draws.shape == (DRAWS, 2) and draws.dtype == np.int32
        for row in range(2):
            _assert_frequencies(draws[:, row], np.asarray(mask[row], float))
    # Simultaneous draws are independent: the six joint actions are equally likely.
    joint = draws[:, 0] * 4 + draws[:, 1]
    _assert_frequencies(joint, np.outer(np.asarray(mask[0], float), np.asarray(mask[1], float)).ravel())
