#!/usr/bin/env python3
"""Checks a Shardscope save_model export against the Hugging Face ecosystem.

Loads the exported folder (config.json + model.safetensors, or shards + model.safetensors.index.json)
with the `safetensors` package into a plain-PyTorch GPT-2 written here from the paper's equations
(GPT-2 names: Conv1D weights are [in, out]) and, where `transformers` is installed, into
GPT2LMHeadModel.from_pretrained. Compares both models' logits with the logits our engine computed
(shardscope-worker logits, a safetensors file holding "input_ids" and "logits"). Prints a JSON
report; exits 1 if a difference exceeds --tolerance.

    python hf_export_check.py --export DIR --engine-logits logits.safetensors
"""
import argparse
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file


def load_export(folder):
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        files = sorted(set(json.load(open(index))["weight_map"].values()))
        state = {}
        for name in files:
            state.update(load_file(os.path.join(folder, name)))
        return state, files
    return load_file(os.path.join(folder, "model.safetensors")), ["model.safetensors"]


def plain_gpt2_logits(state, config, ids):
    """GPT-2's forward from its state dict alone (no transformers)."""
    C, H = config["n_embd"], config["n_head"]
    w = {k: v.float() for k, v in state.items()}
    x = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][: ids.shape[1]]
    T = ids.shape[1]
    for i in range(config["n_layer"]):
        p = f"transformer.h.{i}."
        h = F.layer_norm(x, (C,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], config["layer_norm_epsilon"])
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = (t.view(1, T, H, C // H).transpose(1, 2) for t in qkv.split(C, 2))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // H)
        att = att.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(1, T, C)
        x = x + y @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        h = F.layer_norm(x, (C,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], config["layer_norm_epsilon"])
        h = F.gelu(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"], approximate="tanh")
        x = x + h @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (C,), w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], config["layer_norm_epsilon"])
    return x @ w["transformer.wte.weight"].t()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--export", required=True)
    parser.add_argument("--engine-logits", required=True)
    parser.add_argument("--tolerance", type=float, default=1e-5)
    args = parser.parse_args()

    engine = load_file(args.engine_logits)
    ids, ours = engine["input_ids"].long(), engine["logits"].float()
    config = json.load(open(os.path.join(args.export, "config.json")))
    state, files = load_export(args.export)
    report = {"files": files, "tensors": len(state)}
    with torch.no_grad():
        plain = plain_gpt2_logits(state, config, ids)
    report["plain_max_abs_diff"] = (plain - ours).abs().max().item()
    try:
        from transformers import GPT2LMHeadModel
    except ImportError:
        report["transformers"] = "not installed"
    else:
        model = GPT2LMHeadModel.from_pretrained(args.export, attn_implementation="eager").eval()
        with torch.no_grad():
            hf = model(ids).logits.float()
        report["transformers"] = "GPT2LMHeadModel"
        report["transformers_max_abs_diff"] = (hf - ours).abs().max().item()
    scale = max(1.0, ours.abs().max().item())
    worst = max(v for k, v in report.items() if k.endswith("max_abs_diff")) / scale
    report["relative"] = worst
    print(json.dumps(report))
    sys.exit(0 if worst <= args.tolerance else 1)


if __name__ == "__main__":
    main()
