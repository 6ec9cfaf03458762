"""Pointwise lowerings: one table row per ATen overload, as the eager shim's
table (torchneuron/csrc/pointwise_ops.cpp) maps them.

A row names the runtime op, the dtype rule (how the compute dtype is
found, as in the shim), the positions of tensor operands and the scalar
attributes. The compiled op then reads the same operands in the same
dtypes as the eager kernel, so results agree bit for bit; the fuser in C
later chains these nodes into fused groups.
"""

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from torchneuron.compiler.ir import Immediate, Unsupported, View
from torchneuron.compiler.lowering import broadcast_to, fake, lowers

# Dtype rules (PointwiseDtypes in the shim).
ARITH, FLOAT, COMPARE, SAME, PREDICATE, SELECT = range(6)

REDUCED = (torch.float16, torch.bfloat16)
EXACT_IN_REDUCED = (torch.bool, torch.uint8, torch.int8)


def compute_dtype(rule, node, operands):
    """The dtype the op computes in, as the shim picks it."""
    out = node.meta["val"]
    out = out[0] if isinstance(out, (tuple, list)) else out
    if rule in (ARITH, FLOAT, SELECT):
        return out.dtype
    args = [fake(a) for a in operands if a is not None]
    if rule == COMPARE:
        _, result = elementwise_dtypes(*args, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)
        return result
    if rule in (SAME, PREDICATE):
        first = args[0]
        return first.dtype if isinstance(first, torch.Tensor) else out.dtype
    raise AssertionError(rule)


def emit_pointwise(ctx, node, code, rule, operand_args, scalars=(), exact_scalar=False,
                   select_from=None):
    """Lowers one pointwise call: operand_args are FX args (nodes, numbers
    or None) in the runtime's input order."""
    out_val = node.meta["val"]
    if not isinstance(out_val, torch.Tensor):
        raise Unsupported("a pointwise op with several results")
    compute = compute_dtype(rule, node, operand_args)
    shape = out_val.shape
    convert_from = 1 if rule == SELECT else 0  # where's mask keeps its dtype
    inputs = []
    for k, a in enumerate(operand_args):
        if isinstance(a, torch.fx.Node):
            f = fake(a)
            if not isinstance(f, torch.Tensor):
                raise Unsupported(f"{code}: operand {a.name} is not a tensor")
            if f.device.type != "neuron" and not (f.device.type == "cpu" and f.dim() == 0):
                raise Unsupported(f"{code}: operand on {f.device}")
            v = broadcast_to(ctx.operand(a), shape)
            # The CPU rounds inputs to a 16-bit common dtype before it
            # computes; the shim converts them on the device (round_like_cpu).
            if (rule in (ARITH, FLOAT, COMPARE) and compute in REDUCED and v.dtype != compute
                    and v.dtype not in EXACT_IN_REDUCED and not (exact_scalar and k == 1 and f.dim() == 0)):
                t = ctx.temp(compute, f.shape)
                ctx.emit("copy", [t], [ctx.operand(a)])
                v = broadcast_to(t, shape)
            inputs.append(v)
        elif isinstance(a, (bool, int, float)):
            dtype = compute if k >= convert_from else torch.bool
            if exact_scalar and k == 1 and compute in REDUCED:
                dtype = torch.float64 if isinstance(a, float) else (torch.bool if isinstance(a, bool) else torch.int64)
            inputs.append(Immediate(a, dtype))
        elif a is None:
            raise Unsupported(f"{code}: an absent operand")
        else:
            raise Unsupported(f"{code}: operand of type {type(a).__name__}")
    if not any(isinstance(v, View) for v in inputs):
        raise Unsupported(f"{code}: no tensor operand")
    out = ctx.result(node)
    if rule not in (COMPARE, PREDICATE) and compute in REDUCED and out.dtype != compute:
        t = ctx.temp(compute, shape)
        ctx.emit(code, [t], inputs, scalars, compute)
        ctx.emit("copy", [out], [t])
    else:
        ctx.emit(code, [out], inputs, scalars, compute)
    return out


def _row(names, code, rule, tensor_args, attrs=(), exact=False, prepare=None):
    """A table row: tensor_args are argument positions/names of operands,
    attrs (position, keyword, default) of scalar attributes."""

    def lower(ctx, node):
        args = list(node.args)
        kwargs = dict(node.kwargs)

        def arg(pos, key, default):
            if pos < len(args):
                return args[pos]
            return kwargs.get(key, default)

        operands = [arg(p, k, d) for p, k, d in tensor_args]
        scalars = [arg(p, k, d) for p, k, d in attrs]
        c = code
        if prepare is not None:
            c, operands, scalars = prepare(node, c, operands, scalars)
        for s in scalars:
            if not isinstance(s, (bool, int, float)) and s is not None:
                raise Unsupported(f"{c}: a scalar attribute of type {type(s).__name__}")
        return emit_pointwise(ctx, node, c, rule, operands, scalars, exact_scalar=exact)

    lowers(*names.split())(lower)


SELF = (0, "self", None)
OTHER = (1, "other", None)
ALPHA = (2, "alpha", 1)


def _sub(node, code, operands, scalars):
    return "add", operands, [-scalars[0]]


def _rsub(node, code, operands, scalars):
    return "add", [operands[1], operands[0]], [-scalars[0]]


def _div_mode(node, code, operands, scalars):
    mode = node.kwargs.get("rounding_mode", node.args[2] if len(node.args) > 2 else None)
    if mode is None:
        return "div", operands, []
    if mode == "trunc":
        return "div_trunc", operands, []
    if mode == "floor":
        return "div_floor", operands, []
    raise Unsupported(f"div rounding_mode {mode!r}")


def _gelu(node, code, operands, scalars):
    approx = node.kwargs.get("approximate", node.args[1] if len(node.args) > 1 else "none")
    if approx == "tanh":
        return "gelu_tanh", operands, []
    if approx != "none":
        raise Unsupported(f"gelu approximate={approx!r}")
    return "gelu", operands, []


def _gelu_backward(node, code, operands, scalars):
    approx = node.kwargs.get("approximate", node.args[2] if len(node.args) > 2 else "none")
    if approx == "tanh":
        return "gelu_tanh_backward", operands, []
    if approx != "none":
        raise Unsupported(f"gelu approximate={approx!r}")
    return "gelu_backward", operands, []


def _clamp(node, code, operands, scalars):
    x, lo, hi = operands
    if lo is None and hi is None:
        raise Unsupported("clamp without bounds")
    if hi is None:
        return "maximum", [x, lo], []
    if lo is None:
        return "minimum", [x, hi], []
    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)):
        return "hardtanh", [x], [lo, hi]
    raise Unsupported("clamp with mixed bounds")


def _where(node, code, operands, scalars):
    return "where", operands, []


def _masked_fill(node, code, operands, scalars):
    x, mask, value = operands
    return "where", [mask, value, x], []


_row("aten.add.Tensor aten.add.Scalar", "add", ARITH, [SELF, OTHER], [ALPHA])
_row("aten.sub.Tensor aten.sub.Scalar", "add", ARITH, [SELF, OTHER], [ALPHA], prepare=_sub)
_row("aten.rsub.Tensor aten.rsub.Scalar", "add", ARITH, [SELF, OTHER], [ALPHA], prepare=_rsub)
_row("aten.mul.Tensor aten.mul.Scalar", "mul", ARITH, [SELF, OTHER], exact=True)
_row("aten.div.Tensor aten.div.Scalar", "div", FLOAT, [SELF, OTHER], exact=True)
_row("aten.div.Tensor_mode aten.div.Scalar_mode", "div", FLOAT, [SELF, OTHER], exact=True,
     prepare=_div_mode)
_row("aten.floor_divide.default aten.floor_divide.Scalar", "div_floor", ARITH, [SELF, OTHER], exact=True)
_row("aten.remainder.Tensor aten.remainder.Scalar", "remainder", ARITH, [SELF, OTHER])
_row("aten.remainder.Scalar_Tensor", "remainder", ARITH, [SELF, OTHER])
_row("aten.fmod.Tensor aten.fmod.Scalar", "fmod", ARITH, [SELF, OTHER])
_row("aten.bitwise_left_shift.Tensor aten.__lshift__.Tensor aten.__lshift__.Scalar", "lshift", ARITH,
     [SELF, OTHER])
_row("aten.bitwise_right_shift.Tensor aten.__rshift__.Tensor aten.__rshift__.Scalar", "rshift", ARITH,
     [SELF, OTHER])
_row("aten.pow.Tensor_Tensor aten.pow.Tensor_Scalar", "pow", ARITH, [SELF, (1, "exponent", None)])
_row("aten.maximum.default", "maximum", ARITH, [SELF, OTHER])
_row("aten.minimum.default", "minimum", ARITH, [SELF, OTHER])
_row("aten.atan2.default", "atan2", FLOAT, [SELF, OTHER])
_row("aten.lerp.Scalar", "lerp", ARITH, [SELF, (1, "end", None)], [(2, "weight", None)])
_row("aten.lerp.Tensor", "lerp_tensor", SAME, [SELF, (1, "end", None), (2, "weight", None)])
_row("aten.addcmul.default", "addcmul", ARITH, [SELF, (1, "tensor1", None), (2, "tensor2", None)],
     [(3, "value", 1)])
_row("aten.addcdiv.default", "addcdiv", ARITH, [SELF, (1, "tensor1", None), (2, "tensor2", None)],
     [(3, "value", 1)])
_row("aten.clamp.default aten.clamp.Tensor", "clamp", ARITH,
     [SELF, (1, "min", None), (2, "max", None)], prepare=_clamp)
_row("aten.clamp_min.default aten.clamp_min.Tensor", "maximum", ARITH, [SELF, (1, "min", None)])
_row("aten.clamp_max.default aten.clamp_max.Tensor", "minimum", ARITH, [SELF, (1, "max", None)])
_row("aten.where.self", "where", SELECT, [(0, "condition", None), (1, "self", None), (2, "other", None)],
     prepare=_where)
_row("aten.masked_fill.Scalar aten.masked_fill.Tensor", "where", SELECT,
     [SELF, (1, "mask", None), (2, "value", None)], prepare=_masked_fill)

for _name, _code in [("neg", "neg"), ("abs", "abs"), ("sign", "sign"), ("sgn", "sign"),
                     ("floor", "floor"), ("ceil", "ceil"), ("round", "round"), ("trunc", "trunc"),
                     ("frac", "frac"), ("relu", "relu"), ("bitwise_not", "bitwise_not"),
                     ("silu", "silu"), ("mish", "mish"), ("hardswish", "hardswish"),
                     ("hardsigmoid", "hardsigmoid")]:
    _row(f"aten.{_name}.default", _code, SAME, [SELF])

for _name in ["reciprocal", "sqrt", "rsqrt", "exp", "exp2", "expm1", "log", "log2", "log10",
              "log1p", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
              "asinh", "acosh", "atanh", "erf", "erfc", "erfinv", "sigmoid"]:
    _row(f"aten.{_name}.default", _name, FLOAT, [SELF])

for _name in ["isnan", "isinf", "isposinf", "isneginf", "signbit", "logical_not"]:
    _row(f"aten.{_name}.default", _name, PREDICATE, [SELF])

for _name in ["eq", "ne", "lt", "le", "gt", "ge"]:
    _row(f"aten.{_name}.Tensor aten.{_name}.Scalar", _name, COMPARE, [SELF, OTHER])
for _name in ["logical_and", "logical_or", "logical_xor"]:
    _row(f"aten.{_name}.default", _name, COMPARE, [SELF, OTHER])
for _name in ["bitwise_and", "bitwise_or", "bitwise_xor"]:
    _row(f"aten.{_name}.Tensor aten.{_name}.Scalar", _name, ARITH, [SELF, OTHER])

def _nan_to_num(node, code, operands, scalars):
    # None means 0, the dtype's largest and lowest finite value (as the shim).
    dtype = fake(node.args[0]).dtype
    big = (torch.finfo(dtype).max, torch.finfo(dtype).min) if dtype.is_floating_point else (0.0, 0.0)
    defaults = (0.0, big[0], big[1])
    return code, operands, [float(d if v is None else v) for v, d in zip(scalars, defaults)]


_row("aten.nan_to_num.default", "nan_to_num", SAME, [SELF],
     [(1, "nan", None), (2, "posinf", None), (3, "neginf", None)], prepare=_nan_to_num)
_row("aten.gelu.default", "gelu", SAME, [SELF], prepare=_gelu)
_row("aten.gelu_backward.default", "gelu_backward", ARITH,
     [(0, "grad_output", None), (1, "self", None)], prepare=_gelu_backward)
_row("aten.silu_backward.default", "silu_backward", ARITH, [(0, "grad_output", None), (1, "self", None)])
_row("aten.sigmoid_backward.default", "sigmoid_backward", ARITH,
     [(0, "grad_output", None), (1, "output", None)])
_row("aten.tanh_backward.default", "tanh_backward", ARITH, [(0, "grad_output", None), (1, "output", None)])
_row("aten.threshold_backward.default", "threshold_backward", ARITH,
     [(0, "grad_output", None), (1, "self", None)], [(2, "threshold", 0)])
_row("aten.leaky_relu.default", "leaky_relu", SAME, [SELF], [(1, "negative_slope", 0.01)])
_row("aten.leaky_relu_backward.default", "leaky_relu_backward", ARITH,
     [(0, "grad_output", None), (1, "self", None)], [(2, "negative_slope", 0.01)])
_row("aten.hardtanh.default", "hardtanh", SAME, [SELF], [(1, "min_val", -1.0), (2, "max_val", 1.0)])
_row("aten.hardtanh_backward.default", "hardtanh_backward", ARITH,
     [(0, "grad_output", None), (1, "self", None)], [(2, "min_val", -1.0), (3, "max_val", 1.0)])
_row("aten.softplus.default", "softplus", SAME, [SELF], [(1, "beta", 1), (2, "threshold", 20)])
_row("aten.softplus_backward.default", "softplus_backward", ARITH,
     [(0, "grad_output", None), (1, "self", None)], [(2, "beta", 1), (3, "threshold", 20)])
_row("aten.silu_backward.default", "silu_backward", ARITH, [(0, "grad_output", None), (1, "self", None)])
_row("aten.mish_backward.default", "mish_backward", ARITH, [(0, "grad_output", None), (1, "self", None)])
_row("aten.hardswish_backward.default", "hardswish_backward", ARITH,
     [(0, "grad_output", None), (1, "self", None)])
_row("aten.hardsigmoid_backward.default", "hardsigmoid_backward", ARITH,
     [(0, "grad_output", None), (1, "self", None)])
