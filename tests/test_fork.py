"""Processes: a child forked after the runtime started cannot use neuron and
says so (recommending spawn); spawned children work."""

import multiprocessing

import torch

from conftest import check_output, run_python

# Children report through a queue: (in bad fork, outcome of touching neuron).


def touch_neuron(queue):
    bad_fork = torch.neuron._is_in_bad_fork()
    try:
        torch.ones(2, device="neuron")
        queue.put((bad_fork, "no error"))
    except RuntimeError as e:
        queue.put((bad_fork, str(e)))


def compute_on_cpu(queue):
    queue.put(float(torch.arange(4.0).sum()))


def compute_on_neuron(queue):
    x = torch.arange(4.0, device="neuron").fill_(2)
    queue.put((torch.neuron._is_in_bad_fork(), x.cpu().tolist()))


def run_child(method, target, timeout=60):
    ctx = multiprocessing.get_context(method)
    queue = ctx.Queue()
    child = ctx.Process(target=target, args=(queue,))
    child.start()
    try:
        result = queue.get(timeout=timeout)
    finally:
        child.join(timeout)
        if child.is_alive():
            child.kill()
    assert child.exitcode == 0
    return result


def started_runtime():
    x = torch.ones(2, device="neuron")  # device memory and a stream worker
    torch.neuron.synchronize()
    return x


def test_forked_child_touching_neuron_gets_an_error_recommending_spawn():
    started_runtime()
    bad_fork, message = run_child("fork", touch_neuron)
    assert bad_fork is True
    assert "fork" in message and "'spawn'" in message, message


def test_forked_child_can_still_use_the_cpu():
    started_runtime()
    assert run_child("fork", compute_on_cpu) == 6.0


def test_spawned_child_uses_neuron():
    started_runtime()
    bad_fork, values = run_child("spawn", compute_on_neuron)
    assert bad_fork is False
    assert values == [2.0, 2.0, 2.0, 2.0]


def test_parent_is_not_in_a_bad_fork():
    assert torch.neuron._is_in_bad_fork() is False


FORK_BEFORE_START = """
    import os, torch
    # Queries only: no device memory, no stream worker yet.
    print(torch.neuron.device_count(), torch.neuron.get_device_name(), flush=True)
    pid = os.fork()
    if pid == 0:
        x = torch.ones(3, device="neuron")
        print(torch.neuron._is_in_bad_fork(), x.cpu().tolist(), flush=True)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status))
"""


def test_fork_after_only_querying_devices_leaves_the_child_usable():
    lines = check_output(run_python(FORK_BEFORE_START)).splitlines()
    assert lines[1:] == ["False [1.0, 1.0, 1.0]", "0"]
