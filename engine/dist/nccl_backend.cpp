// NCCL process group construction; compiled only where torch is a CUDA build and nccl.h is found.
#include "engine/dist/backends.h"

#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

namespace shardscope::dist::detail {

c10::intrusive_ptr<c10d::Backend> makeNcclBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                  std::chrono::milliseconds timeout, int deviceIndex)
{
    // The communicator is created lazily at the first collective on the current device, so the
    // device must be set first (libtorch-engine-ground.md §1.5).
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(deviceIndex));
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout;
    auto group = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
    group->setBoundDeviceId(c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(deviceIndex)));
    return group;
}

} // namespace shardscope::dist::detail
