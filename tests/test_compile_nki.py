"""NKI kernels inside torch.compile(backend="neuron") graphs.

An op registered with torchneuron.nki_op (or made by wrap_nki) is lowered
to a graph node that carries the traced NKI program; the compiled program
launches it (no eager node, no graph break). Also: the graph IR loader
survives corrupt NKI records, and kernels specialise dynamic shapes.
"""

import random
import struct
import zlib

import pytest
import torch
from torch._dynamo.backends.common import aot_autograd

import torchneuron
from torchneuron.compiler.plan import build_plan
from test_nki_torch import scaled_square, square_op


@pytest.fixture(autouse=True)
def fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHNEURON_CACHE_DIR", str(tmp_path / "cache"))
    torch._dynamo.reset()
    torchneuron.metrics.clear_all()
    yield
    torch._dynamo.reset()


def rows():
    return torchneuron.metrics.get_compilation_metrics()


def test_nki_op_runs_inside_the_compiled_program_forward_and_backward():
    def f(x, w):
        y = square_op(x * 2.0 + 1.0, 0.5)
        return (y * w).sum(), y

    x = torch.randn(40, 70, device="neuron", requires_grad=True)
    w = torch.randn(40, 70, device="neuron")
    got_loss, got_y = torch.compile(f, backend="neuron", fullgraph=True)(x, w)
    got_loss.backward()
    got_grad = x.grad
    x.grad = None
    want_loss, want_y = f(x, w)
    want_loss.backward()
    assert torch.equal(got_y, want_y)
    torch.testing.assert_close(got_loss, want_loss)
    assert torch.equal(got_grad, x.grad)
    r = rows()
    assert [row["kind"] for row in r] == ["forward", "backward"]
    assert all(row["eager_nodes"] == 0 and row["segments"] == 1 for row in r)


def test_wrap_nki_is_a_graph_node_with_no_break():
    wrapped = torchneuron.wrap_nki(scaled_square)
    f = torch.compile(lambda x: wrapped(x + 1, 2.0) - 1, backend="neuron", fullgraph=True)
    x = torch.randn(8, 8, device="neuron")
    assert torch.equal(f(x), wrapped(x + 1, 2.0) - 1)
    (row,) = rows()
    assert row["eager_nodes"] == 0 and row["segments"] == 1


def test_a_strided_argument_is_made_contiguous_first():
    f = torch.compile(lambda x: square_op(x.t(), 3.0), backend="neuron", fullgraph=True)
    x = torch.randn(24, 16, device="neuron")
    assert torch.equal(f(x), square_op(x.t().contiguous(), 3.0))
    assert rows()[0]["eager_nodes"] == 0


def test_a_kernel_specialises_dynamic_shapes_and_stays_in_the_program():
    # An NKI kernel is traced per shape (as an eager call retraces): under
    # dynamic=True its sizes are specialised, each size compiles once.
    f = torch.compile(lambda x: square_op(x * 2.0, 0.5) + 1, backend="neuron", dynamic=True)
    for n in (5, 9, 5):
        x = torch.randn(n, 12, device="neuron")
        assert torch.equal(f(x), square_op(x * 2.0, 0.5) + 1)
    assert len(rows()) == 2
    assert all(row["eager_nodes"] == 0 for row in rows())


def _nki_ir():
    irs = []

    def keep(gm, _):
        plan, _ = build_plan(gm, "nki")
        irs.extend(s["ir"] for s in plan["steps"] if s["kind"] == "segment" and s["ir"])
        return gm.forward

    f = torch.compile(lambda x: square_op(x * 2.0, 0.5) + 1, backend=aot_autograd(fw_compiler=keep))
    f(torch.randn(40, 70, device="neuron"))
    assert len(irs) == 1
    return irs[0]


def test_loader_and_checker_survive_corrupt_nki_records():
    ir = _nki_ir()
    handle, err = torchneuron._C._graph_program_compile(ir, True)
    assert handle and err is None
    torchneuron._C._graph_program_destroy(handle)
    rng = random.Random(0)
    loaded = 0
    for _ in range(600):
        body = bytearray(ir[:-4])
        for _ in range(rng.randint(1, 8)):
            body[rng.randrange(len(body))] = rng.randrange(256)
        body += struct.pack("<I", zlib.crc32(body) & 0xFFFFFFFF)  # past the checksum
        handle, err = torchneuron._C._graph_program_compile(bytes(body), True)
        if handle:
            loaded += 1
            torchneuron._C._graph_program_destroy(handle)
        else:
            assert isinstance(err, str) and err
    for cut in range(0, len(ir), 7):
        handle, err = torchneuron._C._graph_program_compile(ir[:cut], True)
        assert not handle and err
    assert loaded < 600
