#pragma once

// A Hugging Face model folder's config.json for the decoder families the engine is to train
// (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, GPT2LMHeadModel), resolved as
// transformers 5.23 resolves it: each class's defaults, head_dim and num_key_value_heads derived
// when absent, GPT-2's n_* names, the legacy rope_theta / rope_scaling keys folded into
// rope_parameters (modeling_rope_utils.RotaryEmbeddingConfigMixin), Qwen2's sliding window only
// with use_sliding_window. tests/tools/hf_config_oracle.py prints what transformers makes of the
// same file; tst_hf_model_config compares field for field.
//
// Torch-free: the launcher and the Configure page read it too (the memory estimate, the checks
// before launch). What the engine does not implement is refused by unsupportedFeatures(), never
// silently ignored.

#include "engine/common/result.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shardscope::config {

enum class DecoderFamily { Llama, Mistral, Qwen2, Gpt2 };
const char* decoderFamilyName(DecoderFamily family); // config.json's model_type

// rope_parameters after standardisation. `type` is transformers' rope_type.
struct RopeParameters {
    std::string type = "default"; // default, linear, dynamic, llama3 (others are refused)
    double theta = 10000.0;
    std::optional<double> factor; // linear, dynamic, llama3
    std::optional<double> lowFreqFactor; // llama3
    std::optional<double> highFreqFactor; // llama3
    std::optional<std::int64_t> originalMaxPositionEmbeddings; // llama3
    std::vector<std::string> otherKeys; // keys of rope_parameters none of the above reads
};

struct HfModelConfig {
    DecoderFamily family = DecoderFamily::Llama;
    std::vector<std::string> architectures; // as written ("LlamaForCausalLM")
    std::int64_t vocabSize = 0;
    std::int64_t hiddenSize = 0;
    std::int64_t intermediateSize = 0; // GPT-2: n_inner, or 4 * n_embd
    std::int64_t numHiddenLayers = 0;
    std::int64_t numAttentionHeads = 0;
    std::int64_t numKeyValueHeads = 0; // GQA/MQA; GPT-2: numAttentionHeads
    std::int64_t headDim = 0;
    std::int64_t maxPositionEmbeddings = 0;
    std::string hiddenAct; // "silu"; GPT-2's activation_function ("gelu_new")
    double normEps = 0; // rms_norm_eps; GPT-2: layer_norm_epsilon
    double initializerRange = 0.02;
    bool tieWordEmbeddings = false;
    bool qkvBias = false; // Llama: attention_bias; Mistral: none; Qwen2: always; GPT-2: always
    bool outputProjBias = false; // Llama: attention_bias; Mistral, Qwen2: none; GPT-2: always
    bool mlpBias = false; // Llama: mlp_bias; Mistral, Qwen2: none; GPT-2: always
    double attentionDropout = 0; // GPT-2: attn_pdrop
    double residualDropout = 0; // GPT-2: resid_pdrop (Llama-family: none)
    double embeddingDropout = 0; // GPT-2: embd_pdrop
    // The attention window of each layer, or none for full attention (Mistral's sliding_window;
    // Qwen2's with use_sliding_window, from layer max_window_layers on).
    std::vector<std::optional<std::int64_t>> slidingWindowOfLayer;
    std::optional<std::int64_t> bosTokenId, padTokenId;
    std::vector<std::int64_t> eosTokenIds; // one, several (Llama 3), or none
    std::string dtype; // "dtype" (or the older "torch_dtype"); empty when absent
    RopeParameters rope; // unused by GPT-2 (learned positions)
    bool gpt2ScaleAttnByInverseLayerIdx = false;
    bool gpt2ReorderAndUpcastAttn = false;
    bool gpt2ScaleAttnWeights = true;
    bool addCrossAttention = false;
    bool quantized = false; // a quantization_config is present
};

// `text` is config.json's content, `source` its path (for messages). Errors name the key, its
// place in the file's meaning, and the fix.
Result<HfModelConfig> parseHfModelConfig(const std::string& text, const std::string& source);
// DIR/config.json.
Result<HfModelConfig> loadHfModelConfig(const std::string& modelDir);

// What the engine cannot train as transformers would, for sequences of `sequenceLength` tokens:
// one line each (what, and how to fix it); empty when everything is implemented.
std::vector<std::string> unsupportedFeatures(const HfModelConfig& config, std::int64_t sequenceLength);

} // namespace shardscope::config
