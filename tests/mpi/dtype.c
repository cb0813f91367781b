/*
 * Derived datatypes under prepost mpirun (2 or 3 ranks): every constructor, the bounds MPI
 * defines (size, extent, lb, true extent, a struct's alignment padding), commit/free/dup,
 * non-contiguous sends and receives (packed on the wire: a receive of another layout with the
 * same signature), Get_count/Get_elements of derived types, truncation, Pack/Unpack/Pack_size
 * and MPI_PACKED, MPI_BOTTOM with Get_address, a large strided message (rendezvous), the limits
 * (nesting depth) and the error classes; Bcast, Gather, Scatter, Allgather and Alltoall of a
 * derived type, on WORLD and on a split. Every value is checked.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int rank, size;

static int cls_of(int e)
{
  int c;
  MPI_Error_class(e, &c);
  return c;
}

static void stamp(const char *what)
{
  printf("rank %d: %s at %.0f ns\n", rank, what, MPI_Wtime() * 1e9);
}

static void extent_is(MPI_Datatype t, MPI_Aint lb, MPI_Aint ext, MPI_Aint tlb, MPI_Aint text,
                      int sz, const char *what)
{
  MPI_Aint a, b, c, d;
  int s;
  CHECK_OK(MPI_Type_get_extent(t, &a, &b));
  CHECK_OK(MPI_Type_get_true_extent(t, &c, &d));
  CHECK_OK(MPI_Type_size(t, &s));
  CHECK(a == lb && b == ext && c == tlb && d == text && s == sz,
        "%s: lb %ld extent %ld true lb %ld true extent %ld size %d", what, (long)a, (long)b,
        (long)c, (long)d, s);
  MPI_Count xa, xb, xs;
  CHECK_OK(MPI_Type_get_extent_x(t, &xa, &xb));
  CHECK_OK(MPI_Type_get_true_extent_x(t, &xa, &xb));
  CHECK_OK(MPI_Type_size_x(t, &xs));
  CHECK(xa == tlb && xb == text && xs == sz, "%s: the _x queries", what);
}

/* bounds of every constructor */
static void bounds(void)
{
  MPI_Datatype v, hv, ix, hix, ib, hib, st, rs, dup, ct;
  CHECK_OK(MPI_Type_contiguous(3, MPI_DOUBLE, &ct));
  extent_is(ct, 0, 24, 0, 24, 24, "contiguous");
  CHECK_OK(MPI_Type_vector(4, 1, 5, MPI_INT, &v));
  extent_is(v, 0, 64, 0, 64, 16, "vector");
  CHECK_OK(MPI_Type_create_hvector(3, 2, 20, MPI_SHORT, &hv));
  extent_is(hv, 0, 44, 0, 44, 12, "hvector");
  int bl[2] = {2, 3}, di[2] = {5, 0};
  CHECK_OK(MPI_Type_indexed(2, bl, di, MPI_DOUBLE, &ix));
  extent_is(ix, 0, 56, 0, 56, 40, "indexed");
  MPI_Aint hd[2] = {16, -8};
  CHECK_OK(MPI_Type_create_hindexed(2, bl, hd, MPI_INT, &hix));
  extent_is(hix, -8, 32, -8, 32, 20, "hindexed (negative displacement)");
  int bd[3] = {0, 4, 8};
  CHECK_OK(MPI_Type_create_indexed_block(3, 2, bd, MPI_INT, &ib));
  extent_is(ib, 0, 40, 0, 40, 24, "indexed_block");
  MPI_Aint bh[2] = {0, 100};
  CHECK_OK(MPI_Type_create_hindexed_block(2, 1, bh, MPI_DOUBLE, &hib));
  extent_is(hib, 0, 108, 0, 108, 16, "hindexed_block");
  struct s {
    int a;
    double b;
    char c;
  };
  int sb[3] = {1, 1, 1};
  MPI_Aint sd[3] = {offsetof(struct s, a), offsetof(struct s, b), offsetof(struct s, c)};
  MPI_Datatype stt[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
  CHECK_OK(MPI_Type_create_struct(3, sb, sd, stt, &st));
  /* the ub padded to the double's alignment: the extent is sizeof(struct s) */
  extent_is(st, 0, (MPI_Aint)sizeof(struct s), 0, 17, 13, "struct");
  CHECK_OK(MPI_Type_create_resized(MPI_INT, -4, 12, &rs));
  extent_is(rs, -4, 12, 0, 4, 4, "resized");
  CHECK_OK(MPI_Type_dup(v, &dup));
  extent_is(dup, 0, 64, 0, 64, 16, "dup");
  MPI_Datatype all[] = {v, hv, ix, hix, ib, hib, st, rs, dup, ct};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
    CHECK_OK(MPI_Type_free(&all[i]));
    CHECK(all[i] == MPI_DATATYPE_NULL, "Type_free sets MPI_DATATYPE_NULL");
  }
}

/* a column of a matrix, received as contiguous ints and as a column of another matrix */
static void columns(void)
{
  enum { R = 4, C = 5 };
  int m[R][C];
  MPI_Datatype col;
  CHECK_OK(MPI_Type_vector(R, 1, C, MPI_INT, &col));
  CHECK_OK(MPI_Type_commit(&col));
  if (rank == 0) {
    for (int i = 0; i < R; i++)
      for (int j = 0; j < C; j++)
        m[i][j] = i * 10 + j;
    CHECK_OK(MPI_Send(&m[0][2], 1, col, 1, 1, MPI_COMM_WORLD));
    CHECK_OK(MPI_Send(&m[0][1], 1, col, 1, 2, MPI_COMM_WORLD));
  } else if (rank == 1) {
    int flat[R];
    MPI_Status st;
    CHECK_OK(MPI_Recv(flat, R, MPI_INT, 0, 1, MPI_COMM_WORLD, &st));
    for (int i = 0; i < R; i++)
      CHECK(flat[i] == i * 10 + 2, "column as ints: %d", flat[i]);
    memset(m, 0, sizeof(m));
    CHECK_OK(MPI_Recv(&m[0][3], 1, col, 0, 2, MPI_COMM_WORLD, &st));
    int n;
    CHECK_OK(MPI_Get_count(&st, col, &n));
    CHECK(n == 1, "Get_count of the column %d", n);
    CHECK_OK(MPI_Get_elements(&st, col, &n));
    CHECK(n == R, "Get_elements of the column %d", n);
    for (int i = 0; i < R; i++)
      for (int j = 0; j < C; j++)
        CHECK(m[i][j] == (j == 3 ? i * 10 + 1 : 0), "column into column: m[%d][%d] = %d", i, j,
              m[i][j]);
  }
  CHECK_OK(MPI_Type_free(&col));
  stamp("columns");
}

/* an array of structs, Get_count / Get_elements, a partial element */
static void structs(void)
{
  struct p {
    int id;
    double x;
    char tag;
  } a[3];
  int bl[3] = {1, 1, 1};
  MPI_Aint d[3] = {offsetof(struct p, id), offsetof(struct p, x), offsetof(struct p, tag)};
  MPI_Datatype ts[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR}, t, pair;
  CHECK_OK(MPI_Type_create_struct(3, bl, d, ts, &t));
  CHECK_OK(MPI_Type_commit(&t));
  CHECK_OK(MPI_Type_contiguous(2, MPI_INT, &pair));
  CHECK_OK(MPI_Type_commit(&pair));
  if (rank == 0) {
    for (int i = 0; i < 3; i++)
      a[i] = (struct p){.id = i + 1, .x = i * 1.5, .tag = (char)('a' + i)};
    CHECK_OK(MPI_Send(a, 3, t, 1, 3, MPI_COMM_WORLD));
    int five[5] = {1, 2, 3, 4, 5};
    CHECK_OK(MPI_Send(five, 5, MPI_INT, 1, 4, MPI_COMM_WORLD));
    int pairs[6] = {1, 2, 3, 4, 5, 6};
    CHECK_OK(MPI_Send(pairs, 3, MPI_2INT, 1, 11, MPI_COMM_WORLD));
  } else if (rank == 1) {
    memset(a, 0, sizeof(a));
    MPI_Status st;
    CHECK_OK(MPI_Recv(a, 3, t, 0, 3, MPI_COMM_WORLD, &st));
    for (int i = 0; i < 3; i++)
      CHECK(a[i].id == i + 1 && a[i].x == i * 1.5 && a[i].tag == 'a' + i, "struct %d", i);
    int n;
    CHECK_OK(MPI_Get_count(&st, t, &n));
    CHECK(n == 3, "Get_count %d", n);
    CHECK_OK(MPI_Get_elements(&st, t, &n));
    CHECK(n == 9, "Get_elements %d", n);
    int got[6] = {0};
    CHECK_OK(MPI_Recv(got, 3, pair, 0, 4, MPI_COMM_WORLD, &st));
    CHECK_OK(MPI_Get_count(&st, pair, &n));
    CHECK(n == MPI_UNDEFINED, "5 ints are no whole pairs: %d", n);
    CHECK_OK(MPI_Get_elements(&st, pair, &n));
    CHECK(n == 5 && got[4] == 5 && got[5] == 0, "Get_elements of a partial pair: %d", n);
    CHECK_OK(MPI_Recv(got, 3, MPI_2INT, 0, 11, MPI_COMM_WORLD, &st));
    CHECK_OK(MPI_Get_elements(&st, MPI_2INT, &n));
    CHECK(n == 6 && got[5] == 6, "a pair type is two basic elements: %d", n);
    CHECK_OK(MPI_Get_count(&st, MPI_2INT, &n));
    CHECK(n == 3, "Get_count of pairs %d", n);
  }
  CHECK_OK(MPI_Type_free(&t));
  CHECK_OK(MPI_Type_free(&pair));
  stamp("structs");
}

/* indexed, indexed_block and resized layouts through Sendrecv, and Sendrecv_replace */
static void layouts(void)
{
  int peer = rank ^ 1;
  if (peer >= size)
    peer = rank;
  int bl[3] = {1, 2, 3}, di[3] = {0, 3, 7};
  MPI_Datatype ix, rs, ib;
  CHECK_OK(MPI_Type_indexed(3, bl, di, MPI_INT, &ix));
  CHECK_OK(MPI_Type_create_resized(MPI_INT, 0, 3 * sizeof(int), &rs));
  int bd[2] = {1, 5};
  CHECK_OK(MPI_Type_create_indexed_block(2, 3, bd, MPI_INT, &ib));
  MPI_Type_commit(&ix);
  MPI_Type_commit(&rs);
  MPI_Type_commit(&ib);
  int src[12], dst[18] = {0};
  for (int i = 0; i < 12; i++)
    src[i] = rank * 100 + i;
  /* 6 ints (0, 3 4, 7 8 9) go as every third int of dst */
  MPI_Status st;
  CHECK_OK(MPI_Sendrecv(src, 1, ix, peer, 5, dst, 6, rs, peer, 5, MPI_COMM_WORLD, &st));
  static const int picked[6] = {0, 3, 4, 7, 8, 9};
  for (int i = 0; i < 18; i++)
    CHECK(dst[i] == (i % 3 ? 0 : peer * 100 + picked[i / 3]), "resized: dst[%d] = %d", i, dst[i]);
  /* in place: ints 1..3 and 5..7 of each element swapped with the peer's */
  int v[8];
  for (int i = 0; i < 8; i++)
    v[i] = rank * 10 + i;
  CHECK_OK(MPI_Sendrecv_replace(v, 1, ib, peer, 6, peer, 6, MPI_COMM_WORLD, &st));
  for (int i = 0; i < 8; i++)
    CHECK(v[i] == ((i >= 1 && i <= 3) || (i >= 5 && i <= 7) ? peer : rank) * 10 + i,
          "replace: v[%d] = %d", i, v[i]);
  MPI_Type_free(&ix);
  MPI_Type_free(&rs);
  MPI_Type_free(&ib);
  stamp("layouts");
}

/* truncation: a message longer than count x size(type) */
static void truncation(void)
{
  MPI_Datatype two;
  CHECK_OK(MPI_Type_vector(2, 1, 2, MPI_DOUBLE, &two));
  CHECK_OK(MPI_Type_commit(&two));
  if (rank == 0) {
    double d[4] = {1, 2, 3, 4};
    CHECK_OK(MPI_Send(d, 4, MPI_DOUBLE, 1, 7, MPI_COMM_WORLD));
  } else if (rank == 1) {
    double d[4] = {0};
    MPI_Status st;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK(cls_of(MPI_Recv(d, 1, two, 0, 7, MPI_COMM_WORLD, &st)) == MPI_ERR_TRUNCATE,
          "truncated");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    CHECK(d[0] == 1 && d[1] == 0 && d[2] == 2 && d[3] == 0, "what fits: %g %g %g %g", d[0],
          d[1], d[2], d[3]);
  }
  MPI_Type_free(&two);
}

/* Pack / Unpack / Pack_size, sent as MPI_PACKED */
static void packing(void)
{
  MPI_Datatype col;
  CHECK_OK(MPI_Type_vector(3, 1, 4, MPI_FLOAT, &col));
  CHECK_OK(MPI_Type_commit(&col));
  int s1, s2, s3;
  CHECK_OK(MPI_Pack_size(1, MPI_INT, MPI_COMM_WORLD, &s1));
  CHECK_OK(MPI_Pack_size(2, col, MPI_COMM_WORLD, &s2));
  CHECK_OK(MPI_Pack_size(1, MPI_DOUBLE, MPI_COMM_WORLD, &s3));
  CHECK(s1 == 4 && s2 == 24 && s3 == 8, "Pack_size %d %d %d", s1, s2, s3);
  char buf[64];
  int pos = 0;
  if (rank == 0) {
    int n = 42;
    float f[24];
    double x = 2.5;
    for (int i = 0; i < 24; i++)
      f[i] = (float)i;
    CHECK_OK(MPI_Pack(&n, 1, MPI_INT, buf, sizeof(buf), &pos, MPI_COMM_WORLD));
    CHECK_OK(MPI_Pack(f, 2, col, buf, sizeof(buf), &pos, MPI_COMM_WORLD));
    CHECK_OK(MPI_Pack(&x, 1, MPI_DOUBLE, buf, sizeof(buf), &pos, MPI_COMM_WORLD));
    CHECK(pos == 36, "position %d", pos);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int p2 = 60;
    CHECK(cls_of(MPI_Pack(&x, 1, MPI_DOUBLE, buf, sizeof(buf), &p2, MPI_COMM_WORLD)) ==
              MPI_ERR_TRUNCATE && p2 == 60,
          "Pack past the end");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    CHECK_OK(MPI_Send(buf, pos, MPI_PACKED, 1, 8, MPI_COMM_WORLD));
  } else if (rank == 1) {
    MPI_Status st;
    CHECK_OK(MPI_Recv(buf, sizeof(buf), MPI_PACKED, 0, 8, MPI_COMM_WORLD, &st));
    int len;
    CHECK_OK(MPI_Get_count(&st, MPI_PACKED, &len));
    CHECK(len == 36, "packed length %d", len);
    int n = 0;
    float f[24] = {0};
    double x = 0;
    CHECK_OK(MPI_Unpack(buf, len, &pos, &n, 1, MPI_INT, MPI_COMM_WORLD));
    CHECK_OK(MPI_Unpack(buf, len, &pos, f, 2, col, MPI_COMM_WORLD));
    CHECK_OK(MPI_Unpack(buf, len, &pos, &x, 1, MPI_DOUBLE, MPI_COMM_WORLD));
    CHECK(n == 42 && x == 2.5 && pos == 36, "unpacked %d %g", n, x);
    /* two columns: f[0], f[4], f[8] then f[12], f[16], f[20] (the extent is 9 floats) */
    static const int at[6] = {0, 4, 8, 9, 13, 17};
    for (int i = 0; i < 6; i++)
      CHECK(f[at[i]] == (float)at[i], "f[%d] = %g", at[i], f[at[i]]);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK(cls_of(MPI_Unpack(buf, len, &pos, &x, 1, MPI_DOUBLE, MPI_COMM_WORLD)) ==
              MPI_ERR_TRUNCATE,
          "Unpack past the end");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  }
  MPI_Type_free(&col);
  stamp("packing");
}

/* MPI_BOTTOM: a struct of absolute addresses of separate variables */
static void bottom(void)
{
  int i = 0;
  double d = 0;
  char c[3] = {0};
  MPI_Aint a[3];
  CHECK_OK(MPI_Get_address(&i, &a[0]));
  CHECK_OK(MPI_Get_address(&d, &a[1]));
  CHECK_OK(MPI_Get_address(c, &a[2]));
  CHECK(a[0] == (MPI_Aint)&i, "Get_address");
  int bl[3] = {1, 1, 3};
  MPI_Datatype ts[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR}, t;
  CHECK_OK(MPI_Type_create_struct(3, bl, a, ts, &t));
  CHECK_OK(MPI_Type_commit(&t));
  if (rank == 0) {
    i = 7, d = 0.25, c[0] = 'x', c[1] = 'y', c[2] = 'z';
    CHECK_OK(MPI_Send(MPI_BOTTOM, 1, t, 1, 9, MPI_COMM_WORLD));
  } else if (rank == 1) {
    CHECK_OK(MPI_Recv(MPI_BOTTOM, 1, t, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(i == 7 && d == 0.25 && c[0] == 'x' && c[2] == 'z', "MPI_BOTTOM: %d %g %c", i, d, c[0]);
  }
  MPI_Type_free(&t);
  stamp("bottom");
}

/* a large strided message (rendezvous sizes), received by a non-blocking receive whose type
 * the program frees before it completes */
static void large(void)
{
  enum { N = 100000 };
  MPI_Datatype every2;
  CHECK_OK(MPI_Type_vector(N, 1, 2, MPI_DOUBLE, &every2));
  CHECK_OK(MPI_Type_commit(&every2));
  double *x = calloc(2 * N, sizeof(double));
  CHECK(x, "calloc");
  if (rank == 0) {
    for (int i = 0; i < 2 * N; i++)
      x[i] = i;
    CHECK_OK(MPI_Send(x, 1, every2, 1, 10, MPI_COMM_WORLD));
  } else if (rank == 1) {
    MPI_Request r;
    CHECK_OK(MPI_Irecv(x + 1, 1, every2, 0, 10, MPI_COMM_WORLD, &r));
    CHECK_OK(MPI_Type_free(&every2)); /* the receive keeps it */
    CHECK_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; i < 2 * N; i++)
      CHECK(x[i] == (i % 2 ? i - 1 : 0), "x[%d] = %g", i, x[i]);
  }
  if (every2 != MPI_DATATYPE_NULL)
    MPI_Type_free(&every2);
  free(x);
  stamp("large");
}

/* the limits and the error classes */
static void errors(void)
{
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Datatype t, u;
  int v[4] = {0};
  CHECK_OK(MPI_Type_contiguous(2, MPI_INT, &t));
  CHECK(cls_of(MPI_Send(v, 1, t, 0, 0, MPI_COMM_WORLD)) == MPI_ERR_TYPE, "not committed");
  MPI_Datatype keep = t;
  CHECK_OK(MPI_Type_free(&t));
  CHECK(cls_of(MPI_Send(v, 1, keep, 0, 0, MPI_COMM_WORLD)) == MPI_ERR_TYPE, "freed");
  CHECK(cls_of(MPI_Type_commit(&keep)) == MPI_ERR_TYPE, "commit of a freed type");
  MPI_Datatype in = MPI_INT;
  CHECK(cls_of(MPI_Type_free(&in)) == MPI_ERR_TYPE, "free of a predefined type");
  CHECK(cls_of(MPI_Type_vector(-1, 1, 1, MPI_INT, &u)) == MPI_ERR_COUNT, "negative count");
  CHECK(cls_of(MPI_Type_contiguous(2, (MPI_Datatype)0x4c00ff77, &u)) == MPI_ERR_TYPE,
        "no old type");
  /* nesting deeper than 16 */
  MPI_Datatype n[20];
  n[0] = MPI_INT;
  int depth = 0, e = MPI_SUCCESS;
  while (depth < 19 && (e = MPI_Type_contiguous(1, n[depth], &n[depth + 1])) == MPI_SUCCESS)
    depth++;
  CHECK(cls_of(e) == MPI_ERR_TYPE && depth == 16, "nesting stops at 16: %d", depth);
  for (int i = depth; i >= 1; i--)
    CHECK_OK(MPI_Type_free(&n[i]));
  /* a type of more than the 1 GiB a message may be */
  MPI_Datatype huge;
  CHECK(cls_of(MPI_Type_vector(1 << 20, 1 << 10, 1 << 10, MPI_DOUBLE, &huge)) == MPI_ERR_TYPE,
        "too large");
  CHECK(cls_of(MPI_Pack_size(1, keep, MPI_COMM_WORLD, v)) == MPI_ERR_TYPE, "Pack_size freed");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

/* Collectives of a derived type (a column: 2 ints 3 apart, extent 4 ints): block i of a buffer
 * at i extents, what the type skips untouched; on WORLD and on a split in reverse order. */
static bool col_at(int i)
{
  return i % 4 == 0 || i % 4 == 3;
}

static void coll_on(MPI_Comm comm, MPI_Datatype col)
{
  int me, n;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &n);
  int *a = malloc(sizeof(int) * 8 * (size_t)n), *b = malloc(sizeof(int) * 8 * (size_t)n);
  CHECK(a && b, "malloc");
  /* Bcast of 2 columns from the last rank */
  for (int i = 0; i < 8; i++)
    a[i] = me == n - 1 ? 100 + i : -1;
  CHECK_OK(MPI_Bcast(a, 2, col, n - 1, comm));
  for (int i = 0; i < 8; i++)
    CHECK(a[i] == (col_at(i) || me == n - 1 ? 100 + i : -1), "bcast [%d] = %d", i, a[i]);
  /* Gather of 2 ints from each into a column each at rank 0 */
  int two[2] = {10 * me, 10 * me + 1};
  for (int i = 0; i < 4 * n; i++)
    b[i] = -1;
  CHECK_OK(MPI_Gather(two, 2, MPI_INT, b, 1, col, 0, comm));
  for (int i = 0; me == 0 && i < 4 * n; i++)
    CHECK(b[i] == (i % 4 == 0 ? 10 * (i / 4) : i % 4 == 3 ? 10 * (i / 4) + 1 : -1),
          "gather [%d] = %d", i, b[i]);
  /* Scatter of a column each from the last rank into 2 ints */
  for (int i = 0; i < 4 * n; i++)
    a[i] = me == n - 1 ? i : -1;
  two[0] = two[1] = -1;
  CHECK_OK(MPI_Scatter(a, 1, col, two, 2, MPI_INT, n - 1, comm));
  CHECK(two[0] == 4 * me && two[1] == 4 * me + 3, "scatter %d %d", two[0], two[1]);
  /* Allgather in place: each rank's column is in its block already */
  for (int i = 0; i < 4 * n; i++)
    b[i] = i / 4 == me && col_at(i) ? 50 + me + (i % 4) * 100 : -1;
  CHECK_OK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, 1, col, comm));
  for (int i = 0; i < 4 * n; i++)
    CHECK(b[i] == (col_at(i) ? 50 + i / 4 + (i % 4) * 100 : -1), "allgather [%d] = %d", i, b[i]);
  /* Alltoall of columns both sides: column j of a to rank j, column i of b from rank i */
  for (int i = 0; i < 4 * n; i++) {
    a[i] = 1000 * me + i;
    b[i] = -1;
  }
  CHECK_OK(MPI_Alltoall(a, 1, col, b, 1, col, comm));
  for (int i = 0; i < 4 * n; i++) /* from rank i/4: its element 4 * me + i % 4 */
    CHECK(b[i] == (col_at(i) ? 1000 * (i / 4) + 4 * me + i % 4 : -1), "alltoall [%d] = %d", i,
          b[i]);
  free(a);
  free(b);
}

/* The v variants and the reductions of the column type: column x of a buffer is ints 4x and
 * 4x + 3; everything else stays -1. Rank i's part has 1 + i % 2 columns; in a gathered buffer
 * rank i's columns start at D(i) (one column of gap before each part). */
static int vcnt(int i)
{
  return 1 + i % 2;
}

static int vdisp(int i)
{
  int d = 1;
  for (int k = 0; k < i; k++)
    d += vcnt(k) + 1;
  return d;
}

static void put(int *buf, int x, int v0, int v1)
{
  buf[4 * x] = v0;
  buf[4 * x + 3] = v1;
}

static void fill(int *buf, int n, int v)
{
  for (int i = 0; i < n; i++)
    buf[i] = v;
}

/* b holds exactly the columns put into want (same size), -1 elsewhere */
static void same(const int *b, const int *want, int n, const char *what)
{
  for (int i = 0; i < n; i++)
    CHECK(b[i] == want[i], "%s [%d] = %d, want %d", what, i, b[i], want[i]);
}

static MPI_Datatype the_col; /* what the user operation must be given */

static void colop(void *in, void *io, int *len, MPI_Datatype *dt)
{
  CHECK(*dt == the_col, "the user operation got datatype 0x%x, not the program's 0x%x", *dt,
        the_col);
  const int *a = in;
  int *b = io;
  for (int k = 0; k < *len; k++) {
    b[4 * k] = a[4 * k] > b[4 * k] ? a[4 * k] : b[4 * k];
    b[4 * k + 3] += a[4 * k + 3];
  }
}

static void vcoll_on(MPI_Comm comm, MPI_Datatype col)
{
  int me, n;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &n);
  int ints = 4 * vdisp(n) + 8 * n;
  int *a = malloc(sizeof(int) * (size_t)ints), *b = malloc(sizeof(int) * (size_t)ints),
      *w = malloc(sizeof(int) * (size_t)ints);
  int *cnt = malloc(sizeof(int) * 4 * (size_t)n), *dsp = cnt + n, *c2 = cnt + 2 * n,
      *d2 = cnt + 3 * n;
  CHECK(a && b && w && cnt, "malloc");
  for (int i = 0; i < n; i++) {
    cnt[i] = vcnt(i);
    dsp[i] = vdisp(i);
  }
  /* Gatherv: columns both sides, to rank 0 */
  fill(a, ints, -1);
  for (int k = 0; k < vcnt(me); k++)
    put(a, k, 100 * me + 2 * k, 100 * me + 2 * k + 1);
  fill(b, ints, -1);
  fill(w, ints, -1);
  for (int i = 0; i < n; i++)
    for (int k = 0; k < vcnt(i); k++)
      put(w, vdisp(i) + k, 100 * i + 2 * k, 100 * i + 2 * k + 1);
  CHECK_OK(MPI_Gatherv(a, vcnt(me), col, b, cnt, dsp, col, 0, comm));
  if (me == 0)
    same(b, w, ints, "gatherv");
  /* Scatterv from the last rank, received as ints */
  int got[4] = {-1, -1, -1, -1};
  CHECK_OK(MPI_Scatterv(w, cnt, dsp, col, got, 2 * vcnt(me), MPI_INT, n - 1, comm));
  for (int k = 0; k < vcnt(me); k++)
    CHECK(got[2 * k] == 100 * me + 2 * k && got[2 * k + 1] == 100 * me + 2 * k + 1,
          "scatterv %d: %d %d", k, got[2 * k], got[2 * k + 1]);
  /* Allgatherv: ints in, columns out */
  int mine[4];
  for (int k = 0; k < vcnt(me); k++) {
    mine[2 * k] = 100 * me + 2 * k;
    mine[2 * k + 1] = 100 * me + 2 * k + 1;
  }
  fill(b, ints, -1);
  CHECK_OK(MPI_Allgatherv(mine, 2 * vcnt(me), MPI_INT, b, cnt, dsp, col, comm));
  same(b, w, ints, "allgatherv");
  /* Allgatherv in place: each rank's columns in place already */
  fill(b, ints, -1);
  for (int k = 0; k < vcnt(me); k++)
    put(b, vdisp(me) + k, 100 * me + 2 * k, 100 * me + 2 * k + 1);
  CHECK_OK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, cnt, dsp, col, comm));
  same(b, w, ints, "allgatherv in place");
  /* Alltoallv: column 2j to rank j, from rank i into column 2i + 1 */
  fill(a, ints, -1);
  fill(w, ints, -1);
  for (int j = 0; j < n; j++) {
    put(a, 2 * j, 1000 * me + 10 * j, 1000 * me + 10 * j + 1);
    put(w, 2 * j + 1, 1000 * j + 10 * me, 1000 * j + 10 * me + 1);
    c2[j] = 1;
    dsp[j] = 2 * j;
    d2[j] = 2 * j + 1;
  }
  fill(b, ints, -1);
  CHECK_OK(MPI_Alltoallv(a, c2, dsp, col, b, c2, d2, col, comm));
  same(b, w, ints, "alltoallv");
  /* the reductions of 2 columns: x = 0, 1 holds (me + x, 10 me + x) */
  int s0 = n * (n - 1) / 2;
  fill(a, ints, -1);
  for (int x = 0; x < 2; x++)
    put(a, x, me + x, 10 * me + x);
  fill(w, 8, -1);
  for (int x = 0; x < 2; x++)
    put(w, x, s0 + n * x, 10 * s0 + n * x);
  fill(b, ints, -1);
  CHECK_OK(MPI_Allreduce(a, b, 2, col, MPI_SUM, comm));
  same(b, w, 8, "allreduce");
  memcpy(b, a, sizeof(int) * 8);
  CHECK_OK(MPI_Allreduce(MPI_IN_PLACE, b, 2, col, MPI_SUM, comm));
  same(b, w, 8, "allreduce in place");
  fill(b, ints, -1);
  CHECK_OK(MPI_Reduce(a, b, 2, col, MPI_MAX, n - 1, comm));
  fill(w, 8, -1);
  for (int x = 0; x < 2; x++)
    put(w, x, n - 1 + x, 10 * (n - 1) + x);
  if (me == n - 1)
    same(b, w, 8, "reduce max");
  /* Scan and Exscan: the sums over ranks 0..me (0..me-1) */
  int p = me * (me + 1) / 2, q = me * (me - 1) / 2;
  fill(b, ints, -1);
  CHECK_OK(MPI_Scan(a, b, 2, col, MPI_SUM, comm));
  fill(w, 8, -1);
  for (int x = 0; x < 2; x++)
    put(w, x, p + (me + 1) * x, 10 * p + (me + 1) * x);
  same(b, w, 8, "scan");
  fill(b, ints, -1);
  CHECK_OK(MPI_Exscan(a, b, 2, col, MPI_SUM, comm));
  fill(w, 8, -1);
  for (int x = 0; me > 0 && x < 2; x++)
    put(w, x, q + me * x, 10 * q + me * x);
  same(b, w, 8, "exscan");
  /* Reduce_scatter(_block): column x of the input holds (me + x, 10 me + x) for x < 2n */
  fill(a, ints, -1);
  for (int x = 0; x < 2 * n; x++)
    put(a, x, me + x, 10 * me + x);
  fill(b, ints, -1);
  CHECK_OK(MPI_Reduce_scatter_block(a, b, 1, col, MPI_SUM, comm));
  fill(w, 8, -1);
  put(w, 0, s0 + n * me, 10 * s0 + n * me);
  same(b, w, 8, "reduce_scatter_block");
  int first = 0;
  for (int i = 0; i < me; i++)
    first += vcnt(i);
  fill(b, ints, -1);
  CHECK_OK(MPI_Reduce_scatter(a, b, cnt, col, MPI_SUM, comm));
  fill(w, 8, -1);
  for (int k = 0; k < vcnt(me); k++)
    put(w, k, s0 + n * (first + k), 10 * s0 + n * (first + k));
  same(b, w, 8, "reduce_scatter");
  /* the program's operation on the program's type: max of the first int, sum of the second */
  MPI_Op op;
  the_col = col;
  CHECK_OK(MPI_Op_create(colop, 1, &op));
  fill(b, ints, -1);
  CHECK_OK(MPI_Allreduce(a, b, 2, col, op, comm));
  fill(w, 8, -1);
  for (int x = 0; x < 2; x++)
    put(w, x, n - 1 + x, 10 * s0 + n * x);
  same(b, w, 8, "allreduce user op");
  fill(b, ints, -1);
  CHECK_OK(MPI_Scan(a, b, 2, col, op, comm));
  fill(w, 8, -1);
  for (int x = 0; x < 2; x++)
    put(w, x, me + x, 10 * p + (me + 1) * x);
  same(b, w, 8, "scan user op");
  CHECK_OK(MPI_Op_free(&op));
  free(a);
  free(b);
  free(w);
  free(cnt);
}

static void collectives(void)
{
  MPI_Datatype col;
  CHECK_OK(MPI_Type_vector(2, 1, 3, MPI_INT, &col));
  CHECK_OK(MPI_Type_commit(&col));
  coll_on(MPI_COMM_WORLD, col);
  vcoll_on(MPI_COMM_WORLD, col);
  MPI_Comm rev;
  CHECK_OK(MPI_Comm_split(MPI_COMM_WORLD, 0, -rank, &rev));
  coll_on(rev, col);
  vcoll_on(rev, col);
  CHECK_OK(MPI_Comm_free(&rev));
  /* an uncommitted type: MPI_ERR_TYPE at every rank, no message */
  MPI_Datatype raw;
  CHECK_OK(MPI_Type_vector(2, 1, 3, MPI_INT, &raw));
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int v[8] = {0};
  CHECK(cls_of(MPI_Bcast(v, 1, raw, 0, MPI_COMM_WORLD)) == MPI_ERR_TYPE, "bcast uncommitted");
  CHECK(cls_of(MPI_Allgather(v, 1, MPI_INT, v, 1, raw, MPI_COMM_WORLD)) == MPI_ERR_TYPE,
        "allgather uncommitted");
  CHECK(cls_of(MPI_Allreduce(v, v + 4, 1, raw, MPI_SUM, MPI_COMM_WORLD)) == MPI_ERR_TYPE,
        "allreduce uncommitted");
  /* a predefined operation on a type of mixed elements: MPI_ERR_OP, no message */
  MPI_Datatype mixed;
  int bl[2] = {1, 1};
  MPI_Aint dp[2] = {0, 8};
  MPI_Datatype ty[2] = {MPI_INT, MPI_DOUBLE};
  CHECK_OK(MPI_Type_create_struct(2, bl, dp, ty, &mixed));
  CHECK_OK(MPI_Type_commit(&mixed));
  double m[4] = {0};
  CHECK(cls_of(MPI_Allreduce(m, m + 2, 1, mixed, MPI_SUM, MPI_COMM_WORLD)) == MPI_ERR_OP,
        "allreduce of a mixed struct");
  CHECK_OK(MPI_Type_free(&mixed));
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  CHECK_OK(MPI_Type_free(&raw));
  CHECK_OK(MPI_Type_free(&col));
}

int main(int argc, char **argv)
{
  CHECK_OK(MPI_Init(&argc, &argv));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK(size >= 2, "run with 2 ranks or more");
  if (argc > 1 && !strcmp(argv[1], "fatal")) { /* MPI_ERRORS_ARE_FATAL: the job ends */
    MPI_Datatype t;
    MPI_Type_vector(2, 1, 2, MPI_INT, &t);
    int v[4] = {0};
    MPI_Send(v, 1, t, 1 - rank, 0, MPI_COMM_WORLD);
    CHECK(0, "not reached");
  }
  bounds();
  columns();
  structs();
  layouts();
  truncation();
  packing();
  bottom();
  large();
  errors();
  collectives();
  stamp("done");
  CHECK_OK(MPI_Finalize());
  return 0;
}
