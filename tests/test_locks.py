"""One writer at a time (`coplay.core.lock`): a run directory, a sweep directory and a
dataset being written are held by one process; a second meets an error naming the
holder; a holder killed with SIGKILL leaves nothing that blocks the next one."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tiny_run import TINY

from coplay.core.errors import ConfigError, StorageError
from coplay.core.lock import LOCK_NAME, InUseError, StaleLockWarning, held
from coplay.experiment.record import record_dataset
from coplay.experiment.runner import train

HOLDER = textwrap.dedent("""
    import sys, time
    from coplay.core.lock import held
    with held(sys.argv[1], "a test's holder"):
        print("held", flush=True)
        time.sleep(600)
""")


class Holder:
    """Another process holding the lock file `path` until stopped."""

    def __init__(self, path: Path):
        self.proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "held"

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def __enter__(self) -> Holder:
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            self.kill()


def test_a_second_holder_is_refused_by_name_and_a_holder_killed_by_sigkill_leaves_a_lock_that_is_taken_over(tmp_path):
    path = tmp_path / LOCK_NAME
    with Holder(path) as holder:
        with pytest.raises(InUseError, match=rf"in use by pid {holder.proc.pid} on host {socket.gethostname()}"):
            with held(path, "the thing"):
                pass
        holder.kill()                         # SIGKILL: no handler runs, the holder's record stays in the file
        with pytest.warns(StaleLockWarning, match=rf"left locked by pid {holder.proc.pid}.*which is gone"):
            with held(path, "the thing"):
                with held(path, "the thing"):          # the same process may hold it again
                    assert f'"pid": {os.getpid()}' in path.read_text()
    assert path.read_text() == ""            # released on a clean exit: the next holder takes it without a warning


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory):
    """A tiny run stopped after its first chunk, so it can be resumed."""
    out = tmp_path_factory.mktemp("runs")
    result = train([*TINY, f"out_dir={out}", "name=held"], stop_after_chunks=1)
    return result.run_dir


def test_a_run_directory_that_another_process_holds_is_not_resumed_or_written(stopped_run):
    metrics = (stopped_run / "metrics.csv").read_text()
    with Holder(stopped_run / LOCK_NAME) as holder:
        with pytest.raises(InUseError, match=rf"the run directory {stopped_run} is in use by pid {holder.proc.pid}"):
            train([*TINY, f"out_dir={stopped_run.parent}", "name=held", f"resume={stopped_run}"])
    assert (stopped_run / "metrics.csv").read_text() == metrics


def test_a_sweep_directory_that_another_process_holds_is_refused_before_any_trial(tmp_path, monkeypatch):
    pytest.importorskip("ray")
    from coplay.experiment import sweep as sweeping
    from coplay.scale import ray_trials

    monkeypatch.setattr(ray_trials, "run_trials", lambda *a, **k: pytest.fail("a trial ran"))
    out = tmp_path / "sweep"
    out.mkdir()
    with Holder(out / LOCK_NAME), pytest.raises(InUseError, match="the sweep directory .* is in use by pid"):
        sweeping.sweep([*TINY, "algo.lr=1e-3,3e-4", "seeds=1"], out=out)


def test_a_dataset_another_process_writes_is_refused_before_recording_and_a_killed_writers_partial_is_removed(
        tmp_path, monkeypatch):
    from coplay.experiment import record as recording

    out = tmp_path / "spread.vlt"
    out.mkdir()
    stale = out / ".poor.partial-999999"           # what a `coplay record` killed mid-write leaves
    stale.mkdir()
    real_record = recording.record
    monkeypatch.setattr(recording, "record", lambda *a, **k: pytest.fail("episodes were recorded"))
    with Holder(out / ".poor.lock"), pytest.raises(InUseError, match=r"the dataset .*poor is in use by pid"):
        record_dataset("random", "poor", 2, out, env_overrides=["env=spread"])
    assert stale.exists()                          # the holder may still be writing it
    monkeypatch.setattr(recording, "record", real_record)
    with pytest.warns(StaleLockWarning):            # the holder was killed
        written = record_dataset("random", "poor", 2, out, env_overrides=["env=spread"])
    assert Path(written["path"]) == out / "poor" and not stale.exists()


@pytest.mark.parametrize("where", ["file", "proc"])
def test_record_refuses_an_output_it_cannot_write_before_playing_an_episode(tmp_path, monkeypatch, where):
    from coplay.experiment import record as recording

    monkeypatch.setattr(recording, "record", lambda *a, **k: pytest.fail("episodes were recorded"))
    if where == "file":
        out = tmp_path / "taken.vlt"
        out.write_text("a file, not a dataset directory")
    else:
        out = Path("/proc/coplay-test.vlt")
    with pytest.raises(StorageError, match=f"cannot write the dataset {out}/poor"):
        record_dataset("random", "poor", 2, out, env_overrides=["env=spread"])


def test_record_refuses_a_text_environment_by_name_before_making_its_output(tmp_path):
    out = tmp_path / "talk.vlt"
    with pytest.raises(ConfigError, match=r"env='text:kuhn_poker' acts with utterances .*cannot be recorded"):
        record_dataset("random", "poor", 2, out, env_overrides=["env=text:kuhn_poker"])
    assert not out.exists()
