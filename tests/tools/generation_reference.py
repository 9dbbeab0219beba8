#!/usr/bin/env python3
"""The reference for text generation (tests/app/tst_generation): transformers on a run's export.

Reads what `shardscope runs generate --json` printed for PROMPT (prompt_ids, ids, text) and checks
it against the export loaded with AutoModelForCausalLM and AutoTokenizer from the project venv:

  - the prompt's ids are AutoTokenizer's (special tokens added as it adds them);
  - greedy: each generated token is transformers' most likely one there (its logit within 1e-4 of
    the maximum: two nearly equal logits may order differently in another summation), and
    `generate(do_sample=False)` gives the same ids wherever no such near tie came first;
  - the text is tokenizer.decode(ids, skip_special_tokens=True).

Prints one JSON object: {"ok": bool, "why": str, "hf_ids": [...]}.

    python generation_reference.py --export DIR --prompt TEXT --engine engine.json [--greedy]
"""
import argparse
import json

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--export", required=True)
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--engine", required=True, help="the JSON shardscope runs generate --json printed")
    parser.add_argument("--greedy", action="store_true", help="the engine generated greedily (temperature 0)")
    args = parser.parse_args()
    with open(args.engine) as f:
        engine = json.load(f)
    tokenizer = AutoTokenizer.from_pretrained(args.export)
    model = AutoModelForCausalLM.from_pretrained(args.export, dtype=torch.float32).eval()
    why = []
    prompt_ids = tokenizer(args.prompt)["input_ids"]
    if prompt_ids != engine["prompt_ids"]:
        why.append(f"prompt ids {engine['prompt_ids']} are not AutoTokenizer's {prompt_ids}")
    ids = engine["ids"]
    hf_ids = []
    if args.greedy:
        with torch.no_grad():
            logits = model(torch.tensor([prompt_ids + ids])).logits[0]
            near_tie = []  # per generated token: were the two most likely within the tolerance?
            for i, token in enumerate(ids):
                row = logits[len(prompt_ids) - 1 + i]
                tolerance = 1e-4 * max(1.0, row.abs().max().item())
                if row.max() - row[token] > tolerance:
                    why.append(f"token {i} ({token}) is not transformers' most likely ({row.argmax().item()})")
                    break
                top2 = row.topk(2).values
                near_tie.append(bool(top2[0] - top2[1] <= tolerance))
            out = model.generate(torch.tensor([prompt_ids]), max_new_tokens=len(ids), do_sample=False,
                                 eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.eos_token_id)
            hf_ids = out[0, len(prompt_ids):].tolist()
            differ = next((i for i, (a, b) in enumerate(zip(ids, hf_ids)) if a != b), None)
            if differ is None and len(hf_ids) != len(ids):
                differ = min(len(ids), len(hf_ids))
            if differ is not None and not (differ < len(near_tie) and near_tie[differ]):
                why.append(f"transformers' generate gives {hf_ids}, the engine {ids}: they part at token {differ} "
                           "without a near tie there")
    text = tokenizer.decode(ids, skip_special_tokens=True)
    if text != engine["text"]:
        why.append(f"text {engine['text']!r} is not tokenizer.decode's {text!r}")
    print(json.dumps({"ok": not why, "why": "; ".join(why), "hf_ids": hf_ids}))


if __name__ == "__main__":
    main()
