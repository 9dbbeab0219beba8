#!/usr/bin/env python3
"""transformers + PyTorch training throughput on one GPU, the reference beside our engine in
scripts/gpu-check.sh: the recipe's Llama-family model built from its config.json keys
(AutoModelForCausalLM.from_config, random weights), trained as the engine trains it under
mixed_precision bf16 (fp32 parameters, torch.autocast bf16, AdamW, the recipe's batch and
sequence, byte-level windows of the recipe's text). Prints JSON: tokens/s over the steps after
warm-up, parameters, and MFU against --peak-tflops (the flops of 6 N + 12 L H T per token).
--mixed-precision fp8 also runs the linear layers Accelerate's torchao filter keeps through
fp8_reference.py's tensorwise fp8 matmuls (torch._scaled_mm), as the engine does; bf16-pure trains
bf16 parameters without autocast.

    python hf_train_bench.py --recipe llama1b.yaml --steps 30 --peak-tflops 989 [--mixed-precision fp8]
"""
import argparse
import json
import os
import sys
import time
import types

import torch
import torch.nn.functional as F
import yaml
from transformers import AutoConfig, AutoModelForCausalLM

ENGINE_KEYS = {"type", "block_size", "pretrained", "frozen", "load_dtype", "lora"}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--recipe", required=True)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="the GPU's dense bf16 peak (H100/H200 SXM: 989)")
    parser.add_argument("--text", default=os.path.join(os.path.dirname(__file__), "../../resources/data/demo.txt"))
    parser.add_argument("--mixed-precision", choices=["bf16", "bf16-pure", "fp8"], default="bf16")
    args = parser.parse_args()
    recipe = yaml.safe_load(open(args.recipe))
    m, t = recipe["model"], recipe.get("training", {})
    keys = {k: v for k, v in m.items() if k not in ENGINE_KEYS}
    config = AutoConfig.for_model(m["type"], **keys)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    pure = args.mixed_precision == "bf16-pure"
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16 if pure else torch.float32).cuda().train()
    if args.mixed_precision == "fp8":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import fp8_reference
        fp8_reference.convert_to_float8(model, types.SimpleNamespace(recipe="tensorwise"))
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.get("optimizer", {}).get("lr", 3e-4))
    T, B = m.get("block_size", 64), t.get("per_device_batch_size", 16)
    raw = open(recipe.get("data", {}).get("path") or args.text, "rb").read()
    data = torch.tensor(list(raw), dtype=torch.long)
    n = (len(data) - 1) // T
    windows = data[torch.arange(n).unsqueeze(1) * T + torch.arange(T + 1).unsqueeze(0)]
    times = []
    for step in range(args.steps):
        batch = windows[torch.randint(0, n, (B,))].cuda()
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=not pure):
            logits = model(input_ids=batch[:, :T]).logits
        loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    measured = times[args.warmup:]
    tokens_per_s = B * T * len(measured) / sum(measured)
    flops_per_token = 6 * params + 12 * config.num_hidden_layers * config.hidden_size * T
    print(json.dumps({"tokens_per_s": tokens_per_s, "parameters": params, "loss": loss.item(),
                      "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30,
                      "mfu": tokens_per_s * flops_per_token / (args.peak_tflops * 1e12),
                      "flops_per_token": flops_per_token}))


if __name__ == "__main__":
    main()
