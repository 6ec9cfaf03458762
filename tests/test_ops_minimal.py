"""The native core every backend needs, checked against CPU and checked to
run natively (no CPU fallback): factories, views sharing storage, resize_,
set_, fill_ and zero_."""

import pytest
import torch

import torchneuron
from conftest import DTYPES, assert_same, dtype_id, no_fallback


def storage_ptr(t):
    return t.untyped_storage().data_ptr()


def geometry(t):
    return (tuple(t.shape), t.stride(), t.storage_offset(), t.dtype)


# ---- factories ----------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_factories_match_cpu(dtype):
    fill = True if dtype == torch.bool else 3
    with no_fallback():
        empty = torch.empty(2, 3, dtype=dtype, device="neuron")
        strided = torch.empty_strided((2, 3), (1, 2), dtype=dtype, device="neuron")
        zeros = torch.zeros(2, 3, dtype=dtype, device="neuron")
        ones = torch.ones(4, dtype=dtype, device="neuron")
        full = torch.full((2, 2), fill, dtype=dtype, device="neuron")
        like = torch.zeros_like(strided)
        new = ones.new_full((3,), fill)
    assert geometry(empty) == geometry(torch.empty(2, 3, dtype=dtype))
    assert geometry(strided) == geometry(torch.empty_strided((2, 3), (1, 2), dtype=dtype))
    assert empty.device == torch.device("neuron:0")
    assert_same(zeros, torch.zeros(2, 3, dtype=dtype))
    assert_same(ones, torch.ones(4, dtype=dtype))
    assert_same(full, torch.full((2, 2), fill, dtype=dtype))
    assert like.stride() == (1, 2)
    assert_same(like, torch.zeros_like(torch.empty_strided((2, 3), (1, 2), dtype=dtype)))
    assert_same(new, torch.full((3,), fill, dtype=dtype))


def test_factories_use_the_default_dtype_and_named_device():
    with no_fallback():
        assert torch.empty(3, device="neuron").dtype == torch.get_default_dtype()
        assert torch.full((2,), 7, device="neuron").dtype == torch.int64
        assert torch.zeros(2, device="neuron:1").device == torch.device("neuron:1")
        assert torch.empty(0, device="neuron").numel() == 0
        assert torch.empty((), device="neuron").dim() == 0
        channels_last = torch.empty(2, 3, 4, 5, device="neuron", memory_format=torch.channels_last)
    assert channels_last.stride() == torch.empty(2, 3, 4, 5, memory_format=torch.channels_last).stride()


def test_factories_refuse_to_pin_device_memory():
    with pytest.raises(RuntimeError, match="pinned"):
        torch.empty(2, device="neuron", pin_memory=True)


# ---- views --------------------------------------------------------------

VIEWS = {
    "view": lambda t: t.view(4, 12),
    "view_infer": lambda t: t.view(-1),
    "reshape": lambda t: t.reshape(2, 24),
    "as_strided": lambda t: t.as_strided((3, 3), (7, 2), 5),
    "transpose": lambda t: t.transpose(0, 1),
    "t": lambda t: t.t(),
    "slice_steps": lambda t: t[1::2, 1:7:3],
    "select": lambda t: t[2],
    "unfold": lambda t: t.unfold(1, 3, 2),
    "diagonal": lambda t: t.diagonal(),
    "diagonal_offset": lambda t: t.diagonal(offset=2),
    "squeeze": lambda t: t[1:2].squeeze(0),
    "unsqueeze": lambda t: t.unsqueeze(1),
    "permute": lambda t: t.reshape(2, 3, 8).permute(2, 0, 1),
    "narrow": lambda t: t.narrow(1, 2, 3),
    "flatten": lambda t: t.flatten(),
    "unflatten": lambda t: t.unflatten(1, (2, 4)),
    "movedim": lambda t: t.reshape(2, 3, 8).movedim(0, 2),
    "view_as": lambda t: t.view_as(torch.empty(8, 6)),
    "split": lambda t: t.split(2, dim=1)[1],
    "chunk": lambda t: t.chunk(3)[2],
    "unbind": lambda t: t.unbind(1)[3],
}


def base_pair():
    cpu = torch.arange(48.0).reshape(6, 8)
    return cpu.neuron(), cpu


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views_share_storage_and_mutations_reach_the_base(name):
    make_view = VIEWS[name]
    base, cpu_base = base_pair()
    with no_fallback():
        view = make_view(base)
    cpu_view = make_view(cpu_base)
    assert geometry(view) == geometry(cpu_view)
    assert storage_ptr(view) == storage_ptr(base)
    assert_same(view, cpu_view)
    with no_fallback():
        view.fill_(-1)
    cpu_view.fill_(-1)
    assert_same(base, cpu_base)
    with no_fallback():
        view.copy_(torch.arange(view.numel(), dtype=torch.float32).reshape(view.shape))
    cpu_view.copy_(torch.arange(cpu_view.numel(), dtype=torch.float32).reshape(cpu_view.shape))
    assert_same(base, cpu_base)


def test_expanded_view_follows_its_base():
    base, cpu_base = base_pair()
    with no_fallback():
        expanded = base[1:2].expand(4, 8)
        assert storage_ptr(expanded) == storage_ptr(base)
        assert expanded.stride() == (0, 1)
        base[1].fill_(5)
    cpu_expanded = cpu_base[1:2].expand(4, 8)
    cpu_base[1].fill_(5)
    assert_same(expanded, cpu_expanded)


def test_in_place_view_ops_change_the_tensor_geometry_like_cpu():
    for op in (lambda t: t.t_(), lambda t: t.transpose_(0, 1), lambda t: t.unsqueeze_(0),
               lambda t: t[None].squeeze_(), lambda t: t.as_strided_((2, 2), (1, 3))):
        base, cpu_base = base_pair()
        with no_fallback():
            out = op(base[:3, :4])
        assert geometry(out) == geometry(op(cpu_base[:3, :4]))


def test_reshape_of_a_non_viewable_tensor_copies_like_cpu():
    base, cpu_base = base_pair()
    with no_fallback():
        copied = base.t().reshape(48)
    cpu_copied = cpu_base.t().reshape(48)
    assert_same(copied, cpu_copied)
    assert storage_ptr(copied) != storage_ptr(base)
    with pytest.raises(RuntimeError) as neuron_error:
        base.t().view(48)
    with pytest.raises(RuntimeError) as cpu_error:
        cpu_base.t().view(48)
    assert str(neuron_error.value) == str(cpu_error.value)


# ---- resize_ ------------------------------------------------------------


def test_resize_grows_and_keeps_the_leading_data():
    t = torch.arange(6.0).neuron()
    cpu = torch.arange(6.0)
    with no_fallback():
        t.resize_(3, 4)
    cpu.resize_(3, 4)
    assert geometry(t) == geometry(cpu)
    assert torch.equal(t.flatten()[:6].cpu(), torch.arange(6.0))
    assert t.untyped_storage().nbytes() >= 48


def test_resize_shrinks_in_place():
    t = torch.arange(12.0).neuron()
    ptr = t.data_ptr()
    with no_fallback():
        t.resize_(2, 2)
    assert t.data_ptr() == ptr
    assert_same(t, torch.arange(12.0).resize_(2, 2))
    with no_fallback():
        t.resize_(0)
    assert t.shape == (0,)


def test_resize_with_a_memory_format_matches_cpu():
    with no_fallback():
        t = torch.empty(0, device="neuron").resize_(2, 3, 4, 5, memory_format=torch.channels_last)
    assert t.stride() == torch.empty(0).resize_(2, 3, 4, 5, memory_format=torch.channels_last).stride()


def test_resize_of_a_view_keeps_sharing_until_it_outgrows_the_storage():
    base = torch.zeros(10, device="neuron")
    view = base[2:]
    with no_fallback():
        view.resize_(2, 2)
        view.fill_(1)
    assert torch.equal(base.cpu(), torch.tensor([0, 0, 1, 1, 1, 1, 0, 0, 0, 0.0]))


def test_resize_to_a_negative_size_is_an_error():
    with pytest.raises(RuntimeError, match="negative"):
        torch.empty(2, device="neuron").resize_(-1)


# ---- set_ ---------------------------------------------------------------


def test_set_tensor_shares_storage_and_geometry():
    base = torch.arange(12.0).neuron()
    source = base[2:].view(2, 5)[:, 1:]
    cpu_base = torch.arange(12.0)
    cpu_source = cpu_base[2:].view(2, 5)[:, 1:]
    t = torch.empty(0, device="neuron")
    with no_fallback():
        t.set_(source)
        t.fill_(-2)
    torch.empty(0).set_(cpu_source).fill_(-2)
    assert geometry(t) == geometry(cpu_source)
    assert storage_ptr(t) == storage_ptr(base)
    assert_same(base, cpu_base)


def test_set_storage_views_the_whole_storage():
    base = torch.arange(6.0).neuron()
    t = torch.empty(0, device="neuron")
    with no_fallback():
        t.set_(base.untyped_storage())
    cpu = torch.empty(0).set_(torch.arange(6.0).untyped_storage())
    assert geometry(t) == geometry(cpu)
    assert_same(t, cpu)


def test_set_storage_with_offset_size_and_stride():
    base = torch.arange(10.0).neuron()
    cpu_base = torch.arange(10.0)
    t = torch.empty(0, device="neuron")
    with no_fallback():
        t.set_(base.untyped_storage(), 2, (2, 3), (3, 1))
        t[1].fill_(100)
    cpu = torch.empty(0).set_(cpu_base.untyped_storage(), 2, (2, 3), (3, 1))
    cpu[1].fill_(100)
    assert geometry(t) == geometry(cpu)
    assert_same(base, cpu_base)


def test_set_storage_beyond_its_end_grows_the_storage():
    base = torch.arange(4.0).neuron()
    t = torch.empty(0, device="neuron")
    with no_fallback():
        t.set_(base.untyped_storage(), 0, (3, 3), (3, 1))
    assert t.untyped_storage().nbytes() >= 36
    assert torch.equal(t.flatten()[:4].cpu(), torch.arange(4.0))


def test_set_without_arguments_empties_the_tensor():
    t = torch.ones(5, device="neuron")
    with no_fallback():
        t.set_()
    assert geometry(t) == geometry(torch.ones(5).set_())
    assert t.untyped_storage().nbytes() == 0
    assert t.device == torch.device("neuron:0")


# ---- fill_ and zero_ ----------------------------------------------------

FILL_VALUES = [0, 1, -1, 2.5, -3.7, True, False, 127, 128, 255, 256, 300, -129, 32768,
               65504, 70000, 2**31, 2**63 - 1, -2**63, 1e39, -0.0, float("nan"),
               float("inf"), float("-inf")]


def fill_outcome(make, value):
    """The filled tensor on the CPU, or (exception type, message)."""
    try:
        return make().fill_(value).cpu()
    except Exception as e:  # noqa: BLE001 - compared with CPU's exception
        return (type(e), str(e))


def assert_same_outcome(actual, expected, what):
    if isinstance(expected, tuple) or isinstance(actual, tuple):
        assert actual == expected, what
    else:
        assert_same(actual, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_fill_with_a_scalar_matches_cpu_including_overflow_errors(dtype):
    for value in FILL_VALUES:
        with no_fallback():
            actual = fill_outcome(lambda: torch.empty(5, dtype=dtype, device="neuron"), value)
        expected = fill_outcome(lambda: torch.empty(5, dtype=dtype), value)
        assert_same_outcome(actual, expected, f"fill_({value!r}) on {dtype}")


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_fill_with_a_neuron_zero_dim_tensor_converts_like_a_cpu_copy(dtype):
    # Same-device value: PyTorch fills by copying, which wraps on overflow.
    for value in FILL_VALUES:
        cpu_value = torch.tensor(value)
        with no_fallback():
            actual = fill_outcome(lambda: torch.empty(5, dtype=dtype, device="neuron"),
                                  cpu_value.neuron())
        expected = fill_outcome(lambda: torch.empty(5, dtype=dtype), cpu_value)
        assert_same_outcome(actual, expected, f"fill_(tensor({value!r})) on {dtype}")


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_fill_with_a_cpu_zero_dim_tensor_fills_with_its_value(dtype):
    # Value on another device: PyTorch fills with value.item(), checked for overflow.
    for value in FILL_VALUES:
        cpu_value = torch.tensor(value)
        with no_fallback():
            actual = fill_outcome(lambda: torch.empty(5, dtype=dtype, device="neuron"), cpu_value)
        expected = fill_outcome(lambda: torch.empty(5, dtype=dtype), cpu_value.item())
        assert_same_outcome(actual, expected, f"fill_(cpu tensor({value!r})) on {dtype}")


def test_fill_of_non_contiguous_views_matches_cpu():
    base, cpu_base = base_pair()
    with no_fallback():
        base.t()[1:6:2].fill_(7)
        base[:, ::3].fill_(torch.tensor(-1.0, device="neuron"))
    cpu_base.t()[1:6:2].fill_(7)
    cpu_base[:, ::3].fill_(torch.tensor(-1.0))
    assert_same(base, cpu_base)


def test_fill_with_an_element_of_the_tensor_itself():
    t = torch.arange(5.0).neuron()
    with no_fallback():
        t.fill_(t[3])
    assert_same(t, torch.full((5,), 3.0))


def test_fill_with_a_non_scalar_tensor_is_an_error_like_cpu():
    with pytest.raises(RuntimeError) as cpu_error:
        torch.empty(3).fill_(torch.ones(2))
    with pytest.raises(RuntimeError) as neuron_error:
        torch.empty(3, device="neuron").fill_(torch.ones(2, device="neuron"))
    assert str(neuron_error.value) == str(cpu_error.value)


def test_fill_with_a_complex_value_is_an_error():
    # A complex value into a real tensor: the CPU's error (complex tensors
    # take it: test_complex.py).
    with pytest.raises(RuntimeError) as cpu_error:
        torch.empty(3).fill_(1 + 2j)
    with pytest.raises(RuntimeError) as neuron_error:
        torch.empty(3, device="neuron").fill_(1 + 2j)
    assert str(neuron_error.value) == str(cpu_error.value)


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_zero_clears_every_dtype(dtype):
    t = torch.ones(3, 4, dtype=dtype, device="neuron")
    expected = torch.ones(3, 4, dtype=dtype)
    with no_fallback():
        t[:, 1::2].zero_()
    expected[:, 1::2].zero_()
    assert_same(t, expected)
    with no_fallback():
        t.zero_()
    assert_same(t, torch.zeros(3, 4, dtype=dtype))


def test_fill_and_zero_of_empty_tensors_are_no_ops():
    with no_fallback():
        torch.empty(0, device="neuron").fill_(3)
        torch.empty(0, 4, device="neuron").zero_()


def test_native_ops_are_reported_as_executed(op_tracking):
    with no_fallback():
        torch.empty(3, device="neuron").fill_(1)
    executed = torchneuron.get_executed_ops()
    assert executed["aten::empty.memory_format"] == 1
    assert executed["aten::fill_.Scalar"] == 1
