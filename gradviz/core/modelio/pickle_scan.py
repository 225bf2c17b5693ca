"""Judge a pickle by its opcodes before anything unpickles it.

``scan_pickle`` walks the opcodes with the standard library's ``pickletools.genops``, which
decodes them without executing anything, and follows the pickle machine's stack with only
what is needed: the nesting depth each value would have and the text of short strings (to
resolve ``STACK_GLOBAL`` names). It refuses, with one sentence:

- excessive nesting (a dict key that is a tuple nested 200,000 deep crashes torch's
  weights-only unpickler with SIGSEGV), too many opcodes, huge strings;
- any name (``GLOBAL``, ``STACK_GLOBAL``, ``INST``, also where it is fetched again from the
  memo) outside what gradviz's loaders accept, wherever it sits in the file, even in a key
  nobody reads. The accepted set is an allow-list (``accepted``): torch's tensor rebuilders,
  dtypes and storage types, ``OrderedDict`` and a few plain data types may be called; classes
  (``CapWords`` names, which gradviz replaces by inert stand-ins) may be instantiated without
  being called (``NEWOBJ``); torch's own functions may sit in the file as values (a
  TransformerEncoderLayer keeps ``torch.nn.functional.relu``). Everything else would be code
  the file runs when a normal unpickler loads it, and is refused naming it. Names that run
  processes or evaluate code (``subprocess.Popen``, ``os.system``, ``builtins.exec``...) are
  refused as hostile: the deny-list only chooses that wording.
"""

from __future__ import annotations

import pickletools
from dataclasses import dataclass, field
from typing import BinaryIO

from gradviz.core.common.errors import GradvizError
from gradviz.core.modelio import limits
from gradviz.core.modelio.allow_list import PY2_MODULES, accepted, is_hostile
from gradviz.core.modelio.limits import quoted

_STRING_OPS = {
    "STRING",
    "BINSTRING",
    "SHORT_BINSTRING",
    "UNICODE",
    "BINUNICODE",
    "SHORT_BINUNICODE",
    "BINUNICODE8",
    "BINBYTES",
    "SHORT_BINBYTES",
    "BINBYTES8",
    "BYTEARRAY8",
}
# Opcodes that add to a container below them on the stack: its depth grows only with what
# is added, never by one per call.
_MODIFIERS = {"APPEND", "APPENDS", "SETITEM", "SETITEMS", "ADDITEMS", "BUILD"}


class _Value:
    """One value on the simulated stack: its nesting depth, for a string its text, for a
    global the full name it stands for (kept when the memo hands it out again)."""

    __slots__ = ("depth", "global_name", "module_class", "text")

    def __init__(self, depth: int, text: str | None = None, global_name: str | None = None):
        self.depth = depth
        self.text = text
        self.global_name = global_name
        self.module_class: str | None = None  # ("module", Class, ...): a legacy class id


_MARK = object()


@dataclass
class PickleScan:
    """What a pickle names: ``globals`` ("module.name", in order of first use)."""

    globals: list[str] = field(default_factory=list)
    called: set[str] = field(default_factory=set)  # names the unpickler would call
    # Classes torch's legacy (non-zip) format names by persistent id ("module", Class, file,
    # source): the file is a whole module saved by torch.save's old format.
    legacy_modules: list[str] = field(default_factory=list)
    end: int = 0  # offset just past the STOP opcode


def scan_pickle(data: bytes | BinaryIO, name: str, start: int = 0) -> PickleScan:
    """Scan the pickle at ``data[start:]`` (bytes, or a file opened for reading, streamed);
    GradvizError naming the first limit it breaks or the first name it holds that is not
    accepted."""
    import io

    # A file is streamed through a reader that refuses oversized reads; bytes already in
    # memory are read directly (the wrapper's call per read costs a third of the scan).
    stream = io.BytesIO(data) if isinstance(data, bytes) else _BoundedReader(data, name)
    stream.seek(start)
    scan = PickleScan()
    machine = _Machine(scan, name)
    try:
        machine.run(pickletools.genops(stream))
        scan.end = stream.tell()
    except GradvizError:
        raise
    except Exception:  # genops raises ValueError and friends on malformed bytes
        raise GradvizError(f"{name} holds a damaged pickle and cannot be read.") from None
    for full in scan.globals:  # names that are only values: classes, torch's functions
        if not accepted(full, called=False):
            raise GradvizError(_not_accepted(name, full))
    return scan


class _BoundedReader:
    """A stream that refuses any single read (a string's declared length) over the string
    limit: genops reads a declared string before its length can be judged."""

    def __init__(self, stream: BinaryIO, name: str) -> None:
        self._stream, self._name = stream, name

    def read(self, size: int = -1) -> bytes:
        if size < 0 or size > limits.MAX_PICKLE_STRING_BYTES:
            raise GradvizError(_string_too_long(self._name, size))
        return self._stream.read(size)

    def readline(self, size: int = -1) -> bytes:
        line = self._stream.readline(limits.MAX_PICKLE_STRING_BYTES + 1)
        if len(line) > limits.MAX_PICKLE_STRING_BYTES:
            raise GradvizError(_string_too_long(self._name, len(line)))
        return line

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._stream.seek(offset, whence)

    def tell(self) -> int:
        return self._stream.tell()


def _string_too_long(name: str, size: int) -> str:
    held = f"a string of {limits.human_bytes(size)}" if size >= 0 else "a string of any size"
    return (
        f"{name} holds {held} in its pickle, over gradviz's limit of "
        f"{limits.human_bytes(limits.MAX_PICKLE_STRING_BYTES)}; it is not a model file "
        "gradviz reads."
    )


def _effects(opcode) -> tuple[str, int, bool, int]:
    """(name, fixed items popped below any mark, pops to a mark, items pushed)."""
    before = opcode.stack_before
    marked = pickletools.markobject in before
    fixed = before.index(pickletools.markobject) if marked else len(before)
    return opcode.name, fixed, marked, len(opcode.stack_after)


_EFFECTS = {op.code: _effects(op) for op in pickletools.opcodes}

# What the machine does for each opcode, decided once per opcode rather than once per
# operation (a 10,000-layer state_dict is 390,000 operations).
_PUSH, _STRING, _MARK_OP, _PUT, _MEMOIZE, _GET, _DUP, _GLOBAL, _NOTHING, _COMBINE, _STOP = range(11)


def _kind(opcode) -> int:
    op, fixed, marked, pushed = _EFFECTS[opcode.code]
    if op in _STRING_OPS:
        return _STRING
    named = {
        "MARK": _MARK_OP,
        "PUT": _PUT,
        "BINPUT": _PUT,
        "LONG_BINPUT": _PUT,
        "MEMOIZE": _MEMOIZE,
        "GET": _GET,
        "BINGET": _GET,
        "LONG_BINGET": _GET,
        "DUP": _DUP,
        "GLOBAL": _GLOBAL,
        "STOP": _STOP,
    }
    if op in named:
        return named[op]
    if not fixed and not marked:
        return _PUSH if pushed else _NOTHING
    return _COMBINE


_KINDS = {op: _kind(op) for op in pickletools.opcodes}


class _Machine:
    """The pickle machine's stack and memo, holding only depths and short string texts."""

    def __init__(self, scan: PickleScan, name: str) -> None:
        self.stack: list = []
        self.memo: dict = {}
        self.scan = scan
        self.name = name

    def run(self, operations) -> None:
        """Follow ``operations`` (pickletools.genops) up to STOP; GradvizError at the first
        limit broken or name refused. The common opcodes are handled inline: this loop is
        most of the time a model file's check takes."""
        stack, memo, kinds = self.stack, self.memo, _KINDS
        push, limit = stack.append, limits.MAX_PICKLE_OPCODES
        for count, (opcode, arg, _) in enumerate(operations, 1):
            if count > limit:
                raise GradvizError(
                    f"{self.name} holds a pickle of more than {limit:,} "
                    "operations, over gradviz's limit for a model file."
                )
            kind = kinds[opcode]
            if kind == _PUT:
                memo[arg] = stack[-1] if stack else _Value(1)
            elif kind == _PUSH:
                push(_Value(1))
            elif kind == _GET:
                value = memo.get(arg)
                push(value if value is not None else _Value(1))
            elif kind == _STRING:
                if len(arg) > limits.MAX_PICKLE_STRING_BYTES:
                    raise GradvizError(_string_too_long(self.name, len(arg)))
                push(_Value(1, arg[:200] if isinstance(arg, str) else None))
            elif kind == _MARK_OP:
                push(_MARK)
            elif kind == _COMBINE:
                op, fixed, marked, pushed = _EFFECTS[opcode.code]
                self._combine(op, arg, _pop(stack, fixed, marked), pushed)
            elif kind == _MEMOIZE:
                memo[len(memo)] = stack[-1] if stack else _Value(1)
            elif kind == _DUP:
                push(stack[-1] if stack else _Value(1))
            elif kind == _GLOBAL:
                push(_Value(1, global_name=self._named(arg)))
            elif kind == _STOP:
                return

    def _named(self, arg) -> str:
        """The full name a GLOBAL or INST argument ("module qualname") stands for, checked
        against the deny-list at once (for its wording)."""
        module, _, qualname = str(arg).partition(" ")
        full = f"{PY2_MODULES.get(module, module)}.{qualname}"
        _name_used(full, self.scan, self.name)
        return full

    def _called(self, callee, how: str) -> None:
        """The unpickler would call ``callee`` (REDUCE, INST, OBJ) or create an instance of
        it (NEWOBJ): it must be a name the loaders accept for that."""
        full = callee.global_name if isinstance(callee, _Value) else None
        if full is None:
            raise GradvizError(
                f"{self.name} {how} something it computes at load time, which is code the "
                "file would run; gradviz never opens such a file."
            )
        if how == "calls":
            self.scan.called.add(full)
        if not accepted(full, called=how == "calls"):
            raise GradvizError(_not_accepted(self.name, full))

    def _combine(self, op: str, arg, popped: list, pushed: int) -> None:
        global_name = None
        if op == "STACK_GLOBAL":
            texts = [v.text for v in popped if isinstance(v, _Value)]
            if len(texts) != 2 or None in texts:
                raise GradvizError(
                    f"{self.name} names a class or function it computes at load time; "
                    "gradviz reads only files whose names are written out."
                )
            global_name = self._named(f"{texts[0]} {texts[1]}")
        elif op == "INST":
            self._called(_Value(1, global_name=self._named(arg)), "calls")
        elif op in ("REDUCE", "OBJ") and popped:
            self._called(popped[0], "calls")
        elif op in ("NEWOBJ", "NEWOBJ_EX") and popped:
            self._called(popped[0], "creates")
        elif op == "BINPERSID" and popped and isinstance(popped[0], _Value):
            global_name = popped[0].module_class
            if global_name is not None and global_name not in self.scan.legacy_modules:
                self.scan.legacy_modules.append(global_name)
        if not pushed:
            return
        values = [v for v in popped if isinstance(v, _Value)]
        if op in _MODIFIERS and values:
            result = values[0]
            for v in values[1:]:
                if v.depth >= result.depth:
                    result.depth = v.depth + 1
        else:
            result = _Value(1 + max((v.depth for v in values), default=0))
        if result.depth > limits.MAX_PICKLE_DEPTH:
            raise GradvizError(
                f"{self.name} holds values nested more than {limits.MAX_PICKLE_DEPTH:,} levels "
                "deep, which no model file needs and which crashes torch's reader; gradviz "
                "refuses it."
            )
        if global_name is not None:
            result.global_name = global_name
        if op.startswith("TUPLE") and len(values) >= 2 and values[0].text == "module":
            result.module_class = values[1].global_name
        self.stack.extend([result] * pushed)


def _pop(stack: list, fixed: int, marked: bool) -> list:
    """Pop what an opcode consumes: everything down to the mark for markobject opcodes,
    then the fixed items below it; deepest first (a container before its additions)."""
    if not marked and len(stack) >= fixed:  # the common case (TUPLE2, REDUCE, SETITEM...)
        taken = stack[len(stack) - fixed :]
        del stack[len(stack) - fixed :]
        return taken
    popped: list = []
    if marked:
        while stack and stack[-1] is not _MARK:
            popped.append(stack.pop())
        if stack:
            stack.pop()
    taken = [stack.pop() for _ in range(min(fixed, len(stack)))]
    taken.reverse()
    popped.reverse()
    return taken + popped


def _name_used(full: str, scan: PickleScan, name: str) -> None:
    if full not in scan.globals:
        scan.globals.append(full)
    if is_hostile(full):
        raise GradvizError(
            f"{name} is hostile: its pickle names {quoted(full)}, which runs processes or "
            "evaluates code; gradviz never opens such a file."
        )


def _not_accepted(name: str, full: str) -> str:
    return (
        f"{name} names {quoted(full)}, which is code the file would run when loaded and not "
        "one of the tensor rebuilders, dtypes and classes gradviz reads; gradviz never opens "
        "such a file."
    )
