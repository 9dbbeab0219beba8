#pragma once

// Backend factories, each in its own translation unit so that only that file needs the backend's
// third-party headers (Gloo's are not shipped with torch; NCCL's come from the nvidia wheel).

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <string>

namespace shardscope::dist::detail {

// `bindAddress` is the local address Gloo's TCP transport listens on.
c10::intrusive_ptr<c10d::Backend> makeGlooBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                  std::chrono::milliseconds timeout, const std::string& bindAddress);

// Defined only where SHARDSCOPE_HAVE_NCCL is set (nccl_backend.cpp).
c10::intrusive_ptr<c10d::Backend> makeNcclBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                  std::chrono::milliseconds timeout, int deviceIndex);

} // namespace shardscope::dist::detail
