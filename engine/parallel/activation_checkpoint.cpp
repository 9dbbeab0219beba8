#include "engine/parallel/activation_checkpoint.h"

#include "engine/precision/autocast.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>

#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>

namespace shardscope::parallel {

namespace {

// The default generators' states (the CPU one, and the input's device's when it is not the CPU),
// taken before the first run and put back around the recomputation, then restored: Python's
// checkpoint does the same with torch.random.fork_rng, so dropout masks are identical.
class RngState {
public:
    explicit RngState(c10::Device device)
    {
        m_states.push_back(capture(c10::Device(c10::kCPU)));
        if (!device.is_cpu())
            m_states.push_back(capture(device));
    }

    // Sets the captured states for this object's lifetime.
    class Fork {
    public:
        explicit Fork(const RngState& saved)
        {
            for (const auto& [device, state] : saved.m_states) {
                m_previous.push_back(capture(device));
                set(device, state);
            }
        }
        ~Fork()
        {
            for (const auto& [device, state] : m_previous)
                set(device, state);
        }
        Fork(const Fork&) = delete;
        Fork& operator=(const Fork&) = delete;

    private:
        std::vector<std::pair<c10::Device, at::Tensor>> m_previous;
    };

private:
    static std::pair<c10::Device, at::Tensor> capture(c10::Device device)
    {
        at::Generator generator = at::globalContext().defaultGenerator(device);
        std::lock_guard<std::mutex> lock(generator.mutex());
        return {device, generator.get_state()};
    }
    static void set(c10::Device device, const at::Tensor& state)
    {
        at::Generator generator = at::globalContext().defaultGenerator(device);
        std::lock_guard<std::mutex> lock(generator.mutex());
        generator.set_state(state);
    }

    std::vector<std::pair<c10::Device, at::Tensor>> m_states;
};

// Autocast is thread-local and backward may run on another thread (the CUDA device threads), so
// the recomputation sets explicitly what the first run had, for the devices autocast knows here.
struct AutocastState {
    struct Entry {
        c10::DeviceType device;
        bool enabled;
        c10::ScalarType dtype;
    };
    std::vector<Entry> entries;

    static AutocastState capture()
    {
        AutocastState s;
        for (c10::DeviceType device : {c10::DeviceType::CPU, c10::DeviceType::CUDA})
            s.entries.push_back({device, at::autocast::is_autocast_enabled(device), at::autocast::get_autocast_dtype(device)});
        return s;
    }
};

class CheckpointBackward : public torch::autograd::Node {
public:
    CheckpointBackward(models::ForwardHooks::Body body, at::Tensor input, RngState rng, AutocastState autocast)
        : m_body(std::move(body)), m_input(std::move(input)), m_inputRequiresGrad(m_input.requires_grad()), m_rng(std::move(rng)),
          m_autocast(std::move(autocast))
    {
    }

    std::string name() const override { return "shardscope::CheckpointBackward"; }

    torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override
    {
        if (!m_body)
            throw std::runtime_error("activation checkpointing: backward through a checkpointed unit ran twice; "
                                     "the recomputation's graph is not kept (retain_graph is not supported)");
        at::Tensor input = m_input.detach();
        input.requires_grad_(m_inputRequiresGrad);
        at::Tensor output;
        {
            RngState::Fork fork(m_rng);
            std::vector<std::unique_ptr<precision::AutocastGuard>> autocast;
            for (const auto& e : m_autocast.entries)
                autocast.push_back(std::make_unique<precision::AutocastGuard>(e.device, e.dtype, e.enabled));
            at::AutoGradMode gradOn(true);
            output = m_body(input);
        }
        if (output.requires_grad() && grads[0].defined())
            torch::autograd::backward({output}, {grads[0]});
        at::Tensor inputGrad = m_inputRequiresGrad ? input.grad() : at::Tensor();
        release_variables();
        return {inputGrad};
    }

    void release_variables() override
    {
        m_body = nullptr;
        m_input.reset();
    }

private:
    models::ForwardHooks::Body m_body;
    at::Tensor m_input;
    bool m_inputRequiresGrad;
    RngState m_rng;
    AutocastState m_autocast;
};

// torch 2.14 holds autograd nodes in c10::intrusive_ptr, torch up to 2.11 (the GPU machine's) in
// std::shared_ptr: make the node in whichever the installed torch's edges hold.
using NodeHandle = decltype(torch::autograd::Edge::function);

template <typename NodeType, typename... Args>
NodeHandle makeNode(Args&&... args)
{
    if constexpr (std::is_same_v<NodeHandle, std::shared_ptr<torch::autograd::Node>>)
        return std::make_shared<NodeType>(std::forward<Args>(args)...);
    else
        return c10::make_intrusive<NodeType>(std::forward<Args>(args)...);
}

} // namespace

at::Tensor checkpointed(const at::Tensor& input, const models::ForwardHooks::Body& body)
{
    if (!at::GradMode::is_enabled())
        return body(input);
    RngState rng(input.device());
    AutocastState autocast = AutocastState::capture();
    at::Tensor output;
    {
        at::NoGradGuard noGrad;
        output = body(input);
        if (output.is_view())
            output = output.clone(); // a fresh tensor can take a gradient function; a view made without grad cannot
    }
    NodeHandle node = makeNode<CheckpointBackward>(body, input, std::move(rng), std::move(autocast));
    node->set_next_edges(torch::autograd::collect_next_edges(input));
    torch::autograd::create_gradient_edge(output, std::move(node));
    return output;
}

} // namespace shardscope::parallel
