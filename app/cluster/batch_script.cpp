#include "app/cluster/batch_script.h"

#include "engine/common/run_layout.h"
#include "engine/common/user_file.h"
#include "engine/plan/script_plan.h"

#include <cstdio>
#include <random>
#include <cstdlib>
#include <sstream>
#include <string_view>

namespace shardscope::cluster {

std::filesystem::path folderMarkerFile(const std::filesystem::path& runDir) { return RunLayout(runDir).folderMarkerFile(); }

std::string newFolderMarker()
{
    std::random_device random;
    char text[33];
    std::snprintf(text, sizeof text, "%08x%08x%08x%08x", random(), random(), random(), random());
    return text;
}

namespace {

// The batch script's first step: every node reads the marker written at submission, or the job
// ends before any rank starts, naming the nodes that could not.
void writeFolderProbe(std::ostream& out, const BatchRequest& r)
{
    const RunLayout shell("$run_dir"); // the run folder's names as the script's shell spells them
    const std::string attemptRecord = shell.attemptRecordFile("$attempt").string();
    out << "# Every node must see the run folder (the profile's shared_folder, mounted at the same path on\n"
           "# every node): one task per node reads the marker written at submission (three tries: a network\n"
           "# filesystem may not show a new file at once; 30 s each at most: a mount that hangs). A node that\n"
           "# cannot is named, and the job ends here, before any rank starts. (A task that prints nothing,\n"
           "# killed by a signal, names no node.)\n"
           "unseen=$(srun --nodes="
        << r.nodes
        << " --ntasks-per-node=1 bash -c 'for try in 1 2 3; do [ \"$(timeout -s KILL 30 cat \"$1\" 2>/dev/null)\" = \"$2\" ] "
           "&& exit 0; sleep 2; done; echo \"unseen $SLURMD_NODENAME\"' \\\n"
           "  _ \""
        << shell.folderMarkerFile().string() << "\" " << config::shellQuote(r.folderMarker)
        << " 2>/dev/null | sed -n 's/^unseen //p' | tr '\\n' ' ') || true\n"
           "if [ -n \"${unseen// }\" ]; then\n"
           "  echo \"$unseen\" > \""
        << shell.unseenFolderFile("$attempt").string()
        << "\"\n"
           "  echo \"shardscope: node(s) $unseen do not see $run_dir: no rank started\"\n"
           "  printf 'ended=%s\\nexit=%s\\n' \"$(date +%s)\" 3 >> \""
        << attemptRecord
        << "\"\n"
           "  exit 3\n"
           "fi\n";
}

} // namespace

int nodesOfBatchScript(const std::filesystem::path& runDir)
{
    // A script this Shardscope wrote is a few KiB; its node count is one a cluster has (a script
    // edited to ask for 2^31 nodes would have the follower look for as many node folders).
    constexpr int kMostNodes = 65536;
    auto text = readUserFile(RunLayout(runDir).batchScriptFile(), {"a run's batch script", 1u << 20, std::chrono::seconds(10)});
    std::istringstream in(text ? *text : std::string());
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("#SBATCH --nodes=", 0) == 0) {
            const long nodes = std::strtol(line.c_str() + std::string_view("#SBATCH --nodes=").size(), nullptr, 10);
            return nodes > 0 && nodes <= kMostNodes ? static_cast<int>(nodes) : 0;
        }
    return 0;
}

std::string batchScript(const BatchRequest& r)
{
    const ClusterProfile& p = r.profile;
    // The run folder's names as the script's shell spells them ("$run_dir/attempts/$attempt/...").
    const RunLayout shell("$run_dir");
    const std::string attemptDir = shell.attemptDir("$attempt").string();
    const std::string attemptRecord = shell.attemptRecordFile("$attempt").string();
    std::ostringstream out;
    out << "#!/bin/bash\n";
    out << "#SBATCH --job-name=" << r.runName << "\n";
    out << "#SBATCH --nodes=" << r.nodes << "\n";
    out << "#SBATCH --ntasks-per-node=1\n";
    if (p.cpusPerTask > 0)
        out << "#SBATCH --cpus-per-task=" << p.cpusPerTask << "\n";
    if (!p.partition.empty())
        out << "#SBATCH --partition=" << p.partition << "\n";
    if (!p.timeLimit.empty())
        out << "#SBATCH --time=" << p.timeLimit << "\n";
    if (!p.account.empty())
        out << "#SBATCH --account=" << p.account << "\n";
    if (!p.qos.empty())
        out << "#SBATCH --qos=" << p.qos << "\n";
    out << "#SBATCH --output=" << RunLayout(r.runDir).slurmOutputPattern().string() << "\n";
    out << "#SBATCH --open-mode=append\n";
    if (r.warnBeforeTimeLimit) {
        out << "#SBATCH --requeue\n";
        out << "#SBATCH --signal=USR1@" << p.warningSeconds << "\n";
    }
    for (const auto& line : p.extraSbatch)
        out << "#SBATCH " << line << "\n";
    out << "#\n"
           "# Written by `shardscope launch --target slurm` for run "
        << r.runName << ". One Shardscope launcher per node (srun, one task each), which starts that node's "
        << r.processesPerNode
        << " rank(s).\n"
           "set -euo pipefail\n"
           "run_dir="
        << config::shellQuote(r.runDir.string())
        << "\n"
           "# Each attempt of the job (SLURM_RESTART_COUNT counts its requeues) keeps its nodes' runs in\n"
           "# attempts/<attempt>/ and resumes from the newest whole checkpoint of checkpoints/ (whole: its\n"
           "# manifest.json is written last), which every node and attempt shares.\n"
           "attempt=${SLURM_RESTART_COUNT:-0}\n"
           "resume=()\n"
           "if compgen -G \""
        << shell.checkpointsDir().string()
        << "/step_*/manifest.json\" > /dev/null; then\n"
           "  resume=(--resume_from_checkpoint \""
        << shell.checkpointsDir().string()
        << "\")\n"
           "fi\n"
           "mkdir -p \""
        << attemptDir
        << "\"\n"
           "printf 'job_id=%s\\nnodes=%s\\nstarted=%s\\n' \"$SLURM_JOB_ID\" \"$SLURM_JOB_NODELIST\" \"$(date +%s)\" \\\n"
           "  > \""
        << attemptRecord
        << "\"\n"
           "# SIGTERM (a preemption, scancel, the time limit itself) reaches the launchers and ranks, which\n"
           "# save a checkpoint; this shell waits for them instead of ending the job at once.\n"
           "trap 'echo \"shardscope: SIGTERM: the ranks save a checkpoint and stop\"' TERM\n";
    if (!r.folderMarker.empty())
        writeFolderProbe(out, r);
    out << "# The head node (the allocation's first) by its address: node names need not resolve. (sed\n"
           "# reads the whole list: with head, scontrol could die of SIGPIPE and pipefail end the job.)\n"
           "head_node=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | sed -n 1p)\n"
           "head_addr=$(scontrol -o show node \"$head_node\" | tr ' ' '\\n' | sed -n 's/^NodeAddr=//p')\n"
           "# One rendezvous port per job, the same on every node.\n"
           "port=$((20000 + SLURM_JOB_ID % 10000))\n"
           "export SHARDSCOPE_HEAD_ADDR=\"$head_addr\" SHARDSCOPE_HEAD_PORT=\"$port\"\n";
    if (r.warnBeforeTimeLimit)
        out << "# USR1 (--signal above) reaches every task before the time limit, launchers and ranks alike: the\n"
               "# ranks agree on a step, all save a checkpoint there and stop, and the launchers exit 75; the job\n"
               "# then goes back in the queue and its next attempt resumes. (SIGTERM, a preemption's or scancel's,\n"
               "# saves one the same way but exits 143: SLURM requeues a preempted job itself, a cancelled one stays so.)\n";
    else
        out << "# A user's script: no warning before the time limit (its Python ranks would die of SIGUSR1) and no\n"
               "# requeue; what it saves is its own.\n";
    out << "# Each node's machine rank is its own task's SLURM_NODEID: the single quotes keep it for the\n"
           "# task to expand (expanded here, every node would be machine 0). After the first launcher\n"
           "# exits, the others get 120 s to finish before srun ends them.\n"
           "status=0\n"
           "srun --nodes="
        << r.nodes
        << " --ntasks-per-node=1 --wait=120 bash -c '\n"
           "  exec \"$0\" launch --num_machines "
        << r.nodes << " --num_processes " << r.nodes * r.processesPerNode
        << " --machine_rank \"$SLURM_NODEID\" \\\n"
           "    --main_process_ip \"$SHARDSCOPE_HEAD_ADDR\" --main_process_port \"$SHARDSCOPE_HEAD_PORT\" \\\n"
           "    --runs_dir \"$1\" --run_name \""
        << RunLayout::nodeFolderName("$SLURM_NODEID") << "\" --no_history \"${@:2}\"' \\\n  " << config::shellQuote(r.shardscope)
        << " \"" << attemptDir << "\" --checkpoints_dir \"" << shell.checkpointsDir().string() << "\"";
    for (const auto& arg : r.launchArgs)
        out << " " << config::shellQuote(arg);
    out << " \"${resume[@]}\"";
    if (!r.engineFlags.empty()) {
        out << " --";
        for (const auto& flag : r.engineFlags)
            out << " " << config::shellQuote(flag);
    }
    out << " || status=$?\n"
           "printf 'ended=%s\\nexit=%s\\n' \"$(date +%s)\" \"$status\" >> \""
        << attemptRecord
        << "\"\n"
           "if [ \"$status\" -eq 75 ]; then\n"
           "  echo \"shardscope: every rank saved a checkpoint before the time limit; requeueing job $SLURM_JOB_ID\"\n"
           "  scontrol requeue \"$SLURM_JOB_ID\"\n"
           "fi\n"
           "exit \"$status\"\n";
    return out.str();
}

} // namespace shardscope::cluster
