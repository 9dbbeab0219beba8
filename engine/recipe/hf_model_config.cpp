#include "engine/recipe/hf_model_config.h"

#include "engine/accelerate/yaml_io.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

namespace shardscope::config {

namespace {

using json = nlohmann::json;

// Reads config.json's keys with transformers' types: an integer field takes a JSON integer, a
// float field any number, a bool field true/false; null means "not given" where the class
// allows None. Each error names the key and says what it should be.
class Fields {
public:
    Fields(const json& root, std::string source) : m_root(root), m_source(std::move(source)) { }

    bool has(const char* key) const { return m_root.contains(key) && !m_root.at(key).is_null(); }

    Result<std::int64_t> integer(const char* key, std::int64_t fallback) const
    {
        if (!has(key))
            return fallback;
        const json& v = m_root.at(key);
        if (!v.is_number_integer())
            return wrong(key, "a whole number", v);
        return v.get<std::int64_t>();
    }
    Result<std::optional<std::int64_t>> optionalInteger(const char* key, std::optional<std::int64_t> fallback) const
    {
        if (!m_root.contains(key))
            return fallback;
        if (m_root.at(key).is_null())
            return std::optional<std::int64_t>();
        auto v = integer(key, 0);
        if (!v)
            return v.error();
        return std::optional<std::int64_t>(*v);
    }
    Result<std::optional<double>> optionalNumber(const char* key) const
    {
        if (!has(key))
            return std::optional<double>();
        auto v = number(key, 0.0);
        if (!v)
            return v.error();
        return std::optional<double>(*v);
    }
    Result<double> number(const char* key, double fallback) const
    {
        if (!has(key))
            return fallback;
        const json& v = m_root.at(key);
        if (!v.is_number() || v.is_boolean())
            return wrong(key, "a number", v);
        return v.get<double>();
    }
    Result<bool> boolean(const char* key, bool fallback) const
    {
        if (!has(key))
            return fallback;
        const json& v = m_root.at(key);
        if (!v.is_boolean())
            return wrong(key, "true or false", v);
        return v.get<bool>();
    }
    Result<std::string> text(const char* key, std::string fallback) const
    {
        if (!has(key))
            return fallback;
        const json& v = m_root.at(key);
        if (!v.is_string())
            return wrong(key, "a string", v);
        return v.get<std::string>();
    }

    Error wrong(const std::string& key, const std::string& expected, const json& v) const
    {
        Error error = makeError(m_source + ": '" + key + "' must be " + expected + ", not "
                                    + v.dump(-1, ' ', false, json::error_handler_t::replace)
                                    + "; fix config.json (transformers refuses it too)",
                                ErrorKind::BadValue);
        error.file = m_source;
        error.keyPath = key;
        return error;
    }
    const std::string& source() const { return m_source; }

private:
    const json& m_root;
    std::string m_source;
};

#define SHARDSCOPE_READ(target, expression)                                                                                      \
    do {                                                                                                                         \
        auto read_ = (expression);                                                                                               \
        if (!read_)                                                                                                              \
            return read_.error();                                                                                                \
        (target) = *read_;                                                                                                       \
    } while (false)

// Each class's defaults (transformers/models/<family>/configuration_<family>.py, 5.23).
struct FamilyDefaults {
    std::int64_t vocab, hidden, intermediate, layers, heads, maxPositions;
    std::optional<std::int64_t> kvHeads; // none: num_attention_heads
    std::optional<std::int64_t> bos, eos;
};

FamilyDefaults defaultsOf(DecoderFamily family)
{
    switch (family) {
    case DecoderFamily::Llama:
        return {32000, 4096, 11008, 32, 32, 2048, std::nullopt, 1, 2};
    case DecoderFamily::Mistral:
        return {32000, 4096, 14336, 32, 32, std::int64_t{4096} * 32, 8, 1, 2};
    case DecoderFamily::Qwen2:
        return {151936, 4096, 22016, 32, 32, 32768, 32, std::nullopt, std::nullopt};
    case DecoderFamily::Gpt2:
        return {50257, 768, 0, 12, 12, 1024, std::nullopt, 50256, 50256};
    }
    return {};
}

Result<std::vector<std::int64_t>> eosTokens(const json& root, const Fields& fields, std::optional<std::int64_t> fallback)
{
    if (!root.contains("eos_token_id"))
        return fallback ? std::vector<std::int64_t>{*fallback} : std::vector<std::int64_t>{};
    const json& v = root.at("eos_token_id");
    if (v.is_null())
        return std::vector<std::int64_t>{};
    if (v.is_number_integer())
        return std::vector<std::int64_t>{v.get<std::int64_t>()};
    std::vector<std::int64_t> out;
    if (!v.is_array())
        return fields.wrong("eos_token_id", "a token id or a list of them", v);
    for (const json& id : v) {
        if (!id.is_number_integer())
            return fields.wrong("eos_token_id", "a token id or a list of them", v);
        out.push_back(id.get<std::int64_t>());
    }
    return out;
}

// RotaryEmbeddingConfigMixin.convert_rope_params_to_dict + standardize_rope_params: rope_scaling
// (legacy) or rope_parameters, with the top-level rope_theta as the default theta.
Result<RopeParameters> ropeOf(const json& root, const Fields& fields, std::int64_t maxPositions)
{
    RopeParameters rope;
    // `rope_scaling or rope_parameters`: a non-empty legacy rope_scaling wins.
    json params = json::object();
    for (const char* key : {"rope_parameters", "rope_scaling"}) {
        if (!root.contains(key) || root.at(key).is_null())
            continue;
        if (!root.at(key).is_object())
            return fields.wrong(key, "a mapping of RoPE parameters", root.at(key));
        if (!root.at(key).empty() || std::string(key) == "rope_parameters")
            params = root.at(key);
    }
    SHARDSCOPE_READ(rope.theta, fields.number("rope_theta", 10000.0));
    const Fields inner(params, fields.source() + " (rope_parameters)");
    SHARDSCOPE_READ(rope.theta, inner.number("rope_theta", rope.theta));
    std::string type;
    SHARDSCOPE_READ(type, inner.text("type", "default"));
    SHARDSCOPE_READ(rope.type, inner.text("rope_type", type));
    SHARDSCOPE_READ(rope.factor, inner.optionalNumber("factor"));
    SHARDSCOPE_READ(rope.lowFreqFactor, inner.optionalNumber("low_freq_factor"));
    SHARDSCOPE_READ(rope.highFreqFactor, inner.optionalNumber("high_freq_factor"));
    if (rope.type == "llama3" || rope.type == "yarn" || rope.type == "longrope") {
        std::int64_t original = 0;
        SHARDSCOPE_READ(original, fields.integer("original_max_position_embeddings", maxPositions));
        SHARDSCOPE_READ(original, inner.integer("original_max_position_embeddings", original));
        rope.originalMaxPositionEmbeddings = original;
    }
    static const std::set<std::string> read = {
        "type", "rope_type", "rope_theta", "factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"};
    for (const auto& item : params.items())
        if (!read.count(item.key()))
            rope.otherKeys.push_back(item.key());
    return rope;
}

// The attention window of each layer: Mistral's sliding_window everywhere; Qwen2's only with
// use_sliding_window, on the layers layer_types marks (by default from max_window_layers on).
Result<std::vector<std::optional<std::int64_t>>> slidingWindows(const json& root, const Fields& fields, DecoderFamily family,
                                                                std::int64_t layers)
{
    std::vector<std::optional<std::int64_t>> windows(static_cast<std::size_t>(std::max<std::int64_t>(0, layers)));
    if (family == DecoderFamily::Mistral) {
        std::optional<std::int64_t> window;
        SHARDSCOPE_READ(window, fields.optionalInteger("sliding_window", 4096));
        std::fill(windows.begin(), windows.end(), window);
        return windows;
    }
    if (family != DecoderFamily::Qwen2)
        return windows;
    bool useSliding = false;
    std::optional<std::int64_t> window;
    std::int64_t maxWindowLayers = 28;
    SHARDSCOPE_READ(useSliding, fields.boolean("use_sliding_window", false));
    SHARDSCOPE_READ(window, fields.optionalInteger("sliding_window", 4096));
    SHARDSCOPE_READ(maxWindowLayers, fields.integer("max_window_layers", 28));
    if (!useSliding)
        window.reset();
    if (root.contains("layer_types") && !root.at("layer_types").is_null()) {
        const json& types = root.at("layer_types");
        if (!types.is_array() || static_cast<std::int64_t>(types.size()) != layers)
            return fields.wrong("layer_types", "a list of " + std::to_string(layers) + " attention types (one per layer)", types);
        for (std::size_t i = 0; i < windows.size(); ++i) {
            if (!types[i].is_string())
                return fields.wrong("layer_types", "a list of \"full_attention\" or \"sliding_attention\"", types);
            if (types[i].get<std::string>() == "sliding_attention")
                windows[i] = window;
        }
        return windows;
    }
    for (std::size_t i = 0; i < windows.size(); ++i)
        if (window && static_cast<std::int64_t>(i) >= maxWindowLayers)
            windows[i] = window;
    return windows;
}

Result<void> readLlamaFamily(const json& root, const Fields& f, HfModelConfig& c)
{
    const FamilyDefaults d = defaultsOf(c.family);
    SHARDSCOPE_READ(c.vocabSize, f.integer("vocab_size", d.vocab));
    SHARDSCOPE_READ(c.hiddenSize, f.integer("hidden_size", d.hidden));
    SHARDSCOPE_READ(c.intermediateSize, f.integer("intermediate_size", d.intermediate));
    SHARDSCOPE_READ(c.numHiddenLayers, f.integer("num_hidden_layers", d.layers));
    SHARDSCOPE_READ(c.numAttentionHeads, f.integer("num_attention_heads", d.heads));
    if (c.numAttentionHeads <= 0 || c.hiddenSize <= 0)
        return makeError(f.source() + ": hidden_size and num_attention_heads must be positive", ErrorKind::BadValue);
    std::optional<std::int64_t> kv, headDim;
    SHARDSCOPE_READ(kv, f.optionalInteger("num_key_value_heads", d.kvHeads));
    SHARDSCOPE_READ(headDim, f.optionalInteger("head_dim", std::nullopt));
    c.numKeyValueHeads = kv.value_or(c.numAttentionHeads);
    c.headDim = headDim.value_or(c.hiddenSize / c.numAttentionHeads);
    if (c.family == DecoderFamily::Llama && c.hiddenSize % c.numAttentionHeads != 0)
        return makeError(f.source() + ": The hidden size (" + std::to_string(c.hiddenSize)
                             + ") is not a multiple of the number of attention heads (" + std::to_string(c.numAttentionHeads)
                             + ") (transformers' LlamaConfig refuses it too); fix hidden_size or num_attention_heads",
                         ErrorKind::Conflict);
    SHARDSCOPE_READ(c.maxPositionEmbeddings, f.integer("max_position_embeddings", d.maxPositions));
    SHARDSCOPE_READ(c.hiddenAct, f.text("hidden_act", "silu"));
    SHARDSCOPE_READ(c.normEps, f.number("rms_norm_eps", 1e-6));
    SHARDSCOPE_READ(c.initializerRange, f.number("initializer_range", 0.02));
    SHARDSCOPE_READ(c.tieWordEmbeddings, f.boolean("tie_word_embeddings", false));
    SHARDSCOPE_READ(c.attentionDropout, f.number("attention_dropout", 0.0));
    if (c.family == DecoderFamily::Llama) {
        bool bias = false;
        SHARDSCOPE_READ(bias, f.boolean("attention_bias", false));
        c.qkvBias = c.outputProjBias = bias;
        SHARDSCOPE_READ(c.mlpBias, f.boolean("mlp_bias", false));
    }
    c.qkvBias = c.qkvBias || c.family == DecoderFamily::Qwen2;
    SHARDSCOPE_READ(c.bosTokenId, f.optionalInteger("bos_token_id", d.bos));
    SHARDSCOPE_READ(c.padTokenId, f.optionalInteger("pad_token_id", std::nullopt));
    SHARDSCOPE_READ(c.eosTokenIds, eosTokens(root, f, d.eos));
    SHARDSCOPE_READ(c.rope, ropeOf(root, f, c.maxPositionEmbeddings));
    SHARDSCOPE_READ(c.slidingWindowOfLayer, slidingWindows(root, f, c.family, c.numHiddenLayers));
    return {};
}

Result<void> readGpt2(const json& root, const Fields& f, HfModelConfig& c)
{
    const FamilyDefaults d = defaultsOf(c.family);
    SHARDSCOPE_READ(c.vocabSize, f.integer("vocab_size", d.vocab));
    SHARDSCOPE_READ(c.hiddenSize, f.integer("n_embd", d.hidden));
    SHARDSCOPE_READ(c.numHiddenLayers, f.integer("n_layer", d.layers));
    SHARDSCOPE_READ(c.numAttentionHeads, f.integer("n_head", d.heads));
    SHARDSCOPE_READ(c.maxPositionEmbeddings, f.integer("n_positions", d.maxPositions));
    if (c.numAttentionHeads <= 0 || c.hiddenSize <= 0)
        return makeError(f.source() + ": n_embd and n_head must be positive", ErrorKind::BadValue);
    std::optional<std::int64_t> inner;
    SHARDSCOPE_READ(inner, f.optionalInteger("n_inner", std::nullopt));
    c.intermediateSize = inner.value_or(4 * c.hiddenSize);
    c.numKeyValueHeads = c.numAttentionHeads;
    c.headDim = c.hiddenSize / c.numAttentionHeads;
    SHARDSCOPE_READ(c.hiddenAct, f.text("activation_function", "gelu_new"));
    SHARDSCOPE_READ(c.normEps, f.number("layer_norm_epsilon", 1e-5));
    SHARDSCOPE_READ(c.initializerRange, f.number("initializer_range", 0.02));
    SHARDSCOPE_READ(c.tieWordEmbeddings, f.boolean("tie_word_embeddings", true));
    SHARDSCOPE_READ(c.attentionDropout, f.number("attn_pdrop", 0.1));
    SHARDSCOPE_READ(c.residualDropout, f.number("resid_pdrop", 0.1));
    SHARDSCOPE_READ(c.embeddingDropout, f.number("embd_pdrop", 0.1));
    SHARDSCOPE_READ(c.gpt2ScaleAttnWeights, f.boolean("scale_attn_weights", true));
    SHARDSCOPE_READ(c.gpt2ScaleAttnByInverseLayerIdx, f.boolean("scale_attn_by_inverse_layer_idx", false));
    SHARDSCOPE_READ(c.gpt2ReorderAndUpcastAttn, f.boolean("reorder_and_upcast_attn", false));
    SHARDSCOPE_READ(c.addCrossAttention, f.boolean("add_cross_attention", false));
    c.qkvBias = c.outputProjBias = c.mlpBias = true;
    SHARDSCOPE_READ(c.bosTokenId, f.optionalInteger("bos_token_id", d.bos));
    SHARDSCOPE_READ(c.padTokenId, f.optionalInteger("pad_token_id", std::nullopt));
    SHARDSCOPE_READ(c.eosTokenIds, eosTokens(root, f, d.eos));
    c.slidingWindowOfLayer.assign(static_cast<std::size_t>(std::max<std::int64_t>(0, c.numHiddenLayers)), std::nullopt);
    return {};
}

#undef SHARDSCOPE_READ

} // namespace

const char* decoderFamilyName(DecoderFamily family)
{
    switch (family) {
    case DecoderFamily::Llama:
        return "llama";
    case DecoderFamily::Mistral:
        return "mistral";
    case DecoderFamily::Qwen2:
        return "qwen2";
    case DecoderFamily::Gpt2:
        return "gpt2";
    }
    return "?";
}

Result<HfModelConfig> parseHfModelConfig(const std::string& text, const std::string& source)
{
    const json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (root.is_discarded())
        return makeError(source + ": not valid JSON; a model folder's config.json is what `save_pretrained` writes",
                         ErrorKind::Syntax);
    if (!root.is_object())
        return makeError(source + ": config.json must be a JSON object, not " + std::string(root.type_name()), ErrorKind::Syntax);
    const Fields fields(root, source);
    std::string modelType;
    if (auto t = fields.text("model_type", ""); !t)
        return t.error();
    else
        modelType = *t;
    HfModelConfig config;
    const std::pair<const char*, DecoderFamily> families[] = {{"llama", DecoderFamily::Llama},
                                                              {"mistral", DecoderFamily::Mistral},
                                                              {"qwen2", DecoderFamily::Qwen2},
                                                              {"gpt2", DecoderFamily::Gpt2}};
    const auto known = std::find_if(std::begin(families), std::end(families),
                                    [&](const auto& f) { return modelType == f.first; });
    if (known == std::end(families)) {
        Error error = makeError(source + ": model_type '" + modelType
                                    + "' is not a family the engine trains; it trains llama (Llama 2/3, TinyLlama, SmolLM), "
                                      "mistral, qwen2 and gpt2 models",
                                ErrorKind::BadValue);
        if (modelType.empty())
            error.message = source
                            + ": config.json has no model_type; a model folder saved by transformers names it "
                              "(llama, mistral, qwen2 or gpt2)";
        error.file = source;
        error.keyPath = "model_type";
        return error;
    }
    config.family = known->second;
    if (root.contains("architectures") && root.at("architectures").is_array())
        for (const json& a : root.at("architectures"))
            if (a.is_string())
                config.architectures.push_back(a.get<std::string>());
    for (const char* key : {"dtype", "torch_dtype"})
        if (config.dtype.empty() && root.contains(key) && root.at(key).is_string())
            config.dtype = root.at(key).get<std::string>();
    config.quantized = root.contains("quantization_config") && !root.at("quantization_config").is_null();
    auto read = config.family == DecoderFamily::Gpt2 ? readGpt2(root, fields, config) : readLlamaFamily(root, fields, config);
    if (!read)
        return read.error();
    return config;
}

Result<HfModelConfig> loadHfModelConfig(const std::string& modelDir)
{
    const std::string path = (std::filesystem::path(modelDir) / "config.json").string();
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) { // (not a file: the reader says what it is)
        Error error = makeError(modelDir
                                    + " has no config.json; a Hugging Face model folder (what save_pretrained writes) "
                                      "holds config.json and model.safetensors",
                                ErrorKind::Io);
        error.file = path;
        return error;
    }
    auto text = readTextFile(path);
    if (!text)
        return text.error();
    return parseHfModelConfig(*text, path);
}

std::vector<std::string> unsupportedFeatures(const HfModelConfig& c, std::int64_t sequenceLength)
{
    std::vector<std::string> out;
    const bool gpt2 = c.family == DecoderFamily::Gpt2;
    if (c.quantized)
        out.emplace_back("quantization_config: quantized weights are not trained by the engine; use a bf16/fp16/fp32 checkpoint");
    if (!gpt2 && c.hiddenAct != "silu")
        out.push_back("hidden_act '" + c.hiddenAct + "': the engine's decoder MLP is SwiGLU with silu");
    if (gpt2 && c.hiddenAct != "gelu_new" && c.hiddenAct != "gelu_pytorch_tanh")
        out.push_back("activation_function '" + c.hiddenAct + "': the engine's GPT-2 MLP uses gelu_new (tanh GELU)");
    if (!gpt2 && c.numKeyValueHeads > 0 && c.numAttentionHeads % c.numKeyValueHeads != 0)
        out.push_back("num_attention_heads " + std::to_string(c.numAttentionHeads) + " is not a multiple of num_key_value_heads "
                      + std::to_string(c.numKeyValueHeads)
                      + ": grouped-query attention shares each key/value head "
                        "among a whole number of query heads");
    if (!gpt2 && c.attentionDropout > 0)
        out.push_back("attention_dropout " + std::to_string(c.attentionDropout)
                      + ": the engine has no attention dropout for this family; set it to 0.0");
    if (!gpt2) {
        static const std::set<std::string> ropes = {"default", "linear", "dynamic", "llama3"};
        if (!ropes.count(c.rope.type))
            out.push_back("rope_type '" + c.rope.type + "': the engine implements default, linear, dynamic and llama3 RoPE");
        if (c.rope.type == "dynamic" && sequenceLength > c.maxPositionEmbeddings)
            out.push_back("dynamic RoPE beyond max_position_embeddings (" + std::to_string(c.maxPositionEmbeddings) + " < "
                          + std::to_string(sequenceLength)
                          + " tokens) rescales the frequencies per sequence, which the engine does not; train on at most "
                          + std::to_string(c.maxPositionEmbeddings) + " tokens");
    }
    for (std::size_t i = 0; i < c.slidingWindowOfLayer.size(); ++i) {
        const auto& window = c.slidingWindowOfLayer[i];
        if (window && *window < sequenceLength) {
            out.push_back("layer " + std::to_string(i) + "'s sliding window of " + std::to_string(*window)
                          + " tokens is shorter than the sequence of " + std::to_string(sequenceLength)
                          + ": the engine has no sliding-window attention; train on at most " + std::to_string(*window)
                          + " tokens per sequence");
            break;
        }
    }
    if (gpt2 && (c.gpt2ScaleAttnByInverseLayerIdx || c.gpt2ReorderAndUpcastAttn || !c.gpt2ScaleAttnWeights))
        out.emplace_back("scale_attn_by_inverse_layer_idx / reorder_and_upcast_attn / scale_attn_weights: false are not "
                         "implemented; the engine's GPT-2 attention is the standard one");
    if (gpt2 && c.intermediateSize != 4 * c.hiddenSize)
        out.push_back("n_inner " + std::to_string(c.intermediateSize)
                      + ": the engine's GPT-2 MLP is 4 x n_embd wide; set n_inner to null or "
                      + std::to_string(4 * c.hiddenSize));
    if (gpt2 && std::abs(c.normEps - 1e-5) > 1e-12)
        out.emplace_back("layer_norm_epsilon other than 1e-5: the engine's GPT-2 LayerNorms use 1e-5");
    if (gpt2 && !c.tieWordEmbeddings)
        out.emplace_back("tie_word_embeddings false: the engine's GPT-2 head is the token embedding");
    if (gpt2 && c.addCrossAttention)
        out.emplace_back("add_cross_attention: the engine trains decoder-only GPT-2");
    if (sequenceLength > c.maxPositionEmbeddings && (gpt2 || c.rope.type == "default"))
        out.push_back("sequences of " + std::to_string(sequenceLength) + " tokens exceed max_position_embeddings ("
                      + std::to_string(c.maxPositionEmbeddings) + ")");
    return out;
}

} // namespace shardscope::config
