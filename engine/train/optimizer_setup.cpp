#include "engine/train/optimizer_setup.h"

#include <ATen/ops/_fused_adamw.h>
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

// Note [fused AdamW]: torch::optim::AdamW steps each parameter with eight tensor operations (and
// two temporaries), each a pass over the parameter's memory; PyTorch's fused kernel, which
// torch.optim.AdamW(fused=True) and transformers' Trainer (its default optim on torch >= 2.8)
// use, reads parameter, gradient and both moments once. On the 20M Llama's 20M fp32 parameters
// that is 11 ms against 60 ms a step on one core. The state stays torch::optim::AdamW's
// (AdamWParamState: step count and moments), so checkpoints, ZeRO's gathered optimizer state and
// the byte counts read it as before. The kernel is used where it is known to be what the unfused
// step computes up to rounding: fp32 parameters, dense and contiguous, on the CPU, gradients of the
// same dtype; any other parameter in the step (bf16-pure, offload edge cases, CUDA: not checked
// on a GPU yet) falls back to torch::optim::AdamW's own step for the whole step.
class FusedAdamW : public torch::optim::AdamW {
public:
    using torch::optim::AdamW::AdamW;

    torch::Tensor step(LossClosure closure = nullptr) override
    {
        if (!fusable())
            return torch::optim::AdamW::step(std::move(closure));
        torch::Tensor loss;
        if (closure) {
            at::AutoGradMode enableGrad(true);
            loss = closure();
        }
        torch::NoGradGuard noGrad;
        for (auto& group : param_groups()) {
            const auto& options = static_cast<const torch::optim::AdamWOptions&>(group.options());
            std::vector<torch::Tensor> params, grads, expAvgs, expAvgSqs, maxExpAvgSqs, steps;
            for (const auto& p : group.params()) {
                if (!p.grad().defined())
                    continue;
                auto& state = stateOf(p, options.amsgrad());
                state.step(state.step() + 1);
                params.push_back(p);
                grads.push_back(p.grad());
                expAvgs.push_back(state.exp_avg());
                expAvgSqs.push_back(state.exp_avg_sq());
                if (options.amsgrad())
                    maxExpAvgSqs.push_back(state.max_exp_avg_sq());
                // The kernel reads the (already incremented) step from a tensor, as Python keeps it.
                steps.push_back(at::scalar_tensor(static_cast<double>(state.step()), at::kFloat));
            }
            if (params.empty())
                continue;
            const auto [beta1, beta2] = options.betas();
            at::_fused_adamw_(params, grads, expAvgs, expAvgSqs, maxExpAvgSqs, steps, options.lr(), beta1, beta2,
                              options.weight_decay(), options.eps(), options.amsgrad(), /*maximize=*/false);
        }
        return loss;
    }

private:
    static bool fusableTensor(const torch::Tensor& t)
    {
        return t.device().is_cpu() && t.scalar_type() == at::kFloat && t.layout() == at::kStrided && t.is_contiguous();
    }

    bool fusable()
    {
        for (const auto& group : param_groups()) {
            for (const auto& p : group.params()) {
                if (!p.grad().defined())
                    continue;
                if (!fusableTensor(p) || !fusableTensor(p.grad()))
                    return false;
                auto it = state().find(p.unsafeGetTensorImpl());
                if (it == state().end())
                    continue;
                const auto& s = static_cast<const torch::optim::AdamWParamState&>(*it->second);
                if (!fusableTensor(s.exp_avg()) || !fusableTensor(s.exp_avg_sq())
                    || (s.max_exp_avg_sq().defined() && !fusableTensor(s.max_exp_avg_sq())))
                    return false;
            }
        }
        return true;
    }

    // The parameter's state, created as torch::optim::AdamW creates it on its first step.
    torch::optim::AdamWParamState& stateOf(const torch::Tensor& p, bool amsgrad)
    {
        auto& slot = state()[p.unsafeGetTensorImpl()];
        if (!slot) {
            auto fresh = std::make_unique<torch::optim::AdamWParamState>();
            fresh->step(0);
            fresh->exp_avg(torch::zeros_like(p, at::MemoryFormat::Preserve));
            fresh->exp_avg_sq(torch::zeros_like(p, at::MemoryFormat::Preserve));
            if (amsgrad)
                fresh->max_exp_avg_sq(torch::zeros_like(p, at::MemoryFormat::Preserve));
            slot = std::move(fresh);
        }
        return static_cast<torch::optim::AdamWParamState&>(*slot);
    }
};

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
    return std::make_unique<FusedAdamW>(groups(defaults), defaults); // Note [fused AdamW]
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
