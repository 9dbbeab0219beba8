#pragma once

// torch.profiler's traces (Kineto's Chrome trace JSON, `.json` or `.json.gz`) read into the trace
// model, so that the Trace page, the breakdown and the overlap work for users' own scripts.
//
// Note [Kineto import]: one file is one rank (`distributedInfo.rank`, 0 when absent). Mapped as
// Holistic Trace Analysis classifies them (../shared/refs/users-scripts-traces-peers.md):
//   - device activity (complete events with a CUDA stream: `kernel`, `gpu_memcpy`, `gpu_memset`,
//     `cuda_sync`; not `gpu_user_annotation`) becomes device spans on "stream N", typed by HTA's
//     kernel types: `nccl…Kernel` communication, `Memcpy…`/`Memset…` memory, synchronisations and
//     other copy kernels "other" (non-compute, on the memory lane), everything else compute; the
//     kernels of the last profiler step are left out as HTA leaves them out (Note [The last
//     profiler step] in the .cpp);
//   - host ops (`cpu_op`): `record_param_comms` and `c10d::*` are communication, the rest compute;
//     `gloo:*` and `nccl:*` annotations (Gloo's own threads on the CPU) are communication; a
//     collective on a thread that also runs ops is a wait (the thread does not compute meanwhile);
//   - `ProfilerStep#N` annotations are the steps; other annotations, CUDA runtime calls and
//     Python frames are host spans (shown, never work).
// A trace with device activity is analysed on it alone, as HTA analyses GPU kernels only; a
// CPU-only trace on its host ops (analysis.h, Note [Analysed spans]). Timestamps are Kineto's
// microseconds, kept to the nanosecond; `baseTimeNanoseconds` becomes the clock offset, so ranks
// of one run line up on the Unix clock.
//
// Files are parsed as a stream (SAX), one event at a time, so a trace of hundreds of MB needs about
// the memory of its spans, not of a JSON document; progress is reported and can cancel.

#include "engine/common/result.h"
#include "profiler/trace_model.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string_view>
#include <vector>

namespace shardscope::profiler {

// Called now and then while reading with the bytes read so far of the file's total (compressed
// bytes for a .gz); returning false cancels the read (the result is then an error saying so).
using ReadProgress = std::function<bool(std::uint64_t done, std::uint64_t total)>;

// Whether `head` (the first bytes of a decompressed trace) is Kineto's rather than Shardscope's own.
bool looksLikeKineto(std::string_view head);

Result<RankTrace> parseKinetoTrace(std::string_view json, std::string_view origin = "trace");
Result<RankTrace> readKinetoTrace(const std::filesystem::path& path, const ReadProgress& progress = {});

// Any trace file the workbench opens: Shardscope's (per rank or merged) or torch.profiler's, plain
// or gzip-compressed. One RankTrace per rank, ascending.
Result<std::vector<RankTrace>> readTraceFile(const std::filesystem::path& path, const ReadProgress& progress = {});

// A trace file by its name: `.json` or `.json.gz` (Shardscope's rank<N>.json and merged.json,
// torch.profiler's <worker>.<time>.pt.trace.json).
bool isTraceFileName(std::string_view name);

// Whether `traces` can be one run's: every trace that knows its job's size (distributedInfo) says
// `ranks`, and every rank lies below it; with `ranks` 0, the traces only have to agree. `what`
// names the run in the error ("the run").
Result<void> checkRankCount(const std::vector<RankTrace>& traces, int ranks, std::string_view what = "the run");

// The collective a communication op's name stands for ("all_reduce", "all_gather",
// "reduce_scatter", "broadcast", "all_to_all", "send_recv", "barrier"), or "collective".
std::string collectiveKindOf(std::string_view name);

} // namespace shardscope::profiler
