#pragma once

// Following a cluster job from the machine that submitted it. The nodes' launchers write their
// events into the shared run folder (attempts/<N>/node<M>/events.jsonl); this machine reads what
// they add as they add it and records it in its own history, which is never written over a
// network filesystem. When the job has ended, its end is decided from SLURM's state and what the
// ranks said. Qt-free and torch-free.

#include "app/cluster/slurm.h"
#include "engine/protocol/events.h"
#include "storage/run_types.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace shardscope::cluster {

// The events files of a run folder's attempts and nodes, read on from where the last read ended.
class EventsTail {
public:
    EventsTail(std::filesystem::path runDir, int nodes);
    // What the files gained since the last call, complete lines only (a line still being written
    // waits for its end), every attempt's, in file order; each decoded event goes to `onEvent`
    // with the node it came from. Returns the events read; lines that are not events are counted
    // in malformed().
    std::int64_t readNew(const std::function<void(const protocol::Event&, int node)>& onEvent);
    std::int64_t malformed() const { return m_malformed; }
    // The last node events file that was not one (a FIFO, a device): skipped; empty when none.
    const std::string& refused() const { return m_refused; }

private:
    struct Tail {
        std::uint64_t offset = 0;
        std::string partial;
    };
    std::filesystem::path m_runDir;
    int m_nodes;
    std::map<std::filesystem::path, Tail> m_tails;
    std::int64_t m_malformed = 0;
    std::string m_refused;
};

// How a job ended, for the history: SLURM's end state and the ranks' events handed to the one
// decision of a run's end (runs::decideRunEnd, app/runs/run_end.h). `nodeNames` are the nodes of
// the last attempt in SLURM's order (node M runs ranks M*perNode ..); `nodesWithoutFolder` those of
// its nodes that did not see the run folder `runDir` (the batch script's probe).
storage::RunEnd jobEnd(const JobState& state, const std::vector<protocol::Event>& events, int worldSize, int processesPerNode,
                       const std::vector<std::string>& nodeNames, const std::string& nodesWithoutFolder = {},
                       const std::string& runDir = {});

} // namespace shardscope::cluster
