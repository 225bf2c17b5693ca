"""Running a training step's forwards and backward again, to find where its NaN started.

``watch(origin=True)`` on the CPU in one process names the module whose forward or backward
first made a step's NaN or Inf by noting every module's output at every step
(``modules.ModuleOrigin``): some 2.5% of a small transformer's step, spent on the rare step
that goes bad. Where the loop allows it, a step instead keeps only what it takes to run it
again (``StepCalls``): each call of the model (its arguments, the CPU generator's state, its
outputs, detached, and the gradient that reached them, taken by a pre-hook on their
autograd node) and the parameters' version counters as its first forward started. On a
step whose gradients or loss turn out non-finite, the forwards run again as they ran with
every module noted, then the backward from their outputs with those gradients, and the
notes name the module, as they would have at the step itself.

A replay is trusted only where it is the same computation:

- the parameters are the ones the forwards used (their version counters: a loop that calls
  ``rec.log`` after the optimizer's step has changed them, and is not replayed);
- the forward changed nothing of the model's own plain state on the calls looked at before
  the loop was trusted (a call counter, a cache, a generator of its own: ``stateful``);
- the replayed outputs equal the kept ones bit for bit, NaN payloads included (a forward
  that draws from a generator that is not the model's, or whose output the caller changed in
  place, gives other outputs), and a bad step runs again bad (one that runs again clean was
  not the same step, or its NaN came from outside the model). The CPU generator's state and
  the CPU autocast each call started under are kept and set again.

Where it is not, ``replay`` raises ``NotReplayable``. The replay leaves no trace: the
generator's state and the buffers (BatchNorm's running statistics) are put back, and the
gradients are taken by ``torch.autograd.grad`` (no ``.grad`` is written, no hook on a
gradient's accumulation runs). The model's own forward hooks do run again.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Iterator
from itertools import chain

import torch
from torch import nn

from gradviz.core.common.module_calls import call_tensors, note_each_call

#: Calls of the model kept through a step; a step with more (the model called in a loop
#: between two ``rec.log``) is not replayed.
MAX_CALLS = 16
#: Bytes of earlier calls' arguments and outputs a step may hold (the last call's its caller
#: holds anyway); a step holding more is not replayed.
MAX_HELD_BYTES = 1 << 28
#: Parameters whose version counters a trusted loop's steps keep (see ``StepCalls.trust``).
WATCHED_PARAMS = 8


class NotReplayable(Exception):
    """The step cannot be run again as it ran (the message says why)."""


class _Call:
    """One call of the model: what it was given, the CPU generator's state and the CPU
    autocast (None: off) as it started, its outputs (detached) and the gradient that reached
    each of them (None: none did)."""

    __slots__ = ("args", "kwargs", "rng", "autocast", "outputs", "grads")

    def __init__(self, args: tuple, kwargs: dict, rng: torch.Tensor, autocast) -> None:
        self.args, self.kwargs, self.rng, self.autocast = args, kwargs, rng, autocast
        self.outputs: list[torch.Tensor] = []
        self.grads: list[torch.Tensor | None] = []


_VERSION = operator.attrgetter("_version")


def _version_sum(params: list[torch.Tensor]) -> int:
    """The parameters' version counters, summed: they only grow, so the sum changes exactly
    where one of them does (one number to keep per step)."""
    return sum(map(_VERSION, params))


class StepCalls:
    """The calls of ``model`` in the step under way (see the module)."""

    def __init__(self, model: nn.Module) -> None:
        self._model = model
        self._params = list(model.parameters())
        # The parameters whose version counters tell a change between a step's forward and
        # ``rec.log``: all of them until the loop is trusted (``trust``), then a few.
        self._watched = self._params
        self.calls: list[_Call] = []
        self._versions: int | None = None  # theirs (summed) as the step's first call started
        self._overflow = False
        self._paused = False
        self._open: tuple | None = None  # a call under way: see ``_Call``
        #: Whether a call of the model was seen to change the model's own plain state (a
        #: call counter, a cache, its own generator): such a forward is not the same when
        #: run again. Looked at on the calls before the loop is trusted (``trust``).
        self.stateful = False
        self._state_before: list | None = None
        self._looks = True
        self._handles = note_each_call(model, self._on_output, self._on_input, with_kwargs=True)

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self.clear()

    def clear(self) -> None:
        """End the step: its calls are let go."""
        self.calls, self._versions, self._overflow, self._open = [], None, False, None

    def trust(self) -> None:
        """The loop was seen to call ``rec.log`` before changing the parameters (every one of
        them was looked at): from now on a few trained ones, spread over the model, tell a
        change (a loop that starts logging after the optimizer's step changes them all),
        and cost less at every step."""
        self._looks = False
        trained = [p for p in self._params if p.requires_grad] or self._params
        step = max(1, len(trained) // WATCHED_PARAMS)
        self._watched = trained[::step][:WATCHED_PARAMS]

    def _on_input(self, _module, args, kwargs) -> None:
        self._open = None
        if self._paused or not torch.is_grad_enabled():
            return  # an evaluation under no_grad: no gradient will come of it
        if self._versions is None:
            self._versions = _version_sum(self._watched)
        if self._overflow or (self.calls and self._too_many()):
            self._overflow, self.calls = True, []  # what was held goes now
            return
        self._open = (args, kwargs, torch.get_rng_state(), _autocast_now())
        if self._looks:
            self._state_before = _plain_state(self._model)

    def _too_many(self) -> bool:
        """Whether the calls held so far in this step are as many, or as large, as a step
        may hold (a loop calling the model with gradients on between two ``rec.log``, an
        evaluation that forgot ``no_grad``, would otherwise be held whole)."""
        if len(self.calls) >= MAX_CALLS:
            return True
        held = sum(t.nbytes for c in self.calls for t in _held(c))
        return held > MAX_HELD_BYTES

    def _on_output(self, _module, _args, output) -> None:
        opened, self._open = self._open, None
        if opened is None:
            return
        if self._looks and self._state_before != _plain_state(self._model):
            self.stateful = True
        call = _Call(*opened)
        outputs, grads = call.outputs, call.grads
        for k, t in enumerate((output,) if type(output) is torch.Tensor else call_tensors(output)):
            outputs.append(t.detach())
            grads.append(None)
            node = t.grad_fn
            if node is not None:
                node.register_prehook(_GradientOf(grads, k, t.output_nr))
        self.calls.append(call)

    @property
    def called(self) -> bool:
        """Whether the model was called with gradients on in the step."""
        return bool(self.calls) or self._overflow

    def why_not(self) -> str | None:
        """Why this step cannot be replayed, or None where it can be tried."""
        if self._overflow:
            return "the model was called too often in the step, or with too much to keep"
        if not self.calls:
            return "the model was not called with gradients on in the step"
        if self._versions != _version_sum(self._watched):
            return "the parameters changed after the forward (rec.log after the optimizer's step)"
        return None

    def replay(self, origin_of) -> dict | None:
        """Run the step's calls again under ``origin_of(model)`` (a ``ModuleOrigin``,
        removed after), then their backward; returns that origin's verdict (``step_end``).
        Raises ``NotReplayable``."""
        with self._replaying():
            origin = origin_of(self._model)
            try:
                _, made = self._run_again()
                named = [n for n, p in self._model.named_parameters() if p.requires_grad]
                grads = list(zip(named, made))  # (the leaf inputs' come after: left out)
                return origin.step_end(read=True, suspect=None, grads=grads)
            finally:
                origin.remove()

    def trace_again(self, tracer):
        """Run the step's calls and their backward again under ``tracer`` (a
        ``NonfiniteTracer``, not armed: apart from the notes, whose own operations are not
        the user's); returns its origin, asked while what the replay made is held (a value
        nothing holds was masked away). Raises ``NotReplayable``."""
        with self._replaying():
            with tracer:
                made = self._run_again()
            origin = tracer.origin
            del made
            return origin

    def _run_again(self) -> tuple:
        """The step's forwards, then their backward to the parameters; returns the outputs
        and the gradients made."""
        outputs, grads = self._forwards()
        inputs = self._leaf_inputs([p for p in self._params if p.requires_grad])
        made = ()
        if outputs and inputs:
            try:
                made = torch.autograd.grad(outputs, inputs, grads, allow_unused=True)
            except Exception as exc:  # never the user's loop's failure
                raise NotReplayable(f"its backward raised {type(exc).__name__}") from None
        return outputs, made

    @contextlib.contextmanager
    def _replaying(self) -> Iterator[None]:
        """Where the step's calls run again: not taken as calls of a step, and the
        generator's state and the buffers put back as they were after."""
        why = self.why_not()
        if why is not None:
            raise NotReplayable(why)
        rng = torch.get_rng_state()
        buffers = [(b, b.detach().clone()) for b in self._model.buffers()]
        self._paused = True
        try:
            yield
        finally:
            self._paused = False
            with torch.no_grad():
                for b, saved in buffers:
                    b.copy_(saved)
            torch.set_rng_state(rng)

    def _forwards(self):
        """Each call again, from its generator state; (outputs, gradients) to run the
        backward from. Raises ``NotReplayable`` where an output is not the one kept."""
        outputs, grads = [], []
        for call in self.calls:
            torch.set_rng_state(call.rng)
            try:
                with _autocast_as(call.autocast):
                    again = list(call_tensors(self._model(*call.args, **call.kwargs)))
            except Exception as exc:  # the model's own state refused a second call
                raise NotReplayable(f"the model's forward raised {type(exc).__name__}") from None
            if not _same(again, call.outputs):
                raise NotReplayable("the replayed forward gave other outputs")
            for t, g in zip(again, call.grads):
                if g is not None and t.grad_fn is not None:
                    outputs.append(t)
                    grads.append(g)
        return outputs, grads

    def _leaf_inputs(self, params: list[torch.Tensor]) -> list[torch.Tensor]:
        """``params`` and the tensors given to the calls that are leaves requiring grad (the
        backward reaches them too: a module before any parameter is then on its way), each
        once."""
        seen, leaves = {id(p) for p in params}, list(params)
        for call in self.calls:
            for t in chain(call_tensors(call.args), call_tensors(call.kwargs)):
                if t.requires_grad and t.grad_fn is None and id(t) not in seen:
                    seen.add(id(t))
                    leaves.append(t)
        return leaves


class _GradientOf:
    """A pre-hook on an output's autograd node: keeps the gradient that reached the output
    (summed where the node runs twice: a graph's backward run again)."""

    __slots__ = ("grads", "k", "nr")

    def __init__(self, grads: list, k: int, nr: int) -> None:
        self.grads, self.k, self.nr = grads, k, nr

    def __call__(self, grad_outputs) -> None:
        g = grad_outputs[self.nr]
        if g is not None:
            kept = self.grads[self.k]
            self.grads[self.k] = g.detach() if kept is None else kept + g.detach()


#: A module's own attributes that are torch's bookkeeping (its tensors, children, hooks).
_TORCH_OWN = frozenset(vars(nn.Module())) | {"_compiled_call_impl"}


def _plain_state(model: nn.Module) -> list:
    """What a forward could change of the model besides its tensors: each module's own
    attributes, numbers and strings by value, a generator by its state, a plain tensor by
    its version, a container by its length, anything else by identity."""
    state = []
    for m in model.modules():
        for key, value in vars(m).items():
            if key not in _TORCH_OWN:
                state.append((id(m), key, _fingerprint(value)))
    return state


def _fingerprint(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, torch.Generator):
        return bytes(value.get_state().numpy())
    if isinstance(value, torch.Tensor):
        return (id(value), value._version)
    if isinstance(value, (list, tuple, dict, set)):
        return (id(value), len(value))
    return id(value)


def _autocast_now() -> torch.dtype | None:
    """The CPU autocast's dtype where one is on (a forward under it is replayed under it)."""
    return torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else None


def _autocast_as(dtype: torch.dtype | None):
    """The CPU autocast a call ran under (its dtype; None: off)."""
    if dtype is None:
        return torch.autocast("cpu", enabled=False)
    return torch.autocast("cpu", dtype=dtype)


def _held(call: _Call) -> Iterator[torch.Tensor]:
    """The tensors a kept call holds: its arguments and its outputs."""
    return chain(call_tensors(call.args), call_tensors(call.kwargs), call.outputs)


#: Integer dtypes of each element size: a float tensor viewed as one compares bit for bit.
_BITS = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    """Whether two lists of tensors are equal bit for bit (NaN payloads included)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x.dtype != y.dtype or x.shape != y.shape or x.device != y.device:
            return False
        bits = _BITS.get(x.element_size()) if x.is_floating_point() else None
        if bits is not None:
            x, y = x.detach().view(bits), y.view(bits)
        if not torch.equal(x.detach(), y):
            return False
    return True
