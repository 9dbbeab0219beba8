#pragma once

// The Accelerate config of one data-parallel layout on one machine, as a typed choice: DDP, FSDP2
// FULL_SHARD or SHARD_GRAD_OP (with activation checkpointing and parameter offload), DeepSpeed
// ZeRO 1-3 (with optimizer offload). `shardscope tune` tries these; it names layouts, this file
// spells the keys (the config is the one `accelerate config` writes for those answers).

#include "engine/accelerate/accelerate_config.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope::config {

enum class DataParallelLayout { Ddp, FsdpFullShard, FsdpShardGradOp, Zero1, Zero2, Zero3 };

// Every layout, in the order the tuner lists them.
const std::vector<DataParallelLayout>& allDataParallelLayouts();
// "DDP", "FSDP FULL_SHARD", "FSDP SHARD_GRAD_OP", "ZeRO-1", "ZeRO-2", "ZeRO-3".
std::string_view layoutName(DataParallelLayout layout);
// The layout a user named: its whole name or its last word, any case ("full_shard", "zero-3").
std::optional<DataParallelLayout> layoutNamed(const std::string& given);
bool layoutHasActivationCheckpointing(DataParallelLayout layout); // FSDP's
bool layoutHasOffload(DataParallelLayout layout); // FSDP's parameters, ZeRO-2/3's optimizer state

struct DataParallelChoice {
    DataParallelLayout layout = DataParallelLayout::Ddp;
    int numProcesses = 1;
    bool gpu = false; // MULTI_GPU ranks; else CPU ranks (use_cpu)
    std::string mixedPrecision = "no";
    bool activationCheckpointing = false; // where the layout has it
    bool offload = false; // where the layout has it
};

AccelerateConfig configForChoice(const DataParallelChoice& choice);

} // namespace shardscope::config
