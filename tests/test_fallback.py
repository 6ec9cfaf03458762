"""The boxed CPU fallback for ops without a neuron kernel: correct results
(functional, in-place on views, out=, views that stay views, factories),
reporting, the warning once per op, and the error mode.

Native kernels keep arriving, so the checks of the fallback machinery use ops
that will never have one: a test-only library defined below (CPU and Meta
kernels only) and PyTorch's own CPU-only test ops (torch._C._nn._test_*),
which, unlike torch.ops calls, turn C++ warnings into Python warnings."""

import warnings

import pytest
import torch

import torchneuron
from conftest import assert_same, check_output, run_python_many

FALLBACK_WARNING = "has no native neuron kernel"


def pair(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    cpu = torch.randn(*shape, generator=g)
    return cpu.neuron(), cpu


def close(actual, expected):
    assert actual.device.type == "neuron"
    torch.testing.assert_close(actual.cpu(), expected)


def fallback_warnings(caught):
    return [str(w.message) for w in caught if FALLBACK_WARNING in str(w.message)]


# ---- a test-only library: ops with CPU (and Meta) kernels only ----------

_lib = torch.library.Library("tn_fallback_test", "DEF")
_lib.define("scaled(Tensor x, float factor) -> Tensor")
_lib.define("scaled.out(Tensor x, float factor, *, Tensor(a!) out) -> Tensor(a!)")
_lib.define("scale_(Tensor(a!) x, float factor) -> Tensor(a!)")
_lib.define("every_other(Tensor(a) x) -> Tensor(a)")
_lib.define("halves(Tensor(a) x) -> Tensor(a)[]")
_lib.define("as_int32(Tensor(a) x) -> Tensor(a)")
_lib.impl("scaled", lambda x, factor: x * factor, "CPU")
_lib.impl("scaled.out", lambda x, factor, *, out: torch.mul(x, factor, out=out), "CPU")
_lib.impl("scale_", lambda x, factor: x.mul_(factor), "CPU")
for _key in ("CPU", "Meta"):  # views need Meta kernels: the fallback runs them on meta twins
    _lib.impl("every_other", lambda x: x[::2], _key)
    _lib.impl("halves", lambda x: list(x.chunk(2)), _key)
    _lib.impl("as_int32", lambda x: x.view(torch.int32), _key)
ops = torch.ops.tn_fallback_test


# ---- correctness ----------------------------------------------------------


def test_functional_ops_match_cpu():
    (a, ca), (b, cb) = pair(3, 4, seed=1), pair(3, 4, seed=2)
    close(a + b, ca + cb)
    close(torch.matmul(a, b.t()), torch.matmul(ca, cb.t()))
    close(torch.softmax(a, dim=1), torch.softmax(ca, dim=1))
    close(torch.nn.functional.linear(a, b), torch.nn.functional.linear(ca, cb))
    close(torch.cumsum(a, dim=0), torch.cumsum(ca, dim=0))


def test_functional_fallback_op_matches_cpu(op_tracking):
    x, cx = pair(3, 4)
    close(ops.scaled(x, 3.0), cx * 3.0)
    close(ops.scaled(x.t(), 3.0), cx.t() * 3.0)
    assert torchneuron.get_fallback_ops() == {"tn_fallback_test::scaled": 2}


def test_fallback_results_live_on_the_inputs_device():
    a, ca = pair(5)
    result = ops.scaled(a.to("neuron:1"), 2.0)
    assert result.device == torch.device("neuron:1")
    torch.testing.assert_close(result.cpu(), ca * 2)


def test_in_place_ops_on_non_contiguous_views_write_back():
    x, cx = pair(4, 6)
    ops.scale_(x.t(), 2.0)
    ops.scale_(cx.t(), 2.0)
    ops.scale_(x[:, ::2], -3.0)
    ops.scale_(cx[:, ::2], -3.0)
    x.t().add_(1)
    cx.t().add_(1)
    x[1].sub_(x[2])
    cx[1].sub_(cx[2])
    assert_same(x, cx)


def test_in_place_fallback_returns_the_same_tensor():
    x, _ = pair(3)
    view = x[1:]
    assert ops.scale_(view, 2.0) is view


@pytest.mark.parametrize("out_shape", [(3, 4), (0,), (2, 2)], ids=["fits", "empty", "wrong_size"])
def test_out_ops_write_into_and_resize_the_out_tensor(out_shape):
    a, ca = pair(3, 4)
    out = torch.empty(out_shape, device="neuron")
    cpu_out = torch.empty(out_shape)
    with warnings.catch_warnings(record=True) as neuron_warnings:
        warnings.simplefilter("always")
        result = ops.scaled(a, 2.0, out=out)
    with warnings.catch_warnings(record=True) as cpu_warnings:
        warnings.simplefilter("always")
        ops.scaled(ca, 2.0, out=cpu_out)
    assert result is out
    close(out, cpu_out)
    resized = [str(w.message) for w in cpu_warnings if "resized" in str(w.message)]
    assert [str(w.message) for w in neuron_warnings if "resized" in str(w.message)] == resized


def test_out_into_a_non_contiguous_view_writes_back():
    a, ca = pair(4, 3)
    base, cpu_base = torch.zeros(3, 4, device="neuron"), torch.zeros(3, 4)
    ops.scaled(a, 2.0, out=base.t())
    ops.scaled(ca, 2.0, out=cpu_base.t())
    close(base, cpu_base)
    (b, cb), (c, cc) = pair(3, 2, seed=1), pair(3, 2, seed=2)
    torch.add(b, c, out=base[:, ::2])
    torch.add(cb, cc, out=cpu_base[:, ::2])
    close(base, cpu_base)


VIEW_OPS = {
    "diagonal": lambda t: t.diagonal(),
    "narrow": lambda t: torch.narrow(t, 1, 1, 2),
    "split": lambda t: t.split(2, dim=1)[1],
    "unbind": lambda t: t.unbind()[1],
    "movedim": lambda t: t.movedim(0, 1),
    "swapaxes": lambda t: t.swapaxes(0, 1),
    "select": lambda t: t.select(1, 2),
    "view_dtype": lambda t: t.view(torch.int32),
    "every_other (fallback)": lambda t: ops.every_other(t),
    "halves (fallback)": lambda t: ops.halves(t)[1],
}


@pytest.mark.parametrize("name", sorted(VIEW_OPS))
def test_view_ops_stay_views_of_the_neuron_storage(name):
    make_view = VIEW_OPS[name]
    base, cpu_base = pair(4, 4)
    view = make_view(base)
    cpu_view = make_view(cpu_base)
    assert view.device.type == "neuron"
    assert (view.shape, view.stride(), view.storage_offset()) == (
        cpu_view.shape, cpu_view.stride(), cpu_view.storage_offset())
    assert view.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    view.fill_(0)
    cpu_view.fill_(0)
    assert_same(base, cpu_base)


def test_a_view_op_without_a_kernel_runs_through_the_fallback_as_a_view(op_tracking):
    base = torch.arange(8.0).neuron()
    halves = ops.halves(base)
    view = ops.every_other(base)
    assert torchneuron.get_fallback_ops() == {
        "tn_fallback_test::halves": 1, "tn_fallback_test::every_other": 1}
    view.fill_(-1)
    halves[1].fill_(9)
    assert torch.equal(base.cpu(), torch.tensor([-1, 1, -1, 3, 9, 9, 9, 9.0]))


def test_a_view_op_that_changes_the_dtype_is_a_clear_error():
    with pytest.raises(NotImplementedError, match="tn_fallback_test::as_int32.*changes the dtype"):
        ops.as_int32(torch.zeros(4, device="neuron"))


def test_factory_ops_with_a_neuron_device_land_on_the_device():
    r = torch.arange(5, device="neuron")
    assert r.device == torch.device("neuron:0")
    assert_same(r, torch.arange(5))
    r1 = torch.arange(1, 4, 0.5, device="neuron:1")
    assert r1.device == torch.device("neuron:1")
    assert_same(r1, torch.arange(1, 4, 0.5))
    p = torch.randperm(5, device="neuron")
    assert p.device == torch.device("neuron:0")
    assert sorted(p.cpu().tolist()) == [0, 1, 2, 3, 4]
    assert_same(torch.eye(3, device="neuron"), torch.eye(3))
    assert_same(torch.linspace(0, 1, 5, device="neuron"), torch.linspace(0, 1, 5))


def test_autograd_flows_through_fallback_ops():
    x = torch.tensor([1.0, -2.0, 3.0], device="neuron", requires_grad=True)
    cx = x.detach().cpu().requires_grad_()
    (x * x).relu().cumsum(0).sum().backward()
    (cx * cx).relu().cumsum(0).sum().backward()
    assert x.grad.device.type == "neuron"
    assert_same(x.grad, cx.grad)


def test_mixing_neuron_and_cpu_tensors_is_an_error_like_cuda():
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(3, device="neuron") + torch.ones(3)
    # An out= argument on the CPU cannot receive a fallback's result.
    with pytest.raises(RuntimeError, match="same device.*'out' of 'tn_fallback_test::scaled.out'"):
        ops.scaled(torch.ones(3, device="neuron"), 2.0, out=torch.empty(3))
    # A CPU 0-d tensor is a scalar, as on CUDA.
    close(torch.ones(3, device="neuron") + torch.tensor(2.0), torch.full((3,), 3.0))


# ---- reporting ------------------------------------------------------------


def test_fallback_ops_are_counted(op_tracking):
    a, _ = pair(3)
    ops.scaled(a, 1.0)
    ops.scaled(a, 2.0)
    ops.scale_(a, 2.0)
    assert torchneuron.get_fallback_ops() == {
        "tn_fallback_test::scaled": 2, "tn_fallback_test::scale_": 1}


def test_executed_ops_include_native_and_fallback_ops(op_tracking):
    a = torch.empty(3, device="neuron")
    a.fill_(1)
    ops.scaled(a, 2.0)
    executed = torchneuron.get_executed_ops()
    assert executed["aten::empty.memory_format"] >= 1
    assert executed["aten::fill_.Scalar"] >= 1
    assert executed["tn_fallback_test::scaled"] == 1
    assert "aten::empty.memory_format" not in torchneuron.get_fallback_ops()


def test_clear_op_tracking_forgets_everything():
    ops.scaled(torch.ones(3, device="neuron"), 2.0)
    assert torchneuron.get_fallback_ops() and torchneuron.get_executed_ops()
    torchneuron.clear_op_tracking()
    assert torchneuron.get_fallback_ops() == {}
    assert torchneuron.get_executed_ops() == {}


def test_fallback_warns_once_per_op():
    # These two CPU-only test ops run nowhere else in the suite.
    x = torch.arange(4.0).neuron()
    with pytest.warns(UserWarning, match=r"'aten::_test_optional_floatlist' " + FALLBACK_WARNING):
        first = torch._C._nn._test_optional_floatlist(x, [1.0, 2.0, 3.0, 4.0])
    close(first, torch.tensor([1.0, 3.0, 5.0, 7.0]))
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        torch._C._nn._test_optional_floatlist(x, [1.0, 2.0, 3.0, 4.0])
        torch._C._nn._test_optional_floatlist(x, None)
    assert fallback_warnings(again) == []
    with pytest.warns(UserWarning, match=r"'aten::_test_functorch_fallback' " + FALLBACK_WARNING):
        torch._test_functorch_fallback(x, x)


# ---- modes ------------------------------------------------------------------


def test_error_mode_raises_naming_the_op(op_tracking):
    a, _ = pair(3)
    torchneuron.set_fallback_mode("error")
    assert torchneuron.get_fallback_mode() == "error"
    with pytest.raises(NotImplementedError,
                       match=r"'tn_fallback_test::scaled'.*TORCHNEURON_FALLBACK=error"):
        ops.scaled(a, 2.0)
    torch.empty(2, device="neuron").fill_(1)  # native ops still run
    assert torchneuron.get_fallback_ops() == {}


def test_silent_mode_runs_on_the_cpu_without_warning(op_tracking):
    x = torch.arange(4, dtype=torch.int32).neuron()
    torchneuron.clear_op_tracking()
    torchneuron.set_fallback_mode("silent")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # Runs nowhere else in the suite: it would warn in "warn" mode.
        result = torch._C._nn._test_optional_intlist(x, [1, 2, 3, 4])
    assert fallback_warnings(caught) == []
    close(result, torch.tensor([1, 3, 5, 7], dtype=torch.int32))
    assert torchneuron.get_fallback_ops() == {"aten::_test_optional_intlist": 1}
    torchneuron.set_fallback_mode("warn")
    assert torchneuron.get_fallback_mode() == "warn"


def test_invalid_fallback_mode_is_a_value_error():
    with pytest.raises(ValueError, match="'warn', 'error' or 'silent'"):
        torchneuron.set_fallback_mode("loud")
    assert torchneuron.get_fallback_mode() == "warn"


ENV_PROBE = """
    import warnings
    import torch, torchneuron
    print(torchneuron.get_fallback_mode())
    x = torch.arange(4.0).neuron()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch._C._nn._test_optional_floatlist(x, [1.0, 1.0, 1.0, 1.0]).cpu()
        print("ran", len([w for w in caught if "no native neuron kernel" in str(w.message)]))
    except NotImplementedError as e:
        print("NotImplementedError", str(e).splitlines()[0])
"""


# A malformed TORCHNEURON_FALLBACK: `import torch` (which registers the
# device) must still work; each first use raises, naming the variable.
MALFORMED_PROBE = """
    import torch
    print("imported")
    import torchneuron
    attempts = {
        "lazy_init": torch.neuron._lazy_init,
        "tensor": lambda: torch.ones(2, device="neuron"),
        "get_fallback_mode": torchneuron.get_fallback_mode,
        "fallback_op": lambda: torch._C._nn._test_optional_floatlist(torch.ones(2).neuron(), [1.0, 1.0]),
    }
    for name, attempt in attempts.items():
        try:
            attempt()
            print(name, "no error")
        except RuntimeError as e:
            print(name, type(e).__name__, "|", str(e).splitlines()[0])
    torchneuron.set_fallback_mode("silent")  # a mode set in code replaces the variable's
    print(torchneuron.get_fallback_mode(), (torch.ones(2, device="neuron") + 1).tolist())
"""


@pytest.fixture(scope="module")
def env_children():
    jobs = {mode: (ENV_PROBE, {"TORCHNEURON_FALLBACK": mode}) for mode in ("error", "silent", "warn")}
    jobs["loud"] = (MALFORMED_PROBE, {"TORCHNEURON_FALLBACK": "loud"})
    return run_python_many(jobs)


def test_torchneuron_fallback_error_raises_naming_the_op(env_children):
    lines = check_output(env_children["error"]).splitlines()
    assert lines[0] == "error"
    assert lines[1].startswith(
        "NotImplementedError The operator 'aten::_test_optional_floatlist'"), lines[1]
    assert "TORCHNEURON_FALLBACK=error" in lines[1]


def test_torchneuron_fallback_silent_does_not_warn(env_children):
    assert check_output(env_children["silent"]).splitlines() == ["silent", "ran 0"]


def test_torchneuron_fallback_warn_warns(env_children):
    assert check_output(env_children["warn"]).splitlines() == ["warn", "ran 1"]


def test_malformed_torchneuron_fallback_is_reported_at_first_use_naming_itself(env_children):
    lines = check_output(env_children["loud"]).splitlines()
    assert lines[0] == "imported"
    for line in lines[1:5]:
        name, rest = line.split(" ", 1)
        assert rest.startswith("RuntimeError | TORCHNEURON_FALLBACK='loud' "), line
        assert "'warn', 'error' or 'silent'" in rest, line
    assert [line.split(" ", 1)[0] for line in lines[1:5]] == [
        "lazy_init", "tensor", "get_fallback_mode", "fallback_op"]
    assert lines[5] == "silent [2.0, 2.0]"
