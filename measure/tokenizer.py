"""An offline WordLevel tokenizer for a config-only model dir (for `vllm bench throughput`).

`vllm bench throughput` needs a tokenizer (its random dataset decodes and
re-encodes token ids).  This writes one word per id, exactly the model's
vocabulary size, a whitespace pre-tokenizer and no special tokens, so ids
round-trip exactly; saved as tokenizer.json beside a copy of config.json.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from fleetfacts.errors import InputError


def word(i: int) -> str:
    """The word for token id i: letters only, so whitespace splitting keeps it whole."""
    letters = []
    n = i
    while True:
        n, r = divmod(n, 26)
        letters.append(chr(ord("a") + r))
        if n == 0:
            break
    return "t" + "".join(letters)


def write_wordlevel_tokenizer(model_dir: Path, out_dir: Path) -> Path:
    """Write out_dir/tokenizer.json (+ config.json, tokenizer_config.json); returns the tokenizer path."""
    try:
        from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: PLC0415
    except ImportError:
        raise InputError("the tokenizer command needs the `tokenizers` package: pip install tokenizers") from None
    config_path = model_dir / "config.json"
    if not config_path.is_file():
        raise InputError(f"{config_path}: not found (the model dir needs a config.json with vocab_size)")
    vocab_size = int(json.loads(config_path.read_text(encoding="utf-8")).get("vocab_size") or 0)
    if vocab_size < 2:
        raise InputError(f"{config_path}: vocab_size missing or < 2")
    vocab = {word(i): i for i in range(vocab_size)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=word(0)))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    out_dir.mkdir(parents=True, exist_ok=True)
    if config_path.resolve() != (out_dir / "config.json").resolve():
        shutil.copyfile(config_path, out_dir / "config.json")
    path = out_dir / "tokenizer.json"
    tok.save(str(path))
    (out_dir / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 1_000_000,
        "clean_up_tokenization_spaces": False}, indent=2) + "\n", encoding="utf-8")
    return path
