#pragma once

// The config.json keys a recipe may write in its model section for a Hugging Face family
// (model.type: llama | mistral | qwen2 | gpt2), the same keys parseHfModelConfig reads from a
// model folder. Header-only: the recipe reader (which cannot link the config library) and the
// config reader share it.

#include <string>
#include <vector>

namespace shardscope::config {

inline bool isHfFamilyType(const std::string& type)
{
    return type == "llama" || type == "mistral" || type == "qwen2" || type == "gpt2" || type == "auto";
}

// `type` is a family name, or "auto" (any family's keys: the folder's config.json decides).
inline std::vector<std::string> hfConfigKeys(const std::string& type)
{
    const std::vector<std::string> common = {"vocab_size",   "initializer_range", "tie_word_embeddings",
                                             "bos_token_id", "eos_token_id",      "pad_token_id",
                                             "dtype",        "torch_dtype"};
    const std::vector<std::string> llamaLike = {
        "hidden_size",  "intermediate_size", "num_hidden_layers",       "num_attention_heads", "num_key_value_heads",
        "head_dim",     "hidden_act",        "max_position_embeddings", "rms_norm_eps",        "rope_theta",
        "rope_scaling", "rope_parameters",   "attention_dropout"};
    const std::vector<std::string> gpt2 = {"n_positions",
                                           "n_embd",
                                           "n_layer",
                                           "n_head",
                                           "n_inner",
                                           "activation_function",
                                           "resid_pdrop",
                                           "embd_pdrop",
                                           "attn_pdrop",
                                           "layer_norm_epsilon",
                                           "scale_attn_weights",
                                           "scale_attn_by_inverse_layer_idx",
                                           "reorder_and_upcast_attn",
                                           "add_cross_attention"};
    std::vector<std::string> keys = common;
    auto add = [&keys](const std::vector<std::string>& more) { keys.insert(keys.end(), more.begin(), more.end()); };
    const bool any = type == "auto";
    if (any || type == "llama" || type == "mistral" || type == "qwen2")
        add(llamaLike);
    if (any || type == "llama")
        add({"attention_bias", "mlp_bias"});
    if (any || type == "mistral" || type == "qwen2")
        add({"sliding_window"});
    if (any || type == "qwen2")
        add({"use_sliding_window", "max_window_layers", "layer_types"});
    if (any || type == "gpt2")
        add(gpt2);
    return keys;
}

} // namespace shardscope::config
