"""Streams and events on neuron: torch.Stream / torch.Event, the torch.neuron
names, ordering between streams, queries, timing and priorities.

Stream gates (see conftest.Gates) hold a stream's queue so that tests can see
work that is queued but has not run."""

import time

import pytest
import torch

from conftest import check_output, requires_devices, run_python

N = 1 << 16


def full(value, n=N):
    return torch.full((n,), float(value))


# ---- the objects ---------------------------------------------------------


def test_torch_stream_on_neuron_uses_the_current_device():
    s = torch.Stream("neuron")
    assert s.device == torch.device("neuron:0")
    assert s.stream_id != 0, "a new stream is not the default stream"
    with torch.neuron.device(1):
        assert torch.Stream("neuron").device == torch.device("neuron:1")
    assert torch.Stream("neuron:2").device_index == 2


def test_neuron_stream_is_a_torch_stream():
    s = torch.neuron.Stream()
    assert isinstance(s, torch.Stream)
    assert s.device == torch.device("neuron:0")
    assert torch.neuron.Stream(device=1).device == torch.device("neuron:1")
    assert torch.neuron.Stream("neuron:2").device_index == 2


def test_stream_priority_high_and_normal():
    assert torch.neuron.Stream(priority=-1).priority == -1
    assert torch.neuron.Stream().priority == 0
    assert torch.neuron.Stream(priority=0).priority == 0
    assert torch.neuron.default_stream().priority == 0
    # Out-of-range priorities clamp to the supported range, as in CUDA.
    assert torch.neuron.Stream(priority=-5).priority == -1
    high = torch.Stream("neuron", priority=-1)
    assert torch.neuron.Stream(
        stream_id=high.stream_id, device_index=0, device_type=high.device_type
    ).priority == -1


def test_neuron_event_builds_a_torch_event_on_neuron():
    e = torch.neuron.Event()
    assert type(e) is torch.Event
    assert isinstance(e, torch.neuron.Event)
    assert isinstance(torch.Event("neuron"), torch.neuron.Event)
    assert not isinstance(torch.ones(1), torch.neuron.Event)
    with pytest.raises(NotImplementedError, match="interprocess"):
        torch.neuron.Event(interprocess=True)


def test_default_and_current_stream():
    default = torch.neuron.default_stream()
    assert default.stream_id == 0 and default.device == torch.device("neuron:0")
    assert torch.neuron.current_stream() == default
    assert torch.neuron.default_stream(1).device == torch.device("neuron:1")
    assert torch.neuron.current_stream(1).device_index == 1


def test_stream_context_makes_the_stream_current_and_restores_it():
    s = torch.neuron.Stream()
    with torch.neuron.stream(s):
        assert torch.neuron.current_stream() == s
        assert torch.accelerator.current_stream() == s
    assert torch.neuron.current_stream() == torch.neuron.default_stream()
    with torch.neuron.stream(None):
        assert torch.neuron.current_stream() == torch.neuron.default_stream()


@requires_devices(2)
def test_stream_context_on_another_device_switches_device_too():
    s = torch.neuron.Stream(device=1)
    with torch.neuron.stream(s):
        assert torch.neuron.current_device() == 1
        assert torch.neuron.current_stream() == s
        assert torch.ones(1, device="neuron").device == torch.device("neuron:1")
    assert torch.neuron.current_device() == 0
    assert torch.neuron.current_stream(1).stream_id == 0


def test_torch_stream_as_context_manager():
    s = torch.Stream("neuron")
    with s:
        assert torch.accelerator.current_stream() == s
    assert torch.accelerator.current_stream().stream_id == 0


def test_set_stream_changes_the_current_stream():
    s = torch.neuron.Stream()
    torch.neuron.set_stream(s)
    assert torch.neuron.current_stream() == s
    torch.neuron.set_stream(None)  # ignored, as in torch.cuda
    assert torch.neuron.current_stream() == s


# ---- ordering, queries and waits -----------------------------------------


def test_work_runs_on_the_current_stream(gates):
    s = torch.neuron.Stream()
    x = torch.zeros(N, device="neuron")
    torch.neuron.synchronize()
    handle = gates.close(s)
    with torch.neuron.stream(s):
        x.fill_(1)
    assert torch.neuron.default_stream().query(), "the default stream has nothing queued"
    assert not s.query()
    gates.open(handle)
    s.synchronize()
    assert torch.equal(x.cpu(), full(1))


@requires_devices(2)
def test_work_runs_on_the_current_stream_of_the_tensor_device(gates):
    x = torch.zeros(N, device="neuron:1")
    torch.neuron.synchronize(1)
    handle = gates.close(torch.neuron.current_stream(1))
    x.fill_(2)  # the current device is neuron:0
    assert not torch.neuron.current_stream(1).query()
    assert torch.neuron.current_stream(0).query()
    gates.open(handle)
    assert torch.equal(x.cpu(), full(2))


def test_two_streams_are_ordered_only_by_events(gates):
    a, b = torch.neuron.Stream(), torch.neuron.Stream()
    x = torch.zeros(N, device="neuron")
    y = torch.zeros(N, device="neuron")
    torch.neuron.synchronize()
    handle = gates.close(a)
    with torch.neuron.stream(a):
        x.fill_(7)
        done = torch.neuron.Event()
        done.record()
    b.wait_event(done)
    with torch.neuron.stream(b):
        y.copy_(x)
        y_host = torch.zeros(N).pin_memory()
        y_host.copy_(y, non_blocking=True)
    time.sleep(0.05)  # time enough for b to run, were it not waiting
    assert not a.query() and not b.query() and not done.query()
    assert torch.equal(y_host, torch.zeros(N)), "b ran before the event it waits on"
    gates.open(handle)
    b.synchronize()
    assert done.query() and a.query() and b.query()
    assert torch.equal(y_host, full(7))
    assert torch.equal(y.cpu(), full(7))


def test_unordered_streams_run_independently(gates):
    a, b = torch.neuron.Stream(), torch.neuron.Stream()
    y = torch.zeros(N, device="neuron")
    torch.neuron.synchronize()
    handle = gates.close(a)
    with torch.neuron.stream(b):
        y.fill_(2)
    b.synchronize()  # returns although a is held: b does not wait for a
    assert not a.query()
    assert torch.equal(y.cpu(), full(2))
    gates.open(handle)


def test_stream_and_event_queries_are_false_while_gated(gates):
    s = torch.neuron.Stream()
    e = torch.Event("neuron")
    assert e.query(), "an event never recorded counts as complete"
    handle = gates.close(s)
    e.record(s)
    assert not s.query()
    assert not e.query()
    gates.open(handle)
    e.synchronize()
    assert e.query()
    s.synchronize()
    assert s.query()


def test_event_wait_makes_the_current_stream_wait(gates):
    a, b = torch.neuron.Stream(), torch.neuron.Stream()
    x = torch.zeros(N, device="neuron")
    torch.neuron.synchronize()
    handle = gates.close(a)
    e = torch.Event("neuron")
    e.record(a)
    with torch.neuron.stream(b):
        e.wait()
        x.fill_(4)
    assert not b.query()
    gates.open(handle)
    b.synchronize()
    assert torch.equal(x.cpu(), full(4))


def test_event_and_stream_synchronize_block_until_done(gates):
    s = torch.neuron.Stream()
    x = torch.zeros(N, device="neuron")
    torch.neuron.synchronize()
    opening = gates.open_later(gates.close(s), 0.1)
    with torch.neuron.stream(s):
        x.fill_(6)
        e = torch.neuron.Event()
        e.record()
    e.synchronize()
    assert opening.is_set(), "synchronize returned before the work could run"
    assert e.query()
    opening = gates.open_later(gates.close(s), 0.1)
    with torch.neuron.stream(s):
        x.fill_(8)
    s.synchronize()
    assert opening.is_set()
    assert torch.equal(x.cpu(), full(8))


def test_wait_stream_orders_a_stream_after_another(gates):
    a, b = torch.neuron.Stream(), torch.neuron.Stream()
    x = torch.zeros(N, device="neuron")
    y = torch.zeros(N, device="neuron")
    torch.neuron.synchronize()
    handle = gates.close(a)
    with torch.neuron.stream(a):
        x.fill_(9)
    b.wait_stream(a)
    with torch.neuron.stream(b):
        y.copy_(x)
    time.sleep(0.02)
    assert not b.query()
    gates.open(handle)
    b.synchronize()
    assert torch.equal(y.cpu(), full(9))


@requires_devices(2)
def test_events_order_streams_across_devices(gates):
    a = torch.neuron.Stream(device=0)
    b = torch.neuron.Stream(device=1)
    y = torch.zeros(N, device="neuron:1")
    torch.neuron.synchronize(1)  # the zero fill ran on neuron:1's default stream
    handle = gates.close(a)
    e = torch.Event("neuron")
    e.record(a)
    b.wait_event(e)
    with torch.neuron.stream(b):
        y.fill_(3)
    assert not b.query()
    gates.open(handle)
    b.synchronize()
    assert torch.equal(y.cpu(), full(3))


def test_a_stream_is_idle_once_its_last_recorded_event_completed():
    s = torch.neuron.Stream()
    x = torch.zeros(1024, device="neuron")
    e = torch.Event("neuron")
    for i in range(200):
        with torch.neuron.stream(s):
            x.fill_(i)
        e.record(s)
        e.synchronize()
        assert s.query(), f"iteration {i}: the event completed but its stream was still busy"


def test_event_recorded_again_tracks_its_latest_record(gates):
    s = torch.neuron.Stream()
    e = torch.Event("neuron")
    e.record(s)
    s.synchronize()
    assert e.query()
    handle = gates.close(s)
    e.record(s)
    assert not e.query()
    gates.open(handle)
    e.synchronize()
    assert e.query()


# ---- timing --------------------------------------------------------------


def test_elapsed_time_measures_the_time_between_timing_events(gates):
    s = torch.neuron.Stream()
    start = torch.neuron.Event(enable_timing=True)
    end = torch.neuron.Event(enable_timing=True)
    with torch.neuron.stream(s):
        start.record()
        start.synchronize()  # start completes before the 100 ms below begin
        gates.open_later(gates.close(), 0.1)
        end.record()
    end.synchronize()
    ms = start.elapsed_time(end)
    assert 100 <= ms < 10000, ms
    assert 0 <= end.elapsed_time(end) < 1e-3


def test_elapsed_time_needs_timing_events():
    start, end = torch.neuron.Event(), torch.neuron.Event()
    start.record()
    end.record()
    end.synchronize()
    with pytest.raises(ValueError, match="enable_timing"):  # torch.Event's own check
        start.elapsed_time(end)


def test_elapsed_time_needs_recorded_events():
    start = torch.neuron.Event(enable_timing=True)
    end = torch.neuron.Event(enable_timing=True)
    end.record()
    end.synchronize()
    with pytest.raises(ValueError, match="recorded"):
        start.elapsed_time(end)


# ---- NEURON_LAUNCH_BLOCKING ----------------------------------------------

LAUNCH_BLOCKING_PROBE = """
    import torch
    from torchneuron import _C
    print(_C._launch_blocking())
    x = torch.empty(1 << 20, device="neuron")
    stream = torch.neuron.current_stream()
    done = []
    for i in range(10):
        x.fill_(i)
        done.append(stream.query())
    e = torch.neuron.Event()
    e.record()
    done.append(e.query())
    pinned = torch.full((1 << 20,), 3.0).pin_memory()
    x.copy_(pinned, non_blocking=True)
    done.append(stream.query())
    print(all(done))
    print(x[-1].item())
"""


def test_launch_blocking_completes_every_launch_before_returning():
    out = check_output(run_python(LAUNCH_BLOCKING_PROBE, {"NEURON_LAUNCH_BLOCKING": "1"}))
    assert out.split() == ["True", "True", "3.0"]


# ---- several producers on one stream --------------------------------------

PRODUCERS_PROBE = """
    import sys, threading
    import torch
    producers, steps = int(sys.argv[1]), 3000
    tensors = [torch.zeros(256, device="neuron") for _ in range(producers)]
    def produce(x):
        for _ in range(steps):
            x.add_(1)
    threads = [threading.Thread(target=produce, args=(x,)) for x in tensors]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(sorted({x.min().item() for x in tensors} | {x.max().item() for x in tensors}))
"""


@pytest.mark.parametrize("producers", [2, 4])
def test_threads_launching_on_one_stream_never_hang(producers):
    """Threads sharing the default stream fill its ring many times over; a
    hang (the stale-count bug of the ring's wait) becomes a timeout."""
    code = PRODUCERS_PROBE.replace("int(sys.argv[1])", str(producers))
    out = check_output(run_python(code, timeout=120))
    assert out.split() == ["[3000.0]"]


# ---- sticky asynchronous errors ---------------------------------------------


# What an out-of-range gather raises on the CPU; ours is also an IndexError.
ASYNC_ERRORS = RuntimeError


def bad_gather():
    """A gather whose index is out of range: accepted at launch, fails in
    the kernel on the stream."""
    src = torch.arange(10.0, device="neuron")
    return torch.gather(src, 0, torch.tensor([1, 12, 3], device="neuron"))


def test_a_failed_stream_fails_every_later_reader_until_cleared():
    good = torch.full((4,), 5.0, device="neuron")
    skipped = torch.empty(4, device="neuron")
    out = bad_gather()
    try:
        torch.mul(good, 2, out=skipped)  # skipped if queued before the failure, else refused
    except ASYNC_ERRORS:
        pass
    with pytest.raises(ASYNC_ERRORS, match="clear_error"):
        torch.neuron.synchronize()
    # Not only the first reader hears of it: the skipped result never reads
    # back as if it were good, and new work is refused.
    for read in (lambda: skipped.cpu(), lambda: out.cpu(), torch.neuron.synchronize,
                 lambda: torch.neuron.current_stream().synchronize(), lambda: good + 1):
        with pytest.raises(ASYNC_ERRORS, match="index 12 is out of bounds"):
            read()
    torch.neuron.clear_error()
    assert (good + 1).cpu().tolist() == [6.0] * 4
    assert (good * 2).cpu().tolist() == [10.0] * 4


def test_other_streams_go_on_but_a_stream_that_waits_on_a_failure_fails():
    side, waiter = torch.neuron.Stream(), torch.neuron.Stream()
    with torch.neuron.stream(side):
        bad_gather()
        after = torch.neuron.Event()
        after.record()
    independent = torch.neuron.Stream()
    with torch.neuron.stream(independent):
        assert (torch.ones(3, device="neuron") * 2).cpu().tolist() == [2.0] * 3
    with pytest.raises(ASYNC_ERRORS, match="out of bounds"):
        after.synchronize()
    waiter.wait_event(after)
    with pytest.raises(ASYNC_ERRORS, match="waited on an event whose work failed"):
        waiter.synchronize()
    torch.neuron.clear_error()
    waiter.synchronize()
    side.synchronize()
