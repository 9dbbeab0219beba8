#include "engine/train/fault_injector.h"

#include "engine/models/models.h"
#include "engine/train/accelerator.h"
#include "engine/train/nonfinite_probe.h"

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <limits>
#include <stdexcept>
#include <thread>

namespace shardscope::train {

FaultInjector::FaultInjector(const config::FaultInjection& faults, int rank, std::int64_t vocabSize)
    : m_faults(faults), m_rank(rank), m_vocabSize(std::max<std::int64_t>(2, vocabSize))
{
}

void FaultInjector::attach(models::TrainableModel& model, const std::int64_t& step)
{
    const std::string& target = m_faults.nonfiniteOutputModule;
    if (target.empty())
        return;
    const std::int64_t atStep = m_faults.nonfiniteOutputAtStep;
    auto addTo = [&step, atStep](models::ForwardHooks& hooks) {
        hooks.addPostHook([&step, atStep](const at::Tensor& output) {
            if (step != atStep)
                return output;
            at::Tensor spoilt = at::zeros_like(output);
            spoilt.view({-1})[0] = std::numeric_limits<float>::quiet_NaN();
            return output + spoilt; // out of place: autograd still sees the module's output
        });
    };
    if (target == kModelOutputName) {
        addTo(model.forwardHooks);
        return;
    }
    for (auto& m : model.wrappableModules())
        if (m.name == target) {
            addTo(*m.hooks);
            return;
        }
    throw std::runtime_error("--nonfinite-output: the model has no module " + target);
}

void FaultInjector::beforeStep(std::int64_t step) const
{
    if (step != m_faults.fillDiskAtStep || (m_faults.fillDiskRank >= 0 && m_faults.fillDiskRank != m_rank))
        return;
    std::signal(SIGXFSZ, SIG_IGN); // a write past the limit fails instead of killing
    const rlimit limit{64 * 1024, 64 * 1024};
    setrlimit(RLIMIT_FSIZE, &limit);
}

void FaultInjector::spoil(data::BatchIterator::Batch& batch, std::int64_t step) const
{
    if (step != m_faults.spikeAtStep)
        return;
    if (batch.targets.is_floating_point())
        batch.targets = batch.targets * 3.0; // enough for a spike, too little to wreck the run after it
    else
        batch.targets = at::randint_like(batch.targets, m_vocabSize);
}

void FaultInjector::afterForward(const c10::Device& device, std::int64_t step) const
{
    if (step == m_faults.outOfMemoryAtStep)
        (void)at::empty({std::int64_t{1} << 50}, at::TensorOptions().dtype(at::kByte).device(device));
    if (m_faults.slowRank == m_rank && m_faults.slowForwardMs > 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(m_faults.slowForwardMs));
    if (m_faults.spinRank == m_rank && step == m_faults.spinAtStep) {
        volatile double sink = 0; // busy for good: only the launcher's stop ends it
        while (true)
            sink = sink + 1e-9;
    }
}

void FaultInjector::afterBackward(Accelerator& accelerator, std::int64_t step) const
{
    if (step != m_faults.injectNonfiniteGradAtStep)
        return;
    // The first synchronised gradient, on every rank alike, as an overflow in the reduced
    // gradients would be.
    accelerator.synchronizeGradients();
    for (auto& p : accelerator.optimizerParameters())
        if (p.grad().defined()) {
            torch::NoGradGuard noGrad;
            p.mutable_grad().view({-1})[0] = std::numeric_limits<float>::quiet_NaN();
            break;
        }
}

} // namespace shardscope::train
