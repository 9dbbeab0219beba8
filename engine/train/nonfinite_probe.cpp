#include "engine/train/nonfinite_probe.h"

#include "engine/models/models.h"

#include <ATen/ATen.h>

namespace shardscope::train {

void NonfiniteProbe::attach(models::TrainableModel& model)
{
    auto modules = model.wrappableModules();
    m_names.clear();
    m_names.reserve(modules.size() + 1);
    std::vector<models::ForwardHooks*> hooks;
    for (const auto& m : modules) {
        m_names.push_back(m.name);
        hooks.push_back(m.hooks);
    }
    m_names.emplace_back(kModelOutputName);
    hooks.push_back(&model.forwardHooks);
    for (std::size_t i = 0; i < hooks.size(); ++i) {
        const std::string* name = &m_names[i];
        hooks[i]->addPostHook([this, name](const at::Tensor& output) {
            if (!output.is_floating_point() || !m_enabled.load(std::memory_order_relaxed))
                return output;
            check(m_forward, name, output);
            if (output.requires_grad())
                output.register_hook([this, name](const at::Tensor& grad) { check(m_backward, name, grad); });
            return output;
        });
    }
}

void NonfiniteProbe::check(std::vector<Check>& into, const std::string* module, const at::Tensor& t)
{
    at::Tensor sum = at::sum(t.detach(), at::kFloat);
    std::lock_guard lock(m_mutex);
    into.push_back({module, std::move(sum)});
}

void NonfiniteProbe::beginStep()
{
    std::lock_guard lock(m_mutex);
    m_forward.clear();
    m_backward.clear();
}

std::optional<NonfiniteProbe::Origin> NonfiniteProbe::firstNonfinite()
{
    std::lock_guard lock(m_mutex);
    for (const auto& c : m_forward)
        if (!at::isfinite(c.sum).item<bool>())
            return Origin{*c.module, "forward"};
    for (const auto& c : m_backward)
        if (!at::isfinite(c.sum).item<bool>())
            return Origin{*c.module, "backward"};
    return std::nullopt;
}

std::string NonfiniteProbe::describe(bool lossIsFinite)
{
    if (auto origin = firstNonfinite()) {
        if (origin->pass == "forward")
            return "the first non-finite output on this rank was " + origin->module + "'s, in forward";
        return "forward was finite on this rank; the first non-finite gradient was the one into " + origin->module
               + "'s output, in backward";
    }
    if (!lossIsFinite)
        return "every module's output was finite on this rank: the loss function made the non-finite value "
               "(check the targets and the loss's inputs)";
    return "every module's output and output gradient was finite on this rank: the non-finite values arose in a "
           "parameter's own gradient, its reduction over ranks, or clipping";
}

} // namespace shardscope::train
