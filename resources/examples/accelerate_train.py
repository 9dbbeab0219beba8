"""A small Accelerate training loop: a tiny causal language model on a local text, randomly
initialised, so nothing is downloaded. Run it from the workbench, or:

    shardscope launch --config_file cpu2.yaml --script resources/examples/accelerate_train.py -- --steps 20

Two lines report it to Shardscope (marked below); without ``shardscope`` installed it trains the same.
"""

import argparse
import ctypes
import os
import sys
import time

import torch
from accelerate import Accelerator

try:
    import shardscope
except ImportError:
    shardscope = None


class TinyCausalLM(torch.nn.Module):
    """Bytes in, next byte out: an embedding, a small MLP block with a residual, and a head."""

    def __init__(self, vocab=256, width=64, context=32):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.position = torch.nn.Embedding(context, width)
        self.block = torch.nn.Sequential(torch.nn.LayerNorm(width), torch.nn.Linear(width, 4 * width), torch.nn.GELU(),
                                         torch.nn.Linear(4 * width, width))
        self.head = torch.nn.Linear(width, vocab)

    def forward(self, input_ids):
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        hidden = self.embed(input_ids) + self.position(positions)
        return self.head(hidden + self.block(hidden))


def byte_windows(path, context):
    """Every window of `context + 1` bytes of the file, as (input, target) pairs."""
    with open(path, "rb") as f:
        data = torch.tensor(list(f.read()), dtype=torch.long)
    count = (len(data) - 1) // context
    inputs = data[: count * context].view(count, context)
    targets = data[1 : count * context + 1].view(count, context)
    return torch.utils.data.TensorDataset(inputs, targets)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--width", type=int, default=64, help="the model's width (a larger model, a longer step)")
    parser.add_argument("--data", default=os.path.abspath(__file__), help="a local text file (default: this script)")
    parser.add_argument("--step_sleep", type=float, default=0.0, help="seconds to wait in each step (for demos)")
    parser.add_argument("--fail_rank", type=int, default=-1, help="this rank raises at --fail_step (for tests)")
    parser.add_argument("--fail_step", type=int, default=3)
    parser.add_argument("--abort_rank", type=int, default=-1,
                        help="this rank finishes its training, then dies on its way out as a native crash does "
                             "(std::terminate, SIGABRT; no Python exception) (for tests)")
    parser.add_argument("--profile", action="store_true",
                        help="profile steps 3-5 with torch.profiler into $SHARDSCOPE_TRACE_DIR (the run's traces/, "
                             "which shardscope launch imports after the run) or --profile_dir")
    parser.add_argument("--profile_dir", default="", help="write torch.profiler traces (one per rank) here")
    parser.add_argument("--no_reporter", action="store_true", help="train without reporting to Shardscope (benchmarks)")
    args = parser.parse_args()

    torch.manual_seed(0)
    accelerator = Accelerator()
    reporter = shardscope.Reporter(accelerator) if shardscope and not args.no_reporter else None  # shardscope line 1 of 2
    model = TinyCausalLM(width=args.width)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    loader = torch.utils.data.DataLoader(byte_windows(args.data, 32), batch_size=args.batch_size, shuffle=True)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

    profiler = None
    if args.profile and not args.profile_dir:
        args.profile_dir = os.environ.get("SHARDSCOPE_TRACE_DIR", "traces")
    if args.profile_dir:
        os.makedirs(args.profile_dir, exist_ok=True)
        trace_name = os.path.join(args.profile_dir, "rank%d.trace.json" % accelerator.process_index)
        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        # repeat=1: one window. With the default (repeat forever) the window after the last would
        # call on_trace_ready again when the profiler stops and overwrite the file with a near-empty trace.
        profiler = torch.profiler.profile(activities=activities,
                                          schedule=torch.profiler.schedule(wait=1, warmup=1, active=3, repeat=1),
                                          on_trace_ready=lambda p: p.export_chrome_trace(trace_name))
        profiler.start()

    step = 0
    timed_from = None  # the step time printed at the end: steps after the first 3 (warm-up)
    while step < args.steps:
        for inputs, targets in loader:
            if step == args.fail_step and accelerator.process_index == args.fail_rank:
                raise RuntimeError("injected failure on rank %d at step %d" % (accelerator.process_index, step))
            logits = model(inputs)
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            if reporter:
                reporter.step(loss, inputs)  # shardscope line 2 of 2
            if profiler:
                profiler.step()
            if args.step_sleep:
                time.sleep(args.step_sleep)
            step += 1
            if step == 3:
                timed_from = time.perf_counter()
            if step >= args.steps:
                break
    timed_until = time.perf_counter()
    if profiler:
        profiler.stop()
    accelerator.wait_for_everyone()
    if accelerator.is_main_process and step > 0:
        print("trained %d steps, last loss %.4f" % (step, loss.item()))
        if timed_from is not None and step > 3:
            print("step time: %.4f ms (mean of steps 4..%d)" % ((timed_until - timed_from) * 1e3 / (step - 3), step))
    # The DDP wrapper goes before the process group: a Gloo group it still holds at exit now and
    # then ends the process with "terminate called without an active exception" (see
    # trainer_train.py).
    model = optimizer = loader = logits = loss = None
    accelerator.free_memory()
    accelerator.end_training()
    if accelerator.process_index == args.abort_rank:
        if reporter:
            reporter.close()  # the training is reported whole, as it is when the crash is in teardown
        print("rank %d aborts (--abort_rank)" % args.abort_rank, file=sys.stderr, flush=True)
        ctypes.CDLL("libstdc++.so.6")._ZSt9terminatev()  # what a joinable std::thread's destructor calls


if __name__ == "__main__":
    main()
