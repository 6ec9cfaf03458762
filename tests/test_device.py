"""The neuron device: registration, selection, properties and configuration
through the environment (the NEURON_* variables are read once per process,
so those checks run in fresh interpreters)."""

import ast

import pytest
import torch

from conftest import check_output, requires_devices, run_python_many

GIB = 2**30
KIB = 2**10

AUTOLOAD_PROBE = """
    import sys, torch
    print(torch.accelerator.current_accelerator())
    print(torch.accelerator.device_count())
    print(hasattr(torch, "neuron"))
    print("torchneuron" in sys.modules)
"""

AUTOLOAD_DISABLED_PROBE = """
    import sys, torch
    print(torch._C._get_privateuse1_backend_name())
    print(hasattr(torch, "neuron"))
    print("torchneuron" in sys.modules)
    try:
        torch.device("neuron")
        print("neuron device accepted")
    except RuntimeError:
        print("neuron device rejected")
"""

PROPERTIES_PROBE = """
    import torch
    props = [torch.neuron.get_device_properties(i) for i in range(torch.neuron.device_count())]
    print(repr([dict(vars(p)) for p in props]))
"""

INVALID_CONFIG_PROBE = """
    import torch
    print(torch.neuron.device_count(), torch.neuron.is_available())
    print(torch.accelerator.device_count(), torch.accelerator.is_available())
    for attempt in (torch.neuron._lazy_init, lambda: torch.empty(1, device="neuron")):
        try:
            attempt()
            print("no error")
        except RuntimeError as e:
            print(type(e).__name__, "|", str(e).splitlines()[0])
"""

CONFIGS = {
    "trn1": {"NEURON_PLATFORM_TARGET_OVERRIDE": "trn1"},
    "trn3": {"NEURON_PLATFORM_TARGET_OVERRIDE": "trn3"},
    "visible_list": {"NEURON_RT_VISIBLE_CORES": "1,3"},
    "visible_range": {"NEURON_RT_VISIBLE_CORES": "0-2"},
    "num_cores": {"NEURON_RT_NUM_CORES": "2"},
    "visible_and_num": {"NEURON_RT_VISIBLE_CORES": "1-3", "NEURON_RT_NUM_CORES": "2"},
    "lnc1": {"NEURON_LOGICAL_NC_CONFIG": "1"},
}

# One malformed value per variable (the runtime's C tests cover the parsers).
INVALID_CONFIGS = {
    "visible_cores_junk": ("NEURON_RT_VISIBLE_CORES", "abc", {}),
    "num_cores_zero": ("NEURON_RT_NUM_CORES", "0", {}),
    "lnc_three": ("NEURON_LOGICAL_NC_CONFIG", "3", {}),
    "lnc2_on_trn1": ("NEURON_LOGICAL_NC_CONFIG", "2", {"NEURON_PLATFORM_TARGET_OVERRIDE": "trn1"}),
    "unknown_target": ("NEURON_PLATFORM_TARGET_OVERRIDE", "inf2", {}),
    "launch_blocking_junk": ("NEURON_LAUNCH_BLOCKING", "yes", {}),
    "pin_threads_junk": ("TORCHNEURON_PIN_THREADS", "yes", {}),
    "top_junk": ("TORCHNEURON_TOP", "yes", {}),
}

# The kernel threads' cores after a product large enough to use them all:
# the process's own cores, then one line per thread that keeps to a subset.
PINNING_PROBE = """
    import os, torch
    a = torch.randn(512, 512, device="neuron")
    (a @ a).sum().item()
    print(sorted(os.sched_getaffinity(0)))
    for tid in sorted(os.listdir("/proc/self/task")):
        cores = os.sched_getaffinity(int(tid))
        if cores != os.sched_getaffinity(0):
            print(sorted(cores))
"""
PINNING_CONFIGS = {
    "pin_default": {"TORCHNEURON_NUM_THREADS": "2"},
    "pin_off": {"TORCHNEURON_NUM_THREADS": "2", "TORCHNEURON_PIN_THREADS": "0"},
    "pin_more_threads_than_cores": {"TORCHNEURON_NUM_THREADS": "256"},
    # torchrun's second of two ranks on this host: half the cores, the second half
    "local_rank_1_of_2": {"LOCAL_WORLD_SIZE": "2", "LOCAL_RANK": "1", "TORCHNEURON_NUM_THREADS": ""},
    "local_rank_1_of_2_threads_given": {"LOCAL_WORLD_SIZE": "2", "LOCAL_RANK": "1", "TORCHNEURON_NUM_THREADS": "2"},
}


@pytest.fixture(scope="module")
def children():
    """Every fresh-interpreter probe of this file, run concurrently once."""
    jobs = {
        "autoload": (AUTOLOAD_PROBE, {}),
        "autoload_disabled": (AUTOLOAD_DISABLED_PROBE, {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}),
    }
    for name, env in CONFIGS.items():
        jobs[name] = (PROPERTIES_PROBE, env)
    for name, (variable, value, extra) in INVALID_CONFIGS.items():
        jobs["invalid_" + name] = (INVALID_CONFIG_PROBE, {variable: value, **extra})
    for name, env in PINNING_CONFIGS.items():
        jobs[name] = (PINNING_PROBE, env)
    return run_python_many(jobs)


def properties_in(children, name):
    return ast.literal_eval(check_output(children[name]))


# ---- registration -------------------------------------------------------


def test_import_torch_alone_makes_neuron_the_current_accelerator(children):
    lines = check_output(children["autoload"]).split()
    assert lines == ["neuron", "4", "True", "True"]


def test_autoload_disabled_leaves_neuron_unregistered(children):
    lines = check_output(children["autoload_disabled"]).splitlines()
    assert lines == ["privateuseone", "False", "False", "neuron device rejected"]


# ---- torch.accelerator ---------------------------------------------------


def test_accelerator_reports_the_neuron_devices():
    assert torch.accelerator.current_accelerator() == torch.device("neuron")
    assert torch.accelerator.is_available()
    assert torch.accelerator.device_count() == torch.neuron.device_count() == 4
    assert torch.accelerator.current_device_index() == 0


@requires_devices(3)
def test_accelerator_set_device_index_changes_the_current_device():
    torch.accelerator.set_device_index(2)
    assert torch.accelerator.current_device_index() == 2
    assert torch.neuron.current_device() == 2
    assert torch.empty(1, device="neuron").device == torch.device("neuron:2")
    torch.accelerator.set_device_index("neuron:1")
    assert torch.neuron.current_device() == 1


@requires_devices(3)
def test_accelerator_device_index_context_restores_the_previous_device():
    with torch.accelerator.device_index(1):
        assert torch.accelerator.current_device_index() == 1
        with torch.accelerator.device_index(2):
            assert torch.neuron.current_device() == 2
        assert torch.neuron.current_device() == 1
    assert torch.accelerator.current_device_index() == 0


def test_accelerator_synchronize_waits_for_queued_work(gates):
    x = torch.zeros(1 << 16, device="neuron")
    opening = gates.open_later(gates.close(), 0.1)
    x.fill_(3)
    torch.accelerator.synchronize()
    assert opening.is_set()
    assert torch.accelerator.current_stream().query()
    assert torch.equal(x.cpu(), torch.full((1 << 16,), 3.0))


def test_accelerator_current_stream_and_set_stream():
    default = torch.accelerator.current_stream()
    assert default.device == torch.device("neuron:0") and default.stream_id == 0
    side = torch.Stream("neuron")
    torch.accelerator.set_stream(side)
    assert torch.accelerator.current_stream() == side
    assert torch.neuron.current_stream() == side
    torch.accelerator.set_stream(default)
    assert torch.accelerator.current_stream() == default


@requires_devices(3)
def test_accelerator_set_stream_makes_the_stream_device_current():
    side = torch.Stream("neuron:2")
    torch.accelerator.set_stream(side)
    assert torch.accelerator.current_device_index() == 2
    assert torch.accelerator.current_stream() == side
    assert torch.accelerator.current_stream(0).stream_id == 0


@requires_devices(2)
def test_accelerator_current_stream_of_another_device():
    stream = torch.accelerator.current_stream(1)
    assert stream.device == torch.device("neuron:1")
    assert stream.stream_id == 0


# ---- torch.neuron device functions -------------------------------------


def test_neuron_is_available_and_counts_devices():
    assert torch.neuron.is_available()
    assert torch.neuron.device_count() == 4
    assert torch.neuron.current_device() == 0
    assert torch.neuron.is_initialized()


@requires_devices(4)
def test_set_device_accepts_index_string_and_device():
    torch.neuron.set_device(3)
    assert torch.neuron.current_device() == 3
    torch.neuron.set_device("neuron:1")
    assert torch.neuron.current_device() == 1
    torch.neuron.set_device(torch.device("neuron", 2))
    assert torch.neuron.current_device() == 2


@requires_devices(3)
def test_device_context_switches_and_restores_the_current_device():
    with torch.neuron.device(2):
        assert torch.neuron.current_device() == 2
        assert torch.ones(2, device="neuron").device == torch.device("neuron:2")
        with torch.neuron.device("neuron:1"):
            assert torch.neuron.current_device() == 1
        assert torch.neuron.current_device() == 2
    assert torch.neuron.current_device() == 0


@requires_devices(2)
def test_device_of_makes_the_tensor_device_current():
    t = torch.empty(1, device="neuron:1")
    with torch.neuron.device_of(t):
        assert torch.neuron.current_device() == 1
    with torch.neuron.device_of(torch.empty(1)):
        assert torch.neuron.current_device() == 0
    assert torch.neuron.current_device() == 0


def test_get_device_name_names_the_default_trn2_core():
    assert torch.neuron.get_device_name() == "NeuronCore-v3 (trn2, simulated)"
    assert torch.neuron.get_device_name(0) == torch.neuron.get_device_properties(0).name


def test_default_device_properties_are_those_of_a_trn2_logical_core():
    p = torch.neuron.get_device_properties(0)
    assert p.target == "trn2"
    assert p.logical_nc_config == 2
    assert p.total_memory == 96 * GIB // 4
    assert (p.sbuf_partitions, p.sbuf_partition_bytes) == (128, 224 * KIB)
    assert (p.psum_partitions, p.psum_partition_bytes, p.psum_banks) == (128, 16 * KIB, 8)
    assert p.tensor_engine_hz > 0 and p.dma_bytes_per_s > 0 and p.hbm_bytes_per_s > 0
    assert torch.neuron.get_device_capability() == (3, 0)
    assert "trn2" in repr(p)
    assert [torch.neuron.get_device_properties(i).logical_core for i in range(4)] == [0, 1, 2, 3]


def test_trn1_target_has_two_neuroncore_v2_devices(children):
    props = properties_in(children, "trn1")
    assert len(props) == 2
    p = props[0]
    assert p["name"] == "NeuronCore-v2 (trn1, simulated)" and p["target"] == "trn1"
    assert p["logical_nc_config"] == 1
    assert p["total_memory"] == 16 * GIB
    assert (p["sbuf_partitions"], p["sbuf_partition_bytes"]) == (128, 192 * KIB)
    assert (p["psum_partitions"], p["psum_partition_bytes"], p["psum_banks"]) == (128, 16 * KIB, 8)


def test_trn3_target_has_four_neuroncore_v4_devices(children):
    props = properties_in(children, "trn3")
    assert len(props) == 4
    p = props[0]
    assert p["name"] == "NeuronCore-v4 (trn3, simulated)" and p["target"] == "trn3"
    assert p["logical_nc_config"] == 2
    assert p["total_memory"] == 144 * GIB // 4
    assert p["sbuf_partition_bytes"] == 256 * KIB


def test_synchronize_waits_for_every_stream_of_the_device(gates):
    x = torch.zeros(1 << 16, device="neuron")
    side = torch.neuron.Stream()
    opening = gates.open_later(gates.close(side), 0.1)
    with torch.neuron.stream(side):
        x.fill_(5)
    torch.neuron.synchronize()
    assert opening.is_set()
    assert side.query()
    assert torch.equal(x.cpu(), torch.full((1 << 16,), 5.0))


def test_amp_helpers_report_bfloat16_and_float16():
    assert torch.neuron.get_amp_supported_dtype() == [torch.bfloat16, torch.float16]
    assert torch.neuron.is_bf16_supported()


# ---- configuration through the environment -----------------------------


@pytest.mark.parametrize(
    "config, cores",
    [
        ("visible_list", [1, 3]),
        ("visible_range", [0, 1, 2]),
        ("num_cores", [0, 1]),
        ("visible_and_num", [1, 2]),
    ],
)
def test_visible_and_num_cores_select_the_devices(children, config, cores):
    props = properties_in(children, config)
    assert [p["logical_core"] for p in props] == cores


def test_logical_nc_config_1_shows_every_physical_core(children):
    props = properties_in(children, "lnc1")
    assert len(props) == 8
    assert all(p["logical_nc_config"] == 1 for p in props)
    assert props[0]["total_memory"] == 96 * GIB // 8


@pytest.mark.parametrize("name", sorted(INVALID_CONFIGS))
def test_malformed_environment_variable_is_a_clear_error(children, name):
    variable = INVALID_CONFIGS[name][0]
    lines = check_output(children["invalid_" + name]).splitlines()
    assert lines[0] == "0 False", "no device may be visible under a bad configuration"
    assert lines[1] == "0 False"
    for line in lines[2:]:
        assert line != "no error"
        assert variable in line, line


def test_kernel_pool_helper_and_stream_worker_keep_to_cores_of_their_own_by_default(children):
    lines = [ast.literal_eval(line) for line in check_output(children["pin_default"]).splitlines()]
    cores = lines[0]
    if len(cores) < 2:
        pytest.skip("needs two cores")
    assert sorted(lines[1:]) == [[cores[0]], [cores[1]]], (
        "the stream worker on the process's first core, its one helper on the second; "
        "the Python thread floats"
    )


def test_ranks_of_one_host_split_the_cores(children):
    """Under a launcher with several ranks per host (LOCAL_WORLD_SIZE), a
    rank's kernel threads are its share of the cores and keep to its own
    slice (rank 1 of 2: the second half); TORCHNEURON_NUM_THREADS still
    decides when given."""
    lines = [ast.literal_eval(line) for line in check_output(children["local_rank_1_of_2"]).splitlines()]
    cores = lines[0]
    share = len(cores) // 2
    if share < 2:  # one thread: nothing to pin (it floats)
        assert lines[1:] == [], lines
    else:
        assert sorted(lines[1:]) == [[c] for c in cores[share:2 * share]], lines
    given = [ast.literal_eval(line) for line in check_output(children["local_rank_1_of_2_threads_given"]).splitlines()]
    if len(cores) >= 2:
        assert sorted(given[1:]) == [[cores[0]], [cores[1]]], given


def test_kernel_threads_float_when_pinning_is_off_or_cores_are_too_few(children):
    for name in ("pin_off", "pin_more_threads_than_cores"):
        lines = check_output(children[name]).splitlines()
        assert len(lines) == 1, (name, lines)


# ---- invalid device indices --------------------------------------------


def test_invalid_device_index_is_a_clear_error():
    with pytest.raises(RuntimeError, match="neuron:9"):
        torch.empty(1, device="neuron:9")
    with pytest.raises(RuntimeError, match="neuron:9"):
        torch.neuron.set_device(9)
    with pytest.raises(RuntimeError, match="9"):
        torch.ones(2).to("neuron:9")
    with pytest.raises(RuntimeError, match="9"):
        with torch.neuron.device(9):
            pass
    assert torch.neuron.current_device() == 0


def test_non_neuron_device_is_rejected_by_torch_neuron():
    with pytest.raises(ValueError, match="neuron device"):
        torch.neuron.set_device("cpu")


# ---- Tensor and Module methods ------------------------------------------


def test_tensor_neuron_moves_to_the_current_or_given_device():
    cpu = torch.arange(6.0).reshape(2, 3)
    moved = cpu.neuron()
    assert moved.device == torch.device("neuron:0")
    assert moved.is_neuron and not cpu.is_neuron
    assert torch.equal(moved.cpu(), cpu)
    assert cpu.neuron(1).device == torch.device("neuron:1")
    with torch.neuron.device(2):
        assert cpu.neuron().device == torch.device("neuron:2")
    assert moved.neuron() is moved


def test_module_neuron_moves_parameters_and_buffers():
    cpu_model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    model.load_state_dict(cpu_model.state_dict())
    assert model.neuron() is model
    for t in list(model.parameters()) + list(model.buffers()):
        assert t.device == torch.device("neuron:0")
    for name, t in model.state_dict().items():
        assert torch.equal(t.cpu(), cpu_model.state_dict()[name]), name
    model.neuron(1)
    assert all(p.device == torch.device("neuron:1") for p in model.parameters())

