#!/usr/bin/env python3
"""The reference for memory per rank under sharding (tests/engine/tst_sharding::memoryPerRankMatchesFullyShard):
PyTorch's own FSDP2 (`fully_shard`) on the recipe's model, on CPU ranks over Gloo.

Builds the model as tests/tools/ddp_reference.py does (the recipe's Llama/GPT/MLP, fp32), applies
`fully_shard` to each decoder layer (each block, each MLP layer) and then to the whole model,
as Accelerate's FSDP2 with the transformer wrap policy does, runs one AdamW step on random tokens
and prints one JSON object per rank, in rank order, of what that rank holds then (after
`optimizer.step()`, before `zero_grad`), in bytes:

    params     its parameter shards (DTensor.to_local: the rows of each parameter it owns)
    grads      its reduced gradient shards
    optimizer  AdamW's exp_avg and exp_avg_sq of its shards (the step counters left out, as the
               engine's C++ optimizer keeps them apart from tensors)
    unsharded_after_forward   parameters held unsharded when the forward ends: the root's with
               reshard_after_forward true (FULL_SHARD), every one with false (SHARD_GRAD_OP)
    full_params, full_grads   the unsharded sizes, for the record

    python fsdp_memory_reference.py --recipe R.yaml [--ranks 2] [--reshard-after-forward true|false]
"""
import argparse
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ddp_reference  # the engine's models in torch, and the recipe reader


def local_bytes(t):
    if t is None:
        return 0
    local = t.to_local() if hasattr(t, "to_local") else t
    return local.numel() * local.element_size()


def worker(rank, world, port, args, results):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor
    torch.manual_seed(0)
    recipe = ddp_reference.load_recipe(args.recipe)
    with open(args.recipe) as f:
        user_model = (yaml.safe_load(f) or {}).get("model", {})
    model = ddp_reference.build_model(recipe, user_model).float().train()
    full_params = sum(p.numel() * p.element_size() for p in model.parameters())
    mesh = init_device_mesh("cpu", (world,))
    reshard = args.reshard_after_forward == "true"
    for unit in ddp_reference.units_of(model):
        fully_shard(unit, mesh=mesh, reshard_after_forward=reshard)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    m = recipe["model"]
    block = int(m.get("block_size", 16))
    vocab = int(m.get("vocab_size", 256))
    tokens = torch.randint(0, vocab, (2, block + 1), generator=torch.Generator().manual_seed(rank))
    unsharded_after_forward = []

    def count_unsharded(module, inputs, output):
        # FSDP2 swaps a module's sharded DTensor parameters for plain unsharded ones while gathered.
        unsharded_after_forward.append(sum(p.numel() * p.element_size() for p in model.parameters()
                                           if not isinstance(p, DTensor)))
    model.register_forward_hook(count_unsharded)
    out = model(tokens[:, :-1])
    model.loss(out, tokens[:, 1:]).backward()
    optimizer.step()
    params = list(model.parameters())
    moments = 0
    for p in params:
        for key in ("exp_avg", "exp_avg_sq"):
            moments += local_bytes(optimizer.state[p].get(key))
    results.put((rank, {
        "params": sum(local_bytes(p) for p in params),
        "grads": sum(local_bytes(p.grad) for p in params),
        "optimizer": moments,
        "unsharded_after_forward": unsharded_after_forward[0],
        "full_params": full_params,
        "full_grads": full_params,
    }))
    dist.barrier()
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recipe", required=True)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--reshard-after-forward", choices=["true", "false"], default="true",
                        help="true: FULL_SHARD (ZeRO-3); false: SHARD_GRAD_OP's parameter life in FSDP2")
    args = parser.parse_args()
    torch.set_num_threads(1)
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = ddp_reference.free_port()
    procs = [ctx.Process(target=worker, args=(r, args.ranks, port, args, results)) for r in range(args.ranks)]
    for p in procs:
        p.start()
    by_rank = dict(results.get(timeout=300) for _ in procs)
    for p in procs:
        p.join()
        if p.exitcode != 0:
            sys.exit(f"rank process exited with {p.exitcode}")
    for r in range(args.ranks):
        print(json.dumps(by_rank[r]))


if __name__ == "__main__":
    main()
