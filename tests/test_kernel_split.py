"""Element loops split over the kernel threads (runtime/src/ops/engine/
thread_pool.c, rt_parallel_for_light): a loop of 2 to 15 grains (32768
elements) whose helper threads sleep starts on one thread and may wake them
part way; from 16 grains, or right after another loop, it wakes them at once;
ranges are 1/32 of the loop (at least a grain). However a loop was split, results must be the
CPU's, bit for bit where defined exactly: sizes around those thresholds and
odd ones, with the helpers asleep (a pause first) or polling (right after
another op), contiguous, strided and broadcast, copies and conversions. glu
float32 checks its sigmoid in blocks of 128 values (pointwise_special.c):
rows that are not a multiple of it, and the strided path (the general
sigmoid) against the contiguous one (the tame twin), bit for bit. No op may
fall back to the CPU.
"""

import time

import pytest
import torch
import torch.nn.functional as F

from conftest import assert_same

DEV = "neuron"
GRAIN = 32768
SIZES = [2 * GRAIN - 1, 2 * GRAIN, 2 * GRAIN + 1, 8 * GRAIN + 3, 16 * GRAIN - 1, 16 * GRAIN,
         31 * GRAIN + 5, 32 * GRAIN + 7, 45 * GRAIN + 1]

pytestmark = pytest.mark.usefixtures("native_only")


def helpers_asleep(asleep):
    if asleep:
        torch.neuron.synchronize()
        time.sleep(0.002)  # past the helpers' 200 us poll


@pytest.mark.parametrize("asleep", [True, False], ids=["asleep", "polling"])
@pytest.mark.parametrize("n", SIZES)
def test_split_loops_match_cpu(n, asleep):
    torch.manual_seed(n)
    x, y = torch.randn(n), torch.randn(n)
    xd, yd = x.to(DEV), y.to(DEV)
    helpers_asleep(asleep)
    assert_same(F.hardshrink(xd, 0.5), F.hardshrink(x, 0.5))
    helpers_asleep(asleep)
    assert_same(xd * yd + 1, x * y + 1)
    helpers_asleep(asleep)
    assert_same(xd.clone(), x)  # a copy of bytes
    helpers_asleep(asleep)
    assert_same(xd.double(), x.double())  # a conversion
    helpers_asleep(asleep)
    assert_same(xd[::3].neg(), x[::3].neg())  # strided
    helpers_asleep(asleep)
    assert_same(xd.view(-1, 1)[: n // 7 * 7].view(7, -1).t() - yd[: n // 7].view(-1, 1),
                x.view(-1, 1)[: n // 7 * 7].view(7, -1).t() - y[: n // 7].view(-1, 1))  # transposed, broadcast


@pytest.mark.parametrize("half", [127, 128, 129, 300, 512, 1000])
def test_glu_float32_blocks(half):
    rows = 3 * GRAIN // half + 5
    torch.manual_seed(half)
    x = torch.randn(rows, 2 * half) * 4
    x[1, half + 3] = 90.0  # beyond the tame bound: that block takes the general sigmoid
    x[2, half + min(130, half - 1)] = float("nan")
    x[3, 2 * half - 1] = -float("inf")
    xd = x.to(DEV)
    helpers_asleep(True)
    got = F.glu(xd)
    torch.testing.assert_close(got.cpu(), F.glu(x), rtol=1e-6, atol=1e-6, equal_nan=True)
    # the strided walk takes the general sigmoid everywhere: the same bits
    strided = F.glu(xd.t().contiguous().t(), -1)
    assert_same(strided, got.cpu())
