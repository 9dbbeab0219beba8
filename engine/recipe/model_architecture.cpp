#include "engine/recipe/model_architecture.h"

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

namespace shardscope::config {

namespace {

using json = nlohmann::json;

// A YAML value as config.json would hold it: plain scalars resolved as YAML 1.2's core schema
// does (null, booleans, integers, floats), quoted ones kept as strings.
json toJson(const YAML::Node& node)
{
    if (node.IsMap()) {
        json out = json::object();
        for (const auto& entry : node)
            out[entry.first.Scalar()] = toJson(entry.second);
        return out;
    }
    if (node.IsSequence()) {
        json out = json::array();
        for (const auto& item : node)
            out.push_back(toJson(item));
        return out;
    }
    if (!node.IsScalar())
        return nullptr;
    const std::string& s = node.Scalar();
    if (node.Tag() == "!")
        return s; // quoted
    if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL")
        return nullptr;
    if (s == "true" || s == "True" || s == "TRUE")
        return true;
    if (s == "false" || s == "False" || s == "FALSE")
        return false;
    char* end = nullptr;
    const long long asInteger = std::strtoll(s.c_str(), &end, 10);
    if (end && *end == '\0')
        return static_cast<std::int64_t>(asInteger);
    const double asNumber = std::strtod(s.c_str(), &end);
    if (end && *end == '\0')
        return asNumber;
    return s;
}

json recipeConfig(const ModelRecipe& model)
{
    json config = json::object();
    for (const auto& [key, value] : model.architecture)
        config[key] = toJson(YAML::Load(value));
    config["model_type"] = model.type;
    return config;
}

const char* architectureClassName(DecoderFamily family)
{
    switch (family) {
    case DecoderFamily::Llama:
        return "LlamaForCausalLM";
    case DecoderFamily::Mistral:
        return "MistralForCausalLM";
    case DecoderFamily::Qwen2:
        return "Qwen2ForCausalLM";
    case DecoderFamily::Gpt2:
        return "GPT2LMHeadModel";
    }
    return "";
}

} // namespace

Result<HfModelConfig> resolveArchitecture(const ModelRecipe& model, const std::string& source)
{
    if (!model.pretrained.empty()) {
        auto loaded = loadHfModelConfig(model.pretrained);
        if (!loaded)
            return loaded.error();
        const std::string family = decoderFamilyName(loaded->family);
        if (model.type != "auto" && model.type != family)
            return makeError(source + ": model.type is " + model.type + " but " + model.pretrained
                                 + "/config.json's model_type is " + family + "; set model.type: " + family
                                 + " (or auto, or leave it out)",
                             ErrorKind::Conflict);
        return loaded;
    }
    // A YAML value may hold bytes that are not UTF-8, which JSON cannot: they become U+FFFD (and the
    // value then matches no known one).
    return parseHfModelConfig(recipeConfig(model).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                              source + " (model section)");
}

Result<std::vector<std::string>> loraTargets(const LoraRecipe& lora, const HfModelConfig& architecture)
{
    static const char* const kProjections[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                               "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};
    std::vector<std::string> paths;
    for (std::int64_t layer = 0; layer < architecture.numHiddenLayers; ++layer)
        for (const char* projection : kProjections)
            paths.push_back("model.layers." + std::to_string(layer) + "." + projection);
    std::vector<std::string> wanted = lora.targetModules.empty() ? std::vector<std::string>{"q_proj", "v_proj"}
                                                                 : lora.targetModules;
    if (wanted == std::vector<std::string>{"all-linear"})
        return paths; // PEFT's all-linear: every linear layer but the output head
    std::vector<std::string> out;
    for (const auto& name : wanted) {
        bool matched = false;
        for (const auto& path : paths) {
            const bool hit = path == name
                             || (path.size() > name.size() && path.compare(path.size() - name.size(), name.size(), name) == 0
                                 && path[path.size() - name.size() - 1] == '.');
            if (hit && std::find(out.begin(), out.end(), path) == out.end())
                out.push_back(path);
            matched = matched || hit;
        }
        if (!matched)
            return makeError("model.lora.target_modules: '" + name
                                 + "' matches no module of the model; its projections are q_proj, k_proj, v_proj, o_proj, "
                                   "gate_proj, up_proj and down_proj (or all-linear for every one)",
                             ErrorKind::BadValue);
    }
    return out;
}

Result<std::string> architectureConfigJson(const ModelRecipe& model)
{
    if (model.pretrained.empty()) {
        auto resolved = resolveArchitecture(model, "the recipe");
        if (!resolved)
            return resolved.error();
        json config = recipeConfig(model);
        if (!config.contains("architectures"))
            config["architectures"] = {architectureClassName(resolved->family)};
        return config.dump(2);
    }
    const std::string path = model.pretrained + "/config.json";
    std::ifstream in(path);
    const json config = json::parse(in, nullptr, false);
    if (config.is_discarded() || !config.is_object())
        return makeError(path + " is not a JSON object", ErrorKind::Syntax);
    return config.dump(2);
}

Result<HfModelConfig> checkArchitecture(const Recipe& recipe, const std::string& source)
{
    auto architecture = resolveArchitecture(recipe.model, source);
    if (!architecture)
        return architecture;
    const auto missing = unsupportedFeatures(*architecture, recipe.model.blockSize);
    if (!missing.empty()) {
        std::string message = source + ": the engine cannot train this model as transformers would:";
        for (const auto& line : missing)
            message += "\n  - " + line;
        return makeError(message, ErrorKind::Unspecified);
    }
    if (recipe.model.lora.enabled) {
        if (architecture->family == DecoderFamily::Gpt2)
            return makeError(source + ": model.lora adapts Llama, Mistral and Qwen2 models; this folder is GPT-2",
                             ErrorKind::Conflict);
        if (auto targets = loraTargets(recipe.model.lora, *architecture); !targets)
            return makeError(source + ": " + targets.error().message, targets.error().kind);
    }
    Recipe resolved = recipe;
    resolved.model = withArchitecture(recipe.model, *architecture);
    if (auto inputs = checkRecipeInputs(resolved); !inputs)
        return makeError(source + ": " + inputs.error().message, inputs.error().kind);
    return architecture;
}

ModelRecipe withArchitecture(ModelRecipe model, const HfModelConfig& a)
{
    model.vocabSize = a.vocabSize;
    if (a.family == DecoderFamily::Gpt2) {
        model.nLayer = a.numHiddenLayers;
        model.nEmbd = a.hiddenSize;
        model.nHead = a.numAttentionHeads;
        model.dropout = a.residualDropout;
        model.attentionDropout = a.attentionDropout;
        model.embeddingDropout = a.embeddingDropout;
    }
    return model;
}

} // namespace shardscope::config
