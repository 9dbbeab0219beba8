#pragma once

// What a cluster run's folder says of its submission: run.json, written beside the batch script
// once the job is submitted. The history of the machine that submitted has the run from then on;
// any other machine that sees the shared folder (another workbench of the same user, or `shardscope
// runs follow DIR`) reads this file to put the run in its own history and follow the job. The
// fields the shardscope Python reporter writes into a script run's run.json (distributed_type,
// mixed_precision, num_processes) mean the same here, so `runs import` reads both. Qt-free and
// torch-free.

#include "engine/common/result.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace shardscope::cluster {

struct Submission {
    std::string name; // the run's name
    std::string job; // "slurm:123"
    std::string profile; // the cluster profile it was submitted with (a follower asks SLURM as it says)
    int numMachines = 1; // nodes
    int numProcesses = 1; // ranks over every node
    std::string distributedType; // Accelerate's spelling
    std::string mixedPrecision;
    std::vector<std::string> tags;
    std::string user; // who submitted: another user's runs are never caught up with unasked
    std::string host; // the machine that submitted
    double submittedAt = 0; // seconds since the epoch
};

// <runDir>/run.json, written whole or not at all (a reader never sees half of it).
Result<void> writeSubmission(const std::filesystem::path& runDir, const Submission& submission);
// A field missing or of the wrong type is an error naming the file and the key.
Result<Submission> readSubmission(const std::filesystem::path& runDir);

// The login name of this process's user ("" when there is none).
std::string currentUser();

} // namespace shardscope::cluster
