#pragma once

// Launches of tests/helpers/fake_rank (a stand-in rank that does what its arguments say: exit,
// hang, crash, record its argv and environment) through the real launcher, for the suites that
// test the launcher's process handling without the engine.

#include "app/launcher/launcher.h"

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace shardscope::testing {

inline const std::string kFakeRank = SHARDSCOPE_BINARY_DIR "/tests/helpers/fake_rank";

// `n` fake ranks given `args`, stopped with SIGKILL 2 s after SIGTERM when they ignore it.
inline LaunchOptions fakeLaunch(int n, std::vector<std::string> args)
{
    LaunchOptions options;
    options.workerPath = kFakeRank;
    options.numProcesses = n;
    options.workerArgs = std::move(args);
    options.stopGrace = std::chrono::milliseconds(2000);
    return options;
}

} // namespace shardscope::testing
