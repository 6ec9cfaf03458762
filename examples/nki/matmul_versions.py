"""Four versions of a tiled matmul, in the order of the NKI matrix
multiplication tutorial's optimisation steps (written here from its prose,
not its code): out [M, N] = lhsT.T @ rhs for lhsT [K, M] and rhs [K, N],
M and K multiples of 128, N a multiple of 512.

1. matmul_basic_tiled: every (m, n) output tile loads its K lhsT and rhs
   tiles and accumulates them in PSUM.
2. matmul_hoisted_loads: the lhsT tiles of an m row are loaded once and
   reused for every n.
3. matmul_blocked_free: output tiles are grouped in blocks of BLOCK_M x
   BLOCK_N tiles whose operand tiles are loaded once per block.
4. matmul_optimized: blocked in all three dims, every operand block moved
   by one large DMA per 128-row slab of K, partial sums over K blocks kept
   in an SBUF fp32 accumulator and stored once.

tests/test_nki_matmul_versions.py checks that the four compute the same
product and that the cost model ranks them in that order.
"""

import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl

TILE_K = 128  # partitions: the contraction dim of one nc_matmul
TILE_M = 128  # stationary free size
TILE_N = 512  # moving free size (one PSUM bank of fp32)
BLOCK_M = 2  # output tiles per block, along M
BLOCK_N = 2  # along N
BLOCK_K = 4  # K tiles per block (fully optimised version)


def _evacuate(out, acc, m0, n0):
    result = nl.ndarray((TILE_M, TILE_N), out.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(result, acc)
    nl.store(out[m0:m0 + TILE_M, n0:n0 + TILE_N], result)


@nki.jit
def matmul_basic_tiled(lhsT, rhs):
    K, M = lhsT.shape
    N = rhs.shape[1]
    out = nl.ndarray((M, N), rhs.dtype, buffer=nl.shared_hbm)
    for m0 in range(0, M, TILE_M):
        for n0 in range(0, N, TILE_N):
            acc = nl.ndarray((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
            for k0 in range(0, K, TILE_K):
                lhs = nl.load(lhsT[k0:k0 + TILE_K, m0:m0 + TILE_M])
                rhs_tile = nl.load(rhs[k0:k0 + TILE_K, n0:n0 + TILE_N])
                nisa.nc_matmul(acc, lhs, rhs_tile)
            _evacuate(out, acc, m0, n0)
    return out


@nki.jit
def matmul_hoisted_loads(lhsT, rhs):
    K, M = lhsT.shape
    N = rhs.shape[1]
    out = nl.ndarray((M, N), rhs.dtype, buffer=nl.shared_hbm)
    for m0 in range(0, M, TILE_M):
        lhs_row = [nl.load(lhsT[k0:k0 + TILE_K, m0:m0 + TILE_M]) for k0 in range(0, K, TILE_K)]
        for n0 in range(0, N, TILE_N):
            acc = nl.ndarray((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
            for kt, k0 in enumerate(range(0, K, TILE_K)):
                rhs_tile = nl.load(rhs[k0:k0 + TILE_K, n0:n0 + TILE_N])
                nisa.nc_matmul(acc, lhs_row[kt], rhs_tile)
            _evacuate(out, acc, m0, n0)
    return out


@nki.jit
def matmul_blocked_free(lhsT, rhs):
    K, M = lhsT.shape
    N = rhs.shape[1]
    out = nl.ndarray((M, N), rhs.dtype, buffer=nl.shared_hbm)
    block_m, block_n = BLOCK_M * TILE_M, BLOCK_N * TILE_N
    k_starts = range(0, K, TILE_K)
    for mb in range(0, M, block_m):
        for nb in range(0, N, block_n):
            lhs = {(k0, m0): nl.load(lhsT[k0:k0 + TILE_K, m0:m0 + TILE_M])
                   for k0 in k_starts for m0 in range(mb, mb + block_m, TILE_M)}
            rhs_tiles = {(k0, n0): nl.load(rhs[k0:k0 + TILE_K, n0:n0 + TILE_N])
                         for k0 in k_starts for n0 in range(nb, nb + block_n, TILE_N)}
            for m0 in range(mb, mb + block_m, TILE_M):
                for n0 in range(nb, nb + block_n, TILE_N):
                    acc = nl.ndarray((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
                    for k0 in k_starts:
                        nisa.nc_matmul(acc, lhs[k0, m0], rhs_tiles[k0, n0])
                    _evacuate(out, acc, m0, n0)
    return out


@nki.jit
def matmul_optimized(lhsT, rhs):
    K, M = lhsT.shape
    N = rhs.shape[1]
    out = nl.ndarray((M, N), rhs.dtype, buffer=nl.shared_hbm)
    block_m, block_n, block_k = BLOCK_M * TILE_M, BLOCK_N * TILE_N, BLOCK_K * TILE_K
    for mb in range(0, M, block_m):
        for nb in range(0, N, block_n):
            total = nl.ndarray((TILE_M, BLOCK_M * block_n), nl.float32, buffer=nl.sbuf)
            for kb in range(0, K, block_k):
                # One DMA per 128-row slab of the block: BLOCK_M / BLOCK_N tiles wide.
                lhs = [nl.load(lhsT[k0:k0 + TILE_K, mb:mb + block_m])
                       for k0 in range(kb, kb + block_k, TILE_K)]
                rhs_slabs = [nl.load(rhs[k0:k0 + TILE_K, nb:nb + block_n])
                             for k0 in range(kb, kb + block_k, TILE_K)]
                for i in range(BLOCK_M):
                    for j in range(BLOCK_N):
                        acc = nl.ndarray((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
                        for kt in range(BLOCK_K):
                            nisa.nc_matmul(acc, lhs[kt][:, i * TILE_M:(i + 1) * TILE_M],
                                           rhs_slabs[kt][:, j * TILE_N:(j + 1) * TILE_N])
                        col = (i * BLOCK_N + j) * TILE_N
                        part = total[:, col:col + TILE_N]
                        if kb == 0:
                            nisa.tensor_copy(part, acc)
                        else:
                            nisa.tensor_tensor(part, part, acc, nl.add)
            for i in range(BLOCK_M):
                result = nl.ndarray((TILE_M, block_n), out.dtype, buffer=nl.sbuf)
                col = i * block_n
                nisa.tensor_copy(result, total[:, col:col + block_n])
                nl.store(out[mb + i * TILE_M:mb + (i + 1) * TILE_M, nb:nb + block_n], result)
    return out
