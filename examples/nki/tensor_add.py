"""Element-wise add of two [rows, cols] tensors, tile by tile.

Rows go to partitions in blocks of 128 and columns in blocks of 512; the
last blocks may be partial, so any shape works.
"""

import torchneuron.nki as nki
import torchneuron.nki.language as nl


@nki.jit
def tensor_add(a, b):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    rows, cols = a.shape
    for r in nl.affine_range((rows + 127) // 128):
        r0, n = r * 128, min(128, rows - r * 128)
        for c in nl.affine_range((cols + 511) // 512):
            c0, m = c * 512, min(512, cols - c * 512)
            x = nl.load(a[r0:r0 + n, c0:c0 + m])
            y = nl.load(b[r0:r0 + n, c0:c0 + m])
            nl.store(out[r0:r0 + n, c0:c0 + m], nl.add(x, y))
    return out


if __name__ == "__main__":
    import torch

    a, b = torch.randn(300, 1000), torch.randn(300, 1000)
    out = tensor_add(a.to("neuron"), b.to("neuron"))
    print("max error vs torch:", (out.cpu() - (a + b)).abs().max().item())
