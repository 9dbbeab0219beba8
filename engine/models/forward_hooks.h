#pragma once

// Forward hooks for C++ modules. Python's nn.Module has register_forward_pre_hook and
// register_forward_hook, which is how FSDP gathers a unit's parameters before it runs and releases
// them afterwards without the model knowing; libtorch's C++ modules have none. So the modules a
// wrap policy can name run their forward through ForwardHooks::call, and parallelism registers
// hooks there after the model is built. Without hooks, call() is just the body.

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <vector>

namespace shardscope::models {

class ForwardHooks {
public:
    using PreHook = std::function<void()>;
    using PostHook = std::function<at::Tensor(const at::Tensor& output)>;

    void addPreHook(PreHook hook) { m_pre.push_back(std::move(hook)); }
    void addPostHook(PostHook hook) { m_post.push_back(std::move(hook)); }
    void clear()
    {
        m_pre.clear();
        m_post.clear();
    }

    template <typename Body>
    at::Tensor call(Body&& body)
    {
        for (auto& hook : m_pre)
            hook();
        at::Tensor output = body();
        for (auto& hook : m_post)
            output = hook(output);
        return output;
    }

private:
    std::vector<PreHook> m_pre;
    std::vector<PostHook> m_post;
};

} // namespace shardscope::models
