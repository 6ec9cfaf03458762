"""Results PyTorch leaves partly unspecified, checked by what is specified.

Which index a sort, top-k, k-th value, median or mode returns among equal
values is not specified (unless `stable=True`), and `unique(sorted=False)`
returns its values in any order. When neuron's result differs from the
CPU's for such an op, it is still correct if it has the same values and its
indices point at them (and, for sort/argsort/topk, are distinct). Anything
else is a mismatch.
"""

from __future__ import annotations

import torch

TIE_OPS = {"sort", "argsort", "topk", "kthvalue", "median", "nanmedian", "mode"}


def _arg(sample, pos: int, name: str, default):
    if len(sample.args) > pos:
        return sample.args[pos]
    return sample.kwargs.get(name, default)


def _dim_keepdim(name: str, sample):
    if name in ("topk",):
        return _arg(sample, 1, "dim", -1), True
    if name == "kthvalue":
        return _arg(sample, 1, "dim", -1), _arg(sample, 2, "keepdim", False)
    if name in ("sort", "argsort"):
        return _arg(sample, 0, "dim", -1), True
    if name in ("median", "nanmedian"):
        return _arg(sample, 0, "dim", None), _arg(sample, 1, "keepdim", False)
    if name == "mode":
        return _arg(sample, 0, "dim", -1), _arg(sample, 1, "keepdim", False)
    return None, False


def applies(op_name: str, sample) -> bool:
    if op_name in ("sort", "argsort"):
        return not sample.kwargs.get("stable", False)
    if op_name == "unique":
        return not sample.kwargs.get("sorted", True) and sample.kwargs.get("dim") is None
    return op_name in TIE_OPS


def _close(a, b, tol) -> str | None:
    kwargs = {} if tol is None or not a.is_floating_point() else {"atol": tol[0], "rtol": tol[1]}
    try:
        torch.testing.assert_close(a, b, equal_nan=True, check_device=False, check_stride=False,
                                   **kwargs)
    except AssertionError as exc:
        return " ".join(str(exc).split())[:300]
    return None


def _points_at(x, dim, keepdim, indices, values) -> str | None:
    """indices select `values` from x along dim."""
    if x.dim() == 0:
        return None if bool((indices == 0).all()) else "index of a 0-d input is not 0"
    if not keepdim:
        indices, values = indices.unsqueeze(dim), values.unsqueeze(dim)
    if indices.numel() and (indices.min() < 0 or indices.max() >= x.shape[dim]):
        return "indices out of range"
    picked = x.gather(dim, indices)
    err = _close(picked, values, None)
    return f"indices do not point at the values: {err}" if err else None


def _distinct(indices, dim) -> str | None:
    if indices.dim() == 0 or indices.shape[dim] < 2:
        return None
    s = indices.sort(dim).values
    n = s.shape[dim]
    if bool((s.narrow(dim, 1, n - 1) == s.narrow(dim, 0, n - 1)).any()):
        return "repeated indices"
    return None


def check_ties(op_name: str, sample, actual, expected, tol) -> str | None:
    """None if `actual` is as valid as `expected` (both on the CPU)."""
    x = sample.input
    dim, keepdim = _dim_keepdim(op_name, sample)
    if op_name == "argsort":
        if x.dim() == 0:
            return None if bool((actual == 0).all()) else "argsort of a 0-d input is not 0"
        err = _distinct(actual, dim) or _close(x.gather(dim, actual), x.gather(dim, expected), None)
        return f"argsort: {err}" if err else None
    if not isinstance(actual, tuple) or len(actual) != 2:
        return _close(actual, expected, tol)  # e.g. median without dim: a value only
    values, indices = actual
    err = _close(values, expected[0], tol)
    if err:
        return f"values differ: {err}"
    err = _points_at(x, dim, keepdim, indices, values)
    if not err and op_name in ("sort", "topk"):
        err = _distinct(indices, dim)
    return f"{op_name}: {err}" if err else None


def check_unique_unsorted(sample, actual, expected) -> str | None:
    """unique(sorted=False): same set of values; inverse and counts consistent."""
    a = actual if isinstance(actual, tuple) else (actual,)
    e = expected if isinstance(expected, tuple) else (expected,)
    values, ref = a[0], e[0]
    order, ref_order = values.argsort(), ref.argsort()
    err = _close(values[order], ref[ref_order], None)
    if err:
        return f"unique values differ: {err}"
    rest = list(zip(a[1:], e[1:]))
    want_inverse = sample.kwargs.get("return_inverse", False)
    if want_inverse and rest:
        inverse, _ = rest.pop(0)
        err = _close(values[inverse], sample.input, None)
        if err:
            return f"unique inverse does not rebuild the input: {err}"
    if rest:  # counts, in the order of the values
        counts, ref_counts = rest.pop(0)
        err = _close(counts[order], ref_counts[ref_order], None)
        if err:
            return f"unique counts differ: {err}"
    return None


def check(op_name: str, sample, actual, expected, tol) -> str | None:
    if op_name == "unique":
        return check_unique_unsorted(sample, actual, expected)
    return check_ties(op_name, sample, actual, expected, tol)
