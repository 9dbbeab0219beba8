#pragma once

// A rank's connection to the others: the TCPStore rendezvous and one c10d backend (Gloo on CPU,
// NCCL on CUDA). Collectives are called on c10d::Backend directly, the shortest path from C++
// (../shared/refs/libtorch-engine-ground.md §1.3); this class is the one place that knows which
// c10d names exist in which torch version.

#include "engine/common/dist_env.h"
#include "engine/common/backend_kind.h"

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>
#include <string>

namespace shardscope::dist {

struct CommunicatorOptions {
    BackendKind backend = BackendKind::Gloo;
    // How long rendezvous and each collective may take before the rank gives up.
    std::chrono::milliseconds timeout = std::chrono::minutes(5);
};

class Communicator {
public:
    // Joins the job described by `env`: rank 0 serves the TCPStore, every rank builds the backend.
    // Throws std::runtime_error with a readable message when the rendezvous or backend fails.
    static std::unique_ptr<Communicator> connect(const DistEnv& env, const CommunicatorOptions& options);

    ~Communicator();
    Communicator(const Communicator&) = delete;
    Communicator& operator=(const Communicator&) = delete;

    int rank() const { return m_rank; }
    int size() const { return m_size; }
    BackendKind backendKind() const { return m_kind; }
    // Where this rank's tensors for collectives live: cpu for Gloo, cuda:LOCAL_RANK for NCCL.
    c10::Device device() const { return m_device; }

    c10::intrusive_ptr<c10d::Work> allreduce(at::Tensor& tensor, c10d::ReduceOp op = c10d::ReduceOp::SUM);
    // Gathers every rank's `input` into `output` (size() times as large), in rank order.
    c10::intrusive_ptr<c10d::Work> allGatherSingle(at::Tensor& output, at::Tensor& input);
    // Reduces `input` (size() times as large as `output`) over ranks; rank r keeps chunk r.
    c10::intrusive_ptr<c10d::Work> reduceScatterSingle(at::Tensor& output, at::Tensor& input,
                                                       c10d::ReduceOp op = c10d::ReduceOp::SUM);
    c10::intrusive_ptr<c10d::Work> broadcast(at::Tensor& tensor, int rootRank);
    // Rank `rootRank`'s `inputs[r]` (one per rank; ignored elsewhere) into rank r's `output`.
    c10::intrusive_ptr<c10d::Work> scatter(at::Tensor& output, const std::vector<at::Tensor>& inputs, int rootRank);
    void barrier();

    // A process group of some of this group's ranks (`members`, by rank here; this rank among
    // them), named uniquely by `name` (its store keys live under it). Only the members call it.
    std::unique_ptr<Communicator> subgroup(const std::string& name, const std::vector<int>& members) const;

    const c10::intrusive_ptr<c10d::Backend>& backend() const { return m_backend; }
    const c10::intrusive_ptr<c10d::Store>& store() const { return m_store; }

    // The group's name: "default_pg" for the job's, the name given to subgroup() otherwise.
    const std::string& name() const { return m_name; }

private:
    Communicator() = default;
    // Numbers the collective within this group, issues it (`issue` returns its Work) and records
    // it in the flight recorder with `input`'s size and dtype.
    template <typename IssueFn>
    c10::intrusive_ptr<c10d::Work> recorded(const char* kind, const at::Tensor* input, IssueFn&& issue);

    std::string m_name = "default_pg";
    std::int64_t m_lastSeq = 0;

    int m_rank = 0;
    int m_size = 1;
    BackendKind m_kind = BackendKind::Gloo;
    c10::Device m_device = c10::Device(c10::kCPU);
    std::chrono::milliseconds m_timeout{0};
    c10::intrusive_ptr<c10d::Store> m_store;
    c10::intrusive_ptr<c10d::Backend> m_backend;
    c10::intrusive_ptr<c10d::Store> m_rootStore; // the TCP store that groups' prefixes share
    std::string m_bindAddress; // Gloo's listening address
};

} // namespace shardscope::dist
