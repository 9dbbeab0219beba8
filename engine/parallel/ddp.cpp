#include "engine/parallel/ddp.h"
#include "engine/dist/wait_clock.h"

#include "engine/parallel/collective_spans.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <stdexcept>

namespace shardscope::parallel {

DistributedDataParallel::DistributedDataParallel(NamedTensors parameters, dist::Communicator& comm, DdpOptions options)
    : ReplicatedDataParallel(parameters), m_comm(comm), m_options(options)
{
    // Bucket assignment as compute_bucket_assignment_by_size does it for DDP: parameters in
    // reverse registration order, one dtype per bucket, a bucket closes once it reaches its cap
    // (the first bucket's cap is smaller so that communication starts early). Without overlap,
    // everything goes into one bucket per dtype.
    for (auto& [name, p] : parameters)
        m_params.push_back(std::move(p));
    m_bucketOf.assign(m_params.size(), 0);
    std::int64_t openBytes = 0;
    bool open = false;
    for (std::size_t k = m_params.size(); k-- > 0;) {
        const auto& p = m_params[k];
        if (!p.requires_grad())
            continue;
        if (!open || m_params[m_buckets.back().params.front()].scalar_type() != p.scalar_type()) {
            m_buckets.emplace_back();
            openBytes = 0;
            open = true;
        }
        m_buckets.back().params.push_back(k);
        m_buckets.back().numel += p.numel();
        m_bucketOf[k] = m_buckets.size() - 1;
        openBytes += p.numel() * static_cast<std::int64_t>(p.element_size());
        const std::int64_t cap = m_buckets.size() == 1 ? m_options.firstBucketCapBytes : m_options.bucketCapBytes;
        if (m_options.overlap && openBytes >= cap)
            open = false;
    }
    for (auto& bucket : m_buckets) {
        const auto& first = m_params[bucket.params.front()];
        auto flatOptions = first.options().requires_grad(false);
        if (m_options.reduceLowPrecisionInFloat32 && at::isReducedFloatingType(first.scalar_type()))
            flatOptions = flatOptions.dtype(at::kFloat);
        bucket.flat = at::empty({bucket.numel}, flatOptions);
    }

    for (std::size_t k = 0; k < m_params.size(); ++k) {
        if (!m_params[k].requires_grad())
            continue;
        auto accumulator = torch::autograd::impl::grad_accumulator(m_params[k]);
        if (!accumulator)
            throw std::logic_error("DDP needs leaf parameters that require grad");
        accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
            [this, k](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
                onGradientReady(k);
                return outputs;
            }));
        m_accumulators.push_back(std::move(accumulator));
    }
}

DistributedDataParallel::~DistributedDataParallel()
{
    // Outstanding work must finish before the tensors it reads go away.
    for (auto& bucket : m_buckets)
        if (bucket.work)
            dist::waitFor(bucket.work);
}

void DistributedDataParallel::broadcastParameters()
{
    at::NoGradGuard noGrad;
    m_broadcastBytes = 0;
    for (auto& bucket : m_buckets) {
        std::vector<at::Tensor> views;
        for (auto k : bucket.params)
            views.push_back(m_params[k].detach().reshape({-1}));
        at::Tensor flat = at::cat(views);
        dist::waitFor(m_comm.broadcast(flat, 0));
        std::int64_t offset = 0;
        for (auto k : bucket.params) {
            auto& p = m_params[k];
            p.detach().copy_(flat.narrow(0, offset, p.numel()).view_as(p));
            offset += p.numel();
        }
        m_broadcastBytes += flat.numel() * static_cast<std::int64_t>(flat.element_size());
    }
}

void DistributedDataParallel::beginStep()
{
    m_footprint.broadcast = m_stepsBegun ? 0 : m_broadcastBytes;
    m_stepsBegun = true;
}

std::string DistributedDataParallel::firstStepReport() const
{
    const auto during = std::count_if(m_issues.begin(), m_issues.end(), [](const BucketIssue& i) { return i.duringBackward; });
    return "ddp: " + std::to_string(m_buckets.size()) + " buckets, " + std::to_string(during)
           + " all-reduces issued before backward finished";
}

void DistributedDataParallel::prepareForBackward(bool synchronize)
{
    if (synchronize && !m_armed) {
        m_issues.clear();
        for (auto& bucket : m_buckets)
            bucket.pending = static_cast<int>(bucket.params.size());
    }
    m_armed = synchronize && m_options.overlap;
}

void DistributedDataParallel::onGradientReady(std::size_t param)
{
    if (!m_armed)
        return;
    Bucket& bucket = m_buckets[m_bucketOf[param]];
    if (--bucket.pending == 0)
        launch(m_bucketOf[param], /*duringBackward=*/true);
}

void DistributedDataParallel::launch(std::size_t index, bool duringBackward)
{
    Bucket& bucket = m_buckets[index];
    std::int64_t offset = 0;
    for (auto k : bucket.params) {
        const auto& p = m_params[k];
        auto slot = bucket.flat.narrow(0, offset, p.numel());
        if (p.grad().defined())
            slot.copy_(p.grad().reshape({-1}));
        else
            slot.zero_(); // unused in this step's graph: contributes nothing
        offset += p.numel();
    }
    bucket.pending = -1; // launched
    const auto span = m_recorder
                          ? m_recorder->begin(profiler::Lane::Communication, "all_reduce bucket " + std::to_string(index),
                                              "all_reduce", bucket.numel * static_cast<std::int64_t>(bucket.flat.element_size()))
                          : profiler::SpanRecorder::kNoSpan;
    bucket.work = m_comm.allreduce(bucket.flat);
    bucket.span = endSpanAtCompletion(bucket.work, m_recorder, span);
    m_issues.push_back({index, std::chrono::steady_clock::now(), duringBackward});
}

void DistributedDataParallel::finishGradientSync()
{
    at::NoGradGuard noGrad;
    m_armed = false;
    m_footprint.allReduced = 0;
    // Buckets whose gradients never all arrived (unused parameters) or that wait for the end
    // (overlap off) go now, in bucket order.
    for (std::size_t b = 0; b < m_buckets.size(); ++b)
        if (m_buckets[b].pending != -1)
            launch(b, /*duringBackward=*/false);
    const double scale = 1.0 / static_cast<double>(m_comm.size());
    for (auto& bucket : m_buckets) {
        dist::waitFor(bucket.work);
        bucket.work.reset();
        endSpanAfterWait(m_recorder, bucket.span);
        bucket.flat.mul_(scale);
        std::int64_t offset = 0;
        for (auto k : bucket.params) {
            auto& p = m_params[k];
            auto averaged = bucket.flat.narrow(0, offset, p.numel()).view_as(p);
            if (p.grad().defined())
                p.mutable_grad().copy_(averaged);
            else
                p.mutable_grad() = averaged.clone();
            offset += p.numel();
        }
        m_footprint.allReduced += bucket.numel * static_cast<std::int64_t>(bucket.flat.element_size());
        bucket.pending = 0;
    }
    measureGradients();
    for (const auto& bucket : m_buckets) // the buckets live as long as DDP does, as torch's do
        m_footprint.peakGrads += tensorBytes(bucket.flat);
}

} // namespace shardscope::parallel
