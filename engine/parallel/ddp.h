#pragma once

// Data parallelism with overlapped gradient all-reduce, PyTorch DDP's design on c10d:
// parameters are broadcast from rank 0 once; gradients are grouped into buckets in reverse
// registration order (the order backward produces them; first bucket 1 MiB, then 25 MiB by
// default); a hook on each parameter's gradient accumulator counts the bucket down, and the
// moment a bucket is complete its all-reduce starts asynchronously while backward goes on.
// finishGradientSync() waits for all buckets and writes the averaged gradients back, before the
// optimizer step. On accumulation steps no hook is armed and nothing is communicated.

#include "engine/dist/communicator.h"
#include "engine/parallel/data_parallel.h"
#include "profiler/span_recorder.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

namespace shardscope::parallel {

struct DdpOptions {
    std::int64_t bucketCapBytes = 25 * 1024 * 1024;
    std::int64_t firstBucketCapBytes = 1024 * 1024;
    // false: one all-reduce of every gradient after backward (the baseline without overlap).
    bool overlap = true;
    // Reduce low-precision gradients in float32 (Gloo has no bf16/fp16 sums); otherwise buckets
    // are reduced in the gradients' own dtype.
    bool reduceLowPrecisionInFloat32 = false;
};

// When each bucket's all-reduce was issued in the last synchronised backward, for showing that
// communication overlaps computation.
struct BucketIssue {
    std::size_t bucket = 0;
    std::chrono::steady_clock::time_point issued;
    bool duringBackward = false; // issued from a gradient hook, i.e. before backward returned
};

class DistributedDataParallel final : public ReplicatedDataParallel {
public:
    // Every parameter of the model by name, frozen ones included (they get no bucket).
    DistributedDataParallel(NamedTensors parameters, dist::Communicator& comm, DdpOptions options);
    ~DistributedDataParallel() override;
    DistributedDataParallel(const DistributedDataParallel&) = delete;
    DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

    // Makes every rank's parameters equal to rank 0's (one flat broadcast per dtype).
    void broadcastParameters();
    // The parameters' broadcast is reported with the first step this process runs.
    void beginStep() override;
    // Before each backward: arm the hooks when this backward's gradients are to be synchronised.
    void prepareForBackward(bool synchronize) override;
    // After the last backward of an optimizer step: launch what is left, wait, average, copy back.
    void finishGradientSync() override;
    // "ddp: N buckets, M all-reduces issued before backward finished": the overlap, in words.
    std::string firstStepReport() const override;

    // Spans for each bucket's all-reduce, from issue to completion (null: none).
    void setRecorder(profiler::SpanRecorder* recorder) override { m_recorder = recorder; }

private:
    struct Bucket {
        std::vector<std::size_t> params; // indices into m_params
        std::int64_t numel = 0;
        at::Tensor flat;
        c10::intrusive_ptr<c10d::Work> work;
        profiler::SpanRecorder::SpanId span = profiler::SpanRecorder::kNoSpan; // to end after the wait, if not at completion
        int pending = 0;
    };

    void onGradientReady(std::size_t param);
    void launch(std::size_t bucket, bool duringBackward);

    std::vector<at::Tensor> m_params;
    dist::Communicator& m_comm;
    DdpOptions m_options;
    std::vector<Bucket> m_buckets;
    std::vector<std::size_t> m_bucketOf;
    // Parameters hold only a weak reference to their gradient accumulator: keep ours alive, or
    // the next backward would create a new one without our hook.
    // (A shared_ptr up to torch 2.13, an intrusive_ptr from 2.14: take whatever it returns.)
    std::vector<decltype(torch::autograd::impl::grad_accumulator(std::declval<const at::Tensor&>()))> m_accumulators;
    bool m_armed = false;
    std::vector<BucketIssue> m_issues;
    std::int64_t m_broadcastBytes = 0; // by broadcastParameters, reported with the first step
    profiler::SpanRecorder* m_recorder = nullptr;
    bool m_stepsBegun = false;
};

} // namespace shardscope::parallel
