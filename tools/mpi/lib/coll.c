/*
 * The predefined C datatypes, the reduction operations (predefined, and the program's own:
 * Op_create/Op_free/Op_commutative, Reduce_local), and the collectives Barrier, Bcast, Reduce,
 * Allreduce, Gather(v), Scatter(v), Allgather(v), Alltoall(v), Reduce_scatter(_block), Scan and
 * Exscan on any communicator, built from the library's point-to-point on the communicator's
 * collective context (ctx + 1: never matched by the program's own receives).
 *
 * Algorithms, chosen so that results are the same on every run and every rank: Barrier by
 * dissemination (ceil(log2 n) rounds of zero-byte sendrecv), Bcast by a binomial tree from the
 * root, Reduce at the root in rank order, x0 op (x1 op (... op x(n-1))) whatever the arrival
 * order (floating-point sums are the same on every run, and a non-commutative operation gets its
 * operands in rank order), Allreduce as Reduce to rank 0 then Bcast; Gather(v)/Scatter(v) direct
 * to/from the root, PP_COLL_WINDOW requests at a time; Allgather(v) around a ring (n - 1 steps);
 * Alltoall(v) pairwise (step k: to rank + k, from rank - k); Reduce_scatter(_block) as Reduce to
 * rank 0 then Scatterv; Scan and Exscan along the chain of ranks, ((x0 op x1) op x2)... A user
 * operation is applied in the same orders, commutative or not. Bcast, Gather, Scatter, Allgather
 * and Alltoall take derived datatypes (dtype.c's pp_type_pack/unpack): see "derived datatypes".
 */
#include <complex.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "impl.h"

/* ---------------------------------------------------------------- datatypes */

enum dt_class { DC_INT, DC_FLOAT, DC_LOGICAL, DC_BYTE, DC_COMPLEX, DC_PAIR };

struct pp_float_int { float v; int i; };
struct pp_double_int { double v; int i; };
struct pp_long_int { long v; int i; };
struct pp_short_int { short v; int i; };
struct pp_2int { int v; int i; };
struct pp_long_double_int { long double v; int i; };

/* X(handle, C type, class) */
#define PP_DT_LIST(X)                                                          \
  X(MPI_CHAR, char, DC_INT)                                                    \
  X(MPI_SIGNED_CHAR, signed char, DC_INT)                                      \
  X(MPI_UNSIGNED_CHAR, unsigned char, DC_INT)                                  \
  X(MPI_BYTE, unsigned char, DC_BYTE)                                          \
  X(MPI_WCHAR, int32_t, DC_INT)                                                \
  X(MPI_SHORT, short, DC_INT)                                                  \
  X(MPI_UNSIGNED_SHORT, unsigned short, DC_INT)                                \
  X(MPI_INT, int, DC_INT)                                                      \
  X(MPI_UNSIGNED, unsigned, DC_INT)                                            \
  X(MPI_LONG, long, DC_INT)                                                    \
  X(MPI_UNSIGNED_LONG, unsigned long, DC_INT)                                  \
  X(MPI_LONG_LONG_INT, long long, DC_INT)                                      \
  X(MPI_UNSIGNED_LONG_LONG, unsigned long long, DC_INT)                        \
  X(MPI_INT8_T, int8_t, DC_INT)                                                \
  X(MPI_INT16_T, int16_t, DC_INT)                                              \
  X(MPI_INT32_T, int32_t, DC_INT)                                              \
  X(MPI_INT64_T, int64_t, DC_INT)                                              \
  X(MPI_UINT8_T, uint8_t, DC_INT)                                              \
  X(MPI_UINT16_T, uint16_t, DC_INT)                                            \
  X(MPI_UINT32_T, uint32_t, DC_INT)                                            \
  X(MPI_UINT64_T, uint64_t, DC_INT)                                            \
  X(MPI_AINT, MPI_Aint, DC_INT)                                                \
  X(MPI_OFFSET, MPI_Offset, DC_INT)                                            \
  X(MPI_COUNT, MPI_Count, DC_INT)                                              \
  X(MPI_FLOAT, float, DC_FLOAT)                                                \
  X(MPI_DOUBLE, double, DC_FLOAT)                                              \
  X(MPI_LONG_DOUBLE, long double, DC_FLOAT)                                    \
  X(MPI_C_BOOL, _Bool, DC_LOGICAL)                                             \
  X(MPI_C_FLOAT_COMPLEX, float _Complex, DC_COMPLEX)                           \
  X(MPI_C_DOUBLE_COMPLEX, double _Complex, DC_COMPLEX)                         \
  X(MPI_C_LONG_DOUBLE_COMPLEX, long double _Complex, DC_COMPLEX)               \
  X(MPI_FLOAT_INT, struct pp_float_int, DC_PAIR)                               \
  X(MPI_DOUBLE_INT, struct pp_double_int, DC_PAIR)                             \
  X(MPI_LONG_INT, struct pp_long_int, DC_PAIR)                                 \
  X(MPI_SHORT_INT, struct pp_short_int, DC_PAIR)                               \
  X(MPI_2INT, struct pp_2int, DC_PAIR)                                         \
  X(MPI_LONG_DOUBLE_INT, struct pp_long_double_int, DC_PAIR)

size_t pp_dt_size(MPI_Datatype dt)
{
  switch (dt) {
#define PP_X(h, t, c)                                                          \
  case h:                                                                      \
    return sizeof(t);
    PP_DT_LIST(PP_X)
#undef PP_X
  default:
    return 0;
  }
}

/* MPI_Type_size and the derived types: dtype.c */

/* ---------------------------------------------------------------- operations */

/* the program's operations (Op_create), a bounded table: MPI_ERR_NO_MEM past it */
#define PP_MAX_OP 64u
#define PP_OP_BASE 0x98000000u /* MPICH's "direct" op handles */

struct user_op {
  bool used;
  bool commute;
  MPI_User_function *fn;
};

static struct user_op user_ops[PP_MAX_OP];

static struct user_op *user_op_get(MPI_Op op)
{
  uint32_t i = (uint32_t)op - PP_OP_BASE;
  if ((uint32_t)op < PP_OP_BASE || i >= PP_MAX_OP || !user_ops[i].used)
    return NULL;
  return &user_ops[i];
}

static bool predefined_op(MPI_Op op)
{
  return op >= MPI_MAX && op <= MPI_MAXLOC;
}

bool pp_op_valid(MPI_Op op)
{
  return predefined_op(op) || user_op_get(op);
}

int PMPI_Op_create(MPI_User_function *fn, int commute, MPI_Op *op)
{
  pp_need_init("MPI_Op_create");
  if (!fn || !op)
    return pp_err(NULL, "MPI_Op_create", MPI_ERR_ARG, "function or op is NULL");
  for (uint32_t i = 0; i < PP_MAX_OP; i++)
    if (!user_ops[i].used) {
      user_ops[i] = (struct user_op){.used = true, .commute = commute != 0, .fn = fn};
      *op = (MPI_Op)(PP_OP_BASE + i);
      return MPI_SUCCESS;
    }
  return pp_err(NULL, "MPI_Op_create", MPI_ERR_NO_MEM, "more than %u operations (free some "
                                                        "with MPI_Op_free)", PP_MAX_OP);
}
PP_ALIAS(MPI_Op_create);

int PMPI_Op_free(MPI_Op *op)
{
  pp_need_init("MPI_Op_free");
  struct user_op *u = op ? user_op_get(*op) : NULL;
  if (!u)
    return pp_err(NULL, "MPI_Op_free", MPI_ERR_OP, "0x%x is not an operation of the program "
                                                    "(predefined ones cannot be freed)",
                  op ? *op : 0);
  *u = (struct user_op){0};
  *op = MPI_OP_NULL;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Op_free);

int PMPI_Op_commutative(MPI_Op op, int *commute)
{
  pp_need_init("MPI_Op_commutative");
  struct user_op *u = user_op_get(op);
  if (!u && !predefined_op(op))
    return pp_err(NULL, "MPI_Op_commutative", MPI_ERR_OP, "operation 0x%x", op);
  *commute = u ? u->commute : 1; /* every predefined operation commutes */
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Op_commutative);

/* a user operation over count elements, in pieces of at most INT_MAX (its len is an int) */
static void user_apply(const struct user_op *u, MPI_Datatype dt, const void *in, void *io,
                       size_t count)
{
  size_t sz = pp_dt_size(dt);
  while (count) {
    int len = count > INT_MAX ? INT_MAX : (int)count;
    MPI_Datatype t = dt;
    u->fn((void *)(uintptr_t)in, io, &len, &t);
    in = (const char *)in + (size_t)len * sz;
    io = (char *)io + (size_t)len * sz;
    count -= (size_t)len;
  }
}

#define ARITH(T)                                                               \
  for (size_t i = 0; i < n; i++) {                                             \
    T a = ((const T *)in)[i], *b = &((T *)io)[i];                              \
    switch (op) {                                                              \
    case MPI_SUM: *b = (T)(a + *b); break;                                     \
    case MPI_PROD: *b = (T)(a * *b); break;                                    \
    case MPI_MAX: *b = a > *b ? a : *b; break;                                 \
    case MPI_MIN: *b = a < *b ? a : *b; break;                                 \
    default: break;                                                            \
    }                                                                          \
  }

#define LOGIC(T)                                                               \
  for (size_t i = 0; i < n; i++) {                                             \
    T a = ((const T *)in)[i], *b = &((T *)io)[i];                              \
    switch (op) {                                                              \
    case MPI_LAND: *b = (T)(a && *b); break;                                   \
    case MPI_LOR: *b = (T)(a || *b); break;                                    \
    case MPI_LXOR: *b = (T)(!a != !*b); break;                                 \
    default: break;                                                            \
    }                                                                          \
  }

#define BITS(T)                                                                \
  for (size_t i = 0; i < n; i++) {                                             \
    T a = ((const T *)in)[i], *b = &((T *)io)[i];                              \
    switch (op) {                                                              \
    case MPI_BAND: *b = (T)(a & *b); break;                                    \
    case MPI_BOR: *b = (T)(a | *b); break;                                     \
    case MPI_BXOR: *b = (T)(a ^ *b); break;                                    \
    default: break;                                                            \
    }                                                                          \
  }

#define CPLX(T)                                                                \
  for (size_t i = 0; i < n; i++) {                                             \
    T a = ((const T *)in)[i], *b = &((T *)io)[i];                              \
    *b = op == MPI_SUM ? a + *b : a * *b;                                      \
  }

/* MINLOC/MAXLOC: the extreme value, and the smaller index among equal values (MPI 3.1 5.9.4) */
#define LOC(T)                                                                 \
  for (size_t i = 0; i < n; i++) {                                             \
    const T *a = &((const T *)in)[i];                                          \
    T *b = &((T *)io)[i];                                                      \
    bool better = op == MPI_MAXLOC ? a->v > b->v : a->v < b->v;                \
    if (better || (a->v == b->v && a->i < b->i))                               \
      *b = *a;                                                                 \
  }

static enum dt_class class_of(MPI_Datatype dt)
{
  switch (dt) {
#define PP_X(h, t, c)                                                          \
  case h:                                                                      \
    return c;
    PP_DT_LIST(PP_X)
#undef PP_X
  default:
    return DC_BYTE;
  }
}

static bool op_fits(MPI_Op op, enum dt_class c)
{
  switch (op) {
  case MPI_MAX:
  case MPI_MIN:
    return c == DC_INT || c == DC_FLOAT;
  case MPI_SUM:
  case MPI_PROD:
    return c == DC_INT || c == DC_FLOAT || c == DC_COMPLEX;
  case MPI_LAND:
  case MPI_LOR:
  case MPI_LXOR:
    return c == DC_INT || c == DC_LOGICAL;
  case MPI_BAND:
  case MPI_BOR:
  case MPI_BXOR:
    return c == DC_INT || c == DC_BYTE;
  case MPI_MINLOC:
  case MPI_MAXLOC:
    return c == DC_PAIR;
  default:
    return false;
  }
}

/* A user operation over n elements of a derived type, `in` and `io` packed (the reductions move
 * derived data packed): both unpacked into the type's layout, the function called with the
 * program's datatype, the result packed back. */
static int user_apply_derived(const struct user_op *u, MPI_Datatype dt, const void *in, void *io,
                              size_t n)
{
  MPI_Aint lb, ext, tlb, text;
  int sz;
  if (PMPI_Type_get_extent(dt, &lb, &ext) || PMPI_Type_get_true_extent(dt, &tlb, &text) ||
      PMPI_Type_size(dt, &sz) || ext < 0 || n > INT_MAX)
    return MPI_ERR_TYPE;
  size_t span = n ? (size_t)(n - 1) * (size_t)ext + (size_t)text : 0;
  char *a = calloc(2, span ? span : 1), *b = a + span;
  if (!a)
    return MPI_ERR_NO_MEM;
  char *abase = a - tlb, *bbase = b - tlb; /* element 0 at base: its data from base + tlb */
  size_t bytes = n * (size_t)sz;
  pp_type_unpack(in, bytes, abase, (int)n, dt);
  pp_type_unpack(io, bytes, bbase, (int)n, dt);
  int len = (int)n;
  MPI_Datatype t = dt;
  u->fn(abase, bbase, &len, &t);
  pp_type_pack(bbase, (int)n, dt, io, bytes);
  free(a);
  return MPI_SUCCESS;
}

int pp_op_apply(MPI_Op op, MPI_Datatype dt, const void *in, void *io, size_t n)
{
  const struct user_op *u = user_op_get(op);
  if (u) {
    if (!pp_dt_size(dt))
      return user_apply_derived(u, dt, in, io, n);
    user_apply(u, dt, in, io, n);
    return MPI_SUCCESS;
  }
  enum dt_class c = class_of(dt);
  if (!pp_dt_size(dt) || !op_fits(op, c))
    return MPI_ERR_OP;
  bool logic = op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR;
  bool bits = op == MPI_BAND || op == MPI_BOR || op == MPI_BXOR;
  switch (dt) {
#define PP_X(h, T, cls)                                                        \
  case h:                                                                      \
    PP_APPLY_##cls(T);                                                         \
    break;
#define PP_APPLY_DC_INT(T)                                                     \
  do {                                                                         \
    if (logic) {                                                               \
      LOGIC(T)                                                                 \
    } else if (bits) {                                                         \
      BITS(T)                                                                  \
    } else {                                                                   \
      ARITH(T)                                                                 \
    }                                                                          \
  } while (0)
#define PP_APPLY_DC_FLOAT(T) do { ARITH(T) } while (0)
#define PP_APPLY_DC_LOGICAL(T) do { LOGIC(T) } while (0)
#define PP_APPLY_DC_BYTE(T) do { BITS(T) } while (0)
#define PP_APPLY_DC_COMPLEX(T) do { CPLX(T) } while (0)
#define PP_APPLY_DC_PAIR(T) do { LOC(T) } while (0)
    PP_DT_LIST(PP_X)
#undef PP_X
  default:
    return MPI_ERR_OP;
  }
  return MPI_SUCCESS;
}

/* ---------------------------------------------------------------- collectives */

enum { TAG_BARRIER = 1, TAG_BCAST = 2, TAG_REDUCE = 3 };

static int coll_comm(const char *fn, MPI_Comm comm, struct pp_comm **c)
{
  pp_need_init(fn);
  *c = pp_comm_get(comm);
  if (!*c)
    return pp_err(NULL, fn, MPI_ERR_COMM, "communicator 0x%x is not a live communicator", comm);
  return MPI_SUCCESS;
}

static int coll_args(const char *fn, const struct pp_comm *c, int count, MPI_Datatype dt,
                     size_t *bytes)
{
  size_t sz = pp_dt_size(dt);
  if (!sz)
    return pp_err(c, fn, MPI_ERR_TYPE, "datatype 0x%x is not a predefined C datatype", dt);
  if (count < 0)
    return pp_err(c, fn, MPI_ERR_COUNT, "count %d", count);
  *bytes = (size_t)count * sz;
  if (*bytes > PP_LINK_MAX_MSG)
    return pp_err(c, fn, MPI_ERR_COUNT, "%zu bytes: more than %u", *bytes, PP_LINK_MAX_MSG);
  return MPI_SUCCESS;
}

/* ---------------------------------------------------------------- derived datatypes */

/* Bcast, Gather, Scatter, Allgather and Alltoall take derived datatypes (dtype.c): such a side
 * of the call is packed into (or received in) a contiguous copy of n blocks of `count`
 * elements, block i at buf + i * count * extent, moved as MPI_BYTE and unpacked at the end. */
struct side {
  bool on;       /* the datatype is derived: `tmp` stands for the buffer */
  char *tmp;
  size_t blk;    /* packed bytes of one block */
  MPI_Aint ext;  /* the type's extent */
};

static bool derived(MPI_Datatype dt)
{
  return dt != MPI_DATATYPE_NULL && !pp_dt_size(dt);
}

/* block i of count elements: from MPI_BOTTOM (NULL) too, absolute addresses as integers */
static void *block_at(const void *buf, int i, int count, MPI_Aint ext)
{
  return (void *)((uintptr_t)buf + (uintptr_t)((MPI_Aint)i * count * ext));
}

/* A side of n blocks: checked (MPI_ERR_TYPE, _COUNT through c's handler), its copy allocated;
 * pack: the blocks [from, to) of buf packed into it. */
static int side_open(const char *fn, const struct pp_comm *c, const void *buf, int count,
                     MPI_Datatype dt, int n, int from, int to, struct side *sd)
{
  struct pp_tbuf tb;
  MPI_Aint lb;
  int e;
  *sd = (struct side){.on = true};
  if ((e = pp_type_check(c, fn, dt, count, &tb)))
    return e;
  if ((e = PMPI_Type_get_extent(dt, &lb, &sd->ext)))
    return e;
  sd->blk = tb.bytes;
  if (!(sd->tmp = malloc(n && sd->blk ? (size_t)n * sd->blk : 1)))
    return pp_err(c, fn, MPI_ERR_NO_MEM, "a %d x %zu-byte copy of the derived type's data", n,
                  sd->blk);
  for (int i = from; i < to; i++)
    pp_type_pack(block_at(buf, i, count, sd->ext), count, dt, sd->tmp + (size_t)i * sd->blk,
                 sd->blk);
  return MPI_SUCCESS;
}

/* The blocks [from, to) of the copy unpacked into buf; the copy freed. */
static void side_close(struct side *sd, void *buf, int count, MPI_Datatype dt, int from, int to)
{
  for (int i = from; i < to; i++)
    pp_type_unpack(sd->tmp + (size_t)i * sd->blk, sd->blk, block_at(buf, i, count, sd->ext),
                   count, dt);
  free(sd->tmp);
  sd->tmp = NULL;
}

static int side_count(const struct side *sd, int count)
{
  return sd->on ? (int)sd->blk : count; /* blk <= PP_LINK_MAX_MSG (pp_type_check) */
}

/* The v variants' side of n blocks: block i is counts[i] elements at buf + displs[i] extents,
 * packed one after the other in `tmp` (cnt[i] bytes at dsp[i]: the counts and displacements the
 * call then moves as MPI_BYTE); pack: the blocks [from, to) packed now. */
struct vside {
  char *tmp;
  int *cnt, *dsp;
  MPI_Aint ext;
};

static int vside_open(const char *fn, const struct pp_comm *c, const void *buf,
                      const int *counts, const int *displs, MPI_Datatype dt, int n, int from,
                      int to, struct vside *v)
{
  struct pp_tbuf tb;
  MPI_Aint lb;
  int e;
  *v = (struct vside){0};
  if ((e = pp_type_check(c, fn, dt, 1, &tb)) || (e = PMPI_Type_get_extent(dt, &lb, &v->ext)))
    return e;
  if (!(v->cnt = malloc(sizeof(int) * 2 * (size_t)n)))
    return pp_err(c, fn, MPI_ERR_NO_MEM, "%d ranks", n);
  v->dsp = v->cnt + n;
  size_t total = 0;
  for (int i = 0; i < n; i++) {
    if (counts[i] < 0 || (size_t)counts[i] * tb.bytes > PP_LINK_MAX_MSG) {
      free(v->cnt);
      v->cnt = NULL;
      return pp_err(c, fn, MPI_ERR_COUNT, "count %d for rank %d", counts[i], i);
    }
    v->cnt[i] = (int)((size_t)counts[i] * tb.bytes);
    v->dsp[i] = (int)total;
    total += (size_t)v->cnt[i];
    if (total > INT_MAX) {
      free(v->cnt);
      v->cnt = NULL;
      return pp_err(c, fn, MPI_ERR_COUNT, "more than %d packed bytes in all", INT_MAX);
    }
  }
  if (!(v->tmp = malloc(total ? total : 1))) {
    free(v->cnt);
    v->cnt = NULL;
    return pp_err(c, fn, MPI_ERR_NO_MEM, "%zu bytes of packed data", total);
  }
  for (int i = from; i < to; i++)
    pp_type_pack(block_at(buf, displs[i], 1, v->ext), counts[i], dt, v->tmp + v->dsp[i],
                 (size_t)v->cnt[i]);
  return MPI_SUCCESS;
}

/* The blocks [from, to) unpacked into buf; the copy freed. */
static void vside_close(struct vside *v, void *buf, const int *counts, const int *displs,
                        MPI_Datatype dt, int from, int to)
{
  for (int i = from; i < to && v->tmp; i++)
    pp_type_unpack(v->tmp + v->dsp[i], (size_t)v->cnt[i], block_at(buf, displs[i], 1, v->ext),
                   counts[i], dt);
  free(v->tmp);
  free(v->cnt);
  *v = (struct vside){0};
}

/* One blocking exchange on the collective context: send to dest and/or receive from source
 * (-1: none). */
static int xchg(const char *fn, const struct pp_comm *c, int tag, const void *sbuf, size_t sbytes,
                int dest, void *rbuf, size_t rbytes, int source)
{
  MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  int e;
  if (source >= 0 && (e = pp_start_recv(fn, c, 1, rbuf, rbytes, source, tag, &r[0])))
    return e;
  if (dest >= 0 && (e = pp_start_send(fn, c, 1, sbuf, sbytes, dest, tag, false, &r[1])))
    return e;
  return pp_complete(fn, 2, r, MPI_STATUSES_IGNORE, PP_LINK_ALL, true, NULL, NULL, NULL, NULL);
}

/* Reductions and scans of a derived type: its data packed (the type map's order), then reduced
 * as its one predefined type with a predefined operation (MPI 4.0 6.9.2: such an operation
 * applies to a derived type whose elements are all of a type it applies to), or as the program's
 * type with its own operation (unpacked into the layout around each call of its function,
 * user_apply_derived). `s` holds the rank's contribution, `r` the result. */
struct dred {
  MPI_Datatype dt; /* what the reduction runs on */
  int per;         /* elements of dt per element of the program's type */
  size_t ebytes;   /* packed bytes of one element of the program's type */
  char *s, *r;
};

static int dred_open(const char *fn, const struct pp_comm *c, const void *src, int scount,
                     int rcount, MPI_Datatype dt, MPI_Op op, struct dred *d)
{
  struct pp_tbuf tb;
  int e, sz;
  *d = (struct dred){.dt = dt, .per = 1};
  if ((e = pp_type_check(c, fn, dt, scount, &tb)) || (e = pp_type_check(c, fn, dt, rcount, &tb)))
    return e;
  if ((e = PMPI_Type_size(dt, &sz)))
    return e;
  d->ebytes = (size_t)sz;
  if (!pp_op_valid(op))
    return pp_err(c, fn, MPI_ERR_OP, "operation 0x%x is neither predefined nor a live operation "
                                     "of MPI_Op_create", op);
  if (!user_op_get(op)) {
    MPI_Datatype base = pp_type_base(dt);
    if (base == MPI_DATATYPE_NULL)
      return pp_err(c, fn, MPI_ERR_OP, "predefined operation 0x%x on datatype 0x%x, whose "
                                       "elements are not all of one predefined type", op, dt);
    d->dt = base;
    d->per = sz ? (int)((size_t)sz / pp_dt_size(base)) : 0;
  }
  size_t sb = (size_t)scount * d->ebytes, rb = (size_t)rcount * d->ebytes;
  d->s = malloc(sb ? sb : 1);
  d->r = malloc(rb ? rb : 1);
  if (!d->s || !d->r) {
    free(d->s);
    free(d->r);
    d->s = d->r = NULL;
    return pp_err(c, fn, MPI_ERR_NO_MEM, "%zu + %zu bytes of packed data", sb, rb);
  }
  if (src && scount)
    pp_type_pack(src, scount, dt, d->s, sb);
  return MPI_SUCCESS;
}

/* The result's rcount elements unpacked into buf (unpack false: nothing), the copies freed. */
static int dred_close(struct dred *d, void *buf, int rcount, MPI_Datatype dt, bool unpack, int e)
{
  if (!e && unpack && rcount)
    pp_type_unpack(d->r, (size_t)rcount * d->ebytes, buf, rcount, dt);
  free(d->s);
  free(d->r);
  return e;
}

int PMPI_Barrier(MPI_Comm comm)
{
  struct pp_comm *c;
  int e = coll_comm("MPI_Barrier", comm, &c);
  if (e)
    return e;
  for (int k = 1; k < c->size; k <<= 1) {
    int to = (c->rank + k) % c->size, from = (c->rank - k + c->size) % c->size;
    if ((e = xchg("MPI_Barrier", c, TAG_BARRIER, NULL, 0, to, NULL, 0, from)))
      return e;
  }
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Barrier);

static int bcast(const char *fn, const struct pp_comm *c, void *buf, size_t bytes, int root)
{
  int n = c->size, vr = (c->rank - root + n) % n, e, mask = 1;
  while (mask < n) { /* receive from the parent: vr with its lowest set bit cleared */
    if (vr & mask) {
      int parent = ((vr - mask) + root) % n;
      if ((e = xchg(fn, c, TAG_BCAST, NULL, 0, -1, buf, bytes, parent)))
        return e;
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1) /* then to the children below that bit */
    if (vr + mask < n && (e = xchg(fn, c, TAG_BCAST, buf, bytes, (vr + mask + root) % n, NULL, 0,
                                   -1)))
      return e;
  return MPI_SUCCESS;
}

static int bcast_derived(void *buf, int count, MPI_Datatype dt, int root, struct pp_comm *c)
{
  struct side sd;
  bool src = c->rank == root;
  int e = side_open("MPI_Bcast", c, buf, count, dt, 1, 0, src ? 1 : 0, &sd);
  if (!e)
    e = PMPI_Bcast(sd.tmp, (int)sd.blk, MPI_BYTE, root, c->handle);
  side_close(&sd, buf, count, dt, 0, e || src ? 0 : 1);
  return e;
}

int PMPI_Bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm)
{
  struct pp_comm *c;
  size_t bytes;
  int e;
  if (derived(dt) && (c = pp_comm_get(comm)) && root >= 0 && root < c->size)
    return bcast_derived(buf, count, dt, root, c);
  if ((e = coll_comm("MPI_Bcast", comm, &c)) || (e = coll_args("MPI_Bcast", c, count, dt, &bytes)))
    return e;
  if (root < 0 || root >= c->size)
    return pp_err(c, "MPI_Bcast", MPI_ERR_ROOT, "root %d (the communicator has %d)", root,
                  c->size);
  return bytes && c->size > 1 ? bcast("MPI_Bcast", c, buf, bytes, root) : MPI_SUCCESS;
}
PP_ALIAS(MPI_Bcast);

/* The reduction at the root, in rank order whatever the arrival order. `acc` holds the
 * result at the root. */
static int reduce(const char *fn, const struct pp_comm *c, const void *mine, void *acc,
                  size_t count, size_t bytes, MPI_Datatype dt, MPI_Op op, int root)
{
  int n = c->size, e;
  if (c->rank != root)
    return xchg(fn, c, TAG_REDUCE, mine, bytes, root, NULL, 0, -1);
  void *tmp = malloc(bytes ? bytes : 1);
  if (!tmp)
    return pp_err(c, fn, MPI_ERR_NO_MEM, "%zu bytes", bytes);
  /* acc = x(n-1); then acc = x(i) op acc for i = n-2 .. 0 */
  for (int i = n - 1; i >= 0; i--) {
    const void *x = mine;
    if (i != root) {
      if ((e = xchg(fn, c, TAG_REDUCE, NULL, 0, -1, tmp, bytes, i))) {
        free(tmp);
        return e;
      }
      x = tmp;
    }
    if (i == n - 1)
      memmove(acc, x, bytes);
    else if ((e = pp_op_apply(op, dt, x, acc, count))) { /* reduce_args checked the pair */
      free(tmp);
      return pp_err(c, fn, e, "operation 0x%x on datatype 0x%x", op, dt);
    }
  }
  free(tmp);
  return MPI_SUCCESS;
}

static int reduce_args(const char *fn, const struct pp_comm *c, int count, MPI_Datatype dt,
                       MPI_Op op, size_t *bytes)
{
  int e;
  if (derived(dt) && user_op_get(op)) { /* its data packed (dred_open) */
    struct pp_tbuf tb;
    if ((e = pp_type_check(c, fn, dt, count, &tb)))
      return e;
    *bytes = tb.bytes;
    return MPI_SUCCESS;
  }
  if ((e = coll_args(fn, c, count, dt, bytes)))
    return e;
  if (!pp_op_valid(op))
    return pp_err(c, fn, MPI_ERR_OP, "operation 0x%x is neither predefined nor a live operation "
                                     "of MPI_Op_create", op);
  if (user_op_get(op)) /* the program's function takes any datatype */
    return MPI_SUCCESS;
  unsigned char a[64] = {0}, b[64] = {0};
  if (pp_dt_size(dt) <= sizeof(a) && pp_op_apply(op, dt, a, b, 1) != MPI_SUCCESS)
    return pp_err(c, fn, MPI_ERR_OP, "operation 0x%x does not apply to datatype 0x%x", op, dt);
  return MPI_SUCCESS;
}

static int reduce_call(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op,
                       int root, MPI_Comm comm);

int PMPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, int root,
                MPI_Comm comm)
{
  struct pp_comm *c = pp_comm_get(comm);
  if (c && derived(dt) && root >= 0 && root < c->size && count >= 0) {
    bool at_root = c->rank == root;
    struct dred d;
    int e = dred_open("MPI_Reduce", c, sbuf == MPI_IN_PLACE ? rbuf : sbuf, count,
                      at_root ? count : 0, dt, op, &d);
    if (!e)
      e = reduce_call(d.s, at_root ? d.r : NULL, count * d.per, d.dt, op, root, comm);
    return dred_close(&d, rbuf, count, dt, at_root, e);
  }
  return reduce_call(sbuf, rbuf, count, dt, op, root, comm);
}
PP_ALIAS(MPI_Reduce);

static int reduce_call(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op,
                       int root, MPI_Comm comm)
{
  struct pp_comm *c;
  size_t bytes;
  int e;
  if ((e = coll_comm("MPI_Reduce", comm, &c)) ||
      (e = reduce_args("MPI_Reduce", c, count, dt, op, &bytes)))
    return e;
  if (root < 0 || root >= c->size)
    return pp_err(c, "MPI_Reduce", MPI_ERR_ROOT, "root %d (the communicator has %d)", root,
                  c->size);
  if (sbuf == MPI_IN_PLACE && c->rank != root)
    return pp_err(c, "MPI_Reduce", MPI_ERR_BUFFER, "MPI_IN_PLACE on a rank that is not the root");
  const void *mine = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
  if (c->rank != root)
    return reduce("MPI_Reduce", c, mine, NULL, (size_t)count, bytes, dt, op, root);
  void *copy = NULL;
  if (sbuf == MPI_IN_PLACE) { /* the root's own contribution is overwritten by the result */
    if (!(copy = malloc(bytes ? bytes : 1)))
      return pp_err(c, "MPI_Reduce", MPI_ERR_NO_MEM, "%zu bytes", bytes);
    memcpy(copy, rbuf, bytes);
    mine = copy;
  }
  e = reduce("MPI_Reduce", c, mine, rbuf, (size_t)count, bytes, dt, op, root);
  free(copy);
  return e;
}

static int allreduce(const char *fn, const struct pp_comm *c, const void *sbuf, void *rbuf,
                     size_t count, size_t bytes, MPI_Datatype dt, MPI_Op op)
{
  const void *mine = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
  void *copy = NULL;
  if (c->rank == 0 && sbuf == MPI_IN_PLACE) {
    if (!(copy = malloc(bytes ? bytes : 1)))
      return pp_err(c, fn, MPI_ERR_NO_MEM, "%zu bytes", bytes);
    memcpy(copy, rbuf, bytes);
    mine = copy;
  }
  int e = reduce(fn, c, mine, rbuf, count, bytes, dt, op, 0);
  free(copy);
  if (e)
    return e;
  return bytes && c->size > 1 ? bcast(fn, c, rbuf, bytes, 0) : MPI_SUCCESS;
}

int pp_allreduce(const char *fn, const struct pp_comm *c, const void *in, void *out, size_t count,
                 MPI_Datatype dt, MPI_Op op)
{
  return allreduce(fn, c, in, out, count, count * pp_dt_size(dt), dt, op);
}

int PMPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op,
                   MPI_Comm comm)
{
  struct pp_comm *c;
  size_t bytes;
  int e;
  if ((e = coll_comm("MPI_Allreduce", comm, &c)))
    return e;
  if (derived(dt) && count >= 0) {
    struct dred d;
    e = dred_open("MPI_Allreduce", c, sbuf == MPI_IN_PLACE ? rbuf : sbuf, count, count, dt, op,
                  &d);
    if (!e && !(e = reduce_args("MPI_Allreduce", c, count * d.per, d.dt, op, &bytes)))
      e = allreduce("MPI_Allreduce", c, d.s, d.r, (size_t)count * (size_t)d.per, bytes, d.dt, op);
    return dred_close(&d, rbuf, count, dt, true, e);
  }
  if ((e = reduce_args("MPI_Allreduce", c, count, dt, op, &bytes)))
    return e;
  return allreduce("MPI_Allreduce", c, sbuf, rbuf, (size_t)count, bytes, dt, op);
}
PP_ALIAS(MPI_Allreduce);

int PMPI_Reduce_local(const void *in, void *inout, int count, MPI_Datatype dt, MPI_Op op)
{
  size_t bytes;
  int e;
  pp_need_init("MPI_Reduce_local");
  if ((e = reduce_args("MPI_Reduce_local", NULL, count, dt, op, &bytes)))
    return e;
  if (count && (!in || !inout || in == MPI_IN_PLACE))
    return pp_err(NULL, "MPI_Reduce_local", MPI_ERR_BUFFER, "inbuf or inoutbuf");
  return pp_op_apply(op, dt, in, inout, (size_t)count);
}
PP_ALIAS(MPI_Reduce_local);

/* ---------------------------------------------------------------- the data-movement collectives */

enum { TAG_GATHER = 4, TAG_SCATTER = 5, TAG_ALLGATHER = 6, TAG_ALLTOALL = 7, TAG_SCAN = 8 };

/* requests a root keeps in flight at once (the engine's p2p.max_requests bounds them all) */
#define PP_COLL_WINDOW 32

/* Up to PP_COLL_WINDOW point-to-point requests on c's collective context, completed together. */
struct batch {
  const char *fn;
  const struct pp_comm *c;
  int n;
  MPI_Request r[PP_COLL_WINDOW];
};

/* The error of the first failed request: MPI_ERR_IN_STATUS says which in the status. */
static int batch_wait(struct batch *b)
{
  MPI_Status sts[PP_COLL_WINDOW];
  int e = pp_complete(b->fn, b->n, b->r, sts, PP_LINK_ALL, true, NULL, NULL, NULL, NULL);
  if (e == MPI_ERR_IN_STATUS)
    for (int i = 0; i < b->n; i++)
      if (sts[i].MPI_ERROR != MPI_SUCCESS) {
        e = sts[i].MPI_ERROR;
        break;
      }
  b->n = 0;
  return e;
}

static int batch_add(struct batch *b, bool send, int tag, void *buf, size_t bytes, int peer)
{
  int e;
  if (b->n == PP_COLL_WINDOW && (e = batch_wait(b)))
    return e;
  MPI_Request *r = &b->r[b->n++];
  return send ? pp_start_send(b->fn, b->c, 1, buf, bytes, peer, tag, false, r)
              : pp_start_recv(b->fn, b->c, 1, buf, bytes, peer, tag, r);
}

/* The local part of a collective: what a rank sends to itself, MPI_ERR_TRUNCATE when it does
 * not fit. */
static int self_copy(const char *fn, const struct pp_comm *c, void *to, size_t room,
                     const void *from, size_t bytes)
{
  if (bytes > room)
    return pp_err(c, fn, MPI_ERR_TRUNCATE, "%zu bytes to itself into %zu", bytes, room);
  if (bytes && to != from)
    memmove(to, from, bytes);
  return MPI_SUCCESS;
}

/* A buffer description: count elements of dt, checked; bytes out. */
static int buf_args(const char *fn, const struct pp_comm *c, const void *buf, int count,
                    MPI_Datatype dt, size_t *bytes)
{
  int e = coll_args(fn, c, count, dt, bytes);
  if (e)
    return e;
  if (count && !buf)
    return pp_err(c, fn, MPI_ERR_BUFFER, "NULL buffer with count %d", count);
  return MPI_SUCCESS;
}

/* Each rank's block: counts[i] elements of dt at displs[i]; displs NULL: the blocks one after
 * the other; counts NULL: `count` for every rank (the calls without v). Bytes and offsets. */
struct blocks {
  size_t *bytes, *off;
};

static void blocks_free(struct blocks *b)
{
  free(b->bytes);
  b->bytes = b->off = NULL;
}

static int blocks_args(const char *fn, const struct pp_comm *c, const void *buf, int count,
                       const int *counts, const int *displs, MPI_Datatype dt, struct blocks *b)
{
  int n = c->size, e;
  size_t sz = pp_dt_size(dt);
  b->bytes = b->off = NULL;
  if (!sz)
    return pp_err(c, fn, MPI_ERR_TYPE, "datatype 0x%x is not a predefined C datatype", dt);
  if (!counts && count < 0)
    return pp_err(c, fn, MPI_ERR_COUNT, "count %d", count);
  if (!(b->bytes = malloc(sizeof(size_t) * 2 * (size_t)n)))
    return pp_err(c, fn, MPI_ERR_NO_MEM, "%d ranks", n);
  b->off = b->bytes + n;
  bool any = false;
  size_t packed = 0;
  for (int i = 0; i < n; i++) {
    int k = counts ? counts[i] : count;
    if (k < 0) {
      e = pp_err(c, fn, MPI_ERR_COUNT, "count %d for rank %d", k, i);
      goto fail;
    }
    if (displs && displs[i] < 0) {
      e = pp_err(c, fn, MPI_ERR_ARG, "displacement %d for rank %d", displs[i], i);
      goto fail;
    }
    b->bytes[i] = (size_t)k * sz;
    b->off[i] = displs ? (size_t)displs[i] * sz : packed;
    packed += b->bytes[i];
    any |= k > 0;
    if (b->bytes[i] > PP_LINK_MAX_MSG) {
      e = pp_err(c, fn, MPI_ERR_COUNT, "%zu bytes for rank %d: more than %u", b->bytes[i], i,
                 PP_LINK_MAX_MSG);
      goto fail;
    }
  }
  if (any && !buf) {
    e = pp_err(c, fn, MPI_ERR_BUFFER, "NULL buffer");
    goto fail;
  }
  return MPI_SUCCESS;
fail:
  blocks_free(b);
  return e;
}

static int root_arg(const char *fn, const struct pp_comm *c, int root)
{
  if (root < 0 || root >= c->size)
    return pp_err(c, fn, MPI_ERR_ROOT, "root %d (the communicator has %d)", root, c->size);
  return MPI_SUCCESS;
}

/* the root receives block i of rb from rank i; in_place: its own is in place already */
static int gather(const char *fn, const struct pp_comm *c, const void *sbuf, size_t sbytes,
                  char *rbuf, const struct blocks *rb, int root)
{
  if (c->rank != root)
    return xchg(fn, c, TAG_GATHER, sbuf, sbytes, root, NULL, 0, -1);
  struct batch b = {.fn = fn, .c = c};
  int e = MPI_SUCCESS;
  for (int i = 0; i < c->size && !e; i++)
    if (i != root)
      e = batch_add(&b, false, TAG_GATHER, rbuf + rb->off[i], rb->bytes[i], i);
  int e2 = b.n ? batch_wait(&b) : MPI_SUCCESS;
  if (e || e2)
    return e ? e : e2;
  if (sbuf == MPI_IN_PLACE)
    return MPI_SUCCESS;
  return self_copy(fn, c, rbuf + rb->off[root], rb->bytes[root], sbuf, sbytes);
}

static int scatter(const char *fn, const struct pp_comm *c, const char *sbuf,
                   const struct blocks *sb, void *rbuf, size_t rbytes, int root)
{
  if (c->rank != root)
    return xchg(fn, c, TAG_SCATTER, NULL, 0, -1, rbuf, rbytes, root);
  struct batch b = {.fn = fn, .c = c};
  int e = MPI_SUCCESS;
  for (int i = 0; i < c->size && !e; i++)
    if (i != root)
      e = batch_add(&b, true, TAG_SCATTER, (void *)(uintptr_t)(sbuf + sb->off[i]), sb->bytes[i],
                    i);
  int e2 = b.n ? batch_wait(&b) : MPI_SUCCESS;
  if (e || e2)
    return e ? e : e2;
  if (rbuf == MPI_IN_PLACE)
    return MPI_SUCCESS;
  return self_copy(fn, c, rbuf, rbytes, sbuf + sb->off[root], sb->bytes[root]);
}

static int gather_any(const char *fn, const void *sbuf, int scount, MPI_Datatype stype,
                      void *rbuf, int rcount, const int *rcounts, const int *displs,
                      MPI_Datatype rtype, int root, MPI_Comm comm)
{
  struct pp_comm *c;
  struct blocks rb = {0};
  size_t sbytes = 0;
  int e;
  if ((e = coll_comm(fn, comm, &c)) || (e = root_arg(fn, c, root)))
    return e;
  bool at_root = c->rank == root;
  if (sbuf == MPI_IN_PLACE && !at_root)
    return pp_err(c, fn, MPI_ERR_BUFFER, "MPI_IN_PLACE on a rank that is not the root");
  if (sbuf != MPI_IN_PLACE && (e = buf_args(fn, c, sbuf, scount, stype, &sbytes)))
    return e;
  if (at_root && (e = blocks_args(fn, c, rbuf, rcount, rcounts, displs, rtype, &rb)))
    return e;
  e = gather(fn, c, sbuf, sbytes, rbuf, &rb, root);
  blocks_free(&rb);
  return e;
}

int PMPI_Gather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                MPI_Datatype rtype, int root, MPI_Comm comm)
{
  const char *fn = "MPI_Gather";
  struct pp_comm *c = pp_comm_get(comm);
  bool sd_on = sbuf != MPI_IN_PLACE && derived(stype);
  if (c && root >= 0 && root < c->size && (sd_on || (c->rank == root && derived(rtype)))) {
    struct side s = {0}, r = {0};
    int n = c->size, me = c->rank, e = MPI_SUCCESS;
    bool rd_on = me == root && derived(rtype), in_place = sbuf == MPI_IN_PLACE;
    if (sd_on)
      e = side_open(fn, c, sbuf, scount, stype, 1, 0, 1, &s);
    if (!e && rd_on) /* in place: the root's own block packed first */
      e = side_open(fn, c, rbuf, rcount, rtype, n, in_place ? root : 0, in_place ? root + 1 : 0,
                    &r);
    if (!e)
      e = gather_any(fn, sd_on ? s.tmp : sbuf, side_count(&s, scount), sd_on ? MPI_BYTE : stype,
                     rd_on ? r.tmp : rbuf, side_count(&r, rcount), NULL, NULL,
                     rd_on ? MPI_BYTE : rtype, root, comm);
    free(s.tmp);
    if (rd_on)
      side_close(&r, rbuf, rcount, rtype, 0, e ? 0 : n);
    return e;
  }
  return gather_any("MPI_Gather", sbuf, scount, stype, rbuf, rcount, NULL, NULL, rtype, root,
                    comm);
}
PP_ALIAS(MPI_Gather);

int PMPI_Gatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                 const int rcounts[], const int displs[], MPI_Datatype rtype, int root,
                 MPI_Comm comm)
{
  struct pp_comm *c = pp_comm_get(comm);
  if (c && c->rank == root && (!rcounts || !displs))
    return pp_err(c, "MPI_Gatherv", MPI_ERR_ARG, "recvcounts or displs is NULL");
  bool sd_on = sbuf != MPI_IN_PLACE && derived(stype);
  if (c && root >= 0 && root < c->size && (sd_on || (c->rank == root && derived(rtype)))) {
    const char *fn = "MPI_Gatherv";
    struct side s = {0};
    struct vside v = {0};
    int n = c->size, e = MPI_SUCCESS;
    bool rd_on = c->rank == root && derived(rtype), in_place = sbuf == MPI_IN_PLACE;
    if (sd_on)
      e = side_open(fn, c, sbuf, scount, stype, 1, 0, 1, &s);
    if (!e && rd_on) /* in place: the root's own block packed first */
      e = vside_open(fn, c, rbuf, rcounts, displs, rtype, n, in_place ? root : 0,
                     in_place ? root + 1 : 0, &v);
    if (!e)
      e = gather_any(fn, sd_on ? s.tmp : sbuf, side_count(&s, scount), sd_on ? MPI_BYTE : stype,
                     rd_on ? v.tmp : rbuf, 0, rd_on ? v.cnt : rcounts, rd_on ? v.dsp : displs,
                     rd_on ? MPI_BYTE : rtype, root, comm);
    free(s.tmp);
    if (rd_on)
      vside_close(&v, rbuf, rcounts, displs, rtype, 0, e ? 0 : n);
    return e;
  }
  return gather_any("MPI_Gatherv", sbuf, scount, stype, rbuf, 0, rcounts, displs, rtype, root,
                    comm);
}
PP_ALIAS(MPI_Gatherv);

static int scatter_any(const char *fn, const void *sbuf, int scount, const int *scounts,
                       const int *displs, MPI_Datatype stype, void *rbuf, int rcount,
                       MPI_Datatype rtype, int root, MPI_Comm comm)
{
  struct pp_comm *c;
  struct blocks sb = {0};
  size_t rbytes = 0;
  int e;
  if ((e = coll_comm(fn, comm, &c)) || (e = root_arg(fn, c, root)))
    return e;
  bool at_root = c->rank == root;
  if (rbuf == MPI_IN_PLACE && !at_root)
    return pp_err(c, fn, MPI_ERR_BUFFER, "MPI_IN_PLACE on a rank that is not the root");
  if (rbuf != MPI_IN_PLACE && (e = buf_args(fn, c, rbuf, rcount, rtype, &rbytes)))
    return e;
  if (at_root && (e = blocks_args(fn, c, sbuf, scount, scounts, displs, stype, &sb)))
    return e;
  e = scatter(fn, c, sbuf, &sb, rbuf, rbytes, root);
  blocks_free(&sb);
  return e;
}

int PMPI_Scatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                 MPI_Datatype rtype, int root, MPI_Comm comm)
{
  const char *fn = "MPI_Scatter";
  struct pp_comm *c = pp_comm_get(comm);
  bool rd_on = rbuf != MPI_IN_PLACE && derived(rtype);
  if (c && root >= 0 && root < c->size && (rd_on || (c->rank == root && derived(stype)))) {
    struct side s = {0}, r = {0};
    int n = c->size, e = MPI_SUCCESS;
    bool sd_on = c->rank == root && derived(stype);
    if (sd_on)
      e = side_open(fn, c, sbuf, scount, stype, n, 0, n, &s);
    if (!e && rd_on)
      e = side_open(fn, c, rbuf, rcount, rtype, 1, 0, 0, &r);
    if (!e)
      e = scatter_any(fn, sd_on ? s.tmp : sbuf, side_count(&s, scount), NULL, NULL,
                      sd_on ? MPI_BYTE : stype, rd_on ? r.tmp : rbuf, side_count(&r, rcount),
                      rd_on ? MPI_BYTE : rtype, root, comm);
    free(s.tmp);
    if (rd_on)
      side_close(&r, rbuf, rcount, rtype, 0, e ? 0 : 1);
    return e;
  }
  return scatter_any("MPI_Scatter", sbuf, scount, NULL, NULL, stype, rbuf, rcount, rtype, root,
                     comm);
}
PP_ALIAS(MPI_Scatter);

int PMPI_Scatterv(const void *sbuf, const int scounts[], const int displs[], MPI_Datatype stype,
                  void *rbuf, int rcount, MPI_Datatype rtype, int root, MPI_Comm comm)
{
  struct pp_comm *c = pp_comm_get(comm);
  if (c && c->rank == root && (!scounts || !displs))
    return pp_err(c, "MPI_Scatterv", MPI_ERR_ARG, "sendcounts or displs is NULL");
  bool rd_on = rbuf != MPI_IN_PLACE && derived(rtype);
  if (c && root >= 0 && root < c->size && (rd_on || (c->rank == root && derived(stype)))) {
    const char *fn = "MPI_Scatterv";
    struct side r = {0};
    struct vside v = {0};
    int n = c->size, e = MPI_SUCCESS;
    bool sd_on = c->rank == root && derived(stype);
    if (sd_on)
      e = vside_open(fn, c, sbuf, scounts, displs, stype, n, 0, n, &v);
    if (!e && rd_on)
      e = side_open(fn, c, rbuf, rcount, rtype, 1, 0, 0, &r);
    if (!e)
      e = scatter_any(fn, sd_on ? v.tmp : sbuf, 0, sd_on ? v.cnt : scounts,
                      sd_on ? v.dsp : displs, sd_on ? MPI_BYTE : stype, rd_on ? r.tmp : rbuf,
                      side_count(&r, rcount), rd_on ? MPI_BYTE : rtype, root, comm);
    if (sd_on)
      vside_close(&v, NULL, scounts, displs, stype, 0, 0);
    if (rd_on)
      side_close(&r, rbuf, rcount, rtype, 0, e ? 0 : 1);
    else
      free(r.tmp);
    return e;
  }
  return scatter_any("MPI_Scatterv", sbuf, 0, scounts, displs, stype, rbuf, rcount, rtype, root,
                     comm);
}
PP_ALIAS(MPI_Scatterv);

/* Around the ring: step k sends block (rank - k) to rank + 1 and receives block (rank - k - 1)
 * from rank - 1; every rank's own block is in place first. */
static int allgather(const char *fn, const struct pp_comm *c, const void *sbuf, size_t sbytes,
                     char *rbuf, const struct blocks *rb)
{
  int n = c->size, r = c->rank, e;
  if (sbuf != MPI_IN_PLACE && (e = self_copy(fn, c, rbuf + rb->off[r], rb->bytes[r], sbuf,
                                             sbytes)))
    return e;
  int right = (r + 1) % n, left = (r - 1 + n) % n;
  for (int k = 0; k < n - 1; k++) {
    int out = (r - k + n) % n, in = (r - k - 1 + n) % n;
    if ((e = xchg(fn, c, TAG_ALLGATHER, rbuf + rb->off[out], rb->bytes[out], right,
                  rbuf + rb->off[in], rb->bytes[in], left)))
      return e;
  }
  return MPI_SUCCESS;
}

int pp_allgather(const char *fn, const struct pp_comm *c, const void *in, void *out,
                 size_t bytes)
{
  int n = c->size;
  size_t *b = malloc(sizeof(size_t) * 2 * (size_t)n);
  if (!b)
    return pp_err(c, fn, MPI_ERR_NO_MEM, "%d ranks", n);
  struct blocks rb = {.bytes = b, .off = b + n};
  for (int i = 0; i < n; i++) {
    rb.bytes[i] = bytes;
    rb.off[i] = (size_t)i * bytes;
  }
  int e = allgather(fn, c, in, bytes, out, &rb);
  blocks_free(&rb);
  return e;
}

static int allgather_any(const char *fn, const void *sbuf, int scount, MPI_Datatype stype,
                         void *rbuf, int rcount, const int *rcounts, const int *displs,
                         MPI_Datatype rtype, MPI_Comm comm)
{
  struct pp_comm *c;
  struct blocks rb;
  size_t sbytes = 0;
  int e;
  if ((e = coll_comm(fn, comm, &c)))
    return e;
  if (sbuf != MPI_IN_PLACE && (e = buf_args(fn, c, sbuf, scount, stype, &sbytes)))
    return e;
  if ((e = blocks_args(fn, c, rbuf, rcount, rcounts, displs, rtype, &rb)))
    return e;
  e = allgather(fn, c, sbuf, sbytes, rbuf, &rb);
  blocks_free(&rb);
  return e;
}

int PMPI_Allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                   MPI_Datatype rtype, MPI_Comm comm)
{
  const char *fn = "MPI_Allgather";
  struct pp_comm *c = pp_comm_get(comm);
  bool sd_on = sbuf != MPI_IN_PLACE && derived(stype), rd_on = derived(rtype);
  if (c && (sd_on || rd_on)) {
    struct side s = {0}, r = {0};
    int n = c->size, me = c->rank, e = MPI_SUCCESS;
    bool in_place = sbuf == MPI_IN_PLACE;
    if (sd_on)
      e = side_open(fn, c, sbuf, scount, stype, 1, 0, 1, &s);
    if (!e && rd_on)
      e = side_open(fn, c, rbuf, rcount, rtype, n, in_place ? me : 0, in_place ? me + 1 : 0, &r);
    if (!e)
      e = allgather_any(fn, sd_on ? s.tmp : sbuf, side_count(&s, scount),
                        sd_on ? MPI_BYTE : stype, rd_on ? r.tmp : rbuf, side_count(&r, rcount),
                        NULL, NULL, rd_on ? MPI_BYTE : rtype, comm);
    free(s.tmp);
    if (rd_on)
      side_close(&r, rbuf, rcount, rtype, 0, e ? 0 : n);
    return e;
  }
  return allgather_any("MPI_Allgather", sbuf, scount, stype, rbuf, rcount, NULL, NULL, rtype,
                       comm);
}
PP_ALIAS(MPI_Allgather);

int PMPI_Allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                    const int rcounts[], const int displs[], MPI_Datatype rtype, MPI_Comm comm)
{
  struct pp_comm *c = pp_comm_get(comm);
  if (c && (!rcounts || !displs))
    return pp_err(c, "MPI_Allgatherv", MPI_ERR_ARG, "recvcounts or displs is NULL");
  bool sd_on = sbuf != MPI_IN_PLACE && derived(stype), rd_on = derived(rtype);
  if (c && (sd_on || rd_on)) {
    const char *fn = "MPI_Allgatherv";
    struct side s = {0};
    struct vside v = {0};
    int n = c->size, me = c->rank, e = MPI_SUCCESS;
    bool in_place = sbuf == MPI_IN_PLACE;
    if (sd_on)
      e = side_open(fn, c, sbuf, scount, stype, 1, 0, 1, &s);
    if (!e && rd_on)
      e = vside_open(fn, c, rbuf, rcounts, displs, rtype, n, in_place ? me : 0,
                     in_place ? me + 1 : 0, &v);
    if (!e)
      e = allgather_any(fn, sd_on ? s.tmp : sbuf, side_count(&s, scount),
                        sd_on ? MPI_BYTE : stype, rd_on ? v.tmp : rbuf, 0,
                        rd_on ? v.cnt : rcounts, rd_on ? v.dsp : displs,
                        rd_on ? MPI_BYTE : rtype, comm);
    free(s.tmp);
    if (rd_on)
      vside_close(&v, rbuf, rcounts, displs, rtype, 0, e ? 0 : n);
    return e;
  }
  return allgather_any("MPI_Allgatherv", sbuf, scount, stype, rbuf, 0, rcounts, displs, rtype,
                       comm);
}
PP_ALIAS(MPI_Allgatherv);

/* Pairwise: step k sends block rank + k to rank + k and receives block rank - k from rank - k */
static int alltoall(const char *fn, const struct pp_comm *c, const char *sbuf,
                    const struct blocks *sb, char *rbuf, const struct blocks *rb)
{
  int n = c->size, r = c->rank, e;
  if ((e = self_copy(fn, c, rbuf + rb->off[r], rb->bytes[r], sbuf + sb->off[r], sb->bytes[r])))
    return e;
  for (int k = 1; k < n; k++) {
    int to = (r + k) % n, from = (r - k + n) % n;
    if ((e = xchg(fn, c, TAG_ALLTOALL, sbuf + sb->off[to], sb->bytes[to], to,
                  rbuf + rb->off[from], rb->bytes[from], from)))
      return e;
  }
  return MPI_SUCCESS;
}

static int alltoall_any(const char *fn, const void *sbuf, int scount, const int *scounts,
                        const int *sdispls, MPI_Datatype stype, void *rbuf, int rcount,
                        const int *rcounts, const int *rdispls, MPI_Datatype rtype,
                        MPI_Comm comm)
{
  struct pp_comm *c;
  struct blocks sb = {0}, rb = {0};
  void *copy = NULL;
  int e;
  if ((e = coll_comm(fn, comm, &c)) ||
      (e = blocks_args(fn, c, rbuf, rcount, rcounts, rdispls, rtype, &rb)))
    return e;
  if (sbuf == MPI_IN_PLACE) { /* the data is in rbuf, laid out as the receive: send a copy */
    size_t end = 0;
    for (int i = 0; i < c->size; i++)
      end = rb.off[i] + rb.bytes[i] > end ? rb.off[i] + rb.bytes[i] : end;
    if (!(copy = malloc(end ? end : 1))) {
      e = pp_err(c, fn, MPI_ERR_NO_MEM, "%zu bytes", end);
      goto out;
    }
    memcpy(copy, rbuf, end);
    e = alltoall(fn, c, copy, &rb, rbuf, &rb);
    goto out;
  }
  if ((e = blocks_args(fn, c, sbuf, scount, scounts, sdispls, stype, &sb)))
    goto out;
  e = alltoall(fn, c, sbuf, &sb, rbuf, &rb);
out:
  free(copy);
  blocks_free(&sb);
  blocks_free(&rb);
  return e;
}

int PMPI_Alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                  MPI_Datatype rtype, MPI_Comm comm)
{
  const char *fn = "MPI_Alltoall";
  struct pp_comm *c = pp_comm_get(comm);
  bool sd_on = sbuf != MPI_IN_PLACE && derived(stype), rd_on = derived(rtype);
  if (c && (sd_on || rd_on)) {
    struct side s = {0}, r = {0};
    int n = c->size, e = MPI_SUCCESS;
    bool in_place = sbuf == MPI_IN_PLACE; /* the data is in rbuf: packed from it */
    if (sd_on)
      e = side_open(fn, c, sbuf, scount, stype, n, 0, n, &s);
    if (!e && rd_on)
      e = side_open(fn, c, rbuf, rcount, rtype, n, 0, in_place ? n : 0, &r);
    if (!e)
      e = alltoall_any(fn, sd_on ? s.tmp : sbuf, side_count(&s, scount), NULL, NULL,
                       sd_on ? MPI_BYTE : stype, rd_on ? r.tmp : rbuf, side_count(&r, rcount),
                       NULL, NULL, rd_on ? MPI_BYTE : rtype, comm);
    free(s.tmp);
    if (rd_on)
      side_close(&r, rbuf, rcount, rtype, 0, e ? 0 : n);
    return e;
  }
  return alltoall_any("MPI_Alltoall", sbuf, scount, NULL, NULL, stype, rbuf, rcount, NULL, NULL,
                      rtype, comm);
}
PP_ALIAS(MPI_Alltoall);

int PMPI_Alltoallv(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype,
                   void *rbuf, const int rcounts[], const int rdispls[], MPI_Datatype rtype,
                   MPI_Comm comm)
{
  struct pp_comm *c = pp_comm_get(comm);
  if (c && (!rcounts || !rdispls || (sbuf != MPI_IN_PLACE && (!scounts || !sdispls))))
    return pp_err(c, "MPI_Alltoallv", MPI_ERR_ARG, "a count or displacement array is NULL");
  bool in_place = sbuf == MPI_IN_PLACE;
  bool sd_on = !in_place && derived(stype), rd_on = derived(rtype);
  if (c && (sd_on || rd_on)) {
    const char *fn = "MPI_Alltoallv";
    struct vside sv = {0}, rv = {0};
    int n = c->size, e = MPI_SUCCESS;
    if (sd_on)
      e = vside_open(fn, c, sbuf, scounts, sdispls, stype, n, 0, n, &sv);
    if (!e && rd_on) /* in place: the data is in rbuf, packed from it */
      e = vside_open(fn, c, rbuf, rcounts, rdispls, rtype, n, 0, in_place ? n : 0, &rv);
    if (!e)
      e = alltoall_any(fn, sd_on ? sv.tmp : sbuf, 0, sd_on ? sv.cnt : scounts,
                       sd_on ? sv.dsp : sdispls, sd_on ? MPI_BYTE : stype, rd_on ? rv.tmp : rbuf,
                       0, rd_on ? rv.cnt : rcounts, rd_on ? rv.dsp : rdispls,
                       rd_on ? MPI_BYTE : rtype, comm);
    if (sd_on)
      vside_close(&sv, NULL, scounts, sdispls, stype, 0, 0);
    if (rd_on)
      vside_close(&rv, rbuf, rcounts, rdispls, rtype, 0, e ? 0 : n);
    return e;
  }
  return alltoall_any("MPI_Alltoallv", sbuf, 0, scounts, sdispls, stype, rbuf, 0, rcounts,
                      rdispls, rtype, comm);
}
PP_ALIAS(MPI_Alltoallv);

/* ---------------------------------------------------------------- reduce-scatter, scans */

/* Bytes of one element as the reductions move it: a predefined type's size, a derived type's
 * packed size (user operations on derived types, dred_open). 0 for an invalid type. */
static size_t red_size(MPI_Datatype dt)
{
  int sz = 0;
  if (pp_dt_size(dt))
    return pp_dt_size(dt);
  return PMPI_Type_size(dt, &sz) == MPI_SUCCESS && sz > 0 ? (size_t)sz : 0;
}

/* Reduce of the whole vector to rank 0 (rank order), then Scatterv of its blocks */
static int reduce_scatter(const char *fn, MPI_Comm comm, const void *sbuf, void *rbuf,
                          int count, const int *counts, MPI_Datatype dt, MPI_Op op)
{
  struct pp_comm *c;
  struct blocks b = {0};
  size_t total = 0, bytes;
  void *acc = NULL;
  int *bc = NULL, e;
  if ((e = coll_comm(fn, comm, &c)) || (e = reduce_args(fn, c, 0, dt, op, &bytes)))
    return e;
  size_t es = red_size(dt);
  if (!es)
    return pp_err(c, fn, MPI_ERR_TYPE, "datatype 0x%x has no data", dt);
  if (!(bc = malloc(sizeof(int) * (size_t)c->size)))
    return pp_err(c, fn, MPI_ERR_NO_MEM, "%d ranks", c->size);
  for (int i = 0; i < c->size; i++) { /* the blocks in bytes: any element size */
    long long k = counts ? counts[i] : count;
    if (k < 0 || (unsigned long long)k * es > PP_LINK_MAX_MSG) {
      e = pp_err(c, fn, MPI_ERR_COUNT, "count %lld for rank %d", k, i);
      goto out;
    }
    bc[i] = (int)((size_t)k * es);
  }
  if ((e = blocks_args(fn, c, rbuf, 0, bc, NULL, MPI_BYTE, &b)))
    goto out;
  for (int i = 0; i < c->size; i++) /* blocks_args laid them one after the other */
    total += b.bytes[i];
  if (total > PP_LINK_MAX_MSG) {
    e = pp_err(c, fn, MPI_ERR_COUNT, "%zu bytes: more than %u", total, PP_LINK_MAX_MSG);
    goto out;
  }
  const void *mine = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
  if (total && !mine) {
    e = pp_err(c, fn, MPI_ERR_BUFFER, "NULL buffer");
    goto out;
  }
  if (c->rank == 0 && !(acc = malloc(total ? total : 1))) {
    e = pp_err(c, fn, MPI_ERR_NO_MEM, "%zu bytes", total);
    goto out;
  }
  if ((e = reduce(fn, c, mine, acc, total / es, total, dt, op, 0)))
    goto out;
  e = scatter(fn, c, acc, &b, rbuf, b.bytes[c->rank], 0);
out:
  free(bc);
  free(acc);
  blocks_free(&b);
  return e;
}

/* A derived type: the whole vector packed, reduced and scattered as dred_open's type, the rank's
 * block unpacked. */
static int reduce_scatter_derived(const char *fn, struct pp_comm *c, const void *sbuf,
                                  void *rbuf, int count, const int *counts, MPI_Datatype dt,
                                  MPI_Op op, MPI_Comm comm)
{
  long long total = 0;
  for (int i = 0; i < c->size; i++) {
    int k = counts ? counts[i] : count;
    if (k < 0)
      return pp_err(c, fn, MPI_ERR_COUNT, "count %d for rank %d", k, i);
    total += k;
  }
  if (total > INT_MAX)
    return pp_err(c, fn, MPI_ERR_COUNT, "%lld elements in all", total);
  int mine = counts ? counts[c->rank] : count;
  struct dred d;
  int e = dred_open(fn, c, sbuf == MPI_IN_PLACE ? rbuf : sbuf, (int)total, mine, dt, op, &d);
  int *k = e ? NULL : malloc(sizeof(int) * (size_t)c->size);
  if (!e && !k)
    e = pp_err(c, fn, MPI_ERR_NO_MEM, "%d ranks", c->size);
  for (int i = 0; !e && i < c->size; i++)
    k[i] = (counts ? counts[i] : count) * d.per;
  if (!e)
    e = reduce_scatter(fn, comm, d.s, d.r, 0, k, d.dt, op);
  free(k);
  return dred_close(&d, rbuf, mine, dt, true, e);
}

int PMPI_Reduce_scatter_block(const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
                              MPI_Op op, MPI_Comm comm)
{
  struct pp_comm *c = pp_comm_get(comm);
  if (c && derived(dt))
    return reduce_scatter_derived("MPI_Reduce_scatter_block", c, sbuf, rbuf, count, NULL, dt, op,
                                  comm);
  return reduce_scatter("MPI_Reduce_scatter_block", comm, sbuf, rbuf, count, NULL, dt, op);
}
PP_ALIAS(MPI_Reduce_scatter_block);

int PMPI_Reduce_scatter(const void *sbuf, void *rbuf, const int counts[], MPI_Datatype dt,
                        MPI_Op op, MPI_Comm comm)
{
  struct pp_comm *c = pp_comm_get(comm);
  if (c && !counts)
    return pp_err(c, "MPI_Reduce_scatter", MPI_ERR_ARG, "recvcounts is NULL");
  if (c && derived(dt))
    return reduce_scatter_derived("MPI_Reduce_scatter", c, sbuf, rbuf, 0, counts, dt, op, comm);
  return reduce_scatter("MPI_Reduce_scatter", comm, sbuf, rbuf, 0, counts, dt, op);
}
PP_ALIAS(MPI_Reduce_scatter);

/* Along the chain: rank r receives x0 op ... op x(r-1) from r - 1. Scan: rbuf = that op x(r);
 * Exscan: rbuf = that (rank 0's rbuf is left alone); either sends (that op x(r)) to r + 1. */
static int scan(const char *fn, const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
                MPI_Op op, MPI_Comm comm, bool exclusive)
{
  struct pp_comm *c;
  size_t bytes;
  int e;
  if ((e = coll_comm(fn, comm, &c)) || (e = reduce_args(fn, c, count, dt, op, &bytes)))
    return e;
  if (bytes && (!rbuf || !sbuf))
    return pp_err(c, fn, MPI_ERR_BUFFER, "NULL buffer with count %d", count);
  const void *mine = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
  int r = c->rank, n = c->size;
  char *prev = malloc(bytes ? 2 * bytes : 1), *next = prev + bytes;
  if (!prev)
    return pp_err(c, fn, MPI_ERR_NO_MEM, "%zu bytes", 2 * bytes);
  memcpy(next, mine, bytes); /* next = x(r), then prev op x(r) */
  if (r > 0) {
    if ((e = xchg(fn, c, TAG_SCAN, NULL, 0, -1, prev, bytes, r - 1)))
      goto out;
    if ((e = pp_op_apply(op, dt, prev, next, (size_t)count))) {
      e = pp_err(c, fn, e, "operation 0x%x on datatype 0x%x", op, dt);
      goto out;
    }
  }
  if (r < n - 1 && (e = xchg(fn, c, TAG_SCAN, next, bytes, r + 1, NULL, 0, -1)))
    goto out;
  if (!exclusive)
    memcpy(rbuf, next, bytes);
  else if (r > 0)
    memcpy(rbuf, prev, bytes);
out:
  free(prev);
  return e;
}

/* A derived type: packed, scanned as dred_open's type, unpacked (Exscan: not on rank 0) */
static int scan_any(const char *fn, const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
                    MPI_Op op, MPI_Comm comm, bool exclusive)
{
  struct pp_comm *c = pp_comm_get(comm);
  if (!c || !derived(dt) || count < 0)
    return scan(fn, sbuf, rbuf, count, dt, op, comm, exclusive);
  struct dred d;
  int e = dred_open(fn, c, sbuf == MPI_IN_PLACE ? rbuf : sbuf, count, count, dt, op, &d);
  if (!e)
    e = scan(fn, d.s, d.r, count * d.per, d.dt, op, comm, exclusive);
  return dred_close(&d, rbuf, count, dt, !exclusive || c->rank > 0, e);
}

int PMPI_Scan(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
  return scan_any("MPI_Scan", sbuf, rbuf, count, dt, op, comm, false);
}
PP_ALIAS(MPI_Scan);

int PMPI_Exscan(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op,
                MPI_Comm comm)
{
  return scan_any("MPI_Exscan", sbuf, rbuf, count, dt, op, comm, true);
}
PP_ALIAS(MPI_Exscan);
