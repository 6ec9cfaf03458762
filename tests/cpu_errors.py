"""Comparing what neuron raises for bad input with what the CPU raises."""

DEV = "neuron"


def raised(fn, device):
    """(exception type, first line of the message) that fn(device) raises, or None."""
    try:
        fn(device)
    except Exception as e:  # noqa: BLE001 - the type is what is compared
        return type(e), str(e).splitlines()[0]
    return None


def assert_raises_like_cpu(fn, exact=True):
    """fn(device) raises on neuron as on the CPU: the same type and the same
    first line, or with exact=False the CPU's line inside neuron's (which may
    name the op in front)."""
    expected = raised(fn, "cpu")
    assert expected is not None, "the CPU accepts this input"
    got = raised(fn, DEV)
    assert got is not None, f"neuron accepts what the CPU refuses: {expected}"
    if exact:
        assert got == expected
    else:
        assert got[0] is expected[0] and expected[1] in got[1], (got, expected)
