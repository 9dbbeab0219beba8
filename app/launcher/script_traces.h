#pragma once

// After a script run: the torch.profiler (Kineto) traces the script wrote into the run's traces/
// folder (torch.profiler's export_chrome_trace or tensorboard_trace_handler: any *.json or
// *.json.gz there, the launcher's own merged.json aside) imported, checked against the run's rank
// count, and turned into the `trace` events an engine rank sends, so that the history, the Trace
// page, the breakdown and the overlap work for script runs as for engine runs.

#include "engine/protocol/events.h"

#include <filesystem>
#include <string>
#include <vector>

namespace shardscope {

struct ScriptTraces {
    std::vector<protocol::Event> events; // one `trace` event per rank imported, ascending rank
    std::vector<std::string> warnings; // the files left out and why (not a trace, another job's)
    std::string merged; // <tracesDir>/merged.json of the imported ranks; empty when none
};

ScriptTraces collectScriptTraces(const std::filesystem::path& tracesDir, int ranks);

} // namespace shardscope
