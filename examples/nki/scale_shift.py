"""out = x * scale[:, None] + shift[None, :]: a per-row scale and a
per-column shift, in the current dialect's indexing and broadcasting.

Tiles are addressed with ``nl.ds(start, size)`` from the loop variables; the
row scales load as a [rows, 1] column (``nl.expand_dims`` of the HBM vector)
and act as the scalar operand of ``tensor_scalar``; the column shift loads
once as a [1, cols] row and ``nl.broadcast_to`` copies it to every
partition. The ``nt.tensor`` annotations make a call with mismatched shapes
fail at the call.
"""

import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl
import torchneuron.nki.typing as nt

ROWS, COLS = 256, 1024


@nki.jit
def scale_shift(x: nt.tensor[ROWS, COLS], scale: nt.tensor[ROWS], shift: nt.tensor[COLS]):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    p, f = nl.tile_size.pmax, 512
    row = nl.load(nl.expand_dims(shift, 0), dtype=nl.float32)  # [1, COLS]
    shifts = nl.broadcast_to(row, (p, COLS))
    for r in nl.affine_range(ROWS // p):
        s = nl.load(nl.expand_dims(scale[nl.ds(r * p, p)], 1), dtype=nl.float32)  # [p, 1]
        for c in nl.affine_range(COLS // f):
            tile = nl.load(x[nl.ds(r * p, p), nl.ds(c * f, f)])
            result = nl.ndarray((p, f), x.dtype)
            nisa.scalar_tensor_tensor(result, tile, nl.multiply, s, nl.add,
                                      shifts[:, nl.ds(c * f, f)])
            nl.store(out[nl.ds(r * p, p), nl.ds(c * f, f)], result)
    return out


if __name__ == "__main__":
    import torch

    x, scale, shift = torch.randn(ROWS, COLS), torch.randn(ROWS), torch.randn(COLS)
    out = scale_shift(x.to("neuron"), scale.to("neuron"), shift.to("neuron"))
    ref = x * scale[:, None] + shift[None, :]
    print("max error vs torch:", (out.cpu() - ref).abs().max().item())
