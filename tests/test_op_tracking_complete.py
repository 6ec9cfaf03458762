"""Every native registration counts itself in torchneuron.get_executed_ops().

Tests elsewhere prove an op ran natively by finding its name there, and
docs/ops.md is generated from the same counts, so a kernel that forgets
NEURON_TRACK_OP is invisible to both. This probes each registered overload
once, in float32 and in complex64 on generic inputs (the generator's own
probe), and lists the kernels that ran with no fallback yet did not count
themselves. A native complex path counts as "aten::<overload>(complex)" or
under the op's base name, which the generator accepts too.
"""

import pytest
import torch

import torchneuron
from torchneuron.tools import gen_ops_table


def _takes_a_tensor(qualified: str) -> bool:
    # A factory with no tensor argument is probed without a device: it runs
    # on the CPU, never reaching our kernel, so its absence proves nothing.
    name, _, overload = qualified[len("aten::"):].partition(".")
    schema = getattr(getattr(torch.ops.aten, name), overload or "default")._schema
    return any("Tensor" in str(arg.type) for arg in schema.arguments)


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
def test_every_registration_that_runs_counts_itself(dtype):
    gen_ops_table.UNTRACKED.clear()
    probed = 0
    for qualified in sorted(gen_ops_table.registrations()):
        if not gen_ops_table.overload_exists(qualified):
            continue
        gen_ops_table.probe(qualified, dtype, random_values=True)
        probed += 1
    torch.neuron.synchronize()
    silent = sorted(q for q in gen_ops_table.UNTRACKED if _takes_a_tensor(q))
    assert probed > 900, probed
    assert silent == [], f"native kernels that ran without NEURON_TRACK_OP: {silent}"


@pytest.mark.filterwarnings("ignore:Warning only once")
def test_the_probe_notices_an_uncounted_kernel():
    # The check above can fail: a kernel registered here without counting
    # itself is reported by the same probe.
    lib = torch.library.Library("aten", "IMPL")
    try:
        lib.impl("hardtanh", lambda x, lo=-1.0, hi=1.0: x.clamp(lo, hi), "PrivateUse1",
                 allow_override=True)
        gen_ops_table.UNTRACKED.clear()
        gen_ops_table.probe("aten::hardtanh", torch.float32, random_values=False)
        assert "aten::hardtanh" in gen_ops_table.UNTRACKED
    finally:
        lib._destroy()
    # The native kernel is back and counts again.
    torchneuron.clear_op_tracking()
    torch.nn.functional.hardtanh(torch.ones(3, device="neuron"))
    assert torchneuron.get_executed_ops().get("aten::hardtanh", 0) == 1
