#!/usr/bin/env python3
"""PyTorch's own DistributedDataParallel on a Shardscope recipe: the reference our engine is held to.

Runs the recipe's model, data, optimizer and schedule in Python on the same torch wheel, with
torch.nn.parallel.DistributedDataParallel over Gloo on N CPU processes, starting from the initial
weights our engine wrote (--initial, safetensors) and drawing the same data in the same order
(torch.Generator seeded as our engine seeds it; torch.utils.data.DistributedSampler). Writes the
per-step global loss (mean over ranks) and gradient norm (before clipping) as JSON, and the tokens/s.

    python ddp_reference.py --recipe R.yaml --initial init.safetensors --ranks 2 --out losses.json

--mixed-precision bf16 runs forward and loss under torch.autocast (bf16); --mixed-precision fp8
does the same with the linear layers Accelerate's torchao filter keeps (not the first or last, both
dimensions divisible by 16) through fp8_reference.py's fp8 matmuls, as torchao's Float8Linear
calls them (input cast to the autocast dtype, bias added in the output's dtype), with --fp8 tensorwise
or delayed scaling (--fp8-history, --fp8-algo, --fp8-margin, --fp8-interval).
"""

import argparse
import json
import math
import os
import socket
import sys
import time

import types

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
import yaml
from safetensors.torch import load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fp8_reference  # noqa: E402  (the fp8 recipes, op for op)

RECIPE_DEFAULTS = {
    "name": "recipe", "seed": 1234,
    "model": {"type": "gpt", "vocab_size": 256, "n_layer": 2, "n_embd": 64, "n_head": 4, "block_size": 64,
              "input_dim": 32, "hidden_dim": 64, "depth": 2, "output_dim": 1},
    "data": {"type": "text", "path": "", "num_samples": 4096, "noise": 0.01, "shuffle": True, "drop_last": True,
             "even_batches": True, "eval_fraction": 0.1},
    "optimizer": {"type": "adamw", "lr": 3e-3, "weight_decay": 0.0, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
                  "momentum": 0.0},
    "schedule": {"type": "constant", "warmup_steps": 0},
    "ddp": {"bucket_cap_mb": 25.0, "first_bucket_cap_mb": 1.0, "overlap": True},
    "training": {"per_device_batch_size": 16, "gradient_accumulation_steps": 1, "max_steps": 100,
                 "max_grad_norm": 0.0},
}


def load_recipe(path):
    with open(path) as f:
        user = yaml.safe_load(f) or {}
    recipe = {k: (dict(v) if isinstance(v, dict) else v) for k, v in RECIPE_DEFAULTS.items()}
    for key, value in user.items():
        if isinstance(value, dict):
            recipe.setdefault(key, {}).update(value)
        else:
            recipe[key] = value
    # As the engine's recipe reader: a pretrained folder without a type is "auto".
    if "pretrained" in user.get("model", {}) and "type" not in user["model"]:
        recipe["model"]["type"] = "auto"
    return recipe


ENGINE_MODEL_KEYS = {"type", "block_size", "pretrained", "frozen", "load_dtype", "input_dim", "hidden_dim", "depth",
                     "output_dim", "n_layer", "n_embd", "n_head", "vocab_size", "dropout", "lora"}


class HfCausalLM(nn.Module):
    """A transformers *ForCausalLM (Llama, Mistral, Qwen2): from model.pretrained with
    from_pretrained, or from the recipe's config.json keys with from_config."""

    def __init__(self, m, user_model):
        super().__init__()
        from transformers import AutoConfig, AutoModelForCausalLM
        if m.get("pretrained"):
            self.lm = AutoModelForCausalLM.from_pretrained(m["pretrained"], dtype=torch.float32)
        else:
            keys = {k: v for k, v in user_model.items() if k not in ENGINE_MODEL_KEYS - {"vocab_size"}}
            self.lm = AutoModelForCausalLM.from_config(AutoConfig.for_model(m["type"], **keys), dtype=torch.float32)
        self.lm.config._attn_implementation = "sdpa"

    def forward(self, idx):
        return self.lm(input_ids=idx).logits

    def loss(self, out, target):
        return F.cross_entropy(out.reshape(-1, out.shape[-1]).float(), target.reshape(-1))


def build_model(recipe, user_model):
    m = recipe["model"]
    if m["type"] == "mlp":
        return Mlp(m)
    if m["type"] == "gpt":
        return Gpt(m)
    return HfCausalLM(m, user_model)


def add_lora(model, lora, state):
    """model.lora as PEFT does it (get_peft_model with the same LoraConfig), the adapters starting
    from our engine's initial lora_A/lora_B (`state`, by the engine's names)."""
    from peft import LoraConfig, get_peft_model
    config = LoraConfig(r=lora.get("r", 8), lora_alpha=lora.get("alpha", 8), lora_dropout=lora.get("dropout", 0.0),
                        target_modules=lora.get("target_modules") or None, bias=lora.get("bias", "none"),
                        task_type="CAUSAL_LM")
    if config.target_modules == {"all-linear"} or config.target_modules == "all-linear":
        config.target_modules = "all-linear"
    model.lm = get_peft_model(model.lm, config)
    with torch.no_grad():
        for name, tensor in state.items():
            for part in (".lora_A.", ".lora_B."):
                if part in name:
                    module = model.lm.base_model.model.get_submodule(name.split(part)[0])
                    getattr(module, part.strip("."))["default"].weight.copy_(tensor)


def load_initial(model, path, lora=None):
    """Our engine's initial weights (its parameter names are transformers' for the HF families)."""
    state = load_file(path)
    target = model.lm if isinstance(model, HfCausalLM) else model
    adapters = {k: v for k, v in state.items() if ".lora_" in k}
    state = {k: v for k, v in state.items() if ".lora_" not in k}
    missing, unexpected = target.load_state_dict(state, strict=False)
    if adapters:
        add_lora(model, lora or {}, adapters)
    tied = getattr(target.config, "tie_word_embeddings", False) if isinstance(model, HfCausalLM) else False
    if unexpected or [k for k in missing if not (tied and k == "lm_head.weight")]:
        sys.exit(f"initial weights do not fit the model: missing {missing}, unexpected {unexpected}")


class Mlp(nn.Module):
    def __init__(self, m):
        super().__init__()
        dims = [m["input_dim"]] + [m["hidden_dim"]] * m["depth"] + [m["output_dim"]]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:]))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < len(self.layers):
                x = torch.relu(x)
        return x

    def loss(self, out, target):
        return F.mse_loss(out, target)


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head = n_head

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, 2)
        heads = lambda t: t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class GPTBlock(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.wte = nn.Embedding(m["vocab_size"], m["n_embd"])
        self.wpe = nn.Embedding(m["block_size"], m["n_embd"])
        self.h = nn.ModuleList(GPTBlock(m["n_embd"], m["n_head"]) for _ in range(m["n_layer"]))
        self.ln_f = nn.LayerNorm(m["n_embd"])

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()

    def loss(self, out, target):
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))


def make_data(recipe, text_path):
    """The training split, exactly as engine/data/data.cpp builds it."""
    d, m = recipe["data"], recipe["model"]
    if d["type"] == "synthetic_regression":
        g = torch.Generator().manual_seed(recipe["seed"])
        n = d["num_samples"]
        x = torch.randn(n, m["input_dim"], generator=g)
        w = torch.randn(m["input_dim"], m["output_dim"], generator=g) / math.sqrt(m["input_dim"])
        y = x @ w + d["noise"] * torch.randn(n, m["output_dim"], generator=g)
        tokens_per_sample = 1
    else:
        raw = open(d["path"] or text_path, "rb").read()
        T = m["block_size"]
        n = (len(raw) - 1) // T
        data = torch.tensor(list(raw), dtype=torch.long)
        windows = torch.arange(n).unsqueeze(1) * T + torch.arange(T + 1).unsqueeze(0)
        samples = data[windows]
        x, y = samples[:, :T].contiguous(), samples[:, 1:].contiguous()
        tokens_per_sample = T
    n = x.shape[0]
    eval_count = int(n * d["eval_fraction"])
    if d["eval_fraction"] > 0 and eval_count == 0 and n > 1:
        eval_count = 1
    train = n - eval_count
    return x[:train], y[:train], tokens_per_sample


def schedule_factor(s, step, total):
    warmup = s["warmup_steps"]
    if step < warmup:
        return step / max(1, warmup)
    if s["type"] == "constant":
        return 1.0
    progress = (step - warmup) / max(1, total - warmup)
    if s["type"] == "linear":
        return max(0.0, 1.0 - progress)
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))


def units_of(model):
    """The units the engine's wrap policy makes below the root: decoder layers, GPT blocks, MLP layers."""
    lm = getattr(model, "lm", None)
    if lm is not None:  # a transformers *ForCausalLM
        return list(lm.model.layers)
    if hasattr(model, "h"):  # GPT
        return list(model.h)
    return list(model.layers)  # MLP


def hsdp(model, replicate, shard):
    """FSDP2 over Accelerate's own device mesh for parallelism_config's dp_replicate_size x dp_shard_size
    (ParallelismConfig.get_device_mesh, sharding over its fsdp dims), each unit and then the root, as
    Accelerate's FSDP2 with the transformer wrap policy does."""
    from accelerate.parallelism_config import ParallelismConfig
    from torch.distributed.fsdp import fully_shard

    config = ParallelismConfig(dp_replicate_size=replicate, dp_shard_size=shard)
    mesh = config.get_device_mesh("cpu")[tuple(config.fsdp_dim_names)]
    for unit in units_of(model):
        fully_shard(unit, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def tensor_parallel(model, shard, tp):
    """parallelism_config's dp_shard_size x tp_size on Accelerate's own device mesh: the decoder's
    projections split with PyTorch's ColwiseParallel / RowwiseParallel as transformers' tp plan for
    Llama, Mistral and Qwen2 splits them (q, k, v, gate, up by rows; o, down by columns; the rest
    whole), then FSDP2 over the mesh's fsdp dimensions when dp_shard_size > 1 (2D), as Accelerate
    prepares a model loaded with tp_plan="auto"."""
    from accelerate.parallelism_config import ParallelismConfig
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    config = ParallelismConfig(dp_shard_size=shard, tp_size=tp)
    mesh = config.get_device_mesh("cpu")
    plan = {}
    for i in range(len(model.lm.model.layers)):
        for name in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj"):
            plan[f"model.layers.{i}.{name}"] = ColwiseParallel()
        for name in ("self_attn.o_proj", "mlp.down_proj"):
            plan[f"model.layers.{i}.{name}"] = RowwiseParallel()
    parallelize_module(model.lm, mesh["tp"], plan)
    if shard > 1:
        fsdp_mesh = mesh[tuple(config.fsdp_dim_names)]
        for unit in units_of(model):
            fully_shard(unit, mesh=fsdp_mesh)
        fully_shard(model, mesh=fsdp_mesh)
    return model


def clip_whole_norm(parameters, max_norm):
    """clip_grad_norm_ over gradients that may be DTensors of different meshes (tp-split, FSDP2-
    sharded, both, or plain tensors): the norm of the whole gradients, each counted once."""
    from torch.distributed.tensor import DTensor
    grads = [p.grad for p in parameters if p.grad is not None]
    whole = [g.full_tensor() if isinstance(g, DTensor) else g for g in grads]
    total = torch.stack([g.double().pow(2).sum() for g in whole]).sum().sqrt().item()
    coefficient = min(1.0, max_norm / (total + 1e-6))
    if coefficient < 1.0:
        with torch.no_grad():
            for g in grads:
                g.mul_(coefficient)
    return total


def worker(rank, world, port, args, result_queue):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world) if args.threads <= 0 else args.threads)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    recipe = load_recipe(args.recipe)
    t = recipe["training"]
    with open(args.recipe) as f:
        user_model = (yaml.safe_load(f) or {}).get("model", {})
    device = torch.device(args.device)
    model = build_model(recipe, user_model)
    if args.initial:
        load_initial(model, args.initial, user_model.get("lora"))
    if args.mixed_precision == "fp8":
        fp8_reference.convert_to_float8(model, types.SimpleNamespace(
            recipe=args.fp8, history=args.fp8_history, algo=args.fp8_algo, margin=args.fp8_margin,
            interval=args.fp8_interval))
    autocast = args.mixed_precision in ("bf16", "fp8")
    if args.mixed_precision == "bf16-pure":
        model.to(torch.bfloat16)
    model.to(device)
    ddp = recipe["ddp"]
    sharded = bool(args.hsdp or args.tp)  # FSDP2 or tensor parallelism: no DDP
    if args.tp:
        wrapped = tensor_parallel(model, *args.tp)
    elif args.hsdp:
        wrapped = hsdp(model, *args.hsdp)
    else:
        wrapped = torch.nn.parallel.DistributedDataParallel(
            model, bucket_cap_mb=ddp["bucket_cap_mb"] if ddp["overlap"] else 1e9) if world > 1 else model
    x, y, tokens_per_sample = make_data(recipe, args.text)
    # The ranks of a tensor group read the same batches (tp is the mesh's innermost dimension).
    tp_size = args.tp[1] if args.tp else 1
    sampler = torch.utils.data.DistributedSampler(
        torch.utils.data.TensorDataset(x, y), num_replicas=world // tp_size, rank=rank // tp_size,
        shuffle=recipe["data"]["shuffle"], seed=recipe["seed"], drop_last=not recipe["data"]["even_batches"])
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=t["per_device_batch_size"],
                                         sampler=sampler, drop_last=True)
    o = recipe["optimizer"]
    trainable = [p for p in model.parameters() if p.requires_grad]
    if o["type"] == "sgd":
        opt = torch.optim.SGD(trainable, lr=o["lr"], momentum=o["momentum"], weight_decay=o["weight_decay"])
    else:
        # The engine's AdamW (Note [fused AdamW]) is PyTorch's fused kernel for fp32 CPU parameters,
        # as transformers' Trainer defaults to; anything else steps as the unfused loop.
        fused = all(p.dtype == torch.float32 and p.device.type == "cpu" for p in trainable) and not sharded
        opt = torch.optim.AdamW(trainable, lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"],
                                weight_decay=o["weight_decay"], fused=fused)
    steps = args.max_steps or t["max_steps"]
    k = t["gradient_accumulation_steps"]

    def batches():
        epoch = 0
        while True:
            sampler.set_epoch(epoch)
            yield from loader
            epoch += 1

    it = batches()
    losses, times, grad_norms = [], [], []
    for step in range(steps):
        start = time.perf_counter()
        for group in opt.param_groups:
            group["lr"] = o["lr"] * schedule_factor(recipe["schedule"], step, steps)
        total = 0.0
        for micro in range(k):
            bx, by = next(it)
            bx, by = bx.to(device), by.to(device)
            if args.mixed_precision == "bf16-pure" and bx.is_floating_point():
                bx, by = bx.to(torch.bfloat16), by.to(torch.bfloat16)
            sync = micro == k - 1 or world == 1
            if sharded:  # FSDP2: reduce the gradients in the last micro-step only, as no_sync does
                if hasattr(wrapped, "set_requires_gradient_sync"):
                    wrapped.set_requires_gradient_sync(sync)
                ctx = torch.enable_grad()
            else:
                ctx = wrapped.no_sync() if (world > 1 and not sync) else torch.enable_grad()
            with ctx:
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
                    loss = model.loss(wrapped(bx), by)
                (loss / k if k > 1 else loss).backward()
            total += loss.item()
        # The global norm before clipping (a DTensor under FSDP2); an infinite bound clips nothing.
        max_norm = t["max_grad_norm"] if t["max_grad_norm"] > 0 else math.inf
        if args.tp:
            grad_norms.append(clip_whole_norm(trainable, max_norm))
        else:
            norm = torch.nn.utils.clip_grad_norm_(trainable, max_norm)
            grad_norms.append((norm.full_tensor() if hasattr(norm, "full_tensor") else norm).item())
        opt.step()
        opt.zero_grad(set_to_none=True)
        local = torch.tensor([total / k], dtype=torch.float64)
        if world > 1:
            dist.all_reduce(local)
        losses.append(local.item() / world)
        times.append(time.perf_counter() - start)
    if rank == 0:
        tokens = steps * k * t["per_device_batch_size"] * tokens_per_sample * (world // tp_size)
        import resource
        result_queue.put({"losses": losses, "grad_norms": grad_norms, "step_times": times, "tokens": tokens,
                          "tokens_per_s": tokens / sum(times),
                          "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024})
    # Every rank leaves together, and none tears Gloo down: even after a barrier, a rank destroying
    # its process group while its peer was still finishing that barrier now and then ended the peer
    # with "terminate called without an active exception" (CI, tensorwise fp8 at 2 ranks). Each rank
    # says it got past the barrier, flushes the queue and leaves without running any destructor.
    dist.barrier()
    result_queue.put({"done": rank})
    result_queue.close()
    result_queue.join_thread()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recipe", required=True)
    parser.add_argument("--initial", help="initial parameters (safetensors) written by shardscope-worker --dump-initial")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--max-steps", type=int, default=0)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--text", default=os.path.join(os.path.dirname(__file__), "../../resources/data/demo.txt"))
    parser.add_argument("--out", required=True)
    parser.add_argument("--mixed-precision", choices=["no", "bf16", "bf16-pure", "fp8"], default="no")
    parser.add_argument("--device", default="cpu", help="cpu, or cuda with --ranks 1 (scripts/gpu-check.sh)")
    parser.add_argument("--fp8", choices=["tensorwise", "delayed"], default="tensorwise")
    parser.add_argument("--fp8-history", type=int, default=1024, help="amax_history_len")
    parser.add_argument("--fp8-algo", choices=["max", "most_recent"], default="most_recent", help="amax_compute_algo")
    parser.add_argument("--fp8-margin", type=int, default=0)
    parser.add_argument("--fp8-interval", type=int, default=1)
    parser.add_argument("--hsdp", type=lambda v: tuple(int(x) for x in v.split(",")), default=None,
                        help="R,S: FSDP2 over Accelerate's mesh of dp_replicate_size R x dp_shard_size S instead of DDP")
    parser.add_argument("--tp", type=lambda v: tuple(int(x) for x in v.split(",")), default=None,
                        help="S,T: dp_shard_size S x tp_size T on Accelerate's mesh (ColwiseParallel/RowwiseParallel, "
                             "then FSDP2 over dp_shard when S > 1) instead of DDP")
    args = parser.parse_args()
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=worker, args=(r, args.ranks, port, args, queue)) for r in range(args.ranks)]
    for p in procs:
        p.start()
    # A rank that dies (a bad recipe, a failed load) must not leave us waiting on the queue.
    result, done = None, set()
    deadline = time.time() + 1200
    while result is None or len(done) < args.ranks:
        try:
            item = queue.get(timeout=2)
        except Exception:
            if any(p.exitcode not in (None, 0) for p in procs) or time.time() > deadline:
                for p in procs:
                    p.kill()
                sys.exit("a reference rank failed")
            continue
        if "done" in item:
            done.add(item["done"])
        else:
            result = item
    # Every rank finished training and met the others at the last barrier: the numbers are whole.
    # A rank that still failed after that (leaving) is reported, not taken for a failed reference.
    for p in procs:
        p.join(timeout=60)
        if p.exitcode != 0:
            print(f"warning: a reference rank exited with {p.exitcode} after its work was done", file=sys.stderr)
            p.kill()
    result["torch"] = torch.__version__
    with open(args.out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
