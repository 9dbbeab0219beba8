#pragma once

// The attempts of a SLURM job that requeued itself (a time limit's warning) or was requeued (a
// preemption): each ran in <run>/attempts/<N>/ (cluster::attemptDir), its nodes' launchers in
// node<M>/, and all resumed from the checkpoints they share. Read back here into what the history
// keeps of each attempt, and into one events file of the whole run, as one uninterrupted
// launcher's would be. Qt-free and torch-free.

#include "engine/common/result.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace shardscope::cluster {

// What the attempt's files say, as read: 0 or -1 where the file said nothing. The history's row
// of an attempt is storage::RunAttempt (optional fields, a job reference as text), made from this
// in one place (follower.cpp's attemptRow); both are kept, as the tests of each read them.
struct JobAttempt {
    int attempt = 0;
    std::int64_t jobId = 0;
    std::string nodes; // SLURM's node list ("n[1-2]")
    double startedAt = 0; // seconds since the epoch
    double endedAt = 0; // 0: the batch script did not see its end (preempted, killed)
    int exitCode = -1; // the launchers' (srun's) exit code; -1: not seen
    std::int64_t resumedStep = 0; // the optimizer steps of the checkpoint it resumed from; 0: a fresh start
    std::string resumedFrom; // that checkpoint's folder
    // The nodes that did not see the run folder ("n3 n4"; the batch script's probe): the attempt
    // ended before any rank started. Empty: every node saw it.
    std::string nodesWithoutFolder;
    // The nodes SLURM lost while the attempt ran ("n2 (down*: Not responding)"), as its follower
    // wrote them; empty: none known.
    std::string lostNodes;
};

// The attempts in <runDir>/attempts/, in order (0, 1, ... while the folders go on). What a node's
// plan says it resumed from comes from node 0's plan.json.
std::vector<JobAttempt> readAttempts(const std::filesystem::path& runDir);

// Every attempt's events of every node into <runDir>/events.jsonl. What an attempt did past the
// step the next one resumed from (steps, evals, checkpoints it redid) is left out; what ended an
// attempt that was not the last (its `done`, an error such as a lost node) becomes a warning log
// event naming the attempt, so that the run's outcome is the last attempt's. The count of events
// written; an error when a node of an attempt left no events file.
Result<std::int64_t> gatherAttemptEvents(const std::filesystem::path& runDir, int nodes, const std::vector<JobAttempt>& attempts);

} // namespace shardscope::cluster
