"""Normalisation, softmax and loss ops on neuron against PyTorch CPU.

Every case runs the same call on CPU tensors and on their neuron twins (the
same values and the same view: contiguous, transposed or sliced), compares
the results and, through torch.autograd on both devices, the gradients of
every input that takes one, and checks that no op fell back to the CPU.
float16/bfloat16 tolerances allow a few units in the last place: both
devices accumulate in float32 but round intermediate steps differently.
"""

import warnings

import pytest
import torch
import torch.nn.functional as F

import torchneuron
from conftest import check_output, run_python

FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
TOL = {torch.float32: (2e-5, 2e-5), torch.float64: (1e-10, 1e-10),
       torch.bfloat16: (2e-2, 2e-2), torch.float16: (4e-3, 4e-3)}
GRAD_TOL = {torch.float32: (1e-4, 1e-4), torch.float64: (1e-9, 1e-9),
            torch.bfloat16: (6e-2, 6e-2), torch.float16: (1e-2, 1e-2)}

LAYOUTS = {
    "contiguous": (lambda s: s, lambda t: t),
    "transposed": (lambda s: s[::-1], lambda t: t.permute(*reversed(range(t.dim())))),
    "sliced": (lambda s: s[:-1] + (2 * s[-1],), lambda t: t[..., ::2]),
}


def values(shape, dtype, low=-2.0, high=2.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (low + (high - low) * torch.rand(shape, generator=g, dtype=torch.float64)).to(dtype)


def twins(shape, dtype, layout="contiguous", low=-2.0, high=2.0, seed=0):
    """The same view of the same values on CPU and neuron (leaf tensors)."""
    storage, view = LAYOUTS[layout]
    base = values(storage(tuple(shape)), dtype, low, high, seed)
    return view(base), view(base.to("neuron"))


def assert_close(got, expected, tol):
    assert got.device.type == "neuron", got.device
    got = got.cpu()
    assert got.dtype == expected.dtype and got.shape == expected.shape, (got.dtype, got.shape, expected.dtype,
                                                                        expected.shape)
    torch.testing.assert_close(got, expected, rtol=tol[0], atol=tol[1], equal_nan=True)


def check(fn, cpu_inputs, dev_inputs, grad=(), tol=None, grad_tol=None, dtype=None):
    """fn on both devices: equal results and, for the inputs listed in grad,
    equal gradients of sum(result * w) for a random w; no CPU fallback."""
    dtype = dtype or next(t.dtype for t in cpu_inputs if isinstance(t, torch.Tensor) and t.is_floating_point())
    tol, grad_tol = tol or TOL[dtype], grad_tol or GRAD_TOL[dtype]
    cpu_leaves = [t.detach().requires_grad_() if k in grad else t for k, t in enumerate(cpu_inputs)]
    dev_leaves = [t.detach().requires_grad_() if k in grad else t for k, t in enumerate(dev_inputs)]
    expected = fn(*cpu_leaves)
    torchneuron.clear_op_tracking()
    got = fn(*dev_leaves)
    outs_e = expected if isinstance(expected, tuple) else (expected,)
    outs_g = got if isinstance(got, tuple) else (got,)
    for g, e in zip(outs_g, outs_e):
        assert_close(g, e, tol)
    if grad:
        weights = [values(e.shape, e.dtype, seed=7) for e in outs_e]
        loss_e = sum((e * w).sum() for e, w in zip(outs_e, weights) if e.requires_grad)
        loss_g = sum((g * w.to("neuron")).sum() for g, w in zip(outs_g, weights) if g.requires_grad)
        ge = torch.autograd.grad(loss_e, [cpu_leaves[k] for k in grad])
        gg = torch.autograd.grad(loss_g, [dev_leaves[k] for k in grad])
        for a, b in zip(gg, ge):
            assert_close(a, b, grad_tol)
    assert torchneuron.get_fallback_ops() == {}


def dev(t):
    return t.to("neuron") if isinstance(t, torch.Tensor) else t


# ---- softmax and log_softmax ---------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax], ids=["softmax", "log_softmax"])
def test_softmax_matches_cpu_for_every_dim_and_layout(fn, dtype):
    for layout in LAYOUTS:
        cpu, d = twins((5, 6, 7), dtype, layout, -4, 4)
        for dim in (0, 1, -1):
            check(lambda x: fn(x, dim), [cpu], [d], grad=(0,))


@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax], ids=["softmax", "log_softmax"])
def test_softmax_of_long_rows_and_wide_columns_matches_cpu(fn):
    cpu, d = twins((3, 5000), torch.float32, low=-20, high=20)
    check(lambda x: fn(x, -1), [cpu], [d], grad=(0,))
    cpu, d = twins((300, 200), torch.float32, low=-20, high=20)
    check(lambda x: fn(x, 0), [cpu], [d], grad=(0,))


@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax], ids=["softmax", "log_softmax"])
def test_softmax_of_zero_size_and_zero_dim_inputs(fn):
    for shape, dim in [((0, 5), 1), ((3, 0), 1), ((3, 0), 0), ((), 0), ((4,), 0)]:
        cpu, d = twins(shape, torch.float32)
        check(lambda x: fn(x, dim), [cpu], [d], grad=(0,))


def test_softmax_with_dtype_argument_computes_in_float32():
    cpu, d = twins((4, 9), torch.bfloat16)
    check(lambda x: F.log_softmax(x, 1, dtype=torch.float32), [cpu], [d], grad=(0,), dtype=torch.bfloat16)


@pytest.mark.parametrize("op", [torch._softmax, torch._log_softmax], ids=["softmax", "log_softmax"])
def test_half_to_float_softmax_gives_the_float32_result(op):
    cpu, d = twins((4, 33), torch.float16)
    torchneuron.clear_op_tracking()
    got = op(d, 1, True)
    assert got.dtype == torch.float32
    assert_close(got, op(cpu.float(), 1, False), TOL[torch.float32])
    grad = values((4, 33), torch.float32, seed=3)
    back = torch._softmax_backward_data if op is torch._softmax else torch._log_softmax_backward_data
    got_grad = back(grad.to("neuron"), got, 1, torch.float16)
    assert got_grad.dtype == torch.float16
    assert_close(got_grad, back(grad, op(cpu.float(), 1, False), 1, torch.float32).half(), TOL[torch.float16])
    assert torchneuron.get_fallback_ops() == {}


def test_softmax_out_variant_writes_a_non_contiguous_output():
    cpu, d = twins((6, 8), torch.float32)
    out = torch.empty(8, 6, device="neuron").t()
    torch._softmax(d, 1, False, out=out)
    assert_close(out, torch._softmax(cpu, 1, False), TOL[torch.float32])


@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax], ids=["softmax", "log_softmax"])
def test_bfloat16_rows_are_the_float32_result_rounded_once(fn):
    """Contiguous bfloat16 rows are converted by their own loops: forward
    and backward must give neuron's float32 result rounded once, bit for bit, for
    rows shorter than a vector, across vectors and across the float lanes'
    flush window, with NaN and infinities."""
    g = torch.Generator().manual_seed(3)
    for n in (5, 37, 768, 2500):
        x = (torch.randn(6, n, generator=g) * 6).to(torch.bfloat16)
        x[1, n // 2] = float("nan")
        x[2, 0] = float("inf")
        x[3, :] = -float("inf")
        x[4, n - 1] = -float("inf")
        got = fn(x.to("neuron"), -1).cpu()
        want = fn(x.float().to("neuron"), -1).cpu().to(torch.bfloat16)
        nan = want.isnan()
        assert torch.equal(got.isnan(), nan), n
        assert torch.equal(got.view(torch.int16)[~nan], want.view(torch.int16)[~nan]), n
        close = torch.isfinite(want.float())
        torch.testing.assert_close(got.float()[close], fn(x.float(), -1)[close], rtol=2**-8, atol=1e-6)
        # The backward rows too: bfloat16 gradient and output, converted by plain loops.
        back = torch._softmax_backward_data if fn is F.softmax else torch._log_softmax_backward_data
        gy = torch.randn(6, n, generator=g).to(torch.bfloat16)
        y = fn(x[4:].float(), -1).to(torch.bfloat16)
        got = back(gy[4:].to("neuron"), y.to("neuron"), -1, torch.bfloat16).cpu()
        want = back(gy[4:].float().to("neuron"), y.float().to("neuron"), -1, torch.float32).cpu().to(torch.bfloat16)
        assert torch.equal(got.view(torch.int16), want.view(torch.int16)), n
    assert torchneuron.get_fallback_ops() == {}


def test_softmax_propagates_nan_and_infinity_like_cpu():
    x = torch.tensor([[1.0, float("nan"), 2.0], [-float("inf")] * 3, [float("inf"), 0.0, 1.0], [0.0, -float("inf"), 1]])
    for fn in (F.softmax, F.log_softmax):
        check(lambda t: fn(t, 1), [x], [dev(x)])


@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax], ids=["softmax", "log_softmax"])
def test_bfloat16_rows_match_cpu_with_special_values(fn):
    """The contiguous bfloat16 row path (one pass converting and taking the
    maximum, next row prefetched): rows of 771 (vector body and tail) and
    5 (tail only), a row with NaN, one of -inf, one with +inf."""
    for n in (771, 5):
        x = (torch.randn(9, n) * 6).to(torch.bfloat16)
        x[2, n // 2] = float("nan")
        x[4] = -float("inf")
        x[6, n - 1] = float("inf")
        got = fn(x.to("neuron"), -1).cpu()
        want = fn(x, -1)
        torch.testing.assert_close(got.float(), want.float(), rtol=1e-2, atol=1e-2, equal_nan=True)
        assert torch.equal(got.isnan(), want.isnan())
    assert torchneuron.get_fallback_ops() == {}


# ---- layer norm and RMS norm ----------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("affine", [True, False], ids=["affine", "plain"])
def test_layer_norm_matches_cpu_with_gradients(dtype, affine):
    for layout in LAYOUTS:
        cpu, d = twins((4, 6, 16), dtype, layout, 1, 3)
        for shape in [(16,), (6, 16)]:
            w, b = values(shape, dtype, 0.5, 1.5, 1), values(shape, dtype, seed=2)
            args_c = [cpu, w, b] if affine else [cpu]
            args_d = [dev(a) for a in args_c]
            fn = (lambda x, w, b: F.layer_norm(x, shape, w, b)) if affine else (lambda x: F.layer_norm(x, shape))
            check(fn, args_c, args_d, grad=tuple(range(len(args_c))))


def test_layer_norm_with_float32_parameters_on_bfloat16_data():
    cpu, d = twins((5, 32), torch.bfloat16)
    w, b = values((32,), torch.float32, 0.5, 1.5, 1), values((32,), torch.float32, seed=2)
    check(lambda x, w, b: torch.native_layer_norm(x, (32,), w, b, 1e-5), [cpu, w, b], [d, dev(w), dev(b)],
          dtype=torch.bfloat16)
    check(lambda x, w, b: F.layer_norm(x, (32,), w, b), [cpu, w, b], [d, dev(w), dev(b)], grad=(0, 1, 2),
          dtype=torch.bfloat16)


def test_layer_norm_of_zero_size_batch():
    cpu, d = twins((0, 8), torch.float32)
    w, b = values((8,), torch.float32), values((8,), torch.float32)
    check(lambda x, w, b: F.layer_norm(x, (8,), w, b), [cpu, w, b], [d, dev(w), dev(b)], grad=(0, 1, 2))


def test_layer_norm_rejects_a_bad_normalized_shape_like_cpu():
    cpu, d = twins((4, 8), torch.float32)
    for x in (cpu, d):
        with pytest.raises(RuntimeError, match="normalized_shape"):
            F.layer_norm(x, (7,))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_rms_norm_matches_cpu_with_gradients(dtype):
    for layout in LAYOUTS:
        cpu, d = twins((3, 5, 12), dtype, layout)
        n = cpu.shape[-1]
        w = values((n,), dtype, 0.5, 1.5, 1)
        check(lambda x, w: F.rms_norm(x, (n,), w, 1e-6), [cpu, w], [d, dev(w)], grad=(0, 1))
        check(lambda x: F.rms_norm(x, (n,)), [cpu], [d], grad=(0,))


# ---- group norm -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_group_norm_matches_cpu_with_gradients(dtype):
    for layout in LAYOUTS:
        cpu, d = twins((3, 6, 5, 4), dtype, layout)
        c = cpu.shape[1]
        w, b = values((c,), dtype, 0.5, 1.5, 1), values((c,), dtype, seed=2)
        for groups in (1, 2, c):
            if c % groups:
                continue
            check(lambda x, w, b: F.group_norm(x, groups, w, b), [cpu, w, b], [d, dev(w), dev(b)], grad=(0, 1, 2))
        check(lambda x: F.group_norm(x, 1), [cpu], [d], grad=(0,))


def test_group_norm_of_zero_size_batch():
    cpu, d = twins((0, 4, 3), torch.float32)
    w, b = values((4,), torch.float32), values((4,), torch.float32)
    check(lambda x, w, b: F.group_norm(x, 2, w, b), [cpu, w, b], [d, dev(w), dev(b)], grad=(0, 1, 2))


# ---- batch norm --------------------------------------------------------------------

BN_LAYOUTS = {
    "contiguous": lambda t: t,
    "channels_last": lambda t: t.contiguous(memory_format=torch.channels_last),
    "transposed": lambda t: t.transpose(2, 3),
}


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_batch_norm_matches_cpu_with_running_statistics_and_gradients(dtype, training):
    for name, layout in BN_LAYOUTS.items():
        x = layout(values((4, 3, 5, 6), dtype, 1, 3))
        w, b = values((3,), dtype, 0.5, 1.5, 1), values((3,), dtype, seed=2)
        rm_c, rv_c = values((3,), dtype, seed=3), values((3,), dtype, 0.5, 1.5, seed=4)
        expected_run = [rm_c.clone(), rv_c.clone()]
        got_run = [dev(rm_c), dev(rv_c)]
        check(lambda x, w, b, rm, rv: F.batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5),
              [x, w, b, expected_run[0], expected_run[1]], [dev(x), dev(w), dev(b), got_run[0], got_run[1]],
              grad=(0, 1, 2))
        # training updated the running statistics in place on both devices alike
        assert_close(got_run[0], expected_run[0], TOL[dtype])
        assert_close(got_run[1], expected_run[1], TOL[dtype])


@pytest.mark.parametrize("shape", [(8, 3), (8, 3, 10)], ids=["2d", "3d"])
def test_batch_norm_1d_module_in_train_and_eval_mode(shape):
    torch.manual_seed(0)
    cpu_bn = torch.nn.BatchNorm1d(3)
    dev_bn = torch.nn.BatchNorm1d(3).to("neuron")
    dev_bn.load_state_dict(cpu_bn.state_dict())
    x = values(shape, torch.float32)
    for training in (True, False):
        cpu_bn.train(training)
        dev_bn.train(training)
        check(lambda x: cpu_bn(x) if x.device.type == "cpu" else dev_bn(x), [x], [dev(x)], grad=(0,))
    for key, value in cpu_bn.state_dict().items():
        torch.testing.assert_close(dev_bn.state_dict()[key].cpu(), value)


def test_batch_norm_with_float32_parameters_on_bfloat16_data():
    x = values((4, 3, 5), torch.bfloat16)
    w, b = values((3,), torch.float32, 0.5, 1.5), values((3,), torch.float32)
    rm, rv = values((3,), torch.float32), values((3,), torch.float32, 0.5, 1.5)
    for training in (True, False):
        check(lambda x, w, b, rm, rv: torch.native_batch_norm(x, w, b, rm, rv, training, 0.1, 1e-5),
              [x, w, b, rm.clone(), rv.clone()], [dev(x), dev(w), dev(b), dev(rm), dev(rv)], dtype=torch.bfloat16)


def test_batch_norm_without_running_statistics_and_without_affine():
    x = values((5, 4, 3), torch.float32)
    check(lambda x: F.batch_norm(x, None, None, training=True), [x], [dev(x)], grad=(0,))


def test_batch_norm_of_zero_size_batch():
    x = values((0, 3, 4), torch.float32)
    w, b = values((3,), torch.float32), values((3,), torch.float32)
    check(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), [x, w, b], [dev(x), dev(w), dev(b)],
          grad=(0, 1, 2))


# ---- cross entropy and nll_loss --------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_with_class_targets_matches_cpu(dtype, reduction):
    logits = values((9, 5), dtype, -3, 3)
    target = torch.tensor([0, 1, 2, 3, 4, 2, 1, 0, 2])
    weight = values((5,), dtype, 0.5, 2, 1)
    for kwargs in [{}, {"weight": weight}, {"ignore_index": 2}, {"label_smoothing": 0.2},
                   {"weight": weight, "ignore_index": 1, "label_smoothing": 0.1}]:
        dev_kwargs = {k: dev(v) for k, v in kwargs.items()}
        check(lambda x, t: F.cross_entropy(x, t, reduction=reduction,
                                           **(dev_kwargs if x.device.type == "neuron" else kwargs)),
              [logits, target], [dev(logits), dev(target)], grad=(0,))
    for layout in ("transposed", "sliced"):
        cpu, d = twins((5, 9), dtype, layout)
        check(lambda x, t: F.cross_entropy(x, t, reduction=reduction), [cpu, target[: cpu.shape[0]]],
              [d, dev(target[: cpu.shape[0]])], grad=(0,))


@pytest.mark.parametrize("label_smoothing", [0.0, 0.3])
def test_cross_entropy_with_probability_targets_matches_cpu(label_smoothing):
    logits = values((6, 7), torch.float32)
    target = F.softmax(values((6, 7), torch.float32, seed=5), 1)
    for reduction in ("mean", "sum", "none"):
        check(lambda x, t: F.cross_entropy(x, t, reduction=reduction, label_smoothing=label_smoothing),
              [logits, target], [dev(logits), dev(target)], grad=(0, 1))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_over_images_uses_nll_loss2d(reduction):
    logits = values((2, 4, 3, 5), torch.float32)
    target = torch.randint(0, 4, (2, 3, 5), generator=torch.Generator().manual_seed(1))
    weight = values((4,), torch.float32, 0.5, 2)
    check(lambda x, t, w: F.cross_entropy(x, t, w, ignore_index=3, reduction=reduction), [logits, target, weight],
          [dev(logits), dev(target), dev(weight)], grad=(0,))
    check(lambda x, t: F.cross_entropy(x, t[:, :2], reduction=reduction), [logits[:, :, :2], target],
          [dev(logits)[:, :, :2], dev(target)], grad=(0,))


def test_nll_loss_of_a_single_sample_and_of_an_empty_batch():
    x = F.log_softmax(values((6,), torch.float32), 0)
    check(lambda x, t: F.nll_loss(x, t), [x, torch.tensor(2)], [dev(x), dev(torch.tensor(2))], grad=(0,))
    x = values((0, 4), torch.float32)
    t = torch.zeros(0, dtype=torch.long)
    for reduction in ("mean", "sum", "none"):
        check(lambda x, t: F.nll_loss(x, t, reduction=reduction), [x, t], [dev(x), dev(t)], grad=(0,))


def test_nll_loss_with_every_target_ignored_is_nan_like_cpu():
    x = values((3, 4), torch.float32)
    t = torch.tensor([1, 1, 1])
    check(lambda x, t: F.nll_loss(x, t, ignore_index=1), [x, t], [dev(x), dev(t)])


def test_nll_loss_target_out_of_range_raises_index_error():
    x = values((3, 4), torch.float32)
    t = torch.tensor([0, 4, 1])
    with pytest.raises(IndexError, match="out of bounds"):
        F.nll_loss(x, t)
    with pytest.raises(IndexError, match="out of bounds"):
        F.nll_loss(dev(x), dev(t)).cpu()
    torch.neuron.clear_error()  # the kernel's error is sticky until cleared
    F.nll_loss(dev(x), dev(torch.tensor([0, 1, 2]))).cpu()  # the device is usable afterwards


def test_nll_loss_rejects_an_int32_target_like_cpu():
    x, t = values((3, 4), torch.float32), torch.tensor([0, 1, 2], dtype=torch.int32)
    for a, b in ((x, t), (dev(x), dev(t))):
        with pytest.raises(RuntimeError, match="Long or Byte"):
            F.nll_loss(a, b)


# ---- elementwise losses ------------------------------------------------------------------

LOSSES = {
    "mse": lambda x, y, r: F.mse_loss(x, y, reduction=r),
    "l1": lambda x, y, r: F.l1_loss(x, y, reduction=r),
    "smooth_l1": lambda x, y, r: F.smooth_l1_loss(x, y, reduction=r, beta=0.5),
    "smooth_l1_beta0": lambda x, y, r: F.smooth_l1_loss(x, y, reduction=r, beta=0.0),
    "huber": lambda x, y, r: F.huber_loss(x, y, reduction=r, delta=0.7),
    "kl_div": lambda x, y, r: F.kl_div(F.log_softmax(x, -1), F.softmax(y, -1), reduction=r),
    "kl_div_log_target": lambda x, y, r: F.kl_div(x, y, reduction=r, log_target=True),
    "bce_with_logits": lambda x, y, r: F.binary_cross_entropy_with_logits(x, torch.sigmoid(y), reduction=r),
}


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name", list(LOSSES))
def test_elementwise_loss_matches_cpu_with_gradients(name, reduction, dtype):
    if name.startswith("kl_div") and reduction == "mean":
        reduction = "batchmean"
    for layout in LAYOUTS:
        x, xd = twins((4, 6), dtype, layout, seed=1)
        y, yd = twins((4, 6), dtype, layout, seed=2)
        check(lambda a, b: LOSSES[name](a, b, reduction), [x, y], [xd, yd], grad=(0, 1))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_matches_cpu_with_weights_and_gradients(dtype, reduction):
    for layout in LAYOUTS:
        p, pd = twins((5, 4), dtype, layout, 0.02, 0.98, seed=1)
        t, td = twins((5, 4), dtype, layout, 0.0, 1.0, seed=2)
        check(lambda a, b: F.binary_cross_entropy(a, b, reduction=reduction), [p, t], [pd, td], grad=(0, 1))
        w = values((p.shape[-1],), dtype, 0.5, 2)
        check(lambda a, b, w: F.binary_cross_entropy(a, b, w, reduction=reduction), [p, t, w], [pd, td, dev(w)],
              grad=(0,))


def test_binary_cross_entropy_saturates_at_zero_and_one_like_cpu():
    p = torch.tensor([0.0, 1.0, 0.0, 1.0, 0.5])
    t = torch.tensor([0.0, 1.0, 1.0, 0.0, 0.5])
    check(lambda a, b: F.binary_cross_entropy(a, b, reduction="none"), [p, t], [dev(p), dev(t)])


def test_binary_cross_entropy_rejects_inputs_outside_the_unit_interval():
    p, t = torch.tensor([0.5, 1.5]), torch.tensor([0.5, 0.5])
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(p, t)
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(dev(p), dev(t)).cpu()
    torch.neuron.clear_error()  # the kernel's error is sticky until cleared
    F.binary_cross_entropy(dev(t), dev(t)).cpu()


def test_binary_cross_entropy_with_logits_weight_and_pos_weight():
    x, y = values((6, 4), torch.float32), values((6, 4), torch.float32, 0, 1, seed=3)
    w, pw = values((4,), torch.float32, 0.5, 2, seed=4), values((4,), torch.float32, 0.5, 3, seed=5)
    check(lambda x, y, w, pw: F.binary_cross_entropy_with_logits(x, y, w, pos_weight=pw), [x, y, w, pw],
          [dev(x), dev(y), dev(w), dev(pw)], grad=(0, 1))


def test_mse_loss_broadcasts_its_target_like_cpu():
    x, y = values((4, 6), torch.float32), values((6,), torch.float32, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(lambda a, b: F.mse_loss(a, b), [x, y], [dev(x), dev(y)], grad=(0, 1))


def test_losses_of_zero_size_inputs():
    x, y = values((0, 3), torch.float32), values((0, 3), torch.float32)
    for name in ("mse", "smooth_l1", "huber", "l1"):
        for reduction in ("mean", "sum", "none"):
            check(lambda a, b: LOSSES[name](a, b, reduction), [x, y], [dev(x), dev(y)], grad=(0, 1))


def test_loss_argument_errors_match_cpu():
    x, y = values((3,), torch.float32), values((3,), torch.float32)
    for a, b in ((x, y), (dev(x), dev(y))):
        with pytest.raises(RuntimeError, match="negative values for beta"):
            F.smooth_l1_loss(a, b, beta=-1.0)
        with pytest.raises(RuntimeError, match="non-positive values for delta"):
            F.huber_loss(a, b, delta=0.0)


# ---- whole blocks: no CPU fallback in forward and backward ------------------------------------

def linear(x, w, b):
    """x @ w.T + b from pointwise and reduction ops (GEMM is not this file's subject)."""
    return (x.unsqueeze(-2) * w).sum(-1) + b


def test_layer_norm_gelu_mlp_block_with_cross_entropy_trains_without_fallback():
    torch.manual_seed(0)
    params = {"ln_w": 1 + 0.1 * torch.randn(16), "ln_b": 0.1 * torch.randn(16), "w1": 0.2 * torch.randn(32, 16),
              "b1": 0.1 * torch.randn(32), "w2": 0.2 * torch.randn(10, 32), "b2": 0.1 * torch.randn(10)}
    x, target = torch.randn(4, 5, 16), torch.randint(0, 10, (4, 5))

    def block(x, target, p):
        h = F.layer_norm(x, (16,), p["ln_w"], p["ln_b"])
        h = x + F.pad(linear(F.gelu(linear(h, p["w1"], p["b1"])), p["w2"], p["b2"]), (0, 6))
        logits = h[..., :10]
        return F.cross_entropy(logits.reshape(-1, 10), target.reshape(-1), label_smoothing=0.1)

    cpu_p = {k: v.clone().requires_grad_() for k, v in params.items()}
    dev_p = {k: v.to("neuron").requires_grad_() for k, v in params.items()}
    loss_c = block(x, target, cpu_p)
    torchneuron.clear_op_tracking()
    loss_d = block(dev(x), dev(target), dev_p)
    loss_d.backward()
    assert torchneuron.get_fallback_ops() == {}
    loss_c.backward()
    assert_close(loss_d, loss_c, TOL[torch.float32])
    for k in params:
        assert_close(dev_p[k].grad, cpu_p[k].grad, GRAD_TOL[torch.float32])


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_batch_norm_2d_module_without_fallback(training):
    torch.manual_seed(0)
    cpu_bn = torch.nn.BatchNorm2d(4)
    dev_bn = torch.nn.BatchNorm2d(4).to("neuron")
    cpu_bn.train(training)
    dev_bn.train(training)
    x = values((3, 4, 6, 6), torch.float32)  # stands in for a convolution's output
    for _ in range(2):
        xc, xd = x.clone().requires_grad_(), dev(x).requires_grad_()
        yc = F.relu(cpu_bn(xc))
        torchneuron.clear_op_tracking()
        yd = F.relu(dev_bn(xd))
        yd.sum().backward()
        assert torchneuron.get_fallback_ops() == {}
        yc.sum().backward()
        assert_close(yd, yc, TOL[torch.float32])
        assert_close(xd.grad, xc.grad, GRAD_TOL[torch.float32])
        assert_close(dev_bn.weight.grad, cpu_bn.weight.grad, GRAD_TOL[torch.float32])
        assert_close(dev_bn.bias.grad, cpu_bn.bias.grad, GRAD_TOL[torch.float32])
    for key, value in cpu_bn.state_dict().items():
        torch.testing.assert_close(dev_bn.state_dict()[key].cpu(), value)


@pytest.mark.parametrize("module", ["group_norm", "rms_norm"])
def test_norm_modules_without_fallback(module):
    torch.manual_seed(0)
    cpu_m = torch.nn.GroupNorm(2, 6) if module == "group_norm" else torch.nn.RMSNorm(8)
    with torch.no_grad():
        cpu_m.weight.uniform_(0.5, 1.5)
    dev_m = type(cpu_m)(*([2, 6] if module == "group_norm" else [8])).to("neuron")
    dev_m.load_state_dict(cpu_m.state_dict())
    x = values((3, 6, 4, 8), torch.float32)
    xc, xd = x.clone().requires_grad_(), dev(x).requires_grad_()
    yc = cpu_m(xc)
    torchneuron.clear_op_tracking()
    yd = dev_m(xd)
    (yd * yd).sum().backward()
    assert torchneuron.get_fallback_ops() == {}
    (yc * yc).sum().backward()
    assert_close(yd, yc, TOL[torch.float32])
    assert_close(xd.grad, xc.grad, GRAD_TOL[torch.float32])
    assert_close(dev_m.weight.grad, cpu_m.weight.grad, GRAD_TOL[torch.float32])


def test_results_do_not_depend_on_the_thread_count():
    code = """
        import hashlib, torch, torch.nn.functional as F
        g = torch.Generator().manual_seed(0)
        x = torch.randn(512, 768, generator=g).to("neuron").requires_grad_()
        w = torch.randn(768, generator=g).to("neuron").requires_grad_()
        logits = torch.randn(256, 5000, generator=g).to("neuron").requires_grad_()
        t = torch.randint(0, 5000, (256,), generator=g).to("neuron")
        y = F.layer_norm(x, (768,), w)
        loss = F.cross_entropy(logits, t) + (y * y).mean()
        loss.backward()
        h = hashlib.sha256()
        for r in (y, loss, x.grad, w.grad, logits.grad):
            h.update(r.detach().cpu().numpy().tobytes())
        print(h.hexdigest())
    """
    one = check_output(run_python(code, {"TORCHNEURON_NUM_THREADS": "1"}))
    three = check_output(run_python(code, {"TORCHNEURON_NUM_THREADS": "3"}))
    assert one == three
