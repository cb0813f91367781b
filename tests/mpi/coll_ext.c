/*
 * The collectives beyond Barrier/Bcast/Reduce/Allreduce under prepost mpirun (1..5 ranks):
 * Gather(v), Scatter(v), Allgather(v), Alltoall(v) (uneven counts, displacements with gaps that
 * must stay untouched, MPI_IN_PLACE where MPI allows it), Reduce_scatter(_block), Scan and Exscan
 * with every predefined operation on the types it applies to, user operations (Op_create:
 * a non-commutative 2x2 matrix product, which only the rank order gives right; a commutative
 * one), Reduce_local, Op_commutative, Op_free; on MPI_COMM_WORLD and on a split communicator
 * in reverse order; and the error classes of invalid arguments (MPI_ERR_OP for an operation
 * that does not apply to a type).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int wrank, wsize;

#define EXPECT(call, want)                                                     \
  do {                                                                         \
    int e_ = (call), cls_;                                                     \
    MPI_Error_class(e_, &cls_);                                                \
    CHECK(cls_ == (want), "%s: class %d, expected %s", #call, cls_, #want);    \
  } while (0)

/* element i of rank r's contribution */
static int val(int r, int i)
{
  return 1000 * (r + 1) + i;
}

#define GAP (-7) /* what displacement gaps hold before and after */

static void gather_scatter(MPI_Comm c, const char *what)
{
  int rank, size;
  MPI_Comm_rank(c, &rank);
  MPI_Comm_size(c, &size);
  int mine[8], all[128], counts[8], displs[8];
  for (int root = 0; root < size; root++) {
    /* Gather: 3 each */
    for (int i = 0; i < 3; i++)
      mine[i] = val(rank, i);
    for (int i = 0; i < 128; i++)
      all[i] = GAP;
    CHECK_OK(MPI_Gather(mine, 3, MPI_INT, all, 3, MPI_INT, root, c));
    if (rank == root)
      for (int r = 0; r < size; r++)
        for (int i = 0; i < 3; i++)
          CHECK(all[3 * r + i] == val(r, i), "%s gather root %d [%d][%d] = %d", what, root, r, i,
                all[3 * r + i]);
    /* Gatherv: r + 1 from rank r, at r * (size + 2): gaps between */
    for (int r = 0; r < size; r++) {
      counts[r] = r + 1;
      displs[r] = r * (size + 2);
    }
    for (int i = 0; i < 128; i++)
      all[i] = GAP;
    for (int i = 0; i <= rank; i++)
      mine[i] = val(rank, i);
    if (rank == root) /* in place: the root's block is there already */
      for (int i = 0; i <= rank; i++)
        all[displs[rank] + i] = val(rank, i);
    CHECK_OK(MPI_Gatherv(rank == root ? MPI_IN_PLACE : mine, rank + 1, MPI_INT, all, counts,
                         displs, MPI_INT, root, c));
    if (rank == root)
      for (int r = 0, k = 0; k < size * (size + 2); k++) {
        r = k / (size + 2);
        int i = k % (size + 2);
        int want = i < counts[r] ? val(r, i) : GAP;
        CHECK(all[k] == want, "%s gatherv root %d [%d] = %d, expected %d", what, root, k, all[k],
              want);
      }
    /* Scatter: 2 each, the root keeps its own in place */
    for (int r = 0; r < size; r++)
      for (int i = 0; i < 2; i++)
        all[2 * r + i] = rank == root ? val(r, i) : GAP;
    int got[8] = {GAP, GAP, GAP};
    CHECK_OK(MPI_Scatter(all, 2, MPI_INT, rank == root ? MPI_IN_PLACE : got, 2, MPI_INT, root,
                         c));
    int *g = rank == root ? &all[2 * root] : got;
    CHECK(g[0] == val(rank, 0) && g[1] == val(rank, 1), "%s scatter root %d: %d %d", what, root,
          g[0], g[1]);
    CHECK(rank == root || got[2] == GAP, "%s scatter wrote past the count", what);
    /* Scatterv: size - r to rank r, from displs with gaps */
    for (int r = 0; r < size; r++) {
      counts[r] = size - r;
      displs[r] = r * (size + 1);
      for (int i = 0; i < counts[r]; i++)
        all[displs[r] + i] = val(r, i) + root;
    }
    memset(got, 0, sizeof(got));
    CHECK_OK(MPI_Scatterv(all, counts, displs, MPI_INT, got, size - rank, MPI_INT, root, c));
    for (int i = 0; i < size - rank; i++)
      CHECK(got[i] == val(rank, i) + root, "%s scatterv root %d [%d] = %d", what, root, i,
            got[i]);
  }
}

static void allgather_alltoall(MPI_Comm c, const char *what)
{
  int rank, size;
  MPI_Comm_rank(c, &rank);
  MPI_Comm_size(c, &size);
  int mine[8], all[64], counts[8], displs[8];
  for (int i = 0; i < 2; i++)
    mine[i] = val(rank, i);
  CHECK_OK(MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, c));
  for (int r = 0; r < size; r++)
    CHECK(all[2 * r] == val(r, 0) && all[2 * r + 1] == val(r, 1), "%s allgather [%d]", what, r);
  /* Allgatherv in place: (r % 3) from rank r, gaps of one */
  int end = 0;
  for (int r = 0; r < size; r++) {
    counts[r] = r % 3;
    displs[r] = end + 1;
    end = displs[r] + counts[r];
  }
  for (int i = 0; i < 64; i++)
    all[i] = GAP;
  for (int i = 0; i < counts[rank]; i++)
    all[displs[rank] + i] = val(rank, i);
  CHECK_OK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, counts, displs, MPI_INT, c));
  for (int r = 0; r < size; r++) {
    CHECK(all[displs[r] - 1] == GAP, "%s allgatherv gap before %d", what, r);
    for (int i = 0; i < counts[r]; i++)
      CHECK(all[displs[r] + i] == val(r, i), "%s allgatherv [%d][%d] = %d", what, r, i,
            all[displs[r] + i]);
  }
  /* Alltoall: element j of rank r's vector to rank j */
  int s[8], d[8];
  for (int j = 0; j < size; j++)
    s[j] = val(rank, j);
  CHECK_OK(MPI_Alltoall(s, 1, MPI_INT, d, 1, MPI_INT, c));
  for (int r = 0; r < size; r++)
    CHECK(d[r] == val(r, rank), "%s alltoall from %d: %d", what, r, d[r]);
  CHECK_OK(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, s, 1, MPI_INT, c));
  for (int r = 0; r < size; r++)
    CHECK(s[r] == val(r, rank), "%s alltoall in place from %d: %d", what, r, s[r]);
  /* Alltoallv: (r + j) % 3 elements from r to j, gaps of one on both sides */
  int sc[8], sd[8], rc[8], rd[8], sb[64], rb[64];
  int se = 0, re = 0;
  for (int j = 0; j < size; j++) {
    sc[j] = (rank + j) % 3;
    sd[j] = se + 1;
    se = sd[j] + sc[j];
    rc[j] = (j + rank) % 3;
    rd[j] = re + 1;
    re = rd[j] + rc[j];
  }
  for (int i = 0; i < 64; i++)
    sb[i] = rb[i] = GAP;
  for (int j = 0; j < size; j++)
    for (int i = 0; i < sc[j]; i++)
      sb[sd[j] + i] = val(rank, 10 * j + i);
  CHECK_OK(MPI_Alltoallv(sb, sc, sd, MPI_INT, rb, rc, rd, MPI_INT, c));
  for (int j = 0; j < size; j++) {
    CHECK(rb[rd[j] - 1] == GAP, "%s alltoallv gap before %d", what, j);
    for (int i = 0; i < rc[j]; i++)
      CHECK(rb[rd[j] + i] == val(j, 10 * rank + i), "%s alltoallv from %d [%d] = %d", what, j, i,
            rb[rd[j] + i]);
  }
  /* in place: the receive layout both ways (symmetric counts) */
  for (int j = 0; j < size; j++)
    for (int i = 0; i < rc[j]; i++)
      rb[rd[j] + i] = val(rank, 10 * j + i);
  CHECK_OK(MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, rb, rc, rd, MPI_INT, c));
  for (int j = 0; j < size; j++)
    for (int i = 0; i < rc[j]; i++)
      CHECK(rb[rd[j] + i] == val(j, 10 * rank + i), "%s alltoallv in place from %d", what, j);
}

/* ---------------------------------------------------------------- reductions */

/* 2x2 matrices of unsigned (mod 2^32: associative), inout = in x inout: not commutative */
static void matmul(void *in, void *inout, int *len, MPI_Datatype *dt)
{
  CHECK(*dt == MPI_UNSIGNED && *len % 4 == 0, "matmul on %d elements", *len);
  unsigned *a = in, *b = inout;
  for (int m = 0; m < *len / 4; m++, a += 4, b += 4) {
    unsigned r[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
                     a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]};
    memcpy(b, r, sizeof(r));
  }
}

static void mat_of(int r, unsigned m[4])
{
  m[0] = (unsigned)r + 1;
  m[1] = 2;
  m[2] = (unsigned)r * 3;
  m[3] = 1;
}

/* M(lo) x M(lo+1) x ... x M(hi) */
static void mat_prod(int lo, int hi, unsigned out[4])
{
  mat_of(hi, out);
  for (int r = hi - 1; r >= lo; r--) {
    unsigned a[4];
    int four = 4;
    MPI_Datatype t = MPI_UNSIGNED;
    mat_of(r, a);
    matmul(a, out, &four, &t);
  }
}

static void absmax(void *in, void *inout, int *len, MPI_Datatype *dt)
{
  (void)dt;
  int *a = in, *b = inout;
  for (int i = 0; i < *len; i++)
    b[i] = abs(a[i]) > abs(b[i]) ? a[i] : b[i];
}

static void user_ops(MPI_Comm c, const char *what)
{
  int rank, size;
  MPI_Comm_rank(c, &rank);
  MPI_Comm_size(c, &size);
  MPI_Op mm, am;
  int commute;
  CHECK_OK(MPI_Op_create(matmul, 0, &mm));
  CHECK_OK(MPI_Op_create(absmax, 1, &am));
  CHECK_OK(MPI_Op_commutative(mm, &commute));
  CHECK(!commute, "matmul commutes");
  CHECK_OK(MPI_Op_commutative(am, &commute));
  CHECK(commute, "absmax does not commute");
  CHECK_OK(MPI_Op_commutative(MPI_SUM, &commute));
  CHECK(commute, "MPI_SUM does not commute");
  unsigned m[8], out[8], want[4];
  mat_of(rank, m);
  mat_of(rank, m + 4);
  mat_prod(0, size - 1, want);
  for (int root = 0; root < size; root++) {
    CHECK_OK(MPI_Reduce(m, out, 8, MPI_UNSIGNED, mm, root, c));
    if (rank == root)
      CHECK(!memcmp(out, want, sizeof(want)) && !memcmp(out + 4, want, sizeof(want)),
            "%s reduce matmul to %d", what, root);
  }
  CHECK_OK(MPI_Allreduce(m, out, 8, MPI_UNSIGNED, mm, c));
  CHECK(!memcmp(out, want, sizeof(want)), "%s allreduce matmul", what);
  CHECK_OK(MPI_Scan(m, out, 4, MPI_UNSIGNED, mm, c));
  mat_prod(0, rank, want);
  CHECK(!memcmp(out, want, sizeof(want)), "%s scan matmul", what);
  memcpy(out, m, sizeof(m));
  CHECK_OK(MPI_Exscan(MPI_IN_PLACE, out, 4, MPI_UNSIGNED, mm, c));
  if (rank > 0) {
    mat_prod(0, rank - 1, want);
    CHECK(!memcmp(out, want, sizeof(want)), "%s exscan matmul", what);
  }
  /* Reduce_scatter_block: one matrix per rank, rank j's block the product of the j-th ones */
  unsigned blocks[32], mine[4];
  for (int j = 0; j < size; j++)
    mat_of(rank + j, blocks + 4 * j);
  CHECK_OK(MPI_Reduce_scatter_block(blocks, mine, 4, MPI_UNSIGNED, mm, c));
  unsigned w[4];
  mat_of(size - 1 + rank, w);
  for (int r = size - 2; r >= 0; r--) {
    unsigned a[4];
    int four = 4;
    MPI_Datatype t = MPI_UNSIGNED;
    mat_of(r + rank, a);
    matmul(a, w, &four, &t);
  }
  CHECK(!memcmp(mine, w, sizeof(w)), "%s reduce_scatter_block matmul", what);
  int x[3] = {rank * (rank % 2 ? -1 : 1), 5, -rank}, y[3];
  CHECK_OK(MPI_Allreduce(x, y, 3, MPI_INT, am, c));
  int big = (size - 1) * ((size - 1) % 2 ? -1 : 1);
  CHECK(y[0] == big && y[1] == 5 && y[2] == -(size - 1), "%s absmax %d %d %d", what, y[0], y[1],
        y[2]);
  /* Reduce_local: the user's and a predefined one */
  unsigned a[4], b[4];
  mat_of(1, a);
  mat_of(2, b);
  CHECK_OK(MPI_Reduce_local(a, b, 4, MPI_UNSIGNED, mm));
  mat_prod(1, 2, want);
  CHECK(!memcmp(b, want, sizeof(b)), "reduce_local matmul");
  int p = 3, q = 4;
  CHECK_OK(MPI_Reduce_local(&p, &q, 1, MPI_INT, MPI_PROD));
  CHECK(q == 12, "reduce_local prod %d", q);
  CHECK_OK(MPI_Op_free(&mm));
  CHECK(mm == MPI_OP_NULL, "freed op");
  CHECK_OK(MPI_Op_free(&am));
}

/* Scan, Exscan, Reduce_scatter(_block) with every predefined operation on int, unsigned char
 * and double (where it applies), MINLOC/MAXLOC on MPI_2INT */
static int ival(int r, int i)
{
  return (r * 7 + i * 5) % 11 - 5;
}

static int apply(MPI_Op op, int a, int b)
{
  if (op == MPI_SUM) return a + b;
  if (op == MPI_PROD) return a * b;
  if (op == MPI_MAX) return a > b ? a : b;
  if (op == MPI_MIN) return a < b ? a : b;
  if (op == MPI_LAND) return a && b;
  if (op == MPI_LOR) return a || b;
  if (op == MPI_LXOR) return !a != !b;
  if (op == MPI_BAND) return a & b;
  if (op == MPI_BOR) return a | b;
  return a ^ b;
}

static void predefined(MPI_Comm c, const char *what)
{
  int rank, size;
  MPI_Comm_rank(c, &rank);
  MPI_Comm_size(c, &size);
  MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN, MPI_LAND, MPI_LOR, MPI_LXOR, MPI_BAND,
                  MPI_BOR, MPI_BXOR};
  enum { N = 6 };
  for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
    int in[8 * N], out[8 * N];
    unsigned char uin[N], uout[N];
    double din[N], dout[N];
    bool arith = o < 4;
    for (int i = 0; i < 8 * N; i++)
      in[i] = ival(rank, i);
    for (int i = 0; i < N; i++) {
      uin[i] = (unsigned char)(ival(rank, i) + 5);
      din[i] = ival(rank, i) / 4.0;
    }
    CHECK_OK(MPI_Scan(in, out, N, MPI_INT, ops[o], c));
    for (int i = 0; i < N; i++) {
      int w = ival(0, i);
      for (int r = 1; r <= rank; r++)
        w = apply(ops[o], w, ival(r, i));
      CHECK(out[i] == w, "%s scan op %zu [%d] = %d, expected %d", what, o, i, out[i], w);
    }
    CHECK_OK(MPI_Exscan(in, out, N, MPI_INT, ops[o], c));
    for (int i = 0; i < N && rank > 0; i++) {
      int w = ival(0, i);
      for (int r = 1; r < rank; r++)
        w = apply(ops[o], w, ival(r, i));
      CHECK(out[i] == w, "%s exscan op %zu [%d] = %d, expected %d", what, o, i, out[i], w);
    }
    CHECK_OK(MPI_Scan(uin, uout, N, MPI_UNSIGNED_CHAR, ops[o], c));
    for (int i = 0; i < N; i++) {
      int w = (unsigned char)(ival(0, i) + 5);
      for (int r = 1; r <= rank; r++)
        w = (unsigned char)apply(ops[o], w, (unsigned char)(ival(r, i) + 5));
      CHECK(uout[i] == w, "%s uchar scan op %zu [%d] = %d, expected %d", what, o, i, uout[i], w);
    }
    if (arith) { /* double: in rank order, ((x0 op x1) op x2)..., bit for bit */
      CHECK_OK(MPI_Scan(din, dout, N, MPI_DOUBLE, ops[o], c));
      for (int i = 0; i < N; i++) {
        double w = ival(0, i) / 4.0;
        for (int r = 1; r <= rank; r++) {
          double x = ival(r, i) / 4.0;
          w = o == 0 ? w + x : o == 1 ? w * x : o == 2 ? (w > x ? w : x) : (w < x ? w : x);
        }
        CHECK(dout[i] == w, "%s double scan op %zu [%d] = %g, expected %g", what, o, i, dout[i],
              w);
      }
    } else {
      EXPECT(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN), MPI_SUCCESS);
      EXPECT(MPI_Scan(din, dout, N, MPI_DOUBLE, ops[o], c), MPI_ERR_OP);
      EXPECT(MPI_Reduce_scatter_block(din, dout, 1, MPI_DOUBLE, ops[o], c), MPI_ERR_OP);
      EXPECT(MPI_Comm_set_errhandler(c, MPI_ERRORS_ARE_FATAL), MPI_SUCCESS);
    }
    /* Reduce_scatter: rank j gets (j % 2) + 1 elements; Reduce_scatter_block N each */
    int counts[8], off = 0;
    for (int j = 0; j < size; j++)
      counts[j] = j % 2 + 1;
    for (int j = 0; j < rank; j++)
      off += counts[j];
    CHECK_OK(MPI_Reduce_scatter(in, out, counts, MPI_INT, ops[o], c));
    for (int i = 0; i < counts[rank]; i++) {
      int w = ival(0, off + i);
      for (int r = 1; r < size; r++)
        w = apply(ops[o], w, ival(r, off + i));
      CHECK(out[i] == w, "%s reduce_scatter op %zu [%d] = %d, expected %d", what, o, i, out[i],
            w);
    }
    memcpy(out, in, sizeof(in));
    CHECK_OK(MPI_Reduce_scatter_block(MPI_IN_PLACE, out, N, MPI_INT, ops[o], c));
    for (int i = 0; i < N; i++) {
      int w = ival(0, rank * N + i);
      for (int r = 1; r < size; r++)
        w = apply(ops[o], w, ival(r, rank * N + i));
      CHECK(out[i] == w, "%s reduce_scatter_block op %zu [%d] = %d, expected %d", what, o, i,
            out[i], w);
    }
  }
  struct { int v, i; } p = {ival(rank, 3), rank}, q;
  CHECK_OK(MPI_Scan(&p, &q, 1, MPI_2INT, MPI_MAXLOC, c));
  int best = ival(0, 3), at = 0;
  for (int r = 1; r <= rank; r++)
    if (ival(r, 3) > best)
      best = ival(r, 3), at = r;
  CHECK(q.v == best && q.i == at, "%s scan maxloc %d@%d, expected %d@%d", what, q.v, q.i, best,
        at);
  EXPECT(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN), MPI_SUCCESS);
  EXPECT(MPI_Scan(&p, &q, 1, MPI_INT, MPI_MINLOC, c), MPI_ERR_OP);
  EXPECT(MPI_Exscan(&p, &q, 1, MPI_2INT, MPI_SUM, c), MPI_ERR_OP);
  EXPECT(MPI_Allreduce(&p, &q, 1, MPI_INT, MPI_REPLACE, c), MPI_ERR_OP);
  EXPECT(MPI_Comm_set_errhandler(c, MPI_ERRORS_ARE_FATAL), MPI_SUCCESS);
}

static void errors(void)
{
  int v[64] = {0}, w[64], counts[8] = {0}, displs[8] = {0};
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
  EXPECT(MPI_Gather(v, 1, MPI_INT, w, 1, MPI_INT, wsize, MPI_COMM_WORLD), MPI_ERR_ROOT);
  EXPECT(MPI_Scatter(v, 1, MPI_INT, w, 1, MPI_INT, -1, MPI_COMM_WORLD), MPI_ERR_ROOT);
  EXPECT(MPI_Allgather(v, -1, MPI_INT, w, 1, MPI_INT, MPI_COMM_WORLD), MPI_ERR_COUNT);
  EXPECT(MPI_Alltoall(v, 1, (MPI_Datatype)0x12345, w, 1, MPI_INT, MPI_COMM_WORLD), MPI_ERR_TYPE);
  EXPECT(MPI_Alltoall(v, 1, MPI_INT, w, 1, MPI_INT, MPI_COMM_NULL), MPI_ERR_COMM);
  counts[0] = -2;
  EXPECT(MPI_Allgatherv(v, 0, MPI_INT, w, counts, displs, MPI_INT, MPI_COMM_WORLD),
         MPI_ERR_COUNT);
  EXPECT(MPI_Scan(v, w, 1, MPI_INT, (MPI_Op)0x98000fff, MPI_COMM_WORLD), MPI_ERR_OP);
  EXPECT(MPI_Exscan(v, w, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD), MPI_ERR_OP);
  float f = 1, g = 2;
  EXPECT(MPI_Reduce_local(&f, &g, 1, MPI_FLOAT, MPI_BOR), MPI_ERR_OP);
  MPI_Op sum = MPI_SUM;
  EXPECT(MPI_Op_free(&sum), MPI_ERR_OP);
  EXPECT(MPI_Reduce_scatter_block(v, w, -1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_COUNT);
  /* only the root looks at the counts: an error at one rank of a collective leaves the others
   * waiting, so these on MPI_COMM_SELF */
  EXPECT(MPI_Gatherv(v, 1, MPI_INT, w, NULL, displs, MPI_INT, 0, MPI_COMM_SELF), MPI_ERR_ARG);
  EXPECT(MPI_Scatterv(v, counts, NULL, MPI_INT, w, 1, MPI_INT, 0, MPI_COMM_SELF), MPI_ERR_ARG);
  /* a root that receives less than is sent: truncated */
  if (wsize > 1) {
    EXPECT(MPI_Gather(v, 2, MPI_INT, w, 1, MPI_INT, 0, MPI_COMM_WORLD),
           wrank == 0 ? MPI_ERR_TRUNCATE : MPI_SUCCESS);
  }
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL));
}

int main(int argc, char **argv)
{
  CHECK_OK(MPI_Init(&argc, &argv));
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  MPI_Comm_size(MPI_COMM_WORLD, &wsize);
  CHECK(wsize <= 8, "at most 8 ranks");
  MPI_Comm rev; /* every rank, in reverse order */
  CHECK_OK(MPI_Comm_split(MPI_COMM_WORLD, 0, wsize - wrank, &rev));
  MPI_Comm half; /* even and odd world ranks */
  CHECK_OK(MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &half));
  MPI_Comm comms[] = {MPI_COMM_WORLD, rev, half, MPI_COMM_SELF};
  const char *names[] = {"world", "reversed", "half", "self"};
  for (int k = 0; k < 4; k++) {
    gather_scatter(comms[k], names[k]);
    allgather_alltoall(comms[k], names[k]);
    user_ops(comms[k], names[k]);
    predefined(comms[k], names[k]);
  }
  errors();
  CHECK_OK(MPI_Comm_free(&rev));
  CHECK_OK(MPI_Comm_free(&half));
  printf("rank %d of %d: collectives checked\n", wrank, wsize);
  CHECK_OK(MPI_Finalize());
  return 0;
}
