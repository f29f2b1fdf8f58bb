"""Suite-wide settings: every conversion in the tests runs the IR verifier
after lowering and after every optimizer pass (core/src/passes/verify.cpp)."""

import os

os.environ.setdefault("JAXONNX_VERIFY_IR", "1")
