#include "engine/plan/precision_mode.h"

namespace shardscope::precision {

const std::vector<PrecisionMode>& allModes()
{
    static const std::vector<PrecisionMode> kModes = {PrecisionMode::No, PrecisionMode::Fp16, PrecisionMode::Bf16,
                                                      PrecisionMode::Bf16Pure, PrecisionMode::Fp8};
    return kModes;
}

std::string_view modeName(PrecisionMode mode)
{
    switch (mode) {
    case PrecisionMode::No:
        return "no";
    case PrecisionMode::Fp16:
        return "fp16";
    case PrecisionMode::Bf16:
        return "bf16";
    case PrecisionMode::Bf16Pure:
        return "bf16-pure";
    case PrecisionMode::Fp8:
        return "fp8";
    }
    return "no";
}

Result<PrecisionMode> parseMode(std::string_view name)
{
    for (auto mode : allModes())
        if (modeName(mode) == name)
            return mode;
    return makeError("mixed_precision '" + std::string(name)
                     + "' is not a precision mode; choose one of: no, fp16, bf16, bf16-pure, fp8");
}

} // namespace shardscope::precision
