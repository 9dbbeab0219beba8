"""How often a 2-rank Gloo run under torchrun dies at exit with "terminate called without an
active exception" (SIGABRT), for each way of ending it (docs/SCRIPTS.md quotes its counts):

    .venv/bin/python tests/tools/gloo_teardown_check.py --runs 30

Endings: `bare` (all-reduces, no destroy_process_group), `bare_destroy` (then destroy it),
`ddp` (a DDP model trained, nothing destroyed), `ddp_destroy` (destroy while the model is still
referenced), `ddp_drop_destroy` (drop the model, gc, then destroy); and through Accelerate
(`Accelerator(cpu=True)`, its prepared DDP model): `accelerate` (no end), `accelerate_end`
(`end_training()`), `accelerate_free_end` (`free_memory()`, then `end_training()`), as the
examples in resources/examples end. Nothing is downloaded.
"""

import argparse
import gc
import os
import subprocess
import sys

ENDINGS = ["bare", "bare_destroy", "ddp", "ddp_destroy", "ddp_drop_destroy", "accelerate", "accelerate_end",
           "accelerate_free_end"]


def small_model():
    import torch

    return torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 8))


def accelerate_main(ending):
    import torch
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True)
    model = accelerator.prepare(small_model())
    for _ in range(3):
        accelerator.backward(model(torch.randn(4, 64)).sum())
    accelerator.wait_for_everyone()
    if ending == "accelerate_free_end":
        model = None
        accelerator.free_memory()
    if ending != "accelerate":
        accelerator.end_training()


def rank_main(ending):
    if ending.startswith("accelerate"):
        accelerate_main(ending)
        return
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    model = None
    if ending.startswith("ddp"):
        model = torch.nn.parallel.DistributedDataParallel(small_model())
        for _ in range(3):
            model(torch.randn(4, 64)).sum().backward()
    else:
        x = torch.ones(1000)
        for _ in range(5):
            dist.all_reduce(x)
    dist.barrier()
    if ending == "ddp_drop_destroy":
        model = None
        gc.collect()
    if ending.endswith("destroy"):
        dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--endings", default=",".join(ENDINGS))
    parser.add_argument("--rank-ending", help=argparse.SUPPRESS)  # set for the ranks themselves
    args = parser.parse_args()
    if args.rank_ending:
        rank_main(args.rank_ending)
        return
    from ddp_reference import free_port  # this folder's; imports torch, which the ranks import anyway

    for ending in args.endings.split(","):
        if ending not in ENDINGS:
            sys.exit("unknown ending %r; choose from %s" % (ending, ", ".join(ENDINGS)))
        aborted = failed = 0
        for _ in range(args.runs):
            try:
                run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--master_port", str(free_port()),
                                      "--nproc_per_node", "2", os.path.abspath(__file__), "--rank-ending", ending],
                                     capture_output=True, text=True, timeout=300)
            except subprocess.TimeoutExpired:
                sys.exit("a run of %r took over 300 s: hung, not counted" % ending)
            if run.returncode != 0:
                failed += 1
                aborted += "terminate called without an active exception" in run.stderr + run.stdout
        print("%-17s %2d of %d runs failed, %2d with 'terminate called without an active exception'"
              % (ending, failed, args.runs, aborted), flush=True)


if __name__ == "__main__":
    main()
