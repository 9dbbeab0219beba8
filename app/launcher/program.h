#pragma once

// Runs a program to its end (or `timeout`, then kills it) and returns what it printed on stdout and
// stderr together, for short probes such as asking a Python which accelerate it has.

#include "engine/common/result.h"

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace shardscope {

struct ProgramResult {
    int status = 0; // exit code, or 128 + signal
    bool timedOut = false;
    std::string output;
};
// At `timeout` the program is killed (SIGKILL to its process group); with a `grace`, it is first
// sent SIGINT and given that long to end by itself (a launcher records its run as cancelled).
Result<ProgramResult> runProgram(const std::string& path, const std::vector<std::string>& args, std::chrono::milliseconds timeout,
                                 std::chrono::milliseconds grace = std::chrono::milliseconds(0));

// `program` in a folder of PATH (an executable file there; empty entries are skipped, an unset PATH
// is /usr/bin:/bin), as the first of them; none when no folder has it.
std::optional<std::string> findOnPath(const std::string& program);

// This process's executable (/proc/self/exe), or `argv0` made absolute where that cannot be read.
std::filesystem::path thisExecutable(const std::string& argv0);

} // namespace shardscope
