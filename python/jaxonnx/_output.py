"""Writing a model to `output_path` without damaging what is there.

A regular file (or a missing one) is replaced atomically: the bytes go to a
hidden temporary file in the same folder, which takes the old file's mode and
is renamed over it, so a failure leaves the old file (or none) and no temporary.
A symlink is followed: its target is what gets replaced, the link stays.
Anything else that exists (/dev/null, a FIFO, a character device) is opened and
written through, because renaming over it would destroy it.

External data (ExternalData): large weights are written from the arrays' own
memory by the core (_core.DataFile.write) into files beside the model, each
through the same temporary-and-rename, and renamed before the model is.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import stat
import tempfile

from jaxonnx._core import ConversionError

LAYOUTS = ("single", "per_tensor")


@dataclasses.dataclass(frozen=True)
class ExternalData:
    """Where to_onnx puts large weights instead of inside the model (ONNX external data).

    Attributes:
        threshold: main-graph initializers of at least this many bytes go to the data
            file(s); smaller ones stay in the model.
        layout: "single" (one data file, the default) or "per_tensor" (one file per
            tensor, named location + "." + the tensor's name).
        location: the data file's name, relative to the model's folder (default: the
            model file's name + ".data"; for "proto"/"bytes", model_name + ".data").
        folder: for return_mode "proto"/"bytes", the folder the data files are written
            to; save the model in that folder. Ignored for "file" (the model's folder).
    """

    threshold: int = 1024
    layout: str = "single"
    location: str | None = None
    folder: str | os.PathLike | None = None

    def __post_init__(self):
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, int) \
                or self.threshold < 1:
            raise ConversionError(f"ExternalData.threshold must be an int >= 1; got {self.threshold!r}")
        if self.layout not in LAYOUTS:
            raise ConversionError(f"ExternalData.layout must be one of {LAYOUTS}; got {self.layout!r}")
        if self.location is not None and (not isinstance(self.location, str) or not self.location
                                          or os.path.basename(self.location) != self.location
                                          or self.location in (".", "..")):
            raise ConversionError(
                f"ExternalData.location must be a file name (no folder); got {self.location!r}")


def external_plan(external_data, return_mode, output_path, model_name):
    """(request for _core.convert or None, folder the data files go to or None).

    external_data: None (only when the model would not fit in 2 GB, and only for
    return_mode="file"), False (never), True (ExternalData()), or an ExternalData.
    """
    if external_data is None or external_data is False:
        if external_data is None and return_mode == "file":
            folder = os.path.dirname(resolve(output_path))
            return ("auto", 1024, os.path.basename(resolve(output_path)) + ".data", False), folder
        return None, None
    if external_data is True:
        external_data = ExternalData()
    if not isinstance(external_data, ExternalData):
        raise ConversionError("external_data must be None, True, False or a jaxonnx.ExternalData; "
                              f"got {type(external_data).__name__}")
    if return_mode == "file":
        target = resolve(output_path)
        folder, default = os.path.dirname(target), os.path.basename(target) + ".data"
    else:
        if external_data.folder is None:
            raise ConversionError(
                f'external data with return_mode="{return_mode}" needs '
                "jaxonnx.ExternalData(folder=...): the folder its data files are written to")
        folder, default = os.fspath(external_data.folder), f"{model_name}.data"
        if not os.path.isdir(folder):
            raise ConversionError(f"ExternalData.folder {folder!r} is not a folder")
    request = ("always", external_data.threshold, external_data.location or default,
               external_data.layout == "per_tensor")
    return request, folder


# return_mode="proto" without external data: the large tensors cross from the
# core as views (_core.DataFile.views) and are copied once into the ModelProto,
# instead of into the core's protobuf, its serialization, a Python bytes and the
# parse back.
INLINE = ("inline", 1024, "", False)


def model_proto(data, data_files):
    """The ModelProto `data` describes, its external tensors (INLINE) filled in."""
    import onnx

    model = onnx.load_from_string(data)
    if not data_files:
        return model
    (f,) = data_files
    views = f.views()
    for t in model.graph.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            offset = next(int(e.value) for e in t.external_data if e.key == "offset")
            t.raw_data = views[offset].tobytes()
            t.ClearField("external_data")
            t.ClearField("data_location")
    return model


def write_data_files(folder, data_files, stack, progress=None):
    """Writes every _core.DataFile into `folder` through `stack` (an ExitStack of
    atomic writes: they are renamed into place when the stack closes cleanly)."""
    done = 0
    for f in data_files:
        path = os.path.join(folder, f.location)
        if not is_regular_or_missing(path):
            raise ConversionError(f"external data file {path!r} exists and is not a regular file")
        out = stack.enter_context(atomic(path))
        base = done
        f.write(out.fileno(), None if progress is None else (lambda n, b=base: progress(b + n)))
        done += f.size


def write_model(path, data, data_files=(), folder=None, progress=None) -> None:
    """Writes the model bytes to `path` and its data files into `folder`; all or nothing
    for regular files."""
    target = resolve(path)
    if os.path.isdir(target):
        raise ConversionError(f"output_path {os.fspath(path)!r} is a folder; give a file name")
    if data_files and not is_regular_or_missing(target):
        raise ConversionError(f"output_path {os.fspath(path)!r} is not a regular file, so the "
                              "model's external data has no folder to go to; write it to a file")
    if not data_files:
        write(target, data)
        return
    with contextlib.ExitStack() as stack:
        model = stack.enter_context(atomic(target))  # renamed last: after its data
        _write_all(model, data)
        write_data_files(folder, data_files, stack, progress)


def resolve(path) -> str:
    """The path that is written: `path` with its symlinks followed."""
    return os.path.realpath(os.fspath(path))


def is_regular_or_missing(path) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        return True


def write(path, chunks) -> None:
    """Writes `chunks` (bytes-like objects, or one) to `path` as described above."""
    if isinstance(chunks, (bytes, bytearray, memoryview)):
        chunks = (chunks,)
    target = resolve(path)
    if os.path.isdir(target):
        raise ConversionError(f"output_path {os.fspath(path)!r} is a folder; give a file name")
    if not is_regular_or_missing(target):
        # O_NONBLOCK would make a FIFO without a reader fail at once, but a
        # device or FIFO is what the user named: block like `cat > fifo` does.
        with open(target, "wb", buffering=0) as f:
            for c in chunks:
                _write_all(f, c)
        return
    with atomic(target) as f:
        for c in chunks:
            _write_all(f, c)


def _write_all(f, data) -> None:
    view = memoryview(data).cast("B")
    while view:
        n = f.write(view)
        view = view[n:]


class atomic:
    """`with atomic(path) as f:` writes a temporary beside `path` (already
    resolved, regular or missing) and renames it over `path` on success; on any
    exception the temporary is removed and `path` is untouched."""

    def __init__(self, path):
        self.path = os.fspath(path)

    def __enter__(self):
        folder = os.path.dirname(os.path.abspath(self.path))
        name = os.path.basename(self.path)
        fd, self.tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".jaxonnx-tmp")
        try:
            os.fchmod(fd, _mode_for(self.path))
            self.file = os.fdopen(fd, "wb", buffering=0)
        except BaseException:
            os.close(fd)
            os.unlink(self.tmp)
            raise
        return self.file

    def __exit__(self, kind, value, tb):
        try:
            self.file.close()
            if kind is None:
                os.replace(self.tmp, self.path)
        finally:
            if kind is not None or os.path.lexists(self.tmp):
                try:
                    os.unlink(self.tmp)
                except FileNotFoundError:
                    pass
        return False


def _mode_for(path) -> int:
    """An existing file's permission bits, else what open() would give (0666 less the umask)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return 0o666 & ~_umask()


def _umask() -> int:
    # Read, not set-and-restore: os.umask(0) would briefly change it for every thread.
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022
