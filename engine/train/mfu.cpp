#include "engine/train/mfu.h"

#include "engine/estimate/device_peaks.h"

#include <ATen/ATen.h>

#ifdef SHARDSCOPE_HAVE_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace shardscope::train {

const char* matmulDtype(precision::PrecisionMode mode)
{
    using precision::PrecisionMode;
    switch (mode) {
    case PrecisionMode::Fp16:
        return "float16";
    case PrecisionMode::Bf16:
    case PrecisionMode::Bf16Pure:
        return "bfloat16";
    case PrecisionMode::Fp8:
        return "float8";
    case PrecisionMode::No:
        break;
    }
    return "float32";
}

double measureCpuMatmulFlops(const char* dtype, int n, int repeats)
{
    const std::string name = dtype;
    // fp8 matmuls run emulated on the CPU; their peak is that of the bf16 they compute in.
    const at::ScalarType type = name == "float16" ? at::kHalf : name == "float32" ? at::kFloat : at::kBFloat16;
    at::NoGradGuard noGrad;
    const auto a = at::randn({n, n}, at::TensorOptions().dtype(type));
    const auto b = at::randn({n, n}, at::TensorOptions().dtype(type));
    auto c = at::mm(a, b); // warm-up: threads started, kernels chosen
    double best = 0;
    for (int i = 0; i < repeats; ++i) {
        const auto start = std::chrono::steady_clock::now();
        at::mm_out(c, a, b);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (seconds > 0)
            best = std::max(best, 2.0 * n * n * static_cast<double>(n) / seconds);
    }
    return best;
}

std::optional<DevicePeak> devicePeak(const c10::Device& device, precision::PrecisionMode mode)
{
    const char* dtype = matmulDtype(mode);
    if (device.is_cpu()) {
        const double flops = measureCpuMatmulFlops(dtype);
        char how[128];
        std::snprintf(how, sizeof how, "measured: best of 8 512x512x512 %s matmuls on this rank's threads", dtype);
        return DevicePeak{flops, how};
    }
#ifdef SHARDSCOPE_HAVE_CUDA
    if (device.is_cuda()) {
        const std::string name = at::cuda::getDeviceProperties(device.index())->name;
        if (auto flops = config::gpuPeakFlops(name, dtype))
            return DevicePeak{*flops, name + ", " + dtype + " (datasheet, dense)"};
    }
#endif
    return std::nullopt;
}

void addUtilisation(protocol::StepEvent& e, const config::FlopsPerToken& perToken, const std::optional<DevicePeak>& peak)
{
    if (e.stepTime <= 0 || e.tokens <= 0 || perToken.model <= 0)
        return;
    e.flops = perToken.model * static_cast<double>(e.tokens) / e.stepTime;
    if (peak && peak->flops > 0)
        e.mfu = e.flops / peak->flops;
}

} // namespace shardscope::train
