// Not a test: the Kineto import's cost on one file (docs/BENCHMARKS.md, "Trace import"), as
// scripts/bench-trace-import.sh runs it beside Holistic Trace Analysis loading the same file.
//   bench_kineto_import FILE   prints one JSON line: seconds to read and analyse, peak RSS, spans.

#include "profiler/analysis.h"
#include "profiler/kineto_trace.h"

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <iostream>

int main(int argc, char** argv)
{
    if (argc != 2) {
        std::cerr << "usage: bench_kineto_import FILE\n";
        return 2;
    }
    const auto start = std::chrono::steady_clock::now();
    auto traces = shardscope::profiler::readTraceFile(argv[1]);
    if (!traces) {
        std::cerr << "bench_kineto_import: " << traces.error().message << "\n";
        return 1;
    }
    std::size_t spans = 0;
    double overlap = 0;
    for (const auto& trace : *traces) {
        spans += trace.spans.size();
        overlap = shardscope::profiler::analyseRank(trace).total.overlap();
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    std::printf("{\"seconds\": %.3f, \"peak_rss_bytes\": %ld, \"spans\": %zu, \"overlap\": %.4f}\n", seconds,
                usage.ru_maxrss * 1024L, spans, overlap);
    return 0;
}
