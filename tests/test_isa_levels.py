"""The kernels' ISA variants below the host's best, and TORCHNEURON_ISA.

The suite as a whole runs at one ISA level (the host's best unless
TORCHNEURON_ISA says otherwise). Here a sample of the pointwise, reduction,
norm and GEMM checks runs again in a fresh pytest at each other level this
CPU supports, against the same oracles; a level the CPU lacks is skipped,
never failed. What ran is recorded for the report line of conftest.py.
"""

import pathlib
import re
import subprocess
import sys

import pytest
import torch

from conftest import ISA_ALL_LEVELS, ISA_SAMPLED, _child_env, check_output, run_python_many

# A few hundred checks that go through the vectorised loops and the GEMM
# micro-kernels: float32 and the 16-bit floats (converted in the loops),
# integers, reductions, softmax and norms, every GEMM layout.
SAMPLE = [
    "tests/test_ops_pointwise.py",
    "tests/test_ops_reduce.py",
    "tests/test_ops_nn.py",
    "tests/test_ops_gemm.py",
    "-k",
    "(test_unary_matches_cpu or test_binary_matches_cpu) and (float32 or bfloat16 or int32)"
    " or test_reduction_matches_cpu_for_dims_keepdim_and_layouts or test_var_and_std"
    " or test_softmax_matches_cpu_for_every_dim or test_layer_norm_matches_cpu"
    " or test_group_norm_matches_cpu or test_batch_norm_matches_cpu"
    " or test_mm_matches_cpu_for_every_layout or test_vector_products",
]

_HOST = torch.neuron.isa_levels()


@pytest.mark.timeout(900)
@pytest.mark.parametrize("level", ISA_ALL_LEVELS)
def test_sample_passes_at_the_other_levels(level):
    if level not in _HOST["supported"]:
        pytest.skip(f"this CPU cannot run {level} (it supports {','.join(_HOST['supported'])})")
    if level == _HOST["active"]:
        pytest.skip(f"{level} is the level the whole suite runs at")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SAMPLE],
        env=_child_env({"TORCHNEURON_ISA": level}),
        cwd=pathlib.Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, f"the sample failed at {level}:\n{result.stdout[-6000:]}"
    # The child says it ran at the level asked for (conftest's summary line).
    assert f"neuron ISA paths exercised: {level} (every test, forced by TORCHNEURON_ISA)" in result.stdout
    passed = int(re.search(r"(\d+) passed", result.stdout).group(1))
    assert passed >= 100, f"only {passed} checks ran at {level}"
    ISA_SAMPLED[level] = passed


def test_isa_levels_reports_the_host():
    levels = torch.neuron.isa_levels()
    assert levels["supported"][-1] == "baseline"
    assert list(levels["supported"]) == [l for l in ISA_ALL_LEVELS if l in levels["supported"]]
    assert levels["active"] in levels["supported"]


_FIRST_USE = """
import torch, torchneuron  # importing must not fail
try:
    torch.ones(1, device="neuron")
    print("active:", torch.neuron.isa_levels()["active"])
except RuntimeError as error:
    print("raised:", error)
"""


def test_torchneuron_isa_values():
    """Each supported level is what the kernels run at; a level above the
    host's, or any other spelling, fails at first use naming the variable."""
    bad = ["AVX2", "native"]  # test_isa.c tries more spellings
    above = [level for level in ISA_ALL_LEVELS if level not in _HOST["supported"]]
    values = list(_HOST["supported"]) + bad + above
    results = run_python_many({v: (_FIRST_USE, {"TORCHNEURON_ISA": v}) for v in values})
    for value in values:
        out = check_output(results[value])
        if value in _HOST["supported"]:
            assert out.split() == ["active:", value]
        else:
            assert out.startswith("raised:") and f"TORCHNEURON_ISA='{value}'" in out, out
    for value in above:
        assert "at most" in results[value].stdout
