"""Config parsing and bad input: clear errors naming the value and the valid
choices, raised before anything is compiled."""

import pytest

from coplay.core.errors import ConfigError, UnknownNameError
from coplay.experiment.config import Experiment, parse_overrides, resume_differences


def test_defaults_are_mappo_on_spread():
    exp = parse_overrides([])
    assert exp.algo == "mappo" and exp.env == "spread"
    assert exp.env_config["n_agents"] == 3


def test_overrides_types_and_namespaces():
    exp = parse_overrides(["algo=ippo", "env=foraging", "seeds=8", "algo.lr=3e-4", "total_steps=2e6",
                           "env.n_agents=3", "algo.recurrent=true"])
    assert exp.algo == "ippo" and exp.env == "foraging"
    assert exp.run.seeds == 8 and exp.run.total_steps == 2_000_000
    assert exp.algo_config.lr == pytest.approx(3e-4)
    assert exp.algo_config.recurrent is True
    assert type(exp.algo_config).__module__ == "coplay.algos.ippo"
    assert exp.env_config["n_agents"] == 3


@pytest.mark.parametrize("args, words", [
    (["algo=mapo"], ["mapo", "mappo", "ippo"]),
    (["env=sprd"], ["sprd", "spread", "foraging", "matrix"]),
    (["algo.lrr=1e-3"], ["lrr", "lr"]),
    (["sedes=3"], ["sedes", "seeds"]),
    (["env.n_agent=4"], ["n_agent", "n_agents"]),
])
def test_unknown_names_list_valid_choices(args, words):
    with pytest.raises(UnknownNameError) as e:
        parse_overrides(args)
    for w in words:
        assert w in str(e.value)


@pytest.mark.parametrize("args, words", [
    (["seeds=0"], ["seeds=0", ">= 1"]),
    (["algo.lr=-1"], ["algo.lr=-1", "> 0"]),
    (["algo.gamma=1.5"], ["algo.gamma=1.5", "<= 1"]),
    (["seeds=two"], ["seeds", "integer", "two"]),
    (["total_steps=1.5"], ["total_steps", "integer"]),
    (["algo.activation=sigmoid"], ["sigmoid", "tanh", "relu"]),
    (["algo.recurrent=maybe"], ["algo.recurrent", "true or false"]),
    (["notakeyvalue"], ["notakeyvalue", "key=value"]),
    (["name=../.."], ["name='../..'", "one directory inside out_dir"]),
    (["name=a/b"], ["name='a/b'", "without '/'"]),
    (["out_dir="], ["out_dir=''", "name a directory"]),
    (["seeds=1e10"], ["seeds=10000000000", "<= 100000"]),
    (["logger=mlflow"], ["logger='mlflow'", "'mlflow' is not a logger", "csv, tensorboard, wandb"]),
    (["logger=csv+wandb"], ["csv means metrics.csv alone"]),
])
def test_bad_values_are_refused(args, words):
    with pytest.raises(ConfigError) as e:
        parse_overrides(args)
    for w in words:
        assert w in str(e.value)


@pytest.mark.parametrize("args, hint", [
    (["algo=grpo", "env=text:kuhn_poker", "algo.estimator=rea"], "algo.estimator='rea' is not allowed; did you mean "
                                                                  "'rae'? valid choices: grpo, "),
    (["algo.activation=rellu"], "algo.activation='rellu' is not allowed; did you mean 'relu'? valid choices: "),
    (["algo.activation=sigmoid"], "algo.activation='sigmoid' is not allowed; valid choices: "),
])
def test_a_misspelt_choice_gets_a_did_you_mean_as_a_misspelt_field_name_does(args, hint):
    with pytest.raises(ConfigError) as e:
        parse_overrides(args)
    assert hint in str(e.value)


def test_yaml_round_trip():
    exp = parse_overrides(["algo=ippo", "algo.lr=1e-3", "env.n_agents=4", "seeds=2"])
    back = Experiment.from_dict(__import__("yaml").safe_load(exp.to_yaml()))
    assert back.to_dict() == exp.to_dict()
    assert resume_differences(exp, back) == []


def test_resume_differences_name_fields():
    a = parse_overrides(["algo.lr=1e-3"])
    b = parse_overrides(["algo.lr=2e-3", "progress=false"])
    assert resume_differences(a, b) == ["algo.lr"]


@pytest.mark.parametrize("text, words", [
    ("algo: {name: ippo\n", ["is not valid YAML", "flow mapping"]),
    ("- algo\n- env\n", ["holds a list, not a mapping"]),
    ("", ["is empty"]),
    ("algo: [ippo]\n", ["config field 'algo' must be a name or a mapping", "['ippo']"]),
    ("algo: {name: ippo, lrr: 0.1}\n", ["lrr", "valid choices", "lr"]),
])
def test_a_malformed_config_yaml_is_refused_naming_the_file(tmp_path, text, words):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        Experiment.load(path)
    assert str(path) in str(e.value)
    for w in words:
        assert w in str(e.value)


def test_environment_arguments_are_typed_and_one_that_takes_none_says_so():
    import coplay

    with pytest.raises(ConfigError, match="environment 'two_step' takes no arguments; got env.size"):
        parse_overrides(["env=two_step", "env.size=3"])
    with pytest.raises(ConfigError, match="environment 'two_step' takes no arguments; got size"):
        coplay.make("two_step", size=3)
    with pytest.raises(ConfigError, match="n_agents must be an integer, got 'three'"):
        coplay.make("spread", n_agents="three")
    with pytest.raises(ConfigError, match="environment names are strings, got int 3"):
        coplay.make(3)
    assert coplay.make("spread", n_agents="2").spec.num_agents == 2  # text is read as the parameter's type


def test_a_sequence_argument_is_read_from_brackets_and_keeps_one_form_through_a_config_file(tmp_path):
    import coplay

    env = coplay.make("population_dilemma", payoff="[[3, 0], [4, 1]]")
    assert env.payoff.tolist() == [[3.0, 0.0], [4.0, 1.0]]
    exp = parse_overrides(["env=beach", "env.type_distribution=(1,1,2)", "algo=mo_ppo"])
    (tmp_path / "config.yaml").write_text(exp.to_yaml())
    loaded = Experiment.load(tmp_path / "config.yaml")          # YAML reads the tuple back as a list
    assert loaded == exp and loaded.to_dict()["env"]["type_distribution"] == (1, 1, 2)
    assert resume_differences(loaded, exp) == []
    with pytest.raises(ConfigError, match=r"env.type_distribution='0.3, 0.7\]' is not a sequence.*brackets"):
        parse_overrides(["env=beach", "env.type_distribution=0.3, 0.7]"])
    with pytest.raises(ConfigError, match=r"type_distribution=\[1, -1\] must be non-negative"):   # the env's own
        coplay.make("beach", type_distribution="[1, -1]")
    # a value that breaks the environment's arithmetic is a ConfigError naming the arguments, not a traceback
    with pytest.raises(ConfigError, match=r"environment 'beach' rejected its arguments.*'a', 'b'"):
        coplay.make("beach", type_distribution="['a', 'b']")


def test_loggers_join_and_a_stored_tensorboard_switch_still_loads(tmp_path):
    assert parse_overrides(["logger=tensorboard+wandb"]).run.logger == "tensorboard+wandb"
    for old, new in (("false", "csv"), ("true", "tensorboard")):
        (tmp_path / "config.yaml").write_text(f"algo:\n  name: ippo\nenv:\n  name: matrix\ntensorboard: {old}\n")
        assert Experiment.load(tmp_path / "config.yaml").run.logger == new


def test_an_algorithm_starts_from_its_settings_for_an_environment_its_defaults_do_not_learn():
    kuhn = parse_overrides(["algo=grpo", "env=text:kuhn_poker"]).algo_config
    assert (kuhn.decoding, kuhn.estimator, kuhn.kl_coef, kuhn.width) == ("legal", "dr_grpo", 0.2, 32)
    mine = parse_overrides(["algo=grpo", "env=text:kuhn_poker", "algo.width=64", "algo.decoding=free"]).algo_config
    assert (mine.width, mine.decoding, mine.kl_coef) == (64, "free", 0.2)     # what the user sets wins
    assert parse_overrides(["algo=grpo", "env=text:nim"]).algo_config.decoding == "free"   # elsewhere: defaults
    stored = Experiment.from_dict({"algo": parse_overrides(["algo=grpo"]).to_dict()["algo"],
                                   "env": {"name": "text:kuhn_poker"}})
    assert stored.algo_config.decoding == "free"     # a config that names every field keeps them all
