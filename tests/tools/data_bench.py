#!/usr/bin/env python3
"""The reference side of scripts/bench-data.sh: a corpus, a tokenizer, and Hugging Face
`tokenizers`' own batch encoding timed on it, from this project's venv (nothing downloaded).

  data_bench.py make --out DIR [--mb 40] [--vocab 32000]
      DIR/corpus.jsonl: about MB megabytes of varied documents (sentences drawn from the project's
      text and the tokenizer reference's corpus: accents, CJK, emoji, code, numbers; one word in
      five made up), and
      DIR/tokenizer/: a Llama 3-style byte-level BPE of VOCAB ids trained on its first 5 MB.
  data_bench.py encode --dir DIR --out ids.npy
      reads the JSONL, encodes every document with Tokenizer.encode_batch (all cores: tokenizers
      runs on RAYON_NUM_THREADS, default every core), adds EOS as `data prepare` does, and writes
      the ids; prints a JSON line {"seconds_total", "seconds_encode", "tokens", "documents", "threads"}.
"""

import argparse
import json
import os
import random
import sys
import time

import numpy as np
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tokenizer_reference  # noqa: E402  (the corpus of odd text)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def make(out, megabytes, vocab):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(ROOT, "resources/data/demo.txt"), encoding="utf-8") as f:
        sentences = [s.strip() for s in f.read().replace("\n", " ").split(". ") if s.strip()]
    sentences += tokenizer_reference.corpus()
    rng = random.Random(1)
    # Made-up words as well (names, identifiers, typos), so that the BPE does real merging work and
    # word caches do not answer everything: about one word in five.
    syllables = ["ka", "lo", "mi", "ste", "ver", "un", "qu", "zha", "ion", "ré", "ß", "th", "ae", "ox", "ing"]

    def made_up():
        return "".join(rng.choice(syllables) for _ in range(rng.randint(1, 5)))

    def vary(sentence):
        return " ".join(made_up() if rng.random() < 0.2 else w for w in sentence.split(" "))

    size, target = 0, megabytes * 1_000_000
    path = os.path.join(out, "corpus.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        while size < target:
            doc = " ".join(vary(rng.choice(sentences)) + rng.choice([".", "!", "?", f" {rng.randint(0, 99999)}."])
                           for _ in range(rng.randint(1, 40)))
            line = json.dumps({"text": doc}, ensure_ascii=False) + "\n"
            f.write(line)
            size += len(line.encode("utf-8"))

    def sample():
        with open(path, encoding="utf-8") as f:
            read = 0
            for line in f:
                read += len(line)
                if read > 5_000_000:
                    return
                yield json.loads(line)["text"]

    tokenizer = Tokenizer(models.BPE(ignore_merges=True))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(tokenizer_reference.LLAMA3_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    specials = ["<|begin_of_text|>", "<|end_of_text|>"]
    tokenizer.train_from_iterator(sample(), trainers.BpeTrainer(
        vocab_size=vocab, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    bos = tokenizer.token_to_id(specials[0])
    tokenizer.post_processor = processors.TemplateProcessing(single=f"{specials[0]} $A", special_tokens=[(specials[0], bos)])
    os.makedirs(os.path.join(out, "tokenizer"), exist_ok=True)
    tokenizer.save(os.path.join(out, "tokenizer", "tokenizer.json"))
    with open(os.path.join(out, "tokenizer", "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"bos_token": specials[0], "eos_token": specials[1]}, f)


def encode(directory, out):
    started = time.perf_counter()
    tokenizer = Tokenizer.from_file(os.path.join(directory, "tokenizer", "tokenizer.json"))
    eos = tokenizer.token_to_id("<|end_of_text|>")
    with open(os.path.join(directory, "corpus.jsonl"), encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    encode_start = time.perf_counter()
    encodings = tokenizer.encode_batch(texts, add_special_tokens=True)
    encode_seconds = time.perf_counter() - encode_start
    ids = []
    for e in encodings:
        ids.extend(e.ids)
        if not e.ids or e.ids[-1] != eos:
            ids.append(eos)
    np.asarray(ids, dtype=np.uint16 if tokenizer.get_vocab_size() <= 65536 else np.uint32).tofile(out)
    print(json.dumps({"seconds_total": time.perf_counter() - started, "seconds_encode": encode_seconds,
                      "tokens": len(ids), "documents": len(texts),
                      "threads": int(os.environ.get("RAYON_NUM_THREADS", os.cpu_count()))}))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("--out", required=True)
    m.add_argument("--mb", type=int, default=40)
    m.add_argument("--vocab", type=int, default=32000)
    e = sub.add_parser("encode")
    e.add_argument("--dir", required=True)
    e.add_argument("--out", required=True)
    a = parser.parse_args()
    if a.command == "make":
        make(a.out, a.mb, a.vocab)
    else:
        encode(a.dir, a.out)


if __name__ == "__main__":
    main()
