#pragma once

// Which c10d backend a job uses; torch-free so the worker's command line and the launcher can
// name it without including torch.

#include <optional>
#include <string_view>

namespace shardscope::dist {

enum class BackendKind { Gloo, Nccl };

inline const char* backendName(BackendKind kind) { return kind == BackendKind::Nccl ? "nccl" : "gloo"; }

inline std::optional<BackendKind> parseBackendName(std::string_view name)
{
    if (name == "gloo")
        return BackendKind::Gloo;
    if (name == "nccl")
        return BackendKind::Nccl;
    return std::nullopt;
}

} // namespace shardscope::dist
