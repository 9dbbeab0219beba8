#include "engine/precision/grad_scaler.h"

#include <ATen/ATen.h>

#include <map>

namespace shardscope::precision {

GradScaler::GradScaler(GradScalerOptions options, std::function<void(at::Tensor&)> agreeFoundInf)
    : m_options(options), m_agreeFoundInf(std::move(agreeFoundInf))
{
}

void GradScaler::ensureState(const c10::Device& device)
{
    if (m_scale.defined())
        return;
    m_scale = at::full({1}, m_options.initScale, at::TensorOptions().dtype(at::kFloat).device(device));
    m_growthTracker = at::zeros({1}, at::TensorOptions().dtype(at::kInt).device(device));
}

at::Tensor GradScaler::scale(const at::Tensor& loss)
{
    ensureState(loss.device());
    return loss * m_scale.to(loss.scalar_type());
}

void GradScaler::unscale(const std::vector<at::Tensor>& parameters)
{
    if (m_unscaled)
        return;
    // The scale lives where the loss was (scale() made it); gradients may live elsewhere (host
    // shards when offloaded), so each device's check gets its own flag, summed onto the scale's.
    c10::Device device = m_scale.defined()    ? m_scale.device()
                         : parameters.empty() ? c10::Device(c10::kCPU)
                                              : parameters.front().device();
    ensureState(device);
    // GradScaler computes the reciprocal in float64, then casts to float32.
    const at::Tensor invScale = m_scale.to(at::kDouble).reciprocal().to(at::kFloat);
    m_foundInf = at::zeros({1}, at::TensorOptions().dtype(at::kFloat).device(device));
    // The kernel takes one (device, dtype) group per call.
    std::map<std::pair<int, int>, std::vector<at::Tensor>> groups;
    for (const auto& p : parameters) {
        const auto& g = p.grad();
        if (g.defined())
            groups[{static_cast<int>(g.device().index()), static_cast<int>(g.scalar_type())}].push_back(g);
    }
    for (auto& [key, grads] : groups) {
        const c10::Device gradDevice = grads.front().device();
        if (gradDevice == device) {
            at::_amp_foreach_non_finite_check_and_unscale_(grads, m_foundInf, invScale);
            continue;
        }
        at::Tensor found = at::zeros({1}, m_foundInf.options().device(gradDevice));
        at::_amp_foreach_non_finite_check_and_unscale_(grads, found, invScale.to(gradDevice));
        m_foundInf.add_(found.to(device)).clamp_max_(1.0);
    }
    if (m_agreeFoundInf)
        m_agreeFoundInf(m_foundInf);
    m_unscaled = true;
}

bool GradScaler::foundInf() const { return m_foundInf.defined() && m_foundInf.item<float>() > 0.0f; }

void GradScaler::update()
{
    if (!m_scale.defined())
        return;
    const at::Tensor found = m_foundInf.defined() ? m_foundInf : at::zeros_like(m_scale);
    at::_amp_update_scale_(m_scale, m_growthTracker, found, m_options.growthFactor, m_options.backoffFactor,
                           m_options.growthInterval);
    m_foundInf = at::Tensor();
    m_unscaled = false;
}

double GradScaler::currentScale() const { return m_scale.defined() ? m_scale.item<double>() : m_options.initScale; }

std::int64_t GradScaler::growthTracker() const { return m_growthTracker.defined() ? m_growthTracker.item<std::int64_t>() : 0; }

void GradScaler::setState(double scale, std::int64_t growthTracker)
{
    ensureState(m_scale.defined() ? m_scale.device() : c10::Device(c10::kCPU));
    m_scale.fill_(scale);
    m_growthTracker.fill_(growthTracker);
}

} // namespace shardscope::precision
