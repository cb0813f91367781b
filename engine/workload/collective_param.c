/* Field table of the collective workload's section `collective` (struct pp_coll_params,
 * prepost/collective.h); defaults are pp_coll_params_default()'s (tests/test_param.c). The
 * keys bounded by the number of ranks (root, slow_ranks) are checked by the parser and
 * pp_coll_params_check(). */
#include "prepost/collective.h"
#include "prepost/engine.h"
#include "prepost/param.h"

static const char *const op_names[] = {
#define PP_X(id, name, desc) name,
    PP_COLL_OP_LIST(PP_X)
#undef PP_X
};
static const char *const dtype_names[] = {
#define PP_X(id, name, bytes) name,
    PP_DTYPE_LIST(PP_X)
#undef PP_X
};

#define C struct pp_coll_params
const struct pp_param pp_coll_param_table[] = {
    PP_PARAM_KEYED("op", C, op, PP_PARAM_ENUM, 0, PP_COLL_OP_COUNT - 1, PP_COLL_ALLREDUCE,
                   "the collective", op_names, 0),
    PP_PARAM_KEYED("datatype", C, dtype, PP_PARAM_ENUM, 0, PP_DTYPE_COUNT - 1, PP_DTYPE_F32,
                   "element type (allreduce sums it)", dtype_names, 0),
    PP_PARAM_KEYED("size", C, bytes, PP_PARAM_SIZE, 1, PP_MAX_MSG_SIZE, 1u << 20,
                   "the buffer (allgather: the gathered total)", NULL, 0),
    PP_PARAM_UINT(C, iterations, 1, PP_COLL_MAX_ITERATIONS, 1,
                  "collectives back to back, each checked"),
    PP_PARAM_UINT(C, warmup, 0, PP_COLL_MAX_ITERATIONS, 0,
                  "leading iterations left out of the bandwidth figures"),
    PP_PARAM_SIZE(C, chunk, 1, PP_MAX_MSG_SIZE, 128u * 1024u,
                  "bytes per pipelined message (a multiple of the element size)"),
    PP_PARAM_UINT(C, window, 1, PP_MAX_QUEUE_DEPTH, 4,
                  "receives kept posted (staging buffers of chunk bytes)"),
    PP_PARAM_KEYED("compute", C, compute_ns, PP_PARAM_DURATION, 0, UINT64_MAX, 0,
                   "time a rank spends on each received chunk (reduce or copy)", NULL, 0),
    PP_PARAM_KEYED("slow_compute", C, slow_compute_ns, PP_PARAM_DURATION, 0, UINT64_MAX, 0,
                   "what the slow_ranks spend instead", NULL, 0),
    PP_PARAM_UINT(C, slow_from, 0, PP_COLL_MAX_ITERATIONS, 0,
                  "the slow ranks are slow from this iteration ..."),
    PP_PARAM_UINT(C, slow_until, 0, PP_COLL_MAX_ITERATIONS, 0,
                  "... until this one (excluded; slow_ranks without it: throughout)"),
    PP_PARAM_BOOL(C, check, 1, "check every element of every iteration"),
};
#undef C
const size_t pp_coll_param_count = sizeof pp_coll_param_table / sizeof pp_coll_param_table[0];
