#pragma once

// Where a NaN or an Inf began: the probe watches the output of every module a wrap policy can name
// (the model's blocks or layers) and the model's output, in forward, and the gradient flowing into
// each of them, in backward. Each check is one float reduction kept as a tensor (no device sync,
// about 1/(24·width) of a block's compute); they are read only when the trainer finds the step's
// loss or gradient norm non-finite, and then name the first module, in the order the passes ran
// them, whose output (forward) or output gradient (backward) was non-finite on this rank.

#include <ATen/core/Tensor.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace shardscope::models {
class TrainableModel;
}

namespace shardscope::train {

class NonfiniteProbe {
public:
    // After parallelism has registered its own hooks: the probe's run after them.
    void attach(models::TrainableModel& model);
    // Forgets the last step's checks.
    void beginStep();
    // Off: no checks (one half of the overhead benchmark, scripts/bench-diagnostics.sh).
    void setEnabled(bool on) { m_enabled.store(on, std::memory_order_relaxed); }

    struct Origin {
        std::string module; // "h.3", "layers.0", or "the model's output"
        std::string pass; // "forward" or "backward"
    };
    // Reads the checks (a sync on a GPU): the first non-finite, forward before backward.
    std::optional<Origin> firstNonfinite();
    // One sentence for the step's report, whether or not a module was found.
    std::string describe(bool lossIsFinite);

private:
    struct Check {
        const std::string* module;
        at::Tensor sum; // 0-dim float: non-finite when a value was
    };
    void check(std::vector<Check>& into, const std::string* module, const at::Tensor& t);
    std::atomic<bool> m_enabled{true};
    std::vector<std::string> m_names; // reserved up front: the checks point into it
    std::mutex m_mutex; // backward hooks may run on autograd's device threads
    std::vector<Check> m_forward;
    std::vector<Check> m_backward;
};

// The module name the probe gives the model's own output (the root of the hooks).
inline constexpr const char* kModelOutputName = "the model's output";

} // namespace shardscope::train
