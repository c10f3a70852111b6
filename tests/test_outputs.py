"""Every command checks where it writes before it does its work: a tournament, an
evaluation or a sweep whose output cannot be written is refused (exit 2, one line
naming the path and why) before a game is played, a checkpoint loaded or Ray
started, and nothing is made."""

import pytest
from tiny_run import TINY

from coplay.cli.main import main
from coplay.core.errors import StorageError
from coplay.experiment.outputs import check_output


def _never(what):
    def refuse(*args, **kwargs):
        raise AssertionError(f"{what} must not start when the output cannot be written")
    return refuse


# --- the check --------------------------------------------------------------------------------------------------


def test_a_writable_output_passes_and_nothing_is_made(tmp_path):
    assert check_output(tmp_path / "a" / "b") == tmp_path / "a" / "b"
    assert check_output(tmp_path, "dir") == tmp_path
    assert check_output(tmp_path / "new" / "file.json", "file") == tmp_path / "new" / "file.json"
    (tmp_path / "old.json").write_text("{}")
    check_output(tmp_path / "old.json", "file")                     # replaced, where the command may replace it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.json"]


@pytest.mark.parametrize("where, kind, words", [
    ("a_file", "dir", "the output {p} is a file, and a directory is needed there"),
    ("a_file/sub", "dir", "cannot make the output {p}: {t}/a_file is not a directory"),
    ("a_file/sub/x.json", "file", "cannot make the output {p}: {t}/a_file is not a directory"),
    ("a_dir", "file", "the output {p} is a directory, and a file is needed there"),
    ("/proc/coplay-out", "dir", "cannot write the output /proc/coplay-out: cannot write in /proc"),
])
def test_an_output_that_cannot_be_written_is_refused_naming_it(tmp_path, where, kind, words):
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "a_dir").mkdir()
    path = tmp_path / where
    with pytest.raises(StorageError) as e:
        check_output(path, kind)
    assert words.format(p=path, t=tmp_path) in str(e.value)


def test_a_file_that_must_not_be_replaced_is_refused_and_a_fix_ends_the_message(tmp_path):
    (tmp_path / "kept.json").write_text("{}")
    with pytest.raises(StorageError, match=r"the result .*kept.json exists already and is not replaced: name "
                                           r"another, or remove it; pass --force$"):
        check_output(tmp_path / "kept.json", "file", what="result", overwrite=False, fix="pass --force")


# --- the commands -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("out, words", [
    ("a_file", "the tournament directory {t}/a_file is a file, and a directory is needed there"),
    ("a_file/sub", "cannot make the tournament directory {t}/a_file/sub: {t}/a_file is not a directory"),
    ("/proc/coplay-out", "cannot write the tournament directory /proc/coplay-out: cannot write in /proc"),
])
def test_a_tournament_whose_output_cannot_be_written_is_refused_before_a_game_is_played(tmp_path, monkeypatch,
                                                                                        capsys, out, words):
    monkeypatch.setattr("coplay.experiment.tournament.round_robin", _never("the round robin"))
    monkeypatch.setattr("coplay.experiment.tournament.load_run", _never("loading a run"))
    (tmp_path / "a_file").write_text("x")
    out = out if out.startswith("/") else str(tmp_path / out)
    code = main(["tournament", "random", "random", "env=kuhn_poker", "--games", "2", "--out", out])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("coplay: error: ") and err.count("\n") == 1, err
    assert words.format(t=tmp_path) in err
    assert (tmp_path / "a_file").read_text() == "x"


def test_a_tournament_whose_default_output_cannot_be_made_is_refused_before_a_game_is_played(tmp_path, monkeypatch,
                                                                                             capsys):
    monkeypatch.setattr("coplay.experiment.tournament.round_robin", _never("the round robin"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").write_text("not a directory")
    assert main(["tournament", "random", "random", "env=text:kuhn_poker", "--games", "2"]) == 2
    err = capsys.readouterr().err
    assert "cannot make the tournament directory runs/tournament-" in err and "-text_kuhn_poker: runs is not a " \
        "directory" in err


@pytest.mark.parametrize("where, words", [
    ("run", "the episode animation {t}/run/episode.gif is a directory, and a file is needed there; coplay eval "
            "--no-gif leaves it out"),
    ("/proc/coplay-run", "cannot write the episode animation /proc/coplay-run/episode.gif: cannot write in /proc"),
])
def test_an_evaluation_whose_animation_cannot_be_written_is_refused_before_the_checkpoint_is_loaded(
        tmp_path, monkeypatch, capsys, where, words):
    monkeypatch.setattr("coplay.experiment.playback.load_run", _never("loading the run"))
    (tmp_path / "run" / "episode.gif").mkdir(parents=True)
    run = where if where.startswith("/") else str(tmp_path / where)
    assert main(["eval", run, "--episodes", "2"]) == 2
    assert words.format(t=tmp_path) in capsys.readouterr().err
    with pytest.raises(AssertionError, match="loading the run"):   # without the animation, nothing is in the way
        main(["eval", run, "--episodes", "2", "--no-gif"])


def test_a_sweep_whose_directory_is_a_file_is_refused_before_ray_starts(tmp_path, monkeypatch, capsys):
    pytest.importorskip("ray")
    monkeypatch.setattr("ray.init", _never("Ray"))
    monkeypatch.setattr("coplay.scale.ray_trials.run_trials", _never("a trial"))
    (tmp_path / "sweep").write_text("x")
    code = main(["sweep", *TINY, "algo.lr=1e-3,3e-4", "seeds=1", "--out", str(tmp_path / "sweep")])
    assert code == 2
    assert f"the sweep directory {tmp_path}/sweep is a file, and a directory is needed there" in \
        capsys.readouterr().err


def test_an_episode_animation_is_written_atomically(tmp_path, monkeypatch):
    import numpy as np

    from coplay.experiment.evaluate import save_gif

    frames = [np.full((4, 4, 3), v, np.uint8) for v in (0, 255)]
    save_gif(frames, tmp_path / "episode.gif")
    old = (tmp_path / "episode.gif").read_bytes()
    assert old.startswith(b"GIF8")

    def crash(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("os.replace", crash)        # the write dies before its rename
    with pytest.raises(OSError, match="No space left"):
        save_gif(frames[::-1], tmp_path / "episode.gif")
    assert (tmp_path / "episode.gif").read_bytes() == old      # the last good one stays, and no temporary file
    assert [p.name for p in tmp_path.iterdir()] == ["episode.gif"]
