"""nki.language indexing and shape conveniences (nl.ds, nl.broadcast_to,
nl.expand_dims) and nki.typing annotations, numerically against NumPy /
torch. Their rule violations are rows of test_nki_rules.py."""

import numpy as np
import pytest
import torch

import torchneuron
import torchneuron.nki as nki
import torchneuron.nki.isa as nisa
import torchneuron.nki.language as nl
import torchneuron.nki.typing as nt


def test_ds_windows_hbm_and_on_chip_views_from_loop_variables():
    @nki.jit
    def reverse_blocks(a):
        rows, cols = a.shape
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        for j in nl.affine_range(cols // 4):
            tile = nl.load(a[:, nl.ds(j * 4, 4)])
            pair = nl.ndarray((rows, 2), a.dtype)
            nisa.tensor_copy(pair, tile[:, nl.ds(1, 2)])  # an on-chip window
            nl.store(out[:, nl.ds(cols - 4 - j * 4, 4)], tile)
            nl.store(out[nl.ds(0, rows), nl.ds(cols - 3 - j * 4, 2)], pair)
        return out

    a = np.arange(6 * 16, dtype=np.float32).reshape(6, 16)
    expected = a.reshape(6, 4, 4)[:, ::-1].reshape(6, 16)
    np.testing.assert_array_equal(reverse_blocks(a), expected)


def test_ds_equals_the_slice_it_spells():
    views = {}

    @nki.jit
    def k(a):
        t = nl.ndarray((128, 64), nl.float32)
        views["tile"] = (t[nl.ds(32, 32), nl.ds(8, 16)], t[32:64, 8:24])
        views["hbm"] = (a[nl.ds(2, 3)], a[2:5])
        nisa.memset(t, 0)

    k(np.zeros((6, 10), np.float32))
    for got, want in views.values():
        assert (got.shape, got.strides, got.offset, got.partition) == \
            (want.shape, want.strides, want.offset, want.partition)
    assert repr(nl.ds(3, 4)) == "nl.ds(3, 4)"


@pytest.mark.parametrize("buffer", ["sbuf", "psum"])
def test_broadcast_to_repeats_free_and_partition_dims(buffer):
    @nki.jit
    def k(a, col):
        out_p = nl.ndarray((64, 8), nl.float32, buffer=nl.shared_hbm)
        out_f = nl.ndarray((64, 8), nl.bfloat16, buffer=nl.shared_hbm)
        row = nl.load(a)  # [1, 8]
        column = nl.load(col)  # [64, 1]
        if buffer == "psum":
            moved = nl.ndarray((1, 8), nl.float32, buffer=nl.psum)
            nisa.tensor_copy(moved, row)
            row = moved
        nl.store(out_p, nl.broadcast_to(row, (64, 8)))
        nl.store(out_f, nl.broadcast_to(column, (64, 8), dtype=nl.bfloat16))
        return out_p, out_f

    a = np.random.randn(1, 8).astype(np.float32)
    col = np.random.randn(64, 1).astype(np.float32)
    out_p, out_f = k(a, col)
    np.testing.assert_array_equal(out_p, np.broadcast_to(a, (64, 8)))
    ref = torch.from_numpy(np.broadcast_to(col, (64, 8)).copy()).bfloat16().float().numpy()
    np.testing.assert_array_equal(out_f, ref)


def test_broadcast_to_the_same_shape_is_the_tile_or_a_cast_copy():
    seen = {}

    @nki.jit
    def k(a):
        t = nl.load(a)
        seen["same"] = nl.broadcast_to(t, a.shape) is t
        cast = nl.broadcast_to(t, a.shape, dtype=nl.int32)
        seen["cast"] = cast is not t and cast.dtype is nl.int32
        out = nl.ndarray(a.shape, nl.int32, buffer=nl.shared_hbm)
        nl.store(out, cast)
        return out

    a = np.array([[1.5, -2.5, 3.49]], np.float32)
    out = k(a)
    assert seen == {"same": True, "cast": True}
    np.testing.assert_array_equal(out, [[2, -2, 3]])  # round to nearest even


def test_expand_dims_inserts_size_one_dims_as_numpy():
    shapes = {}

    @nki.jit
    def k(a):
        t = nl.ndarray((16, 4, 8), nl.float32)
        shapes["tile_last"] = nl.expand_dims(t, -1).shape
        shapes["tile_tuple"] = nl.expand_dims(t, (1, 4)).shape
        shapes["hbm_front"] = nl.expand_dims(a, 0).shape
        shapes["hbm_negative"] = nl.expand_dims(a[0], -1).shape
        nisa.memset(t, 0)

    k(np.zeros((6, 10), np.float32))
    t, a = np.zeros((16, 4, 8)), np.zeros((6, 10))
    assert shapes["tile_last"] == np.expand_dims(t, -1).shape
    assert shapes["tile_tuple"] == np.expand_dims(t, (1, 4)).shape
    assert shapes["hbm_front"] == np.expand_dims(a, 0).shape
    assert shapes["hbm_negative"] == np.expand_dims(a[0], -1).shape


def test_expand_dims_of_an_hbm_vector_loads_a_column():
    @nki.jit
    def column_scale(x, s):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        scale = nl.load(nl.expand_dims(s, 1))  # [rows, 1]
        nl.store(out, nl.multiply(nl.load(x), scale))
        return out

    x, s = torch.randn(96, 40), torch.randn(96)
    out = column_scale(x.to("neuron"), s.to("neuron"))
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), x * s[:, None])


# ---- nki.typing ----------------------------------------------------------------

@nki.jit
def annotated_add(a: nt.tensor[4, 8], b: nt.tensor[[4, 8], nl.float32], c: nt.tensor):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.add(nl.add(nl.load(a), nl.load(b)), nl.load(c)))
    return out


def test_annotated_kernels_run_when_the_arguments_fit():
    a, b, c = (torch.randn(4, 8) for _ in range(3))
    out = annotated_add(*(t.to("neuron") for t in (a, b, c)))
    torch.testing.assert_close(out.cpu(), a + b + c)


@pytest.mark.parametrize("b,c,why", [
    (np.zeros((4, 9), np.float32), np.zeros(1, np.float32), "expected shape (4, 8), got (4, 9)"),
    (np.zeros((4, 8), np.float16), np.zeros(1, np.float32), "expected dtype nl.float32"),
    (np.zeros((4, 8), np.float32), 3.0, "expected a tensor, got float"),
])
def test_arguments_that_break_their_annotation_fail_at_the_call(b, c, why):
    with pytest.raises(nki.NkiError, match=r"\[annotation\]") as info:
        annotated_add(np.zeros((4, 8), np.float32), b, c)
    assert why in str(info.value)
    assert info.value.line == annotated_add.fn.__code__.co_firstlineno


def test_tensor_annotation_spellings():
    assert nt.tensor[128, 512].shape == nt.tensor[(128, 512)].shape == (128, 512)
    assert nt.tensor[7].shape == (7,)
    spec = nt.tensor[[2, 3], "bfloat16"]
    assert (spec.shape, spec.dtype) == ((2, 3), nl.bfloat16)
    assert repr(spec) == "nt.tensor[[2, 3], nl.bfloat16]" and repr(nt.tensor) == "nt.tensor"
    with pytest.raises(TypeError, match="integer sizes"):
        nt.tensor[1.5, 2]


def test_string_annotations_are_checked_too():
    namespace = {}
    exec("from __future__ import annotations\n"
         "import torchneuron.nki.typing as nt\n"
         "def body(a: nt.tensor[2, 2], b: 'not.a.name'):\n"
         "    pass\n", namespace)
    kernel = nki.jit(namespace["body"])
    kernel(np.zeros((2, 2), np.float32), 1)
    with pytest.raises(nki.NkiError, match=r"\[annotation\]"):
        kernel(np.zeros((3, 2), np.float32), 1)


def test_nki_op_reads_tensor_annotations_as_tensors():
    @torchneuron.nki_op("nki_language_test::scaled")
    @nki.jit
    def scaled(x: nt.tensor, alpha: float):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.multiply(nl.load(x), alpha))
        return out

    x = torch.randn(8, 16)
    torch.testing.assert_close(scaled(x.to("neuron"), 2.0).cpu(), x * 2)


# ---- element-wise extras -------------------------------------------------------

def unary_kernel(fn, dtype=None):
    @nki.jit
    def k(a):
        out_dtype = dtype or a.dtype
        out = nl.ndarray(a.shape, out_dtype, buffer=nl.shared_hbm)
        nl.store(out, fn(nl.load(a)))
        return out

    return k


def test_logical_not_is_one_where_zero():
    a = np.array([[0.0, -0.0, 2.5, np.nan, -1.0]], np.float32)
    np.testing.assert_array_equal(unary_kernel(nl.logical_not)(a), np.logical_not(a))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32,
                                   np.uint32, np.bool_])
def test_invert_flips_every_bit_of_the_width(dtype):
    info = np.iinfo(dtype) if dtype is not np.bool_ else None
    values = [0, 1, 5] if info is None else [info.min, info.min + 1, 0, 1, 77, info.max]
    a = np.array([values[:2] if dtype is np.bool_ else values], dtype)
    np.testing.assert_array_equal(unary_kernel(nl.invert)(a), np.invert(a))


def test_fmod_keeps_the_sign_of_the_dividend():
    @nki.jit
    def k(a, b):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.fmod(nl.load(a), nl.load(b)))
        return out

    a = np.array([[-7.5, -3.0, 3.0, 7.25, 5.0]], np.float32)
    b = np.array([[2.0, 2.0, -2.0, 2.0, -3.0]], np.float32)
    np.testing.assert_array_equal(k(a, b), np.fmod(a, b))


def test_buffer_predicates():
    seen = {}

    @nki.jit
    def k(a):
        t, p = nl.zeros((4, 4), nl.float32), nl.zeros((4, 4), nl.float32, buffer=nl.psum)
        seen["buffers"] = [(f(b)) for b in (nl.sbuf, nl.psum, nl.hbm, nl.shared_hbm,
                                            nl.private_hbm)
                           for f in (nl.is_hbm, nl.is_sbuf, nl.is_psum, nl.is_on_chip)]
        seen["tensors"] = [f(x) for x in (t, p, a)
                           for f in (nl.is_hbm, nl.is_sbuf, nl.is_psum, nl.is_on_chip)]
        nisa.tensor_copy(t, p)

    k(np.zeros((4, 4), np.float32))
    sb, ps, hb = [False, True, False, True], [False, False, True, True], [True, False, False, False]
    assert seen["buffers"] == sb + ps + hb + hb + hb
    assert seen["tensors"] == sb + ps + hb
    with pytest.raises(nki.NkiError, match=r"\[buffer\]"):
        nl.is_sbuf("sbuf")


# ---- reductions and normalisations ---------------------------------------------

def reduce_kernel(fn, out_shape, out_dtype=nl.float32):
    @nki.jit
    def k(a):
        out = nl.ndarray(out_shape, out_dtype, buffer=nl.shared_hbm)
        nl.store(out, fn(nl.load(a)))
        return out

    return k


def test_var_and_average_match_numpy_over_trailing_axes():
    a = (np.random.randn(16, 6, 40) * 3 + 5).astype(np.float32)
    for axis in (2, (1, 2)):
        shape = np.var(a, axis=axis).shape
        shape = shape if len(shape) == 2 else shape + (1,)
        np.testing.assert_allclose(reduce_kernel(lambda t: nl.var(t, axis), shape)(a),
                                   np.var(a, axis=axis).reshape(shape), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(reduce_kernel(lambda t: nl.average(t, axis), shape)(a),
                                   np.average(a, axis=axis).reshape(shape), rtol=1e-5, atol=1e-5)


def test_all_is_a_logical_and_reduction():
    a = np.ones((8, 5), np.float32)
    a[1, 3], a[4, 0], a[6, 2] = 0.0, -0.0, np.nan  # NaN is nonzero: true
    out = reduce_kernel(lambda t: nl.all(t, 1), (8, 1), nl.bool_)(a)
    np.testing.assert_array_equal(out[:, 0], np.all(a, axis=1))


def test_softmax_matches_torch():
    x = torch.randn(100, 3, 50) * 4
    out = reduce_kernel(lambda t: nl.softmax(t, axis=2), (100, 3, 50))(x.numpy())
    torch.testing.assert_close(torch.from_numpy(out), torch.softmax(x, dim=2))
    out = reduce_kernel(lambda t: nl.softmax(t, axis=(1, 2)), (100, 3, 50))(x.numpy())
    ref = torch.softmax(x.reshape(100, -1), dim=1).reshape(100, 3, 50)
    torch.testing.assert_close(torch.from_numpy(out), ref)


def test_rms_norm_matches_torch_with_a_broadcast_weight():
    @nki.jit
    def k(x, w):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        weight = nl.load(nl.expand_dims(w, 0))  # [1, F], spread over the partitions
        nl.store(out, nl.rms_norm(nl.load(x), weight, axis=1, n=x.shape[1], epsilon=1e-5))
        return out

    x, w = torch.randn(96, 200), torch.randn(200)
    out = k(x.to("neuron"), w.to("neuron")).cpu()
    ref = torch.nn.functional.rms_norm(x, (200,), w, eps=1e-5)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


# ---- activation functions and ALU ops added to the simulator --------------------

@pytest.mark.parametrize("name,ref", [
    ("tan", np.tan), ("ceil", np.ceil), ("floor", np.floor), ("trunc", np.trunc),
    ("gelu_apprx_sigmoid", lambda x: x / (1 + np.exp(-1.702 * x))),
])
def test_new_activation_functions_match_numpy(name, ref):
    a = np.concatenate([np.linspace(-4.5, 4.5, 37), [-1.0, -0.5, 0.0, 0.5, 2.0]])
    a = a.astype(np.float32).reshape(1, -1)
    out = unary_kernel(getattr(nl, name))(a)
    np.testing.assert_allclose(out, ref(a.astype(np.float64)), rtol=2e-6, atol=2e-6)


def test_new_activation_functions_work_as_isa_operands():
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        nisa.activation(t, nl.floor, t, scale=2.0)  # floor(2x)
        nl.store(out, t)
        return out

    a = np.random.randn(8, 33).astype(np.float32)
    np.testing.assert_array_equal(k(a), np.floor(2 * a))


def test_abs_min_element_wise_scalar_and_as_a_reduction():
    @nki.jit
    def k(a, b):
        both = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        scalar = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        rows = nl.ndarray((a.shape[0], 1), a.dtype, buffer=nl.shared_hbm)
        x, y = nl.load(a), nl.load(b)
        nl.store(both, nl.abs_min(x, y))
        nl.store(scalar, nl.abs_min(x, -0.75))
        r = nl.ndarray((a.shape[0], 1), a.dtype)
        nisa.tensor_reduce(r, nl.abs_min, x, axis=1)
        nl.store(rows, r)
        return both, scalar, rows

    a, b = (np.random.randn(16, 24).astype(np.float32) for _ in range(2))
    both, scalar, rows = k(a, b)
    np.testing.assert_array_equal(both, np.minimum(np.abs(a), np.abs(b)))
    np.testing.assert_array_equal(scalar, np.minimum(np.abs(a), 0.75))
    np.testing.assert_array_equal(rows[:, 0], np.abs(a).min(axis=1))


def _torch_derivative(fn, x):
    t = torch.from_numpy(x.astype(np.float64)).requires_grad_()
    fn(t).sum().backward()
    return t.grad.numpy()


@pytest.mark.parametrize("name,fn", [
    ("gelu_dx", torch.nn.functional.gelu),
    ("gelu_apprx_sigmoid_dx", lambda t: t * torch.sigmoid(1.702 * t)),
    ("silu_dx", torch.nn.functional.silu),
    ("erf_dx", torch.erf),
])
def test_activation_derivatives_match_torch_autograd(name, fn):
    a = np.linspace(-6, 6, 97, dtype=np.float32).reshape(1, -1)
    out = unary_kernel(getattr(nl, name))(a)
    np.testing.assert_allclose(out, _torch_derivative(fn, a), rtol=1e-5, atol=2e-6)


def test_memory_regions_and_dtype_type():
    assert nl.MemoryRegion.sbuf is nl.sbuf and nl.MemoryRegion.psum is nl.psum
    assert nl.MemoryRegion.shared_hbm is nl.shared_hbm
    assert nl.MemoryRegion.private_hbm is nl.private_hbm
    assert all(isinstance(d, nl.DType) for d in (nl.float32, nl.bfloat16, nl.int8, nl.bool_))

    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.MemoryRegion.shared_hbm)
        acc = nl.ndarray(a.shape, nl.float32, buffer=nl.MemoryRegion.psum)
        nisa.tensor_copy(acc, nl.load(a))
        nl.store(out, acc)
        return out

    a = np.random.randn(4, 8).astype(np.float32)
    np.testing.assert_array_equal(k(a), a)


def test_mod_takes_the_sign_of_the_divisor_as_numpy_mod():
    @nki.jit
    def k(a, b):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        scalar = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a)
        nl.store(out, nl.mod(x, nl.load(b)))
        nl.store(scalar, nl.mod(x, -3.0))
        return out, scalar

    a = np.array([[-7.5, -3.0, 3.0, 7.25, 5.0, -6.0]], np.float32)
    b = np.array([[2.0, 2.0, -2.0, 2.0, -3.0, 4.0]], np.float32)
    out, scalar = k(a, b)
    np.testing.assert_array_equal(out, np.mod(a, b))
    np.testing.assert_array_equal(scalar, np.mod(a, -3.0))


def test_load_transpose2d_loads_the_transpose():
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape[::-1], nl.bfloat16, buffer=nl.shared_hbm)
        nl.store(out, nl.load_transpose2d(a, dtype=nl.bfloat16))
        return out

    a = torch.randn(300, 96)
    out = k(a.to("neuron"))
    assert out.dtype == torch.bfloat16
    assert torch.equal(out.cpu(), a.T.bfloat16())


@pytest.mark.parametrize("n,dtype", [(128, nl.float32), (5, nl.uint8), (33, nl.bfloat16)])
def test_shared_identity_matrix_is_the_identity(n, dtype):
    @nki.jit
    def k(a):
        out = nl.ndarray((n, n), dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.shared_identity_matrix(n, dtype=dtype))
        return out

    np.testing.assert_array_equal(k(np.zeros(1, np.float32)), np.eye(n))


def test_the_api_table_in_the_docs_is_current():
    from torchneuron.tools import gen_nki_table

    text = gen_nki_table.DOC.read_text()
    assert gen_nki_table.render(text) == text, "run python -m torchneuron.tools.gen_nki_table"
    names = {row[0] for row in gen_nki_table.rows()}
    assert {"nl.ds", "nl.broadcast_to", "nl.softmax", "nisa.nc_matmul", "nt.tensor"} <= names
    assert "nl.elementwise" not in names and "nisa.fail" not in names  # helpers stay out
