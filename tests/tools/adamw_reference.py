#!/usr/bin/env python3
"""torch.optim.AdamW on scripted gradients: the reference for the engine's AdamW (Note [fused AdamW]).

Reads parameters `param.<name>` and, per step i, gradients `grad.<i>.<name>` from a safetensors
file; runs torch.optim.AdamW over two groups (names containing "bias" get weight_decay 0, as the
engine's optimizer.no_weight_decay does), with the learning rate of each step from the spec, and
writes the parameters after the last step as `param.<name>`.

    python adamw_reference.py IN.safetensors OUT.safetensors \
        '{"lr": [0.01, 0.01, 0.005], "betas": [0.9, 0.99], "eps": 1e-8, "weight_decay": 0.1, "fused": true}'
"""
import json
import sys

import torch
from safetensors.torch import load_file, save_file


def main():
    tensors = load_file(sys.argv[1])
    spec = json.loads(sys.argv[3])
    names = sorted(k[len("param."):] for k in tensors if k.startswith("param."))
    params = {n: torch.nn.Parameter(tensors["param." + n].clone()) for n in names}
    groups = [{"params": [params[n] for n in names if "bias" not in n]},
              {"params": [params[n] for n in names if "bias" in n], "weight_decay": 0.0}]
    opt = torch.optim.AdamW([g for g in groups if g["params"]], lr=spec["lr"][0], betas=tuple(spec["betas"]),
                            eps=spec["eps"], weight_decay=spec["weight_decay"], fused=spec["fused"])
    for i, lr in enumerate(spec["lr"]):
        for group in opt.param_groups:
            group["lr"] = lr
        for n in names:
            params[n].grad = tensors[f"grad.{i}.{n}"].clone()
        opt.step()
    save_file({"param." + n: params[n].detach().contiguous() for n in names}, sys.argv[2])


if __name__ == "__main__":
    main()
