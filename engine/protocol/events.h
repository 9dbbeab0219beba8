#pragma once

// The event protocol between a rank and its launcher: one JSON object per line, each with `v`
// (schema version), `type`, `rank` and `time`. Shared by the worker (encoder), the launcher
// (decoder), storage and the GUI, like Tracy's single protocol header. Fields and units are those
// of ../shared/DESIGN.md, "Event fields". A non-finite number is written as the string "NaN",
// "Infinity" or "-Infinity" and read back as that number (events.cpp, Note [non-finite numbers]):
// nothing a rank reports is dropped for its value.

#include "engine/common/result.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>
#include <string_view>
#include <variant>

namespace shardscope::protocol {

// Bumped when a field changes meaning or disappears; new optional fields keep the version.
inline constexpr int kProtocolVersion = 1;
// The most ranks an event may speak of (a rank's number is below it): far beyond any job, and a
// bound for whoever sizes a table by a world size read from a file.
inline constexpr int kMaxRanks = 1 << 20;

struct HelloEvent {
    std::int64_t pid = 0;
    std::string host;
    std::string device; // "cpu", "cuda:N"
    std::string torch; // torch version the worker was built against
    int worldSize = 1;
    int localRank = 0;
    int machineRank = 0;
    // What this rank's MFU is against (engine ranks; a script's reporter sends none): the peak
    // matmul FLOP/s it can reach (0: unknown), the dtype of that peak, where the figure comes from,
    // and whether the run's precision is emulated on this hardware (its peak is then float32's).
    double peakFlops = 0;
    std::string peakDtype{};
    std::string peakSource{};
    bool precisionEmulated = false;
    // The intra-op threads this rank computes with (engine ranks: --threads, else the CPUs it was
    // given over the ranks of its machine; 0: not said).
    int threads = 0;
};

struct MemoryStats { // bytes
    // The model states the layout keeps (what the memory estimate counts), and at their peak in
    // the step with what is held for a moment (gathered units, unsharded gradients on their way
    // to a reduce-scatter, DDP's buckets); see parallel::StepFootprint. Script ranks: 0.
    std::int64_t params = 0;
    std::int64_t grads = 0;
    std::int64_t peakParams = 0;
    std::int64_t peakGrads = 0;
    std::int64_t optimizer = 0;
    std::int64_t activationsPeak = 0;
    std::int64_t allocated = 0;
    std::int64_t reserved = 0;
    std::int64_t peakAllocated = 0;
    std::int64_t rss = 0;
    // fp8 (delayed scaling): the scales and amax histories its linear layers keep; 0 otherwise.
    std::int64_t fp8Scaling = 0;
};

// What a rank held at the ends of a step's phases, in bytes: the caching allocator's allocated
// bytes on CUDA, the process's resident set on CPU. With gradient accumulation, forward and
// backward are the last micro-batch's. All 0: not measured.
struct PhaseMemory {
    std::int64_t afterForward = 0;
    std::int64_t afterBackward = 0;
    std::int64_t afterOptimizer = 0;
};

struct CommStats { // bytes moved by this rank in this step
    std::int64_t allReduce = 0;
    std::int64_t allGather = 0;
    std::int64_t reduceScatter = 0;
    std::int64_t broadcast = 0;
    std::int64_t tensorAllReduce = 0; // tensor parallelism's all-reduces over the tp group (the rest: data-parallel)
};

struct StepEvent {
    std::int64_t step = 0; // optimizer steps done
    std::int64_t epoch = 0;
    // The step's first batch within the epoch, in this rank's sampler order (its number, from 0):
    // with the epoch, where to find the data of a step whose loss spiked.
    std::int64_t batch = 0;
    double loss = 0; // global mean over ranks (equal on every rank)
    double localLoss = 0; // this rank's own
    double lr = 0;
    double gradNorm = 0; // before clipping
    std::optional<double> lossScale; // fp16 only
    bool skipped = false;
    std::int64_t skippedSteps = 0; // optimizer steps skipped so far (fp16 overflow)
    std::int64_t tokens = 0; // this rank, this step (its share under tensor parallelism: the batch's / tp_size)
    std::int64_t samples = 0; // this rank, this step
    double stepTime = 0; // seconds
    double dataTime = 0; // seconds of stepTime this rank waited for its batches
    // The rest of stepTime: blocked in collectives' waits, in the optimizer step, and computing
    // (forward and backward without the waits: what tells a slow rank from the ones waiting for it).
    double waitTime = 0;
    double optimizerTime = 0;
    double computeTime = 0;
    double tokensPerS = 0; // all ranks
    // Model FLOP/s this rank achieved (config::flopsPerToken's model FLOPs x its tokens / step
    // time; 0: the model's FLOPs are unknown) and that over the device's peak (none: no peak).
    double flops = 0;
    std::optional<double> mfu;
    MemoryStats mem;
    PhaseMemory phaseMemory;
    CommStats comm;
    // A script's reporter leaves out what it cannot know (no optimizer it can see, no gradient
    // norm given, no batch it can count): such a field has no value, which is not 0. Engine
    // ranks report every one.
    bool hasLr = true;
    bool hasGradNorm = true;
    bool hasTokens = true; // tokens, samples and tokens_per_s
};

// Text the model wrote at an eval from one of the recipe's training.eval_prompts (rank 0's).
struct TextSample {
    std::string prompt;
    std::string text; // the continuation
};

struct EvalEvent {
    std::int64_t step = 0;
    double loss = 0;
    std::map<std::string, double> metrics;
    std::vector<TextSample> samples;
};

struct MemoryEvent {
    MemoryStats mem;
};

struct TraceSummary { // seconds, overlap in [0, 1]
    double compute = 0;
    double comm = 0;
    double memory = 0;
    double idle = 0;
    double overlap = 0;
};

struct TraceEvent {
    std::string path;
    std::string source; // "cupti" or "host"
    TraceSummary summary;
};

struct CheckpointEvent {
    std::int64_t step = 0;
    std::string path;
    std::string kind; // "state", "model" or "adapter" (a LoRA run's PEFT adapter)
    std::int64_t bytes = 0;
};

struct LogEvent {
    std::string level; // "debug", "info", "warning", "error"
    std::string message;
};

struct ErrorEvent {
    std::string kind; // kPeerLostKind, or "exception" for the rank's own error
    std::string message;
};
// The kind of an error that follows from another rank's end (its connection closed): a
// consequence, never a run's root cause.
inline constexpr const char* kPeerLostKind = "peer";

struct DoneEvent {
    std::string status; // "completed", "failed", "cancelled", "checkpointed" (stopped after saving a checkpoint to resume from)
    std::int64_t steps = 0;
    double wall = 0; // seconds
};

// Sent by a thread of its own every few seconds whatever the rank does (a long eval, a checkpoint,
// a wait in a collective), so the launcher tells a stopped rank (silent) from one that waits for
// it. Not written to events.jsonl.
struct HeartbeatEvent {
    std::int64_t step = 0; // optimizer steps done
    std::string phase; // "setup", "train", "eval", "checkpoint", "finish"
    // The oldest collective this rank issued that has not completed, if any.
    std::string waitingFor; // "all_reduce", "all_gather", ... ; empty: none
    std::string waitingGroup; // its process group: "default_pg", or a subgroup's name
    std::int64_t waitingSeq = 0; // the collective's sequence number in that group
    double waitingSeconds = 0; // since it was issued
    // CPU seconds the process has used since it started: a rank that uses none between beats is
    // idle (blocked), one that computes uses about a core or more.
    double cpuSeconds = 0;
};

// Written by the launcher, never by a rank: the event's rank has been slower than the others in
// compute-only time (StepEvent::computeTime) over the last `window` steps (app/launcher/stragglers.h).
struct StragglerEvent {
    std::int64_t step = 0; // the step that ended the window
    double computeTime = 0; // the rank's median compute-only time over the window, s
    double othersTime = 0; // the median of the other ranks' medians, s
    int window = 0; // steps
    double threshold = 0; // flagged when computeTime > (1 + threshold) x othersTime
};

// Written by the launcher: a step whose loss is over `factor` times the median of the steps
// before it (app/launcher/loss_spikes.h), with where its data was.
struct LossSpikeEvent {
    std::int64_t step = 0;
    double loss = 0;
    double median = 0; // of the `window` steps before
    std::int64_t epoch = 0;
    std::int64_t batch = 0; // StepEvent::batch: the step's first batch within the epoch (rank 0's)
    int window = 0;
    double factor = 0;
};

using EventBody = std::variant<HelloEvent, StepEvent, EvalEvent, MemoryEvent, TraceEvent, CheckpointEvent, LogEvent, ErrorEvent,
                               DoneEvent, HeartbeatEvent, StragglerEvent, LossSpikeEvent>;

struct Event {
    int version = kProtocolVersion;
    int rank = 0;
    double time = 0; // seconds since the Unix epoch
    EventBody body;

    std::string_view typeName() const;
};

// One line of JSON, without the trailing newline.
std::string encodeEvent(const Event& event);

// Parses one line. A malformed line, a missing field, a wrong type or an unknown event type is an
// error that says which, so the launcher can report the line and skip it.
Result<Event> decodeEvent(std::string_view line);

} // namespace shardscope::protocol
