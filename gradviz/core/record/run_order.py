"""The graph a watch recording stores once: the module tree, the order the modules ran in
during the first recorded step, and the data flow between them as autograd recorded it.

Every module's call (wrapped, or hooked: see ``core.module_calls``), for that one step
only, notes which autograd node made each module's output. When the step is recorded,
walking autograd's graph back from each of those nodes to the nearest one another module
made gives the module-level data flow: real edges (a skip connection is an edge into the
block whose own ``add`` consumed it), never the run order guessed into a chain. A
container whose output its own code made (the residual ``add`` of a block) gets an
operation node named after that operation.

Plain JSON in the recording's metadata under ``graph``::

    {"version": 1, "modules": [[path, type], ...],   # named_modules order, "" the model
     "order": [path, ...],                            # first call of each module, in order
     "ops": [[path, op name], ...],                   # containers' own output operations
     "shapes": [[path, [d, ...]], ...],               # each module's first output's shape
     "edges": [[from id, to id], ...]}                # ModelGraph node ids (see model.py)

Ids: ``m:<path>`` a module, ``o:<path>`` a container's own operation, ``i:input`` the
model's input (tensors reaching a module without an autograd history), ``x:loss`` the
logged loss.
"""

from __future__ import annotations

from torch import nn

from gradviz.core.common.module_calls import call_tensors, note_each_call
from gradviz.core.graph.model import INPUT_ID, LOSS_ID, module_id, op_id

VERSION = 1
#: Past this many modules only the tree is stored (a hook per module costs every forward
#: of the first step, and the page collapses such graphs anyway).
MAX_HOOKED_MODULES = 5_000
#: Autograd nodes one walk may visit before it stops (a hostile or huge graph never hangs
#: the user's training step).
MAX_WALK = 100_000


def op_name(grad_fn) -> str:
    """``AddBackward0`` -> ``add``, ``AddmmBackward0`` -> ``addmm``."""
    name = grad_fn.name()
    cut = name.find("Backward")
    return (name[:cut] if cut > 0 else name).lower()


class RunOrder:
    """Watches ``module``'s forwards until ``finish(loss)``, which removes every hook and
    returns the plain-data graph (call it once, when the first step is recorded)."""

    def __init__(self, module: nn.Module) -> None:
        self._named = list(module.named_modules())
        self._leaves = {path for path, sub in self._named if next(sub.children(), None) is None}
        self._order: dict[str, None] = {}
        self._producer: dict = {}  # autograd node -> node id of the module that made it
        self._from_input: dict[str, None] = {}
        self._shapes: dict[str, list[int]] = {}
        self._handles = []
        if len(self._named) > MAX_HOOKED_MODULES:
            return
        for path, sub in self._named:
            # A wrapped call, not hooks where it can be: a copy of the model made before
            # the first step is recorded (an EMA copy) then carries nothing of this.
            self._handles += note_each_call(sub, self._post_hook(path), self._pre_hook(path))

    def _pre_hook(self, path: str):
        def hook(_module, args) -> None:
            self._order.setdefault(path, None)
            if path in self._leaves and any(
                getattr(a, "grad_fn", 1) is None and getattr(a, "is_floating_point", bool)()
                for a in call_tensors(args)
            ):
                self._from_input.setdefault(path, None)

        return hook

    def _post_hook(self, path: str):
        def hook(_module, _args, output) -> None:
            own = module_id(path) if path in self._leaves else op_id(path)
            first = next(call_tensors(output), None)
            if first is not None and path not in self._shapes:
                self._shapes[path] = [int(d) for d in first.shape]
            for t in call_tensors(output):
                node = getattr(t, "grad_fn", None)
                if node is not None and node not in self._producer:
                    self._producer[node] = own  # children hook first: the innermost wins

        return hook

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def finish(self, loss=None) -> dict:
        """The graph of what ran (see the module docstring); the hooks are gone after."""
        self.remove()
        edges: dict[tuple[str, str], None] = {}
        for path in self._from_input:
            edges[(INPUT_ID, module_id(path))] = None
        ops: dict[str, str] = {}
        for node, target in self._producer.items():
            if target.startswith("o:"):
                ops[target[2:]] = op_name(node)
            for source in self._sources(node.next_functions, target):
                edges[(source, target)] = None
        loss_node = getattr(loss, "grad_fn", None)
        if loss_node is not None:
            start = ((loss_node, 0),)
            for source in self._sources(start, LOSS_ID):
                edges[(source, LOSS_ID)] = None
        self._producer = {}  # autograd's nodes are let go of with the step
        return {
            "version": VERSION,
            "modules": [[path, type(sub).__name__] for path, sub in self._named],
            "order": list(self._order),
            "ops": [[path, name] for path, name in ops.items()],
            "shapes": [[path, shape] for path, shape in self._shapes.items()],
            "edges": [list(edge) for edge in edges],
        }

    def _sources(self, start, target: str) -> list[str]:
        """Ids of the nearest module-made nodes upstream of ``start`` (autograd's
        ``next_functions`` pairs), other than ``target``'s own."""
        found: dict[str, None] = {}
        stack = [node for node, _ in start if node is not None]
        seen = set()
        while stack and len(seen) < MAX_WALK:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            owner = self._producer.get(node)
            if owner is not None and owner != target:
                found[owner] = None
                continue
            stack.extend(n for n, _ in node.next_functions if n is not None)
        return list(found)
