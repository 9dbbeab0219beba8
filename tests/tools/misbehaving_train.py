"""An Accelerate training loop that misbehaves on command, for the tests of hangs and early exits
in users' own scripts (tst_script_hangs, tst_script_launch). Run through `accelerate launch` (or
`shardscope launch --script`) on 2 or 4 CPU ranks:

    --quit RANK:STEP      that rank calls sys.exit(0) before the step (leaves early, "successfully")
    --skip RANK:STEP      that rank skips the step's all_reduce and then waits for data that never comes
    --loop RANK:STEP      that rank spins in a Python loop before the step's all_reduce (busy_loop below)
    --mismatch RANK:STEP  that rank calls all_gather where the others call all_reduce
    --nan_from STEP       every rank's loss is NaN from that step on (a diverged run)

Each step: a forward and backward of a small regression model under DDP (its gradient all_reduce),
the optimizer step, and one explicit all_reduce of the loss (the collective the faults act on).
The Shardscope reporter reports the steps when it is installed.
"""

import argparse
import sys
import time

import torch
import torch.distributed as dist
from accelerate import Accelerator

try:
    import shardscope
except ImportError:
    shardscope = None


def rank_and_step(text):
    rank, _, step = text.partition(":")
    return int(rank), int(step)


def busy_loop(seconds):
    """Computes without ever reaching a collective: what a stack sample must point at."""
    deadline = time.monotonic() + seconds
    total = 0
    while time.monotonic() < deadline:  # the rank --loop names spins here
        total += 1
    return total


def averaged_loss(loss, rank, step, args):
    """The step's loss averaged over the ranks, with the faults asked for."""
    value = loss.detach().reshape(1).clone()
    if args.skip and args.skip == (rank, step):
        print(f"rank {rank} skips the all_reduce of step {step} and waits for data", flush=True)
        while True:
            time.sleep(1)  # idle: waiting for data that never comes
    if args.loop and args.loop == (rank, step):
        print(f"rank {rank} spins before the all_reduce of step {step}", flush=True)
        busy_loop(3600)
    if args.mismatch and args.mismatch == (rank, step):
        gathered = [torch.zeros_like(value) for _ in range(dist.get_world_size())]
        dist.all_gather(gathered, value)
        return torch.cat(gathered).mean()
    dist.all_reduce(value)
    return value / dist.get_world_size()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--step_sleep", type=float, default=0.0, help="seconds to wait in each step")
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--quit", type=rank_and_step)
    parser.add_argument("--skip", type=rank_and_step)
    parser.add_argument("--loop", type=rank_and_step)
    parser.add_argument("--mismatch", type=rank_and_step)
    parser.add_argument("--nan_from", type=int, default=0)
    parser.add_argument("--data-folder", default="", help="unused: the test's folder, so its ranks are found by it")
    args = parser.parse_args()

    torch.manual_seed(0)
    accelerator = Accelerator()
    reporter = shardscope.Reporter(accelerator) if shardscope else None
    rank = accelerator.process_index
    model = torch.nn.Sequential(torch.nn.Linear(args.width, args.width), torch.nn.ReLU(), torch.nn.Linear(args.width, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    model, optimizer = accelerator.prepare(model, optimizer)
    generator = torch.Generator().manual_seed(rank)
    for step in range(1, args.steps + 1):
        if args.quit and args.quit == (rank, step):
            print(f"rank {rank} leaves before step {step} with exit code 0", flush=True)
            sys.exit(0)
        inputs = torch.randn(16, args.width, generator=generator)
        targets = inputs.sum(dim=1, keepdim=True)
        loss = torch.nn.functional.mse_loss(model(inputs), targets)
        if args.nan_from and step >= args.nan_from:
            loss = loss * float("nan")
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        mean_loss = averaged_loss(loss, rank, step, args)
        if reporter:
            reporter.step(mean_loss, inputs)
        if args.step_sleep:
            time.sleep(args.step_sleep)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        print(f"trained {args.steps} steps, last loss {mean_loss.item():.4f}", flush=True)
    model = optimizer = None
    accelerator.free_memory()
    accelerator.end_training()


if __name__ == "__main__":
    main()
