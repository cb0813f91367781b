/*
 * The collective workload (engine/workload/collective.c): ring allreduce (reduce-scatter then allgather),
 * allgather and broadcast over any protocol's send/recv, pipelined in `chunk`-byte messages, with
 * every element of every iteration checked against a direct computation. Parameters and
 * statistics; this header only holds types and is included by engine.h.
 */
#ifndef PP_COLLECTIVE_H
#define PP_COLLECTIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "param.h"
#include "status.h"

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif
PP_API_BEGIN

/* X(id, name, description) */
#define PP_COLL_OP_LIST(X)                                                     \
  X(ALLREDUCE, "allreduce", "sum over every rank, everywhere: reduce-scatter then allgather") \
  X(ALLGATHER, "allgather", "every rank's block, everywhere")                  \
  X(BROADCAST, "broadcast", "the root's buffer, everywhere")

enum pp_coll_op {
#define PP_X(id, name, desc) PP_COLL_##id,
  PP_COLL_OP_LIST(PP_X)
#undef PP_X
  PP_COLL_OP_COUNT
};

/* X(id, name, bytes) */
#define PP_DTYPE_LIST(X)                                                       \
  X(F32, "float32", 4)                                                         \
  X(F64, "float64", 8)                                                         \
  X(I32, "int32", 4)                                                           \
  X(I64, "int64", 8)

enum pp_dtype {
#define PP_X(id, name, bytes) PP_DTYPE_##id,
  PP_DTYPE_LIST(PP_X)
#undef PP_X
  PP_DTYPE_COUNT
};

struct pp_coll_params {
  enum pp_coll_op op;
  enum pp_dtype dtype;
  uint64_t bytes;      /* the buffer: allreduce/broadcast its size, allgather the gathered total
                          (each rank contributes bytes / ranks) */
  uint32_t iterations; /* collectives run back to back, each checked */
  uint32_t warmup;     /* leading iterations left out of the bandwidth figures */
  uint32_t root;       /* broadcast */
  uint32_t chunk;      /* bytes per pipelined message (a multiple of the element size) */
  uint32_t window;     /* receives kept posted (staging buffers of `chunk` bytes) */
  uint64_t compute_ns; /* simulated time a rank spends on each received chunk (reduce or copy) */
  uint64_t slow_ranks; /* bitmask of ranks (first 64) that spend slow_compute_ns instead ... */
  uint64_t slow_compute_ns;
  uint32_t slow_from, slow_until; /* ... during iterations [slow_from, slow_until) */
  bool check;          /* check every element of every iteration */
};

#define PP_COLL_MAX_ITERATIONS 1000000u

/* Defaults: allreduce of 1 MiB float32, 1 iteration, 128 KiB chunks, window 4, checked. */
void pp_coll_params_default(struct pp_coll_params *p);
/* The scenario section `collective` (engine/workload/collective_param.c). */
PP_PARAM_TABLE(pp_coll);
/* Validates against the number of ranks; on error writes a sentence naming the field. */
enum pp_status pp_coll_params_check(const struct pp_coll_params *p, uint32_t nranks, char *err,
                                    size_t errlen);

const char *pp_coll_op_name(enum pp_coll_op op);
int pp_coll_op_from_name(const char *name); /* -1 when unknown */
const char *pp_dtype_name(enum pp_dtype t);
int pp_dtype_from_name(const char *name); /* -1 when unknown */
size_t pp_dtype_size(enum pp_dtype t);     /* 0 when unknown */
/* nccl-tests' bus bandwidth factor: allreduce 2(n-1)/n, allgather (n-1)/n, broadcast 1. */
double pp_coll_bus_factor(enum pp_coll_op op, uint32_t nranks);

#define PP_COLL_ITER_LOG 64

struct pp_coll_stats {
  bool active;                /* the rank ran the collective workload */
  uint32_t iterations_done;
  uint64_t start_ns;          /* the first iteration began */
  uint64_t end_ns;            /* the last completed iteration ended */
  uint64_t iter_end_ns[PP_COLL_ITER_LOG]; /* end of each of the first PP_COLL_ITER_LOG */
  uint64_t elements_checked;
  uint64_t elements_wrong;
};

PP_API_END
#ifdef __cplusplus
}
#endif

#endif
