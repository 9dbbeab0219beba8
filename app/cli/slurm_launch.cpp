#include "app/cli/slurm_launch.h"
#include "engine/common/wall_clock.h"

#include "app/cluster/attempts.h"
#include "app/cluster/job_watch.h"
#include "app/cluster/slurm.h"
#include "app/launcher/program.h"
#include "app/launcher/run_import.h"
#include "app/launcher/run_recorder.h"
#include "engine/accelerate/yaml_io.h"
#include "storage/run_store.h"
#include "storage/store_paths.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
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
        if (auto gathered = cluster::gatherAttemptEvents(m_runDir, m_launch.numMachines, attempts); !gathered)
            std::cerr << "shardscope launch: warning: " << gathered.error().message << "\n";
        std::int64_t malformed = 0;
        auto events = readRunEvents(m_runDir, malformed);
        std::vector<std::string> nodeNames;
        if (auto names = m_slurm.hostnames(attempts.empty() ? state.nodes : attempts.back().nodes))
            nodeNames = *names;
        const storage::RunEnd end = cluster::jobEnd(state, events ? *events : std::vector<protocol::Event>{},
                                                    m_launch.numProcesses, m_perNode, nodeNames);
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

// SLURM's client on this machine, the profile's partition, and enough nodes in it.
Result<void> checkCluster(const cluster::SlurmClient& slurm, const cluster::ClusterProfile& profile, const fs::path& profilesFile,
                          int nodes)
{
    if (auto client = cluster::SlurmClient::available(); !client)
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
    const cluster::SlurmClient slurm;
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
    const fs::path script = runDir / "job.sbatch";
    if (launch.dryRun) {
        std::cout << cluster::batchScript(request);
        std::cout << "# (not submitted, nothing written: --dry-run; a submission writes it to " << script.string() << ")\n";
        return 0;
    }
    std::ofstream(script) << cluster::batchScript(request);
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

int followSlurmRun(const std::string& reference)
{
    auto home = storage::shardscopeHome();
    if (!home) {
        std::cerr << "shardscope runs follow: " << home.error().message << "\n";
        return 1;
    }
    storage::StoreOptions options;
    options.markInterrupted = false;
    auto store = storage::RunStore::open(storage::historyFile(*home), options);
    auto runId = store ? store->resolveRun(reference) : Result<std::int64_t>(store.error());
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
    if (storage::checkLiveness(details->launcher) != storage::Liveness::Gone) {
        std::cerr << "shardscope runs follow: run " << summary.name << " is followed by its launcher (pid "
                  << details->launcher.pid << " on " << details->launcher.host
                  << "), which records it; Stop it there, or follow it from here once that one has gone\n";
        return 2;
    }
    const std::int64_t jobId = std::atoll(summary.job.c_str() + 6);
    const fs::path runDir = summary.runDir;
    const int nodes = std::max(1, nodesOfScript(runDir));
    warnIf(store->adoptRun(*runId, storage::LauncherIdentity::current()));
    std::cout << "shardscope runs follow: following job " << jobId << " of run " << summary.name << " (" << nodes
              << " nodes; run folder " << runDir.string() << ")" << std::endl;
    struct sigaction cancel { };
    cancel.sa_handler = [](int) { g_cancelAsked.store(true); };
    sigaction(SIGINT, &cancel, nullptr);
    sigaction(SIGTERM, &cancel, nullptr);
    const cluster::SlurmClient slurm;
    JobWatch watch{slurm,
                   jobId,
                   "shardscope runs follow",
                   &*store,
                   *runId,
                   summary.statusDetail,
                   summary.status == storage::RunStatus::Running};
    auto lastCatchUp = std::chrono::steady_clock::now() - std::chrono::hours(1);
    cluster::JobState end;
    while (true) {
        const auto state = watch.look();
        if (!state)
            return 1;
        if (state->ended() || std::chrono::steady_clock::now() - lastCatchUp > std::chrono::seconds(2)) {
            catchUp(*store, *runId, runDir, nodes);
            lastCatchUp = std::chrono::steady_clock::now();
        }
        if (state->ended()) {
            end = *state;
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    // The end, as the submitting launcher would have recorded it.
    const auto attempts = cluster::readAttempts(runDir);
    std::int64_t malformed = 0;
    auto events = readRunEvents(runDir, malformed);
    std::vector<std::string> nodeNames;
    if (auto names = slurm.hostnames(attempts.empty() ? end.nodes : attempts.back().nodes))
        nodeNames = *names;
    const storage::RunEnd runEnd = cluster::jobEnd(end, events ? *events : std::vector<protocol::Event>{}, summary.worldSize,
                                                   std::max(1, summary.worldSize / nodes), nodeNames);
    for (const auto& a : attempts)
        warnIf(store->recordAttempt(*runId, attemptRow(a)));
    warnIf(store->setStatusDetail(*runId, ""));
    if (!watch.running)
        warnIf(store->markRunning(*runId)); // a job that ran between two looks still ran
    if (auto finished = store->finishRun(*runId, runEnd); !finished) {
        std::cerr << "shardscope runs follow: recording the end failed: " << finished.error().message << "\n";
        return 1;
    }
    std::cout << "shardscope runs follow: job " << jobId << " ended " << end.state << "; run " << summary.name
              << " in the history: " << storage::statusName(runEnd.status) << " (" << attempts.size()
              << (attempts.size() == 1 ? " attempt" : " attempts") << ")\n";
    return runEnd.status == storage::RunStatus::Completed ? 0 : runEnd.status == storage::RunStatus::Cancelled ? 130 : 1;
}

} // namespace shardscope::cli
