#pragma once

// A run's directory, runs/<id>/, as every part sees it: the launcher writes it, the ranks write
// their checkpoints, traces and export into it, storage recovers from its events and outcome, the
// workbench reads it. The one place that spells the names:
//
//   config.yaml  recipe.yaml (or script.yaml, command.sh)  plan.json  events.jsonl  outcome.json
//   logs/rank<N>.log  traces/rank<N>.json  checkpoints/step_<N>/  export/  flight/  hang_report.txt
//   attempts/<N>/ (a continued run's or a requeued job's later attempts, each a run folder)
//   a cluster run's: job.sbatch  request.json  slurm_job_id  slurm-<job>.out  run.json  .shardscope-marker
//     attempts/<N>/attempt.txt  attempts/<N>/unseen_folder.txt  attempts/<N>/lost_nodes.txt  attempts/<N>/node<M>/
//   a script run's: .events/rank<N>.fifo, or without a launcher events/rank<N>.jsonl

#include <filesystem>
#include <string>

namespace shardscope {

class RunLayout {
public:
    explicit RunLayout(std::filesystem::path dir) : m_dir(std::move(dir)) { }

    const std::filesystem::path& dir() const { return m_dir; }
    std::filesystem::path configFile() const { return m_dir / "config.yaml"; } // the Accelerate config, as launched
    std::filesystem::path recipeFile() const { return m_dir / "recipe.yaml"; } // the recipe, as run
    // A script run's description (script, arguments, Python, the exact command), in place of a recipe.
    std::filesystem::path scriptFile() const { return m_dir / "script.yaml"; }
    std::filesystem::path commandFile() const { return m_dir / "command.sh"; } // a script run's command, as run
    std::filesystem::path planFile() const { return m_dir / "plan.json"; } // what every rank runs
    std::filesystem::path eventsFile() const { return m_dir / "events.jsonl"; } // every rank's events
    std::filesystem::path outcomeFile() const { return m_dir / "outcome.json"; } // the launcher's verdict
    std::filesystem::path logsDir() const { return m_dir / "logs"; }
    std::filesystem::path rankLog(int rank) const { return logsDir() / rankLogName(rank); }
    std::filesystem::path tracesDir() const { return m_dir / "traces"; }
    std::filesystem::path rankTrace(int rank) const { return tracesDir() / rankTraceName(rank); }
    std::filesystem::path checkpointsDir() const { return m_dir / "checkpoints"; }
    std::filesystem::path exportDir() const { return m_dir / "export"; }
    // Flight records (engine/protocol/flight_record.h): flight/request, flight/rank<N>.json.
    std::filesystem::path flightDir() const { return m_dir / "flight"; }
    // The launcher's report of a hang (app/launcher/hang_report.h), as text.
    std::filesystem::path hangReportFile() const { return m_dir / "hang_report.txt"; }
    // A run that went on after it ended (--continue_run) or a requeued cluster job: attempt N ran
    // in attempts/<N>/, a run folder of its own. (`attempt` as text: a shell variable of the
    // batch script, "$attempt".)
    std::filesystem::path attemptsDir() const { return m_dir / "attempts"; }
    std::filesystem::path attemptDir(int attempt) const { return attemptDir(std::to_string(attempt)); }
    std::filesystem::path attemptDir(const std::string& attempt) const { return attemptsDir() / attempt; }

    // A cluster run's (app/cluster). In the run folder: the batch script, the request every node's
    // launcher runs (runs/request_file.h: data, not arguments parsed again), SLURM's job id and its
    // output (SLURM's file name pattern), the submission record another machine follows it by
    // (a script run's reporter writes a run.json too), and the marker every node must read before
    // any rank starts. In each attempt's folder: its record (job, nodes, start and end), the nodes
    // that could not see the run folder, and node<M>/, the run folder of that node's launcher.
    std::filesystem::path batchScriptFile() const { return m_dir / "job.sbatch"; }
    std::filesystem::path requestFile() const { return m_dir / "request.json"; } // what every node's launcher runs
    std::filesystem::path jobIdFile() const { return m_dir / "slurm_job_id"; }
    std::filesystem::path slurmOutputPattern() const { return slurmOutput("%j"); }
    // A job's output ("<job>" in words a user reads).
    std::filesystem::path slurmOutput(const std::string& job) const { return m_dir / ("slurm-" + job + ".out"); }
    std::filesystem::path submissionFile() const { return m_dir / "run.json"; }
    std::filesystem::path folderMarkerFile() const { return m_dir / ".shardscope-marker"; }
    std::filesystem::path attemptRecordFile(const std::string& attempt) const { return attemptDir(attempt) / "attempt.txt"; }
    std::filesystem::path attemptRecordFile(int attempt) const { return attemptRecordFile(std::to_string(attempt)); }
    // The nodes SLURM lost of an attempt (its follower asks when the attempt is over).
    std::filesystem::path lostNodesFile(int attempt) const { return attemptDir(attempt) / "lost_nodes.txt"; }
    std::filesystem::path unseenFolderFile(const std::string& attempt) const { return attemptDir(attempt) / "unseen_folder.txt"; }
    std::filesystem::path unseenFolderFile(int attempt) const { return unseenFolderFile(std::to_string(attempt)); }
    std::filesystem::path nodeDir(int attempt, int node) const
    {
        return attemptDir(attempt) / nodeFolderName(std::to_string(node));
    }
    static std::string nodeFolderName(const std::string& node) { return "node" + node; }

    // A script run's: the named pipes its ranks send events through (.events/rank<N>.fifo), and
    // the events the shardscope reporter writes without a launcher (events/rank<N>.jsonl).
    std::filesystem::path eventPipesDir() const { return m_dir / ".events"; }
    std::filesystem::path reporterEventsDir() const { return m_dir / "events"; }

    // The file names inside logs/ and traces/, for code that is handed only those folders.
    static std::string rankLogName(int rank) { return "rank" + std::to_string(rank) + ".log"; }
    static std::string rankTraceName(int rank) { return "rank" + std::to_string(rank) + ".json"; }

private:
    std::filesystem::path m_dir;
};

} // namespace shardscope
