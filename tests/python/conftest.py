"""Suite-wide settings: every conversion in the tests runs the IR verifier
after lowering and after every optimizer pass (core/src/passes/verify.cpp), and
the plugin preflight's cache (jaxonnx/_preflight.py) lives in a fresh folder of
this process, never in the user's cache (child processes inherit it)."""

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("JAXONNX_VERIFY_IR", "1")
# Model checks run the optimized model in a default session (level "all") and
# the raw lowering at "disabled" or "basic", picked per test
# (jaxonnx.testing.ort_levels); JAXONNX_TEST_ORT_LEVELS=every runs each
# optimized model at all four levels.
os.environ.setdefault("JAXONNX_TEST_ORT_LEVELS", "fast")

_cache = tempfile.mkdtemp(prefix="jaxonnx-test-cache-")
os.environ["JAXONNX_CACHE_DIR"] = _cache
atexit.register(shutil.rmtree, _cache, True)
