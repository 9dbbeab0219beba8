#!/usr/bin/env python3
"""Reference for Shardscope's tokenizer (engine/text/tokenizer.h): trains small BPE tokenizers of
the kinds the decoder families use, with Hugging Face `tokenizers` on a corpus written here, and
writes what `tokenizers` and transformers' AutoTokenizer make of every document.

Nothing is downloaded: the tokenizers are trained locally (seconds), on text of this file.

  tokenizer_reference.py --out DIR [--kinds gpt2,llama3,...]

writes DIR/corpus.jsonl ({"text": ...} per line) and, for each kind, DIR/KIND/ (tokenizer.json,
tokenizer_config.json, as save_pretrained writes them) and DIR/KIND/expected.json:
  {"ids": [[...] per document]          tokenizers' encode(doc).ids (add_special_tokens=True)
   "plain_ids": [[...]]                 encode(doc, add_special_tokens=False).ids
   "auto_ids": [[...]]                  AutoTokenizer(doc)["input_ids"] (tokenizer_config applied)
   "decoded": [...]                     decode(ids, skip_special_tokens=False)
   "decoded_skip": [...]                decode(ids, skip_special_tokens=True)
   "slices": [[ids, decoded], ...]      decodes of slices cut mid-character (lossy UTF-8 paths)
   "bos": id|null, "eos": id|null, "id_bound": int}
"""

import argparse
import json
import os
import random

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def corpus():
    """Documents with what tokenizers trip over: accents (composed and not), CJK, emoji (with ZWJ and
    skin tones), combining marks, code with tabs and long whitespace runs, numbers, odd spaces
    (NBSP, NEL, ideographic), CRLF, and special tokens written inside the text."""
    base = [
        "The quick brown fox jumps over the lazy dog. It's 3:45 pm; we'll see what they've done.",
        "Café, naïve, résumé, Ångström, façade — and the decomposed forms: Cafe\u0301, nai\u0308ve.",
        "日本語のテキストと中文文本，还有한국어 텍스트。東京は2024年に人口が1400万人でした。",
        "Emoji: 😀 👍🏽 👩‍👩‍👧‍👦 🇫🇷 ❤️ 🤖🚀✨ and a family 👨‍💻 at work.",
        "Combining marks: a\u0300\u0301\u0302 e\u0323\u0302 Z\u0351\u0352\u0353 and Hangul jamo \u1100\u1161\u11a8.",
        "def train(model, loader):\n\tfor step, batch in enumerate(loader):\n\t\tloss = model(batch)\n"
        "\t\tloss.backward()            # long run of spaces\n\n\n        return loss\n",
        "Numbers: 0 7 42 1234567890 3.14159 -2.5e-10 1,000,000 0x1F 2026-12-02 100%.",
        "Whitespace:   three, \t tab,\u00a0nbsp,\u3000ideographic, \u0085nel, trailing   ",
        "Windows lines\r\nwith CRLF\r\n\r\nand a blank one.\r\n",
        "Special tokens inside text: hello <|endoftext|> world, <s> and </s> here, <|im_start|>user<|im_end|>.",
        "Mixed: Ελληνικά, русский текст, עברית, العربية, हिन्दी, ไทย.",
        "URLs https://example.com/path?q=1&x=y and e-mail someone@example.org; C++ std::vector<int> v{1, 2};",
        "   leading spaces and a word",
        "a",
        "",
        "DON'T SHOUT, I'LL HEAR YOU'RE FINE.",
        "<s>starts with a special token",
        "<|endoftext|><|endoftext|>only<|im_end|>",
        "\n\n\n",
        " " * 300 + "after a long run" + "\t" * 40,
        "98765432109876543210",
        " starts with a space",
        "(tabs)\t\t|spaces|   |mixed| \t \t|end",
    ]
    rng = random.Random(7)
    words = " ".join(base).split()
    more = [" ".join(rng.choice(words) for _ in range(rng.randint(5, 40))) for _ in range(200)]
    return base + more


def special_tokens(kind):
    return {
        "gpt2": ["<|endoftext|>"],
        "llama3": ["<|begin_of_text|>", "<|end_of_text|>"] + [f"<|reserved_special_token_{i}|>" for i in range(4)],
        "qwen2": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        "llama2": ["<unk>", "<s>", "</s>"],
        "mistral": ["<unk>", "<s>", "</s>"],
    }[kind]


def byte_level(kind, docs):
    """GPT-2 (ByteLevel with its regex), Llama 3 and Qwen2 (a Split regex, then ByteLevel)."""
    tok = Tokenizer(models.BPE(ignore_merges=(kind == "llama3")))
    if kind == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    else:
        pattern = LLAMA3_PATTERN if kind == "llama3" else QWEN2_PATTERN
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    if kind == "qwen2":
        tok.normalizer = normalizers.NFC()
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=special_tokens(kind),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(docs, trainer)
    if kind == "llama3":
        bos = tok.token_to_id("<|begin_of_text|>")
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                          special_tokens=[("<|begin_of_text|>", bos)])])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def with_byte_tokens(tok):
    """Puts <0x00>..<0xFF> into the vocabulary after the special tokens, as Llama 2's has them, so
    byte fallback has its tokens (the trainer does not make them)."""
    data = json.loads(tok.to_str())
    vocab = data["model"]["vocab"]
    specials = len(data["added_tokens"])
    shifted = {t: (i if i < specials else i + 256) for t, i in vocab.items()}
    for b in range(256):
        shifted[f"<0x{b:02X}>"] = specials + b
    data["model"]["vocab"] = dict(sorted(shifted.items(), key=lambda kv: kv[1]))
    return Tokenizer.from_str(json.dumps(data))


def metaspace(kind, docs):
    """Llama 2 (Prepend+Replace normalizer, no pre-tokenizer) and Mistral v0.3 (a Metaspace
    pre-tokenizer, prepend_scheme first, no split): BPE with byte fallback and fused unknowns."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    # Trained on "▁"-separated words (so no merge crosses a word start); used whole, as Llama 2's.
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=500, special_tokens=special_tokens(kind), limit_alphabet=120,
                                  show_progress=False)
    tok.train_from_iterator(docs, trainer)
    tok = with_byte_tokens(tok)
    if kind == "llama2":
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
        tok.pre_tokenizer = None
        tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(" ", 1, 0)])
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
        tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace(replacement="▁", prepend_scheme="first", split=False)])
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B:1",
                                                       special_tokens=[("<s>", bos)])
    return tok


def tokenizer_config(kind):
    """What save_pretrained writes for each family's tokenizer (the keys that matter here)."""
    if kind == "gpt2":
        return {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"}
    if kind == "llama3":
        return {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"}
    if kind == "qwen2":
        return {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": None, "eos_token": "<|endoftext|>",
                "pad_token": "<|endoftext|>"}
    # Llama 2 / Mistral: the config states add_bos_token and add_eos_token (AutoTokenizer then builds
    # the template from them); "mistral" also adds EOS, to check that path.
    return {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
            "add_bos_token": True, "add_eos_token": kind == "mistral"}


def slices(tok, ids, rng):
    """Decodes of slices that start and end at random tokens (often mid-character)."""
    out = []
    if len(ids) < 3:
        return out
    for _ in range(3):
        a = rng.randrange(0, len(ids) - 1)
        b = rng.randrange(a + 1, len(ids) + 1)
        out.append([ids[a:b], tok.decode(ids[a:b], skip_special_tokens=False)])
    return out


def write_kind(out, kind, docs):
    from transformers import AutoTokenizer

    tok = byte_level(kind, docs) if kind in ("gpt2", "llama3", "qwen2") else metaspace(kind, docs)
    folder = os.path.join(out, kind)
    os.makedirs(folder, exist_ok=True)
    tok.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump(tokenizer_config(kind), f, indent=2)
    auto = AutoTokenizer.from_pretrained(folder)
    rng = random.Random(kind)
    expected = {"ids": [], "plain_ids": [], "auto_ids": [], "decoded": [], "decoded_skip": [], "slices": []}
    for doc in docs:
        ids = tok.encode(doc).ids
        expected["ids"].append(ids)
        expected["plain_ids"].append(tok.encode(doc, add_special_tokens=False).ids)
        expected["auto_ids"].append(auto(doc)["input_ids"])
        expected["decoded"].append(tok.decode(ids, skip_special_tokens=False))
        expected["decoded_skip"].append(tok.decode(ids, skip_special_tokens=True))
        expected["slices"] += slices(tok, ids, rng)
    expected["bos"] = auto.bos_token_id
    expected["eos"] = auto.eos_token_id
    expected["id_bound"] = max(tok.get_vocab(with_added_tokens=True).values()) + 1
    with open(os.path.join(folder, "expected.json"), "w") as f:
        json.dump(expected, f, ensure_ascii=False)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--kinds", default="gpt2,llama3,qwen2,llama2,mistral")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    docs = corpus()
    with open(os.path.join(args.out, "corpus.jsonl"), "w") as f:
        for doc in docs:
            f.write(json.dumps({"text": doc}, ensure_ascii=False) + "\n")
    for kind in args.kinds.split(","):
        write_kind(args.out, kind, docs)


if __name__ == "__main__":
    main()
