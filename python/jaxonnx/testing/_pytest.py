"""The pytest plugin: jaxonnx_case parametrized over a module's TESTCASES, and the
--jaxonnx-plugin-dir option."""

from __future__ import annotations

from jaxonnx.testing._cases import expand


# ---------------------------------------------------------------- pytest plugin

def pytest_addoption(parser):
    parser.addoption("--jaxonnx-plugin-dir", action="append", default=[], metavar="DIR",
                     help="an extra plugin folder for jaxonnx testcases (repeatable)")


def pytest_generate_tests(metafunc):
    if "jaxonnx_case" in metafunc.fixturenames:
        testcases = getattr(metafunc.module, "TESTCASES", None)
        if testcases is None:
            raise ValueError(f"{metafunc.module.__name__}: a test taking jaxonnx_case needs a "
                             f"module-level TESTCASES list of jaxonnx.testing.Testcase")
        cases = expand(testcases)
        for c in cases:
            c.module = metafunc.module.__name__
        metafunc.parametrize("jaxonnx_case", cases, ids=[c.id for c in cases])


def _fixtures():
    import pytest

    @pytest.fixture
    def jaxonnx_plugin_dirs(request):
        """The --jaxonnx-plugin-dir folders given on the command line."""
        return list(request.config.getoption("--jaxonnx-plugin-dir"))

    return jaxonnx_plugin_dirs


try:  # fixtures only when pytest is around; the checks above need no pytest
    jaxonnx_plugin_dirs = _fixtures()
except ImportError:  # pragma: no cover
    pass
