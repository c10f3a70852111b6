"""Image and grid observations: the CNN torso (`algo.torso`), agent ids as channels,
and the learners that take observations in their shape (or refuse them, saying so)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

import coplay
from coplay.algos import ALGOS
from coplay.algos.base import Capabilities
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.registry import ENVS
from coplay.core.spaces import Box, Discrete
from coplay.core.types import EnvSpec, TimeStep
from coplay.experiment.compiled import plan
from coplay.experiment.config import Experiment, parse_overrides
from coplay.nets.agent import AgentNet, choose_torso
from coplay.wrappers import AgentID
from coplay.wrappers.agent_id import agent_id_view, with_agent_id

SIZE, HORIZON = 5, 6
MOVES = jnp.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]], jnp.int32)   # stay, up, down, left, right


@struct.dataclass
class GoalState:
    pos: jax.Array    # [2, 2] each agent's cell
    goal: jax.Array   # [2] the episode's goal cell
    t: jax.Array      # [] steps taken


class Goal(Env):
    """Two agents on a `size` x `size` grid (5x5 unless told) walk to the episode's goal
    cell. Each sees a one-hot image [size, size, 3]: itself, the other agent, the goal. Each
    agent's reward is how much closer (Manhattan) the step took it to the goal, so a return
    is at most the starting distance (on average 16/9 on 3x3, 16/5 on 5x5), and moving at
    random earns about nothing."""

    def __init__(self, size: int = SIZE):
        self.size = size
        self.spec = EnvSpec(name="test_goal_grid", num_agents=2, obs_space=Box(0.0, 1.0, (size, size, 3)),
                            action_space=Discrete(5), global_state_space=Box(0.0, 1.0, (6,)), max_steps=HORIZON)

    def _observe(self, s: GoalState, reward, done) -> TimeStep:
        size = self.size
        cell = lambda p: jax.nn.one_hot(p[0] * size + p[1], size * size).reshape(size, size)  # noqa: E731
        me, goal = jax.vmap(cell)(s.pos), cell(s.goal)
        obs = jnp.stack([me, me[::-1], jnp.broadcast_to(goal, me.shape)], -1)   # [2, H, W, 3]
        state = jnp.concatenate([s.pos.reshape(-1), s.goal]).astype(jnp.float32) / (size - 1)
        return TimeStep(obs=obs, reward=reward, done=done, truncated=done, active=jnp.ones(2, bool),
                        action_mask=jnp.ones((2, 5), bool), global_state=state, info={})

    def _reset(self, key):
        k_pos, k_goal = jax.random.split(key)
        s = GoalState(pos=jax.random.randint(k_pos, (2, 2), 0, self.size),
                      goal=jax.random.randint(k_goal, (2,), 0, self.size), t=jnp.zeros((), jnp.int32))
        return s, self._observe(s, jnp.zeros(2, jnp.float32), jnp.zeros((), bool))

    def _step(self, s: GoalState, actions, key):
        pos = jnp.clip(s.pos + MOVES[actions], 0, self.size - 1)
        distance = lambda p: jnp.abs(p - s.goal).sum(-1).astype(jnp.float32)  # noqa: E731
        new = GoalState(pos=pos, goal=s.goal, t=s.t + 1)
        return new, self._observe(new, distance(s.pos) - distance(pos), new.t >= HORIZON)


GRID = "test_goal_grid"
RUN = ["env=" + GRID, "progress=false", "logger=csv", "eval_episodes=16", "seeds=1"]


@pytest.fixture(scope="module")
def grid():
    """The grid registered for runs by name while this module's tests run (and only then:
    other modules list every registered environment)."""
    ENVS.register(GRID, Goal, kind="cooperative", description="a test's image-observation grid")
    yield GRID
    ENVS._entries.pop(GRID)


def _params(trainer):
    state = jax.eval_shape(trainer.init, jax.random.PRNGKey(0))    # shapes only: nothing runs
    return {jax.tree_util.keystr(p): leaf.shape for p, leaf in jax.tree_util.tree_flatten_with_path(state.params)[0]}


def _build(algo, env, **fields):
    entry = ALGOS.get(algo)
    config = entry.config(**fields)
    if "learning_starts" in {f.name for f in dataclasses.fields(config)}:
        config = dataclasses.replace(config, learning_starts=0, buffer_size=256)
    return entry.factory(config, env, num_updates=4)


# ----- choosing the torso ---------------------------------------------------------------------------


def test_auto_reads_images_with_the_cnn_and_vectors_with_the_mlp():
    assert choose_torso("auto", (5, 5, 3)) == "cnn" and choose_torso("auto", (18,)) == "mlp"
    assert choose_torso("auto", (4, 4)) == "mlp" and choose_torso("mlp", (5, 5, 3)) == "mlp"
    # IPPO on images: actor and critic (its own observation) read the image, agent ids as 2 more channels
    params = _params(_build("ippo", Goal(), num_envs=2, rollout_len=2))
    for net in ("actor", "critic"):
        assert params[f"['{net}']['params']['CNN_0']['Dense_0']['kernel']"] == (5 * 5 * (3 + 2), 32)
        assert params[f"['{net}']['params']['CNN_0']['Dense_3']['kernel']"] == (SIZE * SIZE * 32, 64)
    # MAPPO's critic reads the flat global state with the MLP; the Q family's agents read the image
    mappo = _params(_build("mappo", Goal(), num_envs=2, rollout_len=2))
    assert "['actor']['params']['CNN_0']['Dense_2']['kernel']" in mappo
    assert not any("CNN" in k for k in mappo if k.startswith("['critic']"))
    assert "['agent']['params']['CNN_0']['Dense_0']['kernel']" in _params(_build("vdn", Goal(), num_envs=2))
    # the flattened image through the MLP, and a flat environment as before
    flat = _params(_build("ippo", Goal(), num_envs=2, rollout_len=2, torso="mlp"))
    assert flat["['actor']['params']['MLP_0']['Dense_0']['kernel']"] == (SIZE * SIZE * 5, 64)
    assert not any("CNN" in k for k in _params(_build("ippo", coplay.make("spread"), num_envs=2, rollout_len=2)))


def test_separate_and_recurrent_networks_read_images():
    params = _params(_build("ippo", Goal(), num_envs=2, rollout_len=2, share_params=False, recurrent=True))
    assert params["['actor']['params']['CNN_0']['Dense_0']['kernel']"] == (2, 5 * 5 * 3, 32)   # no ids: 3 channels
    assert "['actor']['params']['ResetGRU_0']['GRUCell_0']['hn']['kernel']" in params


def test_a_cnn_on_flat_observations_is_refused_before_compiling_naming_the_shape():
    for algo in ("ippo", "iql"):
        with pytest.raises(ConfigError, match=r"algo.torso=cnn reads image.*shape \(18,\)"):
            plan(parse_overrides([f"algo={algo}", "env=spread", "algo.torso=cnn"]))


def test_an_unknown_torso_is_refused_naming_the_choices():
    with pytest.raises(ConfigError, match="algo.torso='conv' is not allowed.*valid choices: auto, mlp, cnn"):
        plan(parse_overrides(["algo=ippo", "env=spread", "algo.torso=conv"]))
    with pytest.raises(ConfigError, match="valid choices: auto, mlp, cnn"):
        choose_torso("resnet", (5, 5, 3))


def test_a_config_written_before_the_torso_reads_as_auto():
    old = Experiment(algo="ippo", env="spread").to_dict()
    del old["algo"]["torso"]
    assert Experiment.from_dict(old).algo_config.torso == "auto"
    assert ALGOS.get("selfplay_ppo").config().torso == "mlp"   # its tuned defaults flatten the board, as before


# ----- agent ids, and who refuses images ---------------------------------------------------------------------


def test_agent_ids_are_constant_channels_of_an_image_and_entries_of_a_vector():
    env = AgentID(Goal())
    assert env.spec.obs_space.shape == (SIZE, SIZE, 5)
    _, ts = env.reset(jax.random.PRNGKey(0))
    obs = np.asarray(ts.obs)
    assert obs.shape == (2, SIZE, SIZE, 5)
    assert (obs[0, ..., 3] == 1).all() and (obs[0, ..., 4] == 0).all()
    assert (obs[1, ..., 3] == 0).all() and (obs[1, ..., 4] == 1).all()
    flat = np.zeros((3, 2, 4), np.float32)                                  # [B, N, O]
    assert with_agent_id(flat)[2].tolist() == [[0, 0, 0, 0, 1, 0], [0, 0, 0, 0, 0, 1]]
    grid = AgentID(_Shaped((5, 5)))                          # a 2-D grid is flattened, then the id appended
    assert grid.spec.obs_space.shape == (5 * 5 + 2,)
    # what offline windows and `coplay record` append to stored observations: the same layout
    assert agent_id_view(np.ones((7, 2, 5, 5), np.float32), (5, 5)).shape == (7, 2, 5 * 5 + 2)
    assert agent_id_view(np.ones((7, 2, 4, 4, 3), np.float32), (4, 4, 3)).shape == (7, 2, 4, 4, 3 + 2)


class _Shaped(Goal):
    def __init__(self, shape):
        super().__init__()
        self.spec = dataclasses.replace(self.spec, obs_space=Box(0.0, 1.0, shape))


def test_trainers_of_flat_observations_refuse_images_naming_the_shape():
    spec = Goal().spec
    for algo in ("grpo", "lm_grpo", "pc_mappo", "mo_qmix"):
        assert any("images or grids of shape (5, 5, 3)" in p for p in ALGOS.get(algo).capabilities.problems(spec))
    for algo in ("ippo", "mappo", "iql", "vdn", "qmix", "bc", "iql_cql"):
        assert not ALGOS.get(algo).capabilities.problems(spec), algo
    assert not Capabilities(image_obs=False).problems(coplay.make("spread").spec)


def test_an_image_observation_refusal_comes_before_compiling(grid):
    with pytest.raises(ConfigError, match=r"'grpo' cannot train.*images or grids of shape \(5, 5, 3\).*can: .*ippo"):
        plan(parse_overrides(["algo=grpo", f"env={grid}"]))


# ----- learning on images ------------------------------------------------------------------------------


def test_ippo_learns_to_walk_to_the_goal_it_sees(grid, tmp_path):
    # a 3x3 grid, 45 small updates: about 1.3 of the 1.8 there is to walk (random play: about 0.1),
    # at half the cost of 20 larger updates on 5x5
    result = coplay.train(RUN + ["algo=ippo", "env.size=3", "algo.num_envs=16", "algo.rollout_len=8",
                                 "algo.epochs=2", "algo.minibatches=1", "algo.lr=3e-3", "algo.hidden_size=32",
                                 "total_steps=5760", "chunk_steps=5760", f"out_dir={tmp_path}"])
    actor = result.state.params["actor"]["params"]
    assert actor["CNN_0"]["Dense_0"]["kernel"].shape == (1, 5 * 5 * 5, 32)      # [seeds, ...]
    assert actor["CNN_0"]["Dense_3"]["kernel"].shape == (1, 3 * 3 * 32, 32)
    final, random = result.summary["final"]["return"]["iqm"], result.summary["headline"]["random_baseline"]
    assert final > random + 0.5, (final, random)


def test_a_q_learner_trains_on_images(grid, tmp_path):
    result = coplay.train(RUN + ["algo=iql", "env.size=3", "algo.num_envs=8", "algo.rollout_len=6",
                                 "algo.learning_starts=48", "algo.buffer_size=480", "algo.batch_size=16",
                                 "algo.hidden_size=16", "total_steps=480", "chunk_steps=480", f"out_dir={tmp_path}"])
    agent = result.state.params["agent"]["params"]
    assert agent["CNN_0"]["Dense_0"]["kernel"].shape == (1, 5 * 5 * 5, 32)
    assert result.state.buffer.experience["obs"].shape[-4:] == (2, 3, 3, 5)    # replay keeps the image
    assert np.isfinite(result.summary["final"]["return"]["iqm"])


def test_an_offline_learner_reads_a_dataset_of_images_in_their_shape(tmp_path):
    from coplay.offline import random_policy, record, save

    seen = []

    def act(key, obs, mask):
        seen.append(obs.shape)
        return random_policy(env)(key, obs, mask)

    env = Goal()
    data = record(env, act, 4, jax.random.PRNGKey(0), "poor")
    assert seen[0] == (4, 2, SIZE, SIZE, 3)                                   # the policy sees images
    assert data.experience["observations"].shape[2:] == (2, SIZE * SIZE * 3)  # stored flat (OG-MARL's layout)
    path = str(save(data, tmp_path / "grid.vlt" / "poor"))
    trainer = _build("iql_cql", env, dataset=path, batch_size=4)
    assert trainer.source.windows.arrays["obs"].shape[1:] == (2, SIZE, SIZE, 5)
    state = jax.eval_shape(trainer.init, jax.random.PRNGKey(0))
    after, metrics = jax.eval_shape(trainer.update, state)                    # traced through, not compiled
    assert jax.tree.map(lambda a: a.shape, after.params) == jax.tree.map(lambda a: a.shape, state.params)
    assert metrics["loss/td"].shape == ()


def test_selfplay_reads_boards_with_a_cnn_when_asked():
    env = coplay.make("connect_four")
    trainer = _build("selfplay_ppo", env, torso="cnn", num_envs=4, rollout_len=2, minibatches=1)
    state = jax.eval_shape(trainer.init, jax.random.PRNGKey(0))
    # the seat as 2 channels; the critic also sees whose turn it is
    assert state.params["actor"]["params"]["CNN_0"]["Dense_0"]["kernel"].shape == (5 * 5 * (2 + 2), 32)
    assert state.params["critic"]["params"]["CNN_0"]["Dense_0"]["kernel"].shape == (5 * 5 * (2 + 2 + 1), 32)
    after, _ = jax.eval_shape(trainer.update, state)
    assert jax.tree.map(lambda a: a.shape, after.params) == jax.tree.map(lambda a: a.shape, state.params)


def test_a_dense_layer_over_patches_is_a_same_padded_convolution():
    from coplay.nets.agent import patches

    x = jax.random.normal(jax.random.PRNGKey(0), (2, 5, 6, 3))
    for k in (3, 5):
        w = jax.random.normal(jax.random.PRNGKey(k), (k, k, 3, 4))
        conv = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        np.testing.assert_allclose(patches(x, k) @ w.reshape(-1, 4), conv, rtol=1e-4, atol=1e-4)


def test_agent_net_flattens_any_shape_through_the_mlp():
    net = AgentNet(3, 8, 1, "relu", False)
    x = jnp.ones((4, 2, 3, 5))
    params = net.init(jax.random.PRNGKey(0), jnp.zeros((4, 0)), x, jnp.zeros(4, bool))
    _, y = net.apply(params, jnp.zeros((4, 0)), x, jnp.zeros(4, bool))
    assert y.shape == (4, 3) and params["params"]["MLP_0"]["Dense_0"]["kernel"].shape == (30, 8)
