#include "engine/estimate/model_flops.h"

#include "engine/recipe/hf_config_keys.h"
#include "engine/recipe/model_architecture.h"

#include <algorithm>

namespace shardscope::config {

namespace {

// Per token, of one forward pass: matmul FLOPs of the blocks (trained and frozen weights apart),
// of the output head, and of attention (scores and weighted sum).
struct ForwardCount {
    double blocksTrained = 0;
    double blocksFrozen = 0;
    double head = 0;
    bool headTrains = true;
    double attention = 0;
};

FlopsPerToken fromForward(const ForwardCount& f, bool activationCheckpointing)
{
    FlopsPerToken out;
    out.forward = f.blocksTrained + f.blocksFrozen + f.head + f.attention;
    // Backward: the input gradient of every matmul (one forward's worth) and the weight gradient
    // of the trained ones (another); attention has no weights, both of its products count twice.
    out.model = out.forward + (out.forward + f.blocksTrained + (f.headTrains ? f.head : 0) + f.attention);
    if (activationCheckpointing)
        out.recompute = f.blocksTrained + f.blocksFrozen + f.attention;
    return out;
}

ForwardCount ownGpt(const ModelRecipe& m)
{
    const double d = static_cast<double>(m.nEmbd);
    ForwardCount f;
    // c_attn d x 3d, attn.c_proj d x d, c_fc d x 4d, mlp.c_proj 4d x d.
    f.blocksTrained = 2.0 * static_cast<double>(m.nLayer) * 12.0 * d * d;
    f.head = 2.0 * d * static_cast<double>(m.vocabSize); // tied to wte, still a matmul
    f.attention = 4.0 * static_cast<double>(m.nLayer) * d * static_cast<double>(m.blockSize);
    return f;
}

ForwardCount ownMlp(const ModelRecipe& m)
{
    // A sample is a token: input -> hidden (depth layers) -> output.
    double weights = 0;
    std::int64_t width = m.inputDim;
    for (std::int64_t i = 0; i < m.depth; ++i) {
        weights += static_cast<double>(width) * static_cast<double>(m.hiddenDim);
        width = m.hiddenDim;
    }
    weights += static_cast<double>(width) * static_cast<double>(m.outputDim);
    ForwardCount f;
    f.blocksTrained = 2.0 * weights;
    return f;
}

Result<ForwardCount> huggingFace(const Recipe& recipe)
{
    auto resolved = resolveArchitecture(recipe.model, "the recipe");
    if (!resolved)
        return resolved.error();
    const HfModelConfig& a = *resolved;
    const double h = static_cast<double>(a.hiddenSize);
    const double heads = static_cast<double>(a.numAttentionHeads);
    const double headDim = a.headDim > 0 ? static_cast<double>(a.headDim) : h / heads;
    const double kvHeads = static_cast<double>(a.numKeyValueHeads > 0 ? a.numKeyValueHeads : a.numAttentionHeads);
    const double inner = static_cast<double>(a.intermediateSize);
    const double layers = static_cast<double>(a.numHiddenLayers);

    // Each projection of a layer: (name, in x out).
    std::vector<std::pair<std::string, double>> projections;
    if (a.family == DecoderFamily::Gpt2) {
        projections = {{"attn.c_attn", h * 3 * h}, {"attn.c_proj", h * h}, {"mlp.c_fc", h * inner}, {"mlp.c_proj", inner * h}};
    } else {
        const double q = heads * headDim, kv = kvHeads * headDim;
        projections = {{"self_attn.q_proj", h * q}, {"self_attn.k_proj", h * kv}, {"self_attn.v_proj", h * kv},
                       {"self_attn.o_proj", q * h}, {"mlp.gate_proj", h * inner}, {"mlp.up_proj", h * inner},
                       {"mlp.down_proj", inner * h}};
    }
    double perLayer = 0;
    for (const auto& [name, weights] : projections)
        perLayer += weights;

    ForwardCount f;
    f.head = 2.0 * h * static_cast<double>(a.vocabSize);
    f.attention = 4.0 * layers * heads * headDim * static_cast<double>(recipe.model.blockSize);
    if (!recipe.model.lora.enabled) {
        f.blocksTrained = 2.0 * layers * perLayer;
        return f;
    }
    // LoRA: the base is frozen (its weight gradients are not computed); each adapted projection
    // adds A (in x r) and B (r x out), which train.
    auto targets = loraTargets(recipe.model.lora, a);
    if (!targets)
        return targets.error();
    f.blocksFrozen = 2.0 * layers * perLayer;
    f.headTrains = false; // PEFT freezes the head too
    const double r = static_cast<double>(recipe.model.lora.r);
    for (const auto& path : *targets) {
        for (const auto& [name, weights] : projections) {
            if (path.size() < name.size() || path.compare(path.size() - name.size(), name.size(), name) != 0)
                continue;
            // in x out = weights; the projection's in and out from its name.
            double in = h, out = weights / h;
            if (name == "self_attn.o_proj")
                in = heads * headDim, out = h;
            else if (name == "mlp.down_proj")
                in = inner, out = h;
            f.blocksTrained += 2.0 * r * (in + out);
        }
    }
    return f;
}

} // namespace

Result<FlopsPerToken> flopsPerToken(const Recipe& recipe, bool activationCheckpointing)
{
    if (recipe.model.type == "mlp")
        return fromForward(ownMlp(recipe.model), activationCheckpointing);
    if (!isHfFamilyType(recipe.model.type))
        return fromForward(ownGpt(recipe.model), activationCheckpointing);
    auto forward = huggingFace(recipe);
    if (!forward)
        return forward.error();
    return fromForward(*forward, activationCheckpointing);
}

} // namespace shardscope::config
