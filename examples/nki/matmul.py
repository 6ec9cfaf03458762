"""Tiled matmul with PSUM accumulation over K.

``matmul_tiled(lhsT, rhs)`` computes lhsT.T @ rhs for lhsT [K, M] and rhs
[K, N]: the contraction dim K lies on the partitions of both operands.
Each 128 x 512 output block accumulates its K/128 partial products in one
PSUM bank (the first nc_matmul overwrites, later ones add), then is copied
to SBUF (converting to the output dtype) and stored. The rhs column block
is loaded once per N block and reused for every M block.
"""

import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl


def _blocks(total, size):
    return [(start, min(size, total - start)) for start in range(0, total, size)]


@nki.jit
def matmul_tiled(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), rhs.dtype, buffer=nl.shared_hbm)
    k_blocks = _blocks(K, nl.tile_size.pmax)
    for n0, nn in _blocks(N, nl.tile_size.gemm_moving_fmax):
        rhs_tiles = [nl.load(rhs[k0:k0 + kk, n0:n0 + nn]) for k0, kk in k_blocks]
        for m0, mm in _blocks(M, nl.tile_size.gemm_stationary_fmax):
            acc = nl.ndarray((mm, nn), nl.float32, buffer=nl.psum)
            for (k0, kk), rhs_tile in zip(k_blocks, rhs_tiles):
                lhs_tile = nl.load(lhsT[k0:k0 + kk, m0:m0 + mm])
                nisa.nc_matmul(acc, lhs_tile, rhs_tile)
            result = nl.ndarray((mm, nn), out.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(result, acc)
            nl.store(out[m0:m0 + mm, n0:n0 + nn], result)
    return out


if __name__ == "__main__":
    import torch

    a = torch.randn(512, 300, dtype=torch.bfloat16)
    b = torch.randn(512, 700, dtype=torch.bfloat16)
    out = matmul_tiled(a.to("neuron"), b.to("neuron")).cpu()
    ref = (a.float().T @ b.float())
    print("max abs error vs fp32:", (out.float() - ref).abs().max().item())
