#pragma once

// Runs on a SLURM cluster, driven through SLURM's command-line tools and their text output (the
// formats read the same from 21.08 to 25.11; SchedMD advises against the C API, and JSON output
// differs between versions: ../shared/refs/cluster/README.md §4). Three pieces:
//   ClusterProfile  where and how to run: partition, nodes, CPUs per task, time limit, account,
//                   QoS, extra #SBATCH lines, and the folder every node and this machine see
//                   (named profiles in $SHARDSCOPE_HOME/clusters.ini)
//   batchScript     the sbatch script of a run: one Shardscope launcher per node (srun), each
//                   taking its machine rank from SLURM_NODEID in its own task, the head node's
//                   address from `scontrol show node` (node names need not resolve), a
//                   rendezvous port derived from the job id; SIGUSR1 before the time limit, a
//                   checkpoint on every rank, a requeue, and the next attempt resuming from it
//   SlurmClient     sinfo, sbatch (--test-only, --parsable), squeue, scontrol, scancel: on this
//                   machine, or on a login node over SSH (the profile's login)
// The parsing is kept apart from the running (parse*), so it is tested on SLURM's own text.
// Qt-free and torch-free.

#include "engine/common/result.h"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace shardscope::cluster {

struct ClusterProfile {
    std::string name = "default";
    std::string partition; // empty: the cluster's default partition
    int cpusPerTask = 0; // 0: SLURM's default
    std::string timeLimit; // sbatch --time (e.g. 01:30:00); empty: the partition's
    // SIGUSR1 this long before the time limit (SLURM may send it up to 60 s earlier): the ranks
    // save a checkpoint and the job requeues itself to resume from it.
    int warningSeconds = 120;
    std::string account;
    std::string qos;
    std::vector<std::string> extraSbatch; // more #SBATCH lines, as written (e.g. --gres=gpu:8)
    std::string sharedFolder; // seen by this machine and every node: runs go to <it>/runs/<name>
    // SLURM's commands run on this login node over SSH ("user@host"; empty: on this machine, where
    // they must then be installed). The shared folder must be at the same path here and there.
    std::string login;
    std::vector<std::string> sshOptions; // more of ssh's arguments (ssh_options = -p 2222 -i ~/.ssh/key)
};

// sbatch --time in seconds: "M", "M:S", "H:M:S", "D-H", "D-H:M", "D-H:M:S"; none for "" (the
// partition's), "UNLIMITED"/"INFINITE", or text that is not a time (an error names it).
Result<std::optional<long>> timeLimitSeconds(const std::string& text);
// Whether a warning warningSeconds before this time limit leaves the job time to train: SLURM
// sends it on a 30 s tick once the time left is under warning + 30 s, so a limit within that
// would warn every attempt as it starts (one step, a checkpoint, a requeue, again and again).
// An error saying what to change; fine without a limit.
Result<void> checkWarningFits(const ClusterProfile& profile);

// The GPUs a node of this profile has for the job, from its sbatch lines (--gres=gpu[:type]:N,
// --gpus-per-node=N); 0: none asked for.
int gpusPerNode(const ClusterProfile& profile);

// The profiles of an INI file: one [name] section each, keys partition, cpus_per_task, time,
// warning_seconds, account, qos, shared_folder, sbatch (repeatable), login, ssh_options. An unknown key or a bad number is an error
// naming the file, the line and the key.
Result<std::map<std::string, ClusterProfile>> parseProfiles(const std::string& text, const std::string& source);
// The profiles file: `given`, else $SHARDSCOPE_HOME/clusters.ini (the workbench and the CLI share it).
std::filesystem::path profilesFile(const std::filesystem::path& given = {});
// Every profile of `file`; without the file: an error showing what to write there.
Result<std::map<std::string, ClusterProfile>> loadProfiles(const std::filesystem::path& file);
// The profile `name` of `file`; without the file or the section: an error saying where to write it.
Result<ClusterProfile> loadProfile(const std::filesystem::path& file, const std::string& name);
// A profile as its [name] section of the profiles file (every key it sets, one a line).
std::string formatProfile(const ClusterProfile& profile);
// `text` (a profiles file) with the section [name] replaced by `section` (appended when it has
// none; removed when `section` is empty). Everything else, the user's comments too, stays as it
// was, byte for byte.
std::string replaceProfileSection(const std::string& text, const std::string& name, const std::string& section);
// Saves `profile` into `file` (replacing its section, or adding one) or, with `remove`, takes the
// section out. The result is read back before it is written: a profile the file could not load is
// refused and the file left as it was. The file before the change is kept beside it (<file>.previous).
Result<void> saveProfile(const std::filesystem::path& file, const ClusterProfile& profile, bool remove = false);

// An attempt of the job (0, then one more after each requeue): <runDir>/attempts/<attempt>, with
// attempt.txt (job_id=, nodes=, started=, then ended= and exit= when it ends in time).
std::filesystem::path attemptDir(const std::filesystem::path& runDir, int attempt);
// Where each node's launcher keeps its run of an attempt (rank events, logs): <attempt dir>/node<N>.
std::filesystem::path nodeRunDir(const std::filesystem::path& runDir, int attempt, int node);

struct Partition {
    std::string name;
    bool isDefault = false;
    bool up = false;
    int nodes = 0;
    int cpusPerNode = 0;
};
// `sinfo -h -o '%P|%a|%D|%c'`: "debug*|up|3|1" per line.
Result<std::vector<Partition>> parsePartitions(const std::string& text);

// A job as `squeue -h -j ID -o '%T|%r|%N'` shows it ("PENDING|Resources|" or "RUNNING|None|n[1-2]"),
// or as `scontrol -o show job ID` once it has left the queue (JobState=, Reason=, NodeList=, ExitCode=).
struct JobState {
    std::string state; // PENDING, RUNNING, COMPLETING, COMPLETED, FAILED, CANCELLED, TIMEOUT, ...
    std::string reason; // "None" when none
    std::string nodes;
    std::string exitCode; // "0:0" (code:signal), from scontrol
    bool ended() const;
};
std::optional<JobState> parseSqueueLine(const std::string& line);
std::map<std::string, std::string> parseScontrolRecord(const std::string& text); // "Key=Value Key=Value ..."
// What a pending reason means and what to do about it, for the user.
std::string pendingAdvice(const std::string& reason, std::int64_t jobId = 0);

// The nodes of `sinfo -h -N -o '%N|%T|%E'` that SLURM counts lost (down, failing, or not
// responding: its state ends in '*'), each as "n2 (down*: Not responding)", joined by ", ". Empty
// when none.
std::string lostNodesOf(const std::string& sinfoLines);

// `sbatch --parsable`: "123" or "123;cluster".
Result<std::int64_t> parseJobId(const std::string& text);

class SlurmClient {
public:
    SlurmClient() = default; // SLURM's commands on this machine
    explicit SlurmClient(const ClusterProfile& profile); // on the profile's login node when it has one
    // Whether SLURM's commands can run: on PATH here, or ssh here and sbatch on the login node (asked
    // once, without a password: BatchMode). The error says how to get there.
    Result<void> available() const;
    // "this machine" or "login node HOST": where the commands run, for messages.
    std::string where() const;
    Result<std::vector<Partition>> partitions() const;
    // sbatch --test-only: SLURM checks the script against the cluster and queue without running it.
    Result<void> testSubmit(const std::filesystem::path& script) const;
    Result<std::int64_t> submit(const std::filesystem::path& script) const;
    // scancel: a pending job leaves the queue, a running one's tasks get SIGTERM (they save a
    // checkpoint) and then SIGKILL after KillWait.
    Result<void> cancel(std::int64_t jobId) const;
    // `scontrol show hostnames`: "n[1-2]" -> n1, n2.
    Result<std::vector<std::string>> hostnames(const std::string& nodeList) const;
    // What SLURM says of these nodes that it lost (lostNodesOf); empty when none.
    Result<std::string> lostNodes(const std::string& nodeList) const;
    // squeue while the job is queued or running, scontrol after (SLURM keeps it MinJobAge seconds).
    Result<JobState> state(std::int64_t jobId) const;
    // False when SLURM answers that it has no such job (it forgot it, MinJobAge after its end); an
    // error when it could not be asked.
    Result<bool> knowsJob(std::int64_t jobId) const;

private:
    // The one place a SLURM command runs: here, or as `ssh -o BatchMode=yes ... LOGIN -- program
    // 'arg' ...` (each argument shell-quoted for the login node's shell).
    Result<std::string> run(const std::string& program, const std::vector<std::string>& args) const;

    std::string m_login;
    std::vector<std::string> m_sshOptions;
};

} // namespace shardscope::cluster
