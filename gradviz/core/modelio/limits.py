"""Every limit gradviz puts on a model file, in one place (the README lists the same numbers).

A file is judged on what it declares (its size, its zip entries' declared sizes, its pickle's
opcodes, its tensors' sizes and strides) before anything of that size is allocated, read or
inflated; over a limit it is refused with one sentence. Nothing here imports torch.
"""

from __future__ import annotations

GIB = 1 << 30
MIB = 1 << 20

#: The file itself.
MAX_FILE_BYTES = GIB
#: All tensors a file declares, each counted at its full size (elements x element size), so
#: a stride-0 view that expands one number to (40000, 40000) counts as 6.4 GB.
MAX_TENSOR_BYTES = GIB
#: The network gradviz builds from a file's weights (float16 and bfloat16 become float32).
MAX_NETWORK_BYTES = GIB
#: How many tensors a file may declare, each counted once for every name that refers to it
#: (large language models have a few hundred to a few thousand).
MAX_TENSORS = 10_000
#: The declared uncompressed size of all entries of a zip archive (torch files are zips) and
#: how many entries it may hold.
MAX_ZIP_CONTENT_BYTES = GIB
MAX_ZIP_ENTRIES = 100_000
#: A pickle (torch.save's ``data.pkl``, a plain pickle): its size, its opcodes, the depth of
#: nesting it builds (torch's own unpickler crashes the process on very deep nesting) and
#: the longest string or bytes object in it (keys and names are short).
MAX_PICKLE_BYTES = 256 * MIB
MAX_PICKLE_OPCODES = 500_000
MAX_PICKLE_DEPTH = 1_000
MAX_PICKLE_STRING_BYTES = MIB
#: safetensors header (JSON; the format itself allows 100 MB).
MAX_SAFETENSORS_HEADER_BYTES = 16 * MIB
#: Nesting of JSON read from a file (a safetensors header, ``gradviz.spec``): checked before
#: parsing, since Python's parser recurses (200,000 levels: RecursionError).
MAX_JSON_DEPTH = 64
#: Text read from an untrusted TorchScript ``code/`` entry or a .pt2 weights config to
#: describe it; larger entries are skipped, never read whole.
MAX_DESCRIPTION_ENTRY_BYTES = 4 * MIB
#: Per-sample Jacobian entries (m x prod(in_shape)) above which ``gradviz jacobian``
#: computes the gradient of one output instead (saliency).
MAX_JACOBIAN_ENTRIES = 1_000_000

#: Error text: one sentence at most this long; names from a file are cut to NAME_CHARS.
MESSAGE_CHARS = 400
NAME_CHARS = 60


def quoted(name: object) -> str:
    """``repr(name)``, cut to NAME_CHARS characters with an ellipsis (names come from files)."""
    text = repr(name) if isinstance(name, str) else repr(str(name))
    if len(text) <= NAME_CHARS:
        return text
    return text[: NAME_CHARS - 2] + "…" + text[0]


def escaped(text: str) -> str:
    """``text`` with every character that is not printable written as its escape (a file
    name holding a newline stays on one line: ``a\\nb.pt``)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def bounded(message: str) -> str:
    """The first line of ``message``, cut to MESSAGE_CHARS characters with an ellipsis."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    text = lines[0] if lines else message.strip()
    if len(text) <= MESSAGE_CHARS:
        return text
    return text[: MESSAGE_CHARS - 2].rstrip() + "…."


def human_bytes(count: int) -> str:
    """``1.5 GiB``, ``12 MiB``, ``300 bytes``."""
    if count >= GIB:
        return f"{count / GIB:,.1f} GiB"
    if count >= MIB:
        return f"{count / MIB:,.0f} MiB"
    return f"{count:,} bytes"
