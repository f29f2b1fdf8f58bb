"""The plugin SDK as a third party uses it: the template built from a copy and
installed into a venv (entry-point discovery), overrides of a bundled lowering,
the registry cache, jaxonnx.primitive in JAX, and the jaxonnx.testing harness."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxonnx
from jaxonnx import _plugins, testing
from jaxonnx.testing import Variant, expect_graph

ROOT = Path(__file__).resolve().parents[2]
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")
SDK_PLUGINS_BUILD = ROOT / "build" / f"pytest-sdk-plugins-{WORKER}"
TEMPLATE_BUILD = ROOT / "build" / f"pytest-plugin-template-{WORKER}"


def _run(cmd, **kw):
    run = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if run.returncode != 0:
        pytest.fail(f"{' '.join(map(str, cmd))} failed ({run.returncode}):\n{run.stdout}\n"
                    f"{run.stderr}")
    return run.stdout


@pytest.fixture(scope="session")
def sdk_plugins() -> Path:
    """tests/plugins_sdk built against the installed SDK: out/override, out/multi."""
    cmakedir = _run([sys.executable, "-m", "jaxonnx", "--cmakedir"]).strip()
    configure = ["cmake", "-S", ROOT / "tests" / "plugins_sdk", "-B", SDK_PLUGINS_BUILD,
                 f"-Djaxonnx_DIR={cmakedir}", "-DCMAKE_BUILD_TYPE=Release"]
    if not (SDK_PLUGINS_BUILD / "CMakeCache.txt").exists() and shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    _run(configure)
    _run(["cmake", "--build", SDK_PLUGINS_BUILD])
    return SDK_PLUGINS_BUILD / "out"


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    monkeypatch.delenv(_plugins.ENV_VAR, raising=False)
    monkeypatch.delenv(_plugins.OVERRIDES_ENV_VAR, raising=False)


# ---------------------------------------------------------------- overrides

def test_a_double_claim_without_a_choice_is_an_error_naming_both(sdk_plugins):
    with pytest.raises(jaxonnx.ConversionError) as info:
        jaxonnx.to_onnx(jnp.tanh, [(3,)], plugin_dirs=[sdk_plugins / "override"])
    msg = str(info.value)
    assert "'tanh' is claimed by two plugins" in msg
    assert "'lax_elementwise'" in msg and "'override_tanh'" in msg
    assert "plugin_overrides={'tanh': 'override_tanh'}" in msg


def test_an_override_replaces_a_bundled_lowering(sdk_plugins):
    dirs = [sdk_plugins / "override"]
    fn = lambda x: jnp.tanh(x) * 3.0  # noqa: E731
    models = testing.check(fn, [("B", 5)], plugin_dirs=dirs,
                           plugin_overrides={"tanh": "override_tanh"},
                           variants=[Variant("float32", True)], atol=1e-6)
    expect_graph(models[Variant("float32", True)], ["Mul -> Sigmoid -> Mul -> Sub -> Mul"],
                 match="exact", absent=["Tanh"])
    # The bundled lowering wins when the override names it, and by file path too.
    bundled = jaxonnx.to_onnx(fn, [(5,)], plugin_dirs=dirs, plugin_overrides={"tanh": "lax_elementwise"})
    expect_graph(bundled, ["Tanh -> Mul"], match="exact")
    (so,) = (sdk_plugins / "override").glob("override_tanh*")
    by_path = jaxonnx.to_onnx(fn, [(5,)], plugin_dirs=dirs, plugin_overrides={"tanh": str(so.resolve())})
    expect_graph(by_path, ["Sigmoid"], absent=["Tanh"])


def test_an_override_from_the_environment(sdk_plugins, monkeypatch):
    monkeypatch.setenv(_plugins.OVERRIDES_ENV_VAR, "tanh=override_tanh")
    model = jaxonnx.to_onnx(jnp.tanh, [(4,)], plugin_dirs=[sdk_plugins / "override"])
    expect_graph(model, ["Sigmoid"], absent=["Tanh"])
    # The argument wins over the variable.
    model = jaxonnx.to_onnx(jnp.tanh, [(4,)], plugin_dirs=[sdk_plugins / "override"],
                            plugin_overrides={"tanh": "lax_elementwise"})
    expect_graph(model, ["Tanh"], match="exact")
    monkeypatch.setenv(_plugins.OVERRIDES_ENV_VAR, "tanh")
    with pytest.raises(jaxonnx.ConversionError, match="is not primitive=plugin"):
        jaxonnx.to_onnx(jnp.tanh, [(4,)])


def test_an_override_naming_a_plugin_that_does_not_claim_it(sdk_plugins):
    with pytest.raises(jaxonnx.ConversionError) as info:
        jaxonnx.to_onnx(jnp.tanh, [(3,)], plugin_dirs=[sdk_plugins / "override"],
                        plugin_overrides={"tanh": "lax_math"})
    msg = str(info.value)
    assert "tanh=lax_math" in msg and "'override_tanh'" in msg and "'lax_elementwise'" in msg
    with pytest.raises(jaxonnx.ConversionError, match="no loaded plugin claims it"):
        jaxonnx.to_onnx(jnp.tanh, [(3,)], plugin_overrides={"no.such": "x"})


def test_cli_lists_a_conflict_instead_of_a_traceback(sdk_plugins):
    env = {k: v for k, v in os.environ.items()
           if k not in (_plugins.ENV_VAR, _plugins.OVERRIDES_ENV_VAR)}
    cmd = [sys.executable, "-m", "jaxonnx", "plugins", "--plugin-dir", str(sdk_plugins / "override")]
    text = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert text.returncode == 0 and "Traceback" not in text.stderr, text.stderr
    assert "conflict: primitive 'tanh' is claimed by 'lax_elementwise'" in text.stdout
    assert "unusable until one is chosen" in text.stdout
    info = json.loads(subprocess.run(cmd + ["--json"], capture_output=True, text=True, env=env,
                                     check=True).stdout)
    (conflict,) = info["conflicts"]
    assert conflict["primitive"] == "tanh" and conflict["winner"] is None
    assert [name for name, _ in conflict["plugins"]] == ["lax_elementwise", "override_tanh"]
    env[_plugins.OVERRIDES_ENV_VAR] = "tanh=override_tanh"
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
    assert "'override_tanh' wins (override)" in out


# ---------------------------------------------------------------- entry points

def test_entry_points_give_folders_and_a_broken_one_only_warns(sdk_plugins, tmp_path, monkeypatch):
    """Entry-point resolution in-process, on a hand-made distribution; the template test
    below installs a real one with pip."""
    dist = tmp_path / "fake_jaxonnx_plugins-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-jaxonnx-plugins\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[jaxonnx.plugins]\nb_multi = fake_ep:FOLDER\na_broken = fake_ep_missing:nothing\n"
        "c_listed = fake_ep:folders\n")
    (tmp_path / "fake_ep.py").write_text(
        f"FOLDER = {str(sdk_plugins / 'multi')!r}\n"
        f"def folders():\n    return [FOLDER, {str(sdk_plugins / 'multi')!r}]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with pytest.warns(_plugins.PluginWarning, match="a_broken.*ModuleNotFoundError"):
            folders = _plugins.entry_point_folders(refresh=True)
        assert folders == [str(sdk_plugins / "multi")]  # once, though two entry points give it
        assert jaxonnx.plugin_folders()[1] == str(sdk_plugins / "multi")
        assert _plugins.registry().has("sdk.pos_neg")
    finally:
        monkeypatch.undo()
        _plugins.entry_point_folders(refresh=True)
    assert str(sdk_plugins / "multi") not in jaxonnx.plugin_folders()


# ---------------------------------------------------------------- registry cache

def test_registry_is_cached_until_a_folder_changes(sdk_plugins, tmp_path):
    folder = tmp_path / "plugins"
    folder.mkdir()
    shutil.copy(next((sdk_plugins / "multi").glob("*.so")), folder / "multi.so")
    first = _plugins.registry([folder])
    assert _plugins.registry([folder]) is first
    assert _plugins.registry([folder], {"sdk.pos_neg": "sdk_multi"}) is not first
    shutil.copy(next((sdk_plugins / "override").glob("*.so")), folder / "override.so")
    with pytest.raises(jaxonnx.ConversionError, match="claimed by two plugins"):
        _plugins.registry([folder])  # rescanned: the new file is seen
    (folder / "override.so").unlink()
    again = _plugins.registry([folder])
    assert again.has("sdk.pos_neg") and not any(p["name"] == "override_tanh" for p in again.plugins)


# ---------------------------------------------------------------- jaxonnx.primitive in JAX

def _pos_neg_reference(x):
    return jax.nn.relu(x), jax.nn.relu(-x)


@pytest.fixture
def pos_neg(sdk_plugins):
    return jaxonnx.primitive("sdk.pos_neg", plugin_dirs=[sdk_plugins / "multi"],
                             impl=_pos_neg_reference, multiple_results=True, batching="leading")


def test_primitive_runs_jits_differentiates_and_vmaps(pos_neg):
    x = jnp.linspace(-2.0, 2.0, 8).reshape(2, 4)

    def fn(x):
        a, b = pos_neg.bind(x)
        return a * 2.0 - b

    want = 2.0 * jax.nn.relu(x) - jax.nn.relu(-x)
    np.testing.assert_allclose(fn(x), want)
    np.testing.assert_allclose(jax.jit(fn)(x), want)
    grad = jax.grad(lambda v: fn(v).sum())(x)
    np.testing.assert_allclose(grad, np.where(x > 0, 2.0, 1.0))
    batched = jax.vmap(fn)(jnp.stack([x, -x]))
    np.testing.assert_allclose(batched, jnp.stack([want, 2.0 * jax.nn.relu(-x) - jax.nn.relu(x)]))
    # vmap with batching="leading" keeps the plugin primitive in the program.
    jaxpr = jax.make_jaxpr(jax.vmap(fn, in_axes=1))(jnp.ones((4, 3)))
    assert [e.primitive.name for e in jaxpr.jaxpr.eqns].count("sdk.pos_neg") == 1


def test_primitive_programs_convert(pos_neg, sdk_plugins):
    dirs = [sdk_plugins / "multi"]

    def fn(x):
        a, b = pos_neg.bind(x)
        return a - 0.5 * b

    testing.check(fn, [("B", 3)], plugin_dirs=dirs, expect=["Neg -> Relu -> Mul -> Sub"])
    testing.check(jax.vmap(fn, in_axes=1, out_axes=1), [(3, "B")], plugin_dirs=dirs,
                  expect=["Relu"])
    # A differentiated program converts: the tangent comes from the reference. (One
    # output only: a fan-out gives add_any, which no bundled plugin lowers yet.)
    testing.check(jax.grad(lambda x: (pos_neg.bind(x)[0] * 3.0).sum()), [(5,)], plugin_dirs=dirs,
                  make_inputs=lambda s, d, rng: (rng.standard_normal(s) + 0.1).astype(d))


def test_reference_batching_rule_is_the_default(sdk_plugins):
    p = jaxonnx.primitive("sdk.pos_neg", plugin_dirs=[sdk_plugins / "multi"],
                          impl=_pos_neg_reference, multiple_results=True)
    x = jnp.arange(-3.0, 3.0).reshape(2, 3)
    a, b = jax.vmap(p.bind)(x)
    np.testing.assert_allclose(a, jax.nn.relu(x))
    np.testing.assert_allclose(b, jax.nn.relu(-x))


def test_primitive_without_impl_says_how_to_run_it(sdk_plugins):
    p = jaxonnx.primitive("sdk.pos_neg", plugin_dirs=[sdk_plugins / "multi"], multiple_results=True)
    with pytest.raises(jaxonnx.ConversionError, match="impl="):
        p.bind(jnp.ones(3))
    single = jaxonnx.primitive("sdk.pos_neg", plugin_dirs=[sdk_plugins / "multi"])
    with pytest.raises(jaxonnx.ConversionError, match="multiple_results=True"):
        jax.make_jaxpr(single.bind)(jnp.ones(3))
    with pytest.raises(jaxonnx.ConversionError, match="batching must be"):
        jaxonnx.primitive("sdk.pos_neg", plugin_dirs=[sdk_plugins / "multi"], batching="sideways")


# ---------------------------------------------------------------- the harness

def test_check_plugin_accepts_a_sound_plugin_and_lists_problems(sdk_plugins):
    info = testing.check_plugin(next((sdk_plugins / "multi").glob("*.so")))
    assert info["name"] == "sdk_multi"
    assert info["abi_range"] == f">=1.{jaxonnx._core.ABI_MINOR},<2"
    # tanh is JAX's own primitive: no abstract eval needed.
    testing.check_plugin(next((sdk_plugins / "override").glob("*.so")))
    # The bundled call plugin forwards to subgraphs and emits nothing of its own.
    with pytest.raises(AssertionError) as info:
        testing.check_plugin(_plugins.BUNDLED_PLUGINS / "jaxonnx_call.so")
    assert "closed_call: declares no .emits(...) ops" in str(info.value)
    testing.check_plugin(_plugins.BUNDLED_PLUGINS / "jaxonnx_lax_conv.so")
    with pytest.raises(jaxonnx.ConversionError, match="could not load"):
        testing.check_plugin(ROOT / "README.md")


@pytest.mark.parametrize("so", sorted(p.name for p in _plugins.BUNDLED_PLUGINS.glob("*.so")))
def test_every_bundled_plugin_passes_check_plugin(so):
    # Pass-throughs (the call family, stop_gradient, ...) emit no op of their own;
    # test_docs checks that only those do.
    # equinox defines the primitives its plugin lowers.
    equinox = ("unvmap_any", "unvmap_all", "unvmap_max", "select_if_vmap", "nonbatchable")
    testing.check_plugin(_plugins.BUNDLED_PLUGINS / so, allow_empty_emits=True,
                         defined_elsewhere=equinox)


def test_expect_graph_fails_on_what_it_should(sdk_plugins):
    model = jaxonnx.to_onnx(lambda x, y: jnp.tanh(x) * 2.0, [("B", 3), (2,)])
    expect_graph(model, ["Tanh -> Mul"], match="exact", inputs=[("B", 3), (2,)],
                 outputs=[("B", 3)], counts={"Tanh": 1})
    failing = [
        dict(paths=["Mul -> Tanh"]),
        dict(paths=["Tanh"], match="exact"),
        dict(paths=["Tanh -> Mul", "Tanh -> Mul"]),
        dict(counts={"Tanh": 2}),
        dict(absent=["Mul"]),
        dict(inputs=[(3, 3), (2,)]),
        dict(outputs=[("N", 3)]),
        dict(no_unused_inputs=True),
    ]
    for kw in failing:
        with pytest.raises(AssertionError):
            expect_graph(model, **kw)


def test_check_catches_a_wrong_reference(sdk_plugins):
    wrong = jaxonnx.primitive("sdk.pos_neg", plugin_dirs=[sdk_plugins / "multi"],
                              impl=lambda x: (jax.nn.relu(x), jax.nn.relu(x)),
                              multiple_results=True)
    with pytest.raises(AssertionError, match="vs JAX"):
        testing.check(lambda x: wrong.bind(x)[1], [("B", 3)], plugin_dirs=[sdk_plugins / "multi"],
                      variants=[Variant("float32", True)])


def test_testcases_expand_into_variants():
    cases = testing.expand([
        testing.Testcase("sym", jnp.tanh, [("B", 3)]),
        testing.Testcase("static", jnp.tanh, [(3,)]),
        testing.Testcase("f32", jnp.tanh, [("B", 3)], variants=[Variant("float32", False)]),
    ])
    assert [c.id for c in cases] == ["sym-f32-static", "sym-f32-symbolic", "sym-f64-static",
                                     "sym-f64-symbolic", "static-f32-static", "static-f64-static",
                                     "f32-f32-static"]
    model = cases[3].run()
    expect_graph(model, ["Tanh"], match="exact", inputs=[("B", 3)])
    assert model.graph.input[0].type.tensor_type.elem_type == 11  # DOUBLE


# ---------------------------------------------------------------- the template

def test_new_plugin_refuses_bad_names_and_full_folders(tmp_path):
    from jaxonnx import _new_plugin
    for bad in ("My-Plugin", "1st", "class", ""):
        with pytest.raises(jaxonnx.ConversionError, match="lower-case Python identifier"):
            _new_plugin.write(bad, tmp_path / "x")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("")
    with pytest.raises(jaxonnx.ConversionError, match="not empty"):
        _new_plugin.write("ok", tmp_path / "full")


def test_the_template_ships_in_the_package_and_matches_the_repository():
    from jaxonnx import _new_plugin
    shipped = _new_plugin.template_dir()
    repo = ROOT / "plugin_template"
    files = sorted(p.relative_to(repo) for p in repo.rglob("*") if p.is_file()
                   and "__pycache__" not in p.parts)
    assert files == sorted(p.relative_to(shipped) for p in shipped.rglob("*") if p.is_file()
                           and "__pycache__" not in p.parts)
    for f in files:
        assert (shipped / f).read_bytes() == (repo / f).read_bytes(), f


def test_template_from_a_copy_installs_into_a_venv_is_found_and_passes_its_tests():
    """As a third party would: new-plugin, pip install (no build isolation) into a
    fresh venv that sees this suite's packages, then the project's own pytest."""
    if TEMPLATE_BUILD.exists():
        shutil.rmtree(TEMPLATE_BUILD)
    project, venv = TEMPLATE_BUILD / "tpl_check", TEMPLATE_BUILD / "venv"
    _run([sys.executable, "-m", "jaxonnx", "new-plugin", "tpl_check", project])
    assert "my_plugin" not in (project / "src" / "tpl_check.cpp").read_text()
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    venv_python = venv / "bin" / "python"
    site = Path(_run([venv_python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip())
    # The new venv sees this suite's packages (jaxonnx, scikit-build-core, pytest) after its own.
    (site / "suite.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([sys.executable, "-m", "pip", "--python", venv_python, "install", "-q",
          "--no-build-isolation", "--no-deps", project])
    assert (site / "tpl_check" / "plugins" / "tpl_check.so").is_file()
    env = {k: v for k, v in os.environ.items()
           if k not in (_plugins.ENV_VAR, _plugins.OVERRIDES_ENV_VAR, "PYTEST_XDIST_WORKER")}
    info = json.loads(_run([venv_python, "-m", "jaxonnx", "plugins", "--json"], env=env))
    assert str(site / "tpl_check" / "plugins") in info["folders"]
    (ours,) = [p for p in info["plugins"] if p["name"] == "tpl_check"]
    assert [q["name"] for q in ours["primitives"]] == ["tpl_check.softsign"]
    out = _run([venv_python, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=project, env=env)
    assert " passed" in out and "failed" not in out, out
