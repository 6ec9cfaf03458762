"""embedding_bag on neuron against PyTorch CPU: sum, mean and max bags,
per_sample_weights, padding_idx, offsets with and without the last offset,
2-d input, empty bags and zero sizes, non-contiguous weight and indices,
int32 and int64 indices, every floating dtype; gradients of the weight and of
per_sample_weights (scale_grad_by_freq too); errors for bad input. Every test
asserts that no op ran through the CPU fallback.
"""

import pytest
import torch
import torch.nn.functional as F

import torchneuron

DEV = "neuron"
FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
TOL = {torch.float16: (1e-2, 1e-2), torch.bfloat16: (2e-2, 2e-2), torch.float32: (1e-5, 1e-5),
       torch.float64: (1e-12, 1e-12)}


@pytest.fixture(autouse=True)
def no_fallback():
    torchneuron.clear_op_tracking()
    yield
    assert torchneuron.get_fallback_ops() == {}


def weight(v, d, dtype, seed=0, transposed=False):
    g = torch.Generator().manual_seed(seed)
    # small integers: sums and means are exact in every dtype
    w = torch.randint(-8, 9, (d, v) if transposed else (v, d), generator=g).to(dtype)
    return w.t() if transposed else w


def run(w, indices, offsets=None, grad_psw=False, **kw):
    """F.embedding_bag on both devices, forward and backward; returns
    (cpu results, neuron results) as lists of tensors."""
    results = []
    for device in ("cpu", DEV):
        wl = w.detach().to(device).requires_grad_()
        psw = kw.get("per_sample_weights")
        args = dict(kw)
        leaves = [wl]
        if psw is not None:
            pl = psw.detach().to(device).requires_grad_(grad_psw)
            args["per_sample_weights"] = pl
            if grad_psw:
                leaves.append(pl)
        out = F.embedding_bag(indices.to(device), wl, None if offsets is None else offsets.to(device), **args)
        g = torch.Generator().manual_seed(3)
        gout = torch.randint(-3, 4, out.shape, generator=g).to(out.dtype).to(device)
        grads = torch.autograd.grad((out * gout).sum(), leaves)
        results.append([out.detach().cpu()] + [t.cpu() for t in grads])
    return results


def assert_same(cpu, dev, dtype):
    for e, g in zip(cpu, dev):
        assert g.dtype == e.dtype and g.shape == e.shape
        torch.testing.assert_close(g, e, rtol=TOL[dtype][0], atol=TOL[dtype][1], equal_nan=True)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_modes_with_offsets_padding_and_gradients(dtype, mode):
    w = weight(12, 5, dtype)
    indices = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7])
    offsets = torch.tensor([0, 3, 3, 7, 12])  # an empty bag, a bag of one padding row
    for padding_idx in (None, 5):
        cpu, dev = run(w, indices, offsets, mode=mode, padding_idx=padding_idx)
        assert_same(cpu, dev, dtype)


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_scale_grad_by_freq_divides_each_row_by_its_count(mode):
    """The gradient of row r is divided by the number of times r occurs in
    the indices (as embedding's is). PyTorch's CPU embedding_bag gets this
    wrong (it divides by the count of the index at the group's position in
    the sorted indices, not of the group's own index: rows 3 and 4 below get
    1 / 1 and 1 / 2 where they occur 2 and 1 times); the reference here is
    the unscaled CPU gradient divided by the counts."""
    w = weight(12, 5, torch.float64)
    indices = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7])
    offsets = torch.tensor([0, 3, 3, 7, 12])
    counts = torch.bincount(indices, minlength=12).clamp(min=1).double().unsqueeze(1)
    for padding_idx in (None, 5):
        cpu, _ = run(w, indices, offsets, mode=mode, padding_idx=padding_idx)
        _, dev = run(w, indices, offsets, mode=mode, padding_idx=padding_idx, scale_grad_by_freq=True)
        assert_same([cpu[0], cpu[1] / counts], dev, torch.float64)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_per_sample_weights_and_their_gradient(dtype):
    w = weight(10, 4, dtype)
    indices = torch.tensor([0, 2, 4, 6, 8, 1, 3, 9])
    offsets = torch.tensor([0, 2, 5])
    psw = torch.arange(-3, 5).to(dtype) / 2
    for padding_idx in (None, 4):
        cpu, dev = run(w, indices, offsets, grad_psw=True, mode="sum", per_sample_weights=psw,
                       padding_idx=padding_idx)
        assert_same(cpu, dev, dtype)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_include_last_offset_2d_input_and_int32_indices(mode):
    w = weight(9, 3, torch.float32)
    indices = torch.tensor([1, 2, 3, 4, 5, 6, 7, 8])
    cpu, dev = run(w, indices, torch.tensor([0, 2, 5, 8]), mode=mode, include_last_offset=True)
    assert_same(cpu, dev, torch.float32)
    cpu, dev = run(w, indices.view(2, 4), mode=mode)  # 2-d input: one bag per row
    assert_same(cpu, dev, torch.float32)
    cpu, dev = run(w, indices.int(), torch.tensor([0, 3], dtype=torch.int32), mode=mode)
    assert_same(cpu, dev, torch.float32)
    cpu, dev = run(w, indices.int(), torch.tensor([0, 3]), mode=mode)  # mixed index dtypes
    assert_same(cpu, dev, torch.float32)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_large_table_across_threads(mode):
    """Enough rows and indices for the kernels' parallel paths: bags split
    over threads with rows fetched ahead (float32 rows of 40 floats, bags
    of 0 to 30 indices, repeated rows, a padding row), and the backward's
    weight rows split between threads; per_sample_weights in sum mode."""
    g = torch.Generator().manual_seed(1)
    w = torch.randn(3000, 40, generator=g)
    indices = torch.randint(0, 3000, (6000,), generator=g)
    offsets = torch.cat([torch.zeros(1, dtype=torch.long),
                         torch.randint(0, 31, (399,), generator=g).cumsum(0).clamp(max=6000)])
    kw = {"per_sample_weights": torch.randn(6000, generator=g)} if mode == "sum" else {}
    cpu, dev = run(w, indices, offsets, mode=mode, padding_idx=int(indices[5]), grad_psw=mode == "sum", **kw)
    # float32 sums of up to 30 terms, in other orders than the CPU's for the gradient
    for e, got in zip(cpu, dev):
        torch.testing.assert_close(got, e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_non_contiguous_weight_and_indices(mode):
    w = weight(11, 6, torch.float32, transposed=True)
    assert not w.is_contiguous()
    indices = torch.tensor([0, 9, 1, 8, 2, 7, 3, 6, 4, 5, 10, 0])[::2]
    assert not indices.is_contiguous()
    cpu, dev = run(w, indices, torch.tensor([0, 1, 4]), mode=mode)
    assert_same(cpu, dev, torch.float32)
    wide = weight(11, 12, torch.float32)[:, ::2]  # strided columns
    cpu, dev = run(wide, indices, torch.tensor([0, 2]), mode=mode)
    assert_same(cpu, dev, torch.float32)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_zero_sizes(mode):
    w = weight(6, 3, torch.float32)
    for indices, offsets in ((torch.tensor([], dtype=torch.long), torch.tensor([0, 0])),
                             (torch.tensor([1, 2]), torch.tensor([], dtype=torch.long))):
        got = F.embedding_bag(indices.to(DEV), w.to(DEV), offsets.to(DEV), mode=mode)
        # no bags at all: PyTorch's CPU crashes on this in max mode (a CPU bug), so its
        # result is stated here
        expected = (F.embedding_bag(indices, w, offsets, mode=mode) if offsets.numel() else torch.empty(0, 3))
        assert got.shape == expected.shape
        torch.testing.assert_close(got.cpu(), expected)
    empty_rows = torch.empty(6, 0)
    got = F.embedding_bag(torch.tensor([1, 2]).to(DEV), empty_rows.to(DEV), torch.tensor([0]).to(DEV), mode=mode)
    assert got.shape == (1, 0)


def test_module_trains_like_cpu():
    torch.manual_seed(0)
    cpu = torch.nn.EmbeddingBag(20, 8, mode="mean")
    dev = torch.nn.EmbeddingBag(20, 8, mode="mean").to(DEV)
    dev.load_state_dict(cpu.state_dict())
    indices = torch.randint(0, 20, (30,))
    offsets = torch.tensor([0, 4, 10, 10, 21])
    for m, device in ((cpu, "cpu"), (dev, DEV)):
        opt = torch.optim.SGD(m.parameters(), lr=0.5)
        for _ in range(3):
            opt.zero_grad()
            m(indices.to(device), offsets.to(device)).pow(2).sum().backward()
            opt.step()
    torch.testing.assert_close(dev.weight.detach().cpu(), cpu.weight.detach(), rtol=1e-5, atol=1e-6)


def test_errors_match_cpu():
    w = weight(10, 3, torch.float32)

    def both(fn, exc, match):
        """The CPU raises at the call; neuron raises at the call what the host
        knows, and what the kernel finds in the data (offsets, indices) at the
        next synchronisation, as an IndexOutOfRangeError (a RuntimeError)."""
        with pytest.raises(exc, match=match):
            fn(torch.device("cpu"))
        with pytest.raises(exc, match=match):
            try:
                fn(torch.device(DEV))
                torch.neuron.synchronize()
            finally:
                torch.neuron.clear_error()

    def bag(indices, offsets, **kw):
        return lambda d: F.embedding_bag(indices.to(d), w.to(d), offsets.to(d), **kw).cpu()

    both(bag(torch.tensor([1, 2, 3, 4]), torch.tensor([1, 2])), RuntimeError, r"offsets\[0\] has to be 0")
    both(bag(torch.tensor([1, 2, 3, 4]), torch.tensor([0, 5])), RuntimeError,
         r"offsets\[-1\] can not be greater than input's length 4")
    both(bag(torch.tensor([1, 2, 13]), torch.tensor([0])), RuntimeError,
         r"Index 2 of input takes value 13 which is not in the valid range \[0, 10\)")
    both(bag(torch.tensor([1, -1]), torch.tensor([0])), RuntimeError, r"takes value -1")
    both(bag(torch.tensor([1, 2]), torch.tensor([0]), mode="max", per_sample_weights=torch.ones(2)),
         NotImplementedError, "only supported for mode='sum'")
    both(lambda d: torch.ops.aten._embedding_bag(w.to(d), torch.tensor([1., 2]).to(d), torch.tensor([0]).to(d)),
         RuntimeError, "'indices' to have one of the following scalar types: Long, Int")
    both(lambda d: torch.ops.aten._embedding_bag(w.int().to(d), torch.tensor([1]).to(d), torch.tensor([0]).to(d)),
         RuntimeError, "'weight' to have one of the following scalar types")
    both(lambda d: torch.ops.aten._embedding_bag(w.to(d), torch.tensor([1]).to(d), torch.tensor([0]).to(d),
                                                 False, 3), RuntimeError, "`mode` must be sum, mean, or max")
    both(lambda d: torch.ops.aten._embedding_bag(w.to(d), torch.tensor([1, 2]).to(d), torch.tensor([0]).to(d),
                                                 False, 0, False, torch.ones(2, dtype=torch.double).to(d)),
         RuntimeError, "to have the same type as tensor for argument #1 'per_sample_weights'")
    # the device stays usable after a kernel error
    ok = F.embedding_bag(torch.tensor([1, 2]).to(DEV), w.to(DEV), torch.tensor([0]).to(DEV))
    torch.testing.assert_close(ok.cpu(), F.embedding_bag(torch.tensor([1, 2]), w, torch.tensor([0])))


def test_ran_natively():
    w = weight(6, 2, torch.float32).to(DEV).requires_grad_()
    out = F.embedding_bag(torch.tensor([1, 2, 3]).to(DEV), w, torch.tensor([0, 1]).to(DEV), mode="mean")
    out.sum().backward()
    ops = torchneuron.get_executed_ops()
    assert "aten::_embedding_bag" in ops and "aten::_embedding_bag_backward" in ops


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("norm_type", [1.0, 2.0, 3.5])
def test_max_norm_renormalises_the_rows_used_in_place(dtype, norm_type):
    """max_norm (aten::embedding_renorm_): every row the indices name, once,
    scaled to norm max_norm when its norm exceeds it; other rows untouched."""
    g = torch.Generator().manual_seed(2)
    w = (torch.randn(10, 6, generator=g) * 3).to(dtype)
    indices = torch.tensor([[1, 4, 4], [7, 1, 0]])
    wc, wn = w.clone(), w.clone().to(DEV)
    out_c = F.embedding(indices, wc, max_norm=2.0, norm_type=norm_type)
    out_n = F.embedding(indices.to(DEV), wn, max_norm=2.0, norm_type=norm_type)
    torch.testing.assert_close(out_n.cpu(), out_c)
    torch.testing.assert_close(wn.cpu(), wc)
    wc, wn = w.clone(), w.clone().to(DEV)
    bag_c = F.embedding_bag(indices.view(-1), wc, torch.tensor([0, 2]), max_norm=1.5, norm_type=norm_type)
    bag_n = F.embedding_bag(indices.view(-1).to(DEV), wn, torch.tensor([0, 2]).to(DEV), max_norm=1.5,
                            norm_type=norm_type)
    torch.testing.assert_close(bag_n.cpu(), bag_c)
    torch.testing.assert_close(wn.cpu(), wc)
    assert "aten::embedding_renorm_" in torchneuron.get_executed_ops()
