#pragma once

// Forward hooks for C++ modules. Python's nn.Module has register_forward_pre_hook and
// register_forward_hook, which is how FSDP gathers a unit's parameters before it runs and releases
// them afterwards without the model knowing; libtorch's C++ modules have none. So the modules a
// wrap policy can name run their forward through ForwardHooks::call, and parallelism registers
// hooks there after the model is built. Without hooks, call() is just the body.
//
// Besides pre- and post-hooks, one "around" function may take over running the body itself
// (activation checkpointing runs it without saving activations and again in backward); it is
// given the body's input and the body, and must return what the body returns.

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <vector>

namespace shardscope::models {

class ForwardHooks {
public:
    using PreHook = std::function<void()>;
    using PostHook = std::function<at::Tensor(const at::Tensor& output)>;
    using Body = std::function<at::Tensor(const at::Tensor& input)>;
    using Around = std::function<at::Tensor(const at::Tensor& input, const Body& body)>;

    void addPreHook(PreHook hook) { m_pre.push_back(std::move(hook)); }
    void addPostHook(PostHook hook) { m_post.push_back(std::move(hook)); }
    void setAround(Around around) { m_around = std::move(around); }
    void clear()
    {
        m_pre.clear();
        m_post.clear();
        m_around = nullptr;
    }

    // body: at::Tensor(const at::Tensor& input). It must compute from `input` alone (and the
    // module's parameters) and capture nothing that dies with the call (capture `this` and values,
    // not loop variables by reference): an Around function may keep it and run it again in backward.
    template <typename BodyFn>
    at::Tensor call(const at::Tensor& input, BodyFn&& body)
    {
        for (auto& hook : m_pre)
            hook();
        at::Tensor output = m_around ? m_around(input, Body(body)) : body(input);
        for (auto& hook : m_post)
            output = hook(output);
        return output;
    }

private:
    std::vector<PreHook> m_pre;
    std::vector<PostHook> m_post;
    Around m_around;
};

} // namespace shardscope::models
