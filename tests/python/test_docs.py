"""Generated docs stay in step with the plugins' metadata, the passes' contracts and the
CLI's parsers, and the docs site builds with warnings as errors."""

import os
import subprocess
import sys
from pathlib import Path

import jaxonnx._core as core
from jaxonnx import _plugins

ROOT = Path(__file__).resolve().parents[2]


def test_coverage_and_pass_contract_tables_are_generated_from_the_code():
    result = subprocess.run([sys.executable, str(ROOT / "docs" / "generate.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_every_bundled_primitive_declares_its_onnx_ops():
    reg = core.Registry([str(_plugins.BUNDLED_PLUGINS)])
    # Exempt: pass-throughs (the call family, the sharding annotations and shard_map,
    # stop_gradient, the key (un)wrapping that
    # is the identity on key data, custom_linear_solve inlining its solve) and
    # primitives claimed only to refuse them clearly (their summary says "unsupported").
    # debug_print / debug_callback are dropped (no outputs); platform_index and
    # axis_index are constants.
    passthrough = {"stop_gradient", "random_wrap", "random_unwrap", "custom_linear_solve",
                   "debug_print", "debug_callback", "platform_index"}
    undeclared = [p["name"] for plugin in reg.plugins for p in plugin["primitives"]
                  if not p["onnx_ops"] and p["name"] not in passthrough
                  and plugin["name"] not in ("call", "lax_sharding")
                  and not p["summary"].startswith("unsupported")]
    assert undeclared == []


def test_the_docs_site_builds_with_warnings_as_errors(tmp_path):
    # mkdocs --strict fails on a broken link or anchor and on griffe's docstring warnings.
    site = tmp_path / "site"
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q",
                             "-f", str(ROOT / "mkdocs.yml"), "-d", str(site)],
                            capture_output=True, text=True, env=env, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    # The API reference is rendered from the docstrings, parameters included.
    api = (site / "reference" / "python" / "index.html").read_text()
    for name in ("to_onnx", "allclose", "first_divergence", "onnx_function", "external_data"):
        assert name in api, name
    assert "check_plugin" in (site / "reference" / "testing" / "index.html").read_text()
    # Each benchmark page keeps its chart.
    for page, chart in (("compare", "performance.png"), ("latency", "roofline.png"),
                        ("scaling", "scaling.png")):
        assert chart in (site / "benchmarks" / page / "index.html").read_text()
        assert (site / "benchmarks" / chart).is_file()
