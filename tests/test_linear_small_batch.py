"""bfloat16 linear, mm and addmm with few rows (1-128) against the exact
product: the runtime computes x W^T with 2..128 rows as C^T = W x^T, W's
rows read where they lie (runtime/src/ops/gemm/gemm.c small_m_transposed;
on AMX hosts the tile kernel's bf16_rows, elsewhere AVX512-BF16's), and
straight otherwise (odd k, short rows with many rows, no AVX512-BF16).

Each result is checked against the product computed in float64 from the
same bfloat16 values, with the bound of test_ops_gemm.py (float32
accumulation of a k-term sum, one rounding to bfloat16); PyTorch CPU's own
result must meet the same bound. Shapes: the weights of
benchmarks/linear_small_batch.py and gemm.py's transformer layers (3072x768,
768x256, 256x1024), a row count beyond one 32-row tile (1100) with k across
two AMX k blocks (1500 = 2 x 750, a short last step), a row stride of 4
KiB (300x2048: the AVX512-BF16 tile then reads W's rows through staged
copies, gemm_kernels.c rows_share_l1_sets), and odd sizes. The same in
every ISA path a child process can force (TORCHNEURON_ISA).
"""

import pytest
import torch
import torch.nn.functional as F

from conftest import check_output, no_fallback, run_python

U_ACC, U_OUT = 2.0**-24, 2.0**-8

WEIGHTS = [(3072, 768), (768, 256), (256, 1024), (1100, 1500), (65, 130), (70, 129), (300, 2048)]
ROWS = [1, 2, 4, 13, 16, 32, 33, 48, 64, 100, 128]


def bf16(shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float64).to(torch.bfloat16)


def exact_product(x, w):
    """x W^T and |x| |W|^T in float64 (computed once per operand pair)."""
    return x.double() @ w.double().t(), x.double().abs() @ w.double().abs().t()


def check_bound(got, x, w, bias, alpha=1.0, beta=1.0, product=None):
    prod, mag = product or exact_product(x, w)
    exact, mag = alpha * prod, abs(alpha) * mag
    if bias is not None:
        exact = exact + beta * bias.double()
        mag = mag + abs(beta) * bias.double().abs()
    k = x.shape[-1]
    tol = (k + 2) * U_ACC * mag + U_OUT * exact.abs() + 1e-300
    err = (got.cpu().double() - exact).abs()
    assert got.dtype == torch.bfloat16
    assert bool((err <= tol).all()), f"max error {float(err.max())} over tolerance"


@pytest.mark.parametrize("n,k", WEIGHTS, ids=str)
def test_linear_few_rows_within_bound(n, k):
    w, b = bf16((n, k), 1), bf16((n,), 2)
    wd, bd = w.to("neuron"), b.to("neuron")
    with no_fallback():
        for m in ROWS if n * k < 500_000 else ROWS[::2]:
            x = bf16((m, k), 3 + m)
            xd, p = x.to("neuron"), exact_product(x, w)
            check_bound(F.linear(xd, wd, bd), x, w, b, product=p)
            check_bound(F.linear(xd, wd), x, w, None, product=p)
            check_bound(torch.mm(xd, wd.t()), x, w, None, product=p)
            check_bound(torch.addmm(bd, xd, wd.t(), beta=0.5, alpha=-2.0), x, w, b, alpha=-2.0, beta=0.5, product=p)
            check_bound(F.linear(x, w, b), x, w, b, product=p)  # the bound is fair to the CPU too


def test_linear_few_rows_strided_input_and_3d():
    n, k = 3072, 768
    w, b = bf16((n, k), 1), bf16((n,), 2)
    wd, bd = w.to("neuron"), b.to("neuron")
    with no_fallback():
        wide = bf16((8, 2 * k), 5)
        x = wide[:, ::2]  # a non-contiguous x: copied, W still read in place
        check_bound(F.linear(wide.to("neuron")[:, ::2], wd, bd), x, w, b)
        x3 = bf16((2, 3, k), 6)
        got = F.linear(x3.to("neuron"), wd, bd)
        assert got.shape == (2, 3, n)
        check_bound(got.reshape(6, n), x3.reshape(6, k), w, b)
        # A weight that is itself a view with a padded row stride.
        wpad = bf16((n, k + 2), 7)
        wv = wpad[:, :k]
        check_bound(F.linear(x3.reshape(6, k).to("neuron"), wpad.to("neuron")[:, :k], bd), x3.reshape(6, k), wv, b)



@pytest.mark.parametrize("m", [2, 5, 16, 20, 33, 100])
def test_linear_few_rows_same_bits_at_a_4k_stride(m):
    """W viewed with a row stride of 2048 values (4 KiB: read through staged
    copies of its rows) and the same W contiguous (a stride of 1000 values:
    read in place) give the same bits: the tile broadcasts the same words in
    the same order either way. k = 1000 leaves a short last line of each row."""
    n, k = 200, 1000
    wide = bf16((n, 2048), 8)
    b = bf16((n,), 9)
    x = bf16((m, k), 10 + m)
    xd, bd = x.to("neuron"), b.to("neuron")
    with no_fallback():
        staged = F.linear(xd, wide.to("neuron")[:, :k], bd)
        in_place = F.linear(xd, wide[:, :k].contiguous().to("neuron"), bd)
    assert torch.equal(staged.cpu().view(torch.int16), in_place.cpu().view(torch.int16))
    check_bound(staged, x, wide[:, :k], b)

_CHILD = """
import torch, torch.nn.functional as F
import torchneuron
for (n, k) in [(3072, 768), (1100, 1500), (768, 256), (300, 2048)]:
    w = torch.randn(n, k, dtype=torch.float64).to(torch.bfloat16)
    for m in (4, 33, 128):
        x = torch.randn(m, k, dtype=torch.float64).to(torch.bfloat16)
        got = F.linear(x.to("neuron"), w.to("neuron")).cpu().double()
        exact = x.double() @ w.double().t()
        mag = x.double().abs() @ w.double().abs().t()
        tol = (k + 2) * 2.0**-24 * mag + 2.0**-8 * exact.abs() + 1e-300
        assert bool(((got - exact).abs() <= tol).all()), (n, k, m)
assert torchneuron.get_fallback_ops() == {}
print("ok")
"""


@pytest.mark.parametrize("level", ["avx512", "avx2", "baseline"])
def test_linear_few_rows_at_each_isa_level(level):
    out = check_output(run_python(_CHILD, env={"TORCHNEURON_ISA": level}, timeout=300))
    assert out.strip().endswith("ok")
