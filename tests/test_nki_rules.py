"""One negative case per checked rule: the NkiError names the rule, the
instruction and the kernel line that broke it.

Each row of RULES is (rule, instruction, violation): ``violation(a)`` is the
body of a kernel whose argument ``a`` is a [128, 512] float32 HBM tensor.
The line that must be reported carries the comment ``# <- here`` (for a
one-line lambda, its row).
"""

import linecache
import os

import numpy as np
import pytest
import torch

import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl
import torchneuron.nki.typing as nt
from torchneuron.nki.legacy import language as legacy_nl

MARK = "# <- here"
bf16, f32, u32, u8 = nl.bfloat16, nl.float32, nl.uint32, nl.uint8
fp8x4 = nl.float8_e4m3fn_x4
fp8 = nl.float8_e4m3


def sb(*shape, dtype=f32):
    """A zero-filled SBUF tile."""
    return nl.zeros(shape, dtype)


def bf(*shape):
    """A zero-filled bfloat16 SBUF tile (a Tensor-engine operand)."""
    return nl.zeros(shape, bf16)


def ps(*shape):
    """A zero-filled fp32 PSUM tile."""
    return nl.zeros(shape, f32, buffer=nl.psum)


def new(*shape, dtype=f32):
    """An uninitialised SBUF tile."""
    return nl.ndarray(shape, dtype)


def pnew(*shape, dtype=f32):
    """An uninitialised PSUM tile."""
    return nl.ndarray(shape, dtype, buffer=nl.psum)


def sbuf_capacity(a):
    tiles = [nl.ndarray((128, 8192), f32) for _ in range(8)]  # 32 KiB per partition each
    for t in tiles[:7]:
        nisa.memset(t, 0)
    nisa.memset(tiles[7], 0)  # <- here
    for t in tiles:
        nisa.tensor_copy(t, t)


def psum_capacity(a):
    banks = [pnew(128, 512) for _ in range(9)]
    for p in banks[:8]:
        nisa.memset(p, 0)
    nisa.memset(banks[8], 0)  # <- here
    for p in banks:
        nisa.tensor_copy(p, p)


def register_as_loop_bound(a):
    r = nisa.register_alloc()
    nisa.register_load(r, a[0:1, 0:1])
    for _ in range(r):  # <- here
        pass


def psum_accumulate(a):
    s, acc = bf(128, 128), pnew(128, 256)
    nisa.nc_matmul(acc[:, 0:128], s, s)
    nisa.nc_matmul(acc[:, 64:192], s, s)  # <- here


def fp8_output(a):
    out = nl.ndarray((4, 4), nl.float8_e4m3, buffer=nl.shared_hbm)  # <- here
    nl.store(out, sb(4, 4))
    return out


def returns_a_tile(a):  # <- here
    return sb(4, 4)


def misannotated(a: nt.tensor[64, 512]):  # <- here
    nisa.memset(sb(4, 4), 0)


def triangle():
    """i_p < i_f: a legacy mask that bounds two axes at once (not a box;
    element-wise instructions, reductions and transposes take it, a matmul's
    mask= does not)."""
    i = legacy_nl.arange(4)
    return i[:, None] < i[None, :]


ISA = "nki.isa."
NDARRAY = "nki.language.ndarray"
NL = "nki.language."

RULES = [
    # Tile limits
    ("pmax", NDARRAY,
     lambda a: nl.ndarray((256, 4), f32)),  # <- here
    ("pmax", ISA + "memset",
     lambda a: nisa.memset(sb(128, 4).ap([[4, 256], [1, 2]]), 0)),  # <- here
    ("psum_fmax", NDARRAY,
     lambda a: nl.ndarray((128, 1024), f32, nl.psum)),  # <- here
    ("gemm_stationary_fmax", ISA + "nc_matmul",
     lambda a: nisa.nc_matmul(pnew(128, 128), bf(128, 256), bf(128, 128))),  # <- here
    ("gemm_moving_fmax", ISA + "nc_matmul",
     lambda a: nisa.nc_matmul(pnew(128, 512), bf(128, 128), bf(128, 1024))),  # <- here
    ("matmul_contraction", ISA + "nc_matmul",
     lambda a: nisa.nc_matmul(pnew(128, 128), bf(128, 128), bf(64, 128))),  # <- here
    ("matmul_contraction", ISA + "nc_matmul",  # an nl convenience reports its caller's line
     lambda a: nl.matmul(sb(64, 128), sb(128, 128), transpose_x=True)),  # <- here
    ("partition_start", ISA + "memset",  # more than 64 partitions start at 0
     lambda a: nisa.memset(new(128, 4)[32:128], 0)),  # <- here
    ("partition_start", ISA + "memset",  # 33-64 partitions start at 0 or 64
     lambda a: nisa.memset(new(128, 4)[8:48], 0)),  # <- here
    ("partition_start", ISA + "memset",  # up to 32 partitions start at 0, 32, 64 or 96
     lambda a: nisa.memset(new(128, 4)[16:32], 0)),  # <- here
    ("same_partitions", ISA + "tensor_copy",
     lambda a: nisa.tensor_copy((t := sb(128, 4))[0:32], t[32:64])),  # <- here
    # Buffers and engines
    ("tensor_engine_reads_sbuf", ISA + "nc_matmul",
     lambda a: nisa.nc_matmul(pnew(128, 128), (p := ps(128, 128)), p)),  # <- here
    ("tensor_engine_writes_psum", ISA + "nc_matmul",
     lambda a: nisa.nc_matmul(new(128, 128), (s := bf(128, 128)), s)),  # <- here
    ("gpsimd_no_psum", ISA + "iota",
     lambda a: nisa.iota(pnew(128, 128), [[1, 128]])),  # <- here
    ("dma_no_psum", ISA + "dma_copy",
     lambda a: nisa.dma_copy(a, ps(128, 512))),  # <- here
    ("on_chip_only", ISA + "tensor_copy",
     lambda a: nisa.tensor_copy(new(128, 512), a)),  # <- here
    ("tensor_tensor_psum_inputs", ISA + "tensor_tensor",
     lambda a: nisa.tensor_tensor(new(128, 128), ps(128, 128), ps(128, 128), nl.add)),  # <- here
    ("engine", ISA + "tensor_copy",
     lambda a: nisa.tensor_copy((t := sb(128, 4)), t, engine=nisa.tensor_engine)),  # <- here
    # Capacity and placement
    ("sbuf_capacity", ISA + "memset", sbuf_capacity),
    ("psum_capacity", ISA + "memset", psum_capacity),
    ("psum_bank_alignment", NDARRAY,
     lambda a: nisa.memset(nl.ndarray((128, 128), f32, nl.psum, address=(0, 512)), 0)),  # <- here
    ("out_of_bounds", NDARRAY,  # a manual placement outside SBUF
     lambda a: nisa.memset(nl.ndarray((64, 4), f32, address=(100, 0)), 0)),  # <- here
    # Bounds, shapes and operands
    ("out_of_bounds", ISA + "tensor_copy",  # past the end of each partition
     lambda a: nisa.tensor_copy(new(128, 8), sb(128, 4).ap([[4, 128], [1, 8]]))),  # <- here
    ("out_of_bounds", ISA + "memset",  # past the tile's last partition
     lambda a: nisa.memset(sb(64, 4).ap([[4, 32], [1, 4]], offset=48 * 4), 0)),  # <- here
    ("out_of_bounds", ISA + "dma_copy",  # past the end of an HBM tensor
     lambda a: nisa.dma_copy(new(128, 512), a.ap([[512, 128], [1, 512]], offset=8))),  # <- here
    ("out_of_bounds", None,  # an index
     lambda a: a[200]),  # <- here
    ("ap_partition_step", "NkiTensor.ap",  # a partition step, not its 4 elements
     lambda a: sb(128, 4).ap([[1, 128], [1, 4]])),  # <- here
    ("ap_partition_step", "NkiTensor.ap",  # every other partition
     lambda a: sb(128, 4).ap([[8, 64], [1, 4]])),  # <- here
    ("max_free_dims", ISA + "memset",
     lambda a: nisa.memset(new(2, 4, 4, 4, 4, 4)[:, ::2, ::2, ::2, ::2, ::2], 0)),  # <- here
    ("max_free_dims", ISA + "iota",
     lambda a: nisa.iota(new(2, 32, dtype=nl.int32), [[1, 2]] * 5)),  # <- here
    ("shape_mismatch", ISA + "tensor_tensor",
     lambda a: nisa.tensor_tensor(new(128, 8), (t := sb(128, 4)), t, nl.add)),  # <- here
    ("shape_mismatch", ISA + "dma_copy",
     lambda a: nisa.dma_copy(new(128, 256), a)),  # <- here
    ("shape_mismatch", ISA + "nc_matmul",
     lambda a: nisa.nc_matmul(pnew(64, 128), (s := bf(128, 128)), s)),  # <- here
    ("shape_mismatch", ISA + "nc_transpose",
     lambda a: nisa.nc_transpose(pnew(64, 64), sb(32, 64))),  # <- here
    ("shape_mismatch", ISA + "iota",
     lambda a: nisa.iota(new(4, 8, dtype=nl.int32), [[1, 6]])),  # <- here
    ("shape_mismatch", ISA + "tensor_reduce",
     lambda a: nisa.tensor_reduce(new(128, 2), nl.add, sb(128, 4, 8), axis=2)),  # <- here
    ("operand_shape", ISA + "activation",
     lambda a: nisa.activation((t := sb(128, 4)), nl.exp, t, bias=t)),  # <- here
    ("operand_shape", ISA + "tensor_scalar",
     lambda a: nisa.tensor_scalar((t := sb(128, 4)), t, nl.add, t[0:64, 0:1])),  # <- here
    ("operand", ISA + "tensor_copy",
     lambda a: nisa.tensor_copy(np.zeros((4, 4)), sb(4, 4))),  # <- here
    ("operand", ISA + "tensor_tensor",
     lambda a: nisa.tensor_tensor((t := sb(4, 4)), t, t, nl.exp)),  # <- here
    ("operand", ISA + "activation",
     lambda a: nisa.activation((t := sb(4, 4)), nl.add, t)),  # <- here
    ("reduce_axes", ISA + "tensor_reduce",
     lambda a: nisa.tensor_reduce(new(128, 8), nl.add, sb(128, 4, 8), axis=1)),  # <- here
    ("psum_accumulate", ISA + "nc_matmul", psum_accumulate),
    # Dtypes
    ("psum_dtype", ISA + "nc_matmul",
     lambda a: nisa.nc_matmul(pnew(128, 128, dtype=bf16), (s := bf(128, 128)), s)),  # <- here
    ("psum_dtype", ISA + "nc_transpose",
     lambda a: nisa.nc_transpose(pnew(64, 64, dtype=nl.int32), bf(64, 64))),  # <- here
    ("dtype", ISA + "nc_matmul",
     lambda a: nisa.nc_matmul(pnew(128, 128), (s := sb(128, 128, dtype=nl.int32)), s)),  # <- here
    ("dtype", NDARRAY,
     lambda a: nl.ndarray((4, 4), "complex64")),  # <- here
    ("dtype", None, fp8_output),
    ("transpose_size", ISA + "nc_transpose",  # Vector engine: 32x32
     lambda a: nisa.nc_transpose(new(64, 64), sb(64, 64))),  # <- here
    ("transpose_size", ISA + "nc_transpose",  # Tensor engine: 128x128
     lambda a: nisa.nc_transpose(pnew(128, 128), sb(128, 256))),  # <- here
    # Tensors and views
    ("shape", NDARRAY,  # on-chip tensors are at least 2-D
     lambda a: nl.ndarray((128,), f32)),  # <- here
    ("shape", NDARRAY,  # and not empty
     lambda a: nl.ndarray((0, 4), f32)),  # <- here
    ("buffer", None,
     lambda a: nl.ndarray((4, 4), f32, buffer="sbuf")),  # <- here
    ("index", None,
     lambda a: a[::-1]),  # <- here
    ("index", None,
     lambda a: a[0, 0, 0]),  # <- here
    ("reshape", None,
     lambda a: sb(128, 4).reshape(64, 8)),  # <- here
    ("reshape", None,
     lambda a: sb(128, 4, 8)[:, :, 0:4].reshape(128, 16)),  # <- here
    ("permute", None,
     lambda a: sb(128, 4).permute(1, 0)),  # <- here
    ("broadcast", None,
     lambda a: sb(128, 4).broadcast_to((128, 8))),  # <- here
    ("view", None,
     lambda a: sb(128, 3, dtype=nl.int8).view(nl.int32)),  # <- here
    ("return", None, returns_a_tile),
    ("annotation", "nki.typing.tensor", misannotated),
    # nki.language indexing and shapes
    ("dynamic_start", NL + "ds",  # two runtime starts in one access
     lambda a: a[nl.ds(sb(1, 1, dtype=nl.int32), 4), nl.ds(sb(1, 1, dtype=nl.int32), 4)]),  # <- here
    ("out_of_bounds", NL + "ds",  # a window is never clipped
     lambda a: a[nl.ds(120, 16)]),  # <- here
    ("index", NL + "ds",
     lambda a: a[:, nl.ds(0, 0)]),  # <- here
    ("broadcast", NL + "broadcast_to",
     lambda a: nl.broadcast_to(sb(128, 4), (128, 8))),  # <- here
    ("on_chip_only", NL + "broadcast_to",
     lambda a: nl.broadcast_to(a, (128, 512))),  # <- here
    ("pmax", NDARRAY,
     lambda a: nl.broadcast_to(sb(1, 4), (256, 4))),  # <- here
    ("expand_dims", NL + "expand_dims",  # not before the partition dim
     lambda a: nl.expand_dims(sb(128, 4), 0)),  # <- here
    ("expand_dims", NL + "expand_dims",
     lambda a: nl.expand_dims(a, (1, 1))),  # <- here
    # nki.language element-wise, reductions and normalisations
    ("dtype", NL + "invert",  # integers only
     lambda a: nl.invert(sb(4, 4))),  # <- here
    ("reduce_axes", ISA + "tensor_reduce",  # not over the partition dim
     lambda a: nl.softmax(sb(128, 4), axis=0)),  # <- here
    ("reduce_axes", ISA + "tensor_reduce",
     lambda a: nl.var(sb(128, 4, 8), axis=1)),  # <- here
    ("broadcast", NL + "rms_norm",  # the weight broadcasts to the input
     lambda a: nl.rms_norm(sb(128, 8), sb(128, 4), axis=1, n=8)),  # <- here
    ("operand", NL + "rms_norm",
     lambda a: nl.rms_norm((t := sb(128, 8)), t, axis=1, n=0)),  # <- here
    ("buffer", None,
     lambda a: nl.is_on_chip("sbuf")),  # <- here
    ("operand", NL + "load_transpose2d",  # from HBM only
     lambda a: nl.load_transpose2d(sb(4, 4))),  # <- here
    ("shape", NL + "load_transpose2d",
     lambda a: nl.load_transpose2d(a.reshape(128, 8, 64))),  # <- here
    ("pmax", NDARRAY,  # the transpose's partition dim
     lambda a: nl.load_transpose2d(a)),  # <- here
    ("pmax", NDARRAY,
     lambda a: nl.shared_identity_matrix(256)),  # <- here
    # Vector-engine statistics and top-8
    ("bn_stats_fmax", ISA + "bn_stats",
     lambda a: nisa.bn_stats(sb(128, 6), sb(128, 513))),  # <- here
    ("max8_size", ISA + "max8",
     lambda a: nisa.max8(sb(128, 8), sb(128, 7))),  # <- here
    # selects, cumulative ops, activate2, dma_transpose
    ("activate2_ops", ISA + "activate2",
     lambda a: nisa.activate2(sb(128, 8), nl.exp, sb(128, 8), 1.0, 1.0, nl.add, nl.add)),  # <- here
    ("cumulative_ops", ISA + "tensor_scalar_cumulative",
     lambda a: nisa.tensor_scalar_cumulative(sb(128, 8), sb(128, 8), nl.add, nl.divide, 1.0)),  # <- here
    ("range_select_ops", ISA + "range_select",
     lambda a: nisa.range_select(sb(128, 8), sb(128, 8), nl.add, nl.less, sb(128, 1),  # <- here
                                 sb(128, 1))),
    ("dma_transpose_dtype", ISA + "dma_transpose",
     lambda a: nisa.dma_transpose(nl.ndarray((512, 128), f32, buffer=nl.shared_hbm), a)),  # <- here
    ("dma_transpose_axes", ISA + "dma_transpose",
     lambda a: nisa.dma_transpose(bf(4, 4, 4096), a.reshape(4, 4, 4096), axes=(1, 0, 2))),  # <- here
    ("dma_transpose_hwdge", ISA + "dma_transpose",
     lambda a: nisa.dma_transpose(bf(512, 128), a, dge_mode=nisa.dge_mode.hwdge)),  # <- here
    ("dma_transpose_indirect", ISA + "dma_transpose",  # the index tile is not uint32
     lambda a: nisa.dma_transpose(bf(512, 16), a[sb(16, 1)])),  # <- here
    # indirect dma_copy (a gather / scatter of HBM rows by an SBUF index tile)
    ("indirect_indices", ISA + "dma_copy",  # float indices
     lambda a: nl.load(a[sb(128, 1)])),  # <- here
    ("indirect_dma", ISA + "dma_copy",  # HBM to HBM
     lambda a: nisa.dma_copy(nl.ndarray((128, 512), f32, buffer=nl.shared_hbm),  # <- here
                             a[sb(128, 1, dtype=nl.int32)])),
    ("indirect_dge", ISA + "dma_copy",
     lambda a: nisa.dma_copy(sb(128, 512), a[sb(128, 1, dtype=nl.int32)],  # <- here
                             dge_mode=nisa.dge_mode.hwdge)),
    ("indirect_rmw_oob", ISA + "dma_copy",
     lambda a: nisa.dma_copy(a[sb(128, 1, dtype=nl.int32)], sb(128, 512),  # <- here
                             dst_rmw_op=nl.add, oob_mode=nisa.oob_mode.skip)),
    ("oob_mode", ISA + "dma_copy",  # at run time: row 1000 of 128
     lambda a: nl.load(a[nl.full((128, 1), 1000, nl.int32)])),  # <- here
    ("unique_indices", ISA + "dma_copy",  # at run time: every index is 0
     lambda a: nisa.dma_copy(a[sb(128, 1, dtype=nl.int32)], sb(128, 512),  # <- here
                             dst_rmw_op=nl.add)),
    # random numbers
    ("rand2_range", ISA + "rand2",
     lambda a: nisa.rand2(sb(128, 8), 1.0, 1.0)),  # <- here
    ("nc_version", ISA + "rand2",  # NeuronCore-v4 only; the default device is trn2
     lambda a: nisa.rand2(sb(128, 8), 0.0, 1.0)),  # <- here
    ("nc_version", ISA + "activate2",  # NeuronCore-v4 only
     lambda a: nisa.activate2(sb(128, 8), nl.exp, sb(128, 8), 1.0, 0.0, nl.multiply, nl.add)),  # <- here
    ("rng_state_size", ISA + "rand_set_state",
     lambda a: nisa.rand_set_state(sb(128, 6, dtype=nl.uint32))),  # <- here
    # top-k, gathers, segment bounds, shuffles, exponential
    ("topk_partitions", ISA + "topk",
     lambda a: nisa.topk(bf(8, 8), sb(8, 8, dtype=u32), bf(8, 4), 16)),  # <- here
    ("topk_n", ISA + "topk",
     lambda a: nisa.topk(bf(16, 4), sb(16, 4, dtype=u32), bf(16, 4), 4)),  # <- here
    ("topk_k", ISA + "topk",
     lambda a: nisa.topk(bf(16, 32), sb(16, 32, dtype=u32), bf(16, 2), 16)),  # <- here
    ("nc_version", ISA + "exponential",  # NeuronCore-v4 only; the default device is trn2
     lambda a: nisa.exponential(sb(128, 8), sb(128, 8))),  # <- here
    ("reduce_init", ISA + "exponential",
     lambda a: nisa.exponential(sb(128, 8), sb(128, 8), reduce_init=1.0)),  # <- here
    ("reduce_cmd", ISA + "exponential",
     lambda a: nisa.exponential(sb(128, 8), sb(128, 8), reduce_cmd=nisa.reduce_cmd.reset)),  # <- here
    ("local_gather_partitions", ISA + "local_gather",
     lambda a: nisa.local_gather(sb(8, 32), sb(8, 64), sb(8, 4, dtype=nl.uint16))),  # <- here
    ("num_elem_per_idx", ISA + "local_gather",
     lambda a: nisa.local_gather(sb(16, 192), sb(16, 64), sb(16, 4, dtype=nl.uint16),  # <- here
                                 num_elem_per_idx=3)),
    ("num_valid_indices", ISA + "local_gather",
     lambda a: nisa.local_gather(sb(16, 65), sb(16, 64), sb(16, 4, dtype=nl.uint16),  # <- here
                                 num_valid_indices=65)),
    ("sequence_bounds_partitions", ISA + "sequence_bounds",
     lambda a: nisa.sequence_bounds(sb(2, 2, 8), sb(2, 8))),  # <- here
    ("shuffle_mask", ISA + "nc_stream_shuffle",
     lambda a: nisa.nc_stream_shuffle(sb(32, 8), sb(32, 8), [0] * 31)),  # <- here
    ("matmul_perf_mode", ISA + "nc_matmul",
     lambda a: nisa.nc_matmul(pnew(128, 128), (s := bf(128, 128)), s,  # <- here
                              perf_mode="quad_row")),
    ("double_row_dtype", ISA + "nc_matmul",
     lambda a: nisa.nc_matmul(pnew(128, 128), (s := bf(128, 2, 128)), s,  # <- here
                              perf_mode=nisa.matmul_perf_mode.double_row)),
    ("double_row_layout", ISA + "nc_matmul",
     lambda a: nisa.nc_matmul(pnew(64, 128), (s := sb(128, 4, 32, dtype=fp8)), s,  # <- here
                              perf_mode=nisa.matmul_perf_mode.double_row)),
    ("double_row_mode", ISA + "nc_matmul",
     lambda a: nisa.nc_matmul(pnew(128, 128), (s := sb(128, 2, 128, dtype=fp8)), s,  # <- here
                              perf_mode=nisa.matmul_perf_mode.double_row, is_transpose=True)),
    # MX block-scaled formats (NeuronCore-v4; rules other than nc_version show on every device)
    ("packed_dtype", ISA + "tensor_copy",
     lambda a: nisa.tensor_copy(new(32, 4), new(32, 4, dtype=fp8x4))),  # <- here
    ("mx_sbuf", ISA + "quantize_mx",
     lambda a: nisa.quantize_mx(new(32, 4, dtype=fp8x4), pnew(32, 16, dtype=bf16), new(4, 4, dtype=u8))),  # <- here
    ("dtype", ISA + "quantize_mx",
     lambda a: nisa.quantize_mx(new(32, 4, dtype=fp8x4), new(32, 16), new(4, 4, dtype=u8))),  # <- here
    ("mx_partitions", ISA + "quantize_mx",
     lambda a: nisa.quantize_mx(new(16, 4, dtype=fp8x4), new(16, 16, dtype=bf16), new(4, 4, dtype=u8))),  # <- here
    ("mx_free_size", ISA + "quantize_mx",
     lambda a: nisa.quantize_mx(new(32, 4, dtype=fp8x4), new(32, 18, dtype=bf16), new(4, 4, dtype=u8))),  # <- here
    ("mx_scale_shape", ISA + "quantize_mx",
     lambda a: nisa.quantize_mx(new(32, 4, dtype=fp8x4), new(32, 16, dtype=bf16), new(2, 4, dtype=u8))),  # <- here
    ("nc_version", ISA + "quantize_mx",
     lambda a: nisa.quantize_mx(new(32, 4, dtype=fp8x4), new(32, 16, dtype=bf16), new(4, 4, dtype=u8))),  # <- here
    ("mx_tile_position", ISA + "nc_matmul_mx",
     lambda a: nisa.nc_matmul_mx(pnew(32, 64), new(32, 32, dtype=fp8x4), new(32, 64, dtype=fp8x4),  # <- here
                                 new(4, 32, dtype=u8), new(4, 64, dtype=u8),
                                 tile_position=(16, 0), tile_size=(32, 128))),
    ("nc_version", ISA + "nc_matmul_mx",
     lambda a: nisa.nc_matmul_mx(pnew(32, 64), new(32, 32, dtype=fp8x4), new(32, 64, dtype=fp8x4),  # <- here
                                 new(4, 32, dtype=u8), new(4, 64, dtype=u8))),
    # device scalars
    ("scalar_operand", ISA + "scalar_load",
     lambda a: nisa.scalar_load(new(1, 1))),  # <- here
    ("scalar_comparison", ISA + "scalar_store",
     lambda a: nisa.scalar_store(w := new(1, 1, dtype=nl.int32), nisa.scalar_load(w) < 3)),  # <- here
    ("dynamic_scalar", ISA + "NkiScalar",
     lambda a: range(nisa.scalar_load(new(1, 1, dtype=nl.int32)))),  # <- here
    # DMA compute and the virtual registers
    ("dma_compute_sources", ISA + "dma_compute",
     lambda a: nisa.dma_compute(a, [a] * 17, [1.0] * 17, nl.add)),  # <- here
    ("dma_compute_scales", ISA + "dma_compute",
     lambda a: nisa.dma_compute(a, [a, a], [1.0, 0.5], nl.add)),  # <- here
    ("register_unset", ISA + "register_store",
     lambda a: nisa.register_store(a[0:1, 0:1], nisa.register_alloc())),  # <- here
    ("register_operand", ISA + "register_load",
     lambda a: nisa.register_load(nisa.register_alloc(), a)),  # <- here
    ("dynamic_register", ISA + "VirtualRegister", register_as_loop_bound),
    ("int64_operand", ISA + "tensor_copy",  # no compute engine has 64-bit lanes
     lambda a: nisa.tensor_copy(nl.ndarray((1, 1), nl.int64, buffer=nl.sbuf),  # <- here
                                sb(1, 1, dtype=nl.int32))),
    # compiled loops
    ("loop", NL + "fori_loop",
     lambda a: nl.fori_loop(0, 4, lambda i: None, step=0)),  # <- here
    ("loop_operand", NL + "fori_loop",
     lambda a: nl.fori_loop(0, 2.5, lambda i: None)),  # <- here
    ("loop_limit", NL + "while_loop",  # at run time: the condition never clears
     lambda a: nl.while_loop(nisa.register_alloc(1), lambda r: r)),  # <- here
    # Trainium3 tensor indirection is refused (the reference in reach gives its terms only)
    ("tensor_indirection", "NkiTensor.indirect",
     lambda a: sb(32, 64).indirect(sb(32, 4))),  # <- here
    # a legacy matmul masks its operands, not its result by a triangle
    ("mask", NL + "matmul",
     lambda a: legacy_nl.matmul(a[0:4, 0:4], a[0:4, 0:4], mask=triangle())),  # <- here
]


def marked_line(fn):
    """The line marked '# <- here' at or after fn's first line."""
    filename, line = fn.__code__.co_filename, fn.__code__.co_firstlineno
    while MARK not in linecache.getline(filename, line):
        line += 1
    return line


def row_id(row):
    rule, _, fn = row
    return f"{rule}-{marked_line(fn)}"


def kernel_of(violation):
    """The kernel of a row: a one-line row is a statement (its value is
    dropped); a function row is the kernel itself."""
    if violation.__name__ != "<lambda>":
        return nki.jit(violation)

    def body(a):
        violation(a)

    return nki.jit(body)


@pytest.mark.parametrize("rule,instruction,violation", RULES, ids=[row_id(r) for r in RULES])
def test_rule_is_reported_with_the_kernel_line(rule, instruction, violation):
    kernel = kernel_of(violation)
    with pytest.raises(nki.NkiError) as info:
        nki.simulate(kernel)(np.zeros((128, 512), np.float32))
    err, message = info.value, str(info.value)
    line = marked_line(violation)
    assert err.rule == rule, message
    assert f"[{rule}]" in message
    assert err.line == line, message
    assert f"{os.path.basename(__file__)}:{line}: " in message
    assert err.instruction == instruction, message
    if instruction:
        assert f"{instruction}: " in message


def test_every_documented_rule_has_a_row():
    doc = os.path.join(os.path.dirname(__file__), "..", "docs", "nki.md")
    with open(doc) as f:
        table = [l for l in f if l.startswith("| `")]
    documented = set()
    for row in table:
        documented |= {name.strip().strip("`") for name in row.split("|")[1].split(" / ")}
    assert documented == {rule for rule, _, _ in RULES} | {"not_tracing"}


def test_partition_start_errors_say_where_the_access_may_start():
    rows = [violation for rule, _, violation in RULES if rule == "partition_start"]
    for violation, allowed in zip(rows, ["0", "0 or 64", "0, 32, 64 or 96"], strict=True):
        with pytest.raises(nki.NkiError, match=f"must start at {allowed}$"):
            nki.simulate(kernel_of(violation))(np.zeros(1, np.float32))


def test_capacity_errors_name_where_the_tile_was_allocated():
    with pytest.raises(nki.NkiError, match="allocated at .*test_nki_rules.py"):
        nki.simulate(nki.jit(sbuf_capacity))(np.zeros(1, np.float32))


def test_errors_raise_on_neuron_tensors_too():
    _, instruction, violation = next(r for r in RULES if r[0] == "gemm_moving_fmax")
    with pytest.raises(nki.NkiError, match=r"gemm_moving_fmax") as info:
        kernel_of(violation)(torch.zeros(4, 4, device="neuron"))
    assert info.value.line == marked_line(violation)
    assert info.value.instruction == instruction


def test_instructions_outside_a_kernel_are_an_error():
    with pytest.raises(nki.NkiError, match=r"\[not_tracing\]"):
        nl.zeros((4, 4), f32)
