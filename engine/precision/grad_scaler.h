#pragma once

// Dynamic loss scaling with the semantics of torch.amp.GradScaler, on ATen's own AMP kernels
// (_amp_foreach_non_finite_check_and_unscale_, _amp_update_scale_): the loss is multiplied by the
// scale before backward; gradients are unscaled (once per step, before clipping) while checking
// for inf/NaN; a step with a non-finite gradient is skipped; the scale backs off on overflow and
// grows after `growthInterval` finite steps. The found-inf flag is agreed across ranks (MAX)
// before deciding, so every rank skips the same steps even when each sees only a shard.

#include <ATen/core/Tensor.h>

#include <functional>
#include <vector>

namespace shardscope::precision {

struct GradScalerOptions {
    double initScale = 65536.0; // 2^16
    double growthFactor = 2.0;
    double backoffFactor = 0.5;
    std::int64_t growthInterval = 2000;
};

class GradScaler {
public:
    // `agreeFoundInf` turns this rank's found-inf tensor into the group's (an all-reduce MAX);
    // empty for a single process.
    explicit GradScaler(GradScalerOptions options, std::function<void(at::Tensor&)> agreeFoundInf = {});

    at::Tensor scale(const at::Tensor& loss);
    // Unscales every gradient in place and records whether any was inf/NaN. Idempotent within a
    // step (later calls do nothing), like GradScaler.unscale_.
    void unscale(const std::vector<at::Tensor>& parameters);
    // Whether the coming optimizer step must be skipped (unscale must have run).
    bool foundInf() const;
    // Ends the step: updates the scale from this step's found-inf and resets the per-step state.
    void update();

    double currentScale() const;
    std::int64_t growthTracker() const;
    // For checkpoints: the scale and growth tracker, restorable exactly.
    void setState(double scale, std::int64_t growthTracker);
    const GradScalerOptions& options() const { return m_options; }

private:
    void ensureState(const c10::Device& device);

    GradScalerOptions m_options;
    std::function<void(at::Tensor&)> m_agreeFoundInf;
    at::Tensor m_scale; // float32 [1]
    at::Tensor m_growthTracker; // int32 [1]
    at::Tensor m_foundInf; // float32 [1], this step
    bool m_unscaled = false;
};

} // namespace shardscope::precision
