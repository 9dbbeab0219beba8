#include "engine/accelerate/deepspeed_json.h"

#include "engine/accelerate/yaml_io.h"

#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>

namespace shardscope::config {

namespace {

bool isAuto(const Value* v) { return v && v->isString() && v->asString() == "auto"; }

Value* section(Value& root, const char* key)
{
    Value* s = root.find(key);
    if (!s || !s->isMap()) {
        root.set(key, Value::emptyMap());
        s = root.find(key);
    }
    return s;
}

} // namespace

Result<Value> loadDeepSpeedJson(const std::string& path)
{
    auto text = readTextFile(path);
    if (!text)
        return text.error();
    auto json = parseJson(*text, path);
    if (!json)
        return json.error();
    if (!json->isMap())
        return makeError(path + ": a DeepSpeed config is a JSON object, not " + json->typeName());
    return json;
}

const std::vector<std::string>& deepSpeedConflictKeys()
{
    static const std::vector<std::string> keys = {
        "gradient_accumulation_steps", "gradient_clipping",     "zero_stage",
        "offload_optimizer_device",    "offload_param_device",  "offload_param_nvme_path",
        "offload_optimizer_nvme_path", "zero3_save_16bit_model"};
    return keys;
}

namespace {

using ConfigValue = std::function<const Value*(const char*)>;

// The user's DeepSpeed JSON file, checked against the Accelerate config's own DeepSpeed keys.
Result<Value> fromFile(const AccelerateConfig& config, const ConfigValue& ds, const std::string& file, const std::string& baseDir)
{
    std::vector<std::string> conflicts;
    for (const auto& k : deepSpeedConflictKeys())
        if (ds(k.c_str()))
            conflicts.push_back(k);
    if (!config.field("mixed_precision").isNull())
        conflicts.emplace_back("mixed_precision");
    if (!conflicts.empty()) {
        std::string list;
        for (const auto& c : conflicts)
            list += (list.empty() ? "" : ", ") + c;
        return makeError("When using `deepspeed_config_file`, the following accelerate config variables will be ignored: [" + list
                         + "]. Please specify them appropriately in the DeepSpeed config file (" + file
                         + ") or assign them the value \"auto\" there, then remove them from the accelerate config file.");
    }
    std::filesystem::path p(file);
    if (p.is_relative() && !baseDir.empty())
        p = std::filesystem::path(baseDir) / p;
    auto json = loadDeepSpeedJson(p.string());
    if (!json)
        return json.error();
    Value out = std::move(*json);
    if (!out.contains("gradient_accumulation_steps"))
        out.set("gradient_accumulation_steps", Value(1));
    if (!out.contains("zero_optimization"))
        return makeError(p.string()
                         + ": Please specify the ZeRO optimization config in the DeepSpeed config "
                           "(\"zero_optimization\": {\"stage\": ...}).");
    return out;
}

// Without a file: the config DeepSpeed's plugin synthesises from the Accelerate config's keys.
Value synthesised(const ConfigValue& ds)
{
    Value out;
    // Synthesised as the plugin does without a file.
    out = Value::emptyMap();
    out.set("train_batch_size", Value("auto"));
    out.set("train_micro_batch_size_per_gpu", Value("auto"));
    const Value* gas = ds("gradient_accumulation_steps");
    out.set("gradient_accumulation_steps", gas ? *gas : Value("auto"));
    Value zo = Value::emptyMap();
    const Value* stage = ds("zero_stage");
    zo.set("stage", stage ? *stage : Value(2));
    for (const char* which : {"optimizer", "param"}) {
        Value off = Value::emptyMap();
        const std::string devKey = std::string("offload_") + which + "_device";
        const std::string pathKey = std::string("offload_") + which + "_nvme_path";
        const Value* dev = ds(devKey.c_str());
        off.set("device", dev ? *dev : Value("none"));
        if (dev && dev->isString() && dev->asString() == "nvme") {
            const Value* path = ds(pathKey.c_str());
            off.set("nvme_path", path ? *path : Value("none"));
        }
        zo.set(std::string("offload_") + which, off);
    }
    const Value* save16 = ds("zero3_save_16bit_model");
    zo.set("stage3_gather_16bit_weights_on_model_save", save16 ? *save16 : Value(false));
    out.set("zero_optimization", zo);
    const Value* clip = ds("gradient_clipping");
    if (!clip || clip->truthy())
        out.set("gradient_clipping", clip ? *clip : Value("auto"));
    out.set("steps_per_print", Value(std::numeric_limits<double>::infinity()));
    return out;
}

// Mixed precision, as AcceleratorState's setter writes it into the DeepSpeed config.
Result<void> applyMixedPrecision(Value& out, const std::string& mp)
{
    const bool wantFp16 = mp == "fp16", wantBf16 = mp == "bf16" || mp == "fp8";
    auto enabled = [&](const char* k) -> std::optional<bool> {
        const Value* s = out.find(k);
        const Value* e = s && s->isMap() ? s->find("enabled") : nullptr;
        if (e && e->isBool())
            return e->asBool();
        return std::nullopt;
    };
    if (wantFp16 && enabled("bf16").value_or(false))
        return makeError("--mixed_precision fp16 was requested, but the DeepSpeed config enables bf16; use one of them "
                         "(set \"bf16\": {\"enabled\": false} or --mixed_precision bf16)");
    if (wantBf16 && enabled("fp16").value_or(false))
        return makeError("--mixed_precision " + mp + " was requested, but the DeepSpeed config enables fp16; use one of them");
    if (wantFp16 && !out.contains("fp16")) {
        Value s = Value::emptyMap();
        s.set("enabled", Value(true));
        s.set("auto_cast", Value(true));
        out.set("fp16", s);
    }
    if (wantBf16 && !out.contains("bf16")) {
        Value s = Value::emptyMap();
        s.set("enabled", Value(true));
        out.set("bf16", s);
    }
    for (const char* k : {"fp16", "bf16"}) {
        if (!out.contains(k)) {
            Value s = Value::emptyMap();
            s.set("enabled", Value(false));
            out.set(k, s);
        }
        Value* s = section(out, k);
        if (isAuto(s->find("enabled")))
            s->set("enabled", Value(std::string(k) == "fp16" ? wantFp16 : wantBf16));
    }

    return {};
}

// The "auto" values, filled at prepare() from the training's own settings.
Result<void> fillAutoValues(Value& out, const DeepSpeedContext& ctx)
{
    auto need = [&](const std::string& what, const std::string& from) -> Error {
        return makeError("The DeepSpeed config has \"auto\" for " + what + ", which is filled from " + from
                         + "; give it a concrete value in the JSON file, or set " + from + " in the recipe.");
    };
    if (isAuto(out.find("gradient_accumulation_steps")))
        out.set("gradient_accumulation_steps", Value(ctx.gradientAccumulationSteps));
    if (isAuto(out.find("train_micro_batch_size_per_gpu"))) {
        if (!ctx.microBatchPerGpu)
            return need("train_micro_batch_size_per_gpu", "the training batch size");
        out.set("train_micro_batch_size_per_gpu", Value(*ctx.microBatchPerGpu));
    }
    if (isAuto(out.find("train_batch_size"))) {
        const Value* micro = out.find("train_micro_batch_size_per_gpu");
        const Value* gas = out.find("gradient_accumulation_steps");
        if (!micro || !micro->isInt() || !gas || !gas->isInt())
            return need("train_batch_size", "the training batch size");
        out.set("train_batch_size", Value(micro->asInt() * gas->asInt() * ctx.numProcesses));
    }
    if (isAuto(out.find("gradient_clipping")))
        out.set("gradient_clipping", Value(1.0));
    Value* zo = out.find("zero_optimization");
    if (zo && zo->isMap()) {
        if (isAuto(zo->find("stage3_gather_16bit_weights_on_model_save")))
            zo->set("stage3_gather_16bit_weights_on_model_save", Value(false));
        const char* hiddenKeys[] = {"reduce_bucket_size", "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold"};
        for (const char* k : hiddenKeys) {
            if (!isAuto(zo->find(k)))
                continue;
            if (!ctx.hiddenSize)
                return need(std::string("zero_optimization.") + k, "the model's hidden size");
            const auto h = *ctx.hiddenSize;
            const std::string key = k;
            if (key == "reduce_bucket_size")
                zo->set(k, Value(h * h));
            else if (key == "stage3_prefetch_bucket_size")
                zo->set(k, Value(static_cast<std::int64_t>(0.9 * static_cast<double>(h * h))));
            else
                zo->set(k, Value(10 * h));
        }
    }
    if (Value* opt = out.find("optimizer"); opt && opt->isMap()) {
        if (Value* params = opt->find("params"); params && params->isMap()) {
            if (isAuto(params->find("lr"))) {
                if (!ctx.learningRate)
                    return need("optimizer.params.lr", "the optimizer's learning rate");
                params->set("lr", Value(*ctx.learningRate));
            }
            if (isAuto(params->find("weight_decay"))) {
                if (!ctx.weightDecay)
                    return need("optimizer.params.weight_decay", "the optimizer's weight decay");
                params->set("weight_decay", Value(*ctx.weightDecay));
            }
        }
    }
    if (Value* sch = out.find("scheduler"); sch && sch->isMap()) {
        if (Value* params = sch->find("params"); params && params->isMap()) {
            if (isAuto(params->find("warmup_min_lr")))
                params->set("warmup_min_lr", Value(0));
            if (isAuto(params->find("warmup_max_lr"))) {
                if (!ctx.learningRate)
                    return need("scheduler.params.warmup_max_lr", "the optimizer's learning rate");
                params->set("warmup_max_lr", Value(*ctx.learningRate));
            }
            if (isAuto(params->find("warmup_num_steps")))
                params->set("warmup_num_steps", Value(ctx.warmupSteps.value_or(0)));
            if (isAuto(params->find("total_num_steps"))) {
                if (!ctx.totalSteps)
                    return need("scheduler.params.total_num_steps", "the number of training steps");
                params->set("total_num_steps",
                            Value(static_cast<std::int64_t>(std::ceil(static_cast<double>(*ctx.totalSteps) / ctx.numProcesses))));
            }
        }
    }
    return {};
}

} // namespace

Result<Value> resolveDeepSpeedConfig(const AccelerateConfig& config, const DeepSpeedContext& ctx, const std::string& baseDir)
{
    const ConfigValue ds = [&](const char* k) { return config.nested("deepspeed_config", k); };
    const Value* fileV = ds("deepspeed_config_file");
    const std::string file = fileV && fileV->isString() ? fileV->asString() : std::string("none");
    Value out;
    if (file != "none" && !file.empty()) {
        auto loaded = fromFile(config, ds, file, baseDir);
        if (!loaded)
            return loaded.error();
        out = std::move(*loaded);
    } else {
        out = synthesised(ds);
    }
    if (auto applied = applyMixedPrecision(out, ctx.mixedPrecision); !applied)
        return applied.error();
    if (auto filled = fillAutoValues(out, ctx); !filled)
        return filled.error();
    return out;
}
} // namespace shardscope::config
