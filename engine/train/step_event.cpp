#include "engine/train/step_event.h"

#include "engine/train/accelerator.h"
#include "engine/train/optimizer_setup.h"

#ifdef SHARDSCOPE_HAVE_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <utility>

namespace shardscope::train {

namespace {

// This process's resident set now and its peak, in bytes: /proc/self/statm (one short line) and
// getrusage, cheap enough for every step (/proc/self/status is ten times slower to parse).
std::pair<std::int64_t, std::int64_t> residentMemory()
{
    static const long pageSize = sysconf(_SC_PAGESIZE);
    std::int64_t rss = 0;
    if (std::FILE* statm = std::fopen("/proc/self/statm", "r")) {
        long long size = 0, resident = 0;
        if (std::fscanf(statm, "%lld %lld", &size, &resident) == 2)
            rss = resident * pageSize;
        std::fclose(statm);
    }
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return {rss, static_cast<std::int64_t>(usage.ru_maxrss) * 1024};
}

// CUDA ranks: bytes the caching allocator has handed out now, reserves, and the peak since the
// previous call (torch.cuda.memory_allocated / memory_reserved / max_memory_allocated).
void deviceMemory([[maybe_unused]] c10::Device device, [[maybe_unused]] protocol::MemoryStats& mem)
{
#ifdef SHARDSCOPE_HAVE_CUDA
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    constexpr auto all = static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    mem.allocated = stats.allocated_bytes[all].current;
    mem.reserved = stats.reserved_bytes[all].current;
    mem.peakAllocated = stats.allocated_bytes[all].peak;
    c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
#endif
}

} // namespace

std::int64_t memoryInUse(c10::Device device)
{
#ifdef SHARDSCOPE_HAVE_CUDA
    if (device.is_cuda()) {
        const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
        return stats.allocated_bytes[static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE)].current;
    }
#endif
    (void)device;
    return residentMemory().first;
}

protocol::StepEvent makeStepEvent(const StepMeasurement& measured, Accelerator& acc, torch::optim::Optimizer& optimizer)
{
    protocol::StepEvent e;
    e.step = measured.step;
    e.epoch = measured.epoch;
    e.batch = measured.batch;
    e.loss = measured.loss;
    e.localLoss = measured.localLoss;
    e.lr = measured.lr;
    e.gradNorm = measured.gradNorm;
    e.lossScale = acc.lossScale();
    e.skipped = acc.lastStepSkipped();
    e.skippedSteps = acc.skippedSteps();
    e.samples = measured.samples;
    e.tokens = measured.tokens;
    e.stepTime = measured.stepTime;
    e.dataTime = measured.dataTime;
    e.waitTime = measured.waitTime;
    e.optimizerTime = measured.optimizerTime;
    e.computeTime = std::max(0.0, measured.stepTime - measured.dataTime - measured.waitTime - measured.optimizerTime);
    e.tokensPerS = measured.stepTime > 0 ? static_cast<double>(e.tokens * acc.numProcesses()) / measured.stepTime : 0;

    const parallel::StepFootprint footprint = acc.dataParallel().stepFootprint();
    e.mem.params = footprint.params;
    e.mem.grads = footprint.grads;
    e.mem.peakParams = footprint.peakParams;
    e.mem.peakGrads = footprint.peakGrads;
    e.mem.optimizer = optimizerStateBytes(optimizer) + footprint.masterShards; // ZeRO-1/2's fp32 master shard
    std::tie(e.mem.rss, e.mem.peakAllocated) = residentMemory();
    if (acc.device().is_cuda())
        deviceMemory(acc.device(), e.mem); // the caching allocator's view, peak since the last step event
    e.phaseMemory = measured.phaseMemory;
    e.comm.allReduce = footprint.allReduced;
    e.comm.tensorAllReduce = footprint.tensorAllReduced;
    e.comm.allGather = footprint.allGathered;
    e.comm.reduceScatter = footprint.reduceScattered;
    e.comm.broadcast = footprint.broadcast;
    return e;
}

} // namespace shardscope::train
