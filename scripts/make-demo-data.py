#!/usr/bin/env python3
"""Makes the Llama demo's data from the project's own text (resources/data/demo.txt, the GPL):

  resources/data/demo.jsonl            one {"text": paragraph} per line (blank-line separated)
  resources/tokenizers/demo/           a Llama 3-style byte-level BPE tokenizer (2048 ids) trained
                                       on it with Hugging Face `tokenizers`: tokenizer.json and
                                       tokenizer_config.json, as save_pretrained writes them

Run from the project venv (`.venv/bin/python scripts/make-demo-data.py`); the outputs are checked
in, so neither the demo nor the tests run this. Training is deterministic for a given text.
"""

import json
import os

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>"]


def paragraphs():
    with open(os.path.join(ROOT, "resources/data/demo.txt"), encoding="utf-8") as f:
        text = f.read()
    return [" ".join(line.strip() for line in p.splitlines()) for p in text.split("\n\n") if p.strip()]


def main():
    docs = paragraphs()
    with open(os.path.join(ROOT, "resources/data/demo.jsonl"), "w", encoding="utf-8") as f:
        for doc in docs:
            f.write(json.dumps({"text": doc}, ensure_ascii=False) + "\n")

    tokenizer = Tokenizer(models.BPE(ignore_merges=True))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2048, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(docs, trainer)
    bos = tokenizer.token_to_id(SPECIALS[0])
    tokenizer.post_processor = processors.TemplateProcessing(single=f"{SPECIALS[0]} $A", pair=f"{SPECIALS[0]} $A $B",
                                                             special_tokens=[(SPECIALS[0], bos)])
    out = os.path.join(ROOT, "resources/tokenizers/demo")
    os.makedirs(out, exist_ok=True)
    tokenizer.save(os.path.join(out, "tokenizer.json"))
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"bos_token": SPECIALS[0], "eos_token": SPECIALS[1], "model_max_length": 1024,
                   "tokenizer_class": "PreTrainedTokenizerFast"}, f, indent=2)
        f.write("\n")
    print(f"{len(docs)} documents, {tokenizer.get_vocab_size()} ids -> resources/data/demo.jsonl, resources/tokenizers/demo/")


if __name__ == "__main__":
    main()
