#include "engine/models/decoder.h"
#include "engine/precision/float8_linear.h"

#include <ATen/autocast_mode.h>
#include <torch/autograd.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/init.h>

#include <cmath>
#include <optional>

namespace shardscope::models {

namespace F = torch::nn::functional;

RmsNormImpl::RmsNormImpl(std::int64_t size, double eps_) : eps(eps_)
{
    weight = register_parameter("weight", torch::ones({size}));
}

torch::Tensor RmsNormImpl::forward(const torch::Tensor& x)
{
    const auto inputDtype = x.scalar_type();
    const torch::Tensor h = x.to(torch::kFloat);
    const torch::Tensor variance = h.pow(2).mean(-1, /*keepdim=*/true);
    return weight * (h * torch::rsqrt(variance + eps)).to(inputDtype);
}

torch::Tensor ropeInverseFrequencies(const config::HfModelConfig& c)
{
    const auto dim = c.headDim;
    const auto exponents = torch::arange(0, dim, 2, torch::kLong).to(torch::kFloat) / static_cast<double>(dim);
    torch::Tensor invFreq = 1.0 / torch::pow(c.rope.theta, exponents);
    const config::RopeParameters& rope = c.rope;
    if (rope.type == "linear") {
        invFreq = invFreq / rope.factor.value_or(1.0);
    } else if (rope.type == "llama3") {
        // modeling_rope_utils._compute_llama3_parameters: long wavelengths slowed by `factor`, short
        // ones kept, the band between interpolated.
        const double factor = rope.factor.value_or(8.0);
        const double low = rope.lowFreqFactor.value_or(1.0), high = rope.highFreqFactor.value_or(4.0);
        const double oldContext = static_cast<double>(rope.originalMaxPositionEmbeddings.value_or(c.maxPositionEmbeddings));
        const double lowFreqWavelen = oldContext / low, highFreqWavelen = oldContext / high;
        const torch::Tensor wavelen = 2 * M_PI / invFreq;
        torch::Tensor scaled = torch::where(wavelen > lowFreqWavelen, invFreq / factor, invFreq);
        const torch::Tensor smooth = (oldContext / wavelen - low) / (high - low);
        const torch::Tensor smoothed = (1 - smooth) * scaled / factor + smooth * scaled;
        const torch::Tensor medium = (wavelen < highFreqWavelen).logical_not() * (wavelen > lowFreqWavelen).logical_not();
        invFreq = torch::where(medium, smoothed, scaled);
    }
    // "dynamic" changes the frequencies only past max_position_embeddings, which
    // unsupportedFeatures() refuses: up to there it is the default table.
    return invFreq;
}

namespace {

torch::nn::Linear linear(std::int64_t in, std::int64_t out, bool bias)
{
    return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
}

Projection projection(std::int64_t in, std::int64_t out, bool bias) { return Projection(in, out, bias); }

torch::Tensor rotateHalf(const torch::Tensor& x)
{
    const auto half = x.size(-1) / 2;
    return torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

// Note [fused rotary embedding]: transformers' apply_rotary_pos_emb, x * cos + rotate_half(x) * sin,
// makes rotate_half's negated half and its concatenation, two full products and their sum, and
// autograd runs the mirror of each backward plus the sum of x's two gradients. Written on the two
// halves of the last dimension it is y1 = x1 c1 - x2 s1, y2 = x2 c2 + x1 s2 (per half one product
// straight into the output, one more added to it), and its gradient is the transposed rotation,
// g1 c1 + g2 s2 and g2 c2 - g1 s1, with only cos and sin saved. Each element is the same two
// products rounded and summed, so the result is bit-identical (tst_decoder_models checks it).
// Used when x and the tables share a dtype: under autocast q is bf16 and the tables fp32, and that
// mixed-dtype arithmetic is left to the composite formula's type promotion.
torch::Tensor rotatedHalves(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin, bool transposed)
{
    const auto half = x.size(-1) / 2;
    auto first = [&](const torch::Tensor& t) { return t.narrow(-1, 0, half); };
    auto second = [&](const torch::Tensor& t) { return t.narrow(-1, half, half); };
    torch::Tensor y = at::empty_like(x);
    torch::Tensor y1 = first(y), y2 = second(y);
    // Each product is rounded on its own before the sum, as in the formula: addcmul_ would fuse
    // the multiply-add (one rounding, in fp32 for bf16) and differ from transformers by an ulp.
    // Forward: y1 = x1 c1 - x2 s1, y2 = x2 c2 + x1 s2. Transposed: y1 = x1 c1 + x2 s2, y2 = x2 c2 - x1 s1.
    at::mul_out(y1, first(x), first(cos));
    at::mul_out(y2, second(x), second(cos));
    if (transposed) {
        y1.add_(second(x) * second(sin));
        y2.sub_(first(x) * first(sin));
    } else {
        y1.sub_(second(x) * first(sin));
        y2.add_(first(x) * second(sin));
    }
    return y;
}

struct RotaryEmbeddingFunction : torch::autograd::Function<RotaryEmbeddingFunction> {
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& cos,
                                 const torch::Tensor& sin)
    {
        ctx->save_for_backward({cos, sin});
        return rotatedHalves(x, cos, sin, /*transposed=*/false);
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   const torch::autograd::variable_list& outputGrads)
    {
        const auto saved = ctx->get_saved_variables();
        return {rotatedHalves(outputGrads[0], saved[0], saved[1], /*transposed=*/true), torch::Tensor(), torch::Tensor()};
    }
};

// Note [fused LoRA projection]: PEFT's lora.Linear returns base(x) + lora_B(lora_A(x)) * scaling,
// where the scaling and the sum are two more passes over the output forward, the scaling one more
// backward, and autograd adds the base's and the adapter's input gradients in a third. This node
// does the same arithmetic with the adapter's product added inside the GEMMs: forward
// y = (x W^T + b).addmm_(x A^T, B^T, alpha = scaling), backward grad_x = (g W).addmm_(scaling g B, A).
// It serves the projections nothing else touches (no dropout, no autocast: its casts would have to
// be replayed backward, no fp8).
struct LoraProjectionFunction : torch::autograd::Function<LoraProjectionFunction> {
    // bias: an optional (not an undefined tensor, which apply() cannot take) and the last tensor,
    // so that needs_input_grad's indices 0-3 stay x, weight, lora_A, lora_B without one.
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight,
                                 const torch::Tensor& loraA, const torch::Tensor& loraB, const std::optional<torch::Tensor>& bias,
                                 double scaling)
    {
        const torch::Tensor rows = x.reshape({-1, x.size(-1)});
        const torch::Tensor adapted = at::mm(rows, loraA.t());
        torch::Tensor y = bias ? at::addmm(*bias, rows, weight.t()) : at::mm(rows, weight.t());
        y.addmm_(adapted, loraB.t(), 1.0, scaling);
        ctx->save_for_backward({rows, weight, loraA, loraB, adapted});
        ctx->saved_data["scaling"] = scaling;
        ctx->saved_data["bias"] = bias.has_value();
        std::vector<std::int64_t> sizes = x.sizes().vec();
        sizes.back() = weight.size(0);
        return y.view(sizes);
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   const torch::autograd::variable_list& outputGrads)
    {
        const auto saved = ctx->get_saved_variables();
        const torch::Tensor &rows = saved[0], &weight = saved[1], &loraA = saved[2], &loraB = saved[3], &adapted = saved[4];
        const double scaling = ctx->saved_data["scaling"].toDouble();
        const torch::Tensor g = outputGrads[0].reshape({-1, outputGrads[0].size(-1)});
        const torch::Tensor gradAdapted = at::mm(g, loraB).mul_(scaling);
        torch::Tensor gradX, gradWeight, gradBias, gradA, gradB;
        if (ctx->needs_input_grad(0)) {
            std::vector<std::int64_t> sizes = outputGrads[0].sizes().vec(); // x's: [..., in]
            sizes.back() = weight.size(1);
            gradX = at::mm(g, weight).addmm_(gradAdapted, loraA).view(sizes);
        }
        if (ctx->needs_input_grad(1))
            gradWeight = at::mm(g.t(), rows);
        if (ctx->needs_input_grad(2))
            gradA = at::mm(gradAdapted.t(), rows);
        if (ctx->needs_input_grad(3))
            gradB = at::mm(g.t(), adapted).mul_(scaling);
        if (ctx->saved_data["bias"].toBool() && ctx->needs_input_grad(4))
            gradBias = g.sum(0);
        return {gradX, gradWeight, gradA, gradB, gradBias, torch::Tensor()};
    }
};

} // namespace

torch::Tensor applyRotaryEmbedding(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin)
{
    const bool sameDtype = x.scalar_type() == cos.scalar_type() && x.scalar_type() == sin.scalar_type();
    if (!sameDtype || cos.requires_grad() || sin.requires_grad())
        return x * cos + rotateHalf(x) * sin;
    return RotaryEmbeddingFunction::apply(x, cos, sin); // Note [fused rotary embedding]
}

ProjectionImpl::ProjectionImpl(std::int64_t in, std::int64_t out, bool withBias)
{
    // Initialised by the model (transformers' _init_weights); empty until then.
    weight = register_parameter("weight", torch::empty({out, in}));
    if (withBias)
        bias = register_parameter("bias", torch::zeros({out}));
}

torch::Tensor ProjectionImpl::forward(const torch::Tensor& x)
{
    if (tensorParallelInput || tensorParallelOutput) {
        // LoRA and fp8 are refused with tensor parallelism before launch (run_plan.cpp).
        const torch::Tensor in = tensorParallelInput ? tensorParallelInput(x) : x;
        if (!tensorParallelOutput)
            return F::linear(in, weight, bias);
        const torch::Tensor y = tensorParallelOutput(F::linear(in, weight));
        return bias.defined() ? y + bias : y;
    }
    const bool inFloat8 = float8 && float8->active(is_training());
    const bool loraDrops = loraDropout > 0.0 && is_training();
    // Note [fused LoRA projection]
    const bool fused = lora_A && !inFloat8 && !loraDrops && !at::autocast::is_autocast_enabled(x.device().type())
                       && x.scalar_type() == weight.scalar_type() && lora_A->weight.scalar_type() == weight.scalar_type();
    if (fused)
        return LoraProjectionFunction::apply(x, weight, lora_A->weight, lora_B->weight,
                                             bias.defined() ? std::optional<torch::Tensor>(bias) : std::nullopt, loraScaling);
    torch::Tensor y = inFloat8 ? float8->forward(x, weight, bias) : F::linear(x, weight, bias);
    if (!lora_A)
        return y;
    const torch::Tensor in = loraDrops ? F::dropout(x, F::DropoutFuncOptions().p(loraDropout).training(true)) : x;
    return y + lora_B->forward(lora_A->forward(in)) * loraScaling;
}

void ProjectionImpl::addLora(std::int64_t r, double alpha, double dropout)
{
    lora_A = register_module("lora_A", linear(weight.size(1), r, false));
    lora_B = register_module("lora_B", linear(r, weight.size(0), false));
    torch::NoGradGuard noGrad;
    lora_A->to(weight.device(), weight.scalar_type());
    lora_B->to(weight.device(), weight.scalar_type());
    torch::nn::init::kaiming_uniform_(lora_A->weight, std::sqrt(5.0));
    lora_B->weight.zero_();
    loraScaling = alpha / static_cast<double>(r);
    loraDropout = dropout;
}

torch::Tensor ProjectionImpl::mergedWeight(const torch::Tensor& weight, const torch::Tensor& loraA, const torch::Tensor& loraB,
                                           double scaling)
{
    return weight + torch::matmul(loraB.to(weight.scalar_type()), loraA.to(weight.scalar_type())) * scaling;
}

DecoderAttentionImpl::DecoderAttentionImpl(const config::HfModelConfig& c)
    : heads(c.numAttentionHeads), kvHeads(c.numKeyValueHeads), headDim(c.headDim)
{
    q_proj = register_module("q_proj", projection(c.hiddenSize, heads * headDim, c.qkvBias));
    k_proj = register_module("k_proj", projection(c.hiddenSize, kvHeads * headDim, c.qkvBias));
    v_proj = register_module("v_proj", projection(c.hiddenSize, kvHeads * headDim, c.qkvBias));
    o_proj = register_module("o_proj", projection(heads * headDim, c.hiddenSize, c.outputProjBias));
}

torch::Tensor DecoderAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin)
{
    const auto B = x.size(0), T = x.size(1);
    auto split = [&](const torch::Tensor& t) { return t.view({B, T, -1, headDim}).transpose(1, 2); };
    const torch::Tensor c = cos.unsqueeze(1), s = sin.unsqueeze(1);
    auto rotate = [&](const torch::Tensor& t) { return applyRotaryEmbedding(t, c, s); };
    const torch::Tensor q = rotate(split(q_proj->forward(x)));
    const torch::Tensor k = rotate(split(k_proj->forward(x)));
    const torch::Tensor v = split(v_proj->forward(x));
    // enable_gqa: each kv head serves heads / kvHeads query heads without materialising
    // repeat_kv's copies (transformers' sdpa_attention_forward does the same when there is no mask).
    const torch::Tensor y = at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true,
                                                             1.0 / std::sqrt(static_cast<double>(headDim)),
                                                             /*enable_gqa=*/heads != kvHeads);
    return o_proj->forward(y.transpose(1, 2).reshape({B, T, -1}));
}

GatedMlpImpl::GatedMlpImpl(const config::HfModelConfig& c)
{
    gate_proj = register_module("gate_proj", projection(c.hiddenSize, c.intermediateSize, c.mlpBias));
    up_proj = register_module("up_proj", projection(c.hiddenSize, c.intermediateSize, c.mlpBias));
    down_proj = register_module("down_proj", projection(c.intermediateSize, c.hiddenSize, c.mlpBias));
}

torch::Tensor GatedMlpImpl::forward(const torch::Tensor& x)
{
    return down_proj->forward(F::silu(gate_proj->forward(x)) * up_proj->forward(x));
}

DecoderLayerImpl::DecoderLayerImpl(const config::HfModelConfig& c)
{
    input_layernorm = register_module("input_layernorm", RmsNorm(c.hiddenSize, c.normEps));
    self_attn = register_module("self_attn", DecoderAttention(c));
    post_attention_layernorm = register_module("post_attention_layernorm", RmsNorm(c.hiddenSize, c.normEps));
    mlp = register_module("mlp", GatedMlp(c));
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin)
{
    // cos and sin are captured by value: activation checkpointing may run the body again in backward.
    return hooks.call(x, [this, cos, sin](const torch::Tensor& in) {
        const torch::Tensor h = in + self_attn->forward(input_layernorm->forward(in), cos, sin);
        return h + mlp->forward(post_attention_layernorm->forward(h));
    });
}

DecoderBackboneImpl::DecoderBackboneImpl(const config::HfModelConfig& c)
{
    auto embedding = torch::nn::EmbeddingOptions(c.vocabSize, c.hiddenSize);
    if (c.padTokenId && *c.padTokenId >= 0 && *c.padTokenId < c.vocabSize)
        embedding.padding_idx(*c.padTokenId); // nn.Embedding(..., padding_idx=pad_token_id): that row gets no gradient
    embed_tokens = register_module("embed_tokens", torch::nn::Embedding(embedding));
    for (std::int64_t i = 0; i < c.numHiddenLayers; ++i)
        layers->push_back(DecoderLayer(c));
    register_module("layers", layers);
    norm = register_module("norm", RmsNorm(c.hiddenSize, c.normEps));
}

CausalDecoderImpl::CausalDecoderImpl(const config::HfModelConfig& c) : config(c)
{
    model = register_module("model", DecoderBackbone(c));
    if (!c.tieWordEmbeddings)
        lm_head = register_module("lm_head", linear(c.hiddenSize, c.vocabSize, false));
    inverseFrequencies = ropeInverseFrequencies(c);

    torch::NoGradGuard noGrad;
    const double std = c.initializerRange;
    for (auto& item : named_parameters()) {
        const std::string& name = item.key();
        auto& p = item.value();
        if (name.find("norm.weight") != std::string::npos)
            continue; // RMSNorm keeps its ones
        if (p.dim() == 1)
            p.zero_();
        else
            p.normal_(0.0, std);
    }
    if (c.padTokenId && *c.padTokenId >= 0 && *c.padTokenId < c.vocabSize)
        model->embed_tokens->weight[*c.padTokenId].zero_();
}

torch::Tensor CausalDecoderImpl::forward(const torch::Tensor& input)
{
    return forwardHooks.call(input, [this](const torch::Tensor& tokens) {
        const auto T = tokens.size(1);
        torch::Tensor x = model->embed_tokens->forward(tokens);
        // LlamaRotaryEmbedding.forward: positions times inverse frequencies in fp32, cast to x's dtype.
        const auto positions = torch::arange(T, torch::TensorOptions().dtype(torch::kFloat).device(tokens.device()));
        const torch::Tensor freqs = positions.unsqueeze(-1) * inverseFrequencies.to(tokens.device()).unsqueeze(0);
        const torch::Tensor table = torch::cat({freqs, freqs}, -1).unsqueeze(0);
        const torch::Tensor cos = table.cos().to(x.scalar_type()), sin = table.sin().to(x.scalar_type());
        for (auto& layer : *model->layers)
            x = layer->as<DecoderLayer>()->forward(x, cos, sin);
        x = model->norm->forward(x);
        return lm_head ? lm_head->forward(x) : F::linear(x, model->embed_tokens->weight);
    });
}

torch::Tensor CausalDecoderImpl::loss(const torch::Tensor& output, const torch::Tensor& target)
{
    // transformers' ForCausalLMLoss upcasts the logits to fp32 first.
    return F::cross_entropy(output.reshape({-1, output.size(-1)}).to(torch::kFloat), target.reshape({-1}));
}

std::vector<WrappableModule> CausalDecoderImpl::wrappableModules()
{
    std::vector<WrappableModule> out;
    const std::string className = layerClassName(config.family);
    for (std::size_t i = 0; i < model->layers->size(); ++i) {
        auto* layer = model->layers[i]->as<DecoderLayer>();
        out.push_back({className, "model.layers." + std::to_string(i), layer, &layer->hooks});
    }
    return out;
}

ProjectionImpl* CausalDecoderImpl::projection(const std::string& path)
{
    for (const auto& item : named_modules())
        if (item.key() == path)
            return dynamic_cast<ProjectionImpl*>(item.value().get());
    return nullptr;
}

std::string CausalDecoderImpl::layerClassName(config::DecoderFamily family)
{
    switch (family) {
    case config::DecoderFamily::Llama:
        return "LlamaDecoderLayer";
    case config::DecoderFamily::Mistral:
        return "MistralDecoderLayer";
    case config::DecoderFamily::Qwen2:
        return "Qwen2DecoderLayer";
    case config::DecoderFamily::Gpt2:
        return "GPT2Block";
    }
    return {};
}

} // namespace shardscope::models
