#include "engine/train/optimizer_setup.h"

#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace shardscope::train {

double scheduleFactor(const config::ScheduleRecipe& s, std::int64_t step, std::int64_t total)
{
    const auto warmup = s.warmupSteps;
    if (step < warmup)
        return static_cast<double>(step) / static_cast<double>(std::max<std::int64_t>(1, warmup));
    if (s.type == "constant")
        return 1.0;
    const double progress = static_cast<double>(step - warmup) / static_cast<double>(std::max<std::int64_t>(1, total - warmup));
    if (s.type == "linear")
        return std::max(0.0, 1.0 - progress);
    return std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * progress))); // cosine
}

namespace {

bool nameContainsAny(const std::string& name, const std::vector<std::string>& patterns)
{
    return std::any_of(patterns.begin(), patterns.end(), [&](const std::string& p) { return name.find(p) != std::string::npos; });
}

} // namespace

std::unique_ptr<torch::optim::Optimizer> makeOptimizer(const config::OptimizerRecipe& o, const parallel::NamedTensors& named)
{
    std::vector<torch::Tensor> decay, noDecay;
    for (const auto& [name, p] : named)
        (nameContainsAny(name, o.noWeightDecay) ? noDecay : decay).push_back(p);
    // The no-decay group's options: a copy of the defaults with weight_decay 0.
    auto groups = [&](const auto& defaults) {
        std::vector<torch::optim::OptimizerParamGroup> out;
        if (!decay.empty())
            out.emplace_back(decay);
        if (!noDecay.empty()) {
            auto options = std::make_unique<std::decay_t<decltype(defaults)>>(defaults);
            options->weight_decay(0);
            out.emplace_back(noDecay, std::move(options));
        }
        return out;
    };
    if (o.type == "sgd") {
        const auto defaults = torch::optim::SGDOptions(o.lr).momentum(o.momentum).weight_decay(o.weightDecay);
        return std::make_unique<torch::optim::SGD>(groups(defaults), defaults);
    }
    const auto defaults = torch::optim::AdamWOptions(o.lr).betas({o.beta1, o.beta2}).eps(o.eps).weight_decay(o.weightDecay);
    return std::make_unique<torch::optim::AdamW>(groups(defaults), defaults);
}

void freezeParameters(torch::nn::Module& model, const std::vector<std::string>& prefixes)
{
    for (const auto& prefix : prefixes) {
        bool matched = false;
        for (auto& item : model.named_parameters()) {
            if (item.key().compare(0, prefix.size(), prefix) == 0) {
                item.value().requires_grad_(false);
                matched = true;
            }
        }
        if (!matched) {
            std::string names;
            for (const auto& item : model.named_parameters(/*recurse=*/true))
                if (names.size() < 200)
                    names += (names.empty() ? "" : ", ") + item.key();
            throw std::runtime_error("recipe: model.frozen: '" + prefix
                                     + "' is the start of no parameter's name; "
                                       "names are like: "
                                     + names);
        }
    }
    const auto params = model.parameters();
    if (std::none_of(params.begin(), params.end(), [](const torch::Tensor& p) { return p.requires_grad(); }))
        throw std::runtime_error("recipe: model.frozen freezes every parameter; nothing would train");
}

void setLearningRate(torch::optim::Optimizer& optimizer, double lr)
{
    for (auto& group : optimizer.param_groups())
        group.options().set_lr(lr);
}

std::int64_t optimizerStateBytes(torch::optim::Optimizer& optimizer)
{
    std::int64_t bytes = 0;
    for (const auto& [key, state] : optimizer.state()) {
        if (auto* adamw = dynamic_cast<torch::optim::AdamWParamState*>(state.get()))
            bytes += parallel::tensorBytes(adamw->exp_avg()) + parallel::tensorBytes(adamw->exp_avg_sq())
                     + parallel::tensorBytes(adamw->max_exp_avg_sq());
        else if (auto* sgd = dynamic_cast<torch::optim::SGDParamState*>(state.get()))
            bytes += parallel::tensorBytes(sgd->momentum_buffer());
    }
    return bytes;
}

} // namespace shardscope::train
