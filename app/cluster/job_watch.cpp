#include "app/cluster/job_watch.h"

#include "app/runs/run_end.h"
#include "engine/common/run_layout.h"
#include "engine/common/user_file.h"

#include <fstream>

namespace shardscope::cluster {

namespace fs = std::filesystem;

EventsTail::EventsTail(fs::path runDir, int nodes) : m_runDir(std::move(runDir)), m_nodes(nodes) { }

std::int64_t EventsTail::readNew(const std::function<void(const protocol::Event&, int node)>& onEvent)
{
    std::int64_t read = 0;
    std::error_code ec;
    for (int attempt = 0; fs::is_directory(attemptDir(m_runDir, attempt), ec); ++attempt) {
        for (int node = 0; node < m_nodes; ++node) {
            const fs::path file = RunLayout(nodeRunDir(m_runDir, attempt, node)).eventsFile();
            if (!fs::exists(file, ec))
                continue; // not started yet
            Tail& tail = m_tails[file];
            // At most 64 MiB a look (the rest at the next); a FIFO or a device in its place is
            // refused, not read (it would block the follower or never end).
            auto chunk = readUserFileFrom(file, "a node's events.jsonl", tail.offset, 64u << 20);
            if (!chunk) {
                m_refused = chunk.error().message;
                continue;
            }
            tail.offset += chunk->size();
            tail.partial += *chunk;
            std::size_t start = 0;
            for (std::size_t end; (end = tail.partial.find('\n', start)) != std::string::npos; start = end + 1) {
                const std::string_view line(tail.partial.data() + start, end - start);
                if (line.empty())
                    continue;
                if (auto event = protocol::decodeEvent(line)) {
                    onEvent(*event, node);
                    ++read;
                } else {
                    ++m_malformed;
                }
            }
            tail.partial.erase(0, start);
            if (tail.partial.size() > (64u << 20)) { // no event is that long: not a file of events
                tail.partial.clear();
                ++m_malformed;
            }
        }
    }
    return read;
}

storage::RunEnd jobEnd(const JobState& state, const std::vector<protocol::Event>& events, int worldSize, int processesPerNode,
                       const std::vector<std::string>& nodeNames, const std::string& nodesWithoutFolder,
                       const std::string& runDir)
{
    runs::RunEvidence evidence;
    evidence.ranks = runs::testimonyOf(events);
    for (int r = 0; r < worldSize; ++r)
        evidence.world.insert(r);
    evidence.job = runs::ClusterJobEnd{state.state, state.nodes,        state.exitCode, processesPerNode,
                                       nodeNames,   nodesWithoutFolder, runDir};
    return runs::decideRunEnd(evidence).end;
}

} // namespace shardscope::cluster
