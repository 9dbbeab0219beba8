#pragma once

// A launch request as a file: what a cluster run's every node runs (<run folder>/request.json,
// written at submission), read back by each node's `shardscope launch --request FILE`. The
// settings travel as data, typed, not as argument strings written into the batch script and
// parsed again on every node; the node's command line adds only where its part runs (its machine
// rank, the head's address, its attempt's folder, the checkpoint it resumes from). Qt-free and
// torch-free.

#include "app/runs/launch_request.h"
#include "engine/common/result.h"

#include <filesystem>
#include <string>
#include <vector>

namespace shardscope::runs {

// What to run and how to watch it (recipe or script, config, flags, the watchdogs' settings, the
// ranks and machines); not where (target, folders, this machine's rank and rendezvous) nor the
// history's bookkeeping (run name, --no_history, --continue_run), which belong to one launcher.
std::string requestToJson(const LaunchRequest& request);
// An error names the file and the key that is wrong.
Result<LaunchRequest> requestFromJson(const std::string& text, const std::string& where);
Result<void> writeRequestFile(const LaunchRequest& request, const std::filesystem::path& file);
Result<LaunchRequest> readRequestFile(const std::filesystem::path& file);

// The command-line options that may go with --request: where this launcher's part of the run
// runs. Any other option is refused with --request (the file says what to run).
const std::vector<std::string>& nodePlaceOptions();
// The file's request, placed where `commandLine` says (its node-place options; the rendezvous
// and topology flags count as given where the command line gave them).
LaunchRequest placedAsGiven(LaunchRequest fromFile, const LaunchRequest& commandLine);

} // namespace shardscope::runs
