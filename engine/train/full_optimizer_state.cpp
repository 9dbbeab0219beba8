#include "engine/train/full_optimizer_state.h"

#include "engine/train/accelerator.h"

#include <ATen/ATen.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <stdexcept>

namespace shardscope::train {

namespace {

std::vector<std::string> stateKinds(torch::optim::Optimizer& optimizer)
{
    if (dynamic_cast<torch::optim::AdamW*>(&optimizer))
        return {"exp_avg", "exp_avg_sq"};
    if (dynamic_cast<torch::optim::SGD*>(&optimizer))
        return {"momentum_buffer"};
    throw std::logic_error("full optimizer state: unknown optimizer type");
}

at::Tensor stateTensor(torch::optim::Optimizer& optimizer, const at::Tensor& p, const std::string& kind)
{
    auto it = optimizer.state().find(p.unsafeGetTensorImpl());
    if (it == optimizer.state().end())
        return {};
    if (auto* adamw = dynamic_cast<torch::optim::AdamWParamState*>(it->second.get()))
        return kind == "exp_avg" ? adamw->exp_avg() : adamw->exp_avg_sq();
    if (auto* sgd = dynamic_cast<torch::optim::SGDParamState*>(it->second.get()))
        return sgd->momentum_buffer();
    return {};
}

void setStateTensor(torch::optim::Optimizer& optimizer, const at::Tensor& p, const std::string& kind, const at::Tensor& value,
                    std::int64_t step)
{
    auto& slot = optimizer.state()[p.unsafeGetTensorImpl()];
    if (dynamic_cast<torch::optim::AdamW*>(&optimizer)) {
        if (!slot)
            slot = std::make_unique<torch::optim::AdamWParamState>();
        auto& state = static_cast<torch::optim::AdamWParamState&>(*slot);
        state.step(step);
        kind == "exp_avg" ? state.exp_avg(value) : state.exp_avg_sq(value);
    } else {
        if (!slot)
            slot = std::make_unique<torch::optim::SGDParamState>();
        static_cast<torch::optim::SGDParamState&>(*slot).momentum_buffer(value);
    }
}

} // namespace

std::vector<std::pair<std::string, at::Tensor>> fullOptimizerState(Accelerator& acc, torch::optim::Optimizer& optimizer)
{
    std::vector<std::pair<std::string, at::Tensor>> out;
    if (optimizer.state().empty())
        return out; // no step yet (the same on every rank: they step together)
    at::NoGradGuard noGrad;
    for (const std::string& kind : stateKinds(optimizer)) {
        auto part = [&](const at::Tensor& p) { return stateTensor(optimizer, p, kind); };
        for (auto& [name, tensor] : acc.dataParallel().gatherByParameter(part, /*keep=*/acc.isMainProcess()))
            out.emplace_back(kind + "/" + name, std::move(tensor));
    }
    if (dynamic_cast<torch::optim::AdamW*>(&optimizer)) {
        const auto& state = static_cast<const torch::optim::AdamWParamState&>(*optimizer.state().begin()->second);
        out.emplace_back("step", at::full({1}, state.step(), at::kLong));
    }
    return out;
}

void loadFullOptimizerState(Accelerator& acc, torch::optim::Optimizer& optimizer, const std::map<std::string, at::Tensor>& state)
{
    if (state.empty())
        return;
    at::NoGradGuard noGrad;
    const auto stepIt = state.find("step");
    if (stepIt == state.end() && dynamic_cast<torch::optim::AdamW*>(&optimizer))
        throw std::runtime_error("the full optimizer state has AdamW moments but no 'step' (their bias correction "
                                 "depends on it); the checkpoint's optimizer.safetensors is damaged");
    const std::int64_t step = stepIt == state.end() ? 0 : stepIt->second.item<std::int64_t>();
    for (const std::string& kind : stateKinds(optimizer)) {
        const std::string prefix = kind + "/";
        std::map<std::string, at::Tensor> byName;
        for (const auto& [key, tensor] : state)
            if (key.compare(0, prefix.size(), prefix) == 0)
                byName.emplace(key.substr(prefix.size()), tensor);
        auto set = [&](const at::Tensor& p, const at::Tensor& value) { setStateTensor(optimizer, p, kind, value, step); };
        acc.dataParallel().scatterByParameter(byName, set, "the full optimizer state's " + kind);
    }
}

} // namespace shardscope::train
