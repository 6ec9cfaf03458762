"""2-D transpose through the Tensor engine: 128 x 128 blocks via PSUM."""

import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl


@nki.jit
def transpose2d(a):
    rows, cols = a.shape
    out = nl.ndarray((cols, rows), a.dtype, buffer=nl.shared_hbm)
    for r in nl.affine_range((rows + 127) // 128):
        r0, n = r * 128, min(128, rows - r * 128)
        for c in nl.affine_range((cols + 127) // 128):
            c0, m = c * 128, min(128, cols - c * 128)
            tile = nl.load(a[r0:r0 + n, c0:c0 + m])
            flipped = nl.ndarray((m, n), a.dtype, buffer=nl.psum)
            nisa.nc_transpose(flipped, tile)
            nl.store(out[c0:c0 + m, r0:r0 + n], flipped)
    return out


if __name__ == "__main__":
    import torch

    a = torch.randn(200, 333)
    print("exact:", torch.equal(transpose2d(a.to("neuron")).cpu(), a.T))
