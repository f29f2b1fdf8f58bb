"""Which plugin files may be loaded into this process, decided before any of their code runs here.

No in-process host survives arbitrary native code, so jaxonnx avoids running
damaged or never-checked code in the user's process:

- Bundled plugins: the build writes SHA256SUMS (SHA-256 per file) next to them.
  A bundled file whose hash differs is refused before dlopen. A file is hashed
  when this user's jaxonnx first sees it and again whenever its size, mtime,
  ctime, inode or device change; otherwise the hash recorded in the cache is
  trusted (so the warm path is a stat per file).
- Every other plugin file: the first time a file (by path, size, mtimes and
  SHA-256) is seen, a short-lived child process loads it and runs its checks
  (dlopen, init, descriptor validation, and the abstract eval, lowering and
  rewrite rules of each primitive's test equation; _preflight_child.py). A file
  that crashes or hangs there is refused with a reason naming the signal and
  the step. The outcome is cached per SHA-256 and jaxonnx build, so a process
  pays this once per plugin version. $JAXONNX_PLUGIN_PREFLIGHT=0 turns it off.
  A file that presents itself as a bundled plugin (same name and version) is
  skipped too: an identical copy would claim the same primitives twice, and a
  different one is damaged (or modified without a name or version of its own),
  in code its test equations may not reach.

The cache is one small JSON file, plugin_checks.json, in $JAXONNX_CACHE_DIR,
else $XDG_CACHE_HOME/jaxonnx, else ~/.cache/jaxonnx. It is a cache: losing it
only costs the checks again; a folder that cannot be written keeps the
outcomes for this process only.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENV_VAR = "JAXONNX_PLUGIN_PREFLIGHT"
TIMEOUT_ENV_VAR = "JAXONNX_PLUGIN_PREFLIGHT_TIMEOUT"
CACHE_ENV_VAR = "JAXONNX_CACHE_DIR"
MANIFEST = "SHA256SUMS"
DEFAULT_TIMEOUT = 30.0
CACHE_FILE = "plugin_checks.json"
_FORMAT = 1
_MAX_RECORDS = 2000  # per table; the oldest go first
_CHILD = Path(__file__).resolve().parent / "_preflight_child.py"


def enabled() -> bool:
    """Whether non-bundled plugin files are preflighted ($JAXONNX_PLUGIN_PREFLIGHT, default on)."""
    return os.environ.get(ENV_VAR, "1").strip().lower() not in ("0", "false", "no", "off")


def timeout() -> float:
    """Seconds a preflight child may take ($JAXONNX_PLUGIN_PREFLIGHT_TIMEOUT, default 30)."""
    raw = os.environ.get(TIMEOUT_ENV_VAR, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_TIMEOUT
    except ValueError:
        value = DEFAULT_TIMEOUT
    return value if value > 0 else DEFAULT_TIMEOUT


def cache_dir() -> Path:
    """The folder holding this user's jaxonnx cache."""
    if os.environ.get(CACHE_ENV_VAR):
        return Path(os.environ[CACHE_ENV_VAR])
    if sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        return Path(os.environ["LOCALAPPDATA"]) / "jaxonnx" / "Cache"
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "jaxonnx"
    return Path.home() / ".cache" / "jaxonnx"


# ---------------------------------------------------------------- the cache

def _identity(st: os.stat_result) -> list:
    """What must stay the same for a recorded hash to still describe a file."""
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _host_key() -> str:
    """The jaxonnx build a preflight outcome holds for: its version, ABI and _core binary."""
    from jaxonnx import _core
    from jaxonnx._version import __version__

    st = os.stat(_core.__file__)
    return f"{__version__}|abi{_core.ABI_MAJOR}.{_core.ABI_MINOR}|{st.st_size}:{st.st_mtime_ns}"


class _Cache:
    """files: real path -> identity + sha256; checks: host|sha256 -> preflight outcome."""

    def __init__(self, folder: Path):
        self.path = folder / CACHE_FILE
        self.files: dict = {}
        self.checks: dict = {}
        self._new_files: dict = {}
        self._new_checks: dict = {}
        data = self._read()
        self.files, self.checks = data["files"], data["checks"]

    def _read(self) -> dict:
        try:
            data = json.loads(self.path.read_text())
            if data.get("format") == _FORMAT and isinstance(data.get("files"), dict) \
                    and isinstance(data.get("checks"), dict):
                return data
        except (OSError, ValueError, AttributeError):
            pass
        return {"files": {}, "checks": {}}

    def sha256(self, real: str, st: os.stat_result) -> str:
        """The file's SHA-256: recorded, when its identity has not changed; else computed."""
        ident = _identity(st)
        rec = self.files.get(real)
        if isinstance(rec, dict) and rec.get("identity") == ident and rec.get("sha256"):
            return rec["sha256"]
        sha = _sha256(real)
        rec = {"identity": ident, "sha256": sha, "time": time.time()}
        self.files[real] = self._new_files[real] = rec
        return sha

    def outcome(self, key: str) -> dict | None:
        rec = self.checks.get(key)
        return rec if isinstance(rec, dict) and "status" in rec else None

    def put_outcome(self, key: str, outcome: dict) -> None:
        rec = dict(outcome, time=time.time())
        self.checks[key] = self._new_checks[key] = rec

    def save(self) -> None:
        """Merges what this process learnt into the file (others may have written meanwhile)."""
        if not self._new_files and not self._new_checks:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._locked():
                data = self._read()
                data["files"].update(self._new_files)
                data["checks"].update(self._new_checks)
                data["files"] = {p: r for p, r in data["files"].items() if os.path.exists(p)}
                for table in ("files", "checks"):
                    items = sorted(data[table].items(), key=lambda kv: kv[1].get("time", 0))
                    data[table] = dict(items[-_MAX_RECORDS:])
                data["format"] = _FORMAT
                fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".plugin_checks.")
                with os.fdopen(fd, "w") as f:
                    json.dump(data, f, indent=0, sort_keys=True)
                os.replace(tmp, self.path)
        except OSError:
            return  # a cache that cannot be written: the outcomes stay in this process
        self._new_files.clear()
        self._new_checks.clear()

    @contextlib.contextmanager
    def _locked(self):
        try:
            import fcntl
        except ImportError:  # Windows: last writer wins, which only costs a check again
            yield
            return
        with open(self.path.parent / ".plugin_checks.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


_caches: dict[Path, _Cache] = {}


def _cache() -> _Cache:
    folder = cache_dir()
    if folder not in _caches:
        _caches[folder] = _Cache(folder)
    return _caches[folder]


# ---------------------------------------------------------------- the manifest

_manifests: dict = {}


def manifest(folder) -> dict[str, str] | None:
    """{file name: sha256} from the folder's SHA256SUMS; None when it has none."""
    path = Path(folder) / MANIFEST
    try:
        st = path.stat()
    except OSError:
        return None
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key not in _manifests:
        entries = {}
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            sha, _, name = line.strip().partition("  ")
            if len(sha) == 64 and name:
                entries[name.lstrip("*")] = sha.lower()
        _manifests[key] = entries
    return _manifests[key]


def missing_manifest_message(folder) -> str:
    return (f"jaxonnx's bundled plugins have no manifest: {Path(folder) / MANIFEST} is missing, "
            f"so they cannot be checked before they are loaded. The installation is incomplete "
            f"or damaged; reinstall jaxonnx (pip install --force-reinstall jaxonnx, or "
            f"./scripts/test in a source tree, whose build writes it).")


# ---------------------------------------------------------------- the child

_STEP_TEXT = {
    "dlopen": "while it was being loaded (dlopen: relocations and static constructors)",
    "init": "in its entry point jaxonnx_plugin_init_v1",
    "describe": "while jaxonnx read its descriptor",
    "abstract_eval": "in the abstract eval of '{p}' on its test equation {e}",
    "lower": "while lowering '{p}' on its test equation {e}",
    "rules": "in its rewrite rules, after lowering '{p}' on its test equation {e}",
    "exit": "at process exit (static destructors), after its checks passed",
}


def _where(step: str | None, primitive: str, eqn: str) -> str:
    if step is None:
        return "before it was loaded"
    return _STEP_TEXT.get(step, f"in step {step!r}").format(p=primitive, e=eqn)


def _signal_name(signum: int) -> tuple[str, str]:
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    text = signal.strsignal(signum) if hasattr(signal, "strsignal") else None
    return name, (text or name)


def run_child(path: str, limit: float | None = None) -> dict:
    """Preflights one file in a child process; the outcome (JSON-able):
    status "ok" (it ran to the end; load_error says if it would not load),
    "crashed" (signal or exit status, and the step), "hung" (over the time
    limit), or "failed" (the child could not check it: detail says why)."""
    from jaxonnx import _core

    limit = timeout() if limit is None else limit
    fd, steps_path = tempfile.mkstemp(prefix="jaxonnx-preflight-", suffix=".jsonl")
    os.close(fd)
    err = tempfile.TemporaryFile()
    cmd = [sys.executable, "-I", "-S", str(_CHILD), _core.__file__, steps_path, path]
    start = time.monotonic()
    hung = False
    try:
        # Its own session, so a timeout kills whatever the plugin started too;
        # no pipes, so nothing it leaves running can block us.
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=err, start_new_session=os.name == "posix")
        try:
            rc = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            hung = True
            with contextlib.suppress(OSError):
                if os.name == "posix":
                    os.killpg(proc.pid, signal.SIGKILL)
                else:
                    proc.kill()
            rc = proc.wait()
        seconds = time.monotonic() - start
        err.seek(0)
        stderr = err.read()[-2000:].decode("utf-8", "replace").strip()
        with open(steps_path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as e:
        return {"status": "failed", "detail": f"the child process could not run: {e}"}
    finally:
        err.close()
        with contextlib.suppress(OSError):
            os.unlink(steps_path)
    step, primitive, eqn, report = None, "", "", None
    for line in lines:
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if "report" in obj:
            report = obj["report"]
        elif "step" in obj:
            step, primitive, eqn = obj["step"], obj.get("primitive", ""), obj.get("eqn", "")
    out = {"status": "ok", "step": step, "primitive": primitive, "eqn": eqn,
           "seconds": round(seconds, 4)}
    if report is not None:
        out.update(load_error=report["load_error"], name=report["name"],
                   version=report["version"], primitives=report["primitives"])
    if hung:
        out.update(status="hung", detail=f"no answer within {limit:g} s")
    elif rc < 0:
        name, text = _signal_name(-rc)
        out.update(status="crashed", signal=name, detail=text)
    elif report is None and step is None:
        out.update(status="failed", detail=f"the child process exited with status {rc}"
                                           + (f": {stderr}" if stderr else ""))
    elif rc != 0 or report is None:  # the plugin ended the process (exit(), _exit())
        out.update(status="crashed", signal=None, detail=f"the process exited with status {rc}")
    return out


def failure(outcome: dict) -> str:
    """What went wrong in a preflight, or "" when it ran to the end."""
    status = outcome["status"]
    if status == "ok":
        return ""
    where = _where(outcome.get("step"), outcome.get("primitive", ""), outcome.get("eqn", ""))
    if status == "crashed":
        what = (f"{outcome['signal']} ({outcome['detail']})" if outcome.get("signal")
                else outcome["detail"])
        return f"it crashed the preflight's test process with {what} {where}"
    if status == "hung":
        return f"it hung the preflight's test process ({outcome['detail']}) {where}"
    return f"the preflight could not check it ({outcome['detail']})"


def refusal(outcome: dict) -> str:
    """Why a preflight outcome keeps a file out of this process, or ""."""
    what = failure(outcome)
    if not what:
        return ""
    if outcome["status"] == "failed":
        return f"{what}; it was not loaded into this process (${ENV_VAR}=0 loads plugins unchecked)"
    return (f"{what}; it was not loaded into this process. A damaged file or a bug in the "
            f"plugin: rebuild or reinstall it (`python -m jaxonnx plugins --check` checks it again)")


# ---------------------------------------------------------------- deciding

# Files this process refused after a preflight: real path -> reason (for jaxonnx.testing).
refused: dict[str, str] = {}


def check_files(paths, *, fresh: bool = False) -> dict[str, dict]:
    """The preflight outcome of each file (cached unless `fresh`), running the
    missing ones in parallel child processes; each also carries "sha256"."""
    cache = _cache()
    host = _host_key()
    out, todo = {}, {}
    for path in paths:
        real = os.path.realpath(path)
        try:
            sha = cache.sha256(real, os.stat(real))
        except OSError as e:
            out[path] = {"status": "failed", "detail": f"it cannot be read: {e}"}
            continue
        hit = None if fresh else cache.outcome(f"{host}|{sha}")
        if hit is not None:
            out[path] = dict(hit, sha256=sha, cached=True)
        else:
            todo[path] = (real, sha)
    if todo:
        workers = max(1, min(len(todo), os.cpu_count() or 1, 4))
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            runs = {path: pool.submit(run_child, real) for path, (real, _) in todo.items()}
        for path, future in runs.items():
            outcome = future.result()
            if outcome["status"] != "failed":  # a child that could not run is not the file's fault
                cache.put_outcome(f"{host}|{todo[path][1]}", outcome)
            out[path] = dict(outcome, sha256=todo[path][1], cached=False)
    cache.save()
    return out


def _real(path: str, folders: dict[str, str]) -> tuple[str, os.stat_result]:
    """The real path of a file and its stat; cheaper than os.path.realpath when
    the file itself is not a link (the folder's real path is resolved once, in
    `folders`)."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        real = os.path.realpath(path)
        return real, os.stat(real)
    folder, name = os.path.split(path)
    if folder not in folders:
        folders[folder] = os.path.realpath(folder)
    return os.path.join(folders[folder], name), st


def bundled_problem(path: str, real: str, sums: dict[str, str],
                    st: os.stat_result | None = None, cache: _Cache | None = None) -> str:
    """Why a bundled plugin file does not match the manifest, or ""."""
    cache = cache or _cache()
    try:
        sha = cache.sha256(real, st or os.stat(real))
    except OSError as e:
        return f"it cannot be read: {e}"
    want = sums[os.path.basename(real)]
    if sha == want:
        return ""
    return (f"it does not match the SHA-256 jaxonnx's build recorded for it in {MANIFEST} "
            f"(expected {want[:16]}..., the file has {sha[:16]}...): it is damaged or was "
            f"replaced since jaxonnx was installed, so it was not loaded. Reinstall jaxonnx "
            f"(pip install --force-reinstall jaxonnx)")


def bundled_identities(paths) -> dict[tuple[str, str], str]:
    """(plugin name, version) -> file, for bundled files that matched the manifest.
    Loads them into this process, as the scan will anyway: they are jaxonnx's own."""
    from jaxonnx import _core

    out = {}
    for path in paths:
        try:
            info = _core.load_plugin(path)
        except _core.ConversionError:
            continue  # the scan reports it
        out[(info["name"], info["version"])] = os.path.realpath(path)
    return out


def copy_of_bundled(outcome: dict, bundled: dict[tuple[str, str], str],
                    sums: dict[str, str]) -> str:
    """Why a preflighted file that presents itself as a bundled plugin (same name
    and version) is skipped, or "": an identical copy would only claim the same
    primitives twice, and a different one is a damaged copy (or a modified one
    that kept the name and version), whose damage its test run may not reach."""
    twin = bundled.get((outcome.get("name"), outcome.get("version")))
    if outcome.get("status") != "ok" or outcome.get("load_error") or twin is None:
        return ""
    what = f"jaxonnx's bundled plugin '{outcome['name']}' {outcome['version']} ({twin})"
    if outcome.get("sha256") == sums.get(os.path.basename(twin)):
        return f"it is an identical copy of {what}, which is used instead"
    return (f"it presents itself as {what} but its bytes differ from that file's: a damaged "
            f"copy, or a modified one that kept the name and version (give a modified plugin "
            f"a name or version of its own). The bundled one is used instead")


def gate(bundled_folder):
    """The gate the host's scan calls (core Registry::Gate): files -> reasons."""
    bundled_real = os.path.realpath(bundled_folder)
    sums = manifest(bundled_folder)
    if sums is None:
        from jaxonnx import _core
        raise _core.ConversionError(missing_manifest_message(bundled_folder))

    def decide(files: list[str]) -> list[str]:
        reasons = [""] * len(files)
        others, verified, folders, cache = [], [], {}, _cache()
        for k, path in enumerate(files):
            try:
                real, st = _real(path, folders)
            except OSError as e:
                reasons[k] = f"it cannot be read: {e}"
                continue
            if os.path.dirname(real) == bundled_real and os.path.basename(real) in sums:
                reasons[k] = bundled_problem(path, real, sums, st, cache)
                if not reasons[k]:
                    verified.append(path)
            elif enabled():
                others.append(k)
        if others:
            outcomes = check_files([files[k] for k in others])
            bundled = bundled_identities(verified)
            for k in others:
                outcome = outcomes[files[k]]
                reasons[k] = refusal(outcome) or copy_of_bundled(outcome, bundled, sums)
                if reasons[k] and outcome["status"] != "ok":
                    refused[os.path.realpath(files[k])] = reasons[k]
        cache.save()
        return reasons

    return decide
