"""benchmarks/roofline.py's FLOP counter on hand-built graphs, against the formulas:
MatMul (broadcast batch dims, symbolic batch), Gemm (transposed operands), Conv
(groups, strides, padding), Attention (4-D and 3-D forms), Einsum, shapes that only
shape plumbing makes static, and the control flow it follows (If: the branch that
runs; Loop: once per iteration, body inputs declared without dims). The peaks are
only run on tiny shapes (no timing assertion)."""

import sys
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import roofline  # noqa: E402

F = TensorProto.FLOAT


def model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs,
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in dict(inits).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)


def vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def ones(*shape):
    return np.ones(shape, np.float32)


def test_matmul_symbolic_batch_and_broadcast():
    m = model([helper.make_node("MatMul", ["x", "w"], ["y"]),
               helper.make_node("MatMul", ["y", "v"], ["z"])],
              [vi("x", ["B", 1, 3, 4])], [vi("z", None)],
              {"w": ones(5, 4, 6), "v": ones(6, 2)})
    f = roofline.count_flops(m, 2)
    # (2, 1, 3, 4) @ (5, 4, 6) -> (2, 5, 3, 6), K = 4; then (2, 5, 3, 6) @ (6, 2)
    assert f.matmul == 2 * (2 * 5 * 3 * 6) * 4 + 2 * (2 * 5 * 3 * 2) * 6
    assert f.conv == 0 and not f.notes


def test_gemm_transposed_operands():
    m = model([helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1)],
              [vi("a", [4, "B"])], [vi("y", None)], {"b": ones(5, 4), "c": ones(5)})
    assert roofline.count_flops(m, 3).matmul == 2 * 3 * 5 * 4  # M=3, N=5, K=4


def test_conv_groups_strides():
    m = model([helper.make_node("Conv", ["x", "w"], ["y"], group=2, strides=[2, 2],
                                pads=[1, 1, 1, 1])],
              [vi("x", ["B", 4, 9, 9])], [vi("y", None)], {"w": ones(6, 2, 3, 3)})
    f = roofline.count_flops(m, 2)
    # output (2, 6, 5, 5), each element (4 / 2) x 3 x 3 multiply-adds
    assert f.conv == 2 * (2 * 6 * 5 * 5) * (2 * 3 * 3)
    assert f.matmul == 0


def test_conv_transpose():
    m = model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2])],
              [vi("x", ["B", 4, 5, 5])], [vi("y", None)], {"w": ones(4, 3, 2, 2)})
    assert roofline.count_flops(m, 1).conv == 2 * (4 * 5 * 5) * (3 * 2 * 2)


def test_attention_4d_and_3d():
    four = model([helper.make_node("Attention", ["q", "k", "v"], ["y"])],
                 [vi("q", ["B", 2, 3, 4]), vi("k", ["B", 2, 5, 4]), vi("v", ["B", 2, 5, 6])],
                 [vi("y", None)])
    assert roofline.count_flops(four, 2).matmul == 2 * 2 * 2 * 3 * 5 * (4 + 6)
    three = model([helper.make_node("Attention", ["q", "k", "v"], ["y"], q_num_heads=2,
                                    kv_num_heads=2)],
                  [vi("q", ["B", 3, 8]), vi("k", ["B", 5, 8]), vi("v", ["B", 5, 8])],
                  [vi("y", None)])
    # 2 heads of 4: 2 x B x H x S x T x D x 2
    assert roofline.count_flops(three, 2).matmul == 2 * 2 * 2 * 3 * 5 * 4 * 2


def test_einsum():
    m = model([helper.make_node("Einsum", ["a", "b"], ["y"], equation="bij,bjk->bik")],
              [vi("a", ["B", 3, 4]), vi("b", ["B", 4, 5])], [vi("y", None)])
    assert roofline.count_flops(m, 2).matmul == 2 * 2 * 3 * 4 * 5


def test_shape_plumbing_resolved_by_the_run():
    # Reshape to a shape computed at run time: inference alone cannot size the MatMul
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("ReduceProd", ["s"], ["n"], keepdims=1),
             helper.make_node("Div", ["n", "four"], ["rows"]),
             helper.make_node("Concat", ["rows", "four"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("MatMul", ["r", "w"], ["y"])]
    m = model(nodes, [vi("x", ["B", 8])], [vi("y", None)],
              {"four": np.array([4], np.int64), "w": ones(4, 3)})
    f = roofline.count_flops(m, 3)
    assert f.matmul == 2 * 6 * 4 * 3 and not f.notes


def test_if_counts_the_branch_that_runs():
    then = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["t"])], "then", [],
                             [vi("t", None)])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [],
                              [vi("e", None)])
    for flag, want in ((True, 2 * 2 * 4 * 4), (False, 0)):
        m = model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                  [vi("x", ["B", 4])], [vi("y", None)],
                  {"w": ones(4, 4), "c": np.array(flag)})
        f = roofline.count_flops(m, 2)
        assert f.matmul == want and not f.notes


def test_loop_counts_every_iteration():
    # body inputs declared without dims, as some exporters write them
    body = helper.make_graph(
        [helper.make_node("MatMul", ["h", "w"], ["h2"]),
         helper.make_node("Identity", ["cond"], ["cond_out"])], "body",
        [vi("i", [], TensorProto.INT64), vi("cond", [], TensorProto.BOOL), vi("h", [None, None])],
        [vi("cond_out", [], TensorProto.BOOL), vi("h2", None)])
    m = model([helper.make_node("Loop", ["n", "yes", "x"], ["y"], body=body)],
              [vi("x", ["B", 4])], [vi("y", None)],
              {"n": np.array(3, np.int64), "yes": np.array(True), "w": ones(4, 4)})
    f = roofline.count_flops(m, 2)
    assert f.matmul == 3 * 2 * 2 * 4 * 4 and not f.notes


def test_peaks_run_on_tiny_shapes():
    best, per = roofline.matmul_peak(1, sizes=((8, 8, 8),), runs=1)
    assert best == per[(8, 8, 8)] > 0
    best, per = roofline.conv_peak(1, sizes=((1, 2, 4, 4, 2),), runs=1)
    assert best > 0
    assert roofline.copy_bandwidth(1, mbytes=1, runs=1) > 0
    assert roofline.numpy_copy_bandwidth(mbytes=1, runs=1) > 0
    assert roofline.numpy_copy_bandwidth(mbytes=1, runs=1, threads=2) > 0
    peaks = roofline.Peaks(1, matmul=10.0, conv=5.0, copy=1.0)
    flops = roofline.Flops(matmul=10 * 10**9, conv=5 * 10**9)
    assert roofline.roofline_seconds(flops, peaks) == 2.0
    assert roofline.percent_of_roofline(flops, 4.0, peaks) == 50.0


def test_weight_bytes_counts_initializers_and_constants():
    body = helper.make_graph([helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(ones(3)))],
                             "b", [], [vi("k", None)])
    m = model([helper.make_node("If", ["c"], ["y"], then_branch=body, else_branch=body)],
              [], [vi("y", None)], {"c": np.array(True), "w": ones(4, 5)})
    assert roofline.weight_bytes(m) == 1 + 4 * 5 * 4 + 2 * 3 * 4
    assert roofline.bandwidth_seconds(10**9, 2.0) == 0.5


def test_kernels_equal_for_equivalent_forms_and_differ_otherwise():
    """kernels() is what onnxruntime runs after optimizing: Softmax over axis -1 or 1 of a
    matrix is the same kernel; one more op is not."""
    def softmax(axis, extra=()):
        nodes = [helper.make_node("MatMul", ["x", "w"], ["y"]),
                 helper.make_node("Softmax", ["y"], ["z" if not extra else "s"], axis=axis)]
        nodes += [helper.make_node(op, ["s"], ["z"]) for op in extra]
        return model(nodes, [vi("x", ["B", 4])], [vi("z", ["B", 3])], {"w": ones(4, 3)})
    a, b = roofline.kernels(softmax(-1)), roofline.kernels(softmax(1))
    assert a == b and ("Softmax", "") in a
    assert roofline.kernels(softmax(1, ["Relu"])) != a


def test_copy_splits_over_threads_and_copies_everything():
    copy = roofline.Copy(threads=3, mbytes=1)
    copy.src[:] = np.arange(copy.src.size, dtype=np.float32)
    copy.run()
    assert np.array_equal(copy.dst, copy.src)
    assert copy.moved == 2 * 2 ** 20
    assert len(copy.parts) == 3
