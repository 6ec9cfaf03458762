"""Matrix products on neuron (mm, bmm, addmm, baddbmm, addbmm, addmv, mv, dot,
vdot, _addmm_activation; matmul and linear through them) against PyTorch CPU.

Tolerance. Neuron and the CPU (MKL) both accumulate in float32 (float64 for
float64) but in different orders, so results differ by rounding. Each result
is checked against the exact product (computed in float64 from the same
values) with the classic bound for a k-term dot product,
    |got - exact| <= (k + 2) * u_acc * (|alpha| |A| |B| + |beta| |C|) + u_out * |exact|
(u_acc the unit roundoff of the accumulation type, u_out that of the output
dtype: bfloat16/float16 results are rounded once from float32). The CPU's
own result must satisfy the same bound, which shows the bound is fair, except
where the CPU rounds intermediate results to a 16-bit dtype (addbmm adds the
batch's products one at a time, addmv rounds alpha * A x before adding): its
bound then gets one output rounding of the magnitude per such step. Integer
products are compared exactly. Every test asserts that no op fell back to
the CPU.
"""

import pytest
import torch

import torchneuron

FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
U_ACC = {torch.float64: 2.0**-53}
U_OUT = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}


@pytest.fixture(autouse=True)
def no_fallback():
    torchneuron.clear_op_tracking()
    yield
    assert torchneuron.get_fallback_ops() == {}, "ops fell back to the CPU"


def values(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    if not dtype.is_floating_point:
        return torch.randint(-4, 5, shape, generator=g).to(dtype)
    return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)


def laid_out(t, layout):
    """The same values as a contiguous, transposed-storage or sliced view."""
    if layout == "contiguous" or t.dim() < 2:
        if layout == "sliced" and t.dim() == 1:
            wide = torch.zeros(t.shape[0] * 2, dtype=t.dtype)
            wide[::2] = t
            return wide[::2]
        return t.clone()
    if layout == "transposed":
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    wide = torch.zeros(t.shape[:-1] + (t.shape[-1] * 2,), dtype=t.dtype)
    wide[..., ::2] = t
    return wide[..., ::2]


def on_neuron(t):
    """t's view (same strides) on neuron."""
    base = t._base if t._base is not None else t
    return base.to("neuron").as_strided(t.shape, t.stride(), t.storage_offset())


# Scalars last, so that the magnitude bound takes their absolute values.
def addmm(c, a, b, beta, alpha):
    return torch.addmm(c, a, b, beta=beta, alpha=alpha)


def baddbmm(c, a, b, beta, alpha):
    return torch.baddbmm(c, a, b, beta=beta, alpha=alpha)


def addbmm(c, a, b, beta, alpha):
    return torch.addbmm(c, a, b, beta=beta, alpha=alpha)


def addmv(c, a, b, beta, alpha):
    return torch.addmv(c, a, b, beta=beta, alpha=alpha)


def check_product(got, exact, magnitude, k, dtype, roundings=0):
    got = got.cpu().double()
    u_acc, u_out = U_ACC.get(dtype, 2.0**-24), U_OUT.get(dtype, 0.0)
    tol = (k + 2) * u_acc * magnitude + u_out * (exact.abs() + roundings * magnitude) + 1e-300
    err = (got - exact).abs()
    assert not torch.isnan(got).any() or torch.isnan(exact).any(), "unexpected NaN"
    assert bool((err <= tol).all()), f"max error {float(err.max())} over tolerance"


def check_against_cpu(fn, cpu_args, k, dtype, exact_fn=None, cpu_roundings=0):
    """Runs fn on CPU and neuron twins; compares both with the exact result."""
    neuron_args = [on_neuron(a) if isinstance(a, torch.Tensor) else a for a in cpu_args]
    got = fn(*neuron_args)
    if not dtype.is_floating_point:
        torch.testing.assert_close(got.cpu(), fn(*cpu_args), rtol=0, atol=0)
        return
    as64 = [a.double() if isinstance(a, torch.Tensor) else a for a in cpu_args]
    exact = (exact_fn or fn)(*as64)
    absargs = [a.double().abs() if isinstance(a, torch.Tensor) else abs(a) for a in cpu_args]
    magnitude = (exact_fn or fn)(*absargs)
    check_product(got, exact, magnitude, k, dtype)
    check_product(fn(*cpu_args), exact, magnitude, k, dtype, cpu_roundings)
    assert got.dtype == dtype and got.device.type == "neuron"


SHAPES = [(1, 1, 1), (7, 17, 1), (17, 7, 129), (129, 17, 7), (64, 65, 300), (3, 300, 40)]
LAYOUTS = ["contiguous", "transposed", "sliced"]


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_mm_matches_cpu_for_every_layout(dtype, m, n, k):
    for la in LAYOUTS:
        for lb in LAYOUTS:
            a = laid_out(values((m, k), dtype, 1), la)
            b = laid_out(values((k, n), dtype, 2), lb)
            check_against_cpu(torch.mm, [a, b], k, dtype)


# Training-shaped products as a linear layer's forward (x @ W^T), input
# gradient (dy @ W) and weight gradient (dy^T @ x) hand them over: long k
# (B packed and consumed in k chunks), few rows with many columns (units
# split columns), a bias added by addmm.
TRAINING = [("tn", 64, 1024, 2048), ("tn", 256, 96, 1500), ("nn", 300, 256, 1024), ("nt", 300, 1024, 256)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("layout,m,n,k", TRAINING, ids=str)
def test_training_shaped_products_match_cpu(dtype, layout, m, n, k):
    a = values((m, k), dtype, 1)
    b = values((k, n), dtype, 2)
    if layout == "tn":
        a = laid_out(a, "transposed")
    if layout == "nt":
        b = laid_out(b, "transposed")
    check_against_cpu(torch.mm, [a, b], k, dtype)
    bias = values((n,), dtype, 3)
    check_against_cpu(addmm, [bias, a, b, 1, 1], k, dtype)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8], ids=str)
def test_integer_products_are_exact(dtype):
    a, b = values((9, 13), dtype, 1), values((13, 5), dtype, 2)
    check_against_cpu(torch.mm, [a, b], 13, dtype)
    c = values((9, 5), dtype, 3)
    check_against_cpu(addmm, [c, a, b, 2, 3], 13, dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_addmm_broadcasts_bias_and_applies_alpha_beta(dtype):
    a, b = values((33, 70), dtype, 1), values((70, 20), dtype, 2)
    for bias_shape in [(20,), (33, 20), (1, 20), (33, 1), ()]:
        bias = values(bias_shape, dtype, 3)
        for beta, alpha in [(1, 1), (0.5, -2), (0, 1.5)]:
            check_against_cpu(addmm, [bias, laid_out(a, "transposed"), b, beta, alpha], 70, dtype)


def test_beta_zero_ignores_nan_in_input():
    a, b = values((5, 6), torch.float32, 1), values((6, 4), torch.float32, 2)
    nan = torch.full((5, 4), float("nan"))
    got = torch.addmm(nan.to("neuron"), a.to("neuron"), b.to("neuron"), beta=0)
    torch.testing.assert_close(got.cpu(), a @ b)
    out = nan.to("neuron")
    out.addmm_(a.to("neuron"), b.to("neuron"), beta=0)
    torch.testing.assert_close(out.cpu(), a @ b)
    v = torch.full((5,), float("nan"))
    got = torch.addmv(v.to("neuron"), a.to("neuron"), b[:, 0].contiguous().to("neuron"), beta=0)
    torch.testing.assert_close(got.cpu(), a @ b[:, 0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_out_and_inplace_forms(dtype):
    a, b, c = values((20, 30), dtype, 1), values((30, 10), dtype, 2), values((20, 10), dtype, 3)
    na, nb, nc = a.to("neuron"), b.to("neuron"), c.to("neuron")
    out = torch.empty(0, dtype=dtype, device="neuron")
    torch.mm(na, nb, out=out)
    check_product(out, a.double() @ b.double(), a.double().abs() @ b.double().abs(), 30, dtype)
    torch.addmm(nc, na, nb, beta=0.5, alpha=2, out=out)
    exact = 0.5 * c.double() + 2 * a.double() @ b.double()
    mag = 0.5 * c.double().abs() + 2 * a.double().abs() @ b.double().abs()
    check_product(out, exact, mag, 30, dtype)
    nc.addmm_(na, nb, beta=0.5, alpha=2)
    check_product(nc, exact, mag, 30, dtype)
    # out= may alias an input: the product goes through a temporary.
    sq = values((30, 30), dtype, 4)
    nsq = sq.to("neuron")
    torch.mm(nsq, nsq, out=nsq)
    check_product(nsq, sq.double() @ sq.double(), sq.double().abs() @ sq.double().abs(), 30, dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_bmm_baddbmm_addbmm(dtype):
    b1 = laid_out(values((4, 9, 70), dtype, 1), "transposed")
    b2 = laid_out(values((4, 70, 11), dtype, 2), "sliced")
    check_against_cpu(torch.bmm, [b1, b2], 70, dtype)
    c = values((4, 9, 11), dtype, 3)
    check_against_cpu(baddbmm, [c, b1, b2, 0.5, -1], 70, dtype)
    check_against_cpu(baddbmm, [values((11,), dtype, 4), b1, b2, 1, 1], 70, dtype)
    s = values((9, 11), dtype, 5)
    check_against_cpu(addbmm, [s, b1, b2, 2, 0.5], 280, dtype, cpu_roundings=4)
    ns = on_neuron(s)
    ns.addbmm_(on_neuron(b1), on_neuron(b2))
    exact = s.double() + torch.einsum("bik,bkj->ij", b1.double(), b2.double())
    mag = s.double().abs() + torch.einsum("bik,bkj->ij", b1.double().abs(), b2.double().abs())
    check_product(ns, exact, mag, 280, dtype)
    nc = on_neuron(c)
    nc.baddbmm_(on_neuron(b1), on_neuron(b2), alpha=2)
    check_product(nc, c.double() + 2 * (b1.double() @ b2.double()),
                  c.double().abs() + 2 * (b1.double().abs() @ b2.double().abs()), 70, dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_vector_products(dtype, layout):
    mat = laid_out(values((50, 300), dtype, 1), layout)
    vec = laid_out(values((300,), dtype, 2), "sliced" if layout == "sliced" else "contiguous")
    check_against_cpu(torch.mv, [mat, vec], 300, dtype)
    y = values((50,), dtype, 3)
    check_against_cpu(addmv, [y, mat, vec, -1, 0.5], 300, dtype, cpu_roundings=2)
    check_against_cpu(addmv, [values((1,), dtype, 4), mat, vec, 1, 1], 300, dtype, cpu_roundings=2)
    other = laid_out(values((300,), dtype, 5), layout)
    check_against_cpu(torch.dot, [vec, other], 300, dtype)
    check_against_cpu(torch.vdot, [vec, other], 300, dtype)
    ny = on_neuron(y)
    ny.addmv_(on_neuron(mat), on_neuron(vec), alpha=2)
    check_product(ny, y.double() + 2 * (mat.double() @ vec.double()),
                  y.double().abs() + 2 * (mat.double().abs() @ vec.double().abs()), 300, dtype)


@pytest.mark.parametrize("use_gelu", [False, True])
def test_addmm_activation(use_gelu):
    bias, a, b = values((8,), torch.float32, 1), values((5, 6), torch.float32, 2), values((6, 8), torch.float32, 3)
    got = torch._addmm_activation(bias.to("neuron"), a.to("neuron"), b.to("neuron"), use_gelu=use_gelu)
    torch.testing.assert_close(got.cpu(), torch._addmm_activation(bias, a, b, use_gelu=use_gelu))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_zero_sizes(dtype):
    c = values((4, 5), dtype, 1)
    empty_a, empty_b = torch.empty(4, 0, dtype=dtype), torch.empty(0, 5, dtype=dtype)
    got = torch.addmm(c.to("neuron"), empty_a.to("neuron"), empty_b.to("neuron"), beta=2)
    torch.testing.assert_close(got.cpu(), 2 * c)
    got = torch.mm(empty_a.to("neuron"), empty_b.to("neuron"))
    torch.testing.assert_close(got.cpu(), torch.zeros(4, 5, dtype=dtype))
    assert torch.mm(torch.empty(0, 3, device="neuron", dtype=dtype),
                    torch.empty(3, 5, device="neuron", dtype=dtype)).shape == (0, 5)
    got = torch.bmm(torch.empty(0, 2, 3, device="neuron", dtype=dtype),
                    torch.empty(0, 3, 4, device="neuron", dtype=dtype))
    assert got.shape == (0, 2, 4)
    assert float(torch.dot(torch.empty(0, device="neuron"), torch.empty(0, device="neuron"))) == 0


MATMUL_SHAPES = [
    ((5,), (5,)), ((5,), (5, 3)), ((4, 5), (5,)), ((4, 5), (5, 3)), ((2, 4, 5), (5,)),
    ((5,), (2, 5, 3)), ((2, 4, 5), (5, 3)), ((4, 5), (2, 5, 3)), ((2, 4, 5), (2, 5, 3)),
    ((3, 1, 4, 5), (2, 5, 6)), ((2, 3, 4, 5), (2, 3, 5, 6)), ((2, 3, 4, 5), (5,)),
]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES, ids=str)
def test_matmul_broadcasting_forward_and_backward(sa, sb):
    a, b = values(sa, torch.float32, 1), values(sb, torch.float32, 2)
    ca, cb = a.clone().requires_grad_(), b.clone().requires_grad_()
    na, nb = a.to("neuron").requires_grad_(), b.to("neuron").requires_grad_()
    cy, ny = torch.matmul(ca, cb), torch.matmul(na, nb)
    torch.testing.assert_close(ny.cpu(), cy, rtol=1e-5, atol=1e-5)
    g = values(cy.shape, torch.float32, 3)
    cy.backward(g)
    ny.backward(g.to("neuron"))
    torch.testing.assert_close(na.grad.cpu(), ca.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(nb.grad.cpu(), cb.grad, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(6, 16), (3, 7, 16), (2, 3, 4, 16)], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_linear_forward_and_backward(bias, shape, dtype):
    torch.manual_seed(0)
    lin = torch.nn.Linear(16, 9, bias=bias).to(dtype)
    nlin = torch.nn.Linear(16, 9, bias=bias).to(dtype).to("neuron")
    nlin.load_state_dict(lin.state_dict())
    x = values(shape, dtype, 1)
    cx, nx = x.clone().requires_grad_(), x.to("neuron").requires_grad_()
    cy, ny = lin(cx), nlin(nx)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1.6e-2, atol=1e-2)
    torch.testing.assert_close(ny.cpu(), cy, **tol)
    g = values(cy.shape, dtype, 2)
    cy.backward(g)
    ny.backward(g.to("neuron"))
    torch.testing.assert_close(nx.grad.cpu(), cx.grad, **tol)
    torch.testing.assert_close(nlin.weight.grad.cpu(), lin.weight.grad, **tol)
    if bias:
        torch.testing.assert_close(nlin.bias.grad.cpu(), lin.bias.grad, **tol)


ERRORS = [
    ("mm", lambda d: torch.mm(torch.ones(2, 3, device=d), torch.ones(4, 5, device=d))),
    ("bmm", lambda d: torch.bmm(torch.ones(2, 2, 3, device=d), torch.ones(3, 3, 5, device=d))),
    ("addmm", lambda d: torch.addmm(torch.ones(3, device=d), torch.ones(2, 3, device=d),
                                    torch.ones(3, 5, device=d))),
    ("addbmm", lambda d: torch.addbmm(torch.ones(2, 5, device=d), torch.ones(2, 2, 3, device=d),
                                      torch.ones(2, 4, 5, device=d))),
    ("mv", lambda d: torch.mv(torch.ones(2, 3, device=d), torch.ones(4, device=d))),
    ("dot", lambda d: torch.dot(torch.ones(3, device=d), torch.ones(4, device=d))),
    ("mm", lambda d: torch.mm(torch.ones(2, 3, device=d), torch.ones(3, 5, device=d, dtype=torch.float64))),
]


@pytest.mark.parametrize("name,call", ERRORS, ids=[f"{n}{i}" for i, (n, _) in enumerate(ERRORS)])
def test_bad_shapes_raise_errors_naming_the_op(name, call):
    with pytest.raises(Exception) as cpu_error:
        call("cpu")
    with pytest.raises(type(cpu_error.value), match=name):
        call("neuron")


def test_out_with_wrong_dtype_is_rejected():
    a = torch.ones(2, 3, device="neuron")
    with pytest.raises(RuntimeError, match="dtype"):
        torch.mm(a, a.t(), out=torch.empty(2, 2, device="neuron", dtype=torch.float64))


def test_out_with_internal_overlap_is_rejected():
    a = torch.ones(2, 3, device="neuron")
    out = torch.empty(1, 2, device="neuron").expand(2, 2)
    with pytest.raises(RuntimeError, match="memory location"):
        torch.mm(a, a.t(), out=out)
