"""16-bit transposed convolutions round once, as oneDNN does on the CPU.

PyTorch CPU runs a float16/bfloat16 transposed convolution whose
output_padding is not below its stride (and, on hosts without AVX512-FP16,
every float16 one) on its slow path, which rounds each product and each
col2im addition to the 16-bit dtype. neuron sums in float32 and rounds once,
so its result is the float32 result rounded (to within one 16-bit ulp: the
float32 sums may differ in order) and no farther from float64 than the
CPU's. tests/opinfo_float64_referee.py judges the OpInfo samples so."""

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.usefixtures("native_only")

ULP = {torch.float16: 2.0 ** -10, torch.bfloat16: 2.0 ** -7}

# input shape, weight shape, kwargs: output_padding >= stride in some dim
CASES = [
    (F.conv_transpose1d, (2, 4, 7), (4, 3, 3), dict(stride=2, output_padding=2, dilation=3, padding=1)),
    (F.conv_transpose2d, (2, 2, 4, 4), (2, 2, 4, 5),
     dict(stride=(3, 2), padding=(1, 2), output_padding=(2, 3), groups=2, dilation=(4, 4))),
    (F.conv_transpose2d, (1, 6, 5, 5), (6, 4, 3, 3), dict(stride=1, output_padding=1, dilation=2)),
    (F.conv_transpose3d, (2, 2, 3, 4, 4), (2, 2, 4, 3, 3),
     dict(stride=(3, 2, 1), padding=(1, 2, 1), output_padding=(2, 3, 1), groups=2, dilation=(4, 4, 2))),
]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("fn,xs,ws,kwargs", CASES)
def test_rounds_the_float32_result_once(dtype, fn, xs, ws, kwargs):
    x, w = torch.randn(*xs).to(dtype), torch.randn(*ws).to(dtype)
    b = torch.randn(ws[1] * kwargs.get("groups", 1)).to(dtype)
    got = fn(x.to("neuron"), w.to("neuron"), b.to("neuron"), **kwargs).cpu()
    once = fn(x.float(), w.float(), b.float(), **kwargs)
    exact = fn(x.double(), w.double(), b.double(), **kwargs)
    cpu = fn(x, w, b, **kwargs)
    assert got.dtype == dtype and got.shape == once.shape
    torch.testing.assert_close(got, once.to(dtype), atol=2.0 ** -24, rtol=ULP[dtype])  # atol: a float16 subnormal step
    ours, theirs = (got.double() - exact).abs().max(), (cpu.double() - exact).abs().max()
    assert ours <= theirs + 1e-6, f"neuron {ours:.3g} off float64, the CPU {theirs:.3g}"
