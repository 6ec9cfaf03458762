"""The exception a kernel author sees: rule, instruction and kernel line."""


class NkiError(ValueError):
    """A kernel broke a rule of the NeuronCore (or of NKI).

    ``rule`` is the rule's short name (``"gemm_moving_fmax"``,
    ``"sbuf_capacity"``, ...; docs/nki.md lists them), ``instruction`` the
    ``nki.isa`` / ``nki.language`` call, ``filename`` and ``line`` where the
    kernel made it.
    """

    def __init__(self, message, rule=None, instruction=None, filename=None, line=None):
        where = f"{filename}:{line}: " if filename else ""
        what = f"{instruction}: " if instruction else ""
        tag = f"[{rule}] " if rule and not message.startswith(f"[{rule}]") else ""
        super().__init__(f"{where}{what}{tag}{message}")
        self.rule = rule
        self.instruction = instruction
        self.filename = filename
        self.line = line


class NkiValidationError(NkiError):
    """The ISA reference's name for a broken rule: every rule error the
    tracer and the simulator raise is one (and so also an NkiError)."""
