#include "engine/dist/communicator.h"

#include "engine/dist/backends.h"
#include "engine/dist/flight_recorder.h"
#include "engine/dist/wait_clock.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <iostream>
#include <stdexcept>
#include <thread>

namespace shardscope::dist {

std::unique_ptr<Communicator> Communicator::connect(const DistEnv& env, const CommunicatorOptions& options)
{
    std::unique_ptr<Communicator> comm(new Communicator());
    comm->m_rank = env.rank;
    comm->m_size = env.worldSize;
    comm->m_kind = options.backend;
    comm->m_timeout = options.timeout;

    c10d::TCPStoreOptions storeOptions;
    storeOptions.port = static_cast<std::uint16_t>(env.masterPort);
    storeOptions.isServer = env.rank == 0;
    storeOptions.numWorkers = static_cast<std::size_t>(env.worldSize);
    storeOptions.timeout = options.timeout;
    // The libuv server is optional in torch builds; the classic one works everywhere and is ample
    // for a handful of ranks (libtorch-engine-ground.md §1.2).
    storeOptions.useLibUV = false;
    if (env.rank == 0 && env.masterListenFd >= 0)
        storeOptions.masterListenFd = env.masterListenFd;

    c10::intrusive_ptr<c10d::Store> tcpStore;
    try {
        tcpStore = c10::make_intrusive<c10d::TCPStore>(env.masterAddr, storeOptions);
    } catch (const std::exception& e) {
        throw std::runtime_error("rendezvous with " + env.masterAddr + ":" + std::to_string(env.masterPort)
                                 + " failed: " + e.what());
    }
    // One prefix per process group, as Python does: groups sharing raw keys corrupt each other.
    comm->m_store = c10::make_intrusive<c10d::PrefixStore>("default_pg/", tcpStore);
    comm->m_rootStore = tcpStore;

    try {
        switch (options.backend) {
        case BackendKind::Gloo: {
            const std::string bindAddress = isLoopbackHost(env.masterAddr) ? "127.0.0.1" : std::string();
            if (bindAddress.empty())
                throw std::runtime_error("multi-machine Gloo is not supported yet (MASTER_ADDR=" + env.masterAddr + ")");
            comm->m_backend = detail::makeGlooBackend(comm->m_store, env.rank, env.worldSize, options.timeout, bindAddress);
            comm->m_bindAddress = bindAddress;
            break;
        }
        case BackendKind::Nccl:
#ifdef SHARDSCOPE_HAVE_NCCL
            comm->m_device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(env.localRank));
            comm->m_backend = detail::makeNcclBackend(comm->m_store, env.rank, env.worldSize, options.timeout, env.localRank);
            break;
#else
            throw std::runtime_error("this build of shardscope-worker has no NCCL support "
                                     "(configure with a CUDA build of torch and SHARDSCOPE_WITH_NCCL=ON)");
#endif
        }
    } catch (const std::runtime_error&) {
        throw;
    } catch (const std::exception& e) {
        throw std::runtime_error(std::string("creating the ") + backendName(options.backend)
                                 + " process group failed: " + e.what());
    }
    return comm;
}

Communicator::~Communicator() = default;

namespace {

std::string dtypeName(c10::ScalarType type)
{
    switch (type) {
    case c10::kFloat:
        return "float32";
    case c10::kBFloat16:
        return "bfloat16";
    case c10::kHalf:
        return "float16";
    case c10::kDouble:
        return "float64";
    case c10::kLong:
        return "int64";
    case c10::kInt:
        return "int32";
    case c10::kByte:
        return "uint8";
    default:
        return c10::toString(type);
    }
}

[[noreturn]] void holdForever(const std::string& group, std::int64_t seq)
{
    std::cerr << "shardscope-worker: fault injection: not issuing collective #" << seq << " of " << group
              << "; holding until stopped" << std::endl;
    for (;;)
        std::this_thread::sleep_for(std::chrono::hours(1));
}

} // namespace

// Every collective is numbered in its group and recorded where the heartbeat can see whether it
// completed, and a hang's report what each rank issued.
template <typename IssueFn>
c10::intrusive_ptr<c10d::Work> Communicator::recorded(const char* kind, const at::Tensor* input, IssueFn&& issue)
{
    const std::int64_t seq = ++m_lastSeq;
    if (isSkippedCollective(m_name, seq))
        holdForever(m_name, seq);
    c10::intrusive_ptr<c10d::Work> work = issue();
    FlightRecorder::Issue what{&m_name, seq, kind, input ? static_cast<std::int64_t>(input->nbytes()) : 0,
                               input ? dtypeName(input->scalar_type()) : std::string()};
    FlightRecorder::instance().issued(what, work);
    return work;
}

c10::intrusive_ptr<c10d::Work> Communicator::allreduce(at::Tensor& tensor, c10d::ReduceOp op)
{
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions opts;
    opts.reduceOp = op;
    opts.timeout = m_timeout;
    return recorded("all_reduce", &tensor, [&] { return m_backend->allreduce(tensors, opts); });
}

c10::intrusive_ptr<c10d::Work> Communicator::allGatherSingle(at::Tensor& output, at::Tensor& input)
{
    c10d::AllgatherOptions opts;
    opts.timeout = m_timeout;
    // `_allgather_base` exists from 2.11 through 2.14 (2.14's canonical name is all_gather_single).
    return recorded("all_gather", &input, [&] { return m_backend->_allgather_base(output, input, opts); });
}

c10::intrusive_ptr<c10d::Work> Communicator::reduceScatterSingle(at::Tensor& output, at::Tensor& input, c10d::ReduceOp op)
{
    c10d::ReduceScatterOptions opts;
    opts.reduceOp = op;
    opts.timeout = m_timeout;
    return recorded("reduce_scatter", &input, [&] { return m_backend->_reduce_scatter_base(output, input, opts); });
}

c10::intrusive_ptr<c10d::Work> Communicator::broadcast(at::Tensor& tensor, int rootRank)
{
    std::vector<at::Tensor> tensors{tensor};
    c10d::BroadcastOptions opts;
    opts.rootRank = rootRank;
    opts.timeout = m_timeout;
    return recorded("broadcast", &tensor, [&] { return m_backend->broadcast(tensors, opts); });
}

c10::intrusive_ptr<c10d::Work> Communicator::scatter(at::Tensor& output, const std::vector<at::Tensor>& inputs, int rootRank)
{
    std::vector<at::Tensor> outputs{output};
    std::vector<std::vector<at::Tensor>> inputLists;
    if (m_rank == rootRank)
        inputLists.push_back(inputs);
    c10d::ScatterOptions opts;
    opts.rootRank = rootRank;
    opts.timeout = m_timeout;
    return recorded("scatter", &output, [&] { return m_backend->scatter(outputs, inputLists, opts); });
}

std::unique_ptr<Communicator> Communicator::subgroup(const std::string& name, const std::vector<int>& members) const
{
    const auto me = std::find(members.begin(), members.end(), m_rank);
    if (me == members.end())
        throw std::logic_error("subgroup " + name + ": rank " + std::to_string(m_rank) + " is not a member");
    std::unique_ptr<Communicator> group(new Communicator());
    group->m_name = name;
    group->m_rank = static_cast<int>(me - members.begin());
    group->m_size = static_cast<int>(members.size());
    group->m_kind = m_kind;
    group->m_device = m_device;
    group->m_timeout = m_timeout;
    group->m_rootStore = m_rootStore;
    group->m_bindAddress = m_bindAddress;
    group->m_store = c10::make_intrusive<c10d::PrefixStore>(name + "/", m_rootStore);
    switch (m_kind) {
    case BackendKind::Gloo:
        group->m_backend = detail::makeGlooBackend(group->m_store, group->m_rank, group->m_size, m_timeout, m_bindAddress);
        break;
    case BackendKind::Nccl:
#ifdef SHARDSCOPE_HAVE_NCCL
        group->m_backend = detail::makeNcclBackend(group->m_store, group->m_rank, group->m_size, m_timeout, m_device.index());
        break;
#else
        throw std::runtime_error("this build of shardscope-worker has no NCCL support");
#endif
    }
    return group;
}

void Communicator::barrier()
{
    c10d::BarrierOptions opts;
    opts.timeout = m_timeout;
    dist::waitFor(recorded("barrier", nullptr, [&] { return m_backend->barrier(opts); }));
}

} // namespace shardscope::dist
