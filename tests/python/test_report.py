"""to_onnx(report=PATH): the conversion report is written for every example,
holds the facts of the conversion (plugins, binding specs, rewrite rules,
target, optimizer, verify, onnxruntime's profile) and its chart, and never
changes the model."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import onnx
import pytest

import jaxonnx
from jaxonnx import _plugins

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
import _common  # noqa: E402
import run_all  # noqa: E402
from test_examples import quick_model  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def section(text, title):
    """The body of the markdown section `## title`."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"no section {title!r} in the report"
    return match.group(1)


def rows(body):
    """The rows of every table in a section body, as lists of cells (headers left out)."""
    lines = body.splitlines()
    return [[c.strip() for c in ln.strip("|").split(" | ")]
            for k, ln in enumerate(lines)
            if ln.startswith("| ") and not (k + 1 < len(lines) and lines[k + 1].startswith("|---"))]


def bundled():
    return {p["name"]: p for p in _plugins.registry(None, None).plugins}


@pytest.mark.parametrize("name", run_all.EXAMPLES)
def test_report_for_every_example(name, tmp_path):
    module = importlib.import_module(name)
    model = quick_model(module)
    specs = _common.specs(module.inputs(small=True))
    path = tmp_path / f"{name}.md"
    with_report = jaxonnx.to_onnx(model, specs, model_name=name, return_mode="bytes",
                                  report=path)
    without = jaxonnx.to_onnx(model, specs, model_name=name, return_mode="bytes")
    assert with_report == without  # the report never changes the model

    text = path.read_text()
    assert text.startswith(f"# Conversion report: {name}\n")
    # Every primitive of the program is listed with the plugin that lowered it,
    # that plugin's version and file as the registry knows them.
    plugins = bundled()
    lowered = rows(section(text, "Primitives and the plugins that lowered them"))
    assert lowered
    for prim, equations, count, plugin, version, file in lowered:
        assert int(equations) >= 1 or int(count) >= 1
        if plugin in plugins:
            assert version == plugins[plugin]["version"]
            assert file == f"`{plugins[plugin]['file']}`"
            assert int(count) >= 1
    # The op counts agree with the model written.
    proto = onnx.load_from_string(with_report)
    final = {}

    def count(graph):
        for n in graph.node:
            key = n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}:{n.op_type}"
            final[key] = final.get(key, 0) + 1
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    count(a.g)
    count(proto.graph)
    for f in proto.functions:
        count(f)
    table = {r[0]: int(r[2]) for r in rows(section(text, "Nodes before and after the optimizer"))
             if r[0] != "**total**" and len(r) == 4}
    assert {op: n for op, n in table.items() if n} == final
    # The profile's chart is a PNG beside the report, linked from it.
    chart = tmp_path / f"{name}_profile.png"
    assert chart.read_bytes().startswith(PNG_MAGIC)
    profile = section(text, "onnxruntime profile per op type")
    assert f"]({chart.name})" in profile
    assert rows(profile), "the profile lists no op type"


def layer_norm_mlp():
    """A flax nnx Linear and LayerNorm, and a layer norm written in jnp."""
    from flax import nnx

    class Model(nnx.Module):
        def __init__(self):
            self.linear = nnx.Linear(8, 8, rngs=nnx.Rngs(0))
            self.norm = nnx.LayerNorm(8, rngs=nnx.Rngs(0))

        def __call__(self, x):
            y = self.norm(self.linear(x))
            mean = jnp.mean(y, axis=-1, keepdims=True)
            var = jnp.mean(jnp.square(y - mean), axis=-1, keepdims=True)
            return (y - mean) / jnp.sqrt(var + 1e-5)

    return Model()


def test_binding_spec_and_layer_norm_rule_with_their_numerics(tmp_path):
    path = tmp_path / "r.md"
    jaxonnx.to_onnx(layer_norm_mlp(), [("B", 8)], report=path, verify=True)
    text = path.read_text()
    specs = rows(section(text, "Binding specs that fired"))
    layer_norm = [r for r in specs if "LayerNorm" in r[2]]
    assert layer_norm, specs
    assert layer_norm[0][3] in ("exact", "finite")  # its declared numerics
    assert int(layer_norm[0][4]) == 1
    rules = rows(section(text, "Rewrite rules that fired"))
    norm_rules = [r for r in rules if "LayerNormalization" in r[2]]
    assert norm_rules, rules  # the jnp layer norm became one op through a rule
    assert norm_rules[0][3].split()[0] in ("exact", "finite")
    # The flax call is one LayerNormalization from the lowering, the jnp one from the rule.
    ops = {r[0]: r for r in rows(section(text, "Nodes before and after the optimizer"))}
    assert int(ops["LayerNormalization"][1]) == 1 and int(ops["LayerNormalization"][2]) == 2
    # verify's results: every size tried, within tolerance.
    checked = rows(section(text, "Verify"))
    assert {r[0] for r in checked} == {"B=1", "B=2", "B=5"}


def test_no_binding_specs_or_rules_with_fusion_none(tmp_path):
    path = tmp_path / "r.md"
    jaxonnx.to_onnx(layer_norm_mlp(), [("B", 8)], report=path, fusion="none")
    text = path.read_text()
    assert rows(section(text, "Binding specs that fired")) == []
    assert rows(section(text, "Rewrite rules that fired")) == []
    assert "Not asked" in section(text, "Verify")


def test_portable_target_shows_what_the_profile_changed(tmp_path):
    def scan_sum(x):
        def body(c, row):
            return c + jnp.sin(row), c
        return jax.lax.scan(body, jnp.zeros(x.shape[1:]), x)[0]

    path = tmp_path / "portable.md"
    proto = jaxonnx.to_onnx(scan_sum, [(6, 4)], target="portable", report=path)
    text = path.read_text()
    target = section(text, "What the target profile changed or refused")
    assert "Target `portable`" in target and "opset 17" in target
    asked = [r for r in rows(target) if len(r) == 5]
    # The scan's lowering asked for Loop, which portable lacks: it unrolled instead.
    assert any(r[2] == "`scan`" and r[3] == "`Loop`" for r in asked), asked
    assert "Loop" not in {n.op_type for n in proto.graph.node}
    # The default target has Loop: the same question is not a change there.
    path2 = tmp_path / "default.md"
    jaxonnx.to_onnx(scan_sum, [(6, 4)], report=path2)
    default = section(path2.read_text(), "What the target profile changed or refused")
    assert not any(len(r) == 5 and r[3] == "`Loop`" for r in rows(default))


def test_report_names_the_nodes_computed_wider(tmp_path):
    # onnxruntime's CPU provider has no bfloat16 MatMul: the host runs it in float32.
    def fn(x, w):
        return (x.astype(jnp.bfloat16) @ w.astype(jnp.bfloat16)).astype(jnp.float32)

    path = tmp_path / "bf16.md"
    jaxonnx.to_onnx(fn, [(2, 4), (4, 3)], report=path)
    target = section(path.read_text(), "What the target profile changed or refused")
    widened = [r for r in rows(target) if "bfloat16 as float32" in r]
    assert any(r[2] == "MatMul" and r[1] == "`dot_general`" for r in widened), rows(target)


def test_unwritable_report_path_fails_before_converting(tmp_path):
    calls = []

    def fn(x):
        calls.append(1)
        return x + 1

    out = tmp_path / "m.onnx"
    for bad in (tmp_path / "missing" / "r.md", tmp_path):
        with pytest.raises(jaxonnx.ConversionError, match="report"):
            jaxonnx.to_onnx(fn, [(3,)], report=bad, return_mode="file", output_path=out)
    with pytest.raises(jaxonnx.ConversionError, match="report must be"):
        jaxonnx.to_onnx(fn, [(3,)], report=3)
    assert calls == [] and not out.exists()  # nothing traced, nothing written
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(jaxonnx.ConversionError, match="not writable"):
            jaxonnx.to_onnx(fn, [(3,)], report=locked / "r.md")
        assert calls == []


def test_failed_conversion_writes_no_report(tmp_path):
    path = tmp_path / "r.md"
    with pytest.raises(jaxonnx.ConversionError, match="output_names"):  # found after tracing
        jaxonnx.to_onnx(lambda x: x + 1, [(3,)], output_names=["a", "b"], report=path)
    assert list(tmp_path.iterdir()) == []


def test_cli_writes_the_report(tmp_path):
    out, report = tmp_path / "mlp.onnx", tmp_path / "mlp_report.md"
    result = subprocess.run(
        [sys.executable, "-m", "jaxonnx", "convert", "mlp:make_model", "--input", "B,30",
         "-o", str(out), "--report", str(report)],
        cwd=ROOT / "examples", capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert out.exists() and report.read_text().startswith("# Conversion report")
    assert (tmp_path / "mlp_report_profile.png").read_bytes().startswith(PNG_MAGIC)
    help_text = subprocess.run([sys.executable, "-m", "jaxonnx", "convert", "--help"],
                               capture_output=True, text=True).stdout
    assert "--report PATH" in help_text


def test_onnx_function_call_sites_and_body_lowered_once(tmp_path):
    @jaxonnx.onnx_function
    def block(x):
        return jnp.tanh(x) * 2.0

    def fn(x):
        return block(block(x))

    path = tmp_path / "r.md"
    jaxonnx.to_onnx(fn, [("B", 4)], report=path)
    table = {r[0]: r for r in rows(section(path.read_text(),
                                           "Primitives and the plugins that lowered them"))}
    calls = [r for name, r in table.items() if name.startswith("`onnx_fn::")]
    assert len(calls) == 1 and calls[0][1:4] == ["2", "2", "jaxonnx core (onnx_function call site)"]
    # The body's tanh is in the program twice (once per call) and lowered once (one body).
    assert table["`tanh`"][1:4] == ["2", "1", "lax_elementwise"]
