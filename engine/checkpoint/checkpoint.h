#pragma once

// Checkpoints that resume exactly (Accelerate's save_state / load_state), in
// runs/<id>/checkpoints/step_<N>/:
//   manifest.json                 what is inside, with which world size, strategy and recipe;
//                                 written last: a folder without it is incomplete
//   model.safetensors             the full parameters (DDP, FULL_STATE_DICT), from rank 0
//   model_rank<r>.safetensors     this rank's flat shards (SHARDED_STATE_DICT)
//   optimizer_rank<r>.bin         the optimizer over this rank's parameters (libtorch archive)
//   optimizer.safetensors         FULL_STATE_DICT: the optimizer's state per parameter in full
//                                 (train/full_optimizer_state.h), from rank 0: it lets the
//                                 checkpoint resume at another world size
//   state_rank<r>.json            step, data position, loss scaler, skipped steps
//   random_states_rank<r>.safetensors   the CPU generator's state
//   fp8_state_rank<r>.safetensors  fp8 delayed scaling's amax histories, scales and call counts
//                                 of this rank's layers (only with delayed scaling)
// Writing goes to step_<N>.tmp/ and is renamed into place once every rank is done, so a crash
// leaves the previous checkpoint as it was and never a half-written one under a final name.

#include "engine/checkpoint/checkpoint_paths.h"
#include "engine/common/result.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace shardscope::checkpoint {

// The training loop's position and the loss scaler: what, besides tensors, a resume needs.
struct LoopState {
    std::int64_t step = 0; // optimizer steps done
    std::int64_t dataEpoch = 0;
    std::int64_t dataPosition = 0; // samples of the epoch this rank has consumed
    std::int64_t skippedSteps = 0;
    std::optional<double> lossScale; // fp16
    std::int64_t scalerGrowthTracker = 0;
};

// What must match for a checkpoint to be loadable: a description of the run's shape.
struct Compatibility {
    int worldSize = 1; // data-parallel ranks (with tensor parallelism: tensor groups)
    // parallelism_config's tp_size. A full state dict resumes at another one (its model and
    // optimizer state are whole); each rank's shards and optimizer archive hold its slices.
    int tensorParallel = 1;
    std::string strategy; // "ddp", "zero1", "FULL_SHARD", ...
    std::string stateDictType; // "FULL_STATE_DICT" or "SHARDED_STATE_DICT"
    std::string precision;
    std::string modelFingerprint; // config::modelFingerprint of the recipe's model
    // What checkpoints written before the typed fingerprint hold for the same model (the model
    // section as the recipe writer emitted it): they resume as before. Never written.
    std::string legacyModelFingerprint;
};

struct SaveRequest {
    std::string checkpointsDir; // runs/<id>/checkpoints
    int rank = 0;
    Compatibility compatibility;
    LoopState loop;
    // Rank 0's full named parameters (FULL_STATE_DICT; empty on other ranks), or this rank's
    // named shards (SHARDED_STATE_DICT).
    std::vector<std::pair<std::string, at::Tensor>> modelTensors;
    // The optimizer's archive, as bytes: written here with checked writes (libtorch's writer
    // fails from a destructor, i.e. by terminating, when the disk is full).
    std::function<std::string()> serializeOptimizer;
    // FULL_STATE_DICT: rank 0's full per-parameter optimizer state (optimizer.safetensors).
    std::vector<std::pair<std::string, at::Tensor>> fullOptimizerTensors;
    // This rank's fp8 delayed-scaling state (empty: none; no file is written).
    std::vector<std::pair<std::string, at::Tensor>> fp8State;
    std::function<void()> barrier; // all ranks of the job
    // Whether every rank's `ok` is true (an all-reduce): a rank that failed to write its files
    // must not leave the others waiting in a barrier, and every rank then reports the failure.
    std::function<bool(bool ok)> allRanksOk;
    std::int64_t keep = 0; // keep the newest `keep` checkpoints (0: all)
    // Fault injection for tests: rank 0 dies (exit 9) after writing its model file.
    bool crashWhileWriting = false;
};

// Every rank calls this; returns the final folder and the bytes this rank wrote.
std::pair<std::string, std::int64_t> saveCheckpoint(const SaveRequest& request);

struct LoadedCheckpoint {
    std::string path;
    LoopState loop;
    std::map<std::string, at::Tensor> modelTensors; // full parameters or this rank's shards
    std::string optimizerFile; // this rank's archive (same world size)
    // Written at another world size (FULL_STATE_DICT only): then the optimizer's state comes from
    // `fullOptimizerTensors`, and the loop state and RNG from rank 0's, with the data position
    // converted to this world size.
    std::optional<int> savedWorldSize;
    int savedTensorParallel = 1; // with savedWorldSize: the tp_size it was written with
    std::map<std::string, at::Tensor> fullOptimizerTensors;
    // This rank's fp8 delayed-scaling state; empty when the checkpoint has none, or was written
    // at another world size (each rank's amaxes are its own data's).
    std::map<std::string, at::Tensor> fp8State;
    std::string fp8StateFile; // its file name, for messages
};

// Checks the manifest (complete, compatible) and reads this rank's part. Errors say what does not
// match and how to proceed.
Result<LoadedCheckpoint> loadCheckpoint(const std::string& path, int rank, const Compatibility& expected);

} // namespace shardscope::checkpoint
