#include "app/cluster/cluster_launch.h"

#include "app/cluster/adoption.h"
#include "app/cluster/attempts.h"
#include "app/cluster/follower.h"
#include "app/cluster/job_watch.h"
#include "app/cluster/batch_script.h"
#include "app/cluster/slurm.h"
#include "app/cluster/submission.h"
#include "app/launcher/program.h"
#include "app/launcher/run_directory.h"
#include "app/launcher/run_recorder.h"
#include "app/runs/request_file.h"
#include "app/runs/run_import.h"
#include "engine/common/run_layout.h"
#include "engine/common/wall_clock.h"
#include "storage/run_store.h"
#include "storage/store_paths.h"

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

namespace shardscope::cluster {

namespace {

namespace fs = std::filesystem;

void printError(const std::string& message) { std::cerr << "shardscope launch: error: " << message << "\n"; }

// Copies `from` into the run directory (as `to`): the nodes read their inputs from the shared
// folder. A dry run copies nothing (it only shows where the file would go): a preview must leave
// no run folder behind, or the real submission under the same name would be refused.
Result<std::string> copyIn(const std::string& from, const fs::path& to, bool dryRun)
{
    std::error_code ec;
    if (dryRun)
        return to.string();
    fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
    if (ec)
        return makeError("cannot copy " + from + " to " + to.string() + ": " + ec.message());
    return to.string();
}

// The job's run in this machine's history from its submission on: pending with SLURM's reason,
// running (with every event the nodes write into the shared folder, as they write it), and its
// end, with each attempt when it was requeued. Without a history (--no_history), only followed.
class SubmittedRun {
public:
    SubmittedRun(const cluster::SlurmClient& slurm, std::int64_t jobId, const SlurmLaunch& launch, fs::path runDir,
                 int processesPerNode, double submittedAt)
        : m_slurm(slurm), m_jobId(jobId), m_launch(launch), m_runDir(std::move(runDir)), m_perNode(processesPerNode),
          m_tail(m_runDir, launch.node.numMachines), m_submittedAt(submittedAt)
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
        run.recipeText = runFileText(RunLayout(m_runDir).recipeFile());
        run.configText = runFileText(RunLayout(m_runDir).configFile());
        run.worldSize = m_launch.node.numProcesses;
        run.notes = "SLURM job " + std::to_string(m_jobId) + " (" + std::to_string(m_launch.node.numMachines) + " nodes)";
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

    // Until the job ends (follower.h), the nodes' events recorded as they come; Ctrl-C (or the
    // workbench's Stop, SIGINT) cancels it on the way. None when SLURM stopped answering (said).
    std::optional<cluster::JobState> follow()
    {
        JobWatch watch{m_slurm, m_jobId, "shardscope launch", m_store ? &*m_store : nullptr, m_recorder ? m_recorder->runId() : 0,
                       {},      false};
        FollowOptions options;
        options.pollInterval = std::chrono::milliseconds(200);
        return followJob(watch, m_runDir, options, [this](bool) { readEvents(); });
    }

    // The end into the history: every attempt's events gathered into the run folder (what a later
    // attempt redid left out), the end decided from them and SLURM's state, each attempt recorded.
    // The run's status word ("completed", ...).
    std::string recordEnd(const cluster::JobState& state)
    {
        const auto attempts = cluster::readAttempts(m_runDir);
        if (attempts.empty() && state.state.rfind("CANCELLED", 0) == 0)
            std::cout << "shardscope launch: the job was cancelled before it started: nothing ran\n";
        else if (attempts.empty())
            std::cout << "shardscope launch: the job left nothing in " << m_runDir.string()
                      << ": its script never ran there. The nodes may not see this folder (the profile's shared_folder "
                         "must be mounted at the same path on every node), or the job failed before its script started; "
                         "`scontrol show job "
                      << m_jobId << "` or SLURM's log on the node says more\n";
        if (auto gathered = cluster::gatherAttemptEvents(m_runDir, m_launch.node.numMachines, attempts);
            !gathered && (attempts.empty() || attempts.back().nodesWithoutFolder.empty()))
            std::cerr << "shardscope launch: warning: " << gathered.error().message << "\n";
        const JobOutcome outcome = decideJobEnd(m_slurm, m_runDir, state, m_launch.node.numProcesses, m_perNode);
        const storage::RunEnd& end = outcome.end;
        for (const auto& a : attempts) {
            if (!a.lostNodes.empty())
                std::cout << "shardscope launch: attempt " << a.attempt << " lost node " << a.lostNodes << "\n";
            if (a.attempt > 0 && a.resumedStep > 0)
                std::cout << "shardscope launch: attempt " << a.attempt << " resumed after step " << a.resumedStep << " from "
                          << a.resumedFrom << "\n";
            else if (a.attempt > 0)
                std::cout << "shardscope launch: attempt " << a.attempt << " started over from step 0 (no checkpoint had been "
                          << "saved before it)\n";
        }
        if (!end.error.empty() && end.status != storage::RunStatus::Completed)
            std::cout << "shardscope launch: " << end.error << "\n";
        if (!m_recorder)
            return std::string(storage::statusName(end.status));
        recordAttempts(*m_store, m_recorder->runId(), attempts);
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
                                         launch.node.numMachines,
                                         launch.node.numProcesses,
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

// The batch script's request: the run's inputs copied into its folder and the request every node
// runs written beside them (the nodes read them there; a dry run writes nothing and shows the
// request after the script).
Result<BatchRequest> batchRequestOf(const SlurmLaunch& launch, const ClusterProfile& profile, const fs::path& runDir,
                                    runs::LaunchRequest& node)
{
    const RunLayout layout(runDir);
    cluster::BatchRequest request;
    request.profile = profile;
    request.runName = launch.runName;
    request.runDir = runDir;
    request.nodes = launch.node.numMachines;
    request.processesPerNode = launch.node.numProcesses / launch.node.numMachines;
    request.shardscope = thisExecutable(launch.programPath).string();
    node = launch.node;
    if (!node.recipe.empty()) {
        auto recipe = copyIn(node.recipe, layout.recipeFile(), launch.dryRun);
        if (!recipe)
            return recipe.error();
        node.recipe = *recipe;
    } else {
        // The script stays where it is (it may import its neighbours): the nodes must see that path.
        request.warnBeforeTimeLimit = false;
    }
    if (!node.configFile.empty()) {
        auto config = copyIn(node.configFile, layout.configFile(), launch.dryRun);
        if (!config)
            return config.error();
        node.configFile = *config;
    }
    if (!launch.dryRun)
        if (auto written = runs::writeRequestFile(node, layout.requestFile()); !written)
            return written.error();
    request.launchArgs = {"--request", layout.requestFile().string()};
    return request;
}

} // namespace

int runSlurmLaunch(const SlurmLaunch& given, const std::function<std::optional<PlannedShape>(int gpusPerNode)>& checkPlan)
{
    // The run's name made a run id as a local run's folder name is (createRunDirectory): a newline
    // or a slash becomes '-', so the folder stays in the shared folder's runs/ and the batch
    // script's #SBATCH lines hold the name as it is.
    SlurmLaunch launch = given;
    if (auto id = sanitizeRunId(given.runName); id) {
        launch.runName = *id;
    } else {
        printError(id.error().message);
        return 2;
    }
    const auto colon = launch.target.find(':');
    const std::string profileName = colon == std::string::npos ? "default" : launch.target.substr(colon + 1);
    auto home = storage::shardscopeHome();
    const fs::path profilesFile = cluster::profilesFile(launch.profilesFile);
    auto profile = cluster::loadProfile(profilesFile, profileName);
    if (!profile) {
        printError(profile.error().message);
        return 2;
    }
    if (launch.node.recipe.empty() == launch.node.script.empty()) {
        printError("--target slurm runs a recipe (--recipe R) or a user's script (--script S), one of them");
        return 2;
    }
    if (launch.node.numProcesses % launch.node.numMachines != 0) {
        printError("--num_processes " + std::to_string(launch.node.numProcesses) + " is not a multiple of --num_machines "
                   + std::to_string(launch.node.numMachines) + " (the nodes)");
        return 2;
    }
    const auto shape = checkPlan(cluster::gpusPerNode(*profile));
    if (!shape)
        return 2;
    if (!launch.node.recipe.empty()) // a script's job asks for no warning
        if (auto fits = cluster::checkWarningFits(*profile); !fits) {
            printError(fits.error().message);
            return 2;
        }
    const cluster::SlurmClient slurm(*profile);
    if (!launch.dryRun)
        if (auto fits = checkCluster(slurm, *profile, profilesFile, launch.node.numMachines); !fits) {
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
        fs::create_directories(RunLayout(runDir).attemptsDir(), ec);
    if (ec) {
        printError("cannot create " + runDir.string() + " in the profile's shared folder: " + ec.message());
        return 2;
    }
    runs::LaunchRequest node;
    auto batch = batchRequestOf(launch, *profile, runDir, node);
    if (!batch) {
        fs::remove_all(runDir, ec); // nothing was submitted: the name stays free
        printError(batch.error().message);
        return 2;
    }
    cluster::BatchRequest& request = *batch;
    request.folderMarker = cluster::newFolderMarker();
    const fs::path script = RunLayout(runDir).batchScriptFile();
    if (launch.dryRun) {
        std::cout << cluster::batchScript(request);
        std::cout << "# (not submitted, nothing written: --dry-run; a submission writes it to " << script.string() << ")\n";
        std::cout << "# What every node's launcher runs (" << RunLayout(runDir).requestFile().string() << "):\n";
        std::istringstream lines(runs::requestToJson(node));
        for (std::string line; std::getline(lines, line);)
            std::cout << "#   " << line << "\n";
        return 0;
    }
    std::ofstream(script) << cluster::batchScript(request);
    std::ofstream(cluster::folderMarkerFile(runDir)) << request.folderMarker << "\n";
    if (auto tested = slurm.testSubmit(script); !tested) {
        // Nothing was submitted: the folder made for it goes, so that the name can be used again.
        fs::remove_all(runDir, ec);
        printError("SLURM refuses the job: " + tested.error().message
                   + " (nothing was submitted and its run folder is removed; --dry_run prints the batch script)");
        return 2;
    }
    const double submittedAt = unixSeconds();
    auto jobId = slurm.submit(script);
    if (!jobId) {
        printError(jobId.error().message);
        return 1;
    }
    std::ofstream(RunLayout(runDir).jobIdFile()) << *jobId << "\n";
    writeSubmissionRecord(launch, *profile, *shape, *jobId, submittedAt, runDir);
    std::cout << "shardscope launch: submitted job " << *jobId << " (" << launch.node.numMachines << " nodes; run folder "
              << runDir.string() << ")" << std::endl;
    SubmittedRun follower(slurm, *jobId, launch, runDir, request.processesPerNode, submittedAt);
    if (!launch.noHistory && home)
        follower.startRecording(*home, *shape);
    if (launch.detach) {
        std::cout << "shardscope launch: not following it (--detach): `shardscope runs follow " << launch.runName
                  << "` follows it and records its steps and end" << std::endl;
        return 0;
    }
    // Ctrl-C, or the workbench's Stop (SIGINT), cancels the job; its end is still followed.
    // SIGTERM and SIGHUP (a logout, a shutdown) only stop following it, as they do `runs follow`.
    cancelJobOnSignals({SIGINT});
    stopFollowingOnSignals({SIGTERM, SIGHUP});
    const auto end = follower.follow();
    if (!end && followingStopped())
        std::cout << "shardscope launch: stopped following job " << *jobId << " (SIGTERM/SIGHUP: the job goes on; `shardscope "
                  << "runs follow " << launch.runName << "` takes it up)" << std::endl;
    if (!end)
        return 1;
    std::cout << "shardscope launch: job " << *jobId << " ended " << end->state << " (exit " << end->exitCode << ")\n";
    const std::string status = follower.recordEnd(*end);
    follower.printIngestion();
    return status == "completed" ? 0 : status == "cancelled" ? 130 : 1;
}

} // namespace shardscope::cluster
