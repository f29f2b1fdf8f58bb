"""jaxonnx.testing: the checks jaxonnx's own tests make, for plugin authors.

    from jaxonnx import testing
    testing.check(fn, [("B", 8)], plugin_dirs=[...])      # parity, validity, determinism
    testing.expect_graph(model, ["Transpose -> Conv -> Relu"], match="exact")
    testing.check_plugin("build/my_plugin.so")           # descriptor, test equations

Testcases as data, expanded into float32/float64 x static/symbolic variants:

    TESTCASES = [testing.Testcase("softsign", fn, [("B", 8)], expected_ops=["Softsign"])]
    def test_generated(jaxonnx_case):        # run with `pytest -p jaxonnx.testing`
        jaxonnx_case.run()

The pytest plugin (`-p jaxonnx.testing`, or `pytest_plugins = ["jaxonnx.testing"]`
in a conftest.py) parametrizes every test taking `jaxonnx_case` over the
variants of its module's TESTCASES, and runs them in a child process per test
module (_case_server.py), so a plugin that crashes fails the test with the
signal and the primitive instead of killing pytest ($JAXONNX_TESTING_ISOLATE=0
runs them in the pytest process).

Needs onnxruntime (the `test` extra).
"""

from jaxonnx.testing._inputs import (BATCHES, STATIC_BATCH, VARIANTS, Variant, packed,  # noqa: F401
                                     random_input, _shape_dtype_structs)
from jaxonnx.testing._ort import ORT_LEVELS, ort_levels, ort_session, _test_key  # noqa: F401
from jaxonnx.testing._check import check  # noqa: F401
from jaxonnx.testing._graph import expect_graph, _graph_of  # noqa: F401
from jaxonnx.testing._plugin_check import check_plugin  # noqa: F401
from jaxonnx.testing._cases import Case, Testcase, expand, _CaseServer  # noqa: F401
# The pytest plugin's hooks and fixture: this package is the plugin
# (pyproject's pytest11 entry point, `-p jaxonnx.testing`).
from jaxonnx.testing._pytest import pytest_addoption, pytest_generate_tests  # noqa: F401
try:
    from jaxonnx.testing._pytest import jaxonnx_plugin_dirs  # noqa: F401
except ImportError:  # pragma: no cover (no pytest)
    pass

__all__ = ["check", "expect_graph", "check_plugin", "ort_levels", "ort_session", "ORT_LEVELS",
           "Testcase", "Variant", "Case", "expand", "VARIANTS", "BATCHES", "STATIC_BATCH"]
