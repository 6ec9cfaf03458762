"""Indexing ops on neuron against PyTorch CPU: index_select, gather, scatter
(src, value, reduce), scatter_add, scatter_reduce, index_add, index_copy,
index_fill, take, put_, advanced indexing (index.Tensor), index_put_ /
_index_put_impl_, masked_select,
nonzero / nonzero_static, embedding and its backward, one_hot, bincount,
searchsorted; out-of-range indices; determinism over thread counts.

Every test asserts that no op fell back to the CPU. Data is integer-valued
where the result depends on the order of accumulation, so that exact
equality with the CPU is the right check.
"""

import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch
import torch.nn.functional as F

import torchneuron
from thread_count_support import outputs_by_thread_count

DEV = "neuron"
ALL_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
              torch.float16, torch.bfloat16, torch.float32, torch.float64]
NUMERIC_DTYPES = ALL_DTYPES[1:]
FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


@pytest.fixture(autouse=True)
def no_fallback():
    torchneuron.clear_op_tracking()
    yield
    assert torchneuron.get_fallback_ops() == {}


def make(shape, dtype, low=-4, high=5):
    if dtype == torch.bool:
        return torch.randint(0, 2, shape).bool()
    if dtype == torch.uint8:
        low = max(low, 0)
    return torch.randint(low, high, shape).to(dtype)


def nd(t):
    return t.to(DEV)


def contiguous(t):
    return nd(t)


def transposed(t):
    """t's values on neuron in a transposed (non-contiguous) layout."""
    if t.dim() < 2:
        return strided(t)
    return nd(t.transpose(0, 1).contiguous()).transpose(0, 1)


def strided(t):
    """t's values on neuron as every other element of a larger tensor."""
    if t.dim() == 0:
        return nd(t)
    big = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype)
    big[..., ::2] = t
    return nd(big)[..., ::2]


LAYOUTS = [contiguous, transposed, strided]


def same(actual, expected):
    assert actual.device.type == DEV
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0, equal_nan=True)


def unique_rows_index(rows, cols, bound):
    """An index [rows, cols] whose columns hold distinct values < bound."""
    return torch.stack([torch.randperm(bound)[:rows] for _ in range(cols)], 1)


# ---- index_select -----------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_index_select_every_dtype_and_layout(dtype, layout):
    x = make((5, 7), dtype)
    for dim, idx in [(0, [4, 0, 2, 2]), (1, [6, 0, 3, 3, 1]), (-1, [1])]:
        for index_dtype in (torch.int64, torch.int32):
            index = torch.tensor(idx, dtype=index_dtype)
            same(layout(x).index_select(dim, nd(index)), x.index_select(dim, index))


def test_index_select_noncontiguous_index_and_out():
    x = torch.randn(6, 4)
    index = torch.tensor([5, 9, 0, 9, 2])
    same(nd(x).index_select(0, nd(index)[::2]), x.index_select(0, index[::2]))
    out = torch.empty(0, device=DEV)
    torch.index_select(nd(x), 1, nd(torch.tensor([3, 3])), out=out)
    same(out, x.index_select(1, torch.tensor([3, 3])))


def test_index_select_scalar_and_empty():
    s = torch.tensor(5.0)
    same(nd(s).index_select(0, nd(torch.tensor([0]))), s.index_select(0, torch.tensor([0])))
    same(nd(s).index_select(0, nd(torch.tensor(0))), s.index_select(0, torch.tensor(0)))
    x = torch.randn(3, 4)
    same(nd(x).index_select(1, nd(torch.tensor(2))), x.index_select(1, torch.tensor(2)))
    empty = torch.tensor([], dtype=torch.long)
    same(nd(x).index_select(0, nd(empty)), x.index_select(0, empty))
    z = torch.randn(3, 0)
    same(nd(z).index_select(0, nd(torch.tensor([1, 2]))), z.index_select(0, torch.tensor([1, 2])))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int8, torch.float64])
def test_index_select_rows_of_a_large_table(dtype):
    table = make((3000, 70), dtype)
    index = torch.randint(0, 3000, (5000,), dtype=torch.int32)
    same(nd(table).index_select(0, nd(index)), table.index_select(0, index))
    same(nd(table)[nd(index.long())], table[index.long()])


# ---- gather -----------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_gather_every_dtype_and_layout(dtype, layout):
    x = make((5, 6), dtype)
    for dim, index in [(0, torch.randint(0, 5, (7, 4))), (1, torch.randint(0, 6, (5, 9))),
                       (-1, torch.randint(0, 6, (2, 3)))]:
        same(layout(x).gather(dim, nd(index)), x.gather(dim, index))
        same(layout(x).gather(dim, transposed(index)), x.gather(dim, index))
        same(layout(x).gather(dim, nd(index.int())), x.gather(dim, index.int()))


def test_gather_scalar_empty_and_out():
    s = torch.tensor(3.5)
    same(nd(s).gather(0, nd(torch.tensor(0))), s.gather(0, torch.tensor(0)))
    x = torch.randn(4, 5)
    empty = torch.empty(4, 0, dtype=torch.long)
    same(nd(x).gather(1, nd(empty)), x.gather(1, empty))
    index = torch.randint(0, 5, (4, 3))
    out = torch.empty(0, device=DEV)
    torch.gather(nd(x), 1, nd(index), out=out)
    same(out, x.gather(1, index))


def test_gather_backward_uses_native_scatter_add():
    x = torch.randn(4, 5, requires_grad=True)
    index = torch.randint(0, 5, (4, 8))
    xn = nd(x.detach()).requires_grad_()
    grad = torch.randn(4, 8)
    x.gather(1, index).backward(grad)
    xn.gather(1, nd(index)).backward(nd(grad))
    torch.testing.assert_close(xn.grad.cpu(), x.grad)


# ---- scatter, scatter_add, scatter_reduce -----------------------------------

@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_scatter_src_and_value_every_dtype(dtype, layout):
    x, src = make((5, 6), dtype), make((4, 6), dtype)
    index = unique_rows_index(4, 6, 5)
    same(layout(x).scatter(0, nd(index), layout(src)), x.scatter(0, index, src))
    same(layout(x).scatter(0, transposed(index), 1), x.scatter(0, index, 1))
    inplace = layout(x)
    inplace.scatter_(0, nd(index), nd(src))
    same(inplace, x.scatter(0, index, src))
    out = torch.empty(0, dtype=dtype, device=DEV)
    torch.scatter(nd(x), 0, nd(index), nd(src), out=out)
    same(out, x.scatter(0, index, src))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_scatter_reduce_argument_add_and_multiply(dtype):
    x, src = make((4, 5), dtype), make((6, 5), dtype, -2, 3)
    index = torch.randint(0, 4, (6, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for reduce in ("add", "multiply"):
            same(nd(x).scatter(0, nd(index), nd(src), reduce=reduce),
                 x.scatter(0, index, src, reduce=reduce))
            value = True if dtype == torch.bool else 2
            same(nd(x).scatter(0, nd(index), value, reduce=reduce),
                 x.scatter(0, index, value, reduce=reduce))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_scatter_add_with_duplicates(dtype, layout):
    x, src = make((5, 6), dtype), make((9, 6), dtype)
    index = torch.randint(0, 5, (7, 6))
    same(layout(x).scatter_add(0, nd(index), layout(src)), x.scatter_add(0, index, src))
    index1 = torch.randint(0, 6, (5, 4))
    same(layout(x).scatter_add(1, layout(index1), nd(src[:5])), x.scatter_add(1, index1, src[:5]))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_every_reduction(dtype, reduce, include_self):
    if reduce == "mean" and dtype == torch.bool:
        pytest.skip("PyTorch has no bool mean")
    x = make((4, 6), dtype)
    src = make((10, 6), dtype, -2, 3) if reduce == "prod" else make((10, 6), dtype)
    index = torch.randint(0, 4, (8, 6))
    index[:, 0] = 0  # one column whose rows all meet
    want = x.scatter_reduce(0, index, src, reduce, include_self=include_self)
    same(nd(x).scatter_reduce(0, nd(index), nd(src), reduce, include_self=include_self), want)
    same(transposed(x).scatter_reduce(0, transposed(index), strided(src), reduce,
                                      include_self=include_self), want)


@pytest.mark.parametrize("reduce", ["amax", "amin", "sum", "prod", "mean"])
def test_scatter_reduce_infinities_and_nan(reduce):
    x = torch.tensor([1.0, 2.0, float("nan"), 4.0])
    src = torch.tensor([float("-inf"), float("inf"), 3.0, float("nan"), -1.0])
    index = torch.tensor([0, 1, 2, 3, 3])
    for include_self in (True, False):
        same(nd(x).scatter_reduce(0, nd(index), nd(src), reduce, include_self=include_self),
             x.scatter_reduce(0, index, src, reduce, include_self=include_self))


def test_scatter_scalar_and_empty_index():
    s = torch.tensor(1.0)
    same(nd(s).scatter(0, nd(torch.tensor(0)), nd(torch.tensor(7.0))),
         s.scatter(0, torch.tensor(0), torch.tensor(7.0)))
    x = torch.randn(3, 4)
    empty = torch.empty(0, 4, dtype=torch.long)
    same(nd(x).scatter_add(0, nd(empty), nd(x)), x.scatter_add(0, empty, x))


# ---- index_add ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_index_add_every_dtype(dtype, layout):
    x = make((5, 6), dtype)
    alpha = True if dtype == torch.bool else 2
    for dim, source in [(0, make((8, 6), dtype)), (1, make((5, 9), dtype))]:
        index = torch.randint(0, x.shape[dim], (source.shape[dim],))
        same(layout(x).index_add(dim, nd(index), layout(source)), x.index_add(dim, index, source))
        same(layout(x).index_add(dim, nd(index.int()), nd(source), alpha=alpha),
             x.index_add(dim, index.int(), source, alpha=alpha))


def test_index_add_inplace_scalar_and_1d():
    x = torch.arange(6.0)
    index = torch.tensor([0, 5, 0, 2])
    source = torch.tensor([1.0, 2.0, 3.0, 4.0])
    xn = nd(x)
    xn.index_add_(0, nd(index), nd(source), alpha=0.5)
    same(xn, x.index_add(0, index, source, alpha=0.5))
    s = torch.tensor(2.0)
    same(nd(s).index_add(0, nd(torch.tensor([0])), nd(torch.tensor(3.0))),
         s.index_add(0, torch.tensor([0]), torch.tensor(3.0)))
    same(nd(s).index_add(0, nd(torch.tensor(0)), nd(torch.tensor(3.0))),
         s.index_add(0, torch.tensor(0), torch.tensor(3.0)))


# ---- index_copy, index_fill, take, put_ --------------------------------------------

@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_index_copy_and_index_fill_every_dtype(dtype, layout):
    x = make((5, 6), dtype)
    source = make((5, 3), dtype)
    index = torch.tensor([4, 0, 2])
    same(layout(x).index_copy(1, nd(index), layout(source)), x.index_copy(1, index, source))
    xn = layout(x)
    xn.index_copy_(0, nd(index), nd(x[:3]))
    same(xn, x.index_copy(0, index, x[:3]))
    value = True if dtype == torch.bool else 3
    fill_index = torch.tensor([-1, 2])
    same(layout(x).index_fill(1, nd(fill_index), value), x.index_fill(1, fill_index, value))
    same(layout(x).index_fill(0, nd(fill_index), nd(torch.tensor(value, dtype=dtype))),
         x.index_fill(0, fill_index, torch.tensor(value, dtype=dtype)))
    same(layout(x).index_fill(0, nd(fill_index), torch.tensor(value)), x.index_fill(0, fill_index, torch.tensor(value)))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_take_and_put_every_dtype(dtype, layout):
    x = make((4, 5), dtype)
    index = torch.tensor([[19, -1], [0, -20], [7, 7]])
    same(layout(x).take(nd(index)), x.take(index))
    source = make((6,), dtype)
    unique = torch.tensor([[19, -2], [0, -20], [7, 8]])
    xn = layout(x)
    xn.put_(nd(unique), nd(source))
    same(xn, x.clone().put_(unique, source))
    xn = layout(x)
    xn.put_(nd(index), nd(source), accumulate=True)
    same(xn, x.clone().put_(index, source, accumulate=True))
    same(nd(torch.tensor(4.0)).take(nd(torch.tensor([0, -1]))), torch.tensor(4.0).take(torch.tensor([0, -1])))


# ---- advanced indexing (index.Tensor) ---------------------------------------------

@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_index_with_one_tensor_every_dtype(dtype):
    x = make((5, 4, 3), dtype)
    i = torch.tensor([4, -1, 0, 2, -5])
    for layout in LAYOUTS:
        same(layout(x)[nd(i)], x[i])
        same(layout(x)[:, nd(i[:3] % 4)], x[:, i[:3] % 4])


def test_index_broadcasting_slices_and_none():
    x = torch.randn(5, 6, 7, 3)
    i = torch.tensor([[0], [4], [-2]])  # [3, 1]
    j = torch.tensor([1, 5, -6, 2])     # [4]
    k = torch.tensor([2, 0, 1])
    cases = [
        lambda t, a, b, c: t[a, b],            # broadcast [3, 1] with [4]
        lambda t, a, b, c: t[:, b, a],         # adjacent, after a slice
        lambda t, a, b, c: t[a, :, b],         # not adjacent: the indexed dims go first
        lambda t, a, b, c: t[:, a, :, 1],      # an int index counts as an index tensor
        lambda t, a, b, c: t[None, a, ..., 1:3],
        lambda t, a, b, c: t[..., c],
        lambda t, a, b, c: t[a, b, :, c[:1]],  # three tensors
    ]
    for case in cases:
        same(case(nd(x), nd(i), nd(j), nd(k)), case(x, i, j, k))
        same(case(transposed(x), nd(i.int()), nd(j.int()), nd(k.int())), case(x, i, j, k))


def test_index_boolean_masks():
    x = torch.randn(4, 5, 6)
    full = x > 0
    rows = torch.tensor([True, False, True, True])
    cols = torch.rand(5, 6) > 0.5
    same(nd(x)[nd(full)], x[full])
    same(nd(x)[nd(rows)], x[rows])
    same(nd(x)[:, nd(cols)], x[:, cols])
    same(nd(x)[nd(rows), 1:4], x[rows, 1:4])
    same(nd(x)[nd(rows), :, nd(torch.tensor([5, 0, 1]))], x[rows, :, torch.tensor([5, 0, 1])])
    same(nd(x)[nd(torch.zeros(4, dtype=torch.bool))], x[torch.zeros(4, dtype=torch.bool)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        same(nd(x)[nd(rows.to(torch.uint8))], x[rows.to(torch.uint8)])


def test_index_edge_cases():
    x = torch.randn(4, 5)
    same(torch.ops.aten.index(nd(x), [nd(torch.tensor(2))]), torch.ops.aten.index(x, [torch.tensor(2)]))
    empty = torch.tensor([], dtype=torch.long)
    same(nd(x)[nd(empty)], x[empty])
    same(nd(x)[:, nd(empty)], x[:, empty])
    same(nd(x)[torch.tensor([3, 1])], x[torch.tensor([3, 1])])  # a CPU index
    out = torch.empty(0, device=DEV)
    torch.ops.aten.index.Tensor_out(nd(x), [nd(torch.tensor([1, 1]))], out=out)
    same(out, x[torch.tensor([1, 1])])
    with pytest.raises(IndexError, match="shape mismatch"):
        nd(x)[nd(torch.tensor([0, 1])), nd(torch.tensor([0, 1, 2]))]
    with pytest.raises(IndexError, match="too many indices"):
        nd(x)[nd(torch.tensor([0])), nd(torch.tensor([0])), nd(torch.tensor([0]))]
    with pytest.raises(IndexError, match="size 0"):
        nd(torch.empty(0, 3))[nd(torch.tensor([0]))]
    with pytest.raises(RuntimeError, match="same device as the indexed tensor"):
        x[nd(torch.tensor([0]))]
    # Six index tensors run through the fallback (tests/test_ops_upstream_parity.py).


def test_index_backward_accumulates_duplicates():
    x = torch.randn(5, 3, requires_grad=True)
    xn = nd(x.detach()).requires_grad_()
    index = torch.tensor([1, 1, 4, 0, 1])
    grad = torch.randn(5, 3)
    x[index].backward(grad)
    xn[nd(index)].backward(nd(grad))
    torch.testing.assert_close(xn.grad.cpu(), x.grad)


# ---- index_put_ ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_index_put_every_dtype(dtype):
    x = make((6, 4), dtype)
    rows = torch.tensor([5, -1, 0, 2])[[0, 2, 3]]
    values = make((3, 4), dtype)
    for layout in LAYOUTS:
        a, xn = x.clone(), layout(x)
        a[rows] = values
        xn[nd(rows)] = nd(values)
        same(xn, a)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_index_put_accumulate_with_duplicates(dtype):
    x = make((6, 4), dtype)
    index = torch.tensor([1, -5, 3, 1, 1, 0])
    values = make((6, 4), dtype)
    for layout in LAYOUTS:
        xn = layout(x)
        xn.index_put_((nd(index),), layout(values), accumulate=True)
        same(xn, x.clone().index_put_((index,), values, accumulate=True))
    i, j = torch.tensor([0, 0, 5, 0]), torch.tensor([[3], [3]])
    xn = nd(x)
    xn.index_put_((nd(i), nd(j)), nd(values[0, :1]), accumulate=True)
    same(xn, x.clone().index_put_((i, j), values[0, :1], accumulate=True))


def test_index_put_values_masks_and_scalars():
    x = torch.randn(5, 6)
    mask = x > 0
    for value in (1.5, torch.tensor(2.5), torch.tensor(-1.0, device=DEV)):
        a, xn = x.clone(), nd(x)
        a[mask] = value if not isinstance(value, torch.Tensor) else value.cpu()
        xn[nd(mask)] = value
        same(xn, a)
    a, xn = x.clone(), nd(x)
    a[:, torch.tensor([4, 0])] = torch.tensor([7.0, 8.0])
    xn[:, nd(torch.tensor([4, 0]))] = nd(torch.tensor([7.0, 8.0]))
    same(xn, a)
    a, xn = x.clone(), nd(x)
    a[torch.tensor([True, False, True, True, False])] += 1
    xn[nd(torch.tensor([True, False, True, True, False]))] += 1
    same(xn, a)
    a, xn = x.clone(), nd(x)
    a.index_put_((mask,), torch.tensor(3.0), accumulate=True)
    xn.index_put_((nd(mask),), torch.tensor(3.0), accumulate=True)
    same(xn, a)
    same(nd(x).index_put((nd(torch.tensor([2])),), nd(torch.ones(6))),
         x.index_put((torch.tensor([2]),), torch.ones(6)))
    a, xn = x.clone(), nd(x)  # CPU index tensors (and a CPU mask) on a neuron tensor
    a[torch.tensor([3, 1])] = torch.arange(6.0)
    xn[torch.tensor([3, 1])] = nd(torch.arange(6.0))
    a[mask] = 0.25
    xn[mask] = 0.25
    same(xn, a)


def test_index_put_errors_match_cpu():
    x = torch.randn(4, 3)
    with pytest.raises(RuntimeError, match="dtypes match"):
        nd(x).index_put_((nd(torch.tensor([0])),), nd(torch.tensor([1.0], dtype=torch.float64)))
    with pytest.raises(RuntimeError, match="shape mismatch"):
        nd(x).index_put_((nd(torch.tensor([0, 1])),), nd(torch.ones(3, 3)))


def test_index_put_accumulate_is_deterministic():
    torch.manual_seed(0)
    x = torch.randn(50, 16)
    index = torch.randint(0, 50, (20000,))
    values = torch.randn(20000, 16)
    results = []
    for _ in range(3):
        xn = nd(x)
        xn.index_put_((nd(index),), nd(values), accumulate=True)
        results.append(xn.cpu())
    assert torch.equal(results[0], results[1]) and torch.equal(results[0], results[2])
    # The CPU sums in another order: equal up to rounding.
    torch.testing.assert_close(results[0], x.index_put((index,), values, accumulate=True),
                               rtol=1e-5, atol=1e-4)


# ---- masked_select, nonzero ---------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_masked_select_every_dtype(dtype, layout):
    x = make((5, 7), dtype)
    mask = torch.rand(5, 7) > 0.5
    same(layout(x).masked_select(layout(mask)), x.masked_select(mask))
    row_mask = torch.rand(5, 1) > 0.5
    same(layout(x).masked_select(nd(row_mask)), x.masked_select(row_mask))
    same(nd(x[0]).masked_select(nd(mask)), x[0].masked_select(mask))


def test_masked_select_empty_scalar_and_out():
    x = torch.randn(3, 4)
    same(nd(x).masked_select(nd(torch.zeros(3, 4, dtype=torch.bool))),
         x.masked_select(torch.zeros(3, 4, dtype=torch.bool)))
    same(nd(torch.tensor(2.0)).masked_select(nd(torch.tensor(True))),
         torch.tensor(2.0).masked_select(torch.tensor(True)))
    same(nd(torch.empty(0, 4)).masked_select(nd(torch.ones(4, dtype=torch.bool))),
         torch.empty(0, 4).masked_select(torch.ones(4, dtype=torch.bool)))
    out = torch.empty(0, device=DEV)
    mask = x > 0
    torch.masked_select(nd(x), nd(mask), out=out)
    same(out, x.masked_select(mask))
    with pytest.raises(RuntimeError, match="expected BoolTensor"):
        nd(x).masked_select(nd(mask.to(torch.uint8)))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_nonzero_every_dtype(dtype, layout):
    x = make((6, 5, 3), dtype, -1, 2)
    if dtype.is_floating_point:
        x[0, 0, 0], x[1, 1, 1] = -0.0, float("nan")
    same(layout(x).nonzero(), x.nonzero())
    for a, b in zip(layout(x).nonzero(as_tuple=True), x.nonzero(as_tuple=True)):
        same(a, b)
    same(torch.argwhere(layout(x)), torch.argwhere(x))


def test_nonzero_scalar_empty_large_and_out():
    for v in (0.0, 3.0):
        same(nd(torch.tensor(v)).nonzero(), torch.tensor(v).nonzero())
    same(nd(torch.empty(0, 3)).nonzero(), torch.empty(0, 3).nonzero())
    big = torch.rand(300, 700) > 0.7  # many chunks, counted in parallel
    same(nd(big).nonzero(), big.nonzero())
    same(transposed(big).nonzero(), big.nonzero())
    out = torch.empty(0, dtype=torch.long, device=DEV)
    torch.nonzero(nd(big), out=out)
    same(out, big.nonzero())


def test_nonzero_static_pads_and_truncates():
    x = torch.tensor([[0, 3, 0], [1, 0, 2]])
    for size in (0, 2, 3, 6):
        same(torch.nonzero_static(nd(x), size=size), torch.nonzero_static(x, size=size))
        same(torch.nonzero_static(transposed(x), size=size, fill_value=7),
             torch.nonzero_static(x, size=size, fill_value=7))
    out = torch.empty(0, dtype=torch.long, device=DEV)
    torch.nonzero_static(nd(x), size=4, out=out)
    same(out, torch.nonzero_static(x, size=4))


def test_where_with_one_argument_is_nonzero():
    mask = torch.randn(7, 3) > 0
    for a, b in zip(torch.where(nd(mask)), torch.where(mask)):
        same(a, b)


# ---- embedding ----------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_embedding_forward_and_backward(dtype):
    weight = torch.randn(20, 8).to(dtype)
    indices = torch.randint(0, 20, (4, 6))
    indices[0, :3] = 2
    for index_dtype in (torch.int64, torch.int32):
        for padding_idx, scale in [(None, False), (2, False), (None, True), (-18, True)]:
            w = weight.clone().requires_grad_()
            wn = nd(weight).requires_grad_()
            i = indices.to(index_dtype)
            out = F.embedding(i, w, padding_idx=padding_idx, scale_grad_by_freq=scale)
            outn = F.embedding(nd(i), wn, padding_idx=padding_idx, scale_grad_by_freq=scale)
            same(outn, out.detach())
            grad = torch.randn(4, 6, 8).to(dtype)
            out.backward(grad)
            outn.backward(nd(grad))
            tol = 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-6
            torch.testing.assert_close(wn.grad.cpu(), w.grad, rtol=tol, atol=tol)


def test_embedding_dense_backward_direct():
    grad = torch.randint(-3, 4, (5, 7, 3)).float()
    indices = torch.randint(0, 9, (5, 7))
    same(torch.ops.aten.embedding_dense_backward(nd(grad), nd(indices), 9, -1, False),
         torch.ops.aten.embedding_dense_backward(grad, indices, 9, -1, False))
    torch.testing.assert_close(
        torch.ops.aten.embedding_dense_backward(transposed(grad), nd(indices.int()), 9, 4, True).cpu(),
        torch.ops.aten.embedding_dense_backward(grad, indices.int(), 9, 4, True))


# ---- one_hot, bincount, searchsorted ------------------------------------------------

def test_one_hot():
    x = torch.tensor([[3, 0], [1, 1], [0, 2]])
    same(F.one_hot(nd(x)), F.one_hot(x))
    same(F.one_hot(nd(x), 6), F.one_hot(x, 6))
    same(F.one_hot(transposed(x), 4), F.one_hot(x, 4))
    same(F.one_hot(nd(torch.tensor([], dtype=torch.long)), 3), F.one_hot(torch.tensor([], dtype=torch.long), 3))
    with pytest.raises(RuntimeError, match="non-negative"):
        F.one_hot(nd(torch.tensor([1, -1])))


@pytest.mark.parametrize("values,num_classes", [([3, 4, 1, 0], 3), ([3, 4, -1, 0], -1), ([3, -4, 1], 6),
                                                ([1, 2], 0), ([0, 5], -3)])
def test_one_hot_bad_classes_raise_at_the_call(values, num_classes):
    # as on the CPU (whose kernel reads min and max back): no synchronisation
    # needed to see the error
    with pytest.raises(RuntimeError) as cpu:
        F.one_hot(torch.tensor(values), num_classes)
    with pytest.raises(RuntimeError) as got:
        F.one_hot(nd(torch.tensor(values)), num_classes)
    assert str(got.value).split("\n")[0] == str(cpu.value).split("\n")[0]


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64])
def test_bincount(dtype):
    x = torch.randint(0, 9, (50,)).to(dtype)
    same(torch.bincount(nd(x)), torch.bincount(x))
    same(torch.bincount(nd(x), minlength=15), torch.bincount(x, minlength=15))
    same(torch.bincount(strided(x)), torch.bincount(x))
    for wdtype in (torch.float32, torch.float64, torch.int32, torch.float16):
        w = torch.randint(-3, 4, (50,)).to(wdtype)
        same(torch.bincount(nd(x), nd(w)), torch.bincount(x, w))
    same(torch.bincount(nd(torch.tensor([], dtype=dtype)), minlength=3),
         torch.bincount(torch.tensor([], dtype=dtype), minlength=3))
    if dtype != torch.uint8:
        with pytest.raises(RuntimeError, match="non-negative"):
            torch.bincount(nd(torch.tensor([1, -2], dtype=dtype)))


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
def test_searchsorted_every_dtype(dtype):
    boundaries = torch.sort(make((30,), dtype, -20, 20)).values
    values = make((4, 9), dtype, -25, 25)
    for right in (False, True):
        same(torch.searchsorted(nd(boundaries), nd(values), right=right),
             torch.searchsorted(boundaries, values, right=right))
        same(torch.searchsorted(nd(boundaries), transposed(values), side="right" if right else "left",
                                out_int32=True),
             torch.searchsorted(boundaries, values, side="right" if right else "left", out_int32=True))


def test_searchsorted_sorter_nd_scalar_nan_and_out():
    perm = torch.randperm(10)
    sorted_values = torch.arange(10.0) * 2
    unsorted = torch.empty(10)
    unsorted[perm] = sorted_values
    values = torch.tensor([-1.0, 0.0, 3.0, 4.0, 18.0, 25.0, float("nan")])
    same(torch.searchsorted(nd(unsorted), nd(values), sorter=nd(perm)),
         torch.searchsorted(unsorted, values, sorter=perm))
    rows = torch.sort(torch.randn(3, 8), dim=1).values
    queries = torch.randn(3, 5)
    same(torch.searchsorted(nd(rows), nd(queries), right=True), torch.searchsorted(rows, queries, right=True))
    nan_bounds = torch.tensor([1.0, 2.0, float("nan")])
    same(torch.searchsorted(nd(nan_bounds), nd(values)), torch.searchsorted(nan_bounds, values))
    same(torch.searchsorted(nd(sorted_values), 5), torch.searchsorted(sorted_values, 5))
    same(torch.searchsorted(nd(sorted_values.int()), nd(values[:-1])),
         torch.searchsorted(sorted_values.int(), values[:-1]))
    out = torch.empty(0, dtype=torch.long, device=DEV)
    torch.searchsorted(nd(sorted_values), nd(values), out=out)
    same(out, torch.searchsorted(sorted_values, values))
    empty = torch.tensor([])
    same(torch.searchsorted(nd(empty), nd(values)), torch.searchsorted(empty, values))


# ---- out-of-range indices -------------------------------------------------------

# With NEURON_LAUNCH_BLOCKING=1 a kernel's error surfaces at the call itself
# (test_blocking_launch_raises_at_the_call covers that mode).
asynchronous = pytest.mark.skipif(os.environ.get("NEURON_LAUNCH_BLOCKING") == "1",
                                  reason="kernel errors surface at the call when launches block")


def bad_ops():
    x = nd(torch.arange(15.0).reshape(3, 5))
    return [
        ("index_select", lambda b: x.index_select(1, nd(torch.tensor([0, b])))),
        ("gather", lambda b: x.gather(1, nd(torch.tensor([[0], [b], [1]])))),
        ("scatter", lambda b: x.clone().scatter_(1, nd(torch.tensor([[b]])), 1.0)),
        ("scatter_add", lambda b: x.scatter_add(1, nd(torch.tensor([[b]])), x)),
        ("scatter_reduce", lambda b: x.scatter_reduce(1, nd(torch.tensor([[b]])), x, "amax")),
        ("index_add", lambda b: x.index_add(1, nd(torch.tensor([b])), x[:, :1])),
        ("index", lambda b: x[:, nd(torch.tensor([1, b]))]),
        ("index_put", lambda b: x.clone().index_put_((nd(torch.tensor([0])), nd(torch.tensor([b]))),
                                                      nd(torch.tensor(1.0)), accumulate=True)),
        ("index_select", lambda b: F.embedding(nd(torch.tensor([[0, b]])), x.t())),
        ("embedding_dense_backward",
         lambda b: torch.ops.aten.embedding_dense_backward(nd(torch.ones(2, 3)), nd(torch.tensor([0, b])), 5, -1, False)),
        ("index_copy", lambda b: x.index_copy(1, nd(torch.tensor([b])), x[:, :1])),
        ("index_fill", lambda b: x.index_fill(1, nd(torch.tensor([b])), 2.0)),
        ("take", lambda b: x[:1].take(nd(torch.tensor([[b]])))),
        ("put", lambda b: x[:1].clone().put_(nd(torch.tensor([b])), nd(torch.tensor([1.0])))),
    ]


@asynchronous
@pytest.mark.parametrize("case", range(14))
def test_out_of_range_index_raises_index_error_at_sync(case):
    name, op = bad_ops()[case]
    op(7)
    with pytest.raises(IndexError, match=f"^{name}: index 7 is out of bounds for dimension [01] with size 5"):
        torch.neuron.synchronize()
    torch.neuron.clear_error()
    flag = nd(torch.zeros(3))
    result = op(-6)
    try:
        flag.fill_(1.0)  # after the bad op: skipped if queued before it failed, else refused
    except IndexError as e:
        assert f"{name}: index -6 is out of bounds" in str(e), e
    with pytest.raises(IndexError, match=f"{name}: index -6 is out of bounds"):
        result.cpu()
    with pytest.raises(IndexError, match=f"{name}: index -6 is out of bounds"):
        flag.cpu()  # sticky: the skipped fill never reads back as a result
    torch.neuron.clear_error()
    same(flag, torch.zeros(3))
    same(flag.fill_(2.0), torch.full((3,), 2.0))  # the stream works again


def test_blocking_launch_raises_at_the_call():
    script = textwrap.dedent("""
        import torch, torchneuron
        x = torch.arange(5.0).to("neuron")
        try:
            x.index_select(0, torch.tensor([5]).to("neuron"))
        except IndexError as e:
            assert str(e).startswith("index_select: index 5 is out of bounds"), e
            print("raised at the call")
        torch.neuron.clear_error()
        print(x.index_select(0, torch.tensor([4]).to("neuron")).cpu().item())
    """)
    env = dict(os.environ, NEURON_LAUNCH_BLOCKING="1")
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["raised", "at", "the", "call", "4.0"]


def test_negative_index_semantics_per_op():
    x = torch.arange(12.0).reshape(3, 4)
    index = torch.tensor([-1, 0])
    same(nd(x)[nd(index)], x[index])
    a, xn = x.clone(), nd(x)
    a[index] = 5.0
    xn[nd(index)] = 5.0
    same(xn, a)
    for op in (lambda t, i: t.index_select(0, i), lambda t, i: t.gather(0, i.view(2, 1)),
               lambda t, i: t.index_add(0, i, t[:2]), lambda t, i: t.scatter_add(0, i.view(2, 1), t)):
        with pytest.raises(IndexError, match="index -1 is out of bounds"):
            op(nd(x), nd(index)).cpu()
        torch.neuron.clear_error()  # or the next op would only report this one's error


@asynchronous
def test_pending_index_error_surfaces_at_nonzero_sync():
    x = nd(torch.arange(6.0))
    x.index_select(0, nd(torch.tensor([9])))
    with pytest.raises(IndexError, match="index_select: index 9"):
        x.nonzero()
    torch.neuron.clear_error()
    same(x.nonzero(), torch.arange(6.0).nonzero())


# Calls with an index out of range, f(to_device): the CPU raises RuntimeError
# for some (gather, scatter*, index_add, one_hot, ...) and IndexError for
# others (x[i], take, embedding, nll_loss, ...); neuron's error must be an
# instance of the CPU's, at the call or at the next synchronisation.
_X = torch.arange(6.0).reshape(2, 3)
BAD_INDEX_CALLS = {
    "gather": lambda d: d(_X).gather(1, d(torch.tensor([[0, 5]]))),
    "gather_negative": lambda d: d(_X).gather(1, d(torch.tensor([[0, -4]]))),
    "gather_empty_dim": lambda d: d(torch.empty(2, 0)).gather(1, d(torch.tensor([[0]]))),
    "scatter": lambda d: d(_X).clone().scatter_(1, d(torch.tensor([[5]])), 1.0),
    "scatter_src": lambda d: d(_X).clone().scatter_(1, d(torch.tensor([[5]])), d(torch.ones(1, 1))),
    "scatter_add": lambda d: d(_X).scatter_add(1, d(torch.tensor([[0, 5]])), d(torch.ones(1, 2))),
    "scatter_reduce": lambda d: d(_X).scatter_reduce(1, d(torch.tensor([[5]])), d(torch.ones(1, 1)), "amax"),
    "scatter_empty_dim": lambda d: d(torch.empty(2, 0)).scatter_(1, d(torch.tensor([[0]])), 1.0),
    "index_select": lambda d: d(_X).index_select(1, d(torch.tensor([5]))),
    "index_select_int32": lambda d: d(_X.long()).index_select(0, d(torch.tensor([2], dtype=torch.int32))),
    "index_select_empty_dim": lambda d: d(torch.empty(2, 0)).index_select(1, d(torch.tensor([0]))),
    "index_add": lambda d: d(_X).index_add(1, d(torch.tensor([5])), d(torch.ones(2, 1))),
    "index_copy": lambda d: d(_X).index_copy(1, d(torch.tensor([5])), d(torch.ones(2, 1))),
    "index_fill": lambda d: d(_X).index_fill(1, d(torch.tensor([5])), 1.0),
    "getitem": lambda d: d(_X)[d(torch.tensor([5]))],
    "setitem": lambda d: d(_X).clone().__setitem__(d(torch.tensor([5])), 1.0),
    "index_put_accumulate": lambda d: d(_X).clone().index_put_((d(torch.tensor([5])),), d(torch.tensor(1.0)),
                                                               accumulate=True),
    "take": lambda d: d(_X).take(d(torch.tensor([10]))),
    "put": lambda d: d(_X).clone().put_(d(torch.tensor([10])), d(torch.tensor([1.0]))),
    "embedding": lambda d: F.embedding(d(torch.tensor([5])), d(_X)),
    "nll_loss": lambda d: F.nll_loss(d(_X), d(torch.tensor([0, 7]))),
    "cross_entropy": lambda d: F.cross_entropy(d(_X), d(torch.tensor([0, 7]))),
    "one_hot": lambda d: F.one_hot(d(torch.tensor([3])), 2),
    "searchsorted_sorter": lambda d: torch.searchsorted(d(torch.tensor([1.0, 2.0])), d(torch.tensor([1.5])),
                                                        sorter=d(torch.tensor([0, 5]))),
}


def neuron_error(call):
    """What call raises on neuron, at the call or at the synchronisation."""
    try:
        result = call(nd)
        if isinstance(result, torch.Tensor):
            result.cpu()
        torch.neuron.synchronize()
    except Exception as e:  # noqa: BLE001 - compared with the CPU's below
        torch.neuron.clear_error()
        return e
    return None


@pytest.mark.parametrize("name", sorted(BAD_INDEX_CALLS))
def test_out_of_range_index_raises_an_instance_of_what_the_cpu_raises(name):
    call = BAD_INDEX_CALLS[name]
    with pytest.raises((IndexError, RuntimeError)) as on_cpu:
        call(lambda t: t)
    cpu_type = type(on_cpu.value)
    error = neuron_error(call)
    assert isinstance(error, cpu_type), (cpu_type, type(error), error)
    same(nd(_X) + 1, _X + 1)  # the stream works again


def test_except_runtime_error_catches_a_bad_gather_index():
    x = nd(torch.arange(5.0))
    try:
        x.gather(0, nd(torch.tensor([7]))).cpu()
    except RuntimeError as e:
        assert isinstance(e, torchneuron.IndexOutOfRangeError) and isinstance(e, IndexError)
        assert str(e).startswith("gather: index 7 is out of bounds for dimension 0 with size 5"), e
    else:
        pytest.fail("no error")
    assert issubclass(torchneuron.IndexOutOfRangeError, IndexError)
    assert issubclass(torchneuron.IndexOutOfRangeError, RuntimeError)


def test_argument_errors_match_cpu():
    x = torch.randn(3, 4)
    with pytest.raises(IndexError, match="Index is supposed to be a vector"):
        nd(x).index_select(0, nd(torch.tensor([[0]])))
    with pytest.raises(RuntimeError, match="int32 or int64"):
        nd(x).index_select(0, nd(torch.tensor([0], dtype=torch.int16)))
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        nd(x).gather(0, nd(torch.tensor([0])))
    with pytest.raises(IndexError, match="long, int, byte or bool"):
        nd(x)[nd(torch.tensor([0], dtype=torch.int16))]
    with pytest.raises(RuntimeError, match="same device"):
        nd(x).gather(0, torch.tensor([[0]]))


# ---- determinism across thread counts ---------------------------------------------

DETERMINISM_SCRIPT = textwrap.dedent("""
    import hashlib, torch, torchneuron
    torch.manual_seed(0)
    x = torch.randn(64, 32)
    rows = torch.randint(0, 64, (4096,))
    values = torch.randn(4096, 32)
    h = hashlib.sha256()
    def put(t):
        h.update(t.cpu().numpy().tobytes())
    xn, rn, vn = x.to("neuron"), rows.to("neuron"), values.to("neuron")
    put(xn.index_put((rn,), vn, accumulate=True))
    put(xn.index_add(0, rn, vn, alpha=0.3))
    put(xn.scatter_add(0, rn[:, None].expand(-1, 32), vn))
    put(xn.scatter_reduce(0, rn[:, None].expand(-1, 32), vn, "mean", include_self=False))
    put(xn.scatter_reduce(0, rn[:, None].expand(-1, 32), vn, "prod"))
    put(torch.ops.aten.embedding_dense_backward(vn, rn, 64, 3, True))
    put(torch.bincount(rn, vn[:, 0]))
    put(vn.flatten()[rn.repeat(40)])
    print(h.hexdigest())
""")


def test_results_do_not_depend_on_thread_count():
    assert len(outputs_by_thread_count(DETERMINISM_SCRIPT)) == 1
