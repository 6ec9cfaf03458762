"""Random number generators of the neuron devices, and torch.save/torch.load
of neuron tensors and modules."""

import pytest
import torch

from conftest import assert_same, requires_devices


@pytest.fixture(autouse=True)
def restore_rng():
    cpu_state = torch.get_rng_state()
    neuron_states = torch.neuron.get_rng_state_all()
    yield
    torch.set_rng_state(cpu_state)
    torch.neuron.set_rng_state_all(neuron_states)


# ---- generators ------------------------------------------------------------


def test_manual_seed_reaches_every_neuron_generator():
    torch.manual_seed(1234)
    assert torch.neuron.initial_seed() == 1234
    assert [g.initial_seed() for g in torch.neuron.default_generators] == [1234] * 4


def test_default_generators_are_one_per_device():
    gens = torch.neuron.default_generators
    assert len(gens) == torch.neuron.device_count()
    assert [g.device for g in gens] == [torch.device("neuron", i) for i in range(len(gens))]
    assert gens[-1].device == torch.device("neuron", len(gens) - 1)
    with pytest.raises(IndexError):
        gens[len(gens)]


def test_rng_state_is_16_bytes_of_seed_and_offset():
    torch.neuron.manual_seed(0x0102030405)
    state = torch.neuron.get_rng_state()
    assert state.dtype == torch.uint8 and state.shape == (16,) and state.device.type == "cpu"
    assert state[:8].tolist() == [5, 4, 3, 2, 1, 0, 0, 0]
    assert state[8:].tolist() == [0] * 8


def test_rng_state_round_trips():
    torch.neuron.manual_seed(7)
    saved = torch.neuron.get_rng_state()
    torch.neuron.manual_seed(8)
    assert not torch.equal(torch.neuron.get_rng_state(), saved)
    torch.neuron.set_rng_state(saved)
    assert torch.equal(torch.neuron.get_rng_state(), saved)
    assert torch.neuron.initial_seed() == 7
    custom = torch.arange(16, dtype=torch.uint8)
    torch.neuron.set_rng_state(custom)
    assert torch.equal(torch.neuron.get_rng_state(), custom)


def test_set_rng_state_rejects_a_state_of_the_wrong_size():
    with pytest.raises(RuntimeError, match="16 bytes"):
        torch.neuron.set_rng_state(torch.zeros(8, dtype=torch.uint8))


@requires_devices(2)
def test_rng_state_is_per_device():
    torch.neuron.manual_seed_all(3)
    with torch.neuron.device(1):
        torch.neuron.manual_seed(99)
    assert torch.neuron.initial_seed() == 3
    assert torch.neuron.default_generators[1].initial_seed() == 99
    assert torch.neuron.get_rng_state(1)[0].item() == 99
    assert torch.neuron.get_rng_state("neuron:0")[0].item() == 3
    states = torch.neuron.get_rng_state_all()
    assert [s[0].item() for s in states[:2]] == [3, 99]
    torch.neuron.manual_seed_all(0)
    torch.neuron.set_rng_state_all(states)
    assert [g.initial_seed() for g in torch.neuron.default_generators][:2] == [3, 99]


def test_manual_seed_all_seeds_every_device():
    torch.neuron.manual_seed_all(42)
    assert {g.initial_seed() for g in torch.neuron.default_generators} == {42}


def test_seed_and_seed_all_pick_a_fresh_random_seed():
    torch.neuron.manual_seed_all(5)
    torch.neuron.seed()
    first = torch.neuron.initial_seed()
    assert first != 5
    torch.neuron.seed_all()
    seeds = {g.initial_seed() for g in torch.neuron.default_generators}
    assert len(seeds) == 1 and seeds != {first}


def test_torch_generator_on_neuron():
    g = torch.Generator(device="neuron")
    assert g.device == torch.device("neuron:0")
    g.manual_seed(2024)
    assert g.initial_seed() == 2024
    state = g.get_state()
    assert state.shape == (16,)
    other = torch.Generator(device="neuron:1")
    assert other.device == torch.device("neuron:1")
    other.set_state(state)
    assert other.initial_seed() == 2024
    assert torch.equal(other.get_state(), state)


def test_torch_generator_on_a_missing_device_is_an_error():
    with pytest.raises(RuntimeError, match="neuron:9"):
        torch.Generator(device="neuron:9")


# ---- serialization ---------------------------------------------------------


@requires_devices(2)
def test_save_and_load_keep_the_neuron_device(tmp_path):
    path = tmp_path / "tensors.pt"
    cpu = torch.arange(12.0).reshape(3, 4)
    saved = {"t0": cpu.neuron(), "t1": cpu.to("neuron:1", torch.bfloat16),
             "ints": torch.arange(5, dtype=torch.int16).neuron()}
    torch.save(saved, path)
    loaded = torch.load(path)
    assert loaded["t0"].device == torch.device("neuron:0")
    assert loaded["t1"].device == torch.device("neuron:1")
    assert_same(loaded["t0"], cpu)
    assert_same(loaded["t1"], cpu.bfloat16())
    assert_same(loaded["ints"], torch.arange(5, dtype=torch.int16))


def test_load_with_map_location_cpu(tmp_path):
    path = tmp_path / "t.pt"
    torch.save(torch.arange(6.0).neuron(), path)
    loaded = torch.load(path, map_location="cpu")
    assert loaded.device == torch.device("cpu")
    assert torch.equal(loaded, torch.arange(6.0))


@requires_devices(3)
def test_load_with_map_location_to_another_neuron_device(tmp_path):
    path = tmp_path / "t.pt"
    torch.save({"a": torch.arange(6.0).neuron(), "b": torch.ones(2, device="neuron:2")}, path)
    loaded = torch.load(path, map_location="neuron:1")
    assert loaded["a"].device == loaded["b"].device == torch.device("neuron:1")
    assert_same(loaded["a"], torch.arange(6.0))
    remapped = torch.load(path, map_location={"neuron:0": "neuron:2"})
    assert remapped["a"].device == torch.device("neuron:2")


def test_cpu_checkpoint_loads_onto_neuron(tmp_path):
    path = tmp_path / "t.pt"
    torch.save(torch.arange(4.0), path)
    loaded = torch.load(path, map_location="neuron")
    assert loaded.device.type == "neuron"
    assert_same(loaded, torch.arange(4.0))


def test_views_saved_together_still_share_storage(tmp_path):
    path = tmp_path / "views.pt"
    base = torch.arange(10.0).neuron()
    torch.save([base, base[2:5]], path)
    loaded_base, loaded_view = torch.load(path)
    loaded_view.fill_(-1)
    expected = torch.arange(10.0)
    expected[2:5] = -1
    assert_same(loaded_base, expected)


def test_module_state_dict_round_trips_on_neuron(tmp_path):
    path = tmp_path / "model.pt"
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3)).neuron()
    torch.save(model.state_dict(), path)
    state = torch.load(path)  # weights_only=True, the default
    assert all(t.device.type == "neuron" for t in state.values())
    fresh = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3)).neuron()
    fresh.load_state_dict(state)
    for name, t in fresh.state_dict().items():
        assert t.device.type == "neuron"
        assert_same(t, model.state_dict()[name].cpu())
    on_cpu = torch.load(path, map_location="cpu")
    cpu_model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    cpu_model.load_state_dict(on_cpu)
    assert_same(cpu_model[0].weight.detach(), model[0].weight.detach().cpu())
