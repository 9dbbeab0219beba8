#pragma once

// The precision modes a run can use, named as in the UI and the events. Torch-free, so the
// launcher and the GUI can validate and list them.
//   no        fp32 everything
//   fp16      fp16 autocast, fp32 master parameters, dynamic loss scaling
//   bf16      bf16 autocast, fp32 master parameters and optimizer state
//   bf16-pure parameters, gradients and optimizer state all bf16 (half the memory; updates
//             below half a bf16 ulp of a weight are lost)
//   fp8       fp8 matmuls on CUDA devices of compute capability >= 8.9

#include "engine/common/result.h"

#include <string>
#include <string_view>
#include <vector>

namespace shardscope::precision {

enum class PrecisionMode { No, Fp16, Bf16, Bf16Pure, Fp8 };

std::string_view modeName(PrecisionMode mode);
const std::vector<PrecisionMode>& allModes();
// Accepts Accelerate's values (no, fp16, bf16, fp8) and ours (bf16-pure); anything else is an
// error listing the choices.
Result<PrecisionMode> parseMode(std::string_view name);

} // namespace shardscope::precision
