"""Neuron-only failures of PyTorch's own test_nn.py (TestNNDeviceType;
docs/conformance.md, "test_nn.py's TestNNDeviceType"), each checked here
against the CPU: the same exception type and the CPU's wording for bad input
(neuron's messages may add the op's name in front), the same values for good
input, and no CPU fallback.
"""

import pytest
import torch

import torchneuron
from cpu_errors import assert_raises_like_cpu

DEV = "neuron"
A = torch.ops.aten


@pytest.fixture(autouse=True)
def no_fallback():
    torchneuron.clear_op_tracking()
    yield
    assert torchneuron.get_fallback_ops() == {}


# ---- reflection and replication padding: the CPU's words --------------------------
# test_ReplicationPad_empty, test_ReflectionPad_empty and test_pad match
# "Expected 2D or 3D" and "Padding size should be less than the corresponding
# input dimension" with a regex, capitals included.

BAD_RANK_OR_EMPTY = [
    (A.replication_pad1d, (3, 0, 10), (2, 2)),
    (A.replication_pad2d, (43, 0, 10, 10), (2, 2, 2, 2)),
    (A.replication_pad3d, (3, 0, 10, 10, 10), (2,) * 6),
    (A.replication_pad1d, (4,), (1, 1)),
    (A.reflection_pad1d, (3, 0, 10), (2, 2)),
    (A.reflection_pad2d, (3, 0, 10, 10), (2, 2, 2, 2)),
    (A.reflection_pad3d, (3, 0, 10, 10, 10), (3,) * 6),
    (A.reflection_pad1d, (3, 3, 10, 10), (2, 2)),
    (A.reflection_pad2d, (3, 3, 10, 10, 10), (2, 2, 2, 2)),
    (A.reflection_pad3d, (3, 3, 10, 10, 10, 10), (2,) * 6),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex128])
@pytest.mark.parametrize("op,shape,pad", BAD_RANK_OR_EMPTY,
                         ids=[f"{op.__name__}-{len(s)}d" for op, s, _ in BAD_RANK_OR_EMPTY])
def test_pad_of_a_bad_rank_or_an_empty_dim_raises_like_cpu(op, shape, pad, dtype):
    assert_raises_like_cpu(lambda d: op(torch.zeros(shape, dtype=dtype, device=d), pad), exact=False)


# Each padded dim names its argument as the CPU does (#4 the last dim, #6, #8).
PAD_TOO_WIDE = [
    (A.reflection_pad1d, (1, 2, 3), (3, 0)),
    (A.reflection_pad1d, (2, 3), (0, 3)),
    (A.reflection_pad2d, (1, 2, 3), (3, 0, 0, 0)),
    (A.reflection_pad2d, (1, 1, 2, 3), (1, 1, 3, 0)),
    (A.reflection_pad3d, (1, 2, 3, 4), (0, 0, 0, 0, 5, 0)),
    (A.reflection_pad3d, (1, 2, 3, 4), (0, 0, 5, 0, 0, 0)),
    (A.reflection_pad3d, (1, 2, 3, 4), (0, 4, 0, 0, 0, 0)),
]


@pytest.mark.parametrize("op,shape,pad", PAD_TOO_WIDE)
def test_reflection_pad_wider_than_the_input_raises_like_cpu(op, shape, pad):
    assert_raises_like_cpu(lambda d: op(torch.zeros(shape, device=d), pad), exact=False)


def test_pad_of_a_wrong_padding_length_raises_like_cpu():
    for op in (A.replication_pad1d, A.replication_pad2d, A.replication_pad3d,
               A.reflection_pad1d, A.reflection_pad2d, A.reflection_pad3d):
        assert_raises_like_cpu(lambda d, op=op: op(torch.zeros(1, 2, 3, 3, device=d), (3,)), exact=False)


def test_functional_reflect_pad_too_wide_matches_the_upstream_regex():
    x = torch.randn(1, 1, 2, 3, device=DEV)
    with pytest.raises(RuntimeError, match="Padding size should be less than the corresponding input dimension"):
        torch.nn.functional.pad(x, (1, 1, 3, 0), mode="reflect")


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
def test_pad_good_input_still_matches_cpu(mode, dtype):
    for shape, pad in (((2, 3, 5), (1, 2)), ((2, 3, 4, 5), (1, 1, 2, 0)), ((2, 3, 4, 5), (0, 0, 0, 0)),
                       ((1, 2, 3, 4, 5), (1, 0, 0, 1, 2, 1))):
        x = torch.randn(shape, dtype=dtype)
        xn = x.to(DEV)[..., ::2]  # non-contiguous
        got = torch.nn.functional.pad(xn, pad, mode=mode)
        assert torch.equal(got.cpu(), torch.nn.functional.pad(x[..., ::2], pad, mode=mode))


# ---- upsampling: integer inputs the CPU has no kernel for --------------------------
# test_upsamplingBiMode2d_nonsupported_dtypes: nearest takes the floating
# dtypes and uint8 only, as do bilinear and bicubic (2-d); neuron computed
# nearest for every integer dtype and sent the others to the CPU fallback.

INTEGER_DTYPES = [torch.int8, torch.int16, torch.int32, torch.int64, torch.bool]
MODES_BY_RANK = {3: ["nearest", "nearest-exact", "linear"],
                 4: ["nearest", "nearest-exact", "bilinear", "bicubic"],
                 5: ["nearest", "nearest-exact", "trilinear"]}


@pytest.mark.parametrize("dtype", INTEGER_DTYPES)
@pytest.mark.parametrize("rank", [3, 4, 5])
def test_upsampling_an_integer_input_raises_like_cpu(rank, dtype):
    x = torch.ones((1, 3) + (6,) * (rank - 2), dtype=dtype)
    for mode in MODES_BY_RANK[rank]:
        for antialias in ([False, True] if mode in ("bilinear", "bicubic") else [False]):
            assert_raises_like_cpu(lambda d: torch.nn.functional.interpolate(
                x.to(d), size=(4,) * (rank - 2), mode=mode, antialias=antialias), exact=False)


def test_upsampling_linear1d_of_uint8_raises_like_cpu():
    x = torch.ones(1, 3, 6, dtype=torch.uint8)
    assert_raises_like_cpu(lambda d: torch.nn.functional.interpolate(x.to(d), size=4, mode="linear"), exact=False)


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "bilinear", "bicubic"])
@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_upsampling_uint8_and_float_still_match_cpu(mode, dtype):
    x = torch.randint(0, 256, (2, 3, 9, 7)).to(dtype)
    for size in ((4, 5), (12, 13)):
        got = torch.nn.functional.interpolate(x.to(DEV), size=size, mode=mode)
        want = torch.nn.functional.interpolate(x, size=size, mode=mode)
        if dtype == torch.uint8:
            assert torch.equal(got.cpu(), want)
        else:
            # float32 rounding of a different evaluation order (values up to 255)
            torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-3)


# ---- the transformer fast path: TransformerEncoderLayer and MultiheadAttention -----
# In eval mode without grad, torch.nn calls _transformer_encoder_layer_fwd and
# _native_multi_head_attention on the PrivateUse1 device as on the CPU; neuron
# composes them from native ops (transformer_fast_path.cpp) and must give the
# CPU fast path's values, a fully masked row's NaN included.

def _encoder_pair(norm_first, activation, dtype, d_model=8, nhead=2):
    torch.manual_seed(0)
    cpu = torch.nn.TransformerEncoderLayer(d_model, nhead, 16, 0.0, activation=activation, batch_first=True,
                                           norm_first=norm_first, dtype=dtype).eval()
    dev = torch.nn.TransformerEncoderLayer(d_model, nhead, 16, 0.0, activation=activation, batch_first=True,
                                           norm_first=norm_first, dtype=dtype).eval()
    dev.load_state_dict(cpu.state_dict())
    return cpu, dev.to(DEV)


def _masks(B, L):
    pad = torch.zeros(B, L, dtype=torch.bool)
    pad[0, L - 2:] = True
    causal = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
    additive = torch.zeros(L, L).masked_fill(causal, float("-inf"))
    return {"none": (None, None), "padding": (None, pad), "attn": (causal, None), "both": (causal, pad),
            "float_attn": (additive, None)}


def _assert_native(op):
    assert torchneuron.get_executed_ops().get("aten::" + op, 0) > 0, torchneuron.get_executed_ops()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("mask", ["none", "padding", "attn", "both", "float_attn"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_layer_fast_path_matches_cpu(norm_first, activation, mask, dtype):
    cpu, dev = _encoder_pair(norm_first, activation, dtype)
    x = torch.randn(5, 3, 8, dtype=dtype).transpose(0, 1)  # [B=3, L=5, D], non-contiguous
    src_mask, pad = _masks(3, 5)[mask]
    if src_mask is not None and src_mask.is_floating_point():
        src_mask = src_mask.to(dtype)
    with torch.no_grad():
        want = cpu(x, src_mask=src_mask, src_key_padding_mask=pad)
        got = dev(x.to(DEV), src_mask=None if src_mask is None else src_mask.to(DEV),
                  src_key_padding_mask=None if pad is None else pad.to(DEV))
    _assert_native("_transformer_encoder_layer_fwd")
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(got.cpu(), want, **tol)


def test_transformer_encoder_layer_fully_masked_row_is_the_cpu_fast_paths_nan():
    # upstream test_transformerencoderlayer: one token, masked out
    cpu, dev = _encoder_pair(False, "relu", torch.float32, d_model=4)
    x = torch.tensor([[[20., 30., 40., 50.]]])
    mask = torch.tensor([[True]])
    with torch.no_grad():
        want = cpu(x, src_key_padding_mask=mask)
        got = dev(x.to(DEV), src_key_padding_mask=mask.to(DEV))
    assert want.isnan().all()
    torch.testing.assert_close(got.cpu(), want, equal_nan=True)
    # a batch with one fully masked sequence keeps the other's values
    x2 = torch.randn(2, 3, 4)
    mask2 = torch.tensor([[True, True, True], [False, True, False]])
    with torch.no_grad():
        torch.testing.assert_close(dev(x2.to(DEV), src_key_padding_mask=mask2.to(DEV)).cpu(),
                                   cpu(x2, src_key_padding_mask=mask2), equal_nan=True, rtol=1e-5, atol=1e-5)


def test_transformer_encoder_layer_empty_batch_and_bfloat16():
    cpu, dev = _encoder_pair(False, "gelu", torch.float32)
    with torch.no_grad():
        out = dev(torch.zeros(0, 4, 8, device=DEV))
        assert out.shape == (0, 4, 8) and out.device.type == DEV
    cpu, dev = _encoder_pair(True, "relu", torch.bfloat16)
    x = torch.randn(2, 4, 8, dtype=torch.bfloat16)
    with torch.no_grad():
        torch.testing.assert_close(dev(x.to(DEV)).cpu(), cpu(x), rtol=3e-2, atol=3e-2)
    _assert_native("_transformer_encoder_layer_fwd")


@pytest.mark.parametrize("need_weights,average", [(False, True), (True, True), (True, False)])
@pytest.mark.parametrize("mask", ["none", "padding", "attn", "both"])
def test_multihead_attention_fast_path_matches_cpu(mask, need_weights, average):
    torch.manual_seed(0)
    cpu = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
    dev = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
    dev.load_state_dict(cpu.state_dict())
    dev = dev.to(DEV)
    x = torch.randn(3, 5, 8)
    xn = x.to(DEV)
    attn, pad = _masks(3, 5)[mask]
    with torch.no_grad():
        want = cpu(x, x, x, key_padding_mask=pad, attn_mask=attn, need_weights=need_weights,
                   average_attn_weights=average)
        got = dev(xn, xn, xn, key_padding_mask=None if pad is None else pad.to(DEV),
                  attn_mask=None if attn is None else attn.to(DEV), need_weights=need_weights,
                  average_attn_weights=average)
    _assert_native("_native_multi_head_attention")
    torch.testing.assert_close(got[0].cpu(), want[0], rtol=1e-5, atol=1e-5)
    assert (got[1] is None) == (want[1] is None)
    if want[1] is not None:
        torch.testing.assert_close(got[1].cpu(), want[1], rtol=1e-5, atol=1e-6)


def test_native_multi_head_attention_cross_attention_matches_cpu():
    # query apart from key/value, and all three apart: the qkv weight's rows split as on the CPU
    torch.manual_seed(0)
    w, b, pw, pb = torch.randn(24, 8), torch.randn(24), torch.randn(8, 8), torch.randn(8)
    q, kv, v = torch.randn(2, 3, 8), torch.randn(2, 3, 8), torch.randn(2, 3, 8)
    for key, value in ((kv, kv), (kv, v)):
        want = torch._native_multi_head_attention(q, key, value, 8, 2, w, b, pw, pb, need_weights=True)
        kd = key.to(DEV)
        vd = kd if value is key else value.to(DEV)  # the same tensor: one product for key and value
        got = torch._native_multi_head_attention(q.to(DEV), kd, vd, 8, 2, *(t.to(DEV) for t in (w, b, pw, pb)),
                                                 need_weights=True)
        for g, x in zip(got, want):
            torch.testing.assert_close(g.cpu(), x, rtol=1e-5, atol=1e-5)


def test_native_multi_head_attention_bad_input_raises_like_cpu():
    w, b = torch.randn(24, 8), torch.randn(24)
    pw, pb = torch.randn(8, 8), torch.randn(8)
    x = torch.randn(2, 3, 8)

    def call(d, q=x, qkv_w=w, qkv_b=b, heads=2, embed=8):
        return torch._native_multi_head_attention(q.to(d), q.to(d), q.to(d), embed, heads, qkv_w.to(d),
                                                  qkv_b.to(d), pw.to(d), pb.to(d))
    assert_raises_like_cpu(lambda d: call(d, q=torch.randn(3, 8)))
    assert_raises_like_cpu(lambda d: call(d, embed=6))
    assert_raises_like_cpu(lambda d: call(d, qkv_w=torch.randn(8, 8)))
    assert_raises_like_cpu(lambda d: call(d, qkv_b=torch.randn(8)))
    assert_raises_like_cpu(lambda d: call(d, heads=3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_transform_bias_rescale_qkv_matches_cpu(dtype):
    qkv = torch.randn(12, 2, 5, dtype=dtype).permute(1, 2, 0)  # [B=2, T=5, 3D=12], non-contiguous
    bias = torch.randn(12, dtype=dtype)
    want = torch._transform_bias_rescale_qkv(qkv, bias, 2)
    got = torch._transform_bias_rescale_qkv(qkv.to(DEV), bias.to(DEV), 2)
    _assert_native("_transform_bias_rescale_qkv")
    for g, w in zip(got, want):
        assert g.shape == w.shape == (2, 2, 5, 2)  # [B, H, T, D / H]
        torch.testing.assert_close(g.cpu(), w)


def test_transform_bias_rescale_qkv_bad_input_raises_like_cpu():
    # the CPU's checks in its order and words: sizes, heads, the 3 D split, dtype
    bias = torch.randn(24)
    T = torch._transform_bias_rescale_qkv
    for qkv, heads in ((torch.randn(5, 24), 2), (torch.randn(2, 5, 24), 5), (torch.randn(2, 5, 20), 2),
                       (torch.randn(2, 5, 8, 24), 2), (torch.ones(2, 5, 24, dtype=torch.int64), 2)):
        assert_raises_like_cpu(lambda d: T(qkv.to(d), bias.to(qkv.dtype).to(d), heads))


MASK_TYPES = [  # (input shape, mask shape, mask_type)
    ((2, 3, 4, 4), (4, 4), 0), ((2, 3, 4, 4), (2, 4), 1), ((2, 3, 4, 4), (2, 3, 4, 4), 2), ((3, 5), (3, 5), None),
    ((2, 2, 3, 3), (2, 2, 3, 3), None)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("shape,mask_shape,mask_type", MASK_TYPES)
def test_masked_softmax_matches_cpu(shape, mask_shape, mask_type, dtype):
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=dtype)
    mask = torch.rand(mask_shape) < 0.4
    mask.view(-1, mask_shape[-1])[0] = True  # one fully masked row: NaN, as on the CPU
    want = torch._masked_softmax(x, mask, x.dim() - 1, mask_type)
    got = torch._masked_softmax(x.to(DEV), mask.to(DEV), x.dim() - 1, mask_type)
    _assert_native("_masked_softmax")
    tol = dict(rtol=1e-2, atol=1e-2) if dtype == torch.bfloat16 else dict(rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(got.cpu(), want, equal_nan=True, **tol)


def test_masked_softmax_gradient_and_errors_match_cpu():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 4, 5, dtype=torch.float64)
    mask = torch.rand(2, 3, 4, 5) < 0.3
    mask[:, :, 0, :] = False  # no fully masked column along dim 2: its NaN would spread into the sums
    grads = []
    for d in ("cpu", DEV):
        xd = x.to(d).detach().requires_grad_()
        out = torch._masked_softmax(xd, mask.to(d), 2, 2)  # a dim that is not the last
        out.backward(torch.arange(out.numel(), dtype=x.dtype).view(out.shape).to(d))
        grads.append((out.detach().cpu(), xd.grad.cpu()))
    _assert_native("_masked_softmax_backward")
    torch.testing.assert_close(grads[1], grads[0])
    assert_raises_like_cpu(lambda d: torch._masked_softmax(x.to(d), torch.zeros(2, 5, device=d), 3, 1))
    assert_raises_like_cpu(lambda d: torch._masked_softmax(x.to(d), torch.zeros(3, 5, dtype=torch.bool,
                                                                               device=d), 3, 1))
    assert_raises_like_cpu(lambda d: torch._masked_softmax(x.to(d), torch.zeros(5, 4, dtype=torch.bool,
                                                                               device=d), 3, 0))
    assert_raises_like_cpu(lambda d: torch._masked_softmax(x.to(d), torch.zeros(2, 3, 4, 4, dtype=torch.bool,
                                                                               device=d), 3, 2))
    assert_raises_like_cpu(lambda d: torch._masked_softmax(x.to(d), torch.zeros(4, 5, dtype=torch.bool,
                                                                               device=d), 3, None))


# ---- nested tensors on the fast path (nested_transformer.cpp) ------------------------
# test_TransformerEncoderLayer_empty feeds torch.nested.nested_tensor(...,
# device="neuron") to the layer; nn.TransformerEncoder in eval mode turns a
# padded batch and its key padding mask into a nested tensor and back.

def test_transformer_encoder_padding_mask_goes_nested_and_matches_cpu():
    cpu_layer, _ = _encoder_pair(False, "relu", torch.float32)
    cpu = torch.nn.TransformerEncoder(cpu_layer, 2, enable_nested_tensor=True).eval()
    dev = torch.nn.TransformerEncoder(_encoder_pair(False, "relu", torch.float32)[0], 2).eval()
    dev.load_state_dict(cpu.state_dict())
    dev = dev.to(DEV)
    x = torch.randn(3, 6, 8)
    pad = torch.zeros(3, 6, dtype=torch.bool)
    pad[0, 4:] = True
    pad[2, 1:] = True
    with torch.no_grad():
        want = cpu(x, src_key_padding_mask=pad)
        got = dev(x.to(DEV), src_key_padding_mask=pad.to(DEV))
    for op in ("_nested_tensor_from_mask_left_aligned", "_nested_tensor_from_mask", "to_padded_tensor",
               "_transformer_encoder_layer_fwd(nested)"):
        _assert_native(op)
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)


def test_transformer_encoder_layer_on_nested_input_matches_cpu():
    cpu, dev = _encoder_pair(True, "gelu", torch.float32)
    parts = [torch.randn(4, 8), torch.randn(0, 8), torch.randn(2, 8)]
    with torch.no_grad():
        want = cpu(torch.nested.nested_tensor(parts))
        got = dev(torch.nested.nested_tensor([p.to(DEV) for p in parts], device=DEV))
        assert got.is_nested and got.device.type == DEV
        torch.testing.assert_close(got.to_padded_tensor(0.5).cpu(), want.to_padded_tensor(0.5), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(got.to_padded_tensor(0.0, (3, 5, 9)).cpu(), want.to_padded_tensor(0.0, (3, 5, 9)))
        # upstream's empty case: one entry of no rows comes back as it is
        empty = dev(torch.nested.nested_tensor([torch.rand(0, 8, device=DEV)], device=DEV))
        assert empty.is_nested and empty.device.type == DEV and empty.size(0) == 1 and empty.numel() == 0
        assert [tuple(t.shape) for t in empty.unbind()] == [(0, 8)]
        # padding it is refused, as on the CPU (tests/test_nested_ops.py)


def test_nested_tensor_from_mask_and_padding_errors_match_cpu():
    x = torch.randn(2, 4, 3)
    gap = torch.tensor([[True, False, True, False], [True, True, False, False]])
    aligned = torch.tensor([[True, True, True, False], [True, False, False, False]])
    for mask in (gap, aligned):
        assert torch._nested_tensor_from_mask_left_aligned(x.to(DEV), mask.to(DEV)) == \
            torch._nested_tensor_from_mask_left_aligned(x, mask)
    assert_raises_like_cpu(lambda d: torch._nested_tensor_from_mask(x.to(d), gap.to(d)))
    assert_raises_like_cpu(lambda d: torch._nested_tensor_from_mask(x.to(d), gap.to(d).float()))
    assert_raises_like_cpu(lambda d: torch._nested_tensor_from_mask(x.to(d), gap.to(d)[:, :3]))
    nt = {d: torch._nested_tensor_from_mask(x.to(d), aligned.to(d)) for d in ("cpu", DEV)}
    assert torch.equal(nt[DEV].to_padded_tensor(-1.0).cpu(), nt["cpu"].to_padded_tensor(-1.0))
    # mask_check=False takes each row's count of leading positions, as the CPU does
    loose = {d: torch._nested_tensor_from_mask(x.to(d), gap.to(d), mask_check=False) for d in ("cpu", DEV)}
    assert torch.equal(loose[DEV].to_padded_tensor(0.0).cpu(), loose["cpu"].to_padded_tensor(0.0))
    assert_raises_like_cpu(lambda d: nt["cpu" if d == "cpu" else DEV].to_padded_tensor(0.0, (2, 2, 3)))
    assert_raises_like_cpu(lambda d: nt["cpu" if d == "cpu" else DEV].to_padded_tensor(0.0, (2, 4)))


def test_nested_tensor_unbinds_and_prints_like_cpu():
    parts = [torch.arange(6.).view(2, 3), torch.ones(1, 3), torch.zeros(0, 3)]
    nts = {d: torch.nested.nested_tensor([p.to(d) for p in parts], device=d) for d in ("cpu", DEV)}
    got, want = nts[DEV].unbind(), nts["cpu"].unbind()
    assert len(got) == len(want) == 3
    for g, w in zip(got, want):
        assert g.device.type == DEV and torch.equal(g.cpu(), w)
    assert repr(nts[DEV]).replace(", device='neuron:0'", "") == repr(nts["cpu"])
    assert_raises_like_cpu(lambda d: nts["cpu" if d == "cpu" else DEV].unbind(1))
    empty = {d: torch.nested.nested_tensor([], device=d) for d in ("cpu", DEV)}
    assert empty[DEV].unbind() == () and empty[DEV].to_padded_tensor(0).shape == empty["cpu"].to_padded_tensor(0).shape
    _assert_native("unbind.int(nested)")


# ---- the legacy torch._C._nn.slow_conv3d: the CPU's checks, then the conv3d kernel ---

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.int32, torch.uint8])
def test_slow_conv3d_matches_cpu(dtype):
    torch.manual_seed(0)
    if not dtype.is_floating_point:  # the CPU convolves integers too, wrapping
        torch.manual_seed(0)
        x, w = torch.randint(0, 9, (2, 4, 5, 5, 5)).to(dtype), torch.randint(0, 9, (6, 2, 2, 3, 2)).to(dtype)
        b = torch.randint(0, 9, (6,)).to(dtype)
        want = torch._C._nn.slow_conv3d(x, w, (2, 3, 2), b, (1, 2, 1), (1, 0, 1))
        got = torch._C._nn.slow_conv3d(x.to(DEV), w.to(DEV), (2, 3, 2), b.to(DEV), (1, 2, 1), (1, 0, 1))
        assert torch.equal(got.cpu(), want)
        _assert_native("slow_conv3d_forward")
        return
    cases = [((2, 4, 5, 6, 7), (6, 4, 3, 2, 3), (3, 2, 3), True, (1, 1, 1), (0, 0, 0)),
             ((1, 4, 6, 6, 6), (4, 2, 2, 2, 2), (2, 2, 2), False, (2, 1, 3), (1, 0, 1)),  # 2 groups
             ((0, 2, 4, 4, 4), (3, 2, 1, 1, 1), (1, 1, 1), True, (1, 1, 1), (0, 0, 0))]  # empty batch
    for shape, wshape, k, has_bias, stride, padding in cases:
        x = torch.randn(shape, dtype=dtype).transpose(3, 4).contiguous().transpose(3, 4)
        w = torch.randn(wshape, dtype=dtype)
        b = torch.randn(wshape[0], dtype=dtype) if has_bias else None
        want = torch._C._nn.slow_conv3d(x, w, k, b, stride, padding)
        got = torch._C._nn.slow_conv3d(x.to(DEV), w.to(DEV), k, None if b is None else b.to(DEV), stride, padding)
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
        out = torch.empty(0, dtype=dtype, device=DEV)
        torch.ops.aten.slow_conv3d_forward.output(x.to(DEV), w.to(DEV), k, None if b is None else b.to(DEV),
                                                  stride, padding, output=out)
        torch.testing.assert_close(out.cpu(), want, rtol=1e-5, atol=1e-5)
    _assert_native("slow_conv3d_forward")


SLOW_CONV3D_BAD = [  # (input, weight, kernel_size, bias, stride, padding)
    ((1, 1, 1, 0), (1, 0, 1), 1, None, 1, 0),  # upstream test_conv_empty_input
    ((1, 2, 4, 4, 4), (3, 2, 2, 2), 2, None, 1, 0),
    ((1, 2, 4, 4, 4), (3, 16), 2, None, 1, 0),
    ((1, 2, 4, 4, 4), (3, 2, 2, 2, 2), 0, None, 1, 0),
    ((1, 2, 4, 4, 4), (3, 2, 2, 2, 2), 2, None, 0, 0),
    ((1, 2, 4, 4, 4), (3, 2, 5, 5, 5), 5, None, 1, 0),
    ((1, 3, 4, 4, 4), (3, 2, 2, 2, 2), 2, None, 1, 0),
    ((2, 4, 4, 4), (3, 2, 2, 2, 2), 2, None, 1, 0),
    ((1, 2, 4, 4, 4), (3, 2, 2, 2, 2), 2, (4,), 1, 0),
    ((1, 2, 4, 4, 4), (3, 2, 2, 2, 2), 2, "bool", 1, 0),  # bool: not implemented, as on the CPU
]


@pytest.mark.parametrize("case", SLOW_CONV3D_BAD, ids=[str(c[:2]) for c in SLOW_CONV3D_BAD])
def test_slow_conv3d_bad_input_raises_like_cpu(case):
    shape, wshape, k, bias, stride, padding = case
    x, w = torch.randn(shape), torch.randn(wshape)
    if bias == "bool":
        x, w, bias = x > 0, w > 0, None
    b = None if bias is None else torch.randn(bias)
    assert_raises_like_cpu(lambda d: torch._C._nn.slow_conv3d(x.to(d), w.to(d), k, None if b is None else b.to(d),
                                                              stride, padding))


# ---- the runner's record of the rest ------------------------------------------------

def test_test_nn_documented_exceptions_need_the_test_and_its_message():
    from torchneuron.tools.conformance_causes import cause_of, documented_exception
    cls = "test_nn.py::TestNNDeviceTypePRIVATEUSE1::"
    u8 = cls + "test_upsamplingBiMode2d_nonsupported_dtypes_antialias_True_num_channels_3_mode_bicubic_uint8_neuron_uint8"
    assert documented_exception(u8, "AssertionError: RuntimeError not raised") is not None
    # an integer dtype the CPU refuses, or another failure, still counts as ours
    assert documented_exception(u8.replace("uint8", "int8"), "AssertionError: RuntimeError not raised") is None
    assert documented_exception(u8, "AssertionError: Tensor-likes are not close!") is None
    enc = cls + "test_transformerencoderlayer_neuron_float32"
    assert documented_exception(enc, "AssertionError: False is not true\n\nTo execute this test") is not None
    assert documented_exception(enc, "AssertionError: Tensor-likes are not close!") is None
    assert cause_of("failed", "NotImplementedError: Could not run 'aten::_transformer_encoder_layer_fwd' with "
                              "arguments from the 'NestedTensorneuron' backend.") == \
        "nested tensors are not supported on neuron"
