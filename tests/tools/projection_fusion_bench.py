"""Would fusing q/k/v and gate/up into one GEMM each make a decoder layer's step faster on the CPU?

The question behind docs/BENCHMARKS.md's full fine-tuning line (#18): both sides of
scripts/bench-models.sh spend their step in the same MKL GEMMs, and the one change left that keeps
the numerics is fewer, wider GEMMs. This times forward + backward of exactly those projections at
bench-models' shape (hidden 512, 8 query / 2 key-value heads of 64, intermediate 1408, 4 x 128
tokens a rank, one intra-op thread as each rank runs), separate against fused (the weights
concatenated each call, as a fused engine path would, since the checkpoint keeps them apart),
alternately, and prints the medians.

    .venv/bin/python tests/tools/projection_fusion_bench.py [--rounds 5] [--iterations 20]
"""
import argparse
import statistics
import time

import torch


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    tokens, hidden, kv, intermediate = 4 * 128, 512, 2 * 64, 1408
    x = torch.randn(tokens, hidden, requires_grad=True)
    wq, wk, wv = (torch.randn(n, hidden, requires_grad=True) for n in (hidden, kv, kv))
    wg, wu = (torch.randn(intermediate, hidden, requires_grad=True) for _ in range(2))

    def separate():
        q, k, v = x @ wq.t(), x @ wk.t(), x @ wv.t()
        g, u = x @ wg.t(), x @ wu.t()
        return q, k, v, g, u

    def fused():
        q, k, v = (x @ torch.cat([wq, wk, wv]).t()).split([hidden, kv, kv], -1)
        g, u = (x @ torch.cat([wg, wu]).t()).split([intermediate, intermediate], -1)
        return q, k, v, g, u

    def step(projections):
        q, k, v, g, u = projections()
        (q.sum() + k.sum() + v.sum() + (torch.nn.functional.silu(g) * u).sum()).backward()

    # The two give the same values (to float rounding) before anything is timed.
    a, b = separate(), fused()
    for p, r in zip(a, b):
        torch.testing.assert_close(p, r, rtol=1e-5, atol=1e-4)
    times = {"separate": [], "fused": []}
    for _ in range(args.rounds):
        for name, projections in (("separate", separate), ("fused", fused)):
            for _ in range(3):
                step(projections)
            start = time.perf_counter()
            for _ in range(args.iterations):
                step(projections)
            times[name].append((time.perf_counter() - start) / args.iterations * 1000)
    s, f = statistics.median(times["separate"]), statistics.median(times["fused"])
    print(f"torch {torch.__version__}, {args.threads} thread(s), {args.rounds} rounds of {args.iterations}")
    print(f"separate q/k/v and gate/up: {s:.1f} ms a layer (forward + backward of the projections)")
    print(f"fused:                      {f:.1f} ms a layer")
    print(f"fused / separate:           {f / s:.3f}")


if __name__ == "__main__":
    main()
