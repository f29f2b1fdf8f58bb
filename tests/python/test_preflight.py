"""Plugin files that would kill the process: the bundled manifest, the preflight
in a child process (crash, abort, hang), its per-user cache, the switch that
turns it off, `plugins --check`, and the jaxonnx.testing checks that use it.
Every crashing plugin here runs only in child processes."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

import jaxonnx
from jaxonnx import _plugins, _preflight, testing
from test_plugin_host import test_plugins  # noqa: F401  (the fixture building tests/plugins)


@pytest.fixture(autouse=True)
def _clean(monkeypatch, tmp_path):
    """A fresh cache per test, no extra plugin folders, and the preflight on."""
    monkeypatch.setenv(_preflight.CACHE_ENV_VAR, str(tmp_path / "cache"))
    monkeypatch.delenv(_plugins.ENV_VAR, raising=False)
    monkeypatch.delenv(_plugins.OVERRIDES_ENV_VAR, raising=False)
    monkeypatch.delenv(_preflight.ENV_VAR, raising=False)
    monkeypatch.delenv(_preflight.TIMEOUT_ENV_VAR, raising=False)
    _plugins._cache.clear()
    yield
    _plugins._cache.clear()


def _warnings(record):
    return [str(w.message) for w in record if issubclass(w.category, _plugins.PluginWarning)]


def _warning_for(messages, file_name):
    found = [m for m in messages if f"{os.sep}{file_name}: " in m]
    assert len(found) == 1, (file_name, messages)
    return found[0]


def _entry_offset(path: Path) -> int:
    """The file offset of jaxonnx_plugin_init_v1's code (64-bit little-endian ELF)."""
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1
    phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", data, 0x36)

    def section(i):
        return struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)

    for i in range(shnum):
        _, typ, _, _, off, size, link, _, _, entsize = section(i)
        if typ != 11:  # SHT_DYNSYM
            continue
        strtab = section(link)[4]
        for k in range(1, size // entsize):
            name, _, _, _, value, _ = struct.unpack_from("<IBBHQQ", data, off + k * entsize)
            if data[strtab + name:data.index(b"\0", strtab + name)] == b"jaxonnx_plugin_init_v1":
                for j in range(phnum):
                    p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from(
                        "<IIQQQQ", data, phoff + j * phentsize)
                    if p_type == 1 and p_vaddr <= value < p_vaddr + p_filesz:  # PT_LOAD
                        return value - p_vaddr + p_offset
    raise AssertionError(f"no jaxonnx_plugin_init_v1 in {path}")


def _damaged_copy(src: Path, dst: Path) -> Path:
    """A copy of `src` whose headers are intact but whose 4 KiB of code from its
    entry point on are ud2 instructions, as a bad copy could leave it: loading
    it runs into an illegal instruction (SIGILL)."""
    data = bytearray(src.read_bytes())
    at = _entry_offset(src)
    data[at:at + 4096] = b"\x0f\x0b" * 2048
    dst.write_bytes(bytes(data))
    return dst


# ---------------------------------------------------------------- crashing plugins

def test_a_damaged_copy_of_a_bundled_plugin_is_skipped_and_the_conversion_succeeds(tmp_path):
    folder = tmp_path / "my_plugins"
    folder.mkdir()
    damaged = _damaged_copy(_plugins.BUNDLED_PLUGINS / "jaxonnx_lax_elementwise.so",
                            folder / "jaxonnx_lax_elementwise.so")
    with pytest.warns(_plugins.PluginWarning) as record:
        model = jaxonnx.to_onnx(lambda x: jnp.tanh(x) * 2.0, [("B", 3)], plugin_dirs=[folder])
    msg = _warning_for(_warnings(record), damaged.name)
    assert msg.startswith(f"jaxonnx skipped {damaged}: it crashed the preflight's test process "
                          f"with SIGILL"), msg
    assert "jaxonnx_plugin_init_v1" in msg and "was not loaded into this process" in msg
    testing.expect_graph(model, ["Tanh -> Mul"], match="exact")
    x = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    assert jaxonnx.allclose(lambda x: jnp.tanh(x) * 2.0, model, [x])


def test_copies_of_a_bundled_plugin_are_skipped_for_the_bundled_one(tmp_path):
    # Damage that the preflight's run does not reach (here: bytes appended) still
    # shows: the file presents itself as a bundled plugin but is not that file.
    folder = tmp_path / "copies"
    folder.mkdir()
    bundled = _plugins.BUNDLED_PLUGINS / "jaxonnx_lax_elementwise.so"
    shutil.copy(bundled, folder / "same.so")
    (folder / "modified.so").write_bytes(bundled.read_bytes() + b"\0" * 16)
    with pytest.warns(_plugins.PluginWarning) as record:
        model = jaxonnx.to_onnx(jnp.tanh, [(3,)], plugin_dirs=[folder])
    messages = _warnings(record)
    same = _warning_for(messages, "same.so")
    assert "it is an identical copy of jaxonnx's bundled plugin 'lax_elementwise'" in same
    assert "which is used instead" in same
    modified = _warning_for(messages, "modified.so")
    assert "presents itself as jaxonnx's bundled plugin 'lax_elementwise'" in modified
    assert "its bytes differ from that file's: a damaged copy" in modified
    assert [n.op_type for n in model.graph.node] == ["Tanh"]


def test_a_crashing_init_and_an_aborting_lowering_are_skipped_with_their_signals(test_plugins):
    crashing = test_plugins / "crashing"
    with pytest.warns(_plugins.PluginWarning) as record:
        reg = _plugins.registry([crashing])
    messages = _warnings(record)
    init = _warning_for(messages, "crash_init.so")
    assert "SIGSEGV (Segmentation fault) in its entry point jaxonnx_plugin_init_v1" in init
    abort = _warning_for(messages, "abort_lower.so")
    assert ("SIGABRT (Aborted) while lowering 'test.abort' on its test equation "
            "int32[2,2] -> int32[2,2]") in abort
    assert not reg.has("test.abort") and not reg.has("test.passes")
    assert os.path.realpath(crashing / "crash_init.so") in _preflight.refused  # for testing.check
    # Bundled plugins are unaffected, and the process lives on to convert.
    with pytest.warns(_plugins.PluginWarning, match="crash_init.so"):
        model = jaxonnx.to_onnx(jnp.sin, [(3,)], plugin_dirs=[crashing])
    assert [n.op_type for n in model.graph.node] == ["Sin"]


def test_a_hanging_init_is_skipped_after_the_timeout(test_plugins, monkeypatch):
    monkeypatch.setenv(_preflight.TIMEOUT_ENV_VAR, "1")
    with pytest.warns(_plugins.PluginWarning) as record:
        _plugins.registry([test_plugins / "hanging"])
    msg = _warning_for(_warnings(record), "hang_init.so")
    assert "it hung the preflight's test process (no answer within 1 s) in its entry point " \
           "jaxonnx_plugin_init_v1" in msg


def test_a_failing_test_equation_is_reported_but_does_not_keep_the_plugin_out(test_plugins):
    reg = _plugins.registry([test_plugins / "declining"])
    assert reg.has("test.declines") and reg.has("test.passes")
    outcome = _preflight.check_files([str(test_plugins / "declining" / "declining.so")])
    (path, o), = outcome.items()
    assert o["status"] == "ok" and o["cached"]  # the registry's preflight, reused
    tests = {p["name"]: p["tests"] for p in o["primitives"]}
    assert tests["test.passes"] == [{"eqn": "float32[3] -> float32[3]", "error": ""}]
    assert "declining on purpose" in tests["test.declines"][0]["error"]


# ---------------------------------------------------------------- the cache and the switch

def test_the_cache_runs_each_file_once_and_again_when_it_changes(test_plugins, tmp_path,
                                                                 monkeypatch):
    folder = tmp_path / "plugins"
    folder.mkdir()
    shutil.copy(test_plugins / "good" / "good.so", folder / "good.so")
    runs = []
    real_run = _preflight.run_child
    monkeypatch.setattr(_preflight, "run_child", lambda p, *a: runs.append(p) or real_run(p, *a))
    assert _plugins.registry([folder]).has("test.identity")
    assert runs == [os.path.realpath(folder / "good.so")]
    cache = json.loads((tmp_path / "cache" / _preflight.CACHE_FILE).read_text())
    (outcome,) = cache["checks"].values()
    assert outcome["status"] == "ok" and outcome["name"] == "test_good"
    # Another process: a new in-memory cache and registry, the same cache file.
    _preflight._caches.clear()
    _plugins._cache.clear()
    assert _plugins.registry([folder]).has("test.identity")
    assert len(runs) == 1
    # New content under the same name is checked again (this process keeps the
    # plugin it loaded from that path: plugins are never unloaded).
    shutil.copy(test_plugins / "declining" / "declining.so", folder / "good.so")
    _plugins.registry([folder])
    assert len(runs) == 2


def test_the_preflight_can_be_turned_off(test_plugins, monkeypatch):
    monkeypatch.setenv(_preflight.ENV_VAR, "0")
    monkeypatch.setattr(_preflight, "run_child", lambda *a: pytest.fail("a child ran"))
    assert _plugins.registry([test_plugins / "good"]).has("test.identity")


def test_a_cache_folder_that_cannot_be_written_only_costs_the_checks(test_plugins, tmp_path,
                                                                     monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    monkeypatch.setenv(_preflight.CACHE_ENV_VAR, str(blocked / "cache"))
    assert _plugins.registry([test_plugins / "good"]).has("test.identity")


# ---------------------------------------------------------------- bundled plugins

def test_the_build_writes_the_manifest_of_the_bundled_plugins():
    sums = _preflight.manifest(_plugins.BUNDLED_PLUGINS)
    files = {p.name for p in _plugins.BUNDLED_PLUGINS.glob("*.so")}
    assert sums is not None and set(sums) == files
    for name, sha in sums.items():
        assert hashlib.sha256((_plugins.BUNDLED_PLUGINS / name).read_bytes()).hexdigest() == sha


def _fake_bundled(tmp_path, monkeypatch, names):
    """A bundled folder of copies of some bundled plugins, with their manifest lines."""
    folder = tmp_path / "bundled"
    folder.mkdir()
    lines = (_plugins.BUNDLED_PLUGINS / _preflight.MANIFEST).read_text().splitlines()
    (folder / _preflight.MANIFEST).write_text(
        "".join(f"{line}\n" for line in lines if line.split("  ")[1] in names))
    for name in names:
        shutil.copy(_plugins.BUNDLED_PLUGINS / name, folder / name)
    monkeypatch.setattr(_plugins, "BUNDLED_PLUGINS", folder)
    monkeypatch.setattr(_preflight, "run_child", lambda *a: pytest.fail("a bundled file ran"))
    return folder


def test_a_bundled_file_that_does_not_match_the_manifest_is_refused_before_dlopen(
        tmp_path, monkeypatch):
    folder = _fake_bundled(tmp_path, monkeypatch, ["jaxonnx_lax_math.so", "jaxonnx_call.so"])
    with open(folder / "jaxonnx_lax_math.so", "ab") as f:
        f.write(b"\0" * 16)  # loadable, but not the file the build made
    with pytest.warns(_plugins.PluginWarning) as record:
        reg = _plugins.registry()
    msg = _warning_for(_warnings(record), "jaxonnx_lax_math.so")
    assert "does not match the SHA-256 jaxonnx's build recorded for it in SHA256SUMS" in msg
    assert "Reinstall jaxonnx" in msg
    assert [p["name"] for p in reg.plugins] == ["call"]  # the intact one loads
    assert str(folder / "jaxonnx_lax_math.so") not in {p["file"] for p in reg.plugins}


def test_the_manifest_is_checked_by_hash_once_then_by_stat(tmp_path, monkeypatch):
    _fake_bundled(tmp_path, monkeypatch, ["jaxonnx_call.so"])
    hashed = []
    real_sha = _preflight._sha256
    monkeypatch.setattr(_preflight, "_sha256", lambda p: hashed.append(p) or real_sha(p))
    assert _plugins.registry().has("closed_call")
    assert len(hashed) == 1
    _preflight._caches.clear()
    _plugins._cache.clear()
    assert _plugins.registry().has("closed_call")
    assert len(hashed) == 1  # a new process trusts the recorded hash of an unchanged file


def test_a_missing_manifest_is_a_clear_error(tmp_path, monkeypatch):
    folder = _fake_bundled(tmp_path, monkeypatch, ["jaxonnx_call.so"])
    (folder / _preflight.MANIFEST).unlink()
    with pytest.raises(jaxonnx.ConversionError, match=r"SHA256SUMS is missing.*reinstall jaxonnx"):
        jaxonnx.to_onnx(jnp.sin, [(3,)])


# ---------------------------------------------------------------- on demand

def _cli(*args):
    return subprocess.run([sys.executable, "-m", "jaxonnx", "plugins", *map(str, args)],
                          capture_output=True, text=True)


def _check_json(capsys, *dirs):
    """`plugins --check DIR... --json` in this process (it loads no plugin here)."""
    from jaxonnx.__main__ import main
    code = main(["plugins", "--check", *map(str, dirs), "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_cli_check_prints_a_table_and_fails_on_a_crash(test_plugins, capsys):
    crashing, good = test_plugins / "crashing", test_plugins / "good"
    run = _cli("--check", crashing, good)
    assert run.returncode == 1, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("Preflight of 3 plugin files")
    rows = {Path(line.split()[-1]).name: (line.split()[0], detail.strip())
            for line, detail in zip(lines[3::2], lines[4::2])}
    assert rows["abort_lower.so"][0] == "crashed" and "SIGABRT" in rows["abort_lower.so"][1]
    assert rows["crash_init.so"][0] == "crashed" and "SIGSEGV" in rows["crash_init.so"][1]
    assert rows["good.so"] == ("ok", "'test_good' 1.2.3: 3 primitives, 2 test equations passed")
    code, rows = _check_json(capsys, good)
    assert code == 0 and [(Path(r["file"]).name, r["result"]) for r in rows] == [("good.so", "ok")]


def test_cli_check_of_the_bundled_plugins_and_other_files(test_plugins, capsys):
    code, rows = _check_json(capsys)
    bundled = [r for r in rows if Path(r["file"]).parent == _plugins.BUNDLED_PLUGINS]
    assert len(bundled) == len(list(_plugins.BUNDLED_PLUGINS.glob("*.so")))
    assert all(r["result"] == "ok" and "matches SHA256SUMS" in r["detail"] for r in bundled)
    code, rows = _check_json(capsys, test_plugins / "garbage", test_plugins / "declining")
    assert code == 1
    by_name = {Path(r["file"]).name: r for r in rows}
    assert by_name["truncated.so"]["result"] == "skipped"
    assert "(truncated?)" in by_name["truncated.so"]["detail"]
    assert by_name["garbage.so"]["result"] == "skipped"
    assert "dlerror" in by_name["garbage.so"]["detail"]
    assert by_name["declining.so"]["result"] == "test failed"
    assert "declining on purpose" in by_name["declining.so"]["detail"]


# ---------------------------------------------------------------- jaxonnx.testing

def test_check_plugin_reports_a_crash_with_its_signal_and_primitive(test_plugins):
    with pytest.raises(AssertionError) as info:
        testing.check_plugin(test_plugins / "crashing" / "abort_lower.so")
    assert "SIGABRT" in str(info.value) and "while lowering 'test.abort'" in str(info.value)
    with pytest.raises(AssertionError, match="SIGSEGV"):
        testing.check_plugin(test_plugins / "crashing" / "crash_init.so")
    with pytest.raises(AssertionError, match=r"test\.declines: its test equation float32\[3\] "
                                             r"-> float32\[3\] failed: .*declining on purpose"):
        testing.check_plugin(test_plugins / "declining" / "declining.so")
    info = testing.check_plugin(test_plugins / "good" / "good.so")
    assert [t["error"] for p in info["preflight"]["primitives"] for t in p["tests"]] == ["", ""]


def test_check_fails_naming_a_plugin_that_failed_its_preflight(test_plugins):
    with pytest.raises(AssertionError, match=r"(?s)failed jaxonnx's preflight:.*abort_lower\.so.*"
                                             r"SIGABRT"):
        testing.check(jnp.sin, [(3,)], plugin_dirs=[test_plugins / "crashing"],
                      variants=[testing.Variant("float32", False)])


def test_generated_testcases_run_in_a_child_so_a_crash_fails_only_that_test(
        test_plugins, tmp_path, monkeypatch):
    # With the preflight off nothing but the child stands between an aborting
    # lowering and pytest (with it on, a lowering that aborts only on avals its
    # test equations do not cover would be the same).
    monkeypatch.setenv(_preflight.ENV_VAR, "0")
    folder = tmp_path / "aborting"
    folder.mkdir()
    shutil.copy(test_plugins / "crashing" / "abort_lower.so", folder / "abort_lower.so")
    (tmp_path / "crashy_cases.py").write_text(
        "import jax.numpy as jnp\n"
        "import jaxonnx\n"
        "from jaxonnx.testing import Testcase, Variant\n"
        f"DIRS = [{str(folder)!r}]\n"
        "def aborts(x):\n"
        "    return jaxonnx.primitive('test.abort', plugin_dirs=DIRS).bind(x)\n"
        "TESTCASES = [Testcase('aborts', aborts, [(2, 2)], plugin_dirs=DIRS,\n"
        "                      variants=[Variant('float32', False)]),\n"
        "             Testcase('sine', jnp.sin, [('B', 3)], variants=[Variant('float32', True)])]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import crashy_cases
    cases = testing.expand(crashy_cases.TESTCASES)
    for case in cases:
        case.module = "crashy_cases"  # as the pytest plugin sets it
    try:
        with pytest.raises(AssertionError) as info:
            cases[0].run()
        assert str(info.value).startswith(
            "aborts-f32-static: the conversion crashed its test process with SIGABRT (Aborted) "
            "while lowering 'test.abort' (plugin 'test_abort')"), str(info.value)
        model = cases[1].run()  # a new child for the next case
        testing.expect_graph(model, ["Sin"], match="exact", inputs=[("B", 3)])
    finally:
        server = testing._CaseServer._servers.pop("crashy_cases", None)
        if server:
            server.close()
