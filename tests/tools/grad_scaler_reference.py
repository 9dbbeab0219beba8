#!/usr/bin/env python3
"""torch.amp.GradScaler on a scripted gradient sequence: the reference for our GradScaler.

For each step i the loss is sum(w * c_i) for a parameter w, so the gradient is c_i (times the
scale); c_i may be inf or nan to force an overflow. Prints, per step, the scale the step used,
whether the optimizer step was skipped (the scale backed off), the scale after update() and w after the step, as JSON.

    python grad_scaler_reference.py '{"init_scale": 1024, "growth_interval": 3, "coefficients": [1, "inf", ...]}'
"""
import json
import sys

import torch


def main():
    spec = json.loads(sys.argv[1])
    w = torch.nn.Parameter(torch.ones(4))
    opt = torch.optim.SGD([w], lr=spec.get("lr", 0.1))
    scaler = torch.amp.GradScaler("cpu", init_scale=spec["init_scale"], growth_factor=spec.get("growth_factor", 2.0),
                                  backoff_factor=spec.get("backoff_factor", 0.5),
                                  growth_interval=spec["growth_interval"])
    out = []
    for c in spec["coefficients"]:
        coefficient = float(c)
        opt.zero_grad(set_to_none=True)
        loss = (w * torch.full((4,), coefficient)).sum()
        scale_used = scaler.get_scale()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        # GradScaler skips exactly the steps after which it backs off.
        skipped = scaler.get_scale() < scale_used
        out.append({"scale": scale_used, "skipped": skipped, "scale_after": scaler.get_scale(),
                    "w": w.detach()[0].item()})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
