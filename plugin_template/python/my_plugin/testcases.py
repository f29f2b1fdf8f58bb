"""The programs my_plugin's tests convert, as data. tests/test_my_plugin.py
expands each into float32/float64 x static/symbolic variants and checks it with
jaxonnx.testing.check (validity, parity with JAX in onnxruntime, optimized vs
raw, deterministic bytes) and the expected ONNX ops."""

from __future__ import annotations

import jax
from jaxonnx.testing import Testcase, Variant

import my_plugin

F32 = [Variant("float32", False), Variant("float32", True)]
F64 = [Variant("float64", False), Variant("float64", True)]

TESTCASES = [
    # float32 has an onnxruntime Softsign kernel: one node.
    Testcase("softsign", my_plugin.softsign, [("B", 8)], expected_ops=["Softsign"],
             expect_options={"match": "exact", "no_unused_inputs": True}, variants=F32),
    # float64 has none: the formula.
    Testcase("softsign_f64", my_plugin.softsign, [("B", 8)], expected_ops=["Abs -> Add -> Div"],
             expect_options={"absent": ["Softsign"]}, variants=F64),
    Testcase("softsign_in_a_program", lambda x, w: my_plugin.softsign(x @ w) * 2.0,
             [("B", 4), (4, 3)], expected_ops=["MatMul -> Softsign -> Mul"], variants=F32),
    Testcase("softsign_vmapped", jax.vmap(my_plugin.softsign), [("B", 2, 5)]),
]
