#pragma once

// The Hugging Face decoder families LlamaForCausalLM (Llama 2/3/3.x, TinyLlama, SmolLM),
// MistralForCausalLM and Qwen2ForCausalLM as libtorch modules: pre-norm layers of RMSNorm,
// rotary grouped-query attention through scaled_dot_product_attention, and a SwiGLU MLP. The three
// differ only in biases and defaults, which config::HfModelConfig has already resolved.
//
// The submodules are registered under transformers' own names, so named_parameters() gives
// exactly the keys of the family's model.safetensors ("model.layers.0.self_attn.q_proj.weight",
// "lm_head.weight"): loading and export need no renaming. With tie_word_embeddings there is no
// lm_head module; the head reads model.embed_tokens.weight, and the key is absent, as in
// transformers' save_pretrained.
//
// The numerics follow modeling_llama.py step for step (RMSNorm in fp32, RoPE tables in fp32 cast to
// the activations' dtype, grouped-query attention through SDPA's enable_gqa), so that fp32 logits and gradients equal
// transformers' within 1e-5 (tests/engine/tst_decoder_models).

#include "engine/recipe/hf_model_config.h"
#include "engine/models/models.h"

#include <functional>

namespace shardscope::models {

// LlamaRMSNorm: x / sqrt(mean(x^2) + eps) in fp32, cast back, times the weight.
struct RmsNormImpl : torch::nn::Module {
    RmsNormImpl(std::int64_t size, double eps);
    torch::Tensor forward(const torch::Tensor& x);

    torch::Tensor weight;
    double eps;
};
TORCH_MODULE(RmsNorm);

// The inverse frequencies of rotary position embedding for rope_type default, linear, dynamic (up
// to max_position_embeddings, where it equals default) and llama3, as
// transformers.modeling_rope_utils computes them (float32).
torch::Tensor ropeInverseFrequencies(const config::HfModelConfig& config);
// transformers' apply_rotary_pos_emb for one of q, k: x * cos + rotate_half(x) * sin, x [B, heads,
// T, head_dim], cos and sin broadcasting to it (Note [fused rotary embedding]).
torch::Tensor applyRotaryEmbedding(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

// nn.Linear's weight [out, in] and optional bias, plus an optional LoRA adapter (PEFT's
// lora.Linear): lora_A [r, in] and lora_B [out, r] as submodules, so the parameters are named
// "q_proj.weight", "q_proj.lora_A.weight" as PEFT saves them.
struct ProjectionImpl : torch::nn::Module {
    ProjectionImpl(std::int64_t in, std::int64_t out, bool bias);
    torch::Tensor forward(const torch::Tensor& x);
    // PEFT's init_lora_weights=True: lora_A kaiming-uniform (a = sqrt(5)), lora_B zero, so the
    // adapted model starts as the base one. The adapter takes the weight's dtype and device.
    void addLora(std::int64_t r, double alpha, double dropout);
    // W + (lora_B @ lora_A) * alpha / r: the weight PEFT's merge_and_unload leaves.
    static torch::Tensor mergedWeight(const torch::Tensor& weight, const torch::Tensor& loraA, const torch::Tensor& loraB,
                                      double scaling);

    torch::Tensor weight, bias;
    torch::nn::Linear lora_A{nullptr}, lora_B{nullptr};
    double loraScaling = 0.0;
    double loraDropout = 0.0;
    std::shared_ptr<precision::Float8Layer> float8; // set: the base matmul runs in fp8
    // Tensor parallelism (parallel/tensor_parallel.h), which the model itself knows nothing of:
    // a column-parallel projection passes its input through `tensorParallelInput` (identity
    // forward, gradients all-reduced backward), a row-parallel one its partial output through
    // `tensorParallelOutput` (all-reduced forward) and adds the bias after it. Neither set: a
    // whole projection.
    std::function<torch::Tensor(const torch::Tensor&)> tensorParallelInput, tensorParallelOutput;
};
TORCH_MODULE(Projection);

struct DecoderAttentionImpl : torch::nn::Module {
    explicit DecoderAttentionImpl(const config::HfModelConfig& config);
    // x: [batch, seq, hidden]; cos, sin: [batch, seq, head_dim] in x's dtype.
    torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

    Projection q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
    std::int64_t heads, kvHeads, headDim;
};
TORCH_MODULE(DecoderAttention);

// down_proj(silu(gate_proj(x)) * up_proj(x))
struct GatedMlpImpl : torch::nn::Module {
    explicit GatedMlpImpl(const config::HfModelConfig& config);
    torch::Tensor forward(const torch::Tensor& x);

    Projection gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};
TORCH_MODULE(GatedMlp);

// One decoder layer; its class name (LlamaDecoderLayer, MistralDecoderLayer, Qwen2DecoderLayer) is
// what fsdp_transformer_layer_cls_to_wrap names.
struct DecoderLayerImpl : torch::nn::Module {
    explicit DecoderLayerImpl(const config::HfModelConfig& config);
    torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

    RmsNorm input_layernorm{nullptr};
    DecoderAttention self_attn{nullptr};
    RmsNorm post_attention_layernorm{nullptr};
    GatedMlp mlp{nullptr};
    ForwardHooks hooks;
};
TORCH_MODULE(DecoderLayer);

// LlamaModel / MistralModel / Qwen2Model: what transformers keeps under "model.".
struct DecoderBackboneImpl : torch::nn::Module {
    explicit DecoderBackboneImpl(const config::HfModelConfig& config);

    torch::nn::Embedding embed_tokens{nullptr};
    torch::nn::ModuleList layers;
    RmsNorm norm{nullptr};
};
TORCH_MODULE(DecoderBackbone);

// *ForCausalLM: input [batch, seq] token ids, output [batch, seq, vocab] logits.
struct CausalDecoderImpl : TrainableModel {
    // Initialised as transformers' _init_weights does: Linear and Embedding weights N(0,
    // initializer_range), biases 0, the padding row 0, norms 1.
    explicit CausalDecoderImpl(const config::HfModelConfig& config);
    torch::Tensor forward(const torch::Tensor& input) override;
    torch::Tensor loss(const torch::Tensor& output, const torch::Tensor& target) override; // cross entropy
    std::vector<WrappableModule> wrappableModules() override;
    std::vector<std::string> noSplitModules() const override { return {layerClassName(config.family)}; }

    // The class fsdp_transformer_layer_cls_to_wrap names for this family's layers.
    static std::string layerClassName(config::DecoderFamily family);
    // The projection at a module path such as "model.layers.0.self_attn.q_proj" (null if none).
    ProjectionImpl* projection(const std::string& path);

    config::HfModelConfig config;
    DecoderBackbone model{nullptr};
    torch::nn::Linear lm_head{nullptr}; // null with tie_word_embeddings
    torch::Tensor inverseFrequencies; // not a parameter or buffer: computed, never saved or sharded
};

} // namespace shardscope::models
