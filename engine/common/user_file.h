#pragma once

// The one reader of a file that a user, a run folder or a shared folder hands Shardscope (a
// config, a recipe, a DeepSpeed JSON, the cluster profiles, a run's run.json, plan.json,
// attempt.txt, job.sbatch, ...): it must be a regular file (a FIFO would block forever, /dev/zero
// never end, a folder is no file), at most a size fit for its kind (an 8 MiB "config" would take
// minutes and gigabytes to parse before any error), and read within a deadline (a hung network
// mount ends in an error, not a launcher that ignores Ctrl-C). Every refusal says what the file
// is, where, and how to fix it. Streams that a run writes as it goes (events.jsonl) get the same
// type check and are read in bounded pieces (readUserFileFrom, readUserFileLines).

#include "engine/common/result.h"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

namespace shardscope {

struct UserFileKind {
    std::string what; // in the errors: "the cluster profiles file", "Accelerate config", ...
    std::uint64_t maxBytes = 1u << 20;
    std::chrono::milliseconds deadline{10000};
};

// The whole file. ErrorKind::Io; error.file is the path.
Result<std::string> readUserFile(const std::filesystem::path& file, const UserFileKind& kind);

// A file a run writes as it goes (events.jsonl): the bytes from `offset` on, at most `maxBytes` of
// them (the rest is read by the next call). The same type check as readUserFile.
Result<std::string> readUserFileFrom(const std::filesystem::path& file, const std::string& what, std::uint64_t offset,
                                     std::uint64_t maxBytes);
// Such a file line by line (without the newline; a last line without one too), read in pieces:
// at most kind.maxBytes in all (an error past it). The count of lines.
Result<std::uint64_t> readUserFileLines(const std::filesystem::path& file, const UserFileKind& kind,
                                        const std::function<void(const std::string& line)>& onLine);

} // namespace shardscope
