#pragma once

// Plain value types of the run history: what the launcher writes and what the CLI and the GUI
// read. Field names follow ../shared/DESIGN.md, "Event fields"; units are in the comments.

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope::storage {

// pending -> running -> completed | failed | cancelled; pending or running -> interrupted when the
// launcher that owns the run is gone (see RunStore::markInterruptedRuns).
enum class RunStatus { Pending, Running, Completed, Failed, Cancelled, Interrupted };

// Not named toString: Qt Test would find it by ADL in QCOMPARE and expect a char*.
std::string_view statusName(RunStatus status);
std::optional<RunStatus> parseRunStatus(std::string_view text);
bool isTerminal(RunStatus status);

// Who owns a run: the launcher process, identified so that a recycled pid is not mistaken for it
// (boot id + the process's start time in clock ticks since boot, from /proc).
struct LauncherIdentity {
    std::int64_t pid = 0;
    std::string host;
    std::string bootId;
    std::int64_t startTicks = 0;

    static LauncherIdentity current();
};

enum class Liveness { Alive, Gone, Unknown };
// Unknown when the launcher ran on another host: this machine cannot tell.
Liveness checkLiveness(const LauncherIdentity& launcher);

struct NewRun {
    std::string name;
    std::string configText; // the Accelerate config YAML, as saved
    std::string recipeText; // the recipe YAML
    std::string runDir; // runs/<id>/ (absolute)
    std::string distributedType; // Accelerate's spelling: MULTI_CPU, MULTI_GPU, FSDP, DEEPSPEED, NO
    std::string mixedPrecision; // no, fp16, bf16, fp8
    int worldSize = 1;
    std::vector<std::string> tags;
    std::string notes;
    // The process that will supervise the run; defaults to the calling process.
    std::optional<LauncherIdentity> launcher;
    // When it was made, seconds since the epoch: a cluster run put in a history after its
    // submission keeps its submission's time. None: now.
    std::optional<double> createdAt;
};

// A rank's `hello` event.
struct RankInfo {
    int rank = 0;
    std::int64_t pid = 0;
    std::string host;
    std::string device; // "cpu", "cuda:N"
    std::string torchVersion;
    int localRank = 0;
    int machineRank = 0;
    std::optional<double> peakFlops{}; // what its MFU is against (engine ranks), FLOP/s
    std::string peakDtype{};
    std::string peakSource{};
    bool precisionEmulated = false;
};

struct RunEnd {
    RunStatus status = RunStatus::Completed; // Completed, Failed or Cancelled
    std::optional<int> exitCode;
    std::optional<int> rootCauseRank;
    std::string error; // the root-cause rank's error message, empty on success
    std::vector<std::pair<int, int>> rankExitCodes; // (rank, exit code)
};

// One named value of an event: "loss", "lr", "mem.peak_allocated", "comm.all_reduce", ... (see
// metric_keys.h for the names the launcher uses).
struct MetricValue {
    std::string_view key;
    double value = 0;
};

struct MetricRow {
    std::int64_t id = 0; // row id: increases with insertion, the cursor of live views
    int rank = 0;
    std::int64_t step = 0;
    double time = 0; // seconds since the Unix epoch
    std::string key;
    double value = 0; // NaN when the rank reported NaN (stored as NULL)
};

struct SeriesPoint {
    std::int64_t step = 0;
    double time = 0;
    double value = 0;
};

// One bucket of a downsampled series: the steps it covers and the extremes inside it, with the
// step each extreme was seen at, so spikes survive any zoom level.
struct SeriesBucket {
    std::int64_t firstStep = 0; // bucket covers [firstStep, lastStep]
    std::int64_t lastStep = 0;
    std::int64_t count = 0; // points in the bucket (NaN ones included)
    double minValue = std::numeric_limits<double>::quiet_NaN(); // NaN when every point was NaN
    std::int64_t minStep = 0;
    double maxValue = std::numeric_limits<double>::quiet_NaN();
    std::int64_t maxStep = 0;
};

// Text the model wrote at an eval from a prompt of the recipe (training.eval_prompts).
struct EvalSample {
    std::int64_t step = 0;
    double time = 0;
    std::string prompt;
    std::string text;
    std::int64_t id = 0; // the row's id in the history (0 for one not read from it)
};

struct EvalRecord {
    int rank = 0;
    std::int64_t step = 0;
    double time = 0;
    std::string name; // "loss" or a named metric
    double value = 0;
    std::int64_t id = 0; // the row's id in the history (0 for one not read from it)
};

struct TraceRecord {
    int rank = 0;
    double time = 0;
    std::string path;
    std::string source; // "cupti" or "host"
    double compute = 0, comm = 0, memory = 0, idle = 0; // seconds
    double overlap = 0; // [0, 1]
};

struct CheckpointRecord {
    int rank = 0;
    std::int64_t step = 0;
    double time = 0;
    std::string path;
    std::string kind; // "state" or "model"
    std::int64_t bytes = 0;
};

// One attempt of a run that a cluster job requeued (a time limit's warning, a preemption).
struct RunAttempt {
    int attempt = 0;
    std::string jobId;
    std::string nodes;
    std::optional<double> startedAt; // seconds since the epoch
    std::optional<double> endedAt;
    std::optional<int> exitCode; // none: its end was not seen (preempted, killed)
    std::int64_t resumedStep = 0; // 0: a fresh start
    std::string resumedFrom; // the checkpoint's folder
    std::string lostNodes; // the nodes SLURM lost while it ran ("n2 (down*: Not responding)"); empty: none known
};

enum class RunSort { Created, Name, Status, Duration, Steps, Loss };

struct RunFilter {
    std::vector<RunStatus> statuses; // any of these; empty: all
    std::string distributedType; // exact, case-insensitive; empty: all
    std::string mixedPrecision; // exact, case-insensitive; empty: all
    std::string tag; // runs carrying this tag; empty: all
    std::string text; // substring of the name, notes, tags or run directory
    RunSort sort = RunSort::Created;
    bool descending = true;
    std::int64_t limit = -1; // -1: no limit
    std::int64_t offset = 0;
};

struct RunSummary {
    std::int64_t id = 0;
    std::string name;
    RunStatus status = RunStatus::Pending;
    double createdAt = 0; // seconds since the Unix epoch
    std::optional<double> startedAt, endedAt;
    std::string host;
    int worldSize = 1;
    std::string distributedType;
    std::string mixedPrecision;
    std::vector<std::string> tags;
    std::optional<std::int64_t> lastStep;
    std::optional<double> lastLoss;
    std::string runDir;
    int traceCount = 0; // trace files recorded (one per rank per profiled window)
    std::string color; // "#rrggbb" the user chose; empty: the palette's colour for the id
    std::string job; // a cluster run's job ("slurm:123"); empty: a run of this machine
    std::string statusDetail; // what the scheduler says of a cluster run now ("pending: Resources ...")
};

struct RunDetails {
    RunSummary summary;
    std::string configText;
    std::string recipeText;
    std::string notes;
    std::optional<int> exitCode;
    std::optional<int> rootCauseRank;
    std::string error;
    LauncherIdentity launcher;
    struct Rank {
        RankInfo info;
        std::optional<int> exitCode;
    };
    std::vector<Rank> ranks;
    std::vector<CheckpointRecord> checkpoints;
    std::vector<RunAttempt> attempts; // a requeued cluster job's, in order; empty for other runs
    std::vector<TraceRecord> traces;
    std::vector<std::string> metricKeys;
    std::int64_t metricRows = 0;
};

// What a run's MFU is against: the lowest rank's peak source (empty: unknown), and whether a
// rank's precision is emulated on its device.
struct MfuPeak {
    std::string source;
    bool emulated = false;
};
MfuPeak mfuPeakOf(const std::vector<RunDetails::Rank>& ranks);

// Compare: the per-run summary and a flat key-path difference of the configs and recipes.
struct RunStats {
    std::int64_t runId = 0;
    std::string name;
    RunStatus status = RunStatus::Pending;
    std::optional<std::int64_t> steps; // last step seen
    std::optional<double> finalLoss; // loss at the last step
    std::optional<double> bestLoss; // lowest loss
    std::optional<double> meanTokensPerS; // mean of tokens_per_s over the steps
    std::optional<double> meanMfu; // mean of rank 0's mfu over the steps (where the device's peak is known)
    std::string mfuPeak; // what that MFU is against: the lowest rank's peak source (engine/train/mfu.h)
    bool precisionEmulated = false; // the run's precision has no unit of its own on a rank's device
    std::vector<std::pair<int, double>> peakMemory; // (rank, bytes): peak_allocated, else rss
    std::int64_t skippedSteps = 0; // steps with skipped = 1 (fp16 overflow)
    std::optional<double> wallSeconds;
};

struct ConfigDifference {
    std::string file; // "config" or "recipe"
    std::string keyPath; // e.g. fsdp_config.fsdp_sharding_strategy
    std::vector<std::optional<std::string>> values; // one per compared run; nullopt: key absent
};

struct RunComparison {
    std::vector<RunStats> runs;
    std::vector<ConfigDifference> differences; // identical keys left out
};

} // namespace shardscope::storage
