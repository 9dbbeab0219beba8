#!/usr/bin/env python3
"""Holistic Trace Analysis' numbers for torch.profiler (Kineto) traces: the reference our import
and analysis are checked against (tests/profiler/tst_kineto_import.cpp) and benchmarked against
(profiler/bench).

  hta_reference.py breakdown FILE...   one JSON object per line and file:
      {"file", "rank", "gpu": bool, "idle_us", "compute_us", "non_compute_us", "kernel_us",
       "overlap", "events", "cpu_ops", "profiler_steps"}
      (the breakdown and overlap only when the trace has GPU kernels: HTA analyses kernels only
      and fails on a CPU-only trace, so for those it gives the event counts)
  hta_reference.py load FILE           loads FILE as HTA's TraceAnalysis does; prints
      {"file", "seconds", "peak_rss_bytes", "events"} (the benchmark's reference)

Each file is analysed alone, as rank `distributedInfo.rank`, with HTA's defaults (the last
profiler step left out). Uses the pinned holistictraceanalysis of scripts/requirements-no-deps.txt.
"""

import json
import logging
import os
import resource
import sys
import time
import warnings


def _quiet():
    # HTA logs each parse step at INFO/WARNING; the output must stay one JSON line per file.
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")  # pandas FutureWarnings from inside HTA


def _load(path, rank=None):
    from hta.common.trace import Trace

    with_rank = _rank_of(path) if rank is None else rank
    trace = Trace(trace_files={with_rank: os.path.abspath(path)}, trace_dir=os.path.dirname(os.path.abspath(path)))
    trace.load_traces(include_last_profiler_step=False, use_multiprocessing=False, use_memory_profiling=False)
    return trace, with_rank


def _rank_of(path):
    import gzip

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    return int(doc.get("distributedInfo", {}).get("rank", 0))


def breakdown(path):
    from hta.analyzers.breakdown_analysis import BreakdownAnalysis
    from hta.analyzers.communication_analysis import CommunicationAnalysis

    trace, rank = _load(path)
    df = trace.get_trace(rank)
    names = trace.symbol_table.get_sym_table()
    cats = df["cat"].map(lambda i: names[i] if i >= 0 else "")
    out = {
        "file": os.path.basename(path),
        "rank": rank,
        "events": int(len(df)),
        "cpu_ops": int((cats == "cpu_op").sum()),
        "profiler_steps": int(df["name"].map(lambda i: names[i].startswith("ProfilerStep#") if i >= 0 else False).sum()),
    }
    gpu = bool(df["stream"].ne(-1).any()) if "stream" in df.columns else False
    out["gpu"] = gpu
    if gpu:
        b = BreakdownAnalysis.get_temporal_breakdown(trace, visualize=False).iloc[0]
        o = CommunicationAnalysis.get_comm_comp_overlap(trace, visualize=False).iloc[0]
        out.update(
            idle_us=float(b["idle_time(us)"]),
            compute_us=float(b["compute_time(us)"]),
            non_compute_us=float(b["non_compute_time(us)"]),
            kernel_us=float(b["kernel_time(us)"]),
            overlap=float(o["comp_comm_overlap_pctg"]) / 100.0,  # HTA rounds it to 0.01 %
        )
    return out


def load(path):
    start = time.perf_counter()
    # The rank is only HTA's key here: reading it from the file first would parse the file twice.
    trace, rank = _load(path, rank=0)
    seconds = time.perf_counter() - start
    # ru_maxrss is KiB on Linux.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"file": os.path.basename(path), "seconds": seconds, "peak_rss_bytes": peak, "events": int(len(trace.get_trace(rank)))}


def main(argv):
    if len(argv) < 3 or argv[1] not in ("breakdown", "load"):
        print(__doc__, file=sys.stderr)
        return 2
    _quiet()
    try:
        import hta  # noqa: F401
    except ImportError:
        print("hta_reference: holistictraceanalysis is not installed in this Python; ./scripts/setup.sh installs it into .venv", file=sys.stderr)
        return 3
    for path in argv[2:]:
        result = breakdown(path) if argv[1] == "breakdown" else load(path)
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
