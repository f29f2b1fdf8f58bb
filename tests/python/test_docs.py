"""Generated docs stay in step with the plugins' metadata and the passes' contracts."""

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
