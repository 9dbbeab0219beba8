#include "engine/estimate/device_peaks.h"

namespace shardscope::config {

namespace {

struct GpuPeaks {
    const char* namePart; // matched in order: the more specific names first
    double fp32, tf32, bf16, fp16, fp8; // TFLOP/s, dense; 0: not supported
};

// NVIDIA datasheets (dense). H200 has the H100 SXM's compute.
constexpr GpuPeaks kGpus[] = {
    {"H100 PCIe", 51.2, 378, 756, 756, 1513},
    {"H100 NVL", 60, 417.5, 835, 835, 1671},
    {"H100", 66.9, 494.7, 989.4, 989.4, 1978.9},
    {"H200", 66.9, 494.7, 989.4, 989.4, 1978.9},
    {"H800", 66.9, 494.7, 989.4, 989.4, 1978.9},
    {"A100", 19.5, 156, 312, 312, 0},
    {"A800", 19.5, 156, 312, 312, 0},
    {"L40S", 91.6, 183, 362, 362, 733},
    {"L40", 90.5, 90.5, 181, 181, 362},
    {"L4", 30.3, 60, 121, 121, 242},
    {"A10G", 0, 0, 0, 0, 0}, // AWS's variant: no published datasheet figures; unknown rather than A10's
    {"A10", 31.2, 62.5, 125, 125, 0},
    {"V100", 15.7, 0, 0, 125, 0},
    {"T4", 8.1, 0, 0, 65, 0},
};

} // namespace

std::optional<double> gpuPeakFlops(std::string_view deviceName, std::string_view dtype)
{
    for (const GpuPeaks& gpu : kGpus) {
        if (deviceName.find(gpu.namePart) == std::string_view::npos)
            continue;
        const double tflops = dtype == "float32"    ? gpu.fp32
                              : dtype == "tf32"     ? gpu.tf32
                              : dtype == "bfloat16" ? gpu.bf16
                              : dtype == "float16"  ? gpu.fp16
                              : dtype == "float8"   ? gpu.fp8
                                                    : 0;
        if (tflops <= 0)
            return std::nullopt;
        return tflops * 1e12;
    }
    return std::nullopt;
}

} // namespace shardscope::config
