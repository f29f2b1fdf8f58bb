/*
 * jaxonnx plugin ABI — the only contract between the jaxonnx core (the host)
 * and a plugin. Plain C99.
 *
 * Rules (see docs/plugin_author_guide.md):
 *  - One exported symbol: jaxonnx_plugin_init_v1. The ABI major version is in
 *    the name; a host of major N looks only for ..._vN.
 *  - Versions, one mechanism: the plugin's descriptor says the minor it was
 *    built against (jxo_plugin_desc.abi_minor); the host loads it when it
 *    serves that minor (every minor up to its own) and refuses it otherwise.
 *    Nothing else negotiates: which fields a struct has is its struct_size,
 *    on both sides. jxo_host.get_api(minor) only answers whether the host
 *    serves `minor` (and returns the one table), for a plugin that wants to
 *    say so in its own words; callbacks receive the table as their `api`.
 *  - Every struct that crosses starts with struct_size and only grows at the
 *    end. A reader touches a field only if it lies inside struct_size
 *    (JXO_HAS_FIELD). The host reads every struct a plugin hands over through
 *    one normalizer that copies the struct_size bytes into a zeroed struct of
 *    its own layout: a field a plugin's minor did not have reads as zero
 *    (absent). Arrays of such structs are passed as arrays of pointers, so a
 *    struct growing never changes a stride.
 *  - jxo_str and jxo_dim are frozen value types: they never change.
 *  - No C++ exception, std:: type or allocation crosses. Every host function
 *    returns normally: one that can fail returns a jxo_status* (NULL =
 *    success) with a code and a message; one that returns a value answers its
 *    "absent" value (NULL, JXO_NO_VALUE, 0) when it fails inside the host, and
 *    the host then fails the lowering once the callback returns. A plugin
 *    callback returns NULL or a status it made with status_create (or, from
 *    minor 3, status_create_with_code); the host takes it.
 *  - Ownership: the host owns every object a handle names, and every pointer
 *    it returns. Pointers the host hands out are valid for the duration of the
 *    callback that received them, unless stated otherwise. Pointers a plugin
 *    hands to the host are read during the call only (the host copies what it
 *    keeps), except the descriptor and what it points to, which must stay
 *    valid for the life of the process (plugins are never unloaded).
 *  - Strings are UTF-8, pointer + length, not necessarily NUL-terminated. A
 *    jxo_str with size 0 may have a NULL data pointer; one with a nonzero size
 *    may not.
 *
 * Pointer parameters are marked:
 *   [in]            read during the call only; not NULL
 *   [in, optional]  the same, or NULL
 *   [out]           written by the call when it succeeds; not NULL
 *   [ctx]           a handle the host passed to the callback (a jxo_lowering,
 *                   jxo_abstract_eval or jxo_rewrite): host-owned, valid
 *                   during that callback, not NULL
 *   [handle]        a jxo_param or jxo_jaxpr: host-owned, valid for the whole
 *                   conversion; NULL is accepted and answered as absent
 * Returned pointers are host-owned ("borrowed") unless said otherwise.
 *
 * Thread safety:
 *  - Plugin initialization (jaxonnx_plugin_init_v1) is serialized by the host
 *    and runs once per process.
 *  - Within one conversion, callbacks run one at a time on the thread that
 *    converts. They nest: a lowering that calls lower_jaxpr (or graph_end,
 *    which may lower `copy`) runs other lowerings, possibly of the same
 *    primitive, inside its own call, on the same thread. Rewrite rules run
 *    after every lowering, on the same thread.
 *  - Two conversions in two threads are safe, and their callbacks may then run
 *    at the same time (the Python binding releases the GIL while converting;
 *    abstract evaluation runs while JAX traces, possibly during another
 *    thread's conversion). The host keeps all state of a conversion in the
 *    conversion (its handles, graphs, memo, statuses), shares only read-only
 *    data between conversions (the loaded plugins, the host table), and notes
 *    failures of non-status calls per thread. So a plugin is safe for this
 *    when its callbacks keep no mutable state outside the handles they are
 *    given (the SDK's keep none); a plugin that does must guard it.
 */
#ifndef JAXONNX_PLUGIN_ABI_H
#define JAXONNX_PLUGIN_ABI_H

#include <stddef.h>
#include <stdint.h>

#define JXO_ABI_MAJOR 1
/* Minor 1 (append-only): subgraphs (graph_begin, graph_add_input, graph_end,
 * JXO_ATTR_GRAPH and jxo_attr.graph), output_used, and jaxpr introspection
 * (jaxpr_input_aval, jaxpr_output_aval, jaxpr_output_source, jaxpr_depends, and the
 * equations: jaxpr_num_eqns ... jaxpr_output_eqn).
 * Minor 2 (append-only): binding specs (jxo_binding, jxo_primitive_desc.bindings), and
 * rewrite rules (jxo_rule_desc, jxo_plugin_desc.rules and num_rules; the rewrite view
 * and emitters rw_root ... rw_replace of jxo_api).
 * Minor 3 (append-only): status codes (JXO_ERROR ..., status_create_with_code and
 * status_code of jxo_api). No struct a plugin hands over changed.
 * Minor 4 (append-only): test equations for the preflight (jxo_test_eqn,
 * jxo_primitive_desc.test_eqns and num_test_eqns).
 * Minor 5 (append-only): target profiles (target, target_supports and
 * rw_target_supports of jxo_api) and declared numerics (JXO_NUMERICS_*,
 * jxo_binding.numerics and numerics_note, jxo_rule_desc.numerics and
 * numerics_note).
 * Minor 6 (append-only): 4-bit integers (JXO_DTYPE_UINT4, JXO_DTYPE_INT4),
 * and rw_emit_node accepts a node of another domain when the rule declares
 * it ("com.microsoft.MatMulNBits" in its ops) and the target runs that domain
 * (a host of minor <= 5 refuses it).
 * Minor 7 (append-only): rw_is_output of jxo_api, and rw_replace may name a
 * graph output defined before the root (a host of minor <= 6 refuses it).
 * Minor 8 (append-only): JXO_NUMERICS_APPROXIMATE, a rule or spec whose result
 * differs from JAX's beyond float rounding, applied only under to_onnx
 * fusion="approximate" (a host of minor <= 7 refuses a plugin declaring it). */
#define JXO_ABI_MINOR 8

#define JXO_ENTRY_SYMBOL "jaxonnx_plugin_init_v1"

/* True when a struct that says it is `struct_size` bytes long contains FIELD. */
#define JXO_HAS_FIELD(ptr, type, field) \
  ((ptr)->struct_size >= offsetof(type, field) + sizeof(((type*)0)->field))

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- values -- */

/* A UTF-8 string view. Frozen. */
typedef struct jxo_str {
  const char* data;
  size_t size;
} jxo_str;

/* Element types, numbered as ONNX TensorProto.DataType numbers them. */
enum {
  JXO_DTYPE_UNDEFINED = 0,
  JXO_DTYPE_FLOAT32 = 1,
  JXO_DTYPE_UINT8 = 2,
  JXO_DTYPE_INT8 = 3,
  JXO_DTYPE_UINT16 = 4,
  JXO_DTYPE_INT16 = 5,
  JXO_DTYPE_INT32 = 6,
  JXO_DTYPE_INT64 = 7,
  JXO_DTYPE_STRING = 8,
  JXO_DTYPE_BOOL = 9,
  JXO_DTYPE_FLOAT16 = 10,
  JXO_DTYPE_FLOAT64 = 11,
  JXO_DTYPE_UINT32 = 12,
  JXO_DTYPE_UINT64 = 13,
  JXO_DTYPE_COMPLEX64 = 14,
  JXO_DTYPE_COMPLEX128 = 15,
  JXO_DTYPE_BFLOAT16 = 16,
  /* minor 6. In a jxo_tensor a 4-bit element takes one byte, its value in
   * the low nibble (two's complement for INT4), as NumPy (ml_dtypes) holds
   * it; the ONNX file packs two per byte (the host does that on export). */
  JXO_DTYPE_UINT4 = 21,
  JXO_DTYPE_INT4 = 22
};

/* One dimension: a static size, or a symbolic expression as JAX prints it
 * ("B", "2*B", "B + 1"). Frozen. */
typedef struct jxo_dim {
  int64_t value;  /* the size when symbol.size == 0, else unspecified */
  jxo_str symbol; /* empty for a static dim */
} jxo_dim;

/* An abstract value: dtype and shape. */
typedef struct jxo_aval {
  uint32_t struct_size;
  int32_t dtype;       /* JXO_DTYPE_* */
  int64_t rank;        /* number of dims; -1 when the rank is unknown */
  const jxo_dim* dims; /* `rank` entries */
} jxo_aval;

/* A dense tensor, row-major, little-endian. Booleans are one byte each. */
typedef struct jxo_tensor {
  uint32_t struct_size;
  int32_t dtype;
  int64_t rank;
  const int64_t* dims; /* `rank` entries, all static */
  const void* data;
  size_t nbytes;
} jxo_tensor;

/* Status codes (minor 3). A status carries one beside its message; a host
 * call that fails says why with it, and a plugin callback may say why with it
 * (jxo_api.status_create_with_code). Statuses made by status_create, and every
 * status of a plugin built before minor 3, carry JXO_ERROR. New codes may be
 * appended; a reader treats a code it does not know as JXO_ERROR. */
enum {
  JXO_OK = 0,                /* success: the code of the NULL status, never of a status */
  JXO_ERROR = 1,             /* a failure the message explains */
  JXO_INVALID_ARGUMENT = 2,  /* a host call got an argument it cannot use: NULL where a value
                                is needed, out of range, a handle of another scope, bad bytes */
  JXO_DECLINED = 3,          /* a lowering does not handle this equation (its params, dtypes or
                                shapes): the user learns which case is not covered */
  JXO_UNSUPPORTED_OPSET = 4, /* what the lowering needs does not exist at the target opset */
  JXO_NESTED_FAILURE = 5,    /* a lowering the host ran on this one's behalf failed (lower_jaxpr,
                                the copies of graph_end); its message is complete, naming its own
                                plugin, primitive and source line. A plugin passes it on with
                                its code, and the host then reports it unchanged */
  JXO_INTERNAL = 6           /* the host failed (out of memory, a bug); not the plugin's fault */
};

/* ------------------------------------------------------------- handles -- */

typedef struct jxo_status jxo_status;               /* error; NULL = success */
typedef struct jxo_lowering jxo_lowering;           /* one equation being lowered */
typedef struct jxo_abstract_eval jxo_abstract_eval; /* one abstract evaluation */
typedef struct jxo_param jxo_param;                 /* a node of a param tree */
typedef struct jxo_jaxpr jxo_jaxpr;                 /* a closed jaxpr (a param) */
/* A finished subgraph (minor 1), made by jxo_api.graph_end. Owned by the host.
 * It is valid from graph_end until it is used once, as the `graph` of a
 * JXO_ATTR_GRAPH attribute of a node emitted in the scope that enclosed it,
 * or until the lowering callback that made it returns, whichever is first.
 * A handle that is never used is discarded with its subgraph. */
typedef struct jxo_graph jxo_graph;
/* One attempt of a rewrite rule at one node of a graph being optimized
 * (minor 2). Valid during the rule's callback only. */
typedef struct jxo_rewrite jxo_rewrite;

/* An IR value. Handles are small non-negative integers local to one
 * conversion. */
typedef int64_t jxo_value;
#define JXO_NO_VALUE ((jxo_value)-1) /* an absent optional node input */

/* Param kinds. An equation's params form a tree: a RECORD at the root. */
enum {
  JXO_PARAM_NONE = 0,   /* Python None */
  JXO_PARAM_BOOL = 1,   /* param_int gives 0 or 1 */
  JXO_PARAM_INT = 2,    /* param_int */
  JXO_PARAM_FLOAT = 3,  /* param_float */
  JXO_PARAM_STRING = 4, /* param_string */
  JXO_PARAM_DTYPE = 5,  /* param_int gives JXO_DTYPE_* */
  JXO_PARAM_SYMBOL = 6, /* a symbolic dim; param_string gives its expression */
  JXO_PARAM_LIST = 7,   /* param_size, param_at */
  JXO_PARAM_RECORD = 8, /* param_size, param_key, param_at, param_field */
  JXO_PARAM_JAXPR = 9,  /* param_jaxpr */
  JXO_PARAM_OPAQUE = 10 /* anything else; param_string gives its type name */
};

/* Attribute types, numbered as ONNX AttributeProto.AttributeType numbers them. */
enum {
  JXO_ATTR_FLOAT = 1,
  JXO_ATTR_INT = 2,
  JXO_ATTR_STRING = 3,
  JXO_ATTR_TENSOR = 4,
  JXO_ATTR_GRAPH = 5, /* minor 1: an If branch or a Loop body; jxo_attr.graph */
  JXO_ATTR_FLOATS = 6,
  JXO_ATTR_INTS = 7,
  JXO_ATTR_STRINGS = 8
};

/* One node attribute. Only the fields that `type` names are read. */
typedef struct jxo_attr {
  uint32_t struct_size;
  jxo_str name;
  int32_t type;             /* JXO_ATTR_* */
  int64_t i;                /* INT */
  double f;                 /* FLOAT */
  jxo_str s;                /* STRING */
  const int64_t* ints;      /* INTS, `count` entries */
  const double* floats;     /* FLOATS, `count` entries */
  const jxo_str* strings;   /* STRINGS, `count` entries */
  size_t count;
  const jxo_tensor* tensor; /* TENSOR */
  /* -- minor 1 -- */
  /* GRAPH: a handle from graph_end, consumed by the emit_node call that reads
   * it. A plugin built against minor 0 has a struct_size that ends before
   * this field; the host then treats the field as absent (and refuses a
   * GRAPH attribute, which such a plugin cannot have meant). */
  const jxo_graph* graph;
} jxo_attr;

/* A node to emit. */
typedef struct jxo_node {
  uint32_t struct_size;
  jxo_str op_type;
  jxo_str domain;         /* empty: the default ONNX domain */
  int64_t domain_version; /* opset of `domain` when it is not empty */
  const jxo_value* inputs; /* JXO_NO_VALUE for a skipped optional input */
  size_t num_inputs;
  /* The type of each output. An entry may be NULL (dtype unknown), or have
   * rank -1 (shape unknown). */
  const jxo_aval* const* outputs;
  size_t num_outputs;
  const jxo_attr* const* attrs;
  size_t num_attrs;
} jxo_node;

/* -------------------------------------------------------- the host table -- */

/* The functions the host offers. Fields are appended, never reordered; a
 * plugin built against minor M uses only fields of minor <= M (or checks
 * JXO_HAS_FIELD(api, jxo_api, field) first). Every `ctx` parameter is [ctx],
 * every jxo_param / jxo_jaxpr parameter [handle] (see the top of this file).
 * Every returned pointer is host-owned. */
typedef struct jxo_api {
  uint32_t struct_size;
  uint32_t abi_minor; /* the host's minor */

  /* -- status (minor 0) -- */
  /* Makes an error (code JXO_ERROR) carrying a copy of `message`. The caller
   * owns the status until it hands it back to the host (by returning it from
   * a callback) or releases it. Never NULL: if the host cannot make it (no
   * memory, an unreadable message) it returns a status saying so. */
  jxo_status* (*status_create)(jxo_str message);
  /* [in, optional] status. The message, valid while the status lives; empty
   * for NULL. */
  jxo_str (*status_message)(const jxo_status* status);
  /* [in, optional] status, owned by the caller; it is freed (NULL: nothing). */
  void (*status_release)(jxo_status* status);

  /* -- the equation (minor 0) -- */
  jxo_str (*primitive)(const jxo_lowering* ctx);
  size_t (*num_inputs)(const jxo_lowering* ctx);
  size_t (*num_outputs)(const jxo_lowering* ctx);
  const jxo_aval* (*input_aval)(const jxo_lowering* ctx, size_t i);  /* NULL if out of range */
  const jxo_aval* (*output_aval)(const jxo_lowering* ctx, size_t i); /* NULL if out of range */
  const jxo_param* (*params)(const jxo_lowering* ctx);               /* a RECORD */
  /* The data of input i when it is a literal, else NULL. */
  const jxo_tensor* (*input_literal)(const jxo_lowering* ctx, size_t i);
  /* [out] out. The IR value of input i. A literal becomes a constant. */
  jxo_status* (*input)(jxo_lowering* ctx, size_t i, jxo_value* out);
  /* Binds output i of the equation to `value`. Every output must be bound. */
  jxo_status* (*bind_output)(jxo_lowering* ctx, size_t i, jxo_value value);

  /* -- the IR (minor 0) -- */
  /* [in] node (and everything it points to), [out] outputs: an array of
   * node->num_outputs entries, to which the node's fresh values are written. */
  jxo_status* (*emit_node)(jxo_lowering* ctx, const jxo_node* node, jxo_value* outputs);
  /* [in] tensor (its data is copied), [out] out: a constant holding it. */
  jxo_status* (*constant)(jxo_lowering* ctx, const jxo_tensor* tensor, jxo_value* out);
  /* The type of a value; NULL when unknown. */
  const jxo_aval* (*value_aval)(const jxo_lowering* ctx, jxo_value value);
  /* [out] value, [out] axis. Where the symbolic dim `symbol` (an atom such
   * as "B") entered the graph: `axis` of the graph input `value`. Errors if
   * no input carries it. */
  jxo_status* (*symbol_origin)(jxo_lowering* ctx, jxo_str symbol, jxo_value* value,
                               int64_t* axis);
  /* A per-graph cache of values under string keys, so that helpers emit a
   * computation once. memo_get: [out] out, JXO_NO_VALUE when the key is
   * absent (or the lookup failed in the host). memo_put copies the key; it
   * ignores a value not visible in the current scope. */
  void (*memo_get)(const jxo_lowering* ctx, jxo_str key, jxo_value* out);
  void (*memo_put)(jxo_lowering* ctx, jxo_str key, jxo_value value);
  /* Lowers `jaxpr` inline: its invars take `inputs` ([in], num_inputs
   * entries), its outvars are written to `outputs` ([out], num_outputs
   * entries). Counts must match the jaxpr. A failure of an equation inside is
   * returned as JXO_NESTED_FAILURE, with a complete message. */
  jxo_status* (*lower_jaxpr)(jxo_lowering* ctx, const jxo_jaxpr* jaxpr, const jxo_value* inputs,
                             size_t num_inputs, jxo_value* outputs, size_t num_outputs);
  int64_t (*opset)(const jxo_lowering* ctx); /* the target default-domain opset */

  /* -- params (minor 0); each accepts NULL and then answers NONE/0/empty.
   * Returned strings, params and jaxprs live as long as the conversion. -- */
  int32_t (*param_kind)(const jxo_param* p);
  int64_t (*param_int)(const jxo_param* p);    /* BOOL, INT, DTYPE */
  double (*param_float)(const jxo_param* p);   /* FLOAT, INT */
  jxo_str (*param_string)(const jxo_param* p); /* STRING, SYMBOL, OPAQUE */
  size_t (*param_size)(const jxo_param* p);    /* LIST, RECORD */
  const jxo_param* (*param_at)(const jxo_param* p, size_t i);      /* LIST, RECORD */
  jxo_str (*param_key)(const jxo_param* p, size_t i);              /* RECORD */
  const jxo_param* (*param_field)(const jxo_param* p, jxo_str key); /* RECORD; NULL if absent */
  const jxo_jaxpr* (*param_jaxpr)(const jxo_param* p);             /* JAXPR */
  size_t (*jaxpr_num_inputs)(const jxo_jaxpr* j);
  size_t (*jaxpr_num_outputs)(const jxo_jaxpr* j);

  /* -- abstract evaluation (minor 0) -- */
  size_t (*ae_num_inputs)(const jxo_abstract_eval* ctx);
  const jxo_aval* (*ae_input_aval)(const jxo_abstract_eval* ctx, size_t i);
  const jxo_param* (*ae_params)(const jxo_abstract_eval* ctx); /* a RECORD */
  /* [in] aval (copied): appended to the outputs. */
  jxo_status* (*ae_add_output)(jxo_abstract_eval* ctx, const jxo_aval* aval);

  /* -- subgraphs (minor 1) --
   * The lowering context keeps a stack of graph scopes; the main graph is at
   * the bottom and is always open. graph_begin pushes a new, empty subgraph
   * scope; emit_node, constant, input (of a literal), lower_jaxpr and the memo
   * then work in the innermost open scope, until graph_end pops it.
   *  - Value handles stay plain jxo_value, unique within a conversion. A node
   *    of scope S may read a value of any scope enclosing S: the host captures
   *    it (ONNX outer-scope reference) through every scope in between. Reading
   *    a value of a closed scope (a finished sibling branch) is an error.
   *  - Constants and literals always become initializers of the main graph and
   *    are captured where they are used.
   *  - memo_get looks in the innermost scope first, then outward; memo_put
   *    stores in the innermost scope, whose memo dies with it. So a value
   *    computed inside a closed branch is never returned to another scope.
   *  - symbol_origin gives a main-graph input; using it captures it.
   *  - Names are unique across the whole model (main graph and subgraphs).
   * Scopes nest like brackets: graph_end closes the innermost scope, which must
   * have been opened by the same lowering callback. A scope a callback leaves
   * open is closed by the host and the lowering fails. */
  /* Opens a subgraph scope; `name` is a hint for the ONNX graph name. */
  jxo_status* (*graph_begin)(jxo_lowering* ctx, jxo_str name);
  /* [in] aval, [out] out. Appends a formal input to the innermost subgraph
   * (for Loop bodies: the iteration number, the condition, then the carried
   * values, in order). `aval` (copied) is its type; symbolic dims are kept as
   * dim_params. */
  jxo_status* (*graph_add_input)(jxo_lowering* ctx, jxo_str name, const jxo_aval* aval,
                                 jxo_value* out);
  /* [in] outputs (num_outputs entries), [out] graph.
   * Closes the innermost scope with `outputs` (values of it or of an enclosing
   * scope; a value that is not made by a node of the subgraph, or that repeats,
   * is routed through JAX's `copy` primitive, since ONNX subgraph outputs must
   * be node outputs) and writes a handle to the finished subgraph to *graph
   * (host-owned; see jxo_graph for its lifetime). `outputs` is read during the
   * call only. Every output must have a known type. After graph_end, values
   * of the closed scope can no longer be used anywhere. */
  jxo_status* (*graph_end)(jxo_lowering* ctx, const jxo_value* outputs, size_t num_outputs,
                           const jxo_graph** graph);
  /* 0 when output i of the equation is never read: a dropped var, or a var
   * that no later equation and no output of the enclosing jaxpr reads. Such
   * an output may be left unbound. 1 otherwise (also when i is out of range). */
  int32_t (*output_used)(const jxo_lowering* ctx, size_t i);

  /* -- jaxpr introspection (minor 1); each accepts NULL / out of range --
   * The avals returned are owned by the host and live as long as the jaxpr
   * (the whole conversion). */
  const jxo_aval* (*jaxpr_input_aval)(const jxo_jaxpr* j, size_t i);  /* NULL if absent */
  const jxo_aval* (*jaxpr_output_aval)(const jxo_jaxpr* j, size_t i); /* NULL if absent */
  /* The invar index that outvar i is, when it is one directly; -1 otherwise
   * (computed, a constvar, or a literal). */
  int64_t (*jaxpr_output_source)(const jxo_jaxpr* j, size_t i);
  /* 1 when outvar `output` may depend on invar `input` (conservatively: an
   * equation's outputs depend on all its inputs); 0 when it cannot. */
  int32_t (*jaxpr_depends)(const jxo_jaxpr* j, size_t output, size_t input);
  /* The equations, in order, so that a plugin can recognize a small body
   * (e.g. a reduce computation that is one `add`). Strings and params are
   * owned by the host and live as long as the jaxpr. */
  size_t (*jaxpr_num_eqns)(const jxo_jaxpr* j);
  jxo_str (*jaxpr_eqn_primitive)(const jxo_jaxpr* j, size_t k);      /* empty if absent */
  const jxo_param* (*jaxpr_eqn_params)(const jxo_jaxpr* j, size_t k); /* a RECORD; NULL if absent */
  size_t (*jaxpr_eqn_num_inputs)(const jxo_jaxpr* j, size_t k);
  /* The invar index that input i of equation k is directly; -1 otherwise (a
   * literal, a constvar, or an earlier equation's output). */
  int64_t (*jaxpr_eqn_input_source)(const jxo_jaxpr* j, size_t k, size_t i);
  /* The equation that produces outvar i; -1 when no equation does. */
  int64_t (*jaxpr_output_eqn)(const jxo_jaxpr* j, size_t i);

  /* -- rewrite rules (minor 2) --
   * A rule's callback sees one graph of the lowered model through a read-only
   * view: nodes are indices into that graph, values are jxo_value handles local
   * to it (not the lowering's handles). The callback matches from the root
   * node backwards, and when it decides to rewrite, emits the replacement with
   * rw_emit_node / rw_constant and maps each root output it replaces to a new
   * value with rw_replace. Nothing changes in the graph unless the callback
   * returns NULL having called rw_replace; then the host inserts the emitted
   * nodes before the root and redirects every read of the replaced outputs.
   * Matched intermediates stay until nothing reads them, so a rule that
   * matches a value with other readers is still correct (only not smaller).
   * Every accessor accepts out-of-range arguments and then answers
   * empty / -1 / 0 / NULL. Pointers returned are valid during the callback. */
  int64_t (*rw_root)(const jxo_rewrite* rw);              /* the node the rule is tried at */
  int64_t (*rw_opset)(const jxo_rewrite* rw);             /* the default-domain opset */
  int64_t (*rw_producer)(const jxo_rewrite* rw, jxo_value v); /* -1: input/initializer/capture */
  jxo_str (*rw_op_type)(const jxo_rewrite* rw, int64_t node);
  jxo_str (*rw_domain)(const jxo_rewrite* rw, int64_t node); /* empty: the default domain */
  size_t (*rw_num_inputs)(const jxo_rewrite* rw, int64_t node);
  jxo_value (*rw_input)(const jxo_rewrite* rw, int64_t node, size_t i); /* JXO_NO_VALUE if skipped */
  size_t (*rw_num_outputs)(const jxo_rewrite* rw, int64_t node);
  jxo_value (*rw_output)(const jxo_rewrite* rw, int64_t node, size_t i);
  /* The attribute `name` of `node`, NULL when absent. A GRAPH attribute is
   * shown with a NULL graph (subgraphs are not part of the view). */
  const jxo_attr* (*rw_attr)(const jxo_rewrite* rw, int64_t node, jxo_str name);
  /* How many times `v` is read: node inputs, subgraph captures, and one more
   * when it is a graph output. */
  size_t (*rw_num_reads)(const jxo_rewrite* rw, jxo_value v);
  const jxo_aval* (*rw_value_aval)(const jxo_rewrite* rw, jxo_value v); /* NULL: untyped */
  /* The data of `v` when it is an initializer or a Constant node's value. */
  const jxo_tensor* (*rw_value_constant)(const jxo_rewrite* rw, jxo_value v);
  /* [in] node, [out] outputs (node->num_outputs entries). Emits a
   * replacement node of the default domain or (minor 6) of a domain the
   * target runs, named "domain.op" among the rule's ops; its inputs must be values
   * defined before the root or by nodes emitted earlier in this callback. */
  jxo_status* (*rw_emit_node)(jxo_rewrite* rw, const jxo_node* node, jxo_value* outputs);
  /* [in] tensor (copied), [out] out. */
  jxo_status* (*rw_constant)(jxo_rewrite* rw, const jxo_tensor* tensor, jxo_value* out);
  /* Output `root_output` of the root node is to be replaced by `value`, which
   * must have the same dtype and shape. Minor 7: `root_output` may also be a
   * graph output some node before the root defines; then only the graph
   * output moves (an emitted node defines it, under its name) and the nodes
   * that read the old value keep reading it, now under another name. */
  jxo_status* (*rw_replace)(jxo_rewrite* rw, jxo_value root_output, jxo_value value);

  /* -- status codes (minor 3) -- */
  /* As status_create, with `code` (JXO_*; JXO_OK or an unknown code is made
   * JXO_ERROR). */
  jxo_status* (*status_create_with_code)(int32_t code, jxo_str message);
  /* [in, optional] status. Its code: JXO_OK for NULL. */
  int32_t (*status_code)(const jxo_status* status);

  /* -- target profiles (minor 5) --
   * The runtime the model is for (to_onnx target=): "onnxruntime" (the
   * default), "portable", ... (jaxonnx/targets.hpp, docs/targets.md). A
   * lowering or rule asks whether the target has `feature`: an ONNX op type of
   * the default domain ("Attention") or a capability ("if_guard"), and picks
   * another form where it has not. 1: it has it (also for a name the host does
   * not know), 0: it lacks it. The host refuses a node of an op the target
   * refuses, whoever emits it. */
  jxo_str (*target)(const jxo_lowering* ctx);
  int32_t (*target_supports)(const jxo_lowering* ctx, jxo_str feature);
  int32_t (*rw_target_supports)(const jxo_rewrite* rw, jxo_str feature);

  /* -- minor 7 -- 1 when `v` is an output of the graph the rule sees, else 0. */
  int32_t (*rw_is_output)(const jxo_rewrite* rw, jxo_value v);
} jxo_api;

/* --------------------------------------------------- the plugin's side -- */

/* The plugin's callbacks. `api` is the host table (valid for the process),
 * `ctx` the handle of this call ([ctx]), `user_data` what the descriptor gave
 * (owned by the plugin). Each returns NULL on success or a status it made
 * through `api`, which the host then owns. A lowering binds every output that
 * is used (output_used); an abstract eval adds one aval per output. */
typedef jxo_status* (*jxo_lower_fn)(const jxo_api* api, jxo_lowering* ctx, void* user_data);
typedef jxo_status* (*jxo_abstract_eval_fn)(const jxo_api* api, jxo_abstract_eval* ctx,
                                            void* user_data);
/* A rewrite rule's callback (minor 2). Returns NULL both when it rewrote and
 * when the pattern does not match; a status is an error in the rule, which
 * fails the conversion. */
typedef jxo_status* (*jxo_rewrite_fn)(const jxo_api* api, jxo_rewrite* rw, void* user_data);

/* How a binding spec's op or a rule's replacement agrees with JAX (minor 5),
 * which the user's fusion option selects by (to_onnx fusion=): "exact" keeps
 * only JXO_NUMERICS_EXACT ones, "fast" all but APPROXIMATE ones,
 * "approximate" all, "none" none. An older plugin's spec or rule reads as
 * UNDECLARED, which counts as FINITE. */
enum {
  JXO_NUMERICS_UNDECLARED = 0,
  /* within float rounding on finite inputs; NaN, infinity or signed zero may
   * differ (numerics_note says how) */
  JXO_NUMERICS_FINITE = 1,
  /* within float rounding on every input, NaN and infinity included */
  JXO_NUMERICS_EXACT = 2,
  /* (minor 8) beyond float rounding, by a documented and measured error
   * (numerics_note says how much): int8 activations in a weight product */
  JXO_NUMERICS_APPROXIMATE = 3
};

/* A binding spec (minor 2): while jaxonnx traces, a call of the Python callable
 * `target` binds the primitive of the jxo_primitive_desc that lists it, instead
 * of tracing through the callable. The host only stores it; the Python side
 * applies it. Each expression is a small Python expression over the call's
 * arguments, named as in the callable's signature with defaults applied: names,
 * attributes (no dunders but __name__, __module__), constant subscripts,
 * constants, tuples, comparisons, and/or/not, and calls of len, tuple, int,
 * float, bool, str, abs, min, max, type. The name jaxonnx_exact is true when the user
 * asked for ops exact on NaN and infinity as well (to_onnx fusion="exact"; a spec declares its own numerics since minor 5). An
 * expression that fails to evaluate counts as false (in `when`) or makes the
 * call fall back to the original (elsewhere). */
typedef struct jxo_binding {
  uint32_t struct_size;
  /* Module path + attribute: "flax.nnx.LayerNorm.__call__", "jax.nn.gelu". */
  jxo_str target;
  /* The primitive's inputs, in order: "x", "self.scale.value". Each must give
   * an array. */
  const jxo_str* operands;
  size_t num_operands;
  /* Static params, each "name=expression" ("epsilon=self.epsilon"); the value
   * must be None, a bool, int, float, string, or a tuple of those. */
  const jxo_str* params;
  size_t num_params;
  /* The call modes handled: every expression must be true, else the call
   * goes to the original callable. */
  const jxo_str* when;
  size_t num_when;
  /* Bit i set: the primitive maps over extra leading dims of operand i (the
   * same dims for every set bit), so vmap over those operands binds it again
   * with the batch dim leading. A vmap over any other operand calls the
   * original. */
  uint64_t leading_dims_operands;
  /* -- minor 5 -- */
  int32_t numerics;     /* JXO_NUMERICS_* */
  jxo_str numerics_note; /* where it differs from JAX, for docs; may be empty */
} jxo_binding;

/* A test equation (minor 4): a small example of a primitive's equation that
 * the host runs, in a short-lived child process, before it loads a plugin it
 * has not checked into the user's process (the preflight; see
 * docs/plugin_author_guide.md). The host runs the abstract eval (if any) on
 * `inputs`, then the lowering of one equation with these inputs and no
 * params, then the plugin's rewrite rules on the result. A crash or hang
 * there keeps the plugin out of the user's process; an error status is
 * reported (jaxonnx.testing.check_plugin fails on it) but does not. Dims may
 * be symbolic ("B"). */
typedef struct jxo_test_eqn {
  uint32_t struct_size;
  const jxo_aval* const* inputs; /* the equation's input avals */
  size_t num_inputs;
  /* Its output avals; may be 0 entries when the primitive has an abstract
   * eval, which then gives them. */
  const jxo_aval* const* outputs;
  size_t num_outputs;
} jxo_test_eqn;

typedef struct jxo_primitive_desc {
  uint32_t struct_size;
  jxo_str name;                       /* the JAX primitive name it claims */
  jxo_lower_fn lower;                 /* required */
  jxo_abstract_eval_fn abstract_eval; /* optional (NULL) */
  void* user_data;                    /* passed back to both callbacks */
  const jxo_str* onnx_ops;            /* the ONNX ops it may emit, for docs */
  size_t num_onnx_ops;
  jxo_str doc_url; /* may be empty */
  jxo_str summary; /* one line, may be empty */
  /* -- minor 2 -- */
  /* The Python callables that bind this primitive while tracing (may be 0). */
  const jxo_binding* const* bindings;
  size_t num_bindings;
  /* -- minor 4 -- */
  /* Example equations for the preflight (may be 0: the preflight then only
   * loads the plugin and reads its descriptor). */
  const jxo_test_eqn* const* test_eqns;
  size_t num_test_eqns;
} jxo_primitive_desc;

/* A rewrite rule (minor 2): a small pattern over the ONNX nodes of the
 * lowered model, ending at a node of op `root_op` (default domain), and its
 * replacement. The core's fuse pass tries every rule at every node of its
 * root op, in plugin order then rule order, and applies what matches; it
 * never names an op itself. Like an LLVM pass plugin's pass, a rule is owned
 * by its plugin and knows the ops it matches; the host only runs it. */
typedef struct jxo_rule_desc {
  uint32_t struct_size;
  jxo_str name;            /* unique in the plugin, e.g. "matmul_add_to_gemm" */
  jxo_str root_op;         /* the op type of the node the pattern ends at */
  jxo_rewrite_fn rewrite;  /* required */
  void* user_data;         /* passed back to `rewrite` */
  int64_t min_opset;       /* the rule is not tried below this default-domain opset */
  const jxo_str* onnx_ops; /* the ONNX ops the replacement may emit, for docs and checks */
  size_t num_onnx_ops;
  jxo_str summary; /* one line, may be empty */
  /* -- minor 5 -- */
  int32_t numerics;     /* JXO_NUMERICS_* */
  jxo_str numerics_note; /* where it differs from JAX, for docs; may be empty */
} jxo_rule_desc;

typedef struct jxo_plugin_desc {
  uint32_t struct_size;
  uint32_t abi_major; /* JXO_ABI_MAJOR the plugin was built with */
  uint32_t abi_minor; /* JXO_ABI_MINOR the plugin was built with */
  jxo_str name;
  jxo_str version;
  jxo_str sdk_version;
  const jxo_primitive_desc* const* primitives;
  size_t num_primitives;
  /* -- minor 2 -- */
  const jxo_rule_desc* const* rules; /* rewrite rules, applied by the core's fuse pass */
  size_t num_rules;
} jxo_plugin_desc;

/* What the host passes to the entry point. Frozen: it never grows. */
typedef struct jxo_host {
  uint32_t struct_size;
  uint32_t abi_major;
  /* The host's table if it serves `minor`, else NULL: a query only (see
   * "Versions" at the top); the descriptor's abi_minor is what the host
   * checks. The table is valid for the process. */
  const jxo_api* (*get_api)(uint32_t minor);
  jxo_str version;
} jxo_host;

/* The entry point: jaxonnx_plugin_init_v1. [in] host (valid during the call),
 * [out] error. Returns the plugin's descriptor (it and everything it points
 * to valid for the life of the process, owned by the plugin), or NULL with
 * *error set to a message valid for the life of the process. Called once per
 * process, serialized. */
typedef const jxo_plugin_desc* (*jxo_plugin_init_fn)(const jxo_host* host, jxo_str* error);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* Layout guards: a field that moves breaks every plugin built before. */
#if defined(__cplusplus)
#define JXO_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define JXO_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif
JXO_STATIC_ASSERT(offsetof(jxo_host, struct_size) == 0, "jxo_host layout");
JXO_STATIC_ASSERT(offsetof(jxo_host, abi_major) == 4, "jxo_host layout");
JXO_STATIC_ASSERT(offsetof(jxo_host, get_api) == 8, "jxo_host layout");
JXO_STATIC_ASSERT(offsetof(jxo_aval, dtype) == 4, "jxo_aval layout");
JXO_STATIC_ASSERT(offsetof(jxo_aval, rank) == 8, "jxo_aval layout");
JXO_STATIC_ASSERT(offsetof(jxo_aval, dims) == 16, "jxo_aval layout");
JXO_STATIC_ASSERT(sizeof(jxo_str) == 2 * sizeof(void*), "jxo_str layout");
JXO_STATIC_ASSERT(offsetof(jxo_dim, symbol) == 8, "jxo_dim layout");
JXO_STATIC_ASSERT(offsetof(jxo_plugin_desc, abi_major) == 4, "jxo_plugin_desc layout");
JXO_STATIC_ASSERT(offsetof(jxo_plugin_desc, abi_minor) == 8, "jxo_plugin_desc layout");
JXO_STATIC_ASSERT(offsetof(jxo_plugin_desc, name) == 16, "jxo_plugin_desc layout");
JXO_STATIC_ASSERT(offsetof(jxo_primitive_desc, name) == 8, "jxo_primitive_desc layout");
JXO_STATIC_ASSERT(offsetof(jxo_primitive_desc, lower) == 8 + sizeof(jxo_str), "jxo_primitive_desc layout");
JXO_STATIC_ASSERT(offsetof(jxo_api, status_create) == 8, "jxo_api layout");
JXO_STATIC_ASSERT(offsetof(jxo_api, ae_add_output) ==
                      offsetof(jxo_api, status_create) + 34 * sizeof(void*),
                  "jxo_api minor-0 layout: append new fields after ae_add_output");
JXO_STATIC_ASSERT(offsetof(jxo_api, jaxpr_output_eqn) ==
                      offsetof(jxo_api, status_create) + 48 * sizeof(void*),
                  "jxo_api minor-1 layout: append new fields after jaxpr_output_eqn");
JXO_STATIC_ASSERT(offsetof(jxo_primitive_desc, summary) + sizeof(jxo_str) ==
                      offsetof(jxo_primitive_desc, bindings),
                  "jxo_primitive_desc minor-2 layout: bindings follow summary");
JXO_STATIC_ASSERT(offsetof(jxo_primitive_desc, num_bindings) + sizeof(size_t) ==
                      offsetof(jxo_primitive_desc, test_eqns),
                  "jxo_primitive_desc minor-4 layout: test_eqns follow num_bindings");
JXO_STATIC_ASSERT(offsetof(jxo_test_eqn, inputs) == 8, "jxo_test_eqn layout");
JXO_STATIC_ASSERT(offsetof(jxo_test_eqn, outputs) == 8 + 2 * sizeof(void*), "jxo_test_eqn layout");
JXO_STATIC_ASSERT(offsetof(jxo_binding, target) == 8, "jxo_binding layout");
JXO_STATIC_ASSERT(offsetof(jxo_binding, operands) == 8 + sizeof(jxo_str), "jxo_binding layout");
JXO_STATIC_ASSERT(offsetof(jxo_binding, leading_dims_operands) ==
                      8 + sizeof(jxo_str) + 6 * sizeof(void*),
                  "jxo_binding layout");
JXO_STATIC_ASSERT(offsetof(jxo_api, rw_replace) ==
                      offsetof(jxo_api, status_create) + 64 * sizeof(void*),
                  "jxo_api minor-2 layout: append new fields after rw_replace");
JXO_STATIC_ASSERT(offsetof(jxo_api, status_code) ==
                      offsetof(jxo_api, status_create) + 66 * sizeof(void*),
                  "jxo_api minor-3 layout: append new fields after status_code");
JXO_STATIC_ASSERT(offsetof(jxo_plugin_desc, rules) ==
                      offsetof(jxo_plugin_desc, num_primitives) + sizeof(size_t),
                  "jxo_plugin_desc minor-2 layout: rules follow num_primitives");
JXO_STATIC_ASSERT(offsetof(jxo_rule_desc, name) == 8, "jxo_rule_desc layout");
JXO_STATIC_ASSERT(offsetof(jxo_rule_desc, root_op) == 8 + sizeof(jxo_str), "jxo_rule_desc layout");
JXO_STATIC_ASSERT(offsetof(jxo_attr, tensor) + sizeof(void*) == offsetof(jxo_attr, graph),
                  "jxo_attr minor-1 layout: graph follows tensor");

#endif /* JAXONNX_PLUGIN_ABI_H */
