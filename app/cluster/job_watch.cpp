#include "app/cluster/job_watch.h"

#include "app/launcher/run_import.h"

#include <fstream>
#include <set>

namespace shardscope::cluster {

namespace fs = std::filesystem;

EventsTail::EventsTail(fs::path runDir, int nodes) : m_runDir(std::move(runDir)), m_nodes(nodes) { }

std::int64_t EventsTail::readNew(const std::function<void(const protocol::Event&, int node)>& onEvent)
{
    std::int64_t read = 0;
    std::error_code ec;
    for (int attempt = 0; fs::is_directory(attemptDir(m_runDir, attempt), ec); ++attempt) {
        for (int node = 0; node < m_nodes; ++node) {
            const fs::path file = nodeRunDir(m_runDir, attempt, node) / "events.jsonl";
            std::ifstream in(file, std::ios::binary);
            if (!in)
                continue; // not started yet
            Tail& tail = m_tails[file];
            in.seekg(static_cast<std::streamoff>(tail.offset));
            std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
            tail.offset += chunk.size();
            tail.partial += chunk;
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
        }
    }
    return read;
}

namespace {

// The node that runs `rank`, for the user: "n2 (node 1)".
std::string nodeOf(int rank, int processesPerNode, const std::vector<std::string>& nodeNames)
{
    const int node = rank / std::max(1, processesPerNode);
    return (static_cast<std::size_t>(node) < nodeNames.size() ? nodeNames[static_cast<std::size_t>(node)] + " " : "") + "(node "
           + std::to_string(node) + ")";
}

// What SLURM's end state says beyond the ranks, for a failed run.
std::string whatSlurmSays(const JobState& state, const std::string& word)
{
    if (word == "TIMEOUT")
        return "the job reached its time limit (TIMEOUT) with no checkpoint saved for it: give the profile a longer time, "
               "or a warning_seconds long enough for a step and a checkpoint";
    if (word == "NODE_FAIL")
        return "SLURM lost a node of the job (NODE_FAIL" + (state.nodes.empty() ? "" : ", nodes " + state.nodes) + ")";
    if (word == "OUT_OF_MEMORY")
        return "a node ran out of host memory (OUT_OF_MEMORY); ask for more memory (--mem in the profile's sbatch lines)";
    if (word == "PREEMPTED")
        return "the job was preempted and not requeued (PREEMPTED)";
    if (word == "BOOT_FAIL" || word == "DEADLINE")
        return "the job ended " + word;
    return "the job ended " + word + (state.exitCode.empty() ? "" : " (exit " + state.exitCode + ")");
}

} // namespace

storage::RunEnd jobEnd(const JobState& state, const std::vector<protocol::Event>& events, int worldSize, int processesPerNode,
                       const std::vector<std::string>& nodeNames)
{
    std::set<int> ranks;
    for (int r = 0; r < worldSize; ++r)
        ranks.insert(r);
    std::string said;
    storage::RunEnd end = endFromEvents(events, ranks, said);
    if (end.status == storage::RunStatus::Completed)
        return end;
    const std::string word = state.state.substr(0, state.state.find(' '));
    if (word == "CANCELLED") {
        end.status = storage::RunStatus::Cancelled;
        end.rootCauseRank.reset();
        end.error = "the job was cancelled (scancel)";
        return end;
    }
    end.status = storage::RunStatus::Failed;
    if (end.rootCauseRank) {
        end.error = "rank " + std::to_string(*end.rootCauseRank) + " on "
                    + nodeOf(*end.rootCauseRank, processesPerNode, nodeNames) + " failed first: " + end.error;
    } else {
        // The ranks that said neither done nor an error of their own: the peers that lost them said "peer".
        std::set<int> spoke;
        for (const auto& event : events)
            if (std::holds_alternative<protocol::DoneEvent>(event.body)
                || std::holds_alternative<protocol::ErrorEvent>(event.body))
                spoke.insert(event.rank);
        for (int rank : ranks)
            if (!spoke.count(rank)) {
                end.rootCauseRank = rank;
                end.error = "rank " + std::to_string(rank) + " on " + nodeOf(rank, processesPerNode, nodeNames)
                            + " ended without a word while its peers lost it: its node's job step was killed, or the node "
                              "went down; its log is in that node's folder of the run";
                break;
            }
    }
    const std::string slurm = whatSlurmSays(state, word);
    end.error = end.error.empty() ? slurm : end.error + "; " + slurm;
    return end;
}

} // namespace shardscope::cluster
