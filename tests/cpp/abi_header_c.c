/* plugin_abi.h must compile as C99 (no C++ in it), and its frozen layouts hold
 * in C. Runs as a test so that it fails loudly, not only at compile time. */
#include <jaxonnx/plugin_abi.h>

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#if defined(__cplusplus)
#error "this file must be compiled as C"
#endif

static jxo_status* lower(const jxo_api* api, jxo_lowering* ctx, void* user_data) {
  (void)api; (void)ctx; (void)user_data;
  return NULL;
}

int main(void) {
  int failures = 0;
  jxo_aval aval;
  jxo_primitive_desc prim;
  memset(&aval, 0, sizeof aval);
  memset(&prim, 0, sizeof prim);
  aval.struct_size = (uint32_t)offsetof(jxo_aval, dims); /* a "v0" aval without dims */
  prim.struct_size = sizeof prim;
  prim.lower = lower;
#define EXPECT(c) do { if (!(c)) { fprintf(stderr, "FAILED: %s\n", #c); ++failures; } } while (0)
  EXPECT(JXO_ABI_MAJOR == 1);
  EXPECT(strcmp(JXO_ENTRY_SYMBOL, "jaxonnx_plugin_init_v1") == 0);
  EXPECT(JXO_HAS_FIELD(&aval, jxo_aval, rank));
  EXPECT(!JXO_HAS_FIELD(&aval, jxo_aval, dims));
  EXPECT(JXO_HAS_FIELD(&prim, jxo_primitive_desc, summary));
  EXPECT(offsetof(jxo_host, get_api) == 8);
  EXPECT(sizeof(jxo_dim) == 8 + sizeof(jxo_str));
  EXPECT(JXO_NO_VALUE == (jxo_value)-1);
  EXPECT(prim.lower(NULL, NULL, NULL) == NULL);
  /* minor 3: status codes are distinct, JXO_OK is 0, and the table grew at its end */
  EXPECT(JXO_ABI_MINOR >= 3);
  EXPECT(JXO_OK == 0 && JXO_ERROR == 1 && JXO_NESTED_FAILURE == 5 && JXO_INTERNAL == 6);
  EXPECT(offsetof(jxo_api, status_create_with_code) ==
         offsetof(jxo_api, rw_replace) + sizeof(void*));
  EXPECT(offsetof(jxo_api, status_code) + sizeof(void*) == offsetof(jxo_api, target));
  /* minor 4: a primitive's test equations are the last fields, read as absent
   * (none) from a descriptor of an older minor */
  EXPECT(JXO_ABI_MINOR >= 4);
  EXPECT(offsetof(jxo_primitive_desc, num_test_eqns) + sizeof(size_t) == sizeof(jxo_primitive_desc));
  prim.struct_size = (uint32_t)offsetof(jxo_primitive_desc, test_eqns);
  EXPECT(!JXO_HAS_FIELD(&prim, jxo_primitive_desc, test_eqns));
  {
    const jxo_aval* ins[1];
    jxo_test_eqn test;
    const jxo_test_eqn* tests[1];
    memset(&test, 0, sizeof test);
    ins[0] = &aval;
    test.struct_size = sizeof test;
    test.inputs = ins;
    test.num_inputs = 1;
    tests[0] = &test;
    prim.struct_size = sizeof prim;
    prim.test_eqns = tests;
    prim.num_test_eqns = 1;
    EXPECT(JXO_HAS_FIELD(&prim, jxo_primitive_desc, num_test_eqns));
    EXPECT(JXO_HAS_FIELD(prim.test_eqns[0], jxo_test_eqn, num_outputs) &&
           prim.test_eqns[0]->num_outputs == 0);
  }
  /* minor 5: target profiles at the table's end; declared numerics at the
   * end of the binding and rule descriptors, UNDECLARED (0) when absent */
  EXPECT(JXO_ABI_MINOR >= 5);
  EXPECT(offsetof(jxo_api, rw_is_output) == offsetof(jxo_api, rw_target_supports) + sizeof(void*));
  /* minor 7: rw_is_output at the table's end */
  EXPECT(JXO_ABI_MINOR >= 7);
  EXPECT(offsetof(jxo_api, rw_is_output) + sizeof(void*) == sizeof(jxo_api));
  EXPECT(offsetof(jxo_api, target_supports) == offsetof(jxo_api, target) + sizeof(void*));
  EXPECT(JXO_NUMERICS_UNDECLARED == 0 && JXO_NUMERICS_FINITE == 1 && JXO_NUMERICS_EXACT == 2);
  EXPECT(offsetof(jxo_binding, numerics) > offsetof(jxo_binding, leading_dims_operands));
  EXPECT(offsetof(jxo_binding, numerics_note) + sizeof(jxo_str) == sizeof(jxo_binding));
  EXPECT(offsetof(jxo_rule_desc, numerics) > offsetof(jxo_rule_desc, summary));
  EXPECT(offsetof(jxo_rule_desc, numerics_note) + sizeof(jxo_str) == sizeof(jxo_rule_desc));
  {
    jxo_rule_desc rule;
    memset(&rule, 0, sizeof rule);
    rule.struct_size = (uint32_t)offsetof(jxo_rule_desc, numerics); /* a minor-4 rule */
    EXPECT(!JXO_HAS_FIELD(&rule, jxo_rule_desc, numerics));
  }
  /* minor 6: 4-bit integers, numbered as ONNX numbers them */
  EXPECT(JXO_ABI_MINOR >= 6);
  EXPECT(JXO_DTYPE_UINT4 == 21 && JXO_DTYPE_INT4 == 22 && JXO_DTYPE_BFLOAT16 == 16);
  if (failures == 0) printf("plugin_abi.h compiles and holds as C99\n");
  return failures == 0 ? 0 : 1;
}
