// The only translation unit that includes Gloo's headers; see Note [Gloo headers] in
// scripts/setup.sh.
#include "engine/dist/backends.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

namespace shardscope::dist::detail {

c10::intrusive_ptr<c10d::Backend> makeGlooBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                  std::chrono::milliseconds timeout, const std::string& bindAddress)
{
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    // An explicit address: resolving the machine's hostname is unreliable in containers and
    // sandboxes (libtorch-engine-ground.md §1.4).
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(bindAddress));
    return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
}

} // namespace shardscope::dist::detail
