#include "engine/dist/collective_check.h"

#include "engine/dist/communicator.h"

#include <ATen/ATen.h>

#include <sstream>

namespace shardscope::dist {

namespace {

// Expected values are computed here from closed forms, never by another collective, so a wrong
// reduction cannot hide behind a matching wrong expectation.
class Checker {
public:
    Checker(Communicator& comm, const CollectiveCheckOptions& options, CollectiveCheckReport& report)
        : m_comm(comm), m_options(options), m_report(report)
    {
    }

    void runAll(at::ScalarType dtype)
    {
        checkAllreduceSum(dtype);
        checkAllreduceMax(dtype);
        checkAllGather(dtype);
        checkReduceScatter(dtype);
        checkBroadcast(dtype);
    }

private:
    at::TensorOptions opts(at::ScalarType dtype) const { return at::TensorOptions().dtype(dtype).device(m_comm.device()); }
    // 0, 1, 2, ... n-1 as int64 on the CPU, the base of every pattern below.
    static at::Tensor iota(std::int64_t n) { return at::arange(n, at::kLong); }

    at::Tensor onDevice(const at::Tensor& t, at::ScalarType dtype) const { return t.to(opts(dtype)); }

    // The fault injection of CollectiveCheckOptions::corruptRank: one element far too large, so
    // that sums and maxima both show it.
    void maybeCorrupt(at::Tensor& input) const
    {
        if (m_comm.rank() == m_options.corruptRank)
            input.narrow(0, 0, 1).add_(1000);
    }

    void expectEqual(const char* what, at::ScalarType dtype, const at::Tensor& actual, const at::Tensor& expectedCpu)
    {
        ++m_report.checksRun;
        const at::Tensor got = actual.to(at::kCPU).to(at::kDouble);
        const at::Tensor want = expectedCpu.to(at::kDouble);
        if (got.sizes() == want.sizes() && at::equal(got, want))
            return;
        std::ostringstream message;
        message << what << " (" << c10::toString(dtype) << ", " << m_comm.size() << " ranks): ";
        if (got.sizes() != want.sizes()) {
            message << "shape " << got.sizes() << ", expected " << want.sizes();
        } else {
            const auto bad = (got != want).nonzero();
            const std::int64_t index = bad[0][0].item<std::int64_t>();
            message << bad.size(0) << " of " << got.numel() << " elements wrong; element " << index << " is "
                    << got[index].item<double>() << ", expected " << want[index].item<double>();
        }
        m_report.failures.push_back(message.str());
    }

    void checkAllreduceSum(at::ScalarType dtype)
    {
        const auto n = m_options.numel;
        const auto pattern = iota(n).remainder(97) + 1;
        auto tensor = onDevice(pattern * (m_comm.rank() + 1), dtype);
        maybeCorrupt(tensor);
        m_comm.allreduce(tensor, c10d::ReduceOp::SUM)->wait();
        const std::int64_t w = m_comm.size();
        expectEqual("all_reduce sum", dtype, tensor, pattern * (w * (w + 1) / 2));
    }

    void checkAllreduceMax(at::ScalarType dtype)
    {
        const auto n = m_options.numel;
        // Rank r holds (i + r) mod w plus an offset, so each element's maximum comes from a
        // different rank.
        const std::int64_t w = m_comm.size();
        auto tensor = onDevice((iota(n) + m_comm.rank()).remainder(w) + iota(n).remainder(13), dtype);
        maybeCorrupt(tensor);
        m_comm.allreduce(tensor, c10d::ReduceOp::MAX)->wait();
        expectEqual("all_reduce max", dtype, tensor, (w - 1) + iota(n).remainder(13));
    }

    void checkAllGather(at::ScalarType dtype)
    {
        const auto n = m_options.numel;
        const std::int64_t w = m_comm.size();
        auto input = onDevice(iota(n) + m_comm.rank() * n, dtype);
        maybeCorrupt(input);
        auto output = at::full({w * n}, -1, opts(dtype));
        m_comm.allGatherSingle(output, input)->wait();
        expectEqual("all_gather", dtype, output, iota(w * n));
    }

    void checkReduceScatter(at::ScalarType dtype)
    {
        const auto n = m_options.numel;
        const std::int64_t w = m_comm.size();
        const std::int64_t r = m_comm.rank();
        const auto pattern = iota(w * n).remainder(89) + 1;
        auto input = onDevice(pattern * (r + 1), dtype);
        maybeCorrupt(input);
        auto output = at::full({n}, -1, opts(dtype));
        m_comm.reduceScatterSingle(output, input, c10d::ReduceOp::SUM)->wait();
        expectEqual("reduce_scatter sum", dtype, output, pattern.narrow(0, r * n, n) * (w * (w + 1) / 2));
    }

    void checkBroadcast(at::ScalarType dtype)
    {
        const auto n = m_options.numel;
        const int root = m_comm.size() - 1;
        auto tensor = m_comm.rank() == root ? onDevice(iota(n) * 3, dtype) : at::zeros({n}, opts(dtype));
        if (m_comm.rank() == root)
            maybeCorrupt(tensor);
        m_comm.broadcast(tensor, root)->wait();
        expectEqual("broadcast", dtype, tensor, iota(n) * 3);
    }

    Communicator& m_comm;
    const CollectiveCheckOptions& m_options;
    CollectiveCheckReport& m_report;
};

} // namespace

CollectiveCheckReport runCollectiveChecks(const DistEnv& env, const CollectiveCheckOptions& options)
{
    CommunicatorOptions commOptions;
    commOptions.backend = options.backend;
    commOptions.timeout = std::chrono::seconds(60);
    auto comm = Communicator::connect(env, commOptions);

    CollectiveCheckReport report;
    report.device = comm->device().str();
    Checker checker(*comm, options, report);
    for (auto dtype : {at::kFloat, at::kDouble, at::kLong, at::kInt})
        checker.runAll(dtype);
    // Keep every rank's process group alive until all have finished their last collective.
    comm->barrier();
    return report;
}

} // namespace shardscope::dist
