#!/usr/bin/env python3
"""Reference for Shardscope's token datasets (engine/data/data.h, makeTokenBlocks): the batches
each rank sees for a JSON Lines corpus, built the way a Hugging Face causal-LM script builds them.

  data_reference.py --tokenizer DIR --corpus FILE.jsonl --block-size T --ranks N --batch B
                    --seed S --eval-fraction F [--even-batches 0|1] [--epochs E] --out OUT.json

What it does, step for step as transformers' run_clm.py and Accelerate do it:
  1. every document is encoded with `tokenizers` (tokenizer.json, add_special_tokens=True: Llama's
     BOS) and followed by the EOS of tokenizer_config.json unless it already ends with it;
  2. the documents are joined and cut into blocks of T ids (run_clm's group_texts: the remainder is
     dropped; labels = input_ids, which the model shifts: the label of position t is id t + 1, and
     the last position has none, -100);
  3. the last ceil-ish eval_fraction of the blocks is the eval split (at least one when F > 0);
  4. torch.utils.data.DistributedSampler(shuffle=True, seed=S, drop_last=not even_batches) with
     set_epoch(e), and a DataLoader(batch_size=B, drop_last=True) per rank.

Writes {"tokens": n, "blocks": n_blocks, "eval_blocks": m,
        "ranks": [[{"epoch": e, "inputs": [[ids] * B], "labels": [[ids] * B]} per batch] per rank],
        "eval_first": [ids of the first eval block] or null}.
"""

import argparse
import json

import torch
from tokenizers import Tokenizer
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def token_stream(tokenizer_dir, corpus, field):
    tokenizer = Tokenizer.from_file(f"{tokenizer_dir}/tokenizer.json")
    with open(f"{tokenizer_dir}/tokenizer_config.json", encoding="utf-8") as f:
        eos_token = json.load(f)["eos_token"]
    eos = tokenizer.token_to_id(eos_token if isinstance(eos_token, str) else eos_token["content"])
    ids = []
    with open(corpus, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            doc = tokenizer.encode(json.loads(line)[field], add_special_tokens=True).ids
            if not doc or doc[-1] != eos:
                doc.append(eos)
            ids.extend(doc)
    return ids


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--field", default="text")
    parser.add_argument("--block-size", type=int, required=True)
    parser.add_argument("--ranks", type=int, required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--eval-fraction", type=float, required=True)
    parser.add_argument("--even-batches", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--out", required=True)
    a = parser.parse_args()

    ids = token_stream(a.tokenizer, a.corpus, a.field)
    T = a.block_size
    n = len(ids) // T
    blocks = torch.tensor(ids[: n * T], dtype=torch.long).view(n, T)
    labels = torch.cat([blocks[:, 1:], torch.full((n, 1), -100, dtype=torch.long)], dim=1)
    eval_count = int(n * a.eval_fraction)
    if a.eval_fraction > 0 and eval_count == 0 and n > 1:
        eval_count = 1
    train = TensorDataset(blocks[: n - eval_count], labels[: n - eval_count])

    ranks = []
    for rank in range(a.ranks):
        sampler = DistributedSampler(train, num_replicas=a.ranks, rank=rank, shuffle=True, seed=a.seed,
                                     drop_last=not a.even_batches)
        loader = DataLoader(train, batch_size=a.batch, sampler=sampler, drop_last=True)
        batches = []
        for epoch in range(a.epochs):
            sampler.set_epoch(epoch)
            for x, y in loader:
                batches.append({"epoch": epoch, "inputs": x.tolist(), "labels": y.tolist()})
        ranks.append(batches)
    out = {"tokens": len(ids), "blocks": n, "eval_blocks": eval_count, "ranks": ranks,
           "eval_first": blocks[n - eval_count].tolist() if eval_count else None}
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
