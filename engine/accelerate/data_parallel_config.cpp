#include "engine/accelerate/data_parallel_config.h"

#include "engine/accelerate/ascii_case.h"

namespace shardscope::config {

namespace {

bool isFsdp(DataParallelLayout layout)
{
    return layout == DataParallelLayout::FsdpFullShard || layout == DataParallelLayout::FsdpShardGradOp;
}

bool isZero(DataParallelLayout layout)
{
    return layout == DataParallelLayout::Zero1 || layout == DataParallelLayout::Zero2 || layout == DataParallelLayout::Zero3;
}

} // namespace

const std::vector<DataParallelLayout>& allDataParallelLayouts()
{
    static const std::vector<DataParallelLayout> layouts{
        DataParallelLayout::Ddp,   DataParallelLayout::FsdpFullShard, DataParallelLayout::FsdpShardGradOp,
        DataParallelLayout::Zero1, DataParallelLayout::Zero2,         DataParallelLayout::Zero3};
    return layouts;
}

std::string_view layoutName(DataParallelLayout layout)
{
    switch (layout) {
    case DataParallelLayout::Ddp:
        return "DDP";
    case DataParallelLayout::FsdpFullShard:
        return "FSDP FULL_SHARD";
    case DataParallelLayout::FsdpShardGradOp:
        return "FSDP SHARD_GRAD_OP";
    case DataParallelLayout::Zero1:
        return "ZeRO-1";
    case DataParallelLayout::Zero2:
        return "ZeRO-2";
    case DataParallelLayout::Zero3:
        return "ZeRO-3";
    }
    return "DDP";
}

std::optional<DataParallelLayout> layoutNamed(const std::string& given)
{
    const std::string g = asciiUpper(given);
    for (DataParallelLayout layout : allDataParallelLayouts()) {
        const std::string l = asciiUpper(std::string(layoutName(layout)));
        if (g == l
            || (l.size() > g.size() && l.compare(l.size() - g.size(), g.size(), g) == 0 && l[l.size() - g.size() - 1] == ' '))
            return layout;
    }
    return std::nullopt;
}

bool layoutHasActivationCheckpointing(DataParallelLayout layout) { return isFsdp(layout); }

bool layoutHasOffload(DataParallelLayout layout)
{
    return isFsdp(layout) || layout == DataParallelLayout::Zero2 || layout == DataParallelLayout::Zero3;
}

AccelerateConfig configForChoice(const DataParallelChoice& choice)
{
    AccelerateConfig config{ConfigKind::Cluster, Value::emptyMap()};
    config.setField("compute_environment", Value("LOCAL_MACHINE"));
    // As `accelerate config` writes them, and as loading a file without them sets them (use_cpu too).
    config.setField("debug", Value(false));
    config.setField("enable_cpu_affinity", Value(false));
    config.setField("num_processes", Value(choice.numProcesses));
    config.setField("mixed_precision", Value(choice.mixedPrecision));
    config.setField("use_cpu", Value(!choice.gpu));
    if (isFsdp(choice.layout)) {
        config.setField("distributed_type", Value("FSDP"));
        Value fsdp = Value::emptyMap();
        fsdp.set("fsdp_version", Value(2));
        fsdp.set("fsdp_auto_wrap_policy", Value("TRANSFORMER_BASED_WRAP"));
        fsdp.set("fsdp_reshard_after_forward", Value(choice.layout == DataParallelLayout::FsdpFullShard));
        fsdp.set("fsdp_activation_checkpointing", Value(choice.activationCheckpointing));
        fsdp.set("fsdp_offload_params", Value(choice.offload));
        fsdp.set("fsdp_state_dict_type", Value("FULL_STATE_DICT"));
        config.setField("fsdp_config", std::move(fsdp));
    } else if (isZero(choice.layout)) {
        const int stage = choice.layout == DataParallelLayout::Zero1 ? 1 : choice.layout == DataParallelLayout::Zero2 ? 2 : 3;
        config.setField("distributed_type", Value("DEEPSPEED"));
        Value deepspeed = Value::emptyMap();
        deepspeed.set("zero_stage", Value(stage));
        deepspeed.set("offload_optimizer_device", Value(choice.offload ? "cpu" : "none"));
        deepspeed.set("offload_param_device", Value("none"));
        config.setField("deepspeed_config", std::move(deepspeed));
    } else {
        config.setField("distributed_type", Value(choice.gpu ? "MULTI_GPU" : "MULTI_CPU"));
    }
    return config;
}

} // namespace shardscope::config
