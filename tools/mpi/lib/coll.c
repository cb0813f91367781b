/*
 * The predefined C datatypes and reduction operations, and the collectives Barrier, Bcast,
 * Reduce and Allreduce, built from the library's point-to-point on the communicator's
 * collective context (ctx + 1: never matched by the program's own receives).
 *
 * Algorithms, chosen so that results are the same on every run and every rank: Barrier by
 * dissemination (ceil(log2 n) rounds of zero-byte sendrecv), Bcast by a binomial tree from the
 * root, Reduce at the root in rank order, x0 op (x1 op (... op x(n-1))) whatever the arrival
 * order (floating-point sums are the same on every run), Allreduce as Reduce to rank 0 then Bcast.
 */
#include <complex.h>
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

bool pp_op_valid(MPI_Op op)
{
  return op >= MPI_MAX && op <= MPI_MAXLOC;
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

int pp_op_apply(MPI_Op op, MPI_Datatype dt, const void *in, void *io, size_t n)
{
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
    return pp_err(NULL, fn, MPI_ERR_COMM, "communicator 0x%x is not MPI_COMM_WORLD nor "
                                          "MPI_COMM_SELF (others are not supported yet)", comm);
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

int PMPI_Bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm)
{
  struct pp_comm *c;
  size_t bytes;
  int e;
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
    else
      pp_op_apply(op, dt, x, acc, count);
  }
  free(tmp);
  return MPI_SUCCESS;
}

static int reduce_args(const char *fn, const struct pp_comm *c, int count, MPI_Datatype dt,
                       MPI_Op op, size_t *bytes)
{
  int e = coll_args(fn, c, count, dt, bytes);
  if (e)
    return e;
  if (!pp_op_valid(op))
    return pp_err(c, fn, MPI_ERR_OP, "operation 0x%x (user operations are not supported yet)",
                  op);
  unsigned char a[64] = {0}, b[64] = {0};
  if (pp_dt_size(dt) <= sizeof(a) && pp_op_apply(op, dt, a, b, 1) != MPI_SUCCESS)
    return pp_err(c, fn, MPI_ERR_OP, "operation 0x%x does not apply to datatype 0x%x", op, dt);
  return MPI_SUCCESS;
}

int PMPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, int root,
                MPI_Comm comm)
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
PP_ALIAS(MPI_Reduce);

int PMPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op,
                   MPI_Comm comm)
{
  struct pp_comm *c;
  size_t bytes;
  int e;
  if ((e = coll_comm("MPI_Allreduce", comm, &c)) ||
      (e = reduce_args("MPI_Allreduce", c, count, dt, op, &bytes)))
    return e;
  const void *mine = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
  void *copy = NULL;
  if (c->rank == 0 && sbuf == MPI_IN_PLACE) {
    if (!(copy = malloc(bytes ? bytes : 1)))
      return pp_err(c, "MPI_Allreduce", MPI_ERR_NO_MEM, "%zu bytes", bytes);
    memcpy(copy, rbuf, bytes);
    mine = copy;
  }
  e = reduce("MPI_Allreduce", c, mine, rbuf, (size_t)count, bytes, dt, op, 0);
  free(copy);
  if (e)
    return e;
  return bytes && c->size > 1 ? bcast("MPI_Allreduce", c, rbuf, bytes, 0) : MPI_SUCCESS;
}
PP_ALIAS(MPI_Allreduce);
