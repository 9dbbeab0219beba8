#include "engine/parallel/data_parallel.h"

#include <ATen/ATen.h>

#include <stdexcept>

namespace shardscope::parallel {

ReplicatedDataParallel::ReplicatedDataParallel(NamedTensors parameters) : m_parameters(std::move(parameters))
{
    for (const auto& [name, p] : m_parameters)
        m_footprint.params += tensorBytes(p);
    m_footprint.peakParams = m_footprint.params;
}

NamedTensors ReplicatedDataParallel::namedOptimizerParameters() const
{
    NamedTensors trainable;
    for (const auto& [name, p] : m_parameters)
        if (p.requires_grad())
            trainable.emplace_back(name, p);
    return trainable;
}

NamedTensors ReplicatedDataParallel::gatheredNamedParameters(bool keep) { return keep ? m_parameters : NamedTensors{}; }

void ReplicatedDataParallel::loadFullParameters(const std::map<std::string, at::Tensor>& parameters, const std::string& source)
{
    at::NoGradGuard noGrad;
    for (auto& [name, p] : m_parameters) {
        auto it = parameters.find(name);
        if (it == parameters.end() || it->second.sizes() != p.sizes())
            throw std::runtime_error(source + " has no parameter '" + name + "' of the model's shape");
        p.detach().copy_(it->second);
    }
}

NamedTensors ReplicatedDataParallel::gatherByParameter(const PartOf& part, bool keep)
{
    NamedTensors out;
    if (!keep)
        return out;
    at::NoGradGuard noGrad;
    for (const auto& [name, p] : namedOptimizerParameters())
        if (at::Tensor t = part(p); t.defined())
            out.emplace_back(name, t.detach().cpu().clone());
    return out;
}

void ReplicatedDataParallel::scatterByParameter(const std::map<std::string, at::Tensor>& full, const SetPart& set,
                                                const std::string& source)
{
    at::NoGradGuard noGrad;
    for (const auto& [name, p] : namedOptimizerParameters()) {
        auto it = full.find(name);
        if (it == full.end() || it->second.numel() != p.numel())
            throw std::runtime_error(source + " has no tensor of " + std::to_string(p.numel()) + " elements for parameter '"
                                     + name + "'");
        set(p, it->second.to(p.device(), p.scalar_type()).reshape(p.sizes()).clone());
    }
}

StepFootprint ReplicatedDataParallel::stepFootprint() const { return m_footprint; }

void ReplicatedDataParallel::measureGradients()
{
    m_footprint.grads = 0;
    for (const auto& [name, p] : m_parameters)
        m_footprint.grads += tensorBytes(p.grad());
    m_footprint.peakGrads = m_footprint.grads;
}

} // namespace shardscope::parallel
