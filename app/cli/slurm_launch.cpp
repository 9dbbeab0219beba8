#include "app/cli/slurm_launch.h"
#include "engine/common/wall_clock.h"

#include "app/cluster/attempts.h"
#include "app/cluster/job_watch.h"
#include "app/cluster/slurm.h"
#include "app/cluster/submission.h"
#include "app/launcher/program.h"
#include "app/runs/local_run.h"
#include "app/runs/run_import.h"
#include "app/launcher/run_directory.h"
#include "app/launcher/script_run.h"
#include "engine/plan/precision_mode.h"
#include "engine/recipe/recipe.h"
#include "app/launcher/run_recorder.h"
#include "engine/accelerate/yaml_io.h"
#include "storage/run_store.h"
#include "storage/store_paths.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <thread>

namespace shardscope::cli {

namespace {

namespace fs = std::filesystem;

void printError(const std::string& message) { std::cerr << "shardscope launch: error: " << message << "\n"; }

// Copies `from` into the run directory as `name`: the nodes read their inputs from the shared folder.
// A dry run copies nothing (it only shows where the file would go): a preview must leave no run
// folder behind, or the real submission under the same name would be refused.
Result<std::string> copyIn(const std::string& from, const fs::path& runDir, const std::string& name, bool dryRun)
{
    std::error_code ec;
    const fs::path to = runDir / name;
    if (dryRun)
        return to.string();
    fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
    if (ec)
        return makeError("cannot copy " + from + " to " + to.string() + ": " + ec.message());
    return to.string();
}

std::atomic<bool> g_cancelAsked{false};
std::atomic<bool> g_stopFollowing{false}; // `runs follow`: SIGTERM/SIGHUP end the following, not the job

// What the history shows of the job while it is not running yet, or where it runs.
std::string detailOf(const cluster::JobState& state)
{
    if (state.state == "PENDING")
        return "pending (" + state.reason + "): " + cluster::pendingAdvice(state.reason);
    return state.state + (state.nodes.empty() ? "" : " on " + state.nodes);
}

// A file of the run folder the history keeps a copy of (empty when there is none).
std::string readText(const fs::path& file)
{
    auto text = config::readTextFile(file.string());
    return text ? *text : std::string();
}

void warnIf(const Result<void>& result)
{
    if (!result)
        std::cerr << "shardscope launch: warning: the history: " << result.error().message << "\n";
}

storage::RunAttempt attemptRow(const cluster::JobAttempt& a)
{
    storage::RunAttempt row;
    row.attempt = a.attempt;
    row.jobId = std::to_string(a.jobId);
    row.nodes = a.nodes;
    if (a.startedAt > 0)
        row.startedAt = a.startedAt;
    if (a.endedAt > 0)
        row.endedAt = a.endedAt;
    if (a.exitCode >= 0)
        row.exitCode = a.exitCode;
    row.resumedStep = a.resumedStep;
    row.resumedFrom = a.resumedFrom;
    return row;
}

// The last attempt's nodes that did not see the run folder (the batch script's probe).
std::string unseenFolderNodes(const std::vector<cluster::JobAttempt>& attempts)
{
    return attempts.empty() ? std::string() : attempts.back().nodesWithoutFolder;
}

// One look at a job, for `launch` and `runs follow` alike: a Stop asked for (SIGINT) cancels it
// (scancel); SLURM's state, and when what it says has changed, that into the history (the run
// marked running once it runs). None, having said why, when SLURM could not be asked.
struct JobWatch {
    const cluster::SlurmClient& slurm;
    std::int64_t jobId = 0;
    const char* who = ""; // "shardscope launch", "shardscope runs follow"
    storage::RunStore* store = nullptr; // none: followed without a history
    std::int64_t runId = 0;
    std::string said; // what the history shows now
    bool running = false;

    std::optional<cluster::JobState> look()
    {
        if (g_cancelAsked.exchange(false)) {
            std::cout << who << ": cancelling job " << jobId << " (scancel)" << std::endl;
            if (auto cancelled = slurm.cancel(jobId); !cancelled)
                std::cerr << who << ": " << cancelled.error().message << "\n";
        }
        auto state = slurm.state(jobId);
        if (!state) {
            std::cerr << who << ": " << state.error().message << "\n";
            return std::nullopt;
        }
        if (const std::string now = detailOf(*state); now != said && !state->ended()) {
            said = now;
            std::cout << who << ": job " << jobId << " is " << now << std::endl;
            if (store) {
                warnIf(store->setStatusDetail(runId, now));
                if (state->state == "RUNNING" && !running)
                    warnIf(store->markRunning(runId));
            }
            running = running || state->state == "RUNNING";
        }
        return *state;
    }
};

// The job's run in this machine's history from its submission on: pending with SLURM's reason,
// running (with every event the nodes write into the shared folder, as they write it), and its
// end, with each attempt when it was requeued. Without a history (--no_history), only followed.
class JobFollower {
public:
    JobFollower(const cluster::SlurmClient& slurm, std::int64_t jobId, const SlurmLaunch& launch, fs::path runDir,
                int processesPerNode, double submittedAt)
        : m_slurm(slurm), m_jobId(jobId), m_launch(launch), m_runDir(std::move(runDir)), m_perNode(processesPerNode),
          m_tail(m_runDir, launch.numMachines), m_submittedAt(submittedAt)
    {
    }

    void startRecording(const fs::path& home, const PlannedShape& shape)
    {
        storage::NewRun run;
        run.distributedType = shape.distributedType;
        run.mixedPrecision = shape.mixedPrecision;
        run.tags = m_launch.tags;
        run.name = m_launch.runName;
        run.runDir = m_runDir.string();
        run.recipeText = readText(m_runDir / "recipe.yaml");
        run.configText = readText(m_runDir / "config.yaml");
        run.worldSize = m_launch.numProcesses;
        run.notes = "SLURM job " + std::to_string(m_jobId) + " (" + std::to_string(m_launch.numMachines) + " nodes)";
        auto recorder = RunRecorder::start(home, run, RunRecorder::Starts::Later);
        auto store = storage::RunStore::open(storage::historyFile(home));
        if (!recorder || !store) {
            std::cerr << "shardscope launch: warning: the run is not recorded in the history: "
                      << (!recorder ? recorder.error().message : store.error().message) << "\n";
            return;
        }
        m_recorder = std::move(*recorder);
        m_store.emplace(std::move(*store));
        warnIf(m_store->setJob(m_recorder->runId(), "slurm:" + std::to_string(m_jobId)));
        std::cout << "shardscope launch: run " << m_recorder->runId() << " in the history (pending)" << std::endl;
    }

    // Until the job ends; Ctrl-C (or the workbench's Stop, SIGINT) cancels it on the way.
    cluster::JobState follow()
    {
        JobWatch watch{m_slurm, m_jobId, "shardscope launch", m_store ? &*m_store : nullptr, m_recorder ? m_recorder->runId() : 0,
                       {},      false};
        while (true) {
            const auto state = watch.look();
            if (!state)
                return {"UNKNOWN", {}, {}, {}};
            readEvents();
            if (state->ended()) {
                readEvents();
                return *state;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
    }

    // The end into the history: every attempt's events gathered into the run folder (what a later
    // attempt redid left out), the end decided from them and SLURM's state, each attempt recorded.
    // The run's status word ("completed", ...).
    std::string recordEnd(const cluster::JobState& state)
    {
        const auto attempts = cluster::readAttempts(m_runDir);
        if (attempts.empty())
            std::cout << "shardscope launch: the job left nothing in " << m_runDir.string()
                      << ": its script never ran there. The nodes may not see this folder (the profile's shared_folder "
                         "must be mounted at the same path on every node), or the job failed before its script started; "
                         "`scontrol show job "
                      << m_jobId << "` or SLURM's log on the node says more\n";
        if (auto gathered = cluster::gatherAttemptEvents(m_runDir, m_launch.numMachines, attempts);
            !gathered && (attempts.empty() || attempts.back().nodesWithoutFolder.empty()))
            std::cerr << "shardscope launch: warning: " << gathered.error().message << "\n";
        std::int64_t malformed = 0;
        auto events = readRunEvents(m_runDir, malformed);
        std::vector<std::string> nodeNames;
        if (auto names = m_slurm.hostnames(attempts.empty() ? state.nodes : attempts.back().nodes))
            nodeNames = *names;
        storage::RunEnd end = cluster::jobEnd(state, events ? *events : std::vector<protocol::Event>{}, m_launch.numProcesses,
                                              m_perNode, nodeNames, unseenFolderNodes(attempts), m_runDir.string());
        for (const auto& a : attempts)
            if (a.attempt > 0)
                std::cout << "shardscope launch: attempt " << a.attempt << " resumed after step " << a.resumedStep << " from "
                          << a.resumedFrom << "\n";
        if (!end.error.empty() && end.status != storage::RunStatus::Completed)
            std::cout << "shardscope launch: " << end.error << "\n";
        if (!m_recorder)
            return std::string(storage::statusName(end.status));
        for (const auto& a : attempts)
            warnIf(m_store->recordAttempt(m_recorder->runId(), attemptRow(a)));
        warnIf(m_store->setStatusDetail(m_recorder->runId(), ""));
        if (auto finished = m_recorder->finish(end); !finished)
            std::cerr << "shardscope launch: warning: recording the end of the run failed: " << finished.error().message << "\n";
        std::cout << "shardscope launch: run " << m_recorder->runId() << " in the history: " << storage::statusName(end.status)
                  << " (" << attempts.size() << (attempts.size() == 1 ? " attempt" : " attempts") << ")\n";
        return std::string(storage::statusName(end.status));
    }

    // How the nodes' events reached the history: from the submission to the first step recorded,
    // the events recorded, how fast, and how far behind the nodes (the event's own time to the
    // moment it was recorded). Printed at the end (docs/BENCHMARKS.md, "SLURM").
    void printIngestion() const
    {
        if (m_lags.empty())
            return;
        std::vector<double> lags = m_lags;
        std::sort(lags.begin(), lags.end());
        const double window = m_lastIngested - m_firstIngested;
        std::printf("shardscope launch: %zu events from the nodes recorded (%.0f a second while they came); lag behind the "
                    "nodes median %.3f s, max %.3f s; submission to the first step recorded %.2f s\n",
                    lags.size(), window > 0 ? static_cast<double>(lags.size()) / window : 0.0, lags[lags.size() / 2], lags.back(),
                    m_firstStepAt > 0 ? m_firstStepAt - m_submittedAt : -1.0);
        std::fflush(stdout);
    }

private:
    void readEvents()
    {
        m_tail.readNew([&](const protocol::Event& event, int) {
            if (m_recorder)
                m_recorder->record(event);
            const double now = unixSeconds();
            m_lags.push_back(std::max(0.0, now - event.time));
            if (m_firstIngested == 0)
                m_firstIngested = now;
            m_lastIngested = now;
            if (m_firstStepAt == 0 && std::holds_alternative<protocol::StepEvent>(event.body))
                m_firstStepAt = now;
        });
    }

    const cluster::SlurmClient& m_slurm;
    std::int64_t m_jobId;
    const SlurmLaunch& m_launch;
    fs::path m_runDir;
    int m_perNode;
    cluster::EventsTail m_tail;
    std::unique_ptr<RunRecorder> m_recorder;
    std::optional<storage::RunStore> m_store;
    double m_submittedAt; // seconds since the epoch, just before sbatch
    double m_firstStepAt = 0, m_firstIngested = 0, m_lastIngested = 0;
    std::vector<double> m_lags;
};

// What another machine that sees the shared folder needs to follow the run (`runs follow DIR`):
// run.json beside the batch script.
void writeSubmissionRecord(const SlurmLaunch& launch, const cluster::ClusterProfile& profile, const PlannedShape& shape,
                           std::int64_t jobId, double submittedAt, const fs::path& runDir)
{
    const cluster::Submission submission{launch.runName,
                                         "slurm:" + std::to_string(jobId),
                                         profile.name,
                                         launch.numMachines,
                                         launch.numProcesses,
                                         shape.distributedType,
                                         shape.mixedPrecision,
                                         launch.tags,
                                         cluster::currentUser(),
                                         storage::LauncherIdentity::current().host,
                                         submittedAt};
    if (auto written = cluster::writeSubmission(runDir, submission); !written)
        std::cerr << "shardscope launch: warning: " << written.error().message
                  << "; another machine cannot follow this run (this one does)\n";
}

// SLURM's client on this machine, the profile's partition, and enough nodes in it.
Result<void> checkCluster(const cluster::SlurmClient& slurm, const cluster::ClusterProfile& profile, const fs::path& profilesFile,
                          int nodes)
{
    if (auto client = slurm.available(); !client)
        return client.error();
    auto partitions = slurm.partitions();
    if (!partitions)
        return partitions.error();
    const cluster::Partition* chosen = nullptr;
    std::string names;
    for (const auto& p : *partitions) {
        names += (names.empty() ? "" : ", ") + p.name;
        if (profile.partition.empty() ? p.isDefault : p.name == profile.partition)
            chosen = &p;
    }
    if (!chosen)
        return makeError(profile.partition.empty() ? "the cluster has no default partition; set partition in [" + profile.name
                                                         + "] of " + profilesFile.string() + " (partitions: " + names + ")"
                                                   : "partition '" + profile.partition + "' of profile [" + profile.name
                                                         + "] does not exist; the cluster's partitions are " + names);
    if (chosen->nodes < nodes)
        return makeError("partition " + chosen->name + " has " + std::to_string(chosen->nodes) + " nodes and the run asks for "
                         + std::to_string(nodes) + " (--num_machines); ask for fewer, or use a larger partition");
    return {};
}

} // namespace

int runSlurmLaunch(const SlurmLaunch& launch, const std::function<std::optional<PlannedShape>(int gpusPerNode)>& checkPlan)
{
    const auto colon = launch.target.find(':');
    const std::string profileName = colon == std::string::npos ? "default" : launch.target.substr(colon + 1);
    auto home = storage::shardscopeHome();
    const fs::path profilesFile = cluster::profilesFile(launch.profilesFile);
    auto profile = cluster::loadProfile(profilesFile, profileName);
    if (!profile) {
        printError(profile.error().message);
        return 2;
    }
    if (launch.recipe.empty() == launch.script.empty()) {
        printError("--target slurm runs a recipe (--recipe R) or a user's script (--script S), one of them");
        return 2;
    }
    if (launch.numProcesses % launch.numMachines != 0) {
        printError("--num_processes " + std::to_string(launch.numProcesses) + " is not a multiple of --num_machines "
                   + std::to_string(launch.numMachines) + " (the nodes)");
        return 2;
    }
    const auto shape = checkPlan(cluster::gpusPerNode(*profile));
    if (!shape)
        return 2;
    if (!launch.recipe.empty()) // a script's job asks for no warning
        if (auto fits = cluster::checkWarningFits(*profile); !fits) {
            printError(fits.error().message);
            return 2;
        }
    const cluster::SlurmClient slurm(*profile);
    if (!launch.dryRun)
        if (auto fits = checkCluster(slurm, *profile, profilesFile, launch.numMachines); !fits) {
            printError(fits.error().message);
            return 2;
        }
    const fs::path runDir = fs::path(profile->sharedFolder) / "runs" / launch.runName;
    std::error_code ec;
    if (fs::exists(runDir, ec)) {
        printError(runDir.string() + " exists: another run has this name; choose another --run_name");
        return 2;
    }
    if (!launch.dryRun)
        fs::create_directories(runDir / "attempts", ec);
    if (ec) {
        printError("cannot create " + runDir.string() + " in the profile's shared folder: " + ec.message());
        return 2;
    }
    cluster::BatchRequest request;
    request.profile = *profile;
    request.runName = launch.runName;
    request.runDir = runDir;
    request.nodes = launch.numMachines;
    request.processesPerNode = launch.numProcesses / launch.numMachines;
    request.shardscope = thisExecutable(launch.programPath).string();
    if (!launch.recipe.empty()) {
        auto recipe = copyIn(launch.recipe, runDir, "recipe.yaml", launch.dryRun);
        if (!recipe) {
            printError(recipe.error().message);
            return 2;
        }
        request.launchArgs = {"--recipe", *recipe};
    } else {
        // The script stays where it is (it may import its neighbours): the nodes must see that path.
        request.launchArgs = {"--script", launch.script, "--python", launch.python};
        request.warnBeforeTimeLimit = false;
    }
    if (!launch.configFile.empty()) {
        auto config = copyIn(launch.configFile, runDir, "config.yaml", launch.dryRun);
        if (!config) {
            printError(config.error().message);
            return 2;
        }
        request.launchArgs.insert(request.launchArgs.end(), {"--config_file", *config});
    }
    request.launchArgs.insert(request.launchArgs.end(), launch.nodeArgs.begin(), launch.nodeArgs.end());
    request.engineFlags = launch.engineFlags;
    request.folderMarker = cluster::newFolderMarker();
    const fs::path script = runDir / "job.sbatch";
    if (launch.dryRun) {
        std::cout << cluster::batchScript(request);
        std::cout << "# (not submitted, nothing written: --dry-run; a submission writes it to " << script.string() << ")\n";
        return 0;
    }
    std::ofstream(script) << cluster::batchScript(request);
    std::ofstream(cluster::folderMarkerFile(runDir)) << request.folderMarker << "\n";
    if (auto tested = slurm.testSubmit(script); !tested) {
        printError("SLURM refuses the job: " + tested.error().message + " (the script: " + script.string() + ")");
        return 2;
    }
    const double submittedAt = unixSeconds();
    auto jobId = slurm.submit(script);
    if (!jobId) {
        printError(jobId.error().message);
        return 1;
    }
    std::ofstream(runDir / "slurm_job_id") << *jobId << "\n";
    writeSubmissionRecord(launch, *profile, *shape, *jobId, submittedAt, runDir);
    std::cout << "shardscope launch: submitted job " << *jobId << " (" << launch.numMachines << " nodes; run folder "
              << runDir.string() << ")" << std::endl;
    JobFollower follower(slurm, *jobId, launch, runDir, request.processesPerNode, submittedAt);
    if (!launch.noHistory && home)
        follower.startRecording(*home, *shape);
    if (launch.detach) {
        std::cout << "shardscope launch: not following it (--detach): `shardscope runs follow " << launch.runName
                  << "` follows it and records its steps and end" << std::endl;
        return 0;
    }
    // Ctrl-C, or the workbench's Stop (SIGINT), cancels the job; its end is still followed.
    struct sigaction cancel { };
    cancel.sa_handler = [](int) { g_cancelAsked.store(true); };
    sigaction(SIGINT, &cancel, nullptr);
    sigaction(SIGTERM, &cancel, nullptr);
    const cluster::JobState end = follower.follow();
    std::cout << "shardscope launch: job " << *jobId << " ended " << end.state << " (exit " << end.exitCode << ")\n";
    const std::string status = follower.recordEnd(end);
    follower.printIngestion();
    return status == "completed" ? 0 : status == "cancelled" ? 130 : 1;
}

} // namespace shardscope::cli

namespace shardscope::cli {

namespace {

// The node count the run's batch script asked for (its "#SBATCH --nodes=N" line); 0 when unknown.
int nodesOfScript(const fs::path& runDir)
{
    std::ifstream in(runDir / "job.sbatch");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("#SBATCH --nodes=", 0) == 0)
            return std::atoi(line.c_str() + std::string_view("#SBATCH --nodes=").size());
    return 0;
}

// What the nodes wrote so far, into the run folder's events.jsonl and the history (the steps the
// history lacks: RunStore::recoverFromEventLog compares with the last step it has per rank).
void catchUp(storage::RunStore& store, std::int64_t runId, const fs::path& runDir, int nodes)
{
    const auto attempts = cluster::readAttempts(runDir);
    if (attempts.empty())
        return;
    (void)cluster::gatherAttemptEvents(runDir, nodes, attempts); // a node not started yet has no file: later
    if (auto recorded = store.recoverFromEventLog(runId); !recorded)
        std::cerr << "shardscope runs follow: warning: " << recorded.error().message << "\n";
}

} // namespace

namespace {

// A cluster run's folder that is in no row of this history: its submission record (run.json) put
// in as a pending run of its job, followed by this process. Another machine's run, or a run whose
// row was lost. A name this history has already gets its job beside it.
Result<std::int64_t> adoptFolder(storage::RunStore& store, const fs::path& runDir)
{
    auto submission = cluster::readSubmission(runDir);
    if (!submission)
        return submission.error();
    storage::NewRun run;
    run.name = submission->name;
    if (store.resolveRun(run.name))
        run.name += " (" + submission->job + ")";
    run.runDir = fs::absolute(runDir).lexically_normal().string();
    run.recipeText = readText(runDir / "recipe.yaml");
    run.configText = readText(runDir / "config.yaml");
    run.distributedType = submission->distributedType;
    run.mixedPrecision = submission->mixedPrecision;
    run.worldSize = submission->numProcesses;
    run.tags = submission->tags;
    run.notes = "SLURM job " + submission->job.substr(6) + " (" + std::to_string(submission->numMachines)
                + " nodes), submitted by " + submission->user + " on " + submission->host + "; followed here";
    auto id = store.createRun(run);
    if (!id)
        return id.error();
    if (auto job = store.setJob(*id, submission->job); !job)
        return job.error();
    return *id;
}

// The run a `runs follow` reference names: an id or a name of this history, or a cluster run's
// folder (its row, or a new one from the folder's run.json). `adopted`: the row was made here now.
Result<std::int64_t> followedRun(storage::RunStore& store, const fs::path& home, const std::string& reference, bool& adopted)
{
    std::error_code ec;
    if (!fs::is_directory(reference, ec))
        return store.resolveRun(reference);
    if (!fs::exists(fs::path(reference) / "slurm_job_id", ec))
        return makeError(reference
                         + " is not a cluster run's folder (it has no slurm_job_id); `runs follow` follows runs "
                           "submitted with `launch --target slurm`");
    if (auto owner = runOwningFolder(store, home, reference))
        return owner->first;
    adopted = true;
    return adoptFolder(store, reference);
}

// SLURM forgets an ended job after a while (MinJobAge): then the run folder says how it ended, when
// its last attempt's batch script saw its end. None when it did not (still running elsewhere, or
// killed with its node: only SLURM could tell).
std::optional<cluster::JobState> endFromFolder(const fs::path& runDir)
{
    const auto attempts = cluster::readAttempts(runDir);
    if (attempts.empty() || attempts.back().endedAt <= 0)
        return std::nullopt;
    const auto& last = attempts.back();
    if (last.exitCode == 75 || last.exitCode == 143) // checkpointed for a requeue: its next attempt may still come
        return std::nullopt;
    return cluster::JobState{last.exitCode == 0 ? "COMPLETED" : "FAILED",
                             "the job has left SLURM's memory; its end is what its batch script wrote", last.nodes,
                             std::to_string(std::max(0, last.exitCode)) + ":0"};
}

// A follower of its own for `reference`, in the background: its own session (a closed terminal or
// workbench does not end it), its output appended to `log`. Its pid.
Result<pid_t> startFollower(const std::string& programPath, const std::string& reference, const fs::path& profilesFile,
                            const fs::path& log)
{
    std::error_code ec;
    fs::create_directories(log.parent_path(), ec);
    const std::string program = thisExecutable(programPath).string();
    int report[2];
    if (::pipe2(report, O_CLOEXEC) != 0)
        return makeError(std::string("cannot start a follower: ") + std::strerror(errno));
    const pid_t child = ::fork();
    if (child < 0) {
        const int error = errno;
        ::close(report[0]);
        ::close(report[1]);
        return makeError(std::string("cannot start a follower: ") + std::strerror(error));
    }
    if (child == 0) {
        // Twice forked: the follower is no child of this short-lived process (no zombie, no
        // parent-death signal), in a session of its own, in no folder a user may unmount.
        ::setsid();
        const pid_t follower = ::fork();
        if (follower != 0) {
            (void)!::write(report[1], &follower, sizeof follower);
            ::_exit(follower > 0 ? 0 : 1);
        }
        (void)!::chdir("/");
        const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        const int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (out >= 0) {
            ::dup2(out, STDOUT_FILENO);
            ::dup2(out, STDERR_FILENO);
        }
        if (in >= 0)
            ::dup2(in, STDIN_FILENO);
        const std::string args[] = {program, "runs", "follow", reference, "--cluster_profiles", profilesFile.string()};
        std::vector<char*> argv;
        for (const auto& arg : args)
            argv.push_back(const_cast<char*>(arg.c_str()));
        argv.push_back(nullptr);
        ::execv(program.c_str(), argv.data());
        const int error = errno; // exec failed: said through the pipe (a successful exec closes it)
        (void)!::write(report[1], &error, sizeof error);
        ::_exit(127);
    }
    ::close(report[1]);
    pid_t follower = -1;
    int execError = 0;
    const bool told = ::read(report[0], &follower, sizeof follower) == static_cast<ssize_t>(sizeof follower);
    const bool execFailed = told && ::read(report[0], &execError, sizeof execError) == static_cast<ssize_t>(sizeof execError);
    ::close(report[0]);
    int status = 0;
    ::waitpid(child, &status, 0);
    if (!told || follower <= 0)
        return makeError("cannot start a follower of " + reference);
    if (execFailed)
        return makeError("cannot start a follower of " + reference + ": " + program + ": " + std::strerror(execError));
    return follower;
}

// Where to ask SLURM of a run: a profile of this machine whose shared folder holds the run folder
// (the one its run.json names first: two profiles may share a folder), with its login node if it
// has one; on this machine when none does. A profile of the same name elsewhere may be another
// cluster: the folder decides.
cluster::SlurmClient clientOf(const fs::path& runDir, const fs::path& profilesFileGiven)
{
    auto profiles = cluster::loadProfiles(cluster::profilesFile(profilesFileGiven));
    if (!profiles)
        return {};
    auto submission = cluster::readSubmission(runDir);
    const std::string named = submission ? submission->profile : std::string();
    std::error_code ec;
    const fs::path folder = fs::weakly_canonical(runDir, ec).parent_path();
    const cluster::ClusterProfile* chosen = nullptr;
    for (const auto& [name, profile] : *profiles)
        if (!profile.sharedFolder.empty() && fs::weakly_canonical(fs::path(profile.sharedFolder) / "runs", ec) == folder
            && (!chosen || name == named))
            chosen = &profile;
    if (!chosen)
        return {};
    const cluster::SlurmClient client(*chosen);
    if (!chosen->login.empty())
        std::cout << "shardscope runs follow: SLURM's commands on " << client.where() << " (profile [" << chosen->name << "])"
                  << std::endl;
    return client;
}

// Whether this process's user owns the run folder's run.json (who submitted it: the file's owner,
// not what it says, which anyone who can write the shared folder could write).
bool ownedByThisUser(const fs::path& runDir)
{
    struct stat info { };
    return ::stat((runDir / "run.json").c_str(), &info) == 0 && info.st_uid == ::geteuid();
}

// `runs follow --all` catches up with the user's runs submitted within this window, starting at
// most this many followers at a time (each asks SLURM every few seconds).
constexpr std::chrono::seconds kCatchUpWindow{7 * 24 * 3600};
constexpr int kMostFollowers = 16;

enum class CatchUp { Follow, Skip, OtherUsers, Old };

// What `--all` does with a folder of a shared folder's runs/: follow it (`reference`: this
// history's run id, or the folder), or not: no cluster run, ended or followed, another user's, or
// submitted before the catch-up window.
CatchUp judgeForCatchUp(storage::RunStore& store, const fs::path& home, const fs::path& runDir, std::string& reference)
{
    std::error_code ec;
    if (!fs::exists(runDir / "slurm_job_id", ec))
        return CatchUp::Skip;
    if (auto owner = runOwningFolder(store, home, runDir)) {
        auto details = store.run(owner->first);
        if (!details || storage::isTerminal(details->summary.status)
            || storage::checkLiveness(details->launcher) != storage::Liveness::Gone)
            return CatchUp::Skip; // ended, or followed (here, or by a machine this one cannot ask)
        reference = std::to_string(owner->first);
        return CatchUp::Follow;
    }
    if (!ownedByThisUser(runDir))
        return CatchUp::OtherUsers;
    auto submission = cluster::readSubmission(runDir);
    if (!submission) {
        std::cerr << "shardscope runs follow: warning: " << submission.error().message << "\n";
        return CatchUp::Skip;
    }
    if (submission->submittedAt < unixSeconds() - static_cast<double>(kCatchUpWindow.count()))
        return CatchUp::Old; // long ended, most likely: `runs follow DIR` (or `runs import`) takes one
    reference = runDir.string();
    return CatchUp::Follow;
}

// `runs follow --all`: every cluster run of the profiles' shared folders that no process follows
// on this machine: this history's pending or running ones whose follower is gone, and this user's
// runs submitted elsewhere that are not in it yet (another user's are left to `runs follow DIR`).
int catchUpClusterRuns(const fs::path& profilesFileGiven, const std::string& programPath)
{
    const char* who = "shardscope runs follow";
    const fs::path profilesFile = cluster::profilesFile(profilesFileGiven);
    std::error_code ec;
    if (!fs::exists(profilesFile, ec)) {
        std::cout << who << ": no cluster profiles (" << profilesFile.string() << "): no cluster run to follow\n";
        return 0;
    }
    auto profiles = cluster::loadProfiles(profilesFile);
    auto home = storage::shardscopeHome();
    storage::StoreOptions options;
    options.markInterrupted = false;
    auto store = home && profiles ? storage::RunStore::open(storage::historyFile(*home), options)
                                  : Result<storage::RunStore>(home ? profiles.error() : home.error());
    if (!store) {
        std::cerr << who << ": " << store.error().message << "\n";
        return 1;
    }
    std::set<fs::path> folders;
    for (const auto& [name, profile] : *profiles)
        if (!profile.sharedFolder.empty())
            folders.insert(fs::weakly_canonical(fs::path(profile.sharedFolder) / "runs", ec));
    int started = 0, othersLeft = 0, oldLeft = 0, overCap = 0;
    for (const auto& folder : folders) {
        for (fs::directory_iterator it(folder, ec), last; !ec && it != last; it.increment(ec)) {
            const fs::path runDir = it->path();
            std::string reference;
            switch (judgeForCatchUp(*store, *home, runDir, reference)) {
            case CatchUp::Skip:
                continue;
            case CatchUp::OtherUsers:
                ++othersLeft;
                continue;
            case CatchUp::Old:
                ++oldLeft;
                continue;
            case CatchUp::Follow:
                break;
            }
            if (started >= kMostFollowers) {
                ++overCap;
                continue;
            }
            const fs::path log = *home / "followers" / (runDir.filename().string() + ".log");
            auto pid = startFollower(programPath, reference, profilesFile, log);
            if (!pid) {
                std::cerr << who << ": " << pid.error().message << "\n";
                continue;
            }
            ++started;
            std::cout << who << ": following " << runDir.filename().string() << " in the background (pid " << *pid
                      << "; its output in " << log.string() << ")\n";
        }
    }
    if (started == 0)
        std::cout << who << ": every cluster run of " << profilesFile.string() << "'s shared folders is followed or has ended\n";
    if (othersLeft > 0)
        std::cout << who << ": " << othersLeft << " run" << (othersLeft == 1 ? "" : "s")
                  << " of other users left alone (`shardscope runs follow DIR` follows one)\n";
    if (oldLeft > 0)
        std::cout << who << ": " << oldLeft << " of your runs submitted over a week ago left alone (`shardscope runs "
                  << "follow DIR` takes one)\n";
    if (overCap > 0)
        std::cout << who << ": " << overCap << " more of your runs not followed yet: at most " << kMostFollowers
                  << " followers start at once; the next `runs follow --all` starts theirs\n";
    return 0;
}

// The end of a followed job into the history, as the submitting launcher would have recorded it:
// every attempt's events gathered, the end decided from them and SLURM's state, each attempt. The
// process's exit code.
int recordFollowedEnd(storage::RunStore& store, std::int64_t runId, const storage::RunSummary& summary, const fs::path& runDir,
                      int nodes, const cluster::SlurmClient& slurm, const cluster::JobState& end, bool sawItRun)
{
    const auto attempts = cluster::readAttempts(runDir);
    std::int64_t malformed = 0;
    auto events = readRunEvents(runDir, malformed);
    std::vector<std::string> nodeNames;
    if (auto names = slurm.hostnames(attempts.empty() ? end.nodes : attempts.back().nodes))
        nodeNames = *names;
    storage::RunEnd runEnd = cluster::jobEnd(end, events ? *events : std::vector<protocol::Event>{}, summary.worldSize,
                                             std::max(1, summary.worldSize / nodes), nodeNames, unseenFolderNodes(attempts),
                                             runDir.string());
    for (const auto& a : attempts)
        warnIf(store.recordAttempt(runId, attemptRow(a)));
    warnIf(store.setStatusDetail(runId, ""));
    if (!sawItRun)
        warnIf(store.markRunning(runId)); // a job that ran between two looks still ran
    if (auto finished = store.finishRun(runId, runEnd); !finished) {
        std::cerr << "shardscope runs follow: recording the end failed: " << finished.error().message << "\n";
        return 1;
    }
    std::cout << "shardscope runs follow: job " << summary.job.substr(6) << " ended " << end.state << "; run " << summary.name
              << " in the history: " << storage::statusName(runEnd.status) << " (" << attempts.size()
              << (attempts.size() == 1 ? " attempt" : " attempts") << ")\n";
    return runEnd.status == storage::RunStatus::Completed ? 0 : runEnd.status == storage::RunStatus::Cancelled ? 130 : 1;
}

} // namespace

int followSlurmRun(const FollowRequest& request)
{
    if (request.all)
        return catchUpClusterRuns(request.profilesFile, request.programPath);
    const std::string& reference = request.reference;
    auto home = storage::shardscopeHome();
    if (!home) {
        std::cerr << "shardscope runs follow: " << home.error().message << "\n";
        return 1;
    }
    storage::StoreOptions options;
    options.markInterrupted = false;
    auto store = storage::RunStore::open(storage::historyFile(*home), options);
    bool adopted = false;
    auto runId = store ? followedRun(*store, *home, reference, adopted) : Result<std::int64_t>(store.error());
    auto details = runId ? store->run(*runId) : Result<storage::RunDetails>(runId.error());
    if (!details) {
        std::cerr << "shardscope runs follow: " << details.error().message << "\n";
        return 1;
    }
    const auto& summary = details->summary;
    if (summary.job.rfind("slurm:", 0) != 0) {
        std::cerr << "shardscope runs follow: run " << summary.name
                  << " is not a cluster job; `runs follow` follows runs submitted with `launch --target slurm`\n";
        return 2;
    }
    if (storage::isTerminal(summary.status)) {
        std::cout << "shardscope runs follow: run " << summary.name << " has ended: " << storage::statusName(summary.status)
                  << "\n";
        return 0;
    }
    if (!adopted && storage::checkLiveness(details->launcher) != storage::Liveness::Gone) {
        std::cerr << "shardscope runs follow: run " << summary.name << " is followed by its launcher (pid "
                  << details->launcher.pid << " on " << details->launcher.host
                  << "), which records it; Stop it there, or follow it from here once that one has gone\n";
        return 2;
    }
    if (adopted)
        std::cout << "shardscope runs follow: run " << summary.name << " (run " << *runId
                  << ") put in this history from its folder's run.json" << std::endl;
    const std::int64_t jobId = std::atoll(summary.job.c_str() + 6);
    const fs::path runDir = summary.runDir;
    const int nodes = std::max(1, nodesOfScript(runDir));
    warnIf(store->adoptRun(*runId, storage::LauncherIdentity::current()));
    std::cout << "shardscope runs follow: following job " << jobId << " of run " << summary.name << " (" << nodes
              << " nodes; run folder " << runDir.string() << ")" << std::endl;
    // SIGINT (Ctrl-C, the workbench's Stop) cancels the job; SIGTERM and SIGHUP (a logout, a
    // shutdown, a kill of a background follower) only stop following it.
    struct sigaction cancel { };
    cancel.sa_handler = [](int) { g_cancelAsked.store(true); };
    sigaction(SIGINT, &cancel, nullptr);
    struct sigaction stop { };
    stop.sa_handler = [](int) { g_stopFollowing.store(true); };
    sigaction(SIGTERM, &stop, nullptr);
    sigaction(SIGHUP, &stop, nullptr);
    const cluster::SlurmClient slurm = clientOf(runDir, request.profilesFile);
    // Over SSH every look is a login: less often.
    const auto pollInterval = slurm.where() == "this machine" ? std::chrono::milliseconds(500) : std::chrono::milliseconds(3000);
    JobWatch watch{slurm,
                   jobId,
                   "shardscope runs follow",
                   &*store,
                   *runId,
                   summary.statusDetail,
                   summary.status == storage::RunStatus::Running};
    auto lastCatchUp = std::chrono::steady_clock::now() - std::chrono::hours(1);
    cluster::JobState end;
    int failedLooks = 0;
    while (!g_stopFollowing.load()) {
        auto state = watch.look();
        if (!state) {
            // SLURM could not be asked (a controller or login node that did not answer): again,
            // for a while. A job it says it does not know has ended: the folder may say how.
            const auto known = slurm.knowsJob(jobId);
            if (known && !*known)
                state = endFromFolder(runDir);
            if (!state) {
                if (++failedLooks >= 10) {
                    std::cerr << "shardscope runs follow: SLURM did not answer " << failedLooks
                              << " times in a row; the run stays open (`runs follow` takes it up again)\n";
                    return 1;
                }
                std::this_thread::sleep_for(pollInterval * failedLooks);
                continue;
            }
            std::cout << "shardscope runs follow: " << state->reason << std::endl;
        }
        failedLooks = 0;
        if (state->ended() || std::chrono::steady_clock::now() - lastCatchUp > std::chrono::seconds(2)) {
            catchUp(*store, *runId, runDir, nodes);
            lastCatchUp = std::chrono::steady_clock::now();
        }
        if (state->ended()) {
            end = *state;
            break;
        }
        std::this_thread::sleep_for(pollInterval);
    }
    if (g_stopFollowing.load()) {
        std::cout << "shardscope runs follow: stopped following job " << jobId << " (SIGTERM/SIGHUP: the job goes on; "
                  << "`runs follow` takes it up again)" << std::endl;
        return 0;
    }
    return recordFollowedEnd(*store, *runId, summary, runDir, nodes, slurm, end, watch.running);
}

namespace {

// What every SLURM launch takes from the command line.
SlurmLaunch slurmLaunchOf(const runs::LaunchRequest& request, const std::string& programPath)
{
    SlurmLaunch launch;
    launch.target = request.target;
    launch.profilesFile = request.clusterProfiles;
    launch.configFile = runs::configFileOf(request);
    // The ranks and nodes: the flags, else the config's (as a local launch takes them); a config
    // that does not load is reported by the plan's check.
    launch.numProcesses = request.numProcesses;
    launch.numMachines = request.numMachines;
    if (auto loaded = launch.configFile.empty() ? Result<config::AccelerateConfig>(makeError(""))
                                                : config::loadAccelerateConfig(launch.configFile)) {
        if (!request.givenNumProcesses)
            launch.numProcesses = static_cast<int>(loaded->intField("num_processes").value_or(launch.numProcesses));
        if (!request.givenNumMachines)
            launch.numMachines = static_cast<int>(loaded->intField("num_machines").value_or(launch.numMachines));
    }
    if (!request.mixedPrecision.empty())
        launch.nodeArgs.insert(launch.nodeArgs.end(), {"--mixed_precision", request.mixedPrecision});
    for (const auto& flag : request.accelerateFlags) // each node's launch merges them as this one does
        launch.nodeArgs.push_back(flag.value ? flag.name + "=" + *flag.value : flag.name);
    launch.engineFlags = request.workerArgs;
    launch.dryRun = request.dryRun;
    launch.detach = request.detach;
    launch.noHistory = request.noHistory;
    launch.tags = request.tags;
    launch.programPath = programPath;
    return launch;
}

// The launch as node 0 will plan it (a stand-in rendezvous: the batch script sets the real one).
runs::LaunchRequest plannedAsANode(const runs::LaunchRequest& request, const SlurmLaunch& launch)
{
    runs::LaunchRequest planned = request;
    planned.numProcesses = launch.numProcesses;
    planned.numMachines = launch.numMachines;
    planned.mainProcessIp = "127.0.0.1";
    planned.mainProcessPort = 29500;
    planned.machineRank = 0;
    planned.givenIp = planned.givenPort = planned.givenMachineRank = true;
    planned.givenNumMachines = planned.givenNumProcesses = true;
    return planned;
}

// A user's Accelerate script on SLURM: each node's launcher runs the real `accelerate launch`
// with that node's --machine_rank, the head's address and the job's port; the script and the
// Python environment must be where every node finds them at the same path.
int launchScriptOnSlurm(const runs::LaunchRequest& request, const std::string& programPath)
{
    auto python = resolvePython(request.python);
    if (!python) {
        printError(python.error().message);
        return 2;
    }
    SlurmLaunch launch = slurmLaunchOf(request, programPath);
    std::error_code ec;
    launch.script = std::filesystem::absolute(request.script, ec).lexically_normal().string();
    launch.python = std::filesystem::absolute(*python, ec).string();
    launch.runName = request.runName.empty() ? timestampedRunId(std::filesystem::path(request.script).stem().string())
                                             : request.runName;
    const runs::LaunchRequest planned = plannedAsANode(request, launch);
    return runSlurmLaunch(launch, [&](int gpusPerNode) {
        runs::LaunchRequest node = planned;
        if (gpusPerNode > 0)
            node.machine = config::MachineInfo{gpusPerNode, true, true, {}};
        auto accelerateConfig = runs::scriptConfig(node);
        if (!accelerateConfig)
            return std::optional<PlannedShape>();
        const auto plan = runs::planScript(node, *accelerateConfig, launch.python, nullptr);
        return plan ? std::optional<PlannedShape>(PlannedShape{plan->distributedType, plan->mixedPrecision}) : std::nullopt;
    });
}

} // namespace

int launchOnSlurm(const runs::LaunchRequest& request, const std::string& programPath)
{
    if (!request.script.empty())
        return launchScriptOnSlurm(request, programPath);
    auto recipe = config::loadRecipe(request.recipe);
    if (!recipe) {
        printError(recipe.error().message);
        return 2;
    }
    SlurmLaunch launch = slurmLaunchOf(request, programPath);
    launch.runName = request.runName.empty() ? timestampedRunId(recipe->name) : request.runName;
    launch.recipe = request.recipe;
    if (request.maxSteps > 0)
        launch.nodeArgs.insert(launch.nodeArgs.end(), {"--max_steps", std::to_string(request.maxSteps)});
    runs::LaunchRequest planned = plannedAsANode(request, launch);
    return runSlurmLaunch(launch, [&](int gpusPerNode) {
        // The nodes' GPUs, not this machine's (a login node may have none); what they support is
        // checked again on the nodes at launch.
        if (gpusPerNode > 0)
            planned.machine = config::MachineInfo{gpusPerNode, true, true, {}};
        int exitCode = 0;
        const auto plan = runs::planRun(planned, *recipe, std::string(), exitCode);
        return plan ? std::optional<PlannedShape>(
                   PlannedShape{plan->distributedType, std::string(precision::modeName(plan->precision))})
                    : std::nullopt;
    });
}

} // namespace shardscope::cli
