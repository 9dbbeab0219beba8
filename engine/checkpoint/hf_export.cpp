#include "engine/checkpoint/hf_export.h"

#include "engine/checkpoint/hf_weights.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/recipe/hf_config_keys.h"
#include "engine/recipe/model_architecture.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>

namespace shardscope::checkpoint {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// GPT-2 keeps its projections as Conv1D, whose weight is the transpose of a Linear's.
bool isConv1dWeight(const std::string& ourName)
{
    static const std::regex conv(R"(h\.\d+\.(attn\.c_attn|attn\.c_proj|c_fc|c_proj)\.weight)");
    return std::regex_match(ourName, conv);
}

std::string gpt2Name(const std::string& ours)
{
    static const std::regex mlp(R"(h\.(\d+)\.(c_fc|c_proj)\.(weight|bias))");
    std::smatch m;
    if (std::regex_match(ours, m, mlp))
        return "transformer.h." + m[1].str() + ".mlp." + m[2].str() + "." + m[3].str();
    return "transformer." + ours;
}

const char* dtypeName(c10::ScalarType dtype)
{
    return dtype == at::kBFloat16 ? "bfloat16" : dtype == at::kHalf ? "float16" : "float32";
}

json gpt2Config(const config::ModelRecipe& m, c10::ScalarType dtype)
{
    return {{"architectures", {"GPT2LMHeadModel"}},
            {"model_type", "gpt2"},
            {"vocab_size", m.vocabSize},
            {"n_positions", m.blockSize},
            {"n_ctx", m.blockSize},
            {"n_embd", m.nEmbd},
            {"n_layer", m.nLayer},
            {"n_head", m.nHead},
            {"n_inner", nullptr},
            {"activation_function", "gelu_new"},
            {"layer_norm_epsilon", 1e-5},
            {"resid_pdrop", 0.0},
            {"embd_pdrop", 0.0},
            {"attn_pdrop", 0.0},
            {"initializer_range", 0.02},
            {"scale_attn_weights", true},
            {"tie_word_embeddings", true},
            {"use_cache", true},
            {"bos_token_id", m.vocabSize - 1},
            {"eos_token_id", m.vocabSize - 1},
            {"torch_dtype", dtypeName(dtype)}};
}

} // namespace

std::vector<std::pair<std::string, at::Tensor>> toGpt2(const std::vector<std::pair<std::string, at::Tensor>>& ours)
{
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (const auto& [name, tensor] : ours)
        out.emplace_back(gpt2Name(name), isConv1dWeight(name) ? tensor.t().contiguous() : tensor);
    return out;
}

std::int64_t exportModel(const std::string& dir, const std::vector<std::pair<std::string, at::Tensor>>& parameters,
                         const config::ModelRecipe& model, const ExportOptions& options)
{
    fs::create_directories(dir);
    // The engine's GPT (model.type gpt, or the gpt2 family) keeps its own names; the Llama-family
    // decoders already carry transformers' names.
    std::optional<config::HfModelConfig> architecture;
    if (config::isHfFamilyType(model.type)) {
        auto resolved = config::resolveArchitecture(model, "the recipe");
        if (!resolved)
            throw std::runtime_error(resolved.error().message);
        architecture = *resolved;
    }
    const bool gpt2Layout = model.type == "gpt" || (architecture && architecture->family == config::DecoderFamily::Gpt2);
    auto named = gpt2Layout ? toGpt2(parameters) : parameters;
    for (auto& [name, tensor] : named)
        tensor = tensor.detach().to(at::kCPU).to(options.dtype).contiguous();

    // Shards in order, each below max_shard_size unless a single tensor is larger (as
    // transformers' split_torch_state_dict_into_shards does).
    std::vector<std::vector<std::pair<std::string, at::Tensor>>> shards(1);
    std::int64_t current = 0, total = 0;
    for (const auto& entry : named) {
        const std::int64_t bytes = entry.second.numel() * static_cast<std::int64_t>(entry.second.element_size());
        if (current > 0 && current + bytes > options.maxShardBytes) {
            shards.emplace_back();
            current = 0;
        }
        shards.back().push_back(entry);
        current += bytes;
        total += bytes;
    }
    std::int64_t written = 0;
    if (shards.size() == 1) {
        const auto path = fs::path(dir) / "model.safetensors";
        writeSafetensors(path.string(), shards.front(), {{"format", "pt"}});
        written += static_cast<std::int64_t>(fs::file_size(path));
    } else {
        json weightMap = json::object();
        for (std::size_t i = 0; i < shards.size(); ++i) {
            char name[64];
            std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
            const auto path = fs::path(dir) / name;
            writeSafetensors(path.string(), shards[i], {{"format", "pt"}});
            written += static_cast<std::int64_t>(fs::file_size(path));
            for (const auto& [tensorName, tensor] : shards[i])
                weightMap[tensorName] = name;
        }
        std::ofstream index(fs::path(dir) / "model.safetensors.index.json");
        index << json{{"metadata", {{"total_size", total}}}, {"weight_map", weightMap}}.dump(2) << "\n";
    }
    if (gpt2Layout) {
        std::ofstream config(fs::path(dir) / "config.json");
        config << gpt2Config(architecture ? config::withArchitecture(model, *architecture) : model, options.dtype).dump(2)
               << "\n";
    } else if (architecture) {
        auto text = config::architectureConfigJson(model);
        if (!text)
            throw std::runtime_error(text.error().message);
        json object = json::parse(*text);
        object.erase("torch_dtype");
        object["dtype"] = dtypeName(options.dtype);
        std::ofstream config(fs::path(dir) / "config.json");
        config << object.dump(2) << "\n";
    }
    return written;
}

Result<std::map<std::string, at::Tensor>> loadGpt2(const std::string& dir, const config::ModelRecipe& model)
{
    const fs::path configPath = fs::path(dir) / "config.json";
    std::ifstream configIn(configPath);
    if (!configIn)
        return makeError("model.pretrained: " + configPath.string()
                         + " does not exist (a GPT-2 folder holds config.json and safetensors)");
    json config = json::parse(configIn, nullptr, false);
    if (config.is_discarded())
        return makeError(configPath.string() + " is not valid JSON");
    const std::pair<const char*, std::int64_t> expected[] = {
        {"vocab_size", model.vocabSize}, {"n_embd", model.nEmbd}, {"n_layer", model.nLayer}, {"n_head", model.nHead}};
    for (const auto& [key, value] : expected)
        if (config.value(key, std::int64_t{-1}) != value)
            return makeError(configPath.string() + ": " + key + " is " + config.value(key, json()).dump()
                             + " but the recipe's model has " + std::to_string(value)
                             + "; make the recipe's model section match the pretrained model");
    if (config.value("n_positions", std::int64_t{0}) < model.blockSize)
        return makeError(configPath.string() + ": n_positions " + config.value("n_positions", json()).dump()
                         + " is shorter than the recipe's block_size " + std::to_string(model.blockSize));

    auto read = readHfTensors(dir);
    if (!read)
        return read.error();
    const std::map<std::string, at::Tensor>& hf = *read;

    // Our names from GPT-2's: invert gpt2Name over the names our model has.
    std::map<std::string, at::Tensor> ours;
    std::vector<std::string> ourNames = {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"};
    for (std::int64_t i = 0; i < model.nLayer; ++i)
        for (const char* suffix :
             {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
              "ln_2.weight", "ln_2.bias", "c_fc.weight", "c_fc.bias", "c_proj.weight", "c_proj.bias"})
            ourNames.push_back("h." + std::to_string(i) + "." + suffix);
    for (const auto& name : ourNames) {
        auto it = hf.find(gpt2Name(name));
        if (it == hf.end())
            return makeError("model.pretrained: " + dir + " lacks " + gpt2Name(name));
        at::Tensor t = it->second.to(at::kFloat);
        if (isConv1dWeight(name))
            t = t.t().contiguous();
        if (name == "wpe.weight")
            t = t.narrow(0, 0, model.blockSize).contiguous(); // a longer context than the recipe uses
        ours[name] = t;
    }
    return ours;
}

} // namespace shardscope::checkpoint
