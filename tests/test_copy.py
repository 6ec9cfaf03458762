"""copy_ and .to() in every direction, for every dtype pair, against CPU
conversions; strided, broadcast, empty and 0-d tensors; pinned memory and
non_blocking copies that really overlap; overlap and dtype errors."""

import time

import pytest
import torch

from conftest import DTYPES, assert_same, dtype_id, no_fallback, requires_devices

# Values every dtype pair converts deterministically: finite, within float16
# and int32 range (conversions of NaN, infinities or huge floats to integers
# are undefined in C++ and are checked separately, between float types).
VALUES = [0, 1, -1, 2.5, -3.75, 0.3, 7, 127, -128, 200, 255, -129, 300, 1000.5, -40000, 65504]
SPECIAL = [float("nan"), float("inf"), float("-inf"), -0.0, 1e-40, 6e-8, 1e20, -3.4e38, 1.1e-5]
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def source(dtype, values=VALUES):
    return torch.tensor(values, dtype=torch.float64).to(dtype)


DIRECTIONS = {
    # host -> device, converting on the device
    "cpu_to_neuron": lambda src, dtype: src.to("neuron", dtype),
    # device -> host, converting on the device
    "neuron_to_cpu": lambda src, dtype: src.to("neuron").to("cpu", dtype),
    # device -> same device
    "neuron_to_neuron": lambda src, dtype: src.to("neuron").to(dtype),
    # neuron:0 -> neuron:1
    "neuron0_to_neuron1": lambda src, dtype: src.to("neuron:0").to("neuron:1", dtype),
}


@pytest.mark.parametrize("src_dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("direction", sorted(DIRECTIONS))
def test_copy_converts_every_dtype_pair_like_cpu(direction, src_dtype):
    if direction == "neuron0_to_neuron1" and torch.neuron.device_count() < 2:
        pytest.skip("needs 2 neuron devices")
    src = source(src_dtype)
    failures = []
    for dst_dtype in DTYPES:
        out = DIRECTIONS[direction](src, dst_dtype)
        expected = src.to(dst_dtype)
        if direction != "neuron_to_cpu":
            assert out.device.type == "neuron"
        try:
            assert_same(out, expected)
        except AssertionError as e:
            failures.append(f"{src_dtype} -> {dst_dtype}: {e}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("src_dtype", FLOATS, ids=dtype_id)
def test_special_float_values_convert_like_cpu(src_dtype):
    src = source(src_dtype, SPECIAL)
    for dst_dtype in FLOATS + [torch.bool]:
        expected = src.to(dst_dtype)
        assert_same(src.to("neuron", dst_dtype), expected)
        assert_same(src.to("neuron").to(dst_dtype), expected)
        assert_same(src.to("neuron").to("cpu", dst_dtype), expected)


def test_same_dtype_copies_keep_every_bit():
    bits = torch.tensor([0x7FC00001, 0x7F800001, 0xFFC12345 - 2**32, 0x80000000 - 2**32],
                        dtype=torch.int32)
    payload_nans = bits.view(torch.float32)
    for out in (payload_nans.neuron().cpu(), payload_nans.neuron().clone().cpu(),
                payload_nans.neuron().t().contiguous().cpu()):
        assert torch.equal(out.view(torch.int32), bits)


# ---- layouts -------------------------------------------------------------


def grid(dtype=torch.float32):
    return torch.arange(48, dtype=torch.float64).reshape(6, 8).to(dtype)


LAYOUTS = {
    "transposed": lambda t: t.t(),
    "sliced_with_steps": lambda t: t[1::2, ::3],
    "column": lambda t: t[:, 5],
    "expanded_row": lambda t: t[2:3].expand(5, 8),
    "expanded_scalar": lambda t: t[1, 1].expand(3, 4),
    "unsqueezed_expand": lambda t: t[:, 1].unsqueeze(1).expand(6, 3),
    "permuted_3d": lambda t: t.reshape(2, 3, 8).permute(2, 0, 1),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_non_contiguous_sources_copy_in_every_direction(layout):
    view = LAYOUTS[layout]
    cpu = grid()
    expected = view(cpu)
    with no_fallback():
        assert_same(view(cpu).to("neuron"), expected)  # host source is strided
        assert_same(view(cpu.neuron()).cpu(), expected)  # device source is strided
        assert_same(view(cpu.neuron()).clone(), expected)  # device to device
        assert_same(view(cpu.neuron()).to(torch.float16), expected.half())
        assert_same(view(cpu).to("neuron", torch.int32), expected.int())
        assert_same(view(cpu.neuron()).to("cpu", torch.bfloat16), expected.bfloat16())


@requires_devices(2)
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_non_contiguous_sources_copy_across_devices(layout):
    view = LAYOUTS[layout]
    cpu = grid()
    assert_same(view(cpu.neuron()).to("neuron:1"), view(cpu))
    assert_same(view(cpu.neuron()).to("neuron:1", torch.int64), view(cpu).long())


def test_copy_into_non_contiguous_destinations():
    cpu_src = torch.arange(24.0).reshape(4, 6)
    with no_fallback():
        # host -> device view
        dst = torch.zeros(6, 4, device="neuron")
        dst.t().copy_(cpu_src)
        assert_same(dst, cpu_src.t().contiguous())
        # device -> device view, with conversion
        dst = torch.zeros(4, 12, dtype=torch.float64, device="neuron")
        dst[:, ::2].copy_(cpu_src.neuron())
        expected = torch.zeros(4, 12, dtype=torch.float64)
        expected[:, ::2] = cpu_src
        assert_same(dst, expected)
    # device -> host view
    host = torch.zeros(6, 4)
    host.t().copy_(cpu_src.neuron())
    assert_same(host, cpu_src.t().contiguous())
    host = torch.zeros(4, 12, dtype=torch.int16)
    host[:, 1::2].copy_(cpu_src.neuron())
    expected = torch.zeros(4, 12, dtype=torch.int16)
    expected[:, 1::2] = cpu_src
    assert_same(host, expected)


def test_copy_broadcasts_the_source_like_cpu():
    row = torch.arange(6.0)
    expected = torch.zeros(4, 6).copy_(row)
    with no_fallback():
        assert_same(torch.zeros(4, 6, device="neuron").copy_(row), expected)
        assert_same(torch.zeros(4, 6, device="neuron").copy_(row.neuron()), expected)
        assert_same(torch.zeros(4, 6, device="neuron").copy_(torch.tensor(2.5)),
                    torch.full((4, 6), 2.5))
    assert_same(torch.zeros(4, 6).copy_(row.neuron()), expected)


def test_zero_size_tensors_copy_in_every_direction():
    for shape in [(0,), (0, 3), (3, 0, 2)]:
        cpu = torch.empty(shape)
        with no_fallback():
            on_device = cpu.neuron()
            assert on_device.shape == cpu.shape and on_device.device.type == "neuron"
            assert on_device.to(torch.int8).shape == cpu.shape
            assert on_device.to("neuron:1").shape == cpu.shape
        assert_same(on_device.cpu(), cpu)
        torch.empty(shape, device="neuron").copy_(cpu)


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_zero_dim_tensors_and_item_match_cpu(dtype):
    cpu = torch.tensor(-3.75 if dtype.is_floating_point else 5, dtype=dtype)
    if dtype == torch.uint8:
        cpu = torch.tensor(250, dtype=dtype)
    with no_fallback():
        n = cpu.neuron()
        assert n.dim() == 0
        value = n.item()
    assert type(value) is type(cpu.item())
    assert value == cpu.item()
    assert_same(n.cpu(), cpu)
    assert_same(n.to("neuron:1").to(torch.float64), cpu.double())
    with no_fallback():
        assert torch.arange(5, dtype=torch.float64).neuron()[3].item() == 3.0


def test_item_of_a_multi_element_tensor_is_an_error_like_cpu():
    with pytest.raises(RuntimeError, match="a Tensor with 2 elements cannot be converted to Scalar"):
        torch.ones(2, device="neuron").item()


# ---- pinned memory and non_blocking -------------------------------------


def test_pinned_memory_is_reported_pinned():
    t = torch.randn(100)
    assert not t.is_pinned()
    pinned = t.pin_memory()
    assert pinned.is_pinned() and torch.equal(pinned, t)
    assert torch.empty(10, pin_memory=True).is_pinned()
    assert torch.zeros(10, pin_memory=True).is_pinned()
    assert pinned[2:].is_pinned(), "a view of pinned memory is pinned"
    assert not torch.ones(3, device="neuron").is_pinned()


def test_non_blocking_host_to_device_copy_overlaps_with_the_device(gates):
    src = torch.randn(1 << 16).pin_memory()
    dst = torch.zeros(1 << 16, device="neuron")
    torch.neuron.synchronize()
    stream = torch.neuron.current_stream()
    handle = gates.close(stream)
    dst.copy_(src, non_blocking=True)  # returns at once: the stream is held
    assert not stream.query()
    gates.open(handle)
    stream.synchronize()
    assert torch.equal(dst.cpu(), src)


def test_non_blocking_device_to_host_copy_overlaps_with_the_host(gates):
    src = torch.randn(1 << 16)
    on_device = src.neuron()
    dst = torch.zeros(1 << 16).pin_memory()
    stream = torch.neuron.current_stream()
    handle = gates.close(stream)
    dst.copy_(on_device, non_blocking=True)
    assert not stream.query()
    time.sleep(0.02)
    assert torch.equal(dst, torch.zeros(1 << 16)), "the copy ran before the work queued ahead of it"
    gates.open(handle)
    stream.synchronize()
    assert torch.equal(dst, src)


def test_non_blocking_to_with_a_pinned_source(gates):
    src = torch.arange(1000.0).pin_memory()
    stream = torch.neuron.current_stream()
    handle = gates.close(stream)
    on_device = src.to("neuron", non_blocking=True)
    assert not stream.query()
    gates.open(handle)
    stream.synchronize()
    assert torch.equal(on_device.cpu(), src)


def test_non_blocking_copy_into_pageable_memory_completes_before_returning(gates):
    src = torch.randn(1 << 16)
    on_device = src.neuron()
    dst = torch.zeros(1 << 16)
    opening = gates.open_later(gates.close(), 0.05)
    dst.copy_(on_device, non_blocking=True)  # pageable: the host may reuse it at once
    assert opening.is_set()
    assert torch.equal(dst, src)


def test_non_blocking_to_cpu_gives_pinned_memory_valid_after_synchronize():
    src = torch.randn(1 << 16)
    out = src.neuron().to("cpu", non_blocking=True)  # as on CUDA: a pinned result
    assert out.is_pinned()
    torch.neuron.synchronize()
    assert torch.equal(out, src)


def test_blocking_copies_wait_for_the_work_queued_before_them(gates):
    x = torch.zeros(1 << 16, device="neuron")
    torch.neuron.synchronize()
    opening = gates.open_later(gates.close(), 0.1)
    x.fill_(4)
    assert torch.equal(x.cpu(), torch.full((1 << 16,), 4.0))
    assert opening.is_set()
    opening = gates.open_later(gates.close(), 0.1)
    x.copy_(torch.full((1 << 16,), 8.0).pin_memory())  # blocking from pinned too
    assert opening.is_set()
    assert torch.neuron.current_stream().query()
    assert torch.equal(x.cpu(), torch.full((1 << 16,), 8.0))


@requires_devices(2)
def test_copy_across_devices_waits_for_the_source_device(gates):
    x = torch.zeros(1 << 16, device="neuron:0")
    torch.neuron.synchronize(0)
    handle = gates.close(torch.neuron.current_stream(0))
    x.fill_(3)
    y = x.to("neuron:1")
    assert not torch.neuron.current_stream(1).query(), "the copy must wait for neuron:0"
    gates.open(handle)
    assert torch.equal(y.cpu(), torch.full((1 << 16,), 3.0))


# ---- errors ---------------------------------------------------------------


def test_partially_overlapping_copy_is_an_error_like_cpu():
    cpu = torch.arange(10.0)
    with pytest.raises(RuntimeError) as cpu_error:
        cpu[1:].copy_(cpu[:-1])
    on_device = torch.arange(10.0).neuron()
    with pytest.raises(RuntimeError) as neuron_error:
        on_device[1:].copy_(on_device[:-1])
    assert str(neuron_error.value) == str(cpu_error.value)
    assert torch.equal(on_device.cpu(), torch.arange(10.0)), "nothing was written"


def test_copy_into_an_internally_overlapping_destination_is_an_error_like_cpu():
    with pytest.raises(RuntimeError) as cpu_error:
        torch.zeros(1).expand(4).copy_(torch.arange(4.0))
    with pytest.raises(RuntimeError) as neuron_error:
        torch.zeros(1, device="neuron").expand(4).copy_(torch.arange(4.0, device="neuron"))
    assert str(neuron_error.value) == str(cpu_error.value)


def test_copy_onto_itself_is_a_no_op():
    x = torch.arange(5.0).neuron()
    x.copy_(x)
    assert torch.equal(x.cpu(), torch.arange(5.0))


def test_unsupported_dtype_is_a_clear_error_naming_it():
    # Complex and wide unsigned dtypes are neuron dtypes now (test_complex.py,
    # test_uint_wide.py); float8 is not.
    f8_host = torch.tensor([1.0, 3.0]).to(torch.float8_e4m3fn)
    for attempt in (
        lambda: f8_host.to("neuron"),
        lambda: f8_host.neuron(),
        lambda: torch.zeros(2, device="neuron").to(torch.float8_e4m3fn),
        lambda: torch.empty(2, dtype=torch.float8_e4m3fn, device="neuron"),
    ):
        with pytest.raises(NotImplementedError, match="Float8_e4m3fn"):
            attempt()
    complex_host = torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex64)
    assert torch.equal(complex_host.to("neuron").cpu(), complex_host)
    assert torch.equal(torch.zeros(4, device="neuron").view(torch.complex64).cpu(),
                       torch.zeros(2, dtype=torch.complex64))


def test_copy_between_neuron_and_another_device_type_is_an_error():
    with pytest.raises(RuntimeError, match="meta"):
        torch.empty(2, device="neuron").copy_(torch.empty(2, device="meta"))
