"""Stream regions inside a compiled graph.

Dynamo records ``with torch.neuron.stream(s):`` as a stream annotation on
the nodes inside (``node.meta["custom"]["stream"]``, an index into Dynamo's
table of external objects) and ``wait_stream`` / ``record_event`` /
``wait_event`` as ``torch.ops.streams`` calls, which AOTAutograd wraps in
``control_deps`` so that they keep their place among the tensor ops.

A compiled segment is one launch on the calling stream, so the work of a
stream region runs there, in program order. What must hold is every order
the user's streams promised, with work outside the graph as well:

- before the graph, the calling stream waits for every stream the graph
  names (work queued there earlier is done before the region reads it) and
  for every event the graph waits on;
- after the graph, every named stream waits for the calling stream (work
  queued there later sees what the region wrote), and every event the
  graph records is recorded on its stream at that point.

This is never weaker than the eager order, only coarser: nothing inside
the graph overlaps. The ordering ops themselves lower to nothing
(``control_deps`` passes its values through), so a stream region does not
split the graph into segments. Host synchronisations
(``synchronize_device`` / ``_stream`` / ``_event``) have no lowering and
keep their place as eager steps.
"""

import torch

from torchneuron.compiler.ir import Unsupported

# The ordering ops, by name: torch.ops.streams is defined when Dynamo's
# stream support is first imported, which may be after this module.
ORDERING_OPS = ("wait_stream",    # (waiting_stream, waited_on_stream)
                "record_event",   # (event, stream)
                "wait_event",     # (event, stream)
                "record_stream",  # (tensor, stream): the caching allocator's concern
                "sync_dealloc")   # (event, src_stream, tensor)


def ordering_op(target):
    """The name of a torch.ops.streams ordering op, else None."""
    if not isinstance(target, torch._ops.OpOverload) or target.namespace != "streams":
        return None
    name = target._schema.name.split("::", 1)[1]
    return name if name in ORDERING_OPS else None


def is_control_deps(target):
    """AOTAutograd's control_deps operator (made when Inductor's pass module
    is first imported, so matched by name rather than imported here)."""
    return isinstance(target, torch._ops.HigherOrderOperator) and target.name() == "control_deps"


def _subgraph_of(node):
    """The GraphModule a control_deps node runs."""
    sub = node.args[1]
    if isinstance(sub, torch.fx.Node) and sub.op == "get_attr":
        owner = node.graph.owning_module
        for part in sub.target.split("."):
            owner = getattr(owner, part, None)
        sub = owner
    if not isinstance(sub, torch.fx.GraphModule):
        raise Unsupported("control_deps without a subgraph module")
    return sub


def _ordering_calls(node):
    """The ordering ops a node stands for: itself, or a control_deps
    subgraph made of nothing else."""
    if node.op != "call_function":
        return []
    if ordering_op(node.target):
        return [node]
    if is_control_deps(node.target):
        calls = []
        for n in _subgraph_of(node).graph.nodes:
            if n.op in ("placeholder", "output"):
                continue
            if n.op != "call_function" or not ordering_op(n.target):
                raise Unsupported(f"control_deps around {n.target}, which is not a stream-ordering op")
            calls.append(n)
        return calls
    return []


class StreamActions:
    """What the runner does around one call of a graph (see the module
    docstring); empty for graphs without streams."""

    def __init__(self, gm):
        streams, events_waited, events_recorded = [], [], []
        recorded_so_far = set()

        def add(lst, index):
            if isinstance(index, int) and index not in lst:
                lst.append(index)

        for n in gm.graph.nodes:
            custom = n.meta.get("custom") or {}
            add(streams, custom.get("stream"))
            try:
                calls = _ordering_calls(n)
            except Unsupported:
                calls = []  # runs eagerly, doing its own ordering
            for c in calls:
                a, op = c.args, ordering_op(c.target)
                if op == "wait_stream":
                    add(streams, a[0])
                    add(streams, a[1])
                elif op == "record_event":
                    add(streams, a[1])
                    if (a[0], a[1]) not in events_recorded:
                        events_recorded.append((a[0], a[1]))
                    recorded_so_far.add(a[0])
                elif op == "wait_event":
                    add(streams, a[1])
                    if a[0] not in recorded_so_far:  # recorded outside: wait before
                        add(events_waited, a[0])
                elif op == "sync_dealloc":
                    add(streams, a[1])
                    if a[0] not in recorded_so_far:
                        add(events_waited, a[0])
                elif op == "record_stream":
                    add(streams, a[1])
        self.streams = streams
        self.events_waited = events_waited
        self.events_recorded = events_recorded

    def __bool__(self):
        return bool(self.streams or self.events_waited or self.events_recorded)

    @staticmethod
    def _object(index):
        from torch._dynamo.graph_bytecode_inputs import get_external_object_by_index
        return get_external_object_by_index(index)

    def before(self, device):
        current = torch.neuron.current_stream(device)
        for i in self.streams:
            s = self._object(i)
            if s != current:
                current.wait_stream(s)
        for i in self.events_waited:
            current.wait_event(self._object(i))
        return current

    def after(self, current):
        for i in self.streams:
            s = self._object(i)
            if s != current:
                s.wait_stream(current)
        for e, s in self.events_recorded:
            self._object(e).record(self._object(s))


def lower_ordering(ctx, node):
    """An ordering op: nothing inside the launch (the runner orders the
    streams around it); control_deps passes its values through."""
    _ordering_calls(node)  # raises Unsupported for anything else
    if ordering_op(node.target):
        return None
    return (None, *(ctx.value(a) for a in node.args[2:]))


