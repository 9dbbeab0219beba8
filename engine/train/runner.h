#pragma once

// Runs a recipe on this rank: builds model, data and optimizer, trains with the Accelerator,
// emits events. Torch-free header: the worker's main includes only this.

#include "engine/common/dist_env.h"
#include "engine/config/recipe.h"
#include "engine/dist/backend_kind.h"
#include "engine/parallel/sharding_options.h"
#include "engine/precision/precision_mode.h"

#include <optional>
#include <string>
#include <vector>

namespace shardscope::train {

struct RunOptions {
    config::Recipe recipe;
    dist::BackendKind backend = dist::BackendKind::Gloo;
    precision::PrecisionMode precision = precision::PrecisionMode::No;
    // FSDP / ZeRO instead of DDP (parallel/sharded.h). reduceInFloat32 is the Accelerator's to set.
    std::optional<parallel::ShardingOptions> sharding;
    std::string stateDictType = "FULL_STATE_DICT"; // fsdp_state_dict_type: or SHARDED_STATE_DICT
    std::string checkpointDir;   // runs/<id>/checkpoints (checkpoints need recipe training.checkpoint_every)
    std::string resumeFrom;      // a resolved step_<N> folder to continue from
    std::string exportDir;       // runs/<id>/export: save_model at the end (recipe export.enabled)
    std::int64_t crashInCheckpointAtStep = -1; // fault injection for tests
    std::int64_t injectNonfiniteGradAtStep = -1; // fault injection: a NaN in a synchronised gradient
    // Fault injection: from this step on, this rank cannot write files beyond 64 KiB (the kernel's
    // RLIMIT_FSIZE answers EFBIG, as a full disk answers ENOSPC).
    std::int64_t fillDiskAtStep = -1;
    // Profiling: spans of forward, backward, optimizer, data and every collective during the
    // recipe's profile window (or profileStartStep/profileSteps here, which win), written to
    // <traceDir>/rank<N>.json with a `trace` event carrying the summary.
    std::string traceDir;
    std::int64_t profileStartStep = -1;
    std::int64_t profileSteps = 0;
    int threads = 0;             // intra-op threads per rank; 0: cores / ranks on this machine
    std::string dumpParamsPath;  // rank 0 writes the final parameters there (safetensors)
    std::string dumpInitialPath; // rank 0 writes the initial parameters there (safetensors)
};

class EventSink;

// Asks a running training to stop after the current step (called from a signal handler: it only
// sets an atomic flag). All ranks agree on the step to stop after, then report "cancelled".
void requestStop();

// Throws on run-ending errors (bad data file, rendezvous failure); the worker's main reports them.
void runTraining(const DistEnv& env, const RunOptions& options, EventSink& events);

// One process, no distribution: loads the recipe's GPT from a GPT-2 folder (`weightsDir`), runs it
// on the first block_size bytes of `inputPath` and writes the logits to `outputPath`
// (safetensors, "logits" [1, T, vocab]). What the export's parity check compares against.
void writeLogits(const config::Recipe& recipe, const std::string& weightsDir, const std::string& inputPath,
                 const std::string& outputPath);

} // namespace shardscope::train
