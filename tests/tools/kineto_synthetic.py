#!/usr/bin/env python3
"""A synthetic torch.profiler (Kineto) trace of a chosen size, shaped like a real GPU training
trace (the corpus' nccl_parser_config_nccl_data.json.gz): per step a ProfilerStep annotation, CPU
ops each launching a kernel (cudaLaunchKernel and the kernel sharing a correlation id), NCCL
all-reduces on their own stream overlapping compute, and memcpys. For the import benchmark
(scripts/bench-trace-import.sh), where HTA loads the same file.

  kineto_synthetic.py --mb 500 --out FILE     writes FILE (plain JSON, as export_chrome_trace does)
"""

import argparse
import json
import os


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=500)
    parser.add_argument("--out", required=True)
    parser.add_argument("--ops_per_step", type=int, default=2000)
    args = parser.parse_args()
    target = int(args.mb * 1e6)
    header = {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 2},
              "deviceProperties": [{"id": 0, "name": "synthetic"}], "baseTimeNanoseconds": 1700000000000000000}
    with open(args.out, "w") as f:
        text = json.dumps(header)
        f.write(text[:-1] + ', "traceEvents": [\n')
        written = len(text)
        ts = 1000.0
        correlation = 1
        step = 0
        first = True
        while written < target:
            step_start = ts
            events = []
            for op in range(args.ops_per_step):
                dur = 3.0 + (op % 7) * 0.731
                events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm" if op % 3 else "aten::add_", "pid": 1, "tid": 1,
                               "ts": round(ts, 3), "dur": round(dur + 2, 3),
                               "args": {"External id": correlation, "Sequence number": op, "Fwd thread id": 0}})
                events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                               "ts": round(ts + 1, 3), "dur": 1.5, "args": {"cbid": 211, "correlation": correlation}})
                events.append({"ph": "X", "cat": "kernel", "name": "void at::native::vectorized_elementwise_kernel<4>", "pid": 0,
                               "tid": 7, "ts": round(ts + 3.123, 3), "dur": round(dur, 3),
                               "args": {"stream": 7, "device": 0, "correlation": correlation, "grid": [128, 1, 1]}})
                correlation += 1
                if op % 50 == 49:
                    events.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1,
                                   "ts": round(ts + dur + 2, 3), "dur": 4.0, "args": {"Collective name": "allreduce"}})
                    events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                                   "ts": round(ts + dur + 3, 3), "dur": 1.0, "args": {"correlation": correlation}})
                    events.append({"ph": "X", "cat": "kernel",
                                   "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
                                   "pid": 0, "tid": 20, "ts": round(ts + dur + 4.5, 3), "dur": 60.0,
                                   "args": {"stream": 20, "device": 0, "correlation": correlation}})
                    correlation += 1
                if op % 200 == 199:
                    events.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "pid": 0, "tid": 7,
                                   "ts": round(ts + dur + 3.5, 3), "dur": 2.0, "args": {"stream": 7, "device": 0}})
                ts += dur + 2.5
            events.append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d" % step, "pid": 1, "tid": 1,
                           "ts": round(step_start, 3), "dur": round(ts - step_start, 3)})
            step += 1
            for e in events:
                line = ("" if first else ",\n") + json.dumps(e)
                first = False
                f.write(line)
                written += len(line)
        f.write("\n]}\n")
    print(json.dumps({"file": args.out, "bytes": os.path.getsize(args.out), "steps": step}))


if __name__ == "__main__":
    main()
