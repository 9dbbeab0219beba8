#pragma once

// Runs a run plan on this rank (engine/plan/run_plan.h): builds model, data and optimizer,
// trains with the Accelerator, emits events. Torch-free header: the worker's main includes only this.

#include "engine/common/dist_env.h"
#include "engine/recipe/recipe.h"
#include "engine/plan/run_plan.h"

#include <string>

namespace shardscope::train {

class EventSink;

// Asks a running training to stop after the current step (called from a signal handler: it only
// sets an atomic flag). All ranks agree on the step to stop after, then report "cancelled".
void requestStop();
// Asks it to save a checkpoint after the current step and then stop (SIGTERM, SIGUSR1: a time
// limit's warning, a preemption, a laptop closing). All ranks agree on the step, save the same
// checkpoint and report "checkpointed"; without a run directory it is a plain stop.
void requestCheckpointAndStop();

// Throws on run-ending errors (bad data file, rendezvous failure); the worker's main reports them.
void runTraining(const DistEnv& env, const config::RunPlan& plan, EventSink& events);

// One process, no distribution: loads the recipe's GPT from a GPT-2 folder (`weightsDir`), runs it
// on the first block_size bytes of `inputPath` and writes the logits to `outputPath`
// (safetensors, "logits" [1, T, vocab]). What the export's parity check compares against.
void writeLogits(const config::Recipe& recipe, const std::string& weightsDir, const std::string& inputPath,
                 const std::string& outputPath);

} // namespace shardscope::train
