#include "engine/estimate/memory_estimate.h"

#include "engine/plan/float8_options.h"
#include "engine/recipe/hf_config_keys.h"
#include "engine/recipe/model_architecture.h"
#include "engine/plan/run_plan.h"

#include "engine/accelerate/schema.h"
#include "engine/accelerate/yaml_io.h"

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
    case PrecisionMode::No:
        return {4, 4, 4 * moments};
    case PrecisionMode::Fp16:
    case PrecisionMode::Bf16:
    case PrecisionMode::Fp8:
        return {2, 2, 4 + 4 * moments};
    case PrecisionMode::Bf16Pure:
        return {2, 2, 2 * moments};
    }
    return {4, 4, 4 * moments};
}

MemoryEstimate estimateMemory(const ModelShape& model, PrecisionMode precision, const ModelStateLayout& sharding,
                              OptimizerKind optimizer, const Fp8Scaling& fp8)
{
    const bool autocastMixed = sharding.autocast && precision != PrecisionMode::Bf16Pure;
    const StateBytes b = stateBytesPerParameter(autocastMixed ? PrecisionMode::No : precision, optimizer);
    // Tensor parallelism first: a rank's parameters are the whole ones and its slice of the split
    // ones; the data-parallel layout below shards or replicates those.
    const double split = static_cast<double>(model.splitParameters);
    const double psi = static_cast<double>(model.parameters) - split + split / std::max(1, sharding.tensorParallel);
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
    if ((stage == 1 || stage == 2) && precision == PrecisionMode::No)
        opt += 4.0 * trained / n;
    if (stage >= 2)
        grads /= n;
    // FSDP's SHARD_GRAD_OP: a rank keeps its shard, and every unit's full parameters from its
    // forward to its backward (what fully_shard(reshard_after_forward=False) holds when the forward
    // ends); they are on the device even when the shards are offloaded.
    const double fullBetweenPasses = stage >= 3 && sharding.fullParamsForwardToBackward ? params : 0.0;
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
    e.parameters += fullBetweenPasses;
    if (sharding.offloadGrads) {
        e.hostGradients = e.gradients;
        e.gradients = 0;
    }
    if (model.layers > 0 && model.hidden > 0 && model.sequence > 0 && model.microBatch > 0) {
        const double s = static_cast<double>(model.sequence), bsz = static_cast<double>(model.microBatch);
        const double h = static_cast<double>(model.hidden), L = static_cast<double>(model.layers);
        const double a = static_cast<double>(std::max<std::int64_t>(model.heads, 1));
        // Korthikanti et al.: sbh(34 + 5as/h) bytes per layer with 16-bit activations; fp32 doubles it.
        const double width = (precision == PrecisionMode::No) ? 2.0 : 1.0;
        const double perLayer = s * bsz * h * (34.0 + 5.0 * a * s / h) * width;
        double act = sharding.activationCheckpointing ? (L * 2.0 * s * bsz * h * width + perLayer) : L * perLayer;
        if (model.vocab > 0)
            act += s * bsz * static_cast<double>(model.vocab) * 4.0; // fp32 logits for the loss
        e.activations = act;
    }
    return e;
}

std::string estimatePrecisionLabel(PrecisionMode p)
{
    switch (p) {
    case PrecisionMode::No:
        return "fp32";
    case PrecisionMode::Fp16:
    case PrecisionMode::Bf16:
        return "fp16/bf16 mixed";
    case PrecisionMode::Bf16Pure:
        return "bf16 pure";
    case PrecisionMode::Fp8:
        return "fp8";
    }
    return {};
}

namespace {

void noteFp8(MemorySetup& setup)
{
    if (setup.precision == PrecisionMode::Fp8)
        setup.notes.emplace_back("fp8: model states counted as bf16 with fp32 master weights, as Accelerate keeps them");
}

} // namespace

Result<MemorySetup> memorySetupFromConfig(const AccelerateConfig& given, const std::string& baseDir)
{
    // As accelerate launch reads the file's spellings, and as buildRunPlan reads it.
    const AccelerateConfig config = normalizeConfig(given);
    const ParallelismReading reading = interpretParallelism(config, baseDir);
    for (const auto& problem : reading.problems)
        if (problem.severity == Severity::Error)
            return makeError(problem.message);
    MemorySetup setup;
    setup.precision = precisionOf(config, reading.spec);
    const auto processes = std::clamp<std::int64_t>(config.intField("num_processes").value_or(1), 1, 1 << 24);
    const auto machines = std::clamp<std::int64_t>(config.intField("num_machines").value_or(1), 1, 1 << 24);
    setup.sharding = stateLayoutOf(reading.spec, static_cast<int>(processes), static_cast<int>(machines));
    setup.notes = setup.sharding.notes;
    if (setup.precision == PrecisionMode::Fp8) {
        // How fp8 scales, from the variables accelerate launch sets (as the plan reads them).
        std::vector<std::string> environment;
        for (const auto& [name, value] : launchEnvironment(config))
            environment.push_back(name + "=" + value);
        std::vector<Diagnostic> ignored; // refusals are the plan's to report
        const Float8Options fp8 = float8OptionsFrom(environment, ignored);
        setup.fp8 = {fp8.scaling == Float8Options::Scaling::Delayed, fp8.amaxHistoryLen};
    }
    noteFp8(setup);
    return setup;
}

OptimizerKind optimizerKindOf(const Recipe& recipe)
{
    return recipe.optimizer.type != "sgd"  ? OptimizerKind::Adam
           : recipe.optimizer.momentum > 0 ? OptimizerKind::SgdMomentum
                                           : OptimizerKind::Sgd;
}

MemorySetup memorySetupOf(const RunPlan& plan)
{
    MemorySetup setup;
    setup.precision = plan.precision;
    setup.sharding = plan.stateLayout;
    setup.notes = plan.stateLayout.notes;
    if (plan.precision == PrecisionMode::Fp8)
        setup.fp8 = {plan.fp8.scaling == Float8Options::Scaling::Delayed, plan.fp8.amaxHistoryLen};
    noteFp8(setup);
    return setup;
}

MemoryEstimate estimateRun(const RunPlan& plan)
{
    const MemorySetup setup = memorySetupOf(plan);
    return estimateMemory(modelShapeOf(plan.recipe), setup.precision, setup.sharding, optimizerKindOf(plan.recipe), setup.fp8);
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
            // All but o_proj's and down_proj's biases, which the row-parallel projections keep whole.
            const S splitAttention = h * q + S{2} * h * kv + q * h + (a->qkvBias ? q + S{2} * kv : S{0});
            const S splitMlp = S{3} * h * inter + S{a->mlpBias ? 2 : 0} * inter;
            m.splitParameters = (S{a->numHiddenLayers} * (splitAttention + splitMlp)).v;
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
