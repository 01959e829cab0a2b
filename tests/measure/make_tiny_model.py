"""Build a tiny random Llama + BPE tokenizer for `transformers serve` on CPU, offline (~8 s).

Run with the test-server venv: `/tmp/srv/bin/python tests/measure/make_tiny_model.py OUT_DIR`.
GenerationConfig has no EOS so the model always produces max_tokens tokens.
"""

from __future__ import annotations

import sys
from pathlib import Path

SENTENCES = 400
VOCAB = 512


def main(out: Path) -> None:
    import random

    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    rng = random.Random(0)
    words = ["alpha", "beta", "gamma", "delta", "model", "token", "server", "batch", "queue", "cache", "fleet",
             "plan", "route", "price", "engine", "latency"]
    corpus = [" ".join(rng.choice(words) for _ in range(12)) for _ in range(SENTENCES)]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    alphabet = [chr(c) for c in range(32, 127)]
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<unk>", "<s>", "</s>"],
                                                        initial_alphabet=alphabet))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   pad_token="</s>")
    fast.chat_template = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
    out.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(out)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(fast), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=2048,
                      bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
                      pad_token_id=fast.pad_token_id)
    model = LlamaForCausalLM(cfg)
    model.generation_config = GenerationConfig(do_sample=False, eos_token_id=None, pad_token_id=fast.pad_token_id)
    model.save_pretrained(out)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
