#include "engine/models/lora.h"

#include "engine/checkpoint/safetensors.h"
#include "engine/recipe/model_architecture.h"
#include "engine/models/decoder.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>

namespace shardscope::models {

namespace {

bool endsWith(const std::string& s, const std::string& suffix)
{
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool isAdapter(const std::string& name)
{
    return name.find(".lora_A.") != std::string::npos || name.find(".lora_B.") != std::string::npos;
}

// The module paths the adapters sit on (config::loraTargets, the same for the check before
// launch and here).
std::vector<std::string> targetsOf(const config::ModelRecipe& recipe)
{
    auto architecture = config::resolveArchitecture(recipe, "the recipe");
    if (!architecture)
        throw std::runtime_error(architecture.error().message);
    auto targets = config::loraTargets(recipe.lora, *architecture);
    if (!targets)
        throw std::runtime_error(targets.error().message);
    return *targets;
}

// Whether a bias trains (and is saved with the adapter) under model.lora.bias.
bool biasTrains(const std::string& name, const std::set<std::string>& adapted, const std::string& mode)
{
    if (!endsWith(name, ".bias") || mode == "none")
        return false;
    return mode == "all" || adapted.count(name.substr(0, name.size() - 5));
}

} // namespace

LoraSummary applyLora(TrainableModel& model, const config::ModelRecipe& recipe)
{
    auto* decoder = dynamic_cast<CausalDecoderImpl*>(&model);
    if (!decoder)
        throw std::runtime_error("model.lora adapts the Llama, Mistral and Qwen2 decoders only");
    const config::LoraRecipe& lora = recipe.lora;
    const auto targets = targetsOf(recipe);
    const std::set<std::string> adapted(targets.begin(), targets.end());
    LoraSummary summary;
    for (const auto& path : targets) {
        ProjectionImpl* projection = decoder->projection(path);
        if (!projection)
            throw std::runtime_error("model.lora: the model has no projection " + path);
        projection->addLora(lora.r, lora.alpha, lora.dropout);
        ++summary.adaptedModules;
    }
    for (auto& item : model.named_parameters()) {
        const bool trains = isAdapter(item.key()) || biasTrains(item.key(), adapted, lora.bias);
        item.value().set_requires_grad(trains);
        summary.total += item.value().numel();
        summary.trainable += trains ? item.value().numel() : 0;
    }
    return summary;
}

void saveLoraAdapter(const std::string& dir, const NamedTensorList& parameters, const config::ModelRecipe& recipe)
{
    namespace fs = std::filesystem;
    const auto targets = targetsOf(recipe);
    const std::set<std::string> adapted(targets.begin(), targets.end());
    NamedTensorList tensors;
    for (const auto& [name, tensor] : parameters) {
        if (isAdapter(name)) {
            tensors.emplace_back("base_model.model." + name, tensor.detach().to(at::kCPU).contiguous());
        } else if (biasTrains(name, adapted, recipe.lora.bias)) {
            // PEFT names an adapted layer's own bias through its base_layer.
            const std::string module = name.substr(0, name.size() - 5);
            const std::string key = adapted.count(module) ? module + ".base_layer.bias" : name;
            tensors.emplace_back("base_model.model." + key, tensor.detach().to(at::kCPU).contiguous());
        }
    }
    fs::create_directories(dir);
    checkpoint::writeSafetensors((fs::path(dir) / "adapter_model.safetensors").string(), tensors, {{"format", "pt"}});

    std::set<std::string> shortNames; // PEFT keeps target_modules as the names matched
    for (const auto& path : targets)
        shortNames.insert(path.substr(path.rfind('.') + 1));
    const config::LoraRecipe& lora = recipe.lora;
    nlohmann::json config = {
        {"peft_type", "LORA"},
        {"task_type", "CAUSAL_LM"},
        {"base_model_name_or_path", recipe.pretrained.empty() ? nlohmann::json() : nlohmann::json(recipe.pretrained)},
        {"r", lora.r},
        {"lora_alpha", lora.alpha},
        {"lora_dropout", lora.dropout},
        {"target_modules", std::vector<std::string>(shortNames.begin(), shortNames.end())},
        {"bias", lora.bias},
        {"fan_in_fan_out", false},
        {"inference_mode", true},
        {"init_lora_weights", true},
        {"use_rslora", false},
        {"use_dora", false},
        {"modules_to_save", nullptr},
        {"rank_pattern", nlohmann::json::object()},
        {"alpha_pattern", nlohmann::json::object()}};
    std::ofstream out(fs::path(dir) / "adapter_config.json");
    out << config.dump(2) << "\n";
    if (!out)
        throw std::runtime_error("writing " + (fs::path(dir) / "adapter_config.json").string() + " failed");
}

NamedTensorList mergeLora(const NamedTensorList& parameters, const config::ModelRecipe& recipe)
{
    std::map<std::string, at::Tensor> byName(parameters.begin(), parameters.end());
    const double scaling = recipe.lora.alpha / static_cast<double>(recipe.lora.r);
    NamedTensorList merged;
    for (const auto& [name, tensor] : parameters) {
        if (isAdapter(name))
            continue;
        at::Tensor value = tensor;
        if (endsWith(name, ".weight")) {
            const std::string module = name.substr(0, name.size() - 7);
            auto a = byName.find(module + ".lora_A.weight"), b = byName.find(module + ".lora_B.weight");
            if (a != byName.end() && b != byName.end())
                value = ProjectionImpl::mergedWeight(tensor, a->second, b->second, scaling);
        }
        merged.emplace_back(name, value);
    }
    return merged;
}

} // namespace shardscope::models
