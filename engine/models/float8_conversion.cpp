#include "engine/models/float8_conversion.h"

#include "engine/models/decoder.h"
#include "engine/precision/float8_linear.h"

#include <map>
#include <stdexcept>

namespace shardscope::models {

namespace {

std::string whyKept(const config::LinearLayer& layer, std::size_t index, std::size_t count)
{
    if (index == 0)
        return layer.name + " (first)";
    if (index + 1 == count)
        return layer.name + " (last)";
    return layer.name + " (" + std::to_string(layer.in) + "x" + std::to_string(layer.out) + ": not divisible by 16)";
}

} // namespace

Float8Conversion convertToFloat8(TrainableModel& model, const config::Recipe& recipe, const config::Float8Options& options)
{
    std::map<std::string, torch::nn::Module*> modules;
    for (const auto& item : model.named_modules())
        modules[item.key()] = item.value().get();
    precision::DelayedScalingOptions delayed;
    delayed.amaxHistoryLen = options.amaxHistoryLen;
    delayed.amaxComputeMax = options.amaxComputeMax;
    delayed.margin = options.margin;
    delayed.interval = options.interval;
    const bool isDelayed = options.scaling == config::Float8Options::Scaling::Delayed;

    Float8Conversion result;
    const auto layers = config::linearLayersOf(recipe);
    for (std::size_t i = 0; i < layers.size(); ++i) {
        const config::LinearLayer& layer = layers[i];
        if (!layer.fp8) {
            result.kept.push_back(whyKept(layer, i, layers.size()));
            continue;
        }
        const auto it = modules.find(layer.name);
        auto* linear = it == modules.end() ? nullptr : dynamic_cast<LinearImpl*>(it->second);
        auto* projection = it == modules.end() ? nullptr : dynamic_cast<ProjectionImpl*>(it->second);
        const torch::Tensor weight = linear ? linear->weight : projection ? projection->weight : torch::Tensor();
        if (!weight.defined() || weight.dim() != 2 || weight.size(0) != layer.out || weight.size(1) != layer.in)
            throw std::runtime_error("fp8: the model has no linear layer " + layer.name + " of " + std::to_string(layer.in) + "x"
                                     + std::to_string(layer.out) + " (the model and its recipe disagree)");
        auto fp8 = std::make_shared<precision::Float8Layer>(isDelayed, delayed, options.inEval);
        result.stateBytes += fp8->stateBytes();
        (linear ? linear->float8 : projection->float8) = std::move(fp8);
        result.converted.push_back(layer.name);
    }
    return result;
}

std::vector<Float8LinearWeight> float8LinearWeights(TrainableModel& model)
{
    std::vector<Float8LinearWeight> out;
    for (const auto& item : model.named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
        const std::string prefix = item.key() + ".";
        if (auto* linear = dynamic_cast<LinearImpl*>(item.value().get()); linear && linear->float8)
            out.push_back({prefix + "weight", linear->weight, linear->float8});
        else if (auto* projection = dynamic_cast<ProjectionImpl*>(item.value().get()); projection && projection->float8)
            out.push_back({prefix + "weight", projection->weight, projection->float8});
    }
    return out;
}

} // namespace shardscope::models
