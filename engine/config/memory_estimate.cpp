#include "engine/config/memory_estimate.h"

#include "engine/config/float8_options.h"
#include "engine/config/hf_config_keys.h"
#include "engine/config/model_architecture.h"

#include "engine/config/schema.h"
#include "engine/config/yaml_io.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <cstdio>
#include <filesystem>
#include <limits>

namespace shardscope::config {

StateBytes stateBytesPerParameter(PrecisionMode precision, OptimizerKind optimizer)
{
    // Optimizer bytes include the fp32 master copy where one exists (the ZeRO paper's K = 12
    // for mixed-precision Adam: master 4 + momentum 4 + variance 4).
    const double moments = optimizer == OptimizerKind::Adam ? 2 : optimizer == OptimizerKind::SgdMomentum ? 1 : 0;
    switch (precision) {
    case PrecisionMode::Fp32:
        return {4, 4, 4 * moments};
    case PrecisionMode::Mixed16:
    case PrecisionMode::Fp8:
        return {2, 2, 4 + 4 * moments};
    case PrecisionMode::PureBf16:
        return {2, 2, 2 * moments};
    }
    return {4, 4, 4 * moments};
}

MemoryEstimate estimateMemory(const ModelShape& model, PrecisionMode precision, const Sharding& sharding, OptimizerKind optimizer,
                              const Fp8Scaling& fp8)
{
    const bool autocastMixed = sharding.autocast && (precision == PrecisionMode::Mixed16 || precision == PrecisionMode::Fp8);
    const StateBytes b = stateBytesPerParameter(autocastMixed ? PrecisionMode::Fp32 : precision, optimizer);
    const double psi = static_cast<double>(model.parameters);
    const double trained = model.trainable >= 0 ? static_cast<double>(model.trainable) : psi;
    const double n = std::max(1, sharding.shardRanks);
    const int stage = std::clamp(sharding.zeroStage, 0, 3);
    MemoryEstimate e;
    double params = b.parameters * psi;
    double grads = b.gradients * trained;
    double opt = b.optimizer * trained;
    if (stage >= 1)
        opt /= n;
    // ZeRO-1/2 keep an fp32 master partition of the parameters apart from the (replicated) model
    // parameters, whatever the model dtype (DeepSpeed's semantics, and Shardscope's engine): with
    // fp32 models that partition is extra, 4 bytes per parameter / N. At stage 3 the fp32 shard is
    // the parameter itself. (In mixed precision the master copy is already in K = 12.)
    if ((stage == 1 || stage == 2) && precision == PrecisionMode::Fp32)
        opt += 4.0 * trained / n;
    if (stage >= 2)
        grads /= n;
    if (stage >= 3)
        params /= n;
    e.parameters = params;
    e.gradients = grads;
    e.optimizer = opt;
    // Delayed scaling: per fp8 layer three operands (input, weight, output gradient), each an fp32
    // scale and an fp32 amax history, replicated on every rank (engine/precision/float8_linear.h).
    if (precision == PrecisionMode::Fp8 && fp8.delayed)
        e.fp8Scaling = static_cast<double>(model.fp8Linears) * 3.0 * 4.0 * static_cast<double>(fp8.amaxHistoryLen + 1);
    if (sharding.offloadOptimizer) {
        e.hostOptimizer = e.optimizer;
        e.optimizer = 0;
    }
    if (sharding.offloadParams) {
        e.hostParameters = e.parameters;
        e.parameters = 0;
    }
    if (sharding.offloadGrads) {
        e.hostGradients = e.gradients;
        e.gradients = 0;
    }
    if (model.layers > 0 && model.hidden > 0 && model.sequence > 0 && model.microBatch > 0) {
        const double s = static_cast<double>(model.sequence), bsz = static_cast<double>(model.microBatch);
        const double h = static_cast<double>(model.hidden), L = static_cast<double>(model.layers);
        const double a = static_cast<double>(std::max<std::int64_t>(model.heads, 1));
        // Korthikanti et al.: sbh(34 + 5as/h) bytes per layer with 16-bit activations; fp32 doubles it.
        const double width = (precision == PrecisionMode::Fp32) ? 2.0 : 1.0;
        const double perLayer = s * bsz * h * (34.0 + 5.0 * a * s / h) * width;
        double act = sharding.activationCheckpointing ? (L * 2.0 * s * bsz * h * width + perLayer) : L * perLayer;
        if (model.vocab > 0)
            act += s * bsz * static_cast<double>(model.vocab) * 4.0; // fp32 logits for the loss
        e.activations = act;
    }
    return e;
}

PrecisionMode precisionFromName(const std::string& mp)
{
    if (mp == "fp16" || mp == "bf16")
        return PrecisionMode::Mixed16;
    if (mp == "fp8")
        return PrecisionMode::Fp8;
    if (mp == "bf16-pure" || mp == "bf16_pure")
        return PrecisionMode::PureBf16;
    return PrecisionMode::Fp32;
}

std::string precisionName(PrecisionMode p)
{
    switch (p) {
    case PrecisionMode::Fp32:
        return "fp32";
    case PrecisionMode::Mixed16:
        return "fp16/bf16 mixed";
    case PrecisionMode::PureBf16:
        return "bf16 pure";
    case PrecisionMode::Fp8:
        return "fp8";
    }
    return {};
}

Result<MemorySetup> memorySetupFromConfig(const AccelerateConfig& config, const std::string& baseDir)
{
    MemorySetup setup;
    setup.precision = precisionFromName(config.mixedPrecision());
    const std::string type = config.distributedType();
    const auto n = config.intField("num_processes").value_or(1);
    setup.sharding.shardRanks = static_cast<int>(std::max<std::int64_t>(1, n));
    auto str = [&](const char* section, const char* key) {
        const Value* v = config.nested(section, key);
        return v && v->isString() ? v->asString() : std::string();
    };
    if (type == "DEEPSPEED") {
        int stage = 2;
        if (const Value* s = config.nested("deepspeed_config", "zero_stage"); s && s->isInt())
            stage = static_cast<int>(s->asInt());
        std::string optDev = str("deepspeed_config", "offload_optimizer_device");
        std::string paramDev = str("deepspeed_config", "offload_param_device");
        const std::string file = str("deepspeed_config", "deepspeed_config_file");
        if (!file.empty() && file != "none") {
            std::filesystem::path p(file);
            if (p.is_relative() && !baseDir.empty())
                p = std::filesystem::path(baseDir) / p;
            auto text = readTextFile(p.string());
            if (!text)
                return makeError("deepspeed_config.deepspeed_config_file: " + text.error().message);
            auto json = parseJson(*text, p.string());
            if (!json)
                return json.error();
            if (const Value* zo = json->find("zero_optimization"); zo && zo->isMap()) {
                if (const Value* s = zo->find("stage"); s && s->isInt())
                    stage = static_cast<int>(s->asInt());
                auto dev = [](const Value* section) {
                    const Value* d = section && section->isMap() ? section->find("device") : nullptr;
                    return d && d->isString() ? d->asString() : std::string();
                };
                if (auto d = dev(zo->find("offload_optimizer")); !d.empty() && d != "auto")
                    optDev = d;
                if (auto d = dev(zo->find("offload_param")); !d.empty() && d != "auto")
                    paramDev = d;
            }
            if (const Value* bf = json->find("bf16");
                bf && bf->isMap() && bf->find("enabled") && bf->find("enabled")->isBool() && bf->find("enabled")->asBool())
                setup.precision = PrecisionMode::Mixed16;
            if (const Value* fp = json->find("fp16");
                fp && fp->isMap() && fp->find("enabled") && fp->find("enabled")->isBool() && fp->find("enabled")->asBool())
                setup.precision = PrecisionMode::Mixed16;
        }
        setup.sharding.zeroStage = stage;
        setup.sharding.offloadOptimizer = optDev == "cpu" || optDev == "nvme";
        setup.sharding.offloadParams = stage == 3 && (paramDev == "cpu" || paramDev == "nvme");
        setup.sharding.label = "ZeRO-" + std::to_string(stage);
        if (setup.sharding.offloadOptimizer)
            setup.sharding.label += " + optimizer offload (" + optDev + ")";
        if (setup.sharding.offloadParams)
            setup.sharding.label += " + param offload (" + paramDev + ")";
    } else if (type == "FSDP") {
        const Value* version = config.nested("fsdp_config", "fsdp_version");
        const bool v2 = version && version->isInt() && version->asInt() == 2;
        std::string strategy = "FULL_SHARD";
        if (v2) {
            const Value* r = config.nested("fsdp_config", "fsdp_reshard_after_forward");
            strategy = (r && r->isBool() && !r->asBool()) ? "SHARD_GRAD_OP" : "FULL_SHARD";
        } else {
            // Honour what the user wrote (see docs/CONFIG.md on Accelerate's FSDP1 strategy bug).
            const Value* legacy = config.nested("fsdp_config", "fsdp_sharding_strategy");
            const Value* raf = config.nested("fsdp_config", "fsdp_reshard_after_forward");
            const auto& names = fsdpShardingStrategies();
            if (legacy && legacy->isString())
                strategy = legacy->asString();
            else if (legacy && legacy->isInt() && legacy->asInt() >= 1 && legacy->asInt() <= 5)
                strategy = names[static_cast<std::size_t>(legacy->asInt() - 1)];
            else if (raf && raf->isString())
                strategy = raf->asString();
        }
        std::transform(strategy.begin(), strategy.end(), strategy.begin(), [](unsigned char c) { return std::toupper(c); });
        setup.sharding.zeroStage = (strategy == "FULL_SHARD" || strategy == "HYBRID_SHARD")            ? 3
                                   : (strategy == "SHARD_GRAD_OP" || strategy == "HYBRID_SHARD_ZERO2") ? 2
                                                                                                       : 0;
        if (const Value* dp = config.nested("parallelism_config", "parallelism_config_dp_shard_size");
            dp && dp->isInt() && dp->asInt() > 1)
            setup.sharding.shardRanks = static_cast<int>(dp->asInt());
        else if (strategy.rfind("HYBRID", 0) == 0) {
            const auto machines = config.intField("num_machines").value_or(1);
            setup.sharding.shardRanks = static_cast<int>(std::max<std::int64_t>(1, n / std::max<std::int64_t>(1, machines)));
            setup.notes.push_back("hybrid sharding: states sharded within a machine (" + std::to_string(setup.sharding.shardRanks)
                                  + " ranks)");
        }
        const Value* off = config.nested("fsdp_config", "fsdp_offload_params");
        const bool offload = off && off->truthy();
        setup.sharding.offloadParams = offload && setup.sharding.zeroStage >= 3;
        setup.sharding.offloadGrads = offload;
        setup.sharding.offloadOptimizer = offload;
        const Value* ac = config.nested("fsdp_config", "fsdp_activation_checkpointing");
        setup.sharding.activationCheckpointing = ac && ac->truthy();
        setup.sharding.label = std::string("FSDP") + (v2 ? "2 " : "1 ") + strategy + (offload ? " + CPU offload" : "");
    } else {
        setup.sharding.zeroStage = 0;
        setup.sharding.autocast = true;
        setup.sharding.label = setup.sharding.shardRanks > 1 ? "DDP (replicated)" : "single process";
    }
    if (setup.precision == PrecisionMode::Fp8)
        setup.notes.emplace_back("fp8: model states counted as bf16 with fp32 master weights, as Accelerate keeps them");
    return setup;
}

std::optional<std::int64_t> parseParameterCount(const std::string& text)
{
    if (text.empty())
        return std::nullopt;
    double mult = 1;
    std::string body = text;
    const char last = static_cast<char>(std::toupper(static_cast<unsigned char>(body.back())));
    if (last == 'K' || last == 'M' || last == 'B' || last == 'G' || last == 'T') {
        mult = last == 'K' ? 1e3 : last == 'M' ? 1e6 : (last == 'B' || last == 'G') ? 1e9 : 1e12;
        body.pop_back();
    }
    char* end = nullptr;
    const double v = std::strtod(body.c_str(), &end);
    if (body.empty() || *end != '\0' || !(v > 0) || v * mult > 1e15)
        return std::nullopt;
    return static_cast<std::int64_t>(std::llround(v * mult));
}

std::string formatBytes(double bytes)
{
    static const char* units[] = {"bytes", "KB", "MB", "GB", "TB", "PB"};
    int u = 0;
    while (std::fabs(bytes) >= 1024 && u < 5) {
        bytes /= 1024;
        ++u;
    }
    char buf[64];
    if (u == 0)
        std::snprintf(buf, sizeof buf, "%.0f %s", bytes, units[u]);
    else
        std::snprintf(buf, sizeof buf, "%.2f %s", bytes, units[u]);
    return buf;
}

namespace {

std::size_t displayWidth(const std::string& s)
{
    std::size_t n = 0;
    for (unsigned char c : s)
        n += (c & 0xc0) != 0x80;
    return n;
}

std::string center(const std::string& s, std::size_t width)
{
    const std::size_t w = displayWidth(s);
    if (w >= width)
        return s;
    const std::size_t left = (width - w) / 2;
    return std::string(left, ' ') + s + std::string(width - w - left, ' ');
}

std::string repeat(const std::string& s, std::size_t n)
{
    std::string out;
    for (std::size_t i = 0; i < n; ++i)
        out += s;
    return out;
}

} // namespace

std::string renderTable(const std::string& title, const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows)
{
    std::vector<std::size_t> widths(header.size());
    for (std::size_t c = 0; c < header.size(); ++c) {
        widths[c] = displayWidth(header[c]) + 2;
        for (const auto& r : rows)
            if (c < r.size())
                widths[c] = std::max(widths[c], displayWidth(r[c]) + 2);
    }
    std::size_t inner = header.size() - 1;
    for (auto w : widths)
        inner += w;
    if (displayWidth(title) + 2 > inner) {
        widths.back() += displayWidth(title) + 2 - inner;
        inner = displayWidth(title) + 2;
    }
    auto line = [&](const char* l, const char* m, const char* r) {
        std::string out = l;
        for (std::size_t c = 0; c < widths.size(); ++c)
            out += repeat("\u2500", widths[c]) + (c + 1 < widths.size() ? m : r);
        return out + "\n";
    };
    auto rowText = [&](const std::vector<std::string>& cells) {
        std::string out = "\u2502";
        for (std::size_t c = 0; c < widths.size(); ++c)
            out += center(c < cells.size() ? cells[c] : "", widths[c]) + "\u2502";
        return out + "\n";
    };
    std::string out = "\u250c" + repeat("\u2500", inner) + "\u2510\n";
    out += "\u2502" + center(title, inner) + "\u2502\n";
    out += line("\u251c", "\u252c", "\u2524");
    out += rowText(header);
    out += line("\u251c", "\u253c", "\u2524");
    for (const auto& r : rows)
        out += rowText(r);
    out += line("\u2514", "\u2534", "\u2518");
    return out;
}

namespace {

// Parameter counts of absurd recipes (n_layer: 9223372036854775807 loads: the recipe only bounds
// dimensions from below) saturate at the largest int64 instead of overflowing.
struct Saturating {
    std::int64_t v = 0;
    static constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
    friend Saturating operator+(Saturating a, Saturating b)
    {
        std::int64_t out = 0;
        return {__builtin_add_overflow(a.v, b.v, &out) ? kMax : out};
    }
    friend Saturating operator*(Saturating a, Saturating b)
    {
        std::int64_t out = 0;
        return {__builtin_mul_overflow(a.v, b.v, &out) ? kMax : out};
    }
};

// model.lora's adapters, r x (in + out) per adapted projection, and what trains: the adapters
// plus the biases model.lora.bias names. All-trainable (-1) when the targets do not resolve (the
// launch check says why).
struct LoraCount {
    std::int64_t adapters = 0;
    std::int64_t trainable = -1;
};

LoraCount loraParameters(const LoraRecipe& lora, const HfModelConfig& a)
{
    auto targets = loraTargets(lora, a);
    if (!targets)
        return {};
    const std::int64_t h = a.hiddenSize, q = a.numAttentionHeads * a.headDim, kv = a.numKeyValueHeads * a.headDim,
                       inter = a.intermediateSize;
    struct Shape {
        std::int64_t in, out;
        bool bias;
    };
    auto shapeOf = [&](const std::string& name) -> Shape {
        if (name == "q_proj")
            return {h, q, a.qkvBias};
        if (name == "k_proj" || name == "v_proj")
            return {h, kv, a.qkvBias};
        if (name == "o_proj")
            return {q, h, a.outputProjBias};
        if (name == "down_proj")
            return {inter, h, a.mlpBias};
        return {h, inter, a.mlpBias}; // gate_proj, up_proj
    };
    LoraCount count;
    std::int64_t biases = 0;
    for (const auto& path : *targets) {
        const Shape s = shapeOf(path.substr(path.rfind('.') + 1));
        count.adapters += lora.r * (s.in + s.out);
        biases += lora.bias == "lora_only" && s.bias ? s.out : 0;
    }
    if (lora.bias == "all")
        for (const char* name : {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"})
            if (const Shape s = shapeOf(name); s.bias)
                biases += a.numHiddenLayers * s.out;
    count.trainable = count.adapters + biases;
    return count;
}

} // namespace

ModelShape modelShapeOf(const Recipe& r)
{
    ModelShape m;
    const auto& mr = r.model;
    using S = Saturating;
    if (mr.type == "gpt") {
        const S h{mr.nEmbd};
        m.parameters = (S{mr.vocabSize} * h + S{mr.blockSize} * h + S{mr.nLayer} * (S{12} * h * h + S{13} * h) + S{2} * h).v;
        m.layers = mr.nLayer;
        m.hidden = mr.nEmbd;
        m.heads = mr.nHead;
        m.sequence = mr.blockSize;
        m.vocab = mr.vocabSize;
    } else if (isHfFamilyType(mr.type)) {
        // The shape config.json gives (model.pretrained's or the recipe's keys); an architecture
        // that does not resolve has no estimate (the launch check reports why).
        if (auto a = resolveArchitecture(mr, "the recipe"); a && a->family != DecoderFamily::Gpt2) {
            const S h{a->hiddenSize}, q{a->numAttentionHeads * a->headDim}, kv{a->numKeyValueHeads * a->headDim},
                inter{a->intermediateSize}, vocab{a->vocabSize};
            const S attention = h * q + S{2} * h * kv + q * h + (a->qkvBias ? q + S{2} * kv : S{0})
                                + S{a->outputProjBias ? 1 : 0} * h;
            const S mlp = S{3} * h * inter + S{a->mlpBias ? 1 : 0} * (S{2} * inter + h);
            m.parameters =
                (vocab * h * S{a->tieWordEmbeddings ? 1 : 2} + S{a->numHiddenLayers} * (attention + mlp + S{2} * h) + h).v;
            if (mr.lora.enabled) {
                const LoraCount lora = loraParameters(mr.lora, *a);
                m.parameters = (S{m.parameters} + S{lora.adapters}).v;
                m.trainable = lora.trainable;
            }
            m.layers = a->numHiddenLayers;
            m.hidden = a->hiddenSize;
            m.heads = a->numAttentionHeads;
            m.vocab = a->vocabSize;
        } else if (a) {
            const S h{a->hiddenSize}, positions{a->maxPositionEmbeddings}, inner{a->intermediateSize};
            m.parameters = (S{a->vocabSize} * h + positions * h
                            + S{a->numHiddenLayers} * (S{4} * h * h + S{4} * h + S{2} * h * inner + inner + h + S{4} * h)
                            + S{2} * h)
                               .v;
            m.layers = a->numHiddenLayers;
            m.hidden = a->hiddenSize;
            m.heads = a->numAttentionHeads;
            m.vocab = a->vocabSize;
        }
        m.sequence = mr.blockSize;
    } else {
        // input -> hidden, (depth - 1) x hidden -> hidden, then -> output; no hidden layer at depth 0.
        const S hidden{mr.hiddenDim};
        S p{0};
        S width{mr.inputDim};
        if (mr.depth > 0) {
            p = width * hidden + hidden + S{mr.depth - 1} * (hidden * hidden + hidden);
            width = hidden;
        }
        m.parameters = (p + width * S{mr.outputDim} + S{mr.outputDim}).v;
    }
    m.microBatch = r.perDeviceBatchSize;
    m.fp8Linears = fp8LinearCount(r);
    return m;
}

} // namespace shardscope::config
