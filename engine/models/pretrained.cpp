#include "engine/models/pretrained.h"

#include "engine/checkpoint/hf_export.h"
#include "engine/checkpoint/hf_weights.h"
#include "engine/recipe/model_architecture.h"
#include "engine/models/decoder.h"

#include <torch/torch.h>

#include <optional>
#include <stdexcept>

namespace shardscope::models {

namespace {

config::HfModelConfig architectureOf(const config::ModelRecipe& recipe)
{
    auto architecture = config::resolveArchitecture(recipe, "the recipe");
    if (!architecture)
        throw std::runtime_error(architecture.error().message);
    return *architecture;
}

void copyInto(TrainableModel& model, const std::map<std::string, at::Tensor>& tensors, const std::string& dir)
{
    torch::NoGradGuard noGrad;
    for (auto& item : model.named_parameters()) {
        auto it = tensors.find(item.key());
        if (it == tensors.end() || it->second.sizes() != item.value().sizes())
            throw std::runtime_error(dir + " has no parameter '" + item.key() + "' of the model's shape");
        item.value().copy_(it->second);
    }
}

} // namespace

std::shared_ptr<TrainableModel> buildModel(const config::ModelRecipe& recipe)
{
    if (recipe.type == "mlp")
        return std::make_shared<MlpImpl>(recipe);
    if (recipe.type == "gpt")
        return std::make_shared<GptImpl>(recipe);
    const config::HfModelConfig architecture = architectureOf(recipe);
    if (architecture.family == config::DecoderFamily::Gpt2)
        return std::make_shared<GptImpl>(config::withArchitecture(recipe, architecture));
    return std::make_shared<CausalDecoderImpl>(architecture);
}

std::vector<std::string> loadPretrained(TrainableModel& model, const config::ModelRecipe& recipe, const std::string& dir)
{
    // config.json is read once: the gpt type has none, the gpt2 family takes its sizes from it.
    std::optional<config::HfModelConfig> architecture;
    if (recipe.type != "gpt")
        architecture = architectureOf(recipe);
    if (!architecture || architecture->family == config::DecoderFamily::Gpt2) {
        const config::ModelRecipe shape = architecture ? config::withArchitecture(recipe, *architecture) : recipe;
        auto weights = checkpoint::loadGpt2(dir, shape);
        if (!weights)
            throw std::runtime_error(weights.error().message);
        copyInto(model, *weights, dir);
        return {};
    }
    std::vector<checkpoint::ExpectedTensor> expected;
    for (const auto& item : model.named_parameters())
        expected.push_back({item.key(), item.value().sizes().vec()});
    // A tied model's head is its embedding (save_pretrained leaves lm_head.weight out, older
    // checkpoints keep it); old Llama checkpoints stored the rotary table.
    auto weights = checkpoint::loadHfWeights(dir, expected, {"lm_head.weight", "rotary_emb.inv_freq"});
    if (!weights)
        throw std::runtime_error(weights.error().message);
    copyInto(model, weights->tensors, dir);
    return weights->unused;
}

} // namespace shardscope::models
