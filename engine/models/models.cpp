#include "engine/models/models.h"
#include "engine/precision/float8_linear.h"

#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/init.h>

#include <cmath>

namespace shardscope::models {

namespace F = torch::nn::functional;

torch::Tensor LinearImpl::forward(const torch::Tensor& x)
{
    if (float8 && float8->active(is_training()))
        return float8->forward(x, weight, bias);
    return torch::nn::LinearImpl::forward(x);
}

MlpImpl::MlpImpl(const config::ModelRecipe& recipe)
{
    std::int64_t width = recipe.inputDim;
    for (std::int64_t i = 0; i < recipe.depth; ++i) {
        layers->push_back(Linear(width, recipe.hiddenDim));
        width = recipe.hiddenDim;
    }
    layers->push_back(Linear(width, recipe.outputDim));
    register_module("layers", layers);
    layerHooks.resize(layers->size());
}

torch::Tensor MlpImpl::forward(const torch::Tensor& input)
{
    return forwardHooks.call(input, [&](const torch::Tensor& in) {
        torch::Tensor x = in;
        const auto n = layers->size();
        for (std::size_t i = 0; i < n; ++i) {
            x = layerHooks[i].call(x, [this, i](const torch::Tensor& y) { return layers[i]->as<Linear>()->forward(y); });
            if (i + 1 < n)
                x = torch::relu(x);
        }
        return x;
    });
}

std::vector<WrappableModule> MlpImpl::wrappableModules()
{
    std::vector<WrappableModule> out;
    for (std::size_t i = 0; i < layers->size(); ++i)
        out.push_back({"Linear", "layers." + std::to_string(i), layers[i].get(), &layerHooks[i]});
    return out;
}

torch::Tensor MlpImpl::loss(const torch::Tensor& output, const torch::Tensor& target) { return F::mse_loss(output, target); }

CausalSelfAttentionImpl::CausalSelfAttentionImpl(std::int64_t nEmbd, std::int64_t nHead_, double attentionDropout_)
    : nHead(nHead_), attentionDropout(attentionDropout_)
{
    c_attn = register_module("c_attn", Linear(nEmbd, 3 * nEmbd));
    c_proj = register_module("c_proj", Linear(nEmbd, nEmbd));
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x)
{
    const auto B = x.size(0), T = x.size(1), C = x.size(2);
    auto qkv = c_attn->forward(x).split(C, 2);
    auto heads = [&](const torch::Tensor& t) { return t.view({B, T, nHead, C / nHead}).transpose(1, 2); };
    const double dropoutP = is_training() ? attentionDropout : 0.0;
    auto y = at::scaled_dot_product_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), {}, dropoutP, /*is_causal=*/true);
    return c_proj->forward(y.transpose(1, 2).contiguous().view({B, T, C}));
}

GPTBlockImpl::GPTBlockImpl(std::int64_t nEmbd, std::int64_t nHead, double dropout_, double attentionDropout) : dropout(dropout_)
{
    ln_1 = register_module("ln_1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({nEmbd})));
    attn = register_module("attn", CausalSelfAttention(nEmbd, nHead, attentionDropout));
    ln_2 = register_module("ln_2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({nEmbd})));
    c_fc = register_module("c_fc", Linear(nEmbd, 4 * nEmbd));
    c_proj = register_module("c_proj", Linear(4 * nEmbd, nEmbd));
}

torch::Tensor GPTBlockImpl::forward(const torch::Tensor& x)
{
    return hooks.call(x, [&](const torch::Tensor& in) {
        auto y = in + residualDropout(attn->forward(ln_1->forward(in)));
        return y
               + residualDropout(
                   c_proj->forward(F::gelu(c_fc->forward(ln_2->forward(y)), F::GELUFuncOptions().approximate("tanh"))));
    });
}

torch::Tensor GPTBlockImpl::residualDropout(const torch::Tensor& t)
{
    // GPT-2's resid_pdrop; skipped entirely at 0 so that no random number is drawn.
    if (dropout <= 0.0 || !is_training())
        return t;
    return F::dropout(t, F::DropoutFuncOptions().p(dropout).training(true));
}

GptImpl::GptImpl(const config::ModelRecipe& recipe) : embeddingDropout(recipe.embeddingDropout)
{
    wte = register_module("wte", torch::nn::Embedding(recipe.vocabSize, recipe.nEmbd));
    wpe = register_module("wpe", torch::nn::Embedding(recipe.blockSize, recipe.nEmbd));
    for (std::int64_t i = 0; i < recipe.nLayer; ++i)
        h->push_back(GPTBlock(recipe.nEmbd, recipe.nHead, recipe.dropout, recipe.attentionDropout));
    register_module("h", h);
    ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({recipe.nEmbd})));

    // GPT-2's initialisation: N(0, 0.02) for embeddings and linear weights, zero biases, and the
    // residual projections scaled by 1/sqrt(2 * n_layer).
    torch::NoGradGuard noGrad;
    const double residualStd = 0.02 / std::sqrt(2.0 * static_cast<double>(recipe.nLayer));
    for (auto& item : named_parameters()) {
        const std::string& name = item.key();
        auto& p = item.value();
        if (name.find("ln_") != std::string::npos)
            continue; // LayerNorm keeps weight 1, bias 0
        if (p.dim() == 1)
            p.zero_();
        else if (name.size() >= 13 && name.compare(name.size() - 13, 13, "c_proj.weight") == 0)
            p.normal_(0.0, residualStd);
        else
            p.normal_(0.0, 0.02);
    }
}

torch::Tensor GptImpl::forward(const torch::Tensor& input)
{
    return forwardHooks.call(input, [&](const torch::Tensor& tokens) {
        const auto T = tokens.size(1);
        auto positions = torch::arange(T, torch::TensorOptions().dtype(torch::kLong).device(tokens.device()));
        auto x = wte->forward(tokens) + wpe->forward(positions);
        if (embeddingDropout > 0.0 && is_training())
            x = F::dropout(x, F::DropoutFuncOptions().p(embeddingDropout).training(true));
        for (auto& block : *h)
            x = block->as<GPTBlock>()->forward(x);
        return torch::matmul(ln_f->forward(x), wte->weight.t()); // tied head
    });
}

std::vector<WrappableModule> GptImpl::wrappableModules()
{
    std::vector<WrappableModule> out;
    for (std::size_t i = 0; i < h->size(); ++i) {
        auto* block = h[i]->as<GPTBlock>();
        out.push_back({"GPTBlock", "h." + std::to_string(i), block, &block->hooks});
    }
    return out;
}

torch::Tensor GptImpl::loss(const torch::Tensor& output, const torch::Tensor& target)
{
    return F::cross_entropy(output.reshape({-1, output.size(-1)}), target.reshape({-1}));
}

} // namespace shardscope::models
