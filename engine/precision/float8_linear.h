#pragma once

// fp8 linear layers: y = x·Wᵀ + b with its three matmuls in fp8 through torch._scaled_mm, on the
// two recipes Accelerate's fp8_config exposes:
//   - tensorwise dynamic scaling (torchao's "tensorwise" Float8Linear, Accelerate's AO backend):
//     every call scales each operand by fp8_max / amax of that operand now;
//   - delayed scaling (Transformer Engine's DelayedScaling, fp8_format HYBRID): each operand is
//     scaled from the amaxes of earlier calls (a history of amax_history_len, reduced by
//     amax_compute_algo "max" or "most_recent", scale = fp8_max / amax / 2^margin, recomputed every
//     `interval` calls), and this call's amax joins the history.
// Forward: input and weight in e4m3; backward: the output gradient in e5m2 against the e4m3
// weight (input gradient) and the e4m3 input (weight gradient). _scaled_mm dequantizes into the
// input's dtype (output, input gradient) and the weight's (weight gradient: the fp32 master's).
// The same steps, op for op, are in tests/tools/fp8_reference.py, which the tests hold this to.
// _scaled_mm runs on the CPU too (slowly: emulated), so all of it is tested without a GPU.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace shardscope::precision {

// Named tensors as checkpoints hold them.
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

struct DelayedScalingOptions {
    std::int64_t amaxHistoryLen = 1024; // fp8_config.amax_history_len
    bool amaxComputeMax = false; // amax_compute_algo: "max" (true) or "most_recent" (false)
    int margin = 0; // fp8_config.margin: the scale is divided by 2^margin
    std::int64_t interval = 1; // fp8_config.interval: calls between scale updates
};

// One operand's scale under delayed scaling.
class DelayedScale {
public:
    DelayedScale(const DelayedScalingOptions& options, double fp8Max);
    const at::Tensor& scale() const { return m_scale; } // fp32, 0-dim; 1 until the first update
    // This call's amax joins the history; every `interval` records the scale is recomputed.
    void record(const at::Tensor& amax);
    std::int64_t bytes() const; // the scale and the history
    void moveTo(const c10::Device& device);
    // For checkpoints: <prefix>amax_history, <prefix>scale and <prefix>records (the calls so far,
    // which place the next amax in the ring and time the next update), on the CPU; and back. A
    // history of another length throws, naming amax_history_len.
    void appendState(const std::string& prefix, NamedTensors& out) const;
    void restoreState(const std::string& prefix, const std::map<std::string, at::Tensor>& from);

private:
    DelayedScalingOptions m_options;
    double m_fp8Max;
    // A ring of amaxHistoryLen fp32 amaxes, zeros until written (as Transformer Engine keeps it):
    // amaxes are never negative, so the zeros change no "max".
    at::Tensor m_history;
    std::int64_t m_records = 0;
    at::Tensor m_scale;
};

// A layer's scales under delayed scaling: its input, its weight, its output gradient.
struct Float8LinearState {
    explicit Float8LinearState(const DelayedScalingOptions& options);
    DelayedScale input;
    DelayedScale weight;
    DelayedScale gradOutput;
    std::int64_t bytes() const { return input.bytes() + weight.bytes() + gradOutput.bytes(); }
    // <prefix>input.*, <prefix>weight.*, <prefix>grad_output.* (DelayedScale::appendState).
    void appendState(const std::string& prefix, NamedTensors& out) const;
    void restoreState(const std::string& prefix, const std::map<std::string, at::Tensor>& from);
};

// A weight already in e4m3 with its tensorwise scale: what an fp8 all-gather delivers
// (parallel/sharded.cpp), so that the layer does not quantize the weight again.
struct Float8Weight {
    at::Tensor data; // float8_e4m3fn, the weight's shape
    at::Tensor scale; // fp32, 0-dim: data = saturate(weight * scale)
};

// `input` [..., in], `weight` [out, in], `bias` [out] or undefined. `state` null: tensorwise
// dynamic scaling; else delayed scaling with that state (it must outlive the backward pass).
// `quantized` (tensorwise only): the weight's e4m3 form to use instead of quantizing `weight`,
// which then only receives the gradient.
at::Tensor float8Linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias, Float8LinearState* state,
                        const Float8Weight* quantized = nullptr);

// torchao's to_fp8_saturated for e4m3: (t · scale) clamped to ±448, cast to float8_e4m3fn.
at::Tensor quantizeE4m3(const at::Tensor& t, const at::Tensor& scale);

// torchao's amax_to_scale: fp8_max / max(amax, 1e-12), computed in float64, kept in float32.
at::Tensor scaleFromAmax(const at::Tensor& amax, double fp8Max);

// One model layer in fp8, as torchao's Float8Linear.forward runs it around the fp8 matmuls: the
// input cast to the autocast dtype where autocast is on (the master weight is quantized from
// fp32), the bias added afterwards in the output's dtype. Delayed scaling gives the layer a state
// of its own. Not used for evaluation unless `inEval` (TE's use_autocast_during_eval).
class Float8Layer {
public:
    Float8Layer(bool delayed, const DelayedScalingOptions& options, bool inEval);
    bool active(bool training) const { return training || m_inEval; }
    at::Tensor forward(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias);
    std::int64_t stateBytes() const { return m_state ? m_state->bytes() : 0; }
    bool tensorwise() const { return !m_state; }
    // Delayed scaling's state, the one part of an fp8 layer a checkpoint must carry for an exact
    // resume (tensorwise scaling has none: it appends nothing).
    Float8LinearState* delayedState() const { return m_state.get(); }
    // fp8 all-gather: the forwards until clearGatheredWeight use this e4m3 weight (it must be
    // the weight's tensorwise quantization, as its scale from the whole weight's amax).
    void setGatheredWeight(Float8Weight weight) { m_gathered = std::move(weight); }
    void clearGatheredWeight() { m_gathered = {}; }

private:
    std::unique_ptr<Float8LinearState> m_state; // null: tensorwise
    bool m_inEval;
    Float8Weight m_gathered; // undefined data: quantize the weight in each forward
};

double e4m3Max(); // 448
double e5m2Max(); // 57344

} // namespace shardscope::precision
