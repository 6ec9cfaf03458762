"""The caching device allocator as PyTorch sees it: statistics under the
torch.cuda names, reuse of freed blocks, stream-ordered reuse with
record_stream, empty_cache, and out-of-memory errors."""

import gc

import pytest
import torch

from conftest import check_output, requires_devices, run_python, run_python_many

MIB = 2**20


@pytest.fixture(scope="module", autouse=True)
def older_objects_frozen():
    """pytest-xdist runs many files in one process: a full collection over
    the objects its earlier tests left took 2-3 s per call (90 s of this
    file's 100 in a CI run, 0.1 s when the file runs alone), so they are
    collected once and then frozen out of the collector's sight."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


@pytest.fixture(autouse=True)
def empty_allocator():
    """Each test starts with no live tensors of its own and an empty cache."""
    gc.collect()
    torch.neuron.synchronize()
    torch.neuron.empty_cache()
    torch.neuron.reset_peak_memory_stats()
    yield
    gc.collect()
    torch.neuron.empty_cache()


def stat(name, device=0):
    return torch.neuron.memory_stats(device)[name]


def test_memory_allocated_counts_live_tensors():
    before = torch.neuron.memory_allocated()
    requested_before = stat("requested_bytes.all.current")
    x = torch.empty(1000, device="neuron")  # 4000 bytes, rounded up to 512
    assert torch.neuron.memory_allocated() - before == 4096
    assert stat("requested_bytes.all.current") - requested_before == 4000
    assert stat("allocation.all.current") >= 1
    del x
    assert torch.neuron.memory_allocated() == before


def test_memory_stats_use_the_torch_cuda_key_names():
    stats = torch.neuron.memory_stats()
    for kind in ("allocation", "segment", "active", "inactive_split", "allocated_bytes",
                 "reserved_bytes", "active_bytes", "inactive_split_bytes", "requested_bytes"):
        for pool in ("all", "small_pool", "large_pool"):
            for field in ("current", "peak", "allocated", "freed"):
                assert f"{kind}.{pool}.{field}" in stats
    for name in ("num_alloc_retries", "num_ooms", "num_sync_all_streams",
                 "num_device_alloc", "num_device_free"):
        assert name in stats
    assert stats["allocated_bytes.all.current"] == torch.neuron.memory_allocated()
    assert stats["reserved_bytes.all.current"] == torch.neuron.memory_reserved()


def test_small_and_large_pools_are_counted_apart():
    small = torch.empty(1000, device="neuron")
    large = torch.empty(4 * MIB, dtype=torch.uint8, device="neuron")
    stats = torch.neuron.memory_stats()
    assert stats["allocated_bytes.small_pool.current"] >= 4000
    assert stats["allocated_bytes.large_pool.current"] >= 4 * MIB
    assert (stats["allocated_bytes.all.current"]
            == stats["allocated_bytes.small_pool.current"] + stats["allocated_bytes.large_pool.current"])
    del small, large


def test_max_memory_allocated_tracks_the_peak_until_reset():
    base = torch.neuron.memory_allocated()
    x = torch.empty(8 * MIB, dtype=torch.uint8, device="neuron")
    del x
    assert torch.neuron.max_memory_allocated() >= base + 8 * MIB
    assert torch.neuron.memory_allocated() == base
    assert torch.neuron.max_memory_reserved() >= 8 * MIB
    torch.neuron.reset_peak_memory_stats()
    assert torch.neuron.max_memory_allocated() == base
    assert torch.neuron.max_memory_reserved() == torch.neuron.memory_reserved()


def test_reset_accumulated_memory_stats_zeroes_the_totals():
    x = torch.empty(1000, device="neuron")
    del x
    assert stat("allocated_bytes.all.allocated") > 0
    torch.neuron.reset_accumulated_memory_stats()
    assert stat("allocated_bytes.all.allocated") == 0
    assert stat("allocated_bytes.all.freed") == 0


def test_freed_memory_stays_reserved_until_empty_cache():
    x = torch.empty(16 * MIB, dtype=torch.uint8, device="neuron")
    reserved = torch.neuron.memory_reserved()
    assert reserved >= 16 * MIB
    del x
    assert torch.neuron.memory_reserved() == reserved, "the cache keeps the segment"
    torch.neuron.empty_cache()
    assert torch.neuron.memory_reserved() <= reserved - 16 * MIB


def test_mem_get_info_reports_free_and_total_device_memory():
    free, total = torch.neuron.mem_get_info()
    assert total == torch.neuron.get_device_properties(0).total_memory
    assert 0 < free <= total
    x = torch.empty(64 * MIB, dtype=torch.uint8, device="neuron")
    free_after, _ = torch.neuron.mem_get_info()
    assert free - free_after >= 64 * MIB
    del x
    torch.neuron.empty_cache()
    assert torch.neuron.mem_get_info()[0] == free


def test_memory_summary_is_a_table_of_the_statistics():
    x = torch.empty(1000, device="neuron")
    summary = torch.neuron.memory_summary()
    for text in ("neuron:0", "Allocated memory", "Reserved memory", "Active memory",
                 "from small pool", "from large pool", "OOMs"):
        assert text in summary, text
    assert "from small pool" not in torch.neuron.memory_summary(abbreviated=True)
    del x


def test_accelerator_memory_functions_agree_with_torch_neuron():
    x = torch.empty(30 * MIB, dtype=torch.uint8, device="neuron")
    assert torch.accelerator.memory_allocated(0) == torch.neuron.memory_allocated(0)
    assert torch.accelerator.memory_reserved(0) == torch.neuron.memory_reserved(0)
    assert torch.accelerator.max_memory_allocated(0) == torch.neuron.max_memory_allocated(0)
    assert torch.accelerator.max_memory_reserved(0) == torch.neuron.max_memory_reserved(0)
    assert dict(torch.accelerator.memory_stats(0)) == torch.neuron.memory_stats(0)
    assert torch.accelerator.get_memory_info(0) == torch.neuron.mem_get_info(0)
    torch.accelerator.reset_peak_memory_stats(0)
    assert torch.neuron.max_memory_allocated(0) == torch.neuron.memory_allocated(0)
    reserved = torch.neuron.memory_reserved(0)
    del x
    torch.accelerator.empty_cache()
    assert torch.neuron.memory_reserved(0) <= reserved - 30 * MIB


@requires_devices(2)
def test_statistics_are_per_device():
    before0 = torch.neuron.memory_allocated(0)
    before1 = torch.neuron.memory_allocated(1)
    x = torch.empty(2 * MIB, dtype=torch.uint8, device="neuron:1")
    assert torch.neuron.memory_allocated(1) - before1 == 2 * MIB
    assert torch.neuron.memory_allocated(0) == before0
    with torch.neuron.device(1):
        assert torch.neuron.memory_allocated() - before1 == 2 * MIB
    del x


def test_a_freed_block_is_reused_by_the_next_allocation():
    x = torch.empty(1000, device="neuron")
    ptr = x.data_ptr()
    del x
    y = torch.empty(1000, device="neuron")
    assert y.data_ptr() == ptr
    segments = stat("num_device_alloc")
    for _ in range(10):
        del y
        y = torch.empty(1000, device="neuron")
        assert y.data_ptr() == ptr
    assert stat("num_device_alloc") == segments, "steady state never reaches the device allocator"


def test_record_stream_delays_reuse_until_the_other_stream_is_done(gates):
    side = torch.neuron.Stream()
    x = torch.empty(1000, device="neuron")
    ptr = x.data_ptr()
    handle = gates.close(side)
    x.record_stream(side)
    del x
    y = torch.empty(1000, device="neuron")
    assert y.data_ptr() != ptr, "memory in use by a held stream was handed out again"
    gates.open(handle)
    side.synchronize()
    z = torch.empty(1000, device="neuron")
    assert z.data_ptr() == ptr
    del y, z


def test_record_stream_is_a_native_op(op_tracking):
    x = torch.empty(10, device="neuron")
    x.record_stream(torch.neuron.Stream())
    import torchneuron

    assert torchneuron.get_fallback_ops() == {}
    assert "aten::record_stream" in torchneuron.get_executed_ops()


OOM_PROBE = """
    import torch
    MIB = 2**20
    free, total = torch.neuron.mem_get_info()
    print(total)
    held = torch.empty(10 * MIB, dtype=torch.uint8, device="neuron")
    try:
        torch.empty(100 * MIB, dtype=torch.uint8, device="neuron")
        print("no error")
    except torch.OutOfMemoryError as e:
        print(isinstance(e, RuntimeError))
        print(str(e).splitlines()[0])
    stats = torch.neuron.memory_stats()
    print(stats["num_ooms"], torch.neuron.memory_allocated() == 10 * MIB)
    # The device still works after the error, up to its capacity.
    more = torch.empty(40 * MIB, dtype=torch.uint8, device="neuron").fill_(7)
    print(more[-1].item())
    del held, more
    torch.neuron.empty_cache()
    whole = torch.empty(60 * MIB, dtype=torch.uint8, device="neuron").fill_(1)
    print(whole[0].item(), whole[-1].item())
"""

RETRY_PROBE = """
    import torch
    MIB = 2**20
    cached = torch.empty(40 * MIB, dtype=torch.uint8, device="neuron")
    del cached  # stays reserved in the cache
    x = torch.empty(50 * MIB, dtype=torch.uint8, device="neuron")
    stats = torch.neuron.memory_stats()
    print(stats["num_alloc_retries"], stats["num_ooms"])
"""


@pytest.fixture(scope="module")
def children():
    """The 64 MiB-device probes, run concurrently once."""
    small_device = {"NEURON_RT_HBM_BYTES": "64M"}
    return run_python_many({"oom": (OOM_PROBE, small_device), "retry": (RETRY_PROBE, small_device)})


def test_out_of_memory_is_an_out_of_memory_error_and_the_device_recovers(children):
    lines = check_output(children["oom"]).splitlines()
    assert lines[0] == str(64 * MIB)
    assert lines[1] == "True"
    message = lines[2]
    assert "neuron device 0" in message or "neuron:0" in message, message
    for words in ("tried to allocate 100.00 MiB", "allocated", "reserved", "free"):
        assert words in message, message
    assert lines[3] == "1 True"
    assert lines[4] == "7"
    assert lines[5] == "1 1"


def test_out_of_memory_retries_after_releasing_the_cache(children):
    assert check_output(children["retry"]).split() == ["1", "0"]


# ---- giving memory back while queued work still reads it -------------------


def test_empty_cache_waits_for_work_that_still_reads_a_freed_tensor(gates):
    """cudaFree synchronises: releasing a cached segment (which drops its
    pages) must wait until the stream has passed the last use of its blocks."""
    n = 1 << 20  # 4 MiB: its own segment, whose pages a release drops
    x = torch.ones(n, device="neuron")
    handle = gates.close()
    total = x.sum()  # queued behind the gate
    del x
    opening = gates.open_later(handle, 0.2)  # a Python thread: empty_cache drops the GIL
    torch.neuron.empty_cache()
    assert opening.is_set(), "empty_cache returned while a queued op still read the segment"
    assert torch.neuron.memory_reserved() < n * 4, "the segment was not released"
    assert total.item() == n


RETRY_READER_PROBE = """
    import torch
    from torchneuron import _C
    MIB = 2**20
    n = 40 * MIB // 4
    small = torch.zeros(1, device="neuron")  # the small pool's segment first, below x's
    x = torch.ones(n, device="neuron")  # on the default stream
    torch.neuron.synchronize()
    gate = _C._close_stream_gate(0, 0)
    total = x.sum()  # queued behind the gate, reads x
    del x  # cached on the default stream
    _C._open_stream_gate_after(gate, 0.3)  # the allocation below holds the GIL
    side = torch.neuron.Stream()
    with torch.neuron.stream(side):
        # Fits only once x's segment is released: the retry path.
        y = torch.empty(100 * MIB // 4, device="neuron").fill_(5.0)
    side.synchronize()
    print(total.item() == n, torch.neuron.memory_stats()["num_alloc_retries"])
"""


def test_the_retry_after_out_of_memory_respects_queued_readers():
    """A segment freed to satisfy another stream's allocation must not reach
    that stream before its own stream's queued reader has run."""
    out = check_output(run_python(RETRY_READER_PROBE, {"NEURON_RT_HBM_BYTES": "120M"}))
    assert out.split() == ["True", "1"]


# ---- host memory behind device memory ---------------------------------------


def host_available_bytes():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    pytest.skip("no MemAvailable in /proc/meminfo")


def test_an_allocation_the_host_cannot_back_is_an_out_of_memory_error():
    """Device memory is host memory committed on first touch: a tensor larger
    than what the host has available must fail now, not get the process
    killed by the kernel's OOM killer when it is written."""
    free, total = torch.neuron.mem_get_info()
    half = int(host_available_bytes() * 0.55)
    if half >= free or torch.neuron.device_count() < 2:
        pytest.skip("needs two devices each larger than half of what the host has available")
    # Two devices together asking for more than the host has (each alone fits).
    held = torch.empty(half, dtype=torch.uint8, device="neuron:1")
    with pytest.raises(torch.OutOfMemoryError, match="backed by host memory"):
        torch.empty(half, dtype=torch.uint8, device="neuron")
    del held
    x = torch.empty(64 * MIB, dtype=torch.uint8, device="neuron").fill_(3)
    assert x[-1].item() == 3


CGROUP_PROBE = """
    import os
    with open(PROCS, "w") as f:  # into the cgroup before any device memory exists
        f.write(str(os.getpid()))
    import torch
    MIB = 2**20
    try:
        torch.empty(2048 * MIB, dtype=torch.uint8, device="neuron")
        print("accepted")
    except torch.OutOfMemoryError as e:
        print("oom", "backed by host memory" in str(e))
    x = torch.empty(128 * MIB, dtype=torch.uint8, device="neuron").fill_(1)
    print(int(x.sum().item()) == 128 * MIB)
"""

CGROUP_LIMIT = 1536 * MIB


def make_memory_cgroup(limit):
    """A memory cgroup (v2 or v1) with the given limit, or None where this
    machine does not let us make one."""
    import os
    import uuid

    name = f"torchneuron-test-{uuid.uuid4().hex[:8]}"
    for root, limit_file in (("/sys/fs/cgroup", "memory.max"),
                             ("/sys/fs/cgroup/unified", "memory.max"),
                             ("/sys/fs/cgroup/memory", "memory.limit_in_bytes")):
        path = os.path.join(root, name)
        try:
            os.mkdir(path)
        except OSError:
            continue
        if not os.path.exists(os.path.join(path, "cgroup.procs")):  # a plain folder, not a cgroup
            os.rmdir(path)
            continue
        try:
            with open(os.path.join(path, limit_file), "w") as f:
                f.write(str(limit))
            return path
        except OSError:
            os.rmdir(path)
    return None


def test_a_memory_cgroup_limit_bounds_device_memory():
    """Inside a container the cgroup's limit, not the host's RAM, decides
    what can be backed: 2 GiB under a 1.5 GiB limit is an error, not a kill."""
    import os

    path = make_memory_cgroup(CGROUP_LIMIT)
    if path is None:
        pytest.skip("cannot create a memory cgroup here")
    try:
        code = CGROUP_PROBE.replace("PROCS", repr(os.path.join(path, "cgroup.procs")))
        out = check_output(run_python(code))
        assert out.split() == ["oom", "True", "True"]
    finally:
        os.rmdir(path)
