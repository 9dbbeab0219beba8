#pragma once

// The run plan: everything a rank needs to know about a run, typed, in one place. It is built
// once, before any rank starts, by buildRunPlan from the Accelerate config (flags merged in), the
// recipe, the launch's own options and this machine; the launcher writes it to
// runs/<id>/plan.json and each rank reads it back with `shardscope-worker train --plan FILE`,
// which is the worker's only description of the run. The Configure page calls buildRunPlan as
// well, so whatever `shardscope launch` would refuse is shown there before Launch.
//
// Torch-free and Qt-free like the rest of engine/plan.

#include "engine/common/backend_kind.h"
#include "engine/common/result.h"
#include "engine/accelerate/accelerate_config.h"
#include "engine/accelerate/env_export.h"
#include "engine/plan/float8_options.h"
#include "engine/plan/parallelism.h"
#include "engine/plan/precision_mode.h"
#include "engine/recipe/recipe.h"
#include "engine/plan/sharding_options.h"
#include "engine/accelerate/validation.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shardscope::config {

// fsdp_state_dict_type: how checkpoints hold the model (FULL: one file gathered on rank 0).
enum class StateDictType { Full, Sharded };
std::string stateDictTypeName(StateDictType type); // "FULL_STATE_DICT", "SHARDED_STATE_DICT"

// Fault injection, for the reliability tests only: each is off at -1. Set through the launch's
// engine flags (`shardscope launch ... -- --crash-in-checkpoint 3`), the one seam tests have.
struct FaultInjection {
    std::int64_t crashInCheckpointAtStep = -1; // rank 0 dies while writing this step's checkpoint
    std::int64_t injectNonfiniteGradAtStep = -1; // a NaN in a synchronised gradient at this step
    // From this step on, the rank cannot write files beyond 64 KiB (RLIMIT_FSIZE answers EFBIG,
    // as a full disk answers ENOSPC).
    std::int64_t fillDiskAtStep = -1;
    int fillDiskRank = -1; // only this rank's disk fills (-1: every rank's)
    // This rank sleeps slowForwardMs after each forward pass (a straggler for the detector's tests).
    int slowRank = -1;
    int slowForwardMs = 0;
    // The batches of this step are spoilt (regression targets x 3, token targets random): its
    // loss spikes (for the loss-spike detector's tests).
    std::int64_t spikeAtStep = -1;
    // This rank does not issue collective skipSeq of the default process group, and holds there
    // (for the hang diagnosis's tests).
    int skipCollectiveRank = -1;
    std::int64_t skipCollectiveSeq = -1;
    // This rank spins (busy, in no collective) from this step's forward on, its heartbeat thread
    // beating on (a loop that never reaches the next collective, for the hang check's tests).
    int spinRank = -1;
    std::int64_t spinAtStep = -1;
    // The output of this module (a wrappable module's name, e.g. "h.1") gets a NaN in this step's
    // forward, on every rank (for the non-finite origin's tests).
    std::string nonfiniteOutputModule;
    std::int64_t nonfiniteOutputAtStep = -1;
    // Every rank asks for more memory than any machine has in this step's forward (the
    // out-of-memory report's tests).
    std::int64_t outOfMemoryAtStep = -1;
    // Steps cycle through #22's diagnostics off, all on, the flight recorder and wait clock alone,
    // the NaN probe and memory per phase alone: the overhead benchmark (scripts/bench-diagnostics.sh).
    // Not a fault.
    bool diagnosticsAb = false;
    std::string dumpParamsPath; // rank 0 writes the final parameters there (safetensors)
    std::string dumpInitialPath; // rank 0 writes the initial parameters there (safetensors)
};

struct RunPlan {
    static constexpr int kFormatVersion = 2; // 2: state_layout

    // The launch's shape (Accelerate's meaning: numProcesses counts every machine's ranks).
    int numProcesses = 1;
    int numMachines = 1;
    int machineRank = 0;
    std::string mainProcessIp = "127.0.0.1";
    int mainProcessPort = 0;
    std::string distributedType = "NO"; // Accelerate's spelling, for the history
    std::vector<std::string> environment; // NAME=VALUE, what accelerate launch gives each rank

    // What the ranks do.
    std::string runDir; // runs/<id>: checkpoints, export and traces go inside (RunLayout)
    Recipe recipe; // with every override applied (--max_steps, DeepSpeed's accumulation, ...)
    dist::BackendKind backend = dist::BackendKind::Gloo;
    precision::PrecisionMode precision = precision::PrecisionMode::No;
    Float8Options fp8; // how mixed_precision fp8 scales; unused by the other modes
    std::optional<parallel::ShardingOptions> sharding; // FSDP / ZeRO; none: DDP
    // parallelism_config's tp_size: the decoder's projections split over this many consecutive
    // ranks (parallel/tensor_parallel.h); the data parallelism above runs over the others.
    int tensorParallelSize = 1;
    // Where the model states live, as the memory estimate counts them (stateLayoutOf the same
    // reading the sharding comes from): the Configure page's chart and the rank's OOM report.
    ModelStateLayout stateLayout;
    StateDictType stateDictType = StateDictType::Full;
    std::string resumeFrom; // a resolved step_<N> folder; empty: start fresh
    // Where checkpoints are saved; empty: <runDir>/checkpoints. A run over several machines keeps
    // them in one folder every machine sees (each machine's run directory is its own).
    std::string checkpointsDir;
    // The machine peaks file (engine/train/mfu.h) MFU is measured against: the launcher gives the
    // one beside the history; empty: a CPU is measured for the run alone.
    std::string machinePeaksFile;
    // Profiling window (from --profile or the recipe's profile section); -1: none.
    std::int64_t profileStartStep = -1;
    std::int64_t profileSteps = 0;
    // Intra-op threads per rank: --threads, else the launching environment's OMP_NUM_THREADS (as a
    // PyTorch rank follows it); 0: cores / ranks on this machine.
    int threads = 0;
    FaultInjection faults;

    int localProcesses() const { return numProcesses / std::max(1, numMachines); }
};

// What buildRunPlan starts from.
struct PlanInputs {
    // The Accelerate config with the launch flags merged in (applyOverrides); none: a run without
    // a config, shaped by the numbers below. It is validated as given (so spellings accelerate
    // launch would normalise are warnings) and planned normalised.
    std::optional<AccelerateConfig> config;
    std::string configBaseDir; // resolves a relative deepspeed_config_file
    // Without a config, the launch's shape from its flags.
    int numProcesses = 1;
    int numMachines = 1;
    int machineRank = 0;
    std::string mainProcessIp = "127.0.0.1";
    int mainProcessPort = 0;
    // The recipe, and the name its messages use (its file).
    std::optional<Recipe> recipe;
    std::string recipeSource;
    // Whether the recipe's files are read (its text data, a model's config.json and the data
    // against its vocabulary). The Configure page plans on every edit without them, on the GUI
    // thread, and checks them apart; the launcher always reads them.
    bool readRecipeFiles = true;
    std::int64_t maxSteps = 0; // --max_steps; 0: the recipe's
    std::string mixedPrecision; // --mixed_precision (bf16-pure too); empty: the config's
    bool profile = false; // --profile: a window after warm-up
    // Engine flags (`shardscope launch ... -- FLAGS`): the engine's own options, over the config's;
    // for tests and experiments, and the seam for fault injection. See engineFlagHelp().
    std::vector<std::string> engineFlags;
    std::string runDir;
    // This machine: GPUs decide the backend and what the config may ask; its cores and the
    // launching environment decide part of Accelerate's environment.
    MachineInfo machine;
    EnvironmentOptions environment;
};

struct PlanResult {
    std::optional<RunPlan> plan; // set only when no problem is an error
    std::vector<Diagnostic> problems; // every error and warning, not only the first
    bool ok() const { return plan.has_value(); }
};

// Every check `accelerate launch` makes of the config and ours of the combination (what this
// engine cannot do, what this machine cannot run, what the recipe or the flags get wrong), all
// reported together. A problem of the recipe has keyPath "recipe"; of an engine flag, "--<flag>".
PlanResult buildRunPlan(const PlanInputs& inputs);

// The engine flags buildRunPlan understands, one per line with its meaning (for --help texts).
std::string engineFlagHelp();

// The run's device mesh for people (the Run page): empty for one data-parallel dimension; else
// its dimensions and groups, and where each rank is in them (replica and shard, or tensor group
// and data-parallel position), as the ranks form them.
struct MeshDescription {
    std::string summary; // "dp_shard 2 x tp 2: tensor groups [0, 1] [2, 3], data groups [0, 2] [1, 3]"
    std::vector<std::string> ranks; // "rank 2: tensor group 1 (its rank 0), data-parallel rank 1 of 2"
    bool empty() const { return summary.empty(); }
};
MeshDescription describeMesh(const RunPlan& plan);

// plan.json: written by the launcher, read by every rank. Reading checks the format version and
// every field's type and value; an error names the field.
std::string planToJson(const RunPlan& plan);
Result<RunPlan> planFromJson(const std::string& text, const std::string& source);
Result<RunPlan> loadPlan(const std::string& path);

} // namespace shardscope::config
