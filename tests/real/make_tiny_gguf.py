"""Write a tiny random-weight llama GGUF model that llama.cpp serves, with no model hub.

    python tests/real/make_tiny_gguf.py [--out PATH]     # prints the model's path last

Recipe (REFERENCE-llamacpp.md): llama architecture, 4 layers, n_embd 256, 4 heads, n_ff 512,
context 2048, F16 weights (~3.7 M parameters); a byte-level BPE tokenizer (`gpt2`: 256 byte
tokens, merges learnt from a short English text, `<|endoftext|>`, `<|im_start|>`, `<|im_end|>`)
and a ChatML chat template.

Random weights would emit EOS and control tokens at random, so replies would end early and token
counts would not be deterministic. The constant-dimension trick prevents that: residual dimension 0
holds the same value in every embedding row and no layer writes to it (its rows of attn_output
and ffn_down are zero), so after the final RMS norm it is always positive; the output rows of the
tokens we never want (control/EOS tokens, non-printable and non-ASCII bytes) have a large negative
weight on it and none elsewhere. Every request then runs to max_tokens and every token is printable
ASCII (one streamed chunk per token).

The file is cached: an existing model at the path is kept (delete it to rebuild). Seeded, so the
same version of this script writes the same model.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path

import numpy as np

try:
    import gguf
except ImportError:  # the optional `real` extra; its absence is reported by write(), not at import
    gguf = None  # tests/real/conftest.py imports this module in every `pytest` run, gguf or not

MISSING_GGUF = "make_tiny_gguf: the `gguf` package is missing: pip install -e '.[real]'"

VERSION = 1  # bump when the recipe changes: the cache file name carries it
N_LAYER, N_EMBD, N_HEAD, N_FF, N_CTX = 4, 256, 4, 512, 2048
N_MERGES = 600
SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] "
    "+ '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
CONST_DIM, CONST_VALUE, SUPPRESS = 0, 1.0, -64.0

# Plain English to learn merges from (any text works; this one gives ~1.6 tokens per word).
CORPUS = """
The service answers questions about the weather, the news and the time of day. When many people
ask at once, the server puts their requests in a queue and works through them in batches. Each
answer is written one token at a time, and the first token takes longer than the rest because the
whole question has to be read first. A good load test measures how long people wait for that first
token, how fast the rest arrives, and how many answers per second the service can give before it
slows down. It should also say which part of the system reached its limit: the processor, the
memory that holds the conversation, the scheduler that decides who goes next, or the network in
front of it. Then the people who run the service know what to change, and how much more traffic
they can take before they need another machine. This is the work of an engineer who cares about
numbers that are true, reports that are clear, and advice that can be acted upon without guessing.
"""


def byte_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table (what `gpt2` vocabularies store)."""
    keep = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars, extra = keep[:], 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(keep, map(chr, chars)))


def learn_merges(text: str, n: int, table: dict[int, str]) -> list[tuple[str, str]]:
    """Plain BPE over GPT-2-style words (a leading space belongs to the word)."""
    words = Counter(tuple(table[b] for b in (" " + w).encode()) for w in text.split())
    merges: list[tuple[str, str]] = []
    for _ in range(n):
        pairs: Counter = Counter()
        for word, count in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += count
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))[0]  # ties broken deterministically
        merges.append(best)
        merged = {}
        for word, count in words.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + count
        words = merged
    return merges


def vocabulary() -> tuple[list[str], list[int], list[str], np.ndarray]:
    """tokens, token types, merges ("a b"), and which tokens may be generated."""
    table = byte_to_unicode()
    decode = {c: b for b, c in table.items()}
    tokens = [table[b] for b in range(256)]
    merges = learn_merges(CORPUS, N_MERGES, table)
    for a, b in merges:
        if a + b not in tokens:
            tokens.append(a + b)
    types = [int(gguf.TokenType.NORMAL)] * len(tokens)
    tokens += list(SPECIALS)
    types += [int(gguf.TokenType.CONTROL)] * len(SPECIALS)
    allowed = np.zeros(len(tokens), dtype=bool)
    for i, tok in enumerate(tokens[: -len(SPECIALS)]):
        raw = bytes(decode[c] for c in tok)
        allowed[i] = all(32 <= b < 127 for b in raw)  # printable ASCII: valid UTF-8, one chunk per token
    return tokens, types, [f"{a} {b}" for a, b in merges], allowed


def weights(n_vocab: int, allowed: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    def rand(*shape: int, scale: float = 0.02) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float16)

    embd = rand(n_vocab, N_EMBD)
    embd[:, CONST_DIM] = CONST_VALUE
    out = rand(n_vocab, N_EMBD, scale=0.5)
    out[:, CONST_DIM] = 0.0
    out[~allowed] = 0.0
    out[~allowed, CONST_DIM] = SUPPRESS
    ones = np.ones(N_EMBD, dtype=np.float32)
    t: dict[str, np.ndarray] = {"token_embd.weight": embd, "output_norm.weight": ones, "output.weight": out}
    for i in range(N_LAYER):
        attn_out, down = rand(N_EMBD, N_EMBD), rand(N_EMBD, N_FF)
        attn_out[CONST_DIM] = 0.0  # no layer writes to the constant dimension
        down[CONST_DIM] = 0.0
        t |= {
            f"blk.{i}.attn_norm.weight": ones,
            f"blk.{i}.ffn_norm.weight": ones,
            f"blk.{i}.attn_q.weight": rand(N_EMBD, N_EMBD),
            f"blk.{i}.attn_k.weight": rand(N_EMBD, N_EMBD),
            f"blk.{i}.attn_v.weight": rand(N_EMBD, N_EMBD),
            f"blk.{i}.attn_output.weight": attn_out,
            f"blk.{i}.ffn_gate.weight": rand(N_FF, N_EMBD),
            f"blk.{i}.ffn_up.weight": rand(N_FF, N_EMBD),
            f"blk.{i}.ffn_down.weight": down,
        }
    return t


def write(path: Path, seed: int = 0) -> Path:
    if gguf is None:
        raise RuntimeError(MISSING_GGUF)
    tokens, types, merges, allowed = vocabulary()
    tmp = path.with_suffix(".tmp")
    w = gguf.GGUFWriter(str(tmp), "llama")
    w.add_name("loadline-tiny-random")
    w.add_context_length(N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD)
    w.add_rope_dimension_count(N_EMBD // N_HEAD)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(tokens.index("<|endoftext|>"))
    w.add_eos_token_id(tokens.index("<|im_end|>"))
    w.add_eot_token_id(tokens.index("<|im_end|>"))
    w.add_add_bos_token(False)
    w.add_chat_template(CHATML)
    for name, array in weights(len(tokens), allowed, np.random.default_rng(seed)).items():
        w.add_tensor(name, array)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, path)  # atomic: a half-written file never looks cached
    return path


def default_path() -> Path:
    cache = Path(os.environ.get("LOADLINE_CACHE", Path.home() / ".cache" / "loadline"))
    return cache / "models" / f"tiny-llama-chatml-v{VERSION}.gguf"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=default_path())
    parser.add_argument("--force", action="store_true", help="rewrite even if the file exists")
    args = parser.parse_args(argv)
    if args.force or not args.out.exists():
        if gguf is None:
            print(MISSING_GGUF, file=sys.stderr)
            return 2
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write(args.out)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
