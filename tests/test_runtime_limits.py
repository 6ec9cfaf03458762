"""Calls past what the runtime's kernels take run through the counted CPU
fallback instead of failing (torchneuron/csrc/runtime_limits.h): more dims
than NRT_MAX_DIMS (25) that do not merge away, and dtypes an op's kernel does
not compute in (complex linear algebra and indexing, integer GEMM). The
results equal the CPU's, and the fallback names the op; copies stay native
at any number of dims, since the fallback moves its data with them."""

import warnings

import numpy as np
import pytest
import torch

import torchneuron

DEV = "neuron"


def run_counted(fn, *cpu_args):
    """fn on the CPU arguments and on their neuron copies: the CPU result,
    the neuron result (on the CPU) and the ops the fallback ran."""
    expected = fn(*cpu_args)
    torchneuron.clear_op_tracking()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fallback's warning: counted below
        got = fn(*[a.to(DEV) if isinstance(a, torch.Tensor) else a for a in cpu_args])
    got = [g.cpu() for g in got] if isinstance(got, (tuple, list)) else got.cpu()
    return expected, got, torchneuron.get_fallback_ops()


def assert_same(got, expected):
    if isinstance(expected, (tuple, list)):
        for g, e in zip(got, expected):
            assert_same(g, e)
        return
    assert got.shape == expected.shape and got.dtype == expected.dtype
    torch.testing.assert_close(got, expected, equal_nan=True)


def wide(ndim=28, seed=0):
    """An ndim tensor: the first and last dims of size 2, six more of size 2
    among size-1 dims (ops that keep their dims cannot drop the size-1
    ones, so past NRT_MAX_DIMS they cannot run natively)."""
    g = torch.Generator().manual_seed(seed)
    sizes = [1] * ndim
    for d in (1 + torch.randperm(ndim - 2, generator=g)[:6]).tolist() + [0, ndim - 1]:
        sizes[d] = 2
    return torch.randn(sizes, generator=g)


def unmergeable(ndim=26):
    """ndim dims of size 2 with neighbours swapped in pairs: no two
    neighbours step alike, so merging leaves all of them (more than
    NRT_MAX_DIMS). int8 keeps the 2^26 elements at 64 MiB."""
    g = torch.Generator().manual_seed(ndim)
    x = torch.randint(-100, 100, [2] * ndim, generator=g, dtype=torch.int8)
    return x.permute([d ^ 1 for d in range(ndim)])


MANY_DIMS = {
    "sum": (lambda t: t.sum(-1), "aten::sum.dim_IntList"),
    "mean": (lambda t: t.mean(), None),
    "softmax": (lambda t: t.softmax(-1), "aten::_softmax"),
    "log_softmax": (lambda t: t.log_softmax(3), "aten::_log_softmax"),
    "sort": (lambda t: t.sort(-1), "aten::sort.stable"),
    "topk": (lambda t: t.topk(1, -1), "aten::topk"),
    "cumsum": (lambda t: t.cumsum(-2), "aten::cumsum"),
    "argmax": (lambda t: t.argmax(-1), "aten::argmax"),
    "cat": (lambda t: torch.cat([t, t], -1), "aten::cat"),
    "index": (lambda t: t[..., torch.tensor([1, 0])], "aten::index.Tensor"),
    "var": (lambda t: t.var(0), None),
    "flip": (lambda t: t.flip(0), None),
}


@pytest.mark.parametrize("name", sorted(MANY_DIMS))
def test_past_the_runtime_dims_falls_back_counted(name):
    fn, op = MANY_DIMS[name]
    x = wide()
    expected, got, fallbacks = run_counted(fn, x)
    assert_same(got, expected)
    assert fallbacks, "a 28-dim input of size-2 dims cannot reach the runtime natively"
    if op is not None:
        assert op in fallbacks


def test_many_dims_still_native_where_they_merge():
    # 40 dims of which 34 are size 1: the size-1 dims drop, nothing falls back
    x = torch.randn([1] * 34 + [2, 3, 1, 4, 1, 5])
    expected, got, fallbacks = run_counted(lambda t: (t + 1) * 2, x)
    assert_same(got, expected)
    assert fallbacks == {}


def test_unmergeable_copy_stays_native():
    x = unmergeable()
    d = x.to(DEV)
    torchneuron.clear_op_tracking()
    got = d.contiguous().cpu()
    assert torchneuron.get_fallback_ops() == {}
    assert got.is_contiguous() and torch.equal(got, torch.from_numpy(np.ascontiguousarray(x.numpy())))


def cplx(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.complex(torch.randn(shape, generator=g), torch.randn(shape, generator=g))


def ix(z, *values):
    return torch.tensor(values, device=z.device)


COMPLEX_FALLBACKS = {
    # complex linear algebra (LU, Cholesky, QR, matrix_exp, eigh, SVD,
    # lstsq, LDL) is native now (tests/test_linalg_complex.py)
    # tril/triu, index_put, scatter, take and index_add are native now
    # (tests/test_complex_index.py); a complex scatter product is not
    "scatter_multiply": lambda z: z.scatter(0, ix(z, [1, 0, 3, 2]), z[:1], reduce="multiply"),
}


@pytest.mark.parametrize("name", sorted(COMPLEX_FALLBACKS))
@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_without_a_kernel_falls_back(name, dtype):
    z = cplx(4, 4).to(dtype)
    expected, got, fallbacks = run_counted(COMPLEX_FALLBACKS[name], z)
    assert_same(got, expected)
    assert fallbacks, f"{name} of {dtype} has no native kernel yet"


def test_bad_input_raises_the_cpus_error_through_the_fallback():
    # integer linear algebra: the CPU refuses it, and so does the fallback
    a = torch.ones(3, 3, dtype=torch.int64)
    with pytest.raises(RuntimeError) as cpu:
        torch.linalg.inv(a)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(type(cpu.value), match="Long"):
            torch.linalg.inv(a.to(DEV))


def test_error_mode_refuses_instead_of_falling_back():
    mode = torchneuron.get_fallback_mode()
    torchneuron.set_fallback_mode("error")
    try:
        with pytest.raises(NotImplementedError, match="aten::sum"):
            wide().to(DEV).sum(-1)
    finally:
        torchneuron.set_fallback_mode(mode)


def test_every_registration_is_guarded():
    # A kernel the guard cannot wrap (a tensor taken by value, a lambda with
    # captures) would raise at a limit instead of falling back: none today.
    assert torchneuron._C._unguarded_registrations() == []
