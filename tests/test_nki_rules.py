"""One negative test per checked rule: the NkiError names the rule, the
instruction and the kernel line that broke it."""

import os
import sys

import numpy as np
import pytest
import torch

import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl

LINES = []


def next_line():
    """Records the line after the caller's: the violating call."""
    LINES.append(sys._getframe(1).f_lineno + 1)


def expect(rule, kernel, *args):
    LINES.clear()
    with pytest.raises(nki.NkiError) as info:
        nki.simulate(kernel)(*args)
    err = info.value
    message = str(err)
    assert err.rule == rule, message
    assert f"[{rule}]" in message
    assert LINES, "the kernel did not mark its violating line"
    assert f"{os.path.basename(__file__)}:{LINES[-1]}" in message, message
    assert err.line == LINES[-1]
    return message


A = np.zeros((128, 512), np.float32)


def test_pmax():
    @nki.jit
    def k(a):
        next_line()
        t = nl.ndarray((256, 4), nl.float32)
        nisa.memset(t, 0)
    assert "pmax" in expect("pmax", k, A)


def test_out_of_bounds_on_chip():
    @nki.jit
    def k(a):
        t = nl.ndarray((128, 4), nl.float32)
        u = nl.ndarray((128, 8), nl.float32)
        next_line()
        nisa.tensor_copy(u, t.ap([[1, 128], [1, 8]]))
    expect("out_of_bounds", k, A)


def test_out_of_bounds_hbm():
    @nki.jit
    def k(a):
        t = nl.ndarray((128, 512), nl.float32)
        next_line()
        nisa.dma_copy(t, a.ap([[512, 128], [1, 512]], offset=8))
    expect("out_of_bounds", k, A)


def test_index_out_of_bounds():
    @nki.jit
    def k(a):
        next_line()
        return a[200]
    expect("out_of_bounds", k, A)


def test_max_free_dims():
    @nki.jit
    def k(a):
        t = nl.ndarray((2, 4, 4, 4, 4, 4), nl.float32)
        next_line()
        nisa.memset(t[:, ::2, ::2, ::2, ::2, ::2], 0)
    expect("max_free_dims", k, A)


def test_partition_start():
    @nki.jit
    def k(a):
        t = nl.ndarray((128, 4), nl.float32)
        next_line()
        nisa.memset(t[8:48], 0)
    msg = expect("partition_start", k, A)
    assert "0 or 64" in msg


def test_same_partitions():
    @nki.jit
    def k(a):
        t = nl.ndarray((128, 4), nl.float32)
        nisa.memset(t, 0)
        next_line()
        nisa.tensor_copy(t[0:32], t[32:64])
    expect("same_partitions", k, A)


def test_shape_mismatch():
    @nki.jit
    def k(a):
        t = nl.ndarray((128, 4), nl.float32)
        u = nl.ndarray((128, 8), nl.float32)
        nisa.memset(t, 0)
        next_line()
        nisa.tensor_tensor(u, t, t, nl.add)
    expect("shape_mismatch", k, A)


def test_operand_shape():
    @nki.jit
    def k(a):
        t = nl.ndarray((128, 4), nl.float32)
        nisa.memset(t, 0)
        next_line()
        nisa.activation(t, nl.exp, t, bias=t)
    expect("operand_shape", k, A)


def test_tensor_engine_reads_sbuf():
    @nki.jit
    def k(a):
        p = nl.zeros((128, 128), nl.float32, buffer=nl.psum)
        acc = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
        next_line()
        nisa.nc_matmul(acc, p, p)
    expect("tensor_engine_reads_sbuf", k, A)


def test_tensor_engine_writes_psum():
    @nki.jit
    def k(a):
        s = nl.zeros((128, 128), nl.bfloat16)
        out = nl.ndarray((128, 128), nl.float32)
        next_line()
        nisa.nc_matmul(out, s, s)
    expect("tensor_engine_writes_psum", k, A)


def test_gpsimd_no_psum():
    @nki.jit
    def k(a):
        p = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
        next_line()
        nisa.iota(p, [[1, 128]])
    expect("gpsimd_no_psum", k, A)


def test_dma_no_psum():
    @nki.jit
    def k(a):
        p = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        next_line()
        nisa.dma_copy(a, p)
    expect("dma_no_psum", k, A)


def test_on_chip_only():
    @nki.jit
    def k(a):
        t = nl.ndarray((128, 512), nl.float32)
        next_line()
        nisa.tensor_copy(t, a)
    expect("on_chip_only", k, A)


def test_tensor_tensor_psum_inputs():
    @nki.jit
    def k(a):
        p = nl.zeros((128, 128), nl.float32, buffer=nl.psum)
        q = nl.zeros((128, 128), nl.float32, buffer=nl.psum)
        t = nl.ndarray((128, 128), nl.float32)
        next_line()
        nisa.tensor_tensor(t, p, q, nl.add)
    expect("tensor_tensor_psum_inputs", k, A)


def test_matmul_contraction():
    @nki.jit
    def k(a):
        s = nl.zeros((128, 128), nl.bfloat16)
        m = nl.zeros((64, 128), nl.bfloat16)
        acc = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
        next_line()
        nisa.nc_matmul(acc, s, m)
    expect("matmul_contraction", k, A)


def test_gemm_stationary_fmax():
    @nki.jit
    def k(a):
        s = nl.zeros((128, 256), nl.bfloat16)
        acc = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
        next_line()
        nisa.nc_matmul(acc, s, s[:, 0:128])
    expect("gemm_stationary_fmax", k, A)


def test_gemm_moving_fmax():
    @nki.jit
    def k(a):
        s = nl.zeros((128, 128), nl.bfloat16)
        m = nl.zeros((128, 1024), nl.bfloat16)
        acc = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
        next_line()
        nisa.nc_matmul(acc, s, m)
    expect("gemm_moving_fmax", k, A)


def test_psum_dtype():
    @nki.jit
    def k(a):
        s = nl.zeros((128, 128), nl.bfloat16)
        acc = nl.ndarray((128, 128), nl.bfloat16, buffer=nl.psum)
        next_line()
        nisa.nc_matmul(acc, s, s)
    expect("psum_dtype", k, A)


def test_matmul_dtype():
    @nki.jit
    def k(a):
        s = nl.zeros((128, 128), nl.int32)
        acc = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
        next_line()
        nisa.nc_matmul(acc, s, s)
    expect("dtype", k, A)


def test_transpose_size():
    @nki.jit
    def k(a):
        s = nl.zeros((64, 64), nl.float32)
        d = nl.ndarray((64, 64), nl.float32)
        next_line()
        nisa.nc_transpose(d, s)
    expect("transpose_size", k, A)


def test_psum_fmax():
    @nki.jit
    def k(a):
        next_line()
        p = nl.ndarray((128, 1024), nl.float32, buffer=nl.psum)
        nisa.memset(p, 0)
    expect("psum_fmax", k, A)


def test_psum_bank_alignment():
    @nki.jit
    def k(a):
        next_line()
        p = nl.ndarray((128, 128), nl.float32, buffer=nl.psum, address=(0, 512))
        nisa.memset(p, 0)
    expect("psum_bank_alignment", k, A)


def test_sbuf_capacity():
    @nki.jit
    def k(a):
        tiles = []
        for i in range(8):
            t = nl.ndarray((128, 8192), nl.float32)  # 32 KiB per partition
            if i == 7:
                next_line()
            nisa.memset(t, 0)
            tiles.append(t)
        for t in tiles:
            nisa.tensor_copy(t, t)
    msg = expect("sbuf_capacity", k, A)
    assert "allocated at" in msg


def test_psum_capacity():
    @nki.jit
    def k(a):
        banks = []
        for i in range(9):
            p = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
            if i == 8:
                next_line()
            nisa.memset(p, 0)
            banks.append(p)
        for p in banks:
            nisa.tensor_copy(p, p)
    expect("psum_capacity", k, A)


def test_engine():
    @nki.jit
    def k(a):
        t = nl.zeros((128, 4), nl.float32)
        next_line()
        nisa.tensor_copy(t, t, engine=nisa.tensor_engine)
    expect("engine", k, A)


def test_psum_accumulate_ambiguous():
    @nki.jit
    def k(a):
        s = nl.zeros((128, 128), nl.bfloat16)
        acc = nl.ndarray((128, 256), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(acc[:, 0:128], s, s)
        next_line()
        nisa.nc_matmul(acc[:, 64:192], s, s)
    expect("psum_accumulate", k, A)


def test_reduce_axes():
    @nki.jit
    def k(a):
        t = nl.zeros((128, 4, 8), nl.float32)
        r = nl.ndarray((128, 8), nl.float32)
        next_line()
        nisa.tensor_reduce(r, nl.add, t, axis=1)
    expect("reduce_axes", k, A)


def test_on_chip_rank():
    @nki.jit
    def k(a):
        next_line()
        nl.ndarray((128,), nl.float32)
    expect("shape", k, A)


def test_errors_raise_on_neuron_tensors_too():
    @nki.jit
    def k(a):
        s = nl.zeros((128, 128), nl.bfloat16)
        m = nl.zeros((128, 1024), nl.bfloat16)
        acc = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
        next_line()
        nisa.nc_matmul(acc, s, m)
    LINES.clear()
    with pytest.raises(nki.NkiError, match=r"gemm_moving_fmax") as info:
        k(torch.zeros(4, 4, device="neuron"))
    assert info.value.line == LINES[-1]
    assert info.value.instruction == "nki.isa.nc_matmul"
