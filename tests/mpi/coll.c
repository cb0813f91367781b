/*
 * Collectives under prepost mpirun (1..5 ranks): Barrier, Bcast from every root and of every
 * protocol size, Reduce to every root and Allreduce with every predefined operation on the types
 * it applies to (MINLOC/MAXLOC on the pair types), MPI_IN_PLACE; results checked against values
 * each rank computes alone. Also on MPI_COMM_SELF.
 */
#include <complex.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int rank, size;

static void barrier(void)
{
  /* a rank that leaves the barrier has seen every rank enter it: rank 0 enters last, late */
  double t0 = MPI_Wtime();
  if (rank == 0)
    for (int i = 0; i < 50; i++)
      MPI_Wtime(); /* 50 idle polls: 5 us of simulated time */
  CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
  double t1 = MPI_Wtime();
  CHECK(size == 1 || t1 - t0 >= 5e-6, "rank %d left the barrier %.0f ns after entering", rank,
        (t1 - t0) * 1e9);
}

static void bcast(void)
{
  static const int n[] = {1, 1000, 40000, 300000};
  for (int k = 0; k < 4; k++)
    for (int root = 0; root < size; root++) {
      int *b = malloc(sizeof(int) * (size_t)n[k]);
      CHECK(b, "malloc");
      for (int i = 0; i < n[k]; i++)
        b[i] = rank == root ? i * 3 + root : -1;
      CHECK_OK(MPI_Bcast(b, n[k], MPI_INT, root, MPI_COMM_WORLD));
      for (int i = 0; i < n[k]; i++)
        CHECK(b[i] == i * 3 + root, "bcast %d from %d: b[%d] = %d", n[k], root, i, b[i]);
      free(b);
    }
}

/* value of element i on rank r */
static long long ival(int r, int i)
{
  return (long long)((r + 1) * 7 + i * 3) % 23 - 11;
}

#define N 64

/* integer ops on one integer type T */
#define INT_CASE(T, DT)                                                        \
  do {                                                                         \
    MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN, MPI_LAND, MPI_LOR,    \
                    MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR};                    \
    for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {                \
      T in[N], out[N], want[N];                                                \
      for (int i = 0; i < N; i++) {                                            \
        in[i] = (T)ival(rank, i);                                              \
        for (int r = 0; r < size; r++) {                                       \
          T x = (T)ival(r, i);                                                 \
          T *w = &want[i];                                                     \
          if (r == 0) {                                                        \
            *w = x;                                                            \
            continue;                                                          \
          }                                                                    \
          switch (ops[o]) {                                                    \
          case MPI_SUM: *w = (T)(*w + x); break;                               \
          case MPI_PROD: *w = (T)(*w * x); break;                              \
          case MPI_MAX: *w = x > *w ? x : *w; break;                           \
          case MPI_MIN: *w = x < *w ? x : *w; break;                           \
          case MPI_LAND: *w = (T)(*w && x); break;                             \
          case MPI_LOR: *w = (T)(*w || x); break;                              \
          case MPI_LXOR: *w = (T)(!*w != !x); break;                           \
          case MPI_BAND: *w = (T)(*w & x); break;                              \
          case MPI_BOR: *w = (T)(*w | x); break;                               \
          case MPI_BXOR: *w = (T)(*w ^ x); break;                              \
          }                                                                    \
        }                                                                      \
      }                                                                        \
      CHECK_OK(MPI_Allreduce(in, out, N, DT, ops[o], MPI_COMM_WORLD));         \
      for (int i = 0; i < N; i++)                                              \
        CHECK(out[i] == want[i], "%s op %zu [%d]: %lld, expected %lld", #DT,   \
              o, i, (long long)out[i], (long long)want[i]);                    \
      int root = (int)(o % (size_t)size);                                      \
      memset(out, 0x5a, sizeof(out));                                          \
      CHECK_OK(MPI_Reduce(in, out, N, DT, ops[o], root, MPI_COMM_WORLD));      \
      if (rank == root)                                                        \
        for (int i = 0; i < N; i++)                                            \
          CHECK(out[i] == want[i], "reduce %s op %zu [%d]", #DT, o, i);         \
    }                                                                          \
  } while (0)

static void int_ops(void)
{
  INT_CASE(int, MPI_INT);
  INT_CASE(signed char, MPI_SIGNED_CHAR);
  INT_CASE(unsigned char, MPI_UNSIGNED_CHAR);
  INT_CASE(short, MPI_SHORT);
  INT_CASE(unsigned short, MPI_UNSIGNED_SHORT);
  INT_CASE(unsigned, MPI_UNSIGNED);
  INT_CASE(long, MPI_LONG);
  INT_CASE(unsigned long, MPI_UNSIGNED_LONG);
  INT_CASE(long long, MPI_LONG_LONG);
  INT_CASE(unsigned long long, MPI_UNSIGNED_LONG_LONG);
  INT_CASE(int8_t, MPI_INT8_T);
  INT_CASE(int16_t, MPI_INT16_T);
  INT_CASE(int32_t, MPI_INT32_T);
  INT_CASE(int64_t, MPI_INT64_T);
  INT_CASE(uint8_t, MPI_UINT8_T);
  INT_CASE(uint16_t, MPI_UINT16_T);
  INT_CASE(uint32_t, MPI_UINT32_T);
  INT_CASE(uint64_t, MPI_UINT64_T);
}

/* floating point: the sum in rank order, x0 + (x1 + (... + x(n-1))), bit for bit */
#define FLOAT_CASE(T, DT)                                                      \
  do {                                                                         \
    MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN};                      \
    for (size_t o = 0; o < 4; o++) {                                           \
      T in[N], out[N], want[N];                                                \
      for (int i = 0; i < N; i++) {                                            \
        in[i] = (T)ival(rank, i) / (T)7;                                       \
        T w = (T)ival(size - 1, i) / (T)7;                                     \
        for (int r = size - 2; r >= 0; r--) {                                  \
          T x = (T)ival(r, i) / (T)7;                                          \
          w = ops[o] == MPI_SUM ? x + w : ops[o] == MPI_PROD ? x * w           \
            : ops[o] == MPI_MAX ? (x > w ? x : w) : (x < w ? x : w);           \
        }                                                                      \
        want[i] = w;                                                           \
      }                                                                        \
      CHECK_OK(MPI_Allreduce(in, out, N, DT, ops[o], MPI_COMM_WORLD));         \
      CHECK(!memcmp(out, want, sizeof(out)), "%s op %zu differs", #DT, o);     \
    }                                                                          \
  } while (0)

static void float_ops(void)
{
  FLOAT_CASE(float, MPI_FLOAT);
  FLOAT_CASE(double, MPI_DOUBLE);
  /* long double: 10 bytes of value in 16, compare values */
  long double in = rank + 0.25L, out = 0, want = 0;
  for (int r = 0; r < size; r++)
    want += r + 0.25L;
  CHECK_OK(MPI_Allreduce(&in, &out, 1, MPI_LONG_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  CHECK(out == want, "long double sum %Lg, expected %Lg", out, want);
  double _Complex c = rank + 1.0 * I, cs = 0;
  CHECK_OK(MPI_Allreduce(&c, &cs, 1, MPI_C_DOUBLE_COMPLEX, MPI_SUM, MPI_COMM_WORLD));
  CHECK(creal(cs) == size * (size - 1) / 2.0 && cimag(cs) == size, "complex sum");
  _Bool b = rank % 2, band;
  CHECK_OK(MPI_Allreduce(&b, &band, 1, MPI_C_BOOL, MPI_LOR, MPI_COMM_WORLD));
  CHECK(band == (size > 1), "bool lor");
}

static void loc_ops(void)
{
  struct { double v; int i; } in[3], out[3];
  struct { int v; int i; } iin, iout;
  for (int k = 0; k < 3; k++) {
    in[k].v = k == 0 ? rank : k == 1 ? -rank : 1.0; /* k 2: all equal, smallest index wins */
    in[k].i = rank;
  }
  CHECK_OK(MPI_Allreduce(in, out, 3, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD));
  CHECK(out[0].v == size - 1 && out[0].i == size - 1, "maxloc %g@%d", out[0].v, out[0].i);
  CHECK(out[1].v == 0 && out[1].i == 0, "maxloc %g@%d", out[1].v, out[1].i);
  CHECK(out[2].v == 1 && out[2].i == 0, "maxloc ties %g@%d", out[2].v, out[2].i);
  CHECK_OK(MPI_Allreduce(in, out, 3, MPI_DOUBLE_INT, MPI_MINLOC, MPI_COMM_WORLD));
  CHECK(out[1].v == -(size - 1) && out[1].i == size - 1, "minloc %g@%d", out[1].v, out[1].i);
  iin.v = (rank * 5) % 3;
  iin.i = rank;
  CHECK_OK(MPI_Reduce(&iin, &iout, 1, MPI_2INT, MPI_MINLOC, 0, MPI_COMM_WORLD));
  if (rank == 0)
    CHECK(iout.v == 0 && iout.i == 0, "2int minloc %d@%d", iout.v, iout.i);
}

static void in_place(void)
{
  int v[4];
  for (int i = 0; i < 4; i++)
    v[i] = rank + i;
  CHECK_OK(MPI_Allreduce(MPI_IN_PLACE, v, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  for (int i = 0; i < 4; i++)
    CHECK(v[i] == size * (size - 1) / 2 + size * i, "in place allreduce [%d] = %d", i, v[i]);
  int root = size - 1, w = rank * 2;
  CHECK_OK(MPI_Reduce(rank == root ? MPI_IN_PLACE : &w, &w, 1, MPI_INT, MPI_MAX, root,
                      MPI_COMM_WORLD));
  if (rank == root)
    CHECK(w == 2 * (size - 1), "in place reduce %d", w);
}

static void self(void)
{
  int v = 3, s = 0;
  CHECK_OK(MPI_Allreduce(&v, &s, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF));
  CHECK(s == 3, "self allreduce %d", s);
  CHECK_OK(MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_SELF));
  CHECK_OK(MPI_Barrier(MPI_COMM_SELF));
}

int main(int argc, char **argv)
{
  CHECK_OK(MPI_Init(&argc, &argv));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  barrier();
  bcast();
  int_ops();
  float_ops();
  loc_ops();
  in_place();
  self();
  double t = MPI_Wtime();
  CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
  printf("rank %d of %d: collectives checked, at %.0f ns\n", rank, size, t * 1e9);
  CHECK_OK(MPI_Finalize());
  return 0;
}
