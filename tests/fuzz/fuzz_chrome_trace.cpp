// Fuzz target: the Chrome-trace importer (profiler/chrome_trace.h), which the Trace page uses on
// any file the user opens. Invariants: a rejection is a message that starts with the file's name;
// every imported rank exports and imports again to the same file (a fixed point); the analysis
// the page runs on an imported trace (breakdown, steps, stragglers) and the merged export do not
// crash, overflow or hang.

#include "profiler/analysis.h"
#include "profiler/chrome_trace.h"
#include "tests/fuzz/fuzz_check.h"

using namespace shardscope::profiler;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string text = shardscope::fuzz::text(data, size);
    auto traces = parseChromeTrace(text, "fuzz.json");
    if (!traces) {
        const std::string& m = traces.error().message;
        FUZZ_CHECK(m.rfind("fuzz.json: ", 0) == 0 && m.size() > 11, "the message does not name the file: " + m);
        return 0;
    }
    for (const RankTrace& trace : *traces) {
        const std::string exported = toChromeTraceJson(trace);
        auto back = parseChromeTrace(exported, "exported.json");
        FUZZ_CHECK(back.ok(), "an imported trace does not import after export: " + back.error().message);
        FUZZ_CHECK(back->size() == 1, "one rank exported, " + std::to_string(back->size()) + " imported");
        FUZZ_CHECK(toChromeTraceJson(back->front()) == exported, "export/import is not a fixed point");
        const TraceSummaryValues summary = summarise(trace);
        (void)summary;
        (void)stepWindows(trace);
    }
    (void)findStragglers(*traces);
    auto merged = toMergedChromeTraceJson(*traces, ClockAlignment{});
    FUZZ_CHECK(merged.ok() || !merged.error().message.empty(), "a merge failure without a message");
    ClockAlignment byBarrier;
    byBarrier.mode = ClockAlignment::Mode::ReferenceEvent;
    byBarrier.referenceName = "barrier";
    auto offsets = clockOffsets(*traces, byBarrier);
    FUZZ_CHECK(offsets.ok() || !offsets.error().message.empty(), "an alignment failure without a message");
    return 0;
}
