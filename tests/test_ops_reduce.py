"""Reductions and scans on neuron against PyTorch CPU.

Every case runs the same call on a CPU tensor and on its neuron twin (same
values, same view: contiguous, transposed or sliced), and checks that the
results agree (exactly for integers, bools and indices; within a dtype's
tolerance for floats, since neuron accumulates floats in float64 where the
CPU sums in the input's precision), that errors match (same exception type)
and that no op fell back to the CPU.
"""

import math
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torchneuron

DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
          torch.float16, torch.bfloat16, torch.float32, torch.float64]
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
TOLERANCE = {torch.float16: (2e-3, 1e-3), torch.bfloat16: (1.6e-2, 1e-2),
             torch.float32: (2e-5, 1e-5), torch.float64: (1e-10, 1e-10)}

LAYOUTS = {
    "contiguous": (lambda shape: shape, lambda t: t),
    "transposed": (lambda shape: shape[::-1], lambda t: t.permute(*reversed(range(t.dim())))),
    "sliced": (lambda shape: shape[:-1] + (2 * shape[-1],), lambda t: t[..., ::2]),
}


def values(shape, dtype, kind="normal", seed=0):
    """CPU tensor of `shape`: small integers (with ties) for integer dtypes,
    normal floats, or floats near 1 (kind="near_one", for products)."""
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) < 0.6
    if not dtype.is_floating_point:
        low = 0 if dtype == torch.uint8 else -4
        return torch.randint(low, 5, shape, generator=g).to(dtype)
    if kind == "near_one":
        return (1 + 0.1 * torch.randn(shape, generator=g, dtype=torch.float64)).to(dtype)
    return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)


def twins(shape, dtype, layout="contiguous", kind="normal", seed=0):
    """The same view of the same values on CPU and on neuron."""
    storage_shape, view = LAYOUTS[layout]
    base = values(storage_shape(tuple(shape)), dtype, kind, seed)
    return view(base), view(base.to("neuron"))


def assert_same(got, expected, tol=None):
    if isinstance(expected, (tuple, list)):
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert_same(g, e, tol)
        return
    assert got.device.type == "neuron"
    got = got.cpu()
    assert got.dtype == expected.dtype and got.shape == expected.shape, (got, expected)
    if expected.dtype.is_floating_point:
        rtol, atol = tol or TOLERANCE[expected.dtype]
        torch.testing.assert_close(got, expected, rtol=rtol, atol=atol, equal_nan=True)
    else:
        assert torch.equal(got, expected), (got, expected)


def check(fn, cpu_inputs, dev_inputs, tol=None):
    """fn on CPU and on neuron: equal results or the same exception type,
    and no CPU fallback."""
    try:
        expected = fn(*cpu_inputs)
    except Exception as error:  # the neuron call must fail the same way
        torchneuron.clear_op_tracking()
        with pytest.raises(type(error)):
            fn(*dev_inputs)
            torch.neuron.synchronize()
        assert torchneuron.get_fallback_ops() == {}
        return
    torchneuron.clear_op_tracking()
    got = fn(*dev_inputs)
    assert torchneuron.get_fallback_ops() == {}
    assert_same(got, expected, tol)


SHAPE = (5, 6, 7)
DIMS = [None, 0, -1, (0, 2), (-1, 1), (0, 1, 2)]
SINGLE_DIMS = [0, 1, -1]


def dim_args(dim):
    return {} if dim is None else {"dim": dim}


# ---- reductions over dims, every dtype and layout ---------------------------

# name -> (call(x, dim, keepdim), dims, data kind)
REDUCTIONS = {
    "sum": (lambda x, d, k: x.sum(**dim_args(d), keepdim=k) if d is not None else x.sum(), DIMS, "normal"),
    "mean": (lambda x, d, k: x.mean(**dim_args(d), keepdim=k) if d is not None else x.mean(), DIMS, "normal"),
    "prod": (lambda x, d, k: x.prod(d, keepdim=k) if d is not None else x.prod(), [None] + SINGLE_DIMS, "near_one"),
    "amax": (lambda x, d, k: x.amax(d if d is not None else (), keepdim=k), DIMS, "normal"),
    "amin": (lambda x, d, k: x.amin(d if d is not None else (), keepdim=k), DIMS, "normal"),
    "max": (lambda x, d, k: tuple(x.max(d, keepdim=k)) if d is not None else x.max(), [None] + SINGLE_DIMS, "normal"),
    "min": (lambda x, d, k: tuple(x.min(d, keepdim=k)) if d is not None else x.min(), [None] + SINGLE_DIMS, "normal"),
    "argmax": (lambda x, d, k: x.argmax(d, keepdim=k), [None] + SINGLE_DIMS, "normal"),
    "argmin": (lambda x, d, k: x.argmin(d, keepdim=k), [None] + SINGLE_DIMS, "normal"),
    "var": (lambda x, d, k: x.var(d, keepdim=k), DIMS, "normal"),
    "std": (lambda x, d, k: x.std(d, correction=0, keepdim=k), DIMS, "normal"),
    "var_mean": (lambda x, d, k: torch.var_mean(x, d, correction=2, keepdim=k), DIMS, "normal"),
    "std_mean": (lambda x, d, k: torch.std_mean(x, d, keepdim=k), DIMS, "normal"),
    "logsumexp": (lambda x, d, k: x.logsumexp(d if d is not None else (0, 1, 2), keepdim=k), DIMS, "normal"),
    "any": (lambda x, d, k: x.any(d, keepdim=k) if d is not None else x.any(), DIMS, "normal"),
    "all": (lambda x, d, k: x.all(d, keepdim=k) if d is not None else x.all(), DIMS, "normal"),
    "count_nonzero": (lambda x, d, k: x.count_nonzero(d), DIMS, "normal"),
    "vector_norm": (lambda x, d, k: torch.linalg.vector_norm(x, 2, d, keepdim=k), DIMS, "normal"),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reduction_matches_cpu_for_dims_keepdim_and_layouts(name, dtype):
    call, dims, kind = REDUCTIONS[name]
    for layout in LAYOUTS:
        cpu, dev = twins(SHAPE, dtype, layout, kind)
        for dim in dims:
            for keepdim in (False, True):
                check(lambda x: call(x, dim, keepdim), [cpu], [dev])


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("ord", [0, 1, 2, 3, 0.5, -1, math.inf, -math.inf])
def test_vector_norm_orders_match_cpu(ord, dtype):
    for layout in LAYOUTS:
        cpu, dev = twins(SHAPE, dtype, layout)
        for dim in DIMS:
            check(lambda x: torch.linalg.vector_norm(x, ord, dim, keepdim=dim == 0), [cpu], [dev])


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_aten_norm_overloads_match_cpu(dtype):
    cpu, dev = twins(SHAPE, dtype, "transposed")
    norm = torch.ops.aten.norm
    for p in (None, 1, 2, 3, math.inf):
        check(lambda x: norm.ScalarOpt_dim(x, p, [1, 2], False), [cpu], [dev])
        check(lambda x: norm.ScalarOpt_dim(x, p, [], True), [cpu], [dev])
        check(lambda x: norm.ScalarOpt_dim_dtype(x, p, [0], False, dtype=torch.float64), [cpu], [dev])
    check(lambda x: torch.norm(x), [cpu], [dev])
    check(lambda x: torch.norm(x, 3, dim=1), [cpu], [dev])


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("correction", [0, 1, 2.5, 8])
@pytest.mark.filterwarnings("ignore:.*degrees of freedom")
def test_var_and_std_corrections_match_cpu(correction, dtype):
    cpu, dev = twins(SHAPE, dtype, "sliced")
    for dim in (None, 0, (1, 2)):
        for fn in (torch.var, torch.std, torch.var_mean, torch.std_mean):
            check(lambda x: fn(x, dim, correction=correction), [cpu], [dev])


def test_var_warns_like_cpu_when_correction_exceeds_the_count():
    x = torch.randn(3, 4).to("neuron")
    for fn in (torch.var, torch.std_mean):
        with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
            fn(x, 0, correction=3)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_scans_match_cpu(op, dtype):
    for layout in LAYOUTS:
        cpu, dev = twins(SHAPE, dtype, layout, "near_one" if op == "cumprod" else "normal")
        for dim in (0, 1, -1):
            check(lambda x: getattr(x, op)(dim), [cpu], [dev])
            check(lambda x: getattr(x, op)(dim, dtype=torch.float64), [cpu], [dev])


def test_scans_in_place_and_out():
    cpu, dev = twins((40, 33), torch.float32)
    check(lambda x: x.clone().cumsum_(1), [cpu], [dev])
    check(lambda x: x.clone().cumprod_(0), [cpu], [dev])
    for op in (torch.cumsum, torch.cumprod):
        check(lambda x: op(x, 0, out=torch.empty(3, device=x.device)), [cpu], [dev])
        check(lambda x: op(x, 1, out=torch.empty(40, 33, dtype=torch.float64, device=x.device)),
              [cpu], [dev])
        transposed_out = lambda x: op(x, 1, out=torch.empty(33, 40, device=x.device).t())  # noqa: E731
        check(transposed_out, [cpu], [dev])
    ints, dev_ints = twins((6, 5), torch.int32)
    check(lambda x: x.cumsum(1, dtype=torch.int8), [ints], [dev_ints])
    check(lambda x: x.cumsum(0, dtype=torch.bool), [ints], [dev_ints])
    check(lambda x: x.cumprod(0, dtype=torch.bool), [ints], [dev_ints])
    check(lambda x: x.cumsum_(0), [ints.clone()], [dev_ints.clone()])


@pytest.mark.parametrize("dtype", [torch.int32, torch.float32, torch.bfloat16], ids=str)
def test_broadcast_inputs_with_zero_strides_match_cpu(dtype):
    base = values((5, 1, 7), dtype)
    cpu, dev = base.expand(5, 6, 7), base.to("neuron").expand(5, 6, 7)
    calls = [lambda x: x.sum(1), lambda x: x.sum((0, 1)), lambda x: x.amax(1),
             lambda x: tuple(x.max(1)), lambda x: x.argmin(), lambda x: x.count_nonzero(1),
             lambda x: x.any(1), lambda x: x.cumsum(1), lambda x: x.prod(1)]
    if dtype.is_floating_point:
        calls += [lambda x: x.var(1), lambda x: x.logsumexp(1), lambda x: x.mean((1, 2)),
                  lambda x: torch.linalg.vector_norm(x, 3, 1)]
    for call in calls:
        check(call, [cpu], [dev])


# ---- dtype= and out= ---------------------------------------------------------

DTYPE_CASES = [(torch.int32, torch.float32), (torch.float16, torch.float32),
               (torch.bfloat16, torch.float64), (torch.float32, torch.float64),
               (torch.bool, torch.int32), (torch.int32, torch.int8), (torch.int64, torch.bool),
               (torch.float32, torch.int32), (torch.float64, torch.float16), (torch.uint8, torch.int16)]


@pytest.mark.parametrize("src,dst", DTYPE_CASES, ids=str)
def test_dtype_argument_converts_like_cpu(src, dst):
    cpu, dev = twins((37, 41), src, "transposed")
    check(lambda x: x.sum(dtype=dst), [cpu], [dev])
    check(lambda x: x.sum(1, dtype=dst), [cpu], [dev])
    check(lambda x: x.prod(0, dtype=dst), [cpu], [dev])
    check(lambda x: x.mean(0, dtype=dst), [cpu], [dev])
    check(lambda x: x.cumsum(1, dtype=dst), [cpu], [dev])
    check(lambda x: torch.linalg.vector_norm(x, 2, 1, dtype=dst), [cpu], [dev])


def test_out_variants_match_cpu():
    cpu, dev = twins((6, 8), torch.float32, "transposed")

    def out(x, shape=(0,), dtype=torch.float32):
        return torch.empty(shape, dtype=dtype, device=x.device)

    cases = [
        lambda x: torch.sum(x, 1, out=out(x)),
        lambda x: torch.sum(x, (0, 1), keepdim=True, out=out(x, (5,))),
        lambda x: torch.sum(x, 0, dtype=torch.float64, out=out(x, dtype=torch.float64)),
        lambda x: torch.sum(x, 0, dtype=torch.float64, out=out(x)),  # dtype mismatch: error
        lambda x: torch.mean(x, 0, out=out(x)),
        lambda x: torch.prod(x, 1, out=out(x)),
        lambda x: torch.amax(x, 0, out=out(x)),
        lambda x: torch.amax(x, 0, out=out(x, dtype=torch.float64)),  # error
        lambda x: torch.amin(x, (0, 1), out=out(x)),
        lambda x: torch.max(x, out=out(x)),
        lambda x: torch.max(x, out=out(x, dtype=torch.float64)),
        lambda x: torch.min(x, out=out(x, dtype=torch.int32)),  # error: cannot cast
        lambda x: tuple(torch.max(x, 1, out=(out(x), out(x, dtype=torch.int64)))),
        lambda x: tuple(torch.min(x, 0, keepdim=True, out=(out(x), out(x, dtype=torch.int64)))),
        lambda x: torch.argmax(x, 1, out=out(x, dtype=torch.int64)),
        lambda x: torch.argmin(x, out=out(x, dtype=torch.int64)),
        lambda x: torch.argmax(x, 0, out=out(x, dtype=torch.int32)),  # error
        lambda x: torch.var(x, 0, out=out(x)),
        lambda x: torch.var(x, 0, out=out(x, dtype=torch.float64)),
        lambda x: torch.std(x, 1, correction=0, out=out(x)),
        lambda x: torch.linalg.vector_norm(x, 3, 0, out=out(x)),
        lambda x: torch.norm(x, 2, 1, out=out(x)),
        lambda x: torch.logsumexp(x, 1, out=out(x)),
        lambda x: torch.logsumexp(x, 1, out=out(x, dtype=torch.float64)),
        lambda x: torch.logsumexp(x, 1, out=out(x, dtype=torch.int32)),  # error
        lambda x: torch.any(x, 1, out=out(x, dtype=torch.bool)),
        lambda x: torch.all(x, out=out(x, dtype=torch.bool)),
        lambda x: torch.any(x, (0, 1), out=out(x, dtype=torch.bool)),
        lambda x: torch.count_nonzero(x, 0, out=out(x, dtype=torch.int64)),
        lambda x: torch.sum(x, 0, out=torch.empty(16, device=x.device)[::2]),
    ]
    for case in cases:  # float32 input: float32 accuracy even in float64 outputs
        check(case, [cpu], [dev], tol=TOLERANCE[torch.float32])


def test_out_that_overlaps_the_input_gets_the_result_of_the_unchanged_input():
    cpu, dev = twins((4, 4), torch.float32)
    torchneuron.clear_op_tracking()
    assert_same(torch.sum(dev, 1, out=dev[0]), cpu.sum(1))
    dev = cpu.to("neuron")
    assert_same(torch.cumsum(dev, 1, out=dev.t()), cpu.cumsum(1))
    dev = cpu.to("neuron")
    indices = torch.empty(4, dtype=torch.long, device="neuron")
    assert_same(tuple(torch.max(dev, 0, out=(dev[1], indices))), tuple(cpu.max(0)))
    assert torchneuron.get_fallback_ops() == {}


# ---- empty, 0-d, special values ---------------------------------------------

EMPTY_CASES = {
    "sum": lambda x: x.sum(), "sum0": lambda x: x.sum(0), "sum1": lambda x: x.sum(1),
    "prod": lambda x: x.prod(), "prod1": lambda x: x.prod(1),
    "mean": lambda x: x.mean(), "mean1": lambda x: x.mean(1),
    "amax": lambda x: x.amax(), "amax1": lambda x: x.amax(1), "amax0": lambda x: x.amax(0),
    "max": lambda x: x.max(), "max1": lambda x: tuple(x.max(1)), "max0": lambda x: tuple(x.max(0)),
    "argmax": lambda x: x.argmax(), "argmin0": lambda x: x.argmin(0),
    "var": lambda x: x.var(), "var1": lambda x: x.var(1), "var_mean0": lambda x: torch.var_mean(x, 0),
    "norm": lambda x: torch.linalg.vector_norm(x), "norm_inf": lambda x: torch.linalg.vector_norm(x, math.inf),
    "norm_neg": lambda x: torch.linalg.vector_norm(x, -1, 1),
    "logsumexp": lambda x: x.logsumexp(1), "any": lambda x: x.any(), "all1": lambda x: x.all(1),
    "count_nonzero": lambda x: x.count_nonzero(1), "cumsum": lambda x: x.cumsum(1),
}


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 4)], ids=str)
@pytest.mark.parametrize("name", list(EMPTY_CASES))
def test_empty_inputs_give_identities_or_cpu_errors(name, shape):
    cpu, dev = twins(shape, torch.float32)
    check(EMPTY_CASES[name], [cpu], [dev])


@pytest.mark.parametrize("dtype", [torch.int32, torch.float32, torch.bfloat16, torch.bool], ids=str)
def test_zero_dim_inputs_match_cpu(dtype):
    cpu = values((), dtype)
    dev = cpu.to("neuron")
    calls = [lambda x: x.sum(), lambda x: x.sum(0), lambda x: x.sum(-1, keepdim=True),
             lambda x: x.prod(0), lambda x: x.amax(), lambda x: x.max(), lambda x: tuple(x.max(0)),
             lambda x: x.argmax(), lambda x: x.argmin(0, keepdim=True), lambda x: x.any(0),
             lambda x: x.all(), lambda x: x.count_nonzero(), lambda x: x.cumsum(0),
             lambda x: x.cumprod(-1), lambda x: x.logsumexp(0), lambda x: x.mean(),
             lambda x: x.var(0), lambda x: torch.linalg.vector_norm(x), lambda x: x.max(1)]
    for call in calls:
        check(call, [cpu], [dev])


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_nan_propagates_and_first_nan_index_wins(dtype):
    nan = float("nan")
    cpu = torch.tensor([[1.0, nan, 3.0, nan, 3.0], [2.0, 5.0, 5.0, -1.0, -1.0]], dtype=dtype)
    dev = cpu.to("neuron")
    for call in (lambda x: x.amax(1), lambda x: x.amin(1), lambda x: tuple(x.max(1)),
                 lambda x: tuple(x.min(1)), lambda x: x.argmax(1), lambda x: x.argmin(1),
                 lambda x: x.argmax(), lambda x: x.max(), lambda x: x.logsumexp(1),
                 lambda x: torch.linalg.vector_norm(x, math.inf, 1),
                 lambda x: torch.linalg.vector_norm(x, 0, 1), lambda x: x.sum(1), lambda x: x.var(1),
                 lambda x: x.t().argmax(0), lambda x: x.cumsum(1)):
        check(call, [cpu], [dev])


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_logsumexp_of_infinities_matches_cpu(dtype):
    inf = float("inf")
    cpu = torch.tensor([[-inf, -inf], [inf, 1.0], [inf, -inf], [-inf, 2.0]], dtype=dtype)
    check(lambda x: x.logsumexp(1), [cpu], [cpu.to("neuron")])


@pytest.mark.parametrize("dtype", [torch.int64, torch.float32, torch.uint8], ids=str)
def test_ties_pick_the_first_index_in_logical_order(dtype):
    base = torch.zeros(6, 5, dtype=dtype)
    base[2, 1] = base[4, 0] = 3
    for view in (lambda t: t, lambda t: t.t(), lambda t: t[::2]):
        cpu, dev = view(base), view(base.to("neuron"))
        for call in (lambda x: x.argmax(), lambda x: x.argmin(), lambda x: x.argmax(0),
                     lambda x: tuple(x.max(1)), lambda x: tuple(x.min(0))):
            check(call, [cpu], [dev])


def test_integer_sums_wrap_like_cpu():
    big = torch.tensor([2**62, 2**62, 2**62, 5], dtype=torch.int64)
    check(lambda x: x.sum(), [big], [big.to("neuron")])
    check(lambda x: x.prod(), [big], [big.to("neuron")])
    small = torch.tensor([[100, 100, 100]], dtype=torch.int8)
    check(lambda x: x.sum(1, dtype=torch.int8), [small], [small.to("neuron")])
    check(lambda x: x.sum(1), [small], [small.to("neuron")])


def test_unsupported_inputs_raise_like_cpu():
    ints, dev_ints = twins((3, 4), torch.int32)
    bools, dev_bools = twins((3, 4), torch.bool)
    for call in (lambda x: x.var(), lambda x: torch.var_mean(x), lambda x: x.mean(),
                 lambda x: torch.linalg.vector_norm(x), lambda x: x.norm(2, 0)):
        check(call, [ints], [dev_ints])
    check(lambda x: x.argmax(), [bools], [dev_bools])
    check(lambda x: x.sum(5), [ints], [dev_ints])
    check(lambda x: x.sum((0, 0)), [ints], [dev_ints])
    check(lambda x: x.logsumexp(()), [ints], [dev_ints])


# ---- large inputs: split reductions, accuracy, thread count -----------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_large_reductions_match_cpu(dtype):
    for shape, dim in (((300001,), 0), ((3, 100001), 1), ((100001, 3), 0), ((64, 4100), 0)):
        cpu, dev = twins(shape, dtype)
        # A float64 reference: neuron accumulates in float64 too.
        ref = cpu.double()
        for fn in (lambda x: x.sum(dim), lambda x: x.mean(dim), lambda x: x.var(dim),
                   lambda x: torch.linalg.vector_norm(x, 2, dim), lambda x: x.logsumexp(dim)):
            torch.testing.assert_close(fn(dev).cpu(), fn(ref).to(dtype), **_rtol(dtype))
        for fn in (lambda x: x.amax(dim), lambda x: x.argmax(dim), lambda x: x.any(dim)):
            check(fn, [cpu], [dev])


def _rtol(dtype):
    return {"rtol": 1e-5, "atol": 1e-4} if dtype == torch.float32 else {"rtol": 1e-2, "atol": 1e-2}


THREAD_SCRIPT = textwrap.dedent("""
    import sys, torch, torchneuron
    g = torch.Generator().manual_seed(7)
    results = []
    for dtype in (torch.float32, torch.bfloat16, torch.float64):
        for shape in ((1 << 18,), (4, 100001), (100001, 4), (256, 2048)):
            x = torch.randn(shape, generator=g).to(dtype).to("neuron")
            for dim in range(len(shape)):
                results += [x.sum(dim), x.mean(dim), x.var(dim), x.logsumexp(dim),
                            torch.linalg.vector_norm(x, 3, dim), x.amax(dim), x.argmax(dim),
                            x.cumsum(dim)]
            results += [x.sum(), x.var(), x.logsumexp(tuple(range(len(shape))))]
    torch.save([r.cpu() for r in results], sys.argv[1])
""")


def test_results_do_not_depend_on_the_thread_count(tmp_path):
    paths = {threads: tmp_path / f"threads{threads}.pt" for threads in ("1", "3")}
    children = [subprocess.Popen([sys.executable, "-c", THREAD_SCRIPT, str(path)],
                                 env=dict(os.environ, TORCHNEURON_NUM_THREADS=threads))
                for threads, path in paths.items()]
    assert [child.wait(timeout=240) for child in children] == [0, 0]
    one, three = (torch.load(path) for path in paths.values())
    assert len(one) == len(three)
    for a, b in zip(one, three):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.view(-1).view(torch.uint8).equal(b.view(-1).view(torch.uint8))


def test_results_stay_on_the_input_device_and_out_must_be_there_too():
    if torch.neuron.device_count() < 2:
        pytest.skip("needs two neuron devices")
    cpu = values((4, 5), torch.float32)
    dev = cpu.to("neuron:1")
    for fn in (lambda x: x.sum(1), lambda x: x.cumsum(0), lambda x: torch.var_mean(x, 0)[1],
               lambda x: x.logsumexp(1), lambda x: x.max(0)[1]):
        got = fn(dev)
        assert got.device == dev.device
        assert_same(got, fn(cpu))
    for out in (torch.empty(4, device="neuron:0"), torch.empty(4)):
        with pytest.raises(RuntimeError, match="device"):
            torch.sum(dev, 1, out=out)
