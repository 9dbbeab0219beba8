#pragma once

// Model FLOPs utilisation per step: the model's FLOPs per token (config::flopsPerToken) times the
// tokens a rank trained, over its step time, against the peak of the device the rank computes on:
// a table of common GPUs (config::gpuPeakFlops), or on a CPU a short matmul measured at start (all
// ranks measure at once, so each gets its share of the cores, as in training).

#include "engine/estimate/model_flops.h"
#include "engine/plan/precision_mode.h"
#include "engine/protocol/events.h"

#include <c10/core/Device.h>

#include <optional>
#include <string>

namespace shardscope::train {

struct DevicePeak {
    double flops = 0; // FLOP/s
    std::string how; // for the log: "NVIDIA H100 80GB HBM3, bfloat16 (datasheet, dense)", "measured: ..."
};

// The dtype the run's matmuls use: float32 ("no"; TF32 is off, torch's default), float16,
// bfloat16 (bf16 and bf16-pure), float8.
const char* matmulDtype(precision::PrecisionMode mode);

// None: a GPU the table does not know.
std::optional<DevicePeak> devicePeak(const c10::Device& device, precision::PrecisionMode mode);

// The best rate of `repeats` n x n x n matmuls in `dtype` on the CPU, FLOP/s.
double measureCpuMatmulFlops(const char* dtype, int n = 512, int repeats = 8);

// Fills e.flops (and e.mfu when the peak is known) from the tokens and time the event holds.
void addUtilisation(protocol::StepEvent& e, const config::FlopsPerToken& perToken, const std::optional<DevicePeak>& peak);

} // namespace shardscope::train
