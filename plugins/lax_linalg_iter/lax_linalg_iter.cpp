// lax_linalg_iter: the iterative factorizations, each an ONNX Loop whose
// body does one step, so the model size does not grow with the matrix size:
// geqrf, householder_product and qr (qr.cpp), eigh and svd (jacobi.cpp),
// ormqr, hessenberg and tridiagonal (householder.cpp), tridiagonal_solve
// (gtsv) and cholesky_update in their own files. Each file's header says its
// algorithm and the conventions it keeps (JAX's signs and orders).
//
// The matrix dims may be symbolic: trip counts, iotas, eye, masks, pads and
// the Jacobi pair schedule then come from the input's Shape at run time
// (sizes.hpp), so one model serves every size; static sizes keep them as
// constants. Leading batch dims, symbolic included, ride along by
// broadcasting. float32/float64; eigh, svd, qr, geqrf and
// householder_product also complex64/complex128 (complex Jacobi rotations,
// complex Householder reflectors in complex_qr.cpp), the other primitives
// real only.
#include "util.hpp"

using namespace lax_linalg_iter;

JAXONNX_PLUGIN("lax_linalg_iter", "0.1.0") {
  // What sizes.hpp emits for a symbolic matrix size (eye adds a Cast).
  const std::initializer_list<const char*> kSizes = {"Squeeze", "Range", "Unsqueeze"};
  plugin.primitive("eigh", lower_eigh)
      .emits({"Transpose", "Where", "Expand", "Loop", "Mod", "Gather", "Unsqueeze", "Equal", "Cast", "Mul",
              "ReduceSum", "Abs", "Add", "Div", "ReduceMax", "Sub", "GreaterOrEqual", "Sqrt", "Max", "And",
              "LessOrEqual", "Not", "TopK", "GatherElements", "Slice", "Less", "Neg", "Concat"})
      .emits(kSizes)
      .emits_shape_ops()
      .doc(onnx_doc("Loop"))
      .summary("cyclic Jacobi (round-robin pairs, n/2 rotations per Loop step; complex: unitary rotations); "
               "eigenvalues ascending; n may be symbolic");
  plugin.primitive("svd", lower_svd)
      .emits({"Transpose", "Expand", "Loop", "Mod", "Gather", "Unsqueeze", "Equal", "Mul", "ReduceSum",
              "Abs", "Add", "Div", "ReduceMax", "Sub", "GreaterOrEqual", "Sqrt", "Max", "And", "LessOrEqual",
              "Not", "Where", "TopK", "GatherElements", "Slice", "MatMul", "Concat", "Greater", "Neg", "Reshape",
              "Pad", "Less", "Cast"})
      .emits(kSizes)
      .emits_shape_ops()
      .doc(onnx_doc("Loop"))
      .summary("one-sided Jacobi in a Loop (Householder QR first for full_matrices), real or complex; descending "
               "singular values; m, n may be symbolic");
  plugin.primitive("qr", lower_qr)
      .emits({"Expand", "Loop", "GreaterOrEqual", "Greater", "Equal", "Gather", "Unsqueeze", "Where", "ReduceSum",
              "Mul", "Sqrt", "Add", "Neg", "Sub", "Div", "Reshape", "Slice", "Pad", "Cast", "And", "Concat", "Less"})
      .emits(kSizes)
      .emits_shape_ops()
      .doc(onnx_doc("Loop"))
      .summary("Householder QR (geqrf + orgqr) in Loops, LAPACK's sign conventions (complex: real R diagonal); "
               "m, n may be symbolic");
  plugin.primitive("geqrf", lower_geqrf)
      .emits({"Expand", "Loop", "GreaterOrEqual", "Greater", "Equal", "Gather", "Unsqueeze", "Where", "ReduceSum",
              "Mul", "Sqrt", "Add", "Neg", "Sub", "Div", "Reshape", "And", "Concat", "Less"})
      .emits(kSizes)
      .emits_shape_ops()
      .doc(onnx_doc("Loop"))
      .summary("Householder reflectors (dlarfg conventions), one column per Loop step; m, n may be symbolic");
  plugin.primitive("householder_product", lower_householder_product)
      .emits({"Expand", "Loop", "Sub", "Unsqueeze", "Gather", "Greater", "Equal", "Where", "ReduceSum", "Mul", "Cast",
              "Add", "Concat"})
      .emits(kSizes)
      .emits_shape_ops()
      .doc(onnx_doc("Loop"))
      .summary("H_0 ... H_{k-1} applied back to front, one reflector per Loop step; sizes may be symbolic");
  plugin.primitive("tridiagonal_solve", lower_tridiagonal_solve)
      .emits({"Gather", "Loop", "Add", "Min", "Equal", "Where", "Abs", "Less", "Div", "Unsqueeze", "Squeeze", "Mul",
              "Sub", "Neg", "Expand", "Slice", "Transpose", "Cast", "ReduceMax", "ReduceSum"})
      .emits_shape_ops()
      .doc(onnx_doc("Loop"))
      .summary("gtsv: elimination with partial pivoting, then back substitution, one row per Loop step; "
               "n may be symbolic");
  plugin.primitive("cholesky_update", lower_cholesky_update)
      .emits({"Loop", "Gather", "Abs", "Greater", "Where", "Div", "Mul", "Add", "Sqrt", "Equal", "Neg", "Unsqueeze",
              "Sub"})
      .emits(kSizes)
      .emits_shape_ops()
      .doc(onnx_doc("Loop"))
      .summary("JAX's Givens rotations of each row of R against w, one per Loop step; n may be symbolic");
  const std::initializer_list<const char*> kReflector = {
      "Equal", "Greater", "GreaterOrEqual", "Where", "ReduceSum", "Mul", "Add", "Sqrt", "Neg", "Sub", "Div"};
  plugin.primitive("ormqr", lower_ormqr)
      .emits({"Loop", "Sub", "Unsqueeze", "Gather", "Greater", "Equal", "Where", "ReduceSum", "Mul", "Transpose"})
      .emits(kSizes)
      .emits_shape_ops()
      .doc(onnx_doc("Loop"))
      .summary("applies the reflectors H_i of a QR to c without forming Q, one per Loop step (dorm2r); "
               "sizes may be symbolic");
  plugin.primitive("hessenberg", lower_hessenberg)
      .emits(kReflector)
      .emits({"Loop", "Expand", "Unsqueeze", "Gather", "MatMul", "Transpose", "Reshape", "Slice"})
      .emits(kSizes)
      .emits_shape_ops()
      .doc(onnx_doc("Loop"))
      .summary("gehrd: a Householder reflector per column, applied from both sides, one per Loop step; "
               "n may be symbolic");
  plugin.primitive("tridiagonal", lower_tridiagonal)
      .emits(kReflector)
      .emits({"Loop", "Expand", "Unsqueeze", "Gather", "MatMul", "Transpose", "Reshape", "Slice"})
      .emits(kSizes)
      .emits_shape_ops()
      .doc(onnx_doc("Loop"))
      .summary("sytrd: symmetric Householder reduction (dsytd2), one reflector per Loop step; d, e, taus as LAPACK; "
               "n may be symbolic");
}
