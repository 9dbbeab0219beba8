#include "engine/precision/float8_linear.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace shardscope::precision {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor amaxOf(const at::Tensor& t) { return t.detach().abs().max().to(at::kFloat); }

// (t · scale) clamped to the format's range, cast: what torchao's to_fp8_saturated does.
at::Tensor quantize(const at::Tensor& t, const at::Tensor& scale, at::ScalarType fp8, double fp8Max)
{
    return (t.to(at::kFloat) * scale).clamp(-fp8Max, fp8Max).to(fp8);
}

// _scaled_mm wants its second operand column-major (cuBLASLt's layout; the CPU takes either).
at::Tensor columnMajor(const at::Tensor& t) { return t.t().contiguous().t(); }

// The scale for `t` and what recording it means: tensorwise derives it from t's amax now;
// delayed takes the state's, and t's amax joins that state's history.
at::Tensor scaleFor(const at::Tensor& t, DelayedScale* delayed, double fp8Max)
{
    if (!delayed)
        return scaleFromAmax(amaxOf(t), fp8Max);
    delayed->moveTo(t.device()); // made on the CPU; the first call says where the layer runs
    at::Tensor scale = delayed->scale();
    delayed->record(amaxOf(t));
    return scale;
}

class Float8LinearFunction : public torch::autograd::Function<Float8LinearFunction> {
public:
    // `weight8`, `weight8Scale`: the weight already quantized (an fp8 all-gather's), or empty.
    static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                              const at::Tensor& weight8, const at::Tensor& weight8Scale, Float8LinearState* state)
    {
        const auto inFeatures = input.size(-1);
        const at::Tensor x = input.reshape({-1, inFeatures}).contiguous();
        const at::Tensor xScale = scaleFor(x, state ? &state->input : nullptr, e4m3Max());
        const bool given = weight8.numel() > 0;
        const at::Tensor wScale = given ? weight8Scale : scaleFor(weight, state ? &state->weight : nullptr, e4m3Max());
        const at::Tensor x8 = quantize(x, xScale, at::kFloat8_e4m3fn, e4m3Max());
        const at::Tensor w8 = given ? weight8 : quantize(weight, wScale, at::kFloat8_e4m3fn, e4m3Max());
        at::Tensor out = at::_scaled_mm(x8, w8.t(), xScale.reciprocal(), wScale.reciprocal(), {}, {}, input.scalar_type());
        const bool hasBias = bias.numel() > 0; // see float8Linear
        if (hasBias)
            out = out + bias.to(out.scalar_type());
        ctx->save_for_backward({x8, w8, xScale, wScale});
        ctx->saved_data["state"] = reinterpret_cast<std::int64_t>(state);
        ctx->saved_data["input_dtype"] = static_cast<std::int64_t>(input.scalar_type());
        ctx->saved_data["weight_dtype"] = static_cast<std::int64_t>(weight.scalar_type());
        ctx->saved_data["has_bias"] = hasBias;
        std::vector<std::int64_t> shape = input.sizes().vec();
        shape.back() = weight.size(0);
        ctx->saved_data["shape"] = shape;
        return out.reshape(shape);
    }

    static variable_list backward(AutogradContext* ctx, variable_list grads)
    {
        const auto saved = ctx->get_saved_variables();
        const at::Tensor& x8 = saved[0];
        const at::Tensor& w8 = saved[1];
        const at::Tensor& xScale = saved[2];
        const at::Tensor& wScale = saved[3];
        auto* state = reinterpret_cast<Float8LinearState*>(ctx->saved_data["state"].toInt());
        const auto inputDtype = static_cast<at::ScalarType>(ctx->saved_data["input_dtype"].toInt());
        const auto weightDtype = static_cast<at::ScalarType>(ctx->saved_data["weight_dtype"].toInt());
        const at::Tensor g = grads[0].reshape({-1, w8.size(0)}).contiguous();
        const at::Tensor gScale = scaleFor(g, state ? &state->gradOutput : nullptr, e5m2Max());
        const at::Tensor g8 = quantize(g, gScale, at::kFloat8_e5m2, e5m2Max());
        // dX = dY · W, dW = dYᵀ · X, both from the fp8 operands.
        at::Tensor gradInput = at::_scaled_mm(g8, columnMajor(w8), gScale.reciprocal(), wScale.reciprocal(), {}, {}, inputDtype);
        at::Tensor gradWeight = at::_scaled_mm(g8.t().contiguous(), columnMajor(x8), gScale.reciprocal(), xScale.reciprocal(), {},
                                               {}, weightDtype);
        std::vector<std::int64_t> inputShape = ctx->saved_data["shape"].toIntVector();
        inputShape.back() = x8.size(1);
        at::Tensor gradBias = ctx->saved_data["has_bias"].toBool() ? g.to(at::kFloat).sum(0).to(weightDtype) : at::Tensor();
        return {gradInput.reshape(inputShape), gradWeight, gradBias, at::Tensor(), at::Tensor(), at::Tensor()};
    }
};

} // namespace

double e4m3Max() { return static_cast<double>(std::numeric_limits<c10::Float8_e4m3fn>::max()); }
double e5m2Max() { return static_cast<double>(std::numeric_limits<c10::Float8_e5m2>::max()); }

at::Tensor scaleFromAmax(const at::Tensor& amax, double fp8Max)
{
    // max / t written as Python evaluates it (Tensor.__rtruediv__: reciprocal, then the product),
    // so that the scales are torchao's to the last bit.
    return (at::clamp(amax.to(at::kDouble), 1e-12).reciprocal() * fp8Max).to(at::kFloat);
}

DelayedScale::DelayedScale(const DelayedScalingOptions& options, double fp8Max)
    : m_options(options), m_fp8Max(fp8Max), m_history(at::zeros({options.amaxHistoryLen}, at::kFloat)),
      m_scale(at::ones({}, at::kFloat))
{
}

void DelayedScale::moveTo(const c10::Device& device)
{
    if (m_history.device() == device)
        return;
    m_history = m_history.to(device);
    m_scale = m_scale.to(device);
}

std::int64_t DelayedScale::bytes() const { return static_cast<std::int64_t>(m_history.nbytes() + m_scale.nbytes()); }

void DelayedScale::record(const at::Tensor& amax)
{
    const std::int64_t slot = m_records % m_options.amaxHistoryLen;
    m_history.select(0, slot).copy_(amax);
    if (++m_records % m_options.interval != 0)
        return;
    at::Tensor reduced = m_options.amaxComputeMax ? m_history.max() : m_history.select(0, slot).clone();
    // Transformer Engine's rule: keep the old scale where the amax is zero or not finite.
    at::Tensor fresh = (reduced.reciprocal() * m_fp8Max) / std::pow(2.0, m_options.margin); // as in scaleFromAmax
    fresh = at::where(reduced > 0.0, fresh, m_scale);
    m_scale = at::where(at::isfinite(reduced), fresh, m_scale).to(at::kFloat);
}

void DelayedScale::appendState(const std::string& prefix, NamedTensors& out) const
{
    out.emplace_back(prefix + "amax_history", m_history.to(at::kCPU).clone());
    out.emplace_back(prefix + "scale", m_scale.to(at::kCPU).clone());
    out.emplace_back(prefix + "records", at::scalar_tensor(m_records, at::kLong));
}

void DelayedScale::restoreState(const std::string& prefix, const std::map<std::string, at::Tensor>& from)
{
    auto take = [&](const std::string& key, at::ScalarType dtype, std::int64_t elements) {
        const auto it = from.find(prefix + key);
        if (it == from.end())
            throw std::runtime_error("has no " + prefix + key);
        const at::Tensor& t = it->second;
        if (key == "amax_history" && t.numel() != elements) // the one a user changes: fp8_config
            throw std::runtime_error("holds amax histories of " + std::to_string(t.numel())
                                     + " entries, this run's fp8_config.amax_history_len is " + std::to_string(elements)
                                     + ": resume with the checkpoint's fp8_config");
        if (t.scalar_type() != dtype || t.numel() != elements)
            throw std::runtime_error(prefix + key + " holds " + std::to_string(t.numel()) + " "
                                     + std::string(c10::toString(t.scalar_type())) + " values where this run keeps "
                                     + std::to_string(elements) + " " + std::string(c10::toString(dtype)));
        return t;
    };
    m_history.copy_(take("amax_history", at::kFloat, m_options.amaxHistoryLen).reshape(m_history.sizes()));
    m_scale = take("scale", at::kFloat, 1).reshape({}).to(m_scale.device()).clone();
    m_records = take("records", at::kLong, 1).item<std::int64_t>();
}

Float8LinearState::Float8LinearState(const DelayedScalingOptions& options)
    : input(options, e4m3Max()), weight(options, e4m3Max()), gradOutput(options, e5m2Max())
{
}

void Float8LinearState::appendState(const std::string& prefix, NamedTensors& out) const
{
    input.appendState(prefix + "input.", out);
    weight.appendState(prefix + "weight.", out);
    gradOutput.appendState(prefix + "grad_output.", out);
}

void Float8LinearState::restoreState(const std::string& prefix, const std::map<std::string, at::Tensor>& from)
{
    input.restoreState(prefix + "input.", from);
    weight.restoreState(prefix + "weight.", from);
    gradOutput.restoreState(prefix + "grad_output.", from);
}

at::Tensor float8Linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias, Float8LinearState* state,
                        const Float8Weight* quantized)
{
    if (quantized && state)
        throw std::invalid_argument("float8Linear: a pre-quantized weight is for tensorwise scaling only");
    if (quantized && !quantized->data.sizes().equals(weight.sizes()))
        throw std::invalid_argument("float8Linear: the pre-quantized weight's shape differs from the weight's");
    // Custom autograd functions take no undefined tensors: what is absent travels as an empty one.
    const at::Tensor none = at::empty({0}, weight.options());
    return Float8LinearFunction::apply(input, weight, bias.defined() ? bias : none, quantized ? quantized->data : none,
                                       quantized ? quantized->scale : none, state);
}

at::Tensor quantizeE4m3(const at::Tensor& t, const at::Tensor& scale)
{
    return quantize(t, scale, at::kFloat8_e4m3fn, e4m3Max());
}

Float8Layer::Float8Layer(bool delayed, const DelayedScalingOptions& options, bool inEval)
    : m_state(delayed ? std::make_unique<Float8LinearState>(options) : nullptr), m_inEval(inEval)
{
}

at::Tensor Float8Layer::forward(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias)
{
    const c10::DeviceType device = input.device().type();
    const at::Tensor x = at::autocast::is_autocast_enabled(device) ? input.to(at::autocast::get_autocast_dtype(device)) : input;
    at::Tensor out = float8Linear(x, weight, at::Tensor(), m_state.get(), m_gathered.data.defined() ? &m_gathered : nullptr);
    return bias.defined() ? out + bias.to(out.scalar_type()) : out;
}

} // namespace shardscope::precision
