#pragma once

// Models, written without any knowledge of parallelism (the torchtitan way): DDP, FSDP and ZeRO
// are applied to them after they are built.

#include "engine/recipe/recipe.h"
#include "engine/models/forward_hooks.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <memory>
#include <string>

namespace shardscope::precision {
class Float8Layer;
}

namespace shardscope::models {

// torch::nn::Linear (the same parameters, names and initialisation) whose matmuls mixed_precision
// fp8 can move to fp8 (engine/models/float8_conversion.h sets `float8`).
struct LinearImpl : torch::nn::LinearImpl {
    using torch::nn::LinearImpl::LinearImpl;
    torch::Tensor forward(const torch::Tensor& x);

    std::shared_ptr<precision::Float8Layer> float8; // set: this layer runs in fp8
};
TORCH_MODULE(Linear);

// A submodule a wrap policy may turn into a unit: its class name (what
// fsdp_transformer_layer_cls_to_wrap names), its parameters, and the hooks its forward runs through.
struct WrappableModule {
    std::string className;
    std::string name; // its path in named_parameters(), e.g. "h.0"
    torch::nn::Module* module = nullptr;
    ForwardHooks* hooks = nullptr;
};

// What the runner needs from any model: a forward from a batch's input to its output, the loss
// for a batch, and the submodules parallelism can wrap. The whole forward runs through
// `forwardHooks` (the root unit's hooks).
class TrainableModel : public torch::nn::Module {
public:
    virtual torch::Tensor forward(const torch::Tensor& input) = 0;
    virtual torch::Tensor loss(const torch::Tensor& output, const torch::Tensor& target) = 0;
    virtual std::vector<WrappableModule> wrappableModules() = 0;
    // The classes a transformer-based wrap policy wraps when the config names none (transformers'
    // _no_split_modules; Accelerate's fallback for fsdp_transformer_layer_cls_to_wrap).
    virtual std::vector<std::string> noSplitModules() const { return {}; }

    ForwardHooks forwardHooks;
};

struct MlpImpl : TrainableModel {
    explicit MlpImpl(const config::ModelRecipe& recipe);
    torch::Tensor forward(const torch::Tensor& input) override;
    torch::Tensor loss(const torch::Tensor& output, const torch::Tensor& target) override; // mean squared error
    std::vector<WrappableModule> wrappableModules() override;

    torch::nn::ModuleList layers;
    std::vector<ForwardHooks> layerHooks; // one per layer
};

struct CausalSelfAttentionImpl : torch::nn::Module {
    CausalSelfAttentionImpl(std::int64_t nEmbd, std::int64_t nHead, double attentionDropout = 0.0);
    torch::Tensor forward(const torch::Tensor& x);

    Linear c_attn{nullptr};
    Linear c_proj{nullptr};
    std::int64_t nHead;
    double attentionDropout; // on the attention weights while training (GPT-2's attn_pdrop)
};
TORCH_MODULE(CausalSelfAttention);

// One pre-norm transformer block. Its class name, GPTBlock, is what
// fsdp_transformer_layer_cls_to_wrap names.
struct GPTBlockImpl : torch::nn::Module {
    GPTBlockImpl(std::int64_t nEmbd, std::int64_t nHead, double dropout = 0.0, double attentionDropout = 0.0);
    torch::Tensor forward(const torch::Tensor& x);
    torch::Tensor residualDropout(const torch::Tensor& t);

    torch::nn::LayerNorm ln_1{nullptr};
    CausalSelfAttention attn{nullptr};
    torch::nn::LayerNorm ln_2{nullptr};
    Linear c_fc{nullptr};
    Linear c_proj{nullptr};
    double dropout = 0.0; // on both residual branches while training
    ForwardHooks hooks;
};
TORCH_MODULE(GPTBlock);

struct GptImpl : TrainableModel {
    explicit GptImpl(const config::ModelRecipe& recipe);
    // input: [batch, seq] token ids; output: [batch, seq, vocab] logits.
    torch::Tensor forward(const torch::Tensor& input) override;
    torch::Tensor loss(const torch::Tensor& output, const torch::Tensor& target) override; // cross entropy
    std::vector<WrappableModule> wrappableModules() override;
    std::vector<std::string> noSplitModules() const override { return {"GPTBlock"}; }

    torch::nn::Embedding wte{nullptr}; // token embedding, tied with the output head
    torch::nn::Embedding wpe{nullptr}; // position embedding
    torch::nn::ModuleList h;
    torch::nn::LayerNorm ln_f{nullptr};
    double embeddingDropout = 0.0; // on token + position embeddings while training (GPT-2's embd_pdrop)
};

} // namespace shardscope::models
