"""nl.fori_loop and nl.while_loop: compiled loops, which run on the device.

The NKI 0.7 reference (nki.language.fori_loop / while_loop, "NKI Loops")
gives both as loops the compiler turns into engine-sequencer branches on
32-bit registers, so their bounds and condition may be values that exist
only while the kernel runs. The body is traced once, as Python calls
``body_fun`` once, and the simulator runs it as often as the loop says
(NRT_NC_BRANCH, runtime/src/nc/branch.c):

* ``fori_loop(lower, upper, body_fun, step=1)``: ``body_fun(i)`` for i in
  range(lower, upper, step). lower / upper are ints, VirtualRegisters or
  NkiScalars (32-bit: int32 / uint32 words); step a positive int. i is an
  NkiScalar, or a VirtualRegister when a bound is one, passed by value.
* ``while_loop(init, body_fun)``: while the condition register is nonzero
  (checked first), ``r = body_fun(r)``; init and the body's result are
  VirtualRegisters (or NkiScalars) of a 32-bit or narrower integer.

Loop state other than i / r lives in SBUF or HBM, as the reference says. A
tile allocated in the body is fresh each iteration; one allocated before
the loop keeps its data from one iteration to the next. Rules: ``loop``
(step, the body's result, a collective in the body), ``loop_operand`` (a
bound or condition that is not a 32-bit integer), and at run time
``loop_limit`` (more than 2**22 iterations in one run: a while_loop whose
condition never clears fails instead of hanging).
"""

import numbers

from torchneuron.nki import trace
from torchneuron.nki.isa_register import VirtualRegister
from torchneuron.nki.isa_scalar import NkiScalar
from torchneuron.nki.ops import alu_code
from torchneuron.nki.tensor import NkiTensor
from torchneuron.nki.trace import fail

_INT32 = range(-2**31, 2**31)


def _word_of(value, what, name):
    """(constant, word): an int known now, or the [1, 1] SBUF word holding a
    value that exists only while the kernel runs."""
    from torchneuron.nki import language as nl

    if isinstance(value, VirtualRegister):
        if value.constant is not None:
            return value.constant, None
        if value.word is None:
            fail(f"{what}: the register was never given a value", "register_unset", name)
        word = value.word
    elif isinstance(value, NkiScalar):
        if value.dtype is not nl.int32:
            fail(f"{what} must be 32-bit: the loop compiles into a compare-and-branch that has "
                 f"no {value.dtype} form", "loop_operand", name)
        word = value._word(name)
    elif isinstance(value, numbers.Integral) and not isinstance(value, bool):
        if int(value) not in _INT32:
            fail(f"{what} {value} does not fit 32 bits", "loop_operand", name)
        return int(value), None
    else:
        fail(f"{what} is an int, a VirtualRegister or an NkiScalar, got {type(value).__name__}",
             "loop_operand", name)
    if not isinstance(word, NkiTensor) or word.dtype.itemsize > 4 or \
            word.dtype.name not in ("int32", "uint32", "int16", "uint16", "int8", "uint8"):
        fail(f"{what} must be an integer of at most 32 bits (the compare-and-branch has no other "
             f"form), got {word.dtype}", "loop_operand", name)
    return None, word


def _set_word(dst, constant, word, name):
    """dst (an int32 word) = the value, exactly."""
    from torchneuron.nki import isa as nisa
    from torchneuron.nki.isa import _emit, _rec

    if word is None:
        nisa.memset(dst, constant)
    elif word.dtype.name in ("int32", "uint32"):  # the bits, as the 32-bit register holds them
        src = word.view(dst.dtype)
        _emit(name, trace.SCALAR_INT, trace.VECTOR_ENGINE, dst,
              [_rec(dst, name), _rec(src, name), trace.NO_AP], func=(alu_code("add"),), imm=(0,))
    else:  # a narrower integer widens exactly
        nisa.tensor_copy(dst, word)


def _branch(tracer, name, word=None, op="equal", against=0, other=None, target=0, trips=-1):
    aps = [trace.NO_AP, trace.NO_AP] if word is None else \
        [word.record(name=name)[0], trace.NO_AP if other is None else other.record(name=name)[0]]
    tracer.emit(name, trace.BRANCH, trace.VECTOR_ENGINE, aps, func=(alu_code(op),),
                imm=(target, against, trips))
    return len(tracer.instructions) - 1


def _close(tracer, name, head, calls):
    """The loop's back branch; the head's exit lands after it."""
    if len(tracer.collective_calls) != calls:
        fail("a collective inside a compiled loop is not simulated (the cores meet at "
             "collective calls in program order)", "loop", name)
    _branch(tracer, name, target=head)
    inst = tracer.instructions[head]
    record = list(inst.record)
    record[7] = (float(len(tracer.instructions)),) + tuple(record[7][1:])
    inst.record = tuple(record)


def fori_loop(lower, upper, body_fun, step=1):
    """body_fun(i) for i from lower to upper (exclusive) by step, run on the
    device; the bounds may be registers or scalars read while it runs."""
    name = "nki.language.fori_loop"
    from torchneuron.nki import language as nl

    if isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 1 or \
            step not in _INT32:
        fail(f"step must be a compile-time positive int, got {step!r}", "loop", name)
    if not callable(body_fun):
        fail(f"body_fun must be callable, got {type(body_fun).__name__}", "loop", name)
    lo, lo_word = _word_of(lower, "lower", name)
    hi, hi_word = _word_of(upper, "upper", name)
    tracer = trace.current()
    i = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    _set_word(i, lo, lo_word, name)
    bound = None
    if hi_word is not None:
        bound = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf) \
            if hi_word.dtype.name not in ("int32", "uint32") else hi_word
        if bound is not hi_word:
            _set_word(bound, None, hi_word, name)
    trips = max(0, -(-(hi - lo) // int(step))) if lo_word is None and hi_word is None else -1
    head = _branch(tracer, name, i, "greater_equal", hi or 0, bound, trips=trips)
    calls = len(tracer.collective_calls)
    if isinstance(lower, VirtualRegister) or isinstance(upper, VirtualRegister):
        value = VirtualRegister()
        value.word = i
    else:
        value = NkiScalar(i)
    body_fun(value)
    from torchneuron.nki.isa import _emit, _rec

    _emit(name, trace.SCALAR_INT, trace.VECTOR_ENGINE, i,
          [_rec(i, name), _rec(i, name), trace.NO_AP], func=(alu_code("add"),), imm=(int(step),))
    _close(tracer, name, head, calls)


def while_loop(init, body_fun):
    """r = init; while r != 0: r = body_fun(r), run on the device."""
    name = "nki.language.while_loop"
    from torchneuron.nki import language as nl

    if not callable(body_fun):
        fail(f"body_fun must be callable, got {type(body_fun).__name__}", "loop", name)
    if not isinstance(init, (VirtualRegister, NkiScalar)):
        fail(f"init is the condition register (a VirtualRegister), got {type(init).__name__}",
             "loop_operand", name)
    constant, word = _word_of(init, "init", name)
    tracer = trace.current()
    cond = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    _set_word(cond, constant, word, name)
    head = _branch(tracer, name, cond, "equal", 0, trips=0 if constant == 0 else -1)
    calls = len(tracer.collective_calls)
    r = VirtualRegister()
    r.word = cond
    result = body_fun(r)
    if not isinstance(result, (VirtualRegister, NkiScalar)):
        fail(f"body_fun returns the next condition register, got {type(result).__name__}",
             "loop", name)
    constant, word = _word_of(result, "the body's result", name)
    _set_word(cond, constant, word, name)
    _close(tracer, name, head, calls)
