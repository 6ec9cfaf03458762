"""ALU ops and activation functions: instruction operands and nl functions.

``nl.add``, ``nl.exp``, ... are both the op codes that ``nki.isa`` calls take
(``nisa.tensor_tensor(dst, a, b, op=nl.add)``) and the ``nl`` conveniences
that return a new tile (``nl.add(a, b)``). The codes are ``nrt_nc_alu`` and
``nrt_nc_act`` of neuronrt/nc.h.
"""

ALU_CODES = {
    "bypass": 0, "add": 1, "subtract": 2, "multiply": 3, "divide": 4, "maximum": 5,
    "minimum": 6, "power": 7, "abs_max": 8, "mod": 9, "equal": 10, "not_equal": 11,
    "greater": 12, "greater_equal": 13, "less": 14, "less_equal": 15, "logical_and": 16,
    "logical_or": 17, "logical_xor": 18, "bitwise_and": 19, "bitwise_or": 20,
    "bitwise_xor": 21, "left_shift": 22, "right_shift": 23,
    "abs_min": 24, "fmod": 25,
}

ACTIVATION_CODES = {
    "copy": 0, "exp": 1, "log": 2, "tanh": 3, "sigmoid": 4, "relu": 5, "gelu": 6,
    "gelu_apprx_tanh": 7, "silu": 8, "softplus": 9, "sqrt": 10, "rsqrt": 11, "reciprocal": 12,
    "square": 13, "abs": 14, "sign": 15, "sin": 16, "cos": 17, "arctan": 18, "erf": 19,
    "negative": 20, "tan": 21, "ceil": 22, "floor": 23, "trunc": 24, "gelu_apprx_sigmoid": 25,
    "gelu_dx": 26, "gelu_apprx_sigmoid_dx": 27, "silu_dx": 28, "erf_dx": 29, "prelu": 30,
}

REDUCE_IDENTITY = {"add": 0.0, "maximum": float("-inf"), "minimum": float("inf"),
                   "multiply": 1.0}


class AluOp:
    """An ALU op; calling it is the nl element-wise convenience."""

    def __init__(self, name):
        self.name = name
        self.code = ALU_CODES[name]

    def __call__(self, x, y, dtype=None, **kw):
        from torchneuron.nki import language

        return language.elementwise(self, x, y, dtype=dtype)

    def __repr__(self):
        return f"nl.{self.name}"


class ActivationFunction:
    """An activation function; calling it is the nl unary convenience."""

    def __init__(self, name):
        self.name = name
        self.code = ACTIVATION_CODES[name]

    def __call__(self, x, dtype=None, **kw):
        from torchneuron.nki import language

        return language.unary(self, x, dtype=dtype)

    def __repr__(self):
        return f"nl.{self.name}"


def _numpy_ops():
    import numpy as np

    return {np.add: "add", np.subtract: "subtract", np.multiply: "multiply",
            np.divide: "divide", np.maximum: "maximum", np.minimum: "minimum",
            np.max: "maximum", np.min: "minimum", np.sum: "add", np.prod: "multiply",
            np.power: "power", np.equal: "equal", np.greater: "greater", np.less: "less"}


def alu_code(op):
    """The ALU code of an op: nl.add, a reduction (nl.max is maximum, the
    legacy spelling) or the NumPy function of the same meaning."""
    if isinstance(op, AluOp):
        return op.code
    if isinstance(op, str):
        return ALU_CODES[op]
    name = getattr(op, "alu_name", None)
    if name is None:
        try:
            name = _numpy_ops().get(op)
        except TypeError:
            name = None
    if name is None:
        raise TypeError(op)
    return ALU_CODES[name]
