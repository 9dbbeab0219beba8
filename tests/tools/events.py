#!/usr/bin/env python3
"""A run's events.jsonl as the measuring scripts (scripts/bench-*.sh) read it: one decoder of the
event protocol (engine/protocol/events.h) for them all, instead of a snippet in each script.

    events.py EVENTS [--ranks N] [--warmup K] VALUE...

prints the VALUEs, separated by spaces, of the run's step events:
    throughput    tokens/s of all ranks: rank 0's tokens times N over rank 0's step time, the first
                  K steps (warm-up) left out
    model_states  parameters + gradients + optimizer state of rank 0 at its last step, in bytes
    peak_rss      the largest resident set any rank reported, in bytes
"""

import argparse
import json


def read(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def steps(events, rank=None):
    return [e for e in events if e.get("type") == "step" and (rank is None or e.get("rank") == rank)]


def throughput(events, ranks, warmup):
    measured = steps(events, rank=0)[warmup:]
    return sum(e["tokens"] * ranks for e in measured) / sum(e["step_time"] for e in measured)


def model_states(events):
    last = steps(events, rank=0)[-1]["mem"]
    return last["params"] + last["grads"] + last["optimizer"]


def peak_rss(events):
    return max(e["mem"]["rss"] for e in steps(events))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("events")
    parser.add_argument("values", nargs="+", choices=["throughput", "model_states", "peak_rss"])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    events = read(args.events)
    values = {"throughput": lambda: throughput(events, args.ranks, args.warmup),
              "model_states": lambda: model_states(events), "peak_rss": lambda: peak_rss(events)}
    print(*(values[v]() for v in args.values))


if __name__ == "__main__":
    main()
