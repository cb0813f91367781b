/*
 * Communicators, groups and attributes under prepost mpirun (1..5 ranks): Comm_dup (its own
 * context: a message on the dup never matches a receive on the parent), Comm_split (colour and
 * key order, MPI_UNDEFINED -> MPI_COMM_NULL, ranks in statuses are the new communicator's),
 * Comm_split_type, Comm_create, Comm_compare, Comm_free (also with a receive pending), Comm_group
 * and the group calls, attributes with copy and delete callbacks, the predefined attributes,
 * names; the error classes of invalid arguments; and the bound on communicators alive at once,
 * the same at every rank; a rank's messages to itself on a split stay in the split's context
 * and name its rank there. At MPI_Finalize MPI_COMM_SELF's attribute is deleted (a line says so).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int rank, size;

#define EXPECT(call, want)                                                     \
  do {                                                                         \
    int e_ = (call), cls_;                                                     \
    MPI_Error_class(e_, &cls_);                                                \
    CHECK(cls_ == (want), "%s: class %d, expected %s", #call, cls_, #want);    \
  } while (0)

/* a message on a dup never matches the parent's receive, even ANY_SOURCE/ANY_TAG */
static void dup_context(void)
{
  MPI_Comm d;
  int cmp;
  CHECK_OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
  CHECK_OK(MPI_Comm_compare(MPI_COMM_WORLD, d, &cmp));
  CHECK(cmp == MPI_CONGRUENT, "compare(world, dup) %d", cmp);
  CHECK_OK(MPI_Comm_compare(d, d, &cmp));
  CHECK(cmp == MPI_IDENT, "compare(dup, dup) %d", cmp);
  int r, s;
  MPI_Comm_rank(d, &r);
  MPI_Comm_size(d, &s);
  CHECK(r == rank && s == size, "dup rank %d size %d", r, s);
  if (size >= 2 && rank < 2) {
    int a = 111, b = 222, v = 0;
    MPI_Status st;
    if (rank == 0) { /* the dup's message first: it must not be what world's receive gets */
      MPI_Request r;
      CHECK_OK(MPI_Isend(&a, 1, MPI_INT, 1, 5, d, &r));
      CHECK_OK(MPI_Send(&b, 1, MPI_INT, 1, 5, MPI_COMM_WORLD));
      CHECK_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    } else {
      CHECK_OK(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
      CHECK(v == 222 && st.MPI_SOURCE == 0 && st.MPI_TAG == 5, "world got %d from %d", v,
            st.MPI_SOURCE);
      CHECK_OK(MPI_Recv(&v, 1, MPI_INT, 0, 5, d, &st));
      CHECK(v == 111, "dup got %d", v);
    }
  }
  MPI_Comm d2; /* a dup of a dup: a third context */
  CHECK_OK(MPI_Comm_dup(d, &d2));
  int sum = 0, one = 1;
  CHECK_OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, d2));
  CHECK(sum == size, "allreduce on the dup of a dup %d", sum);
  CHECK_OK(MPI_Comm_free(&d2));
  CHECK_OK(MPI_Comm_free(&d));
  CHECK(d == MPI_COMM_NULL, "freed handle not MPI_COMM_NULL");
}

/* colour rank % 2, key -rank: the new ranks in reverse world order; the last rank (of 3 or
 * more) MPI_UNDEFINED */
static void split_check(MPI_Comm c, int colour);

static void split(void)
{
  int colour = size >= 3 && rank == size - 1 ? MPI_UNDEFINED : rank % 2;
  MPI_Comm c;
  CHECK_OK(MPI_Comm_split(MPI_COMM_WORLD, colour, -rank, &c));
  if (colour == MPI_UNDEFINED)
    CHECK(c == MPI_COMM_NULL, "MPI_UNDEFINED gave a communicator");
  else
    split_check(c, colour);
  int cmp, s;
  /* one colour, key = rank: the same ranks in the same order, another context */
  CHECK_OK(MPI_Comm_split(MPI_COMM_WORLD, 3, rank, &c));
  CHECK_OK(MPI_Comm_compare(MPI_COMM_WORLD, c, &cmp));
  CHECK(cmp == MPI_CONGRUENT, "compare(world, split key=rank) %d", cmp);
  CHECK_OK(MPI_Comm_free(&c));
  /* shared memory: every rank is a host of its own */
  CHECK_OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &c));
  MPI_Comm_size(c, &s);
  CHECK(s == 1, "split_type shared size %d", s);
  CHECK_OK(MPI_Comm_free(&c));
}

static void split_check(MPI_Comm c, int colour)
{
  int members = 0, above = 0;
  for (int r = 0; r < size; r++)
    if (r % 2 == colour && !(size >= 3 && r == size - 1)) {
      members++;
      above += r > rank;
    }
  int r, s;
  MPI_Comm_rank(c, &r);
  MPI_Comm_size(c, &s);
  CHECK(s == members && r == above, "split: rank %d of %d, expected %d of %d", r, s, above,
        members);
  /* the group says which world rank each is */
  MPI_Group g, wg;
  CHECK_OK(MPI_Comm_group(c, &g));
  CHECK_OK(MPI_Comm_group(MPI_COMM_WORLD, &wg));
  int *in = malloc(sizeof(int) * (size_t)s), *out = malloc(sizeof(int) * (size_t)s);
  CHECK(in && out, "malloc");
  for (int i = 0; i < s; i++)
    in[i] = i;
  CHECK_OK(MPI_Group_translate_ranks(g, s, in, wg, out));
  for (int i = 0; i < s; i++) /* new rank i: the i-th highest world rank of the colour */
    CHECK(out[i] % 2 == colour && (i == 0 || out[i] < out[i - 1]), "split rank %d is world %d",
          i, out[i]);
  /* collectives and point-to-point on it: sources are the split's ranks */
  int w = rank, sum = 0, want = 0;
  for (int i = 0; i < s; i++)
    want += out[i];
  CHECK_OK(MPI_Allreduce(&w, &sum, 1, MPI_INT, MPI_SUM, c));
  CHECK(sum == want, "allreduce over the split %d, expected %d", sum, want);
  int root_world = out[s - 1], b = rank == root_world ? 77 : 0;
  CHECK_OK(MPI_Bcast(&b, 1, MPI_INT, s - 1, c));
  CHECK(b == 77, "bcast over the split %d", b);
  if (s >= 2) {
    MPI_Status st;
    int v = -1;
    if (r == 1)
      CHECK_OK(MPI_Send(&rank, 1, MPI_INT, 0, 9, c));
    if (r == 0) {
      CHECK_OK(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 9, c, &st));
      CHECK(st.MPI_SOURCE == 1 && v == out[1], "split recv: source %d value %d", st.MPI_SOURCE,
            v);
    }
  }
  /* messages to itself: matched within the split's context (the WORLD one, sent first, is not
   * taken by the split's wildcard receive), the status naming the split's rank */
  {
    MPI_Status st;
    MPI_Request q[2];
    int ws = 1000 + rank, cs = 2000 + rank, v = -1;
    CHECK_OK(MPI_Isend(&ws, 1, MPI_INT, rank, 11, MPI_COMM_WORLD, &q[0]));
    CHECK_OK(MPI_Isend(&cs, 1, MPI_INT, r, 11, c, &q[1]));
    CHECK_OK(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, c, &st));
    CHECK(v == cs && st.MPI_SOURCE == r && st.MPI_TAG == 11,
          "split self recv: value %d source %d tag %d, expected %d from %d", v, st.MPI_SOURCE,
          st.MPI_TAG, cs, r);
    int flag = 1;
    CHECK_OK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c, &flag, &st));
    CHECK(!flag, "the split sees a message to itself sent on MPI_COMM_WORLD");
    CHECK_OK(MPI_Recv(&v, 1, MPI_INT, rank, 11, MPI_COMM_WORLD, &st));
    CHECK(v == ws && st.MPI_SOURCE == rank, "world self recv: value %d source %d", v,
          st.MPI_SOURCE);
    CHECK_OK(MPI_Waitall(2, q, MPI_STATUSES_IGNORE));
    CHECK_OK(MPI_Sendrecv(&cs, 1, MPI_INT, r, 12, &v, 1, MPI_INT, MPI_ANY_SOURCE, 12, c, &st));
    CHECK(v == cs && st.MPI_SOURCE == r, "split self sendrecv: value %d source %d", v,
          st.MPI_SOURCE);
  }
  int cmp;
  CHECK_OK(MPI_Comm_compare(MPI_COMM_WORLD, c, &cmp));
  CHECK(cmp == (s == size ? (size == 1 ? MPI_CONGRUENT : MPI_SIMILAR) : MPI_UNEQUAL),
        "compare(world, split) %d", cmp);
  free(in);
  free(out);
  CHECK_OK(MPI_Group_free(&g));
  CHECK_OK(MPI_Group_free(&wg));
  CHECK_OK(MPI_Comm_free(&c));
}

/* the even world ranks, in reverse order; odd ones get MPI_COMM_NULL */
static void create(void)
{
  MPI_Group wg, g;
  int n = (size + 1) / 2, ranks[8];
  for (int i = 0; i < n; i++)
    ranks[i] = 2 * (n - 1 - i);
  CHECK_OK(MPI_Comm_group(MPI_COMM_WORLD, &wg));
  CHECK_OK(MPI_Group_incl(wg, n, ranks, &g));
  int gs, gr;
  CHECK_OK(MPI_Group_size(g, &gs));
  CHECK_OK(MPI_Group_rank(g, &gr));
  CHECK(gs == n && gr == (rank % 2 ? MPI_UNDEFINED : n - 1 - rank / 2), "group %d/%d", gr, gs);
  MPI_Comm c;
  CHECK_OK(MPI_Comm_create(MPI_COMM_WORLD, g, &c));
  if (rank % 2) {
    CHECK(c == MPI_COMM_NULL, "odd rank got a communicator");
  } else {
    int r, s, x = rank, y[8];
    MPI_Comm_rank(c, &r);
    MPI_Comm_size(c, &s);
    CHECK(s == n && r == gr, "create: rank %d of %d", r, s);
    CHECK_OK(MPI_Allgather(&x, 1, MPI_INT, y, 1, MPI_INT, c));
    for (int i = 0; i < n; i++)
      CHECK(y[i] == ranks[i], "create allgather [%d] = %d", i, y[i]);
    CHECK_OK(MPI_Comm_free(&c));
  }
  CHECK_OK(MPI_Group_free(&g));
  CHECK_OK(MPI_Group_free(&wg));
}

static void groups(void)
{
  MPI_Group wg, a, b, u, x, d, e;
  CHECK_OK(MPI_Comm_group(MPI_COMM_WORLD, &wg));
  int gs, cmp;
  CHECK_OK(MPI_Group_size(wg, &gs));
  CHECK(gs == size, "world group size %d", gs);
  int first[1] = {0};
  CHECK_OK(MPI_Group_excl(wg, 1, first, &a)); /* 1..n-1 */
  CHECK_OK(MPI_Group_size(a, &gs));
  CHECK(gs == size - 1, "excl size %d", gs);
  int ranges[1][3] = {{size - 1, 0, -1}};
  CHECK_OK(MPI_Group_range_incl(wg, 1, ranges, &b)); /* n-1..0 */
  CHECK_OK(MPI_Group_compare(wg, b, &cmp));
  CHECK(cmp == (size == 1 ? MPI_IDENT : MPI_SIMILAR), "compare(world, reversed) %d", cmp);
  CHECK_OK(MPI_Group_union(a, wg, &u)); /* a's order, then rank 0 */
  CHECK_OK(MPI_Group_size(u, &gs));
  int r0 = 0, t;
  CHECK_OK(MPI_Group_translate_ranks(wg, 1, &r0, u, &t));
  CHECK(gs == size && t == size - 1, "union size %d, rank 0 at %d", gs, t);
  CHECK_OK(MPI_Group_intersection(a, b, &x)); /* a's order: 1..n-1 */
  CHECK_OK(MPI_Group_compare(x, a, &cmp));
  CHECK(cmp == MPI_IDENT, "intersection %d", cmp);
  CHECK_OK(MPI_Group_difference(wg, a, &d)); /* rank 0 alone */
  CHECK_OK(MPI_Group_size(d, &gs));
  CHECK(gs == 1, "difference size %d", gs);
  CHECK_OK(MPI_Group_difference(a, a, &e));
  CHECK(e == MPI_GROUP_EMPTY, "a - a is not MPI_GROUP_EMPTY");
  CHECK_OK(MPI_Group_compare(d, a, &cmp));
  CHECK(cmp == MPI_UNEQUAL || size == 1, "compare(difference, excl) %d", cmp);
  int q[2] = {0, MPI_PROC_NULL}, qa[2];
  CHECK_OK(MPI_Group_translate_ranks(wg, 2, q, a, qa));
  CHECK(qa[0] == MPI_UNDEFINED && qa[1] == MPI_PROC_NULL, "translate %d %d", qa[0], qa[1]);
  MPI_Group gs_[] = {a, b, u, x, d, e, wg};
  for (int i = 0; i < 7; i++) {
    CHECK_OK(MPI_Group_free(&gs_[i]));
    CHECK(gs_[i] == MPI_GROUP_NULL, "freed group %d not MPI_GROUP_NULL", i);
  }
}

/* ---------------------------------------------------------------- attributes */

static int copies, deletes;

static int copy_fn(MPI_Comm c, int k, void *extra, void *in, void *out, int *flag)
{
  (void)c, (void)k;
  CHECK(extra == &copies, "extra_state");
  copies++;
  *(void **)out = (void *)((char *)in + 1); /* the copy's value: one more */
  *flag = 1;
  return MPI_SUCCESS;
}

static int delete_fn(MPI_Comm c, int k, void *val, void *extra)
{
  (void)c, (void)k, (void)val;
  CHECK(extra == &copies, "extra_state");
  deletes++;
  return MPI_SUCCESS;
}

static int self_delete(MPI_Comm c, int k, void *val, void *extra)
{
  (void)k, (void)extra;
  CHECK(c == MPI_COMM_SELF && val == &rank, "self attribute");
  printf("rank %d: MPI_COMM_SELF's attribute deleted at MPI_Finalize\n", rank);
  return MPI_SUCCESS;
}

static int failing_copy(MPI_Comm c, int k, void *extra, void *in, void *out, int *flag)
{
  (void)c, (void)k, (void)extra, (void)in, (void)out, (void)flag;
  return MPI_ERR_OTHER;
}

static void attributes(void)
{
  int k, knull, kdup, kfail, flag;
  void *v;
  CHECK_OK(MPI_Comm_create_keyval(copy_fn, delete_fn, &k, &copies));
  CHECK_OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &knull, NULL));
  CHECK_OK(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &kdup, NULL));
  MPI_Comm a, b;
  CHECK_OK(MPI_Comm_dup(MPI_COMM_WORLD, &a));
  CHECK_OK(MPI_Comm_get_attr(a, k, &v, &flag));
  CHECK(!flag, "attribute before it was set");
  CHECK_OK(MPI_Comm_set_attr(a, k, (void *)100));
  CHECK_OK(MPI_Comm_set_attr(a, knull, (void *)200));
  CHECK_OK(MPI_Comm_set_attr(a, kdup, (void *)300));
  CHECK_OK(MPI_Comm_get_attr(a, k, &v, &flag));
  CHECK(flag && v == (void *)100, "get %p", v);
  CHECK_OK(MPI_Comm_set_attr(a, k, (void *)110)); /* replaces: the old value's delete runs */
  CHECK(deletes == 1, "replace: %d deletes", deletes);
  CHECK_OK(MPI_Comm_dup(a, &b));
  CHECK(copies == 1, "dup: %d copies", copies);
  CHECK_OK(MPI_Comm_get_attr(b, k, &v, &flag));
  CHECK(flag && v == (void *)111, "copied value %p", v);
  CHECK_OK(MPI_Comm_get_attr(b, knull, &v, &flag));
  CHECK(!flag, "MPI_COMM_NULL_COPY_FN copied");
  CHECK_OK(MPI_Comm_get_attr(b, kdup, &v, &flag));
  CHECK(flag && v == (void *)300, "MPI_COMM_DUP_FN: %p", v);
  CHECK_OK(MPI_Comm_delete_attr(b, k));
  CHECK(deletes == 2, "delete_attr: %d deletes", deletes);
  CHECK_OK(MPI_Comm_get_attr(b, k, &v, &flag));
  CHECK(!flag, "deleted attribute still there");
  CHECK_OK(MPI_Comm_free(&b));
  CHECK(deletes == 2, "free of b deleted %d", deletes);
  /* a freed keyval: its attributes stay until their communicator goes */
  CHECK_OK(MPI_Comm_free_keyval(&k));
  CHECK(k == MPI_KEYVAL_INVALID, "freed keyval");
  CHECK_OK(MPI_Comm_free(&a));
  CHECK(deletes == 3, "free of a with a freed keyval: %d deletes", deletes);
  /* a copy callback that fails: Comm_dup returns its error, no communicator */
  CHECK_OK(MPI_Comm_create_keyval(failing_copy, MPI_COMM_NULL_DELETE_FN, &kfail, NULL));
  CHECK_OK(MPI_Comm_set_attr(MPI_COMM_WORLD, kfail, (void *)1));
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  b = MPI_COMM_NULL;
  EXPECT(MPI_Comm_dup(MPI_COMM_WORLD, &b), MPI_ERR_OTHER);
  CHECK(b == MPI_COMM_NULL, "a failed dup gave a communicator");
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
  CHECK_OK(MPI_Comm_delete_attr(MPI_COMM_WORLD, kfail));
  CHECK_OK(MPI_Comm_free_keyval(&kfail));
  CHECK_OK(MPI_Comm_free_keyval(&knull));
  CHECK_OK(MPI_Comm_free_keyval(&kdup));
  /* the predefined attributes, on any communicator */
  int *p;
  CHECK_OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &p, &flag));
  CHECK(flag && *p >= 32767, "MPI_TAG_UB");
  int big = *p;
  CHECK_OK(MPI_Send(&big, 0, MPI_INT, MPI_PROC_NULL, big, MPI_COMM_WORLD)); /* TAG_UB is valid */
  CHECK_OK(MPI_Comm_get_attr(MPI_COMM_SELF, MPI_HOST, &p, &flag));
  CHECK(flag && *p == MPI_PROC_NULL, "MPI_HOST %d", *p);
  CHECK_OK(MPI_Attr_get(MPI_COMM_WORLD, MPI_IO, &p, &flag));
  CHECK(flag && *p == MPI_ANY_SOURCE, "MPI_IO %d", *p);
  CHECK_OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &p, &flag));
  CHECK(flag && *p == 1, "MPI_WTIME_IS_GLOBAL %d", *p);
  CHECK_OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &p, &flag));
  CHECK(flag && *p == size, "MPI_UNIVERSE_SIZE %d", *p);
  /* deleted at MPI_Finalize (a line of the output) */
  int ks;
  CHECK_OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete, &ks, NULL));
  CHECK_OK(MPI_Comm_set_attr(MPI_COMM_SELF, ks, &rank));
}

static void names(void)
{
  char name[MPI_MAX_OBJECT_NAME];
  int len;
  CHECK_OK(MPI_Comm_get_name(MPI_COMM_WORLD, name, &len));
  CHECK(!strcmp(name, "MPI_COMM_WORLD") && len == 14, "world's name '%s'", name);
  CHECK_OK(MPI_Comm_get_name(MPI_COMM_SELF, name, &len));
  CHECK(!strcmp(name, "MPI_COMM_SELF"), "self's name '%s'", name);
  MPI_Comm d;
  CHECK_OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
  CHECK_OK(MPI_Comm_get_name(d, name, &len));
  CHECK(len == 0 && !name[0], "a dup's name '%s' (not inherited)", name);
  CHECK_OK(MPI_Comm_set_name(d, "solver"));
  CHECK_OK(MPI_Comm_get_name(d, name, &len));
  CHECK(!strcmp(name, "solver") && len == 6, "set name '%s'", name);
  CHECK_OK(MPI_Comm_free(&d));
}

/* a receive pending on a communicator that is freed completes, its source in that
 * communicator's ranks */
static void free_pending(void)
{
  if (size < 2)
    return;
  MPI_Comm c;
  CHECK_OK(MPI_Comm_split(MPI_COMM_WORLD, 0, -rank, &c)); /* reversed: world 0 is rank n-1 */
  int v = -1, x = 42;
  MPI_Request r = MPI_REQUEST_NULL;
  MPI_Status st;
  if (rank == 1)
    CHECK_OK(MPI_Irecv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 3, c, &r));
  CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0)
    CHECK_OK(MPI_Send(&x, 1, MPI_INT, size - 2, 3, c));
  CHECK_OK(MPI_Comm_free(&c));
  MPI_Comm again; /* the ids are not reused while the receive is pending */
  CHECK_OK(MPI_Comm_dup(MPI_COMM_WORLD, &again));
  if (rank == 1) {
    CHECK_OK(MPI_Wait(&r, &st));
    CHECK(v == 42 && st.MPI_SOURCE == size - 1, "pending receive: %d from %d", v, st.MPI_SOURCE);
  }
  CHECK_OK(MPI_Comm_free(&again));
}

static void errors(void)
{
  MPI_Comm d, freed;
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  CHECK_OK(MPI_Comm_dup(MPI_COMM_WORLD, &d)); /* inherits MPI_ERRORS_RETURN */
  MPI_Errhandler h;
  CHECK_OK(MPI_Comm_get_errhandler(d, &h));
  CHECK(h == MPI_ERRORS_RETURN, "dup's error handler 0x%x", h);
  freed = d;
  MPI_Comm w = MPI_COMM_WORLD;
  int v, k;
  EXPECT(MPI_Comm_free(&w), MPI_ERR_COMM);
  CHECK_OK(MPI_Comm_free(&d));
  EXPECT(MPI_Comm_rank(freed, &v), MPI_ERR_COMM);
  EXPECT(MPI_Send(&v, 1, MPI_INT, 0, 0, freed), MPI_ERR_COMM);
  EXPECT(MPI_Comm_free(&d), MPI_ERR_COMM); /* MPI_COMM_NULL */
  EXPECT(MPI_Comm_split(MPI_COMM_WORLD, -5, 0, &d), MPI_ERR_ARG);
  EXPECT(MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_NULL, &v), MPI_ERR_COMM);
  MPI_Group g, ng;
  CHECK_OK(MPI_Comm_group(MPI_COMM_WORLD, &g));
  int bad[2] = {size, 0}, twice[2] = {0, 0};
  EXPECT(MPI_Group_incl(g, 1, bad, &ng), MPI_ERR_RANK);
  if (size >= 2)
    EXPECT(MPI_Group_incl(g, 2, twice, &ng), MPI_ERR_RANK);
  EXPECT(MPI_Group_excl(g, 1, bad, &ng), MPI_ERR_RANK);
  EXPECT(MPI_Group_translate_ranks(g, 1, bad, g, &v), MPI_ERR_RANK);
  EXPECT(MPI_Group_size((MPI_Group)0x88000fff, &v), MPI_ERR_GROUP);
  EXPECT(MPI_Comm_create(MPI_COMM_WORLD, MPI_GROUP_NULL, &d), MPI_ERR_GROUP);
  CHECK_OK(MPI_Group_free(&g));
  EXPECT(MPI_Group_free(&g), MPI_ERR_GROUP);
  /* a group larger than the communicator: not a subset */
  MPI_Comm one;
  CHECK_OK(MPI_Comm_split(MPI_COMM_WORLD, rank, 0, &one));
  CHECK_OK(MPI_Comm_group(MPI_COMM_WORLD, &g));
  if (size >= 2)
    EXPECT(MPI_Comm_create(one, g, &d), MPI_ERR_GROUP);
  CHECK_OK(MPI_Group_free(&g));
  CHECK_OK(MPI_Comm_free(&one));
  EXPECT(MPI_Comm_set_attr(MPI_COMM_WORLD, MPI_TAG_UB, &v), MPI_ERR_KEYVAL);
  EXPECT(MPI_Comm_set_attr(MPI_COMM_WORLD, 0x12345, &v), MPI_ERR_KEYVAL);
  CHECK_OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &k, NULL));
  int kept = k;
  CHECK_OK(MPI_Comm_free_keyval(&k));
  EXPECT(MPI_Comm_get_attr(MPI_COMM_WORLD, kept, &v, &k), MPI_ERR_KEYVAL);
  EXPECT(MPI_Comm_free_keyval(&kept), MPI_ERR_KEYVAL);
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

/* every rank reaches the same bound, and a freed communicator's id serves again */
static void exhaust(void)
{
  enum { MAX = 1100 };
  static MPI_Comm c[MAX];
  int n = 0, e = MPI_SUCCESS, cls;
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  while (n < MAX && (e = MPI_Comm_dup(MPI_COMM_WORLD, &c[n])) == MPI_SUCCESS)
    n++;
  MPI_Error_class(e, &cls);
  CHECK(cls == MPI_ERR_OTHER, "the dup past the bound: class %d after %d", cls, n);
  int lo, hi;
  CHECK_OK(MPI_Allreduce(&n, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  CHECK_OK(MPI_Allreduce(&n, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  CHECK(lo == hi && n > 1000 && n < MAX, "%d communicators here, %d..%d at every rank", n, lo, hi);
  CHECK_OK(MPI_Comm_free(&c[n / 2]));
  CHECK_OK(MPI_Comm_dup(MPI_COMM_WORLD, &c[n / 2]));
  int one = 1, sum = 0;
  CHECK_OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, c[n / 2]));
  CHECK(sum == size, "on the reused id %d", sum);
  for (int i = 0; i < n; i++)
    CHECK_OK(MPI_Comm_free(&c[i]));
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
  if (rank == 0)
    printf("communicators alive at once: at most %d besides MPI_COMM_WORLD and MPI_COMM_SELF\n",
           n);
}

int main(int argc, char **argv)
{
  CHECK_OK(MPI_Init(&argc, &argv));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK(size <= 8, "at most 8 ranks");
  dup_context();
  split();
  create();
  groups();
  attributes();
  names();
  free_pending();
  errors();
  exhaust();
  printf("rank %d of %d: communicators checked\n", rank, size);
  CHECK_OK(MPI_Finalize());
  return 0;
}
