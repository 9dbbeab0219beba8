#pragma once

// Dense peak FLOP/s of common NVIDIA GPUs for the dtype their matmuls run in: what MFU divides by.
// From the vendors' datasheets, without 2:4 sparsity (the datasheets' headline figures for
// Hopper and Ada are sparse, twice these). Torch-free: the estimator and the ranks share it.

#include <optional>
#include <string_view>

namespace shardscope::config {

// `deviceName`: as CUDA reports it ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB");
// `dtype`: "float32", "tf32", "bfloat16", "float16" or "float8". None: a GPU or dtype the table
// does not know (a V100 has no bf16 peak: its bf16 runs without tensor cores).
std::optional<double> gpuPeakFlops(std::string_view deviceName, std::string_view dtype);

} // namespace shardscope::config
