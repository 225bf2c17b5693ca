"""Two threads reading model files at once, as the app's model panel and its Graph page do:
each file is listed and loaded with its own names, whatever the other thread allows meanwhile.

torch keeps the names ``weights_only`` loads accept in one process-wide set. gradviz adds
stand-ins for a file's classes to it while that file loads; a listing of another file's
names taken meanwhile counted those stand-ins as torch's own and came back empty, and that
file then failed to open ("names __main__.NetX, which gradviz will not load")."""

from __future__ import annotations

import io
import threading

import torch

from gradviz.core.modelio import standins


class PickledNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)


def _whole_pickle() -> bytes:
    buffer = io.BytesIO()
    torch.save(PickledNet(), buffer)
    return buffer.getvalue()


def test_a_files_names_are_listed_under_the_lock_its_load_holds(monkeypatch):
    real = torch.serialization.get_unsafe_globals_in_checkpoint
    locked_while_listing = []

    def listing(f):
        locked_while_listing.append(standins._SAFE_GLOBALS_LOCK.locked())
        return real(f)

    monkeypatch.setattr(torch.serialization, "get_unsafe_globals_in_checkpoint", listing)
    obj, names = standins.read_torch_pickle(_whole_pickle(), "net.pt", zip_format=True)
    assert locked_while_listing == [True]
    assert f"{__name__}.PickledNet" in names and type(obj).qualname.endswith("PickledNet")


def test_a_file_read_while_another_threads_stand_ins_are_allowed_opens_with_its_own_names():
    data = _whole_pickle()
    names = standins.read_torch_pickle(data, "net.pt", zip_format=True)[1]
    inside, release = threading.Event(), threading.Event()

    def another_load() -> None:  # what read_torch_pickle holds while it loads a file
        allowed = torch.serialization.safe_globals(standins.standins_for(names))
        with standins._SAFE_GLOBALS_LOCK, allowed:
            inside.set()
            release.wait(60)

    outcome: dict = {}

    def read() -> None:
        try:
            outcome["read"] = standins.read_torch_pickle(data, "net.pt", zip_format=True)
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            outcome["error"] = exc

    other = threading.Thread(target=another_load)
    other.start()
    assert inside.wait(60)
    reader = threading.Thread(target=read)
    reader.start()
    reader.join(0.3)  # time to list the file while the other thread's stand-ins are allowed
    release.set()
    other.join(60)
    reader.join(60)
    assert "error" not in outcome, outcome.get("error")
    obj, listed = outcome["read"]
    assert listed == names and type(obj).qualname.endswith("PickledNet")
