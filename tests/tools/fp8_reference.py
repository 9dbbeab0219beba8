"""The fp8 recipes of engine/precision/float8_linear.h, op for op in PyTorch, for tst_float8.

Tensorwise dynamic scaling (torchao's "tensorwise" Float8Linear: each operand scaled by
fp8_max / amax of itself now) and delayed scaling (Transformer Engine's DelayedScaling, HYBRID:
each operand scaled from the amaxes of earlier calls). Forward: input and weight in e4m3;
backward: the output gradient in e5m2; the three matmuls through torch._scaled_mm.

    fp8_reference.py layer --inputs IN --outputs OUT [recipe options]
        IN holds x, weight, bias, grad; CALLS forward+backward calls (the delayed state evolves);
        OUT gets out_<k>, dx_<k>, dw_<k>, db_<k> per call.
    fp8_reference.py train --inputs IN --outputs OUT [recipe options]
        IN holds w0 b0 w1 b1 w2 b2 (fp32 masters), xs [steps, batch, in], ys [steps, batch, out];
        a 3-layer fp8 MLP (ReLU between), bf16 activations, MSE, SGD at --lr; OUT gets losses and
        the final weights.

convert_to_float8(model, options) applies the recipe to a whole model as Accelerate applies
torchao's (ddp_reference.py and hf_train_bench.py use it).
"""
import argparse
import types

import torch
from safetensors.torch import load_file, save_file

E4M3 = torch.float8_e4m3fn
E5M2 = torch.float8_e5m2
E4M3_MAX = float(torch.finfo(E4M3).max)
E5M2_MAX = float(torch.finfo(E5M2).max)


def amax_of(t):
    return t.detach().abs().max().to(torch.float32)


def scale_from_amax(amax, fp8_max):
    # torchao's amax_to_scale
    return (fp8_max / torch.clamp(amax.to(torch.float64), min=1e-12)).to(torch.float32)  # = reciprocal() * fp8_max


def quantize(t, scale, dtype, fp8_max):
    return (t.to(torch.float32) * scale).clamp(-fp8_max, fp8_max).to(dtype)


def column_major(t):
    return t.t().contiguous().t()


class DelayedScale:
    def __init__(self, options, fp8_max):
        self.options, self.fp8_max = options, fp8_max
        self.history, self.records = [], 0
        self.scale = torch.ones((), dtype=torch.float32)

    def record(self, amax):
        self.history.append(amax)
        if len(self.history) > self.options.history:
            self.history.pop(0)
        self.records += 1
        if self.records % self.options.interval != 0:
            return
        reduced = torch.stack(self.history).max() if self.options.algo == "max" else self.history[-1]
        fresh = (self.fp8_max / reduced) / (2.0 ** self.options.margin)  # Tensor.__rtruediv__: reciprocal() * fp8_max
        fresh = torch.where(reduced > 0.0, fresh, self.scale)
        self.scale = torch.where(torch.isfinite(reduced), fresh, self.scale).to(torch.float32)


class LayerState:
    def __init__(self, options):
        self.input = DelayedScale(options, E4M3_MAX)
        self.weight = DelayedScale(options, E4M3_MAX)
        self.grad_output = DelayedScale(options, E5M2_MAX)


def scale_for(t, delayed, fp8_max):
    if delayed is None:
        return scale_from_amax(amax_of(t), fp8_max)
    scale = delayed.scale
    delayed.record(amax_of(t))
    return scale


class Float8Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, state):
        x = input.reshape(-1, input.shape[-1]).contiguous()
        x_scale = scale_for(x, state.input if state else None, E4M3_MAX)
        w_scale = scale_for(weight, state.weight if state else None, E4M3_MAX)
        x8 = quantize(x, x_scale, E4M3, E4M3_MAX)
        w8 = quantize(weight, w_scale, E4M3, E4M3_MAX)
        out = torch._scaled_mm(x8, w8.t(), x_scale.reciprocal(), w_scale.reciprocal(), out_dtype=input.dtype)
        if bias is not None:
            out = out + bias.to(out.dtype)
        ctx.save_for_backward(x8, w8, x_scale, w_scale)
        ctx.state, ctx.input_dtype, ctx.weight_dtype = state, input.dtype, weight.dtype
        ctx.has_bias = bias is not None
        ctx.shape = list(input.shape[:-1]) + [weight.shape[0]]
        return out.reshape(ctx.shape)

    @staticmethod
    def backward(ctx, grad):
        x8, w8, x_scale, w_scale = ctx.saved_tensors
        state = ctx.state
        g = grad.reshape(-1, w8.shape[0]).contiguous()
        g_scale = scale_for(g, state.grad_output if state else None, E5M2_MAX)
        g8 = quantize(g, g_scale, E5M2, E5M2_MAX)
        dx = torch._scaled_mm(g8, column_major(w8), g_scale.reciprocal(), w_scale.reciprocal(), out_dtype=ctx.input_dtype)
        dw = torch._scaled_mm(g8.t().contiguous(), column_major(x8), g_scale.reciprocal(), x_scale.reciprocal(),
                              out_dtype=ctx.weight_dtype)
        db = g.to(torch.float32).sum(0).to(ctx.weight_dtype) if ctx.has_bias else None
        return dx.reshape(ctx.shape[:-1] + [x8.shape[1]]), dw, db, None


def state_of(options):
    return LayerState(options) if options.recipe == "delayed" else None


def float8_forward(self, x):
    """torchao's Float8Linear.forward around the fp8 matmuls (the engine's precision::Float8Layer):
    the input cast to the autocast dtype where autocast is on, the bias added in the output's dtype."""
    if not self.training and not self.fp8_in_eval:
        return torch.nn.functional.linear(x, self.weight, self.bias)
    device = x.device.type
    if torch.is_autocast_enabled(device):
        x = x.to(torch.get_autocast_dtype(device))
    out = Float8Linear.apply(x, self.weight, None, self.fp8_state)
    return out + self.bias.to(out.dtype) if self.bias is not None else out


def convert_to_float8(model, options):
    """accelerate.utils.ao.filter_linear_layers: every nn.Linear but the first and the last (in
    named_modules order), with both dimensions divisible by 16, runs in fp8. Returns their names."""
    linears = [(n, m) for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    converted = []
    for i, (name, m) in enumerate(linears):
        if i == 0 or i + 1 == len(linears) or m.in_features % 16 or m.out_features % 16:
            continue
        m.fp8_state = state_of(options)
        m.fp8_in_eval = options.recipe == "tensorwise"  # TE: use_autocast_during_eval off
        m.forward = types.MethodType(float8_forward, m)
        converted.append(name)
    return converted


def layer(options):
    t = load_file(options.inputs)
    state = state_of(options)
    out = {}
    for k in range(options.calls):
        x = t["x"].clone().requires_grad_(True)
        w = t["weight"].clone().requires_grad_(True)
        b = t["bias"].clone().requires_grad_(True)
        y = Float8Linear.apply(x, w, b, state)
        y.backward(t["grad"])
        out.update({f"out_{k}": y.detach(), f"dx_{k}": x.grad, f"dw_{k}": w.grad, f"db_{k}": b.grad})
    save_file({k: v.contiguous() for k, v in out.items()}, options.outputs)


def train(options):
    t = load_file(options.inputs)
    params = [t[n].clone().requires_grad_(True) for n in ("w0", "b0", "w1", "b1", "w2", "b2")]
    states = [state_of(options) for _ in range(3)]
    losses = []
    for step in range(t["xs"].shape[0]):
        h = t["xs"][step].to(torch.bfloat16)
        for i in range(3):
            h = Float8Linear.apply(h, params[2 * i], params[2 * i + 1], states[i])
            if i < 2:
                h = torch.relu(h)
        loss = (h.to(torch.float32) - t["ys"][step]).pow(2).mean()
        loss.backward()
        with torch.no_grad():
            for p in params:
                p.sub_(p.grad * options.lr)
                p.grad = None
        losses.append(loss.detach())
    out = {"losses": torch.stack(losses)}
    out.update({n: p.detach() for n, p in zip(("w0", "b0", "w1", "b1", "w2", "b2"), params)})
    save_file(out, options.outputs)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["layer", "train"])
    parser.add_argument("--inputs", required=True)
    parser.add_argument("--outputs", required=True)
    parser.add_argument("--recipe", choices=["tensorwise", "delayed"], default="tensorwise")
    parser.add_argument("--history", type=int, default=1024, help="amax_history_len")
    parser.add_argument("--algo", choices=["max", "most_recent"], default="most_recent", help="amax_compute_algo")
    parser.add_argument("--margin", type=int, default=0)
    parser.add_argument("--interval", type=int, default=1)
    parser.add_argument("--calls", type=int, default=1)
    parser.add_argument("--lr", type=float, default=0.05)
    options = parser.parse_args()
    torch.set_num_threads(1)
    (layer if options.command == "layer" else train)(options)


if __name__ == "__main__":
    main()
