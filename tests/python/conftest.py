"""Suite-wide settings: every conversion in the tests runs the IR verifier
after lowering and after every optimizer pass (core/src/passes/verify.cpp), and
the plugin preflight's cache (jaxonnx/_preflight.py) lives in a fresh folder of
this process, never in the user's cache (child processes inherit it)."""

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("JAXONNX_VERIFY_IR", "1")

_cache = tempfile.mkdtemp(prefix="jaxonnx-test-cache-")
os.environ["JAXONNX_CACHE_DIR"] = _cache
atexit.register(shutil.rmtree, _cache, True)
