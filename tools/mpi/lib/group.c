/*
 * Groups: Comm_group's result and what Group_incl, Group_excl, Group_range_incl,
 * Group_range_excl, Group_union, Group_intersection and Group_difference make of it;
 * Group_size, Group_rank, Group_translate_ranks, Group_compare, Group_free. A group is its
 * members' world ranks in group order, in a bounded table (PP_MAX_GROUP live at once: a full
 * table is MPI_ERR_NO_MEM, never an abort); MPI_GROUP_EMPTY is the predefined empty group.
 */
#include <stdlib.h>
#include <string.h>

#include "impl.h"

#define PP_MAX_GROUP 1024u
#define PP_GROUP_BASE 0x88000000u /* MPICH's "direct" group handles */

struct group {
  bool used;
  int n;
  int *world;
};

static struct group groups[PP_MAX_GROUP];
static uint32_t group_hint;

const int *pp_group_get(MPI_Group g, int *n)
{
  static const int none[1];
  if (g == MPI_GROUP_EMPTY) {
    *n = 0;
    return none;
  }
  uint32_t i = (uint32_t)g - PP_GROUP_BASE;
  if ((uint32_t)g < PP_GROUP_BASE || i >= PP_MAX_GROUP || !groups[i].used)
    return NULL;
  *n = groups[i].n;
  return groups[i].world;
}

int pp_group_new(const int *world, int n, MPI_Group *out)
{
  if (n == 0) {
    *out = MPI_GROUP_EMPTY;
    return MPI_SUCCESS;
  }
  for (uint32_t k = 0; k < PP_MAX_GROUP; k++) {
    uint32_t i = (group_hint + k) % PP_MAX_GROUP;
    if (groups[i].used)
      continue;
    int *w = malloc(sizeof(int) * (size_t)n);
    if (!w)
      return MPI_ERR_NO_MEM;
    memcpy(w, world, sizeof(int) * (size_t)n);
    groups[i] = (struct group){.used = true, .n = n, .world = w};
    group_hint = i + 1;
    *out = (MPI_Group)(PP_GROUP_BASE + i);
    return MPI_SUCCESS;
  }
  return MPI_ERR_NO_MEM;
}

static int group_arg(const char *fn, MPI_Group g, const int **w, int *n)
{
  pp_need_init(fn);
  *w = pp_group_get(g, n);
  if (!*w)
    return pp_err(NULL, fn, MPI_ERR_GROUP, "group 0x%x is not a live group", g);
  return MPI_SUCCESS;
}

/* the new group through pp_group_new, its error raised */
static int group_out(const char *fn, const int *w, int n, MPI_Group *out)
{
  if (!out)
    return pp_err(NULL, fn, MPI_ERR_ARG, "newgroup is NULL");
  int e = pp_group_new(w, n, out);
  if (e)
    return pp_err(NULL, fn, e, "every one of the %u group slots is in use (free some with "
                               "MPI_Group_free)", PP_MAX_GROUP);
  return MPI_SUCCESS;
}

int PMPI_Group_size(MPI_Group group, int *size)
{
  const int *w;
  int e = group_arg("MPI_Group_size", group, &w, size);
  return e;
}
PP_ALIAS(MPI_Group_size);

static int index_of(const int *w, int n, int world)
{
  for (int i = 0; i < n; i++)
    if (w[i] == world)
      return i;
  return MPI_UNDEFINED;
}

int PMPI_Group_rank(MPI_Group group, int *rank)
{
  const int *w;
  int n, e = group_arg("MPI_Group_rank", group, &w, &n);
  if (e)
    return e;
  *rank = index_of(w, n, (int)pp_st.rank);
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Group_rank);

int PMPI_Group_free(MPI_Group *group)
{
  const char *fn = "MPI_Group_free";
  const int *w;
  int n, e;
  if (!group)
    return pp_err(NULL, fn, MPI_ERR_ARG, "group is NULL");
  if ((e = group_arg(fn, *group, &w, &n)))
    return e;
  if (*group != MPI_GROUP_EMPTY) { /* MPI_GROUP_EMPTY: predefined, nothing to free */
    struct group *g = &groups[(uint32_t)*group - PP_GROUP_BASE];
    free(g->world);
    memset(g, 0, sizeof(*g));
  }
  *group = MPI_GROUP_NULL;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Group_free);

int PMPI_Group_translate_ranks(MPI_Group g1, int n, const int ranks1[], MPI_Group g2, int ranks2[])
{
  const char *fn = "MPI_Group_translate_ranks";
  const int *a, *b;
  int na, nb, e;
  if ((e = group_arg(fn, g1, &a, &na)) || (e = group_arg(fn, g2, &b, &nb)))
    return e;
  if (n < 0 || (n && (!ranks1 || !ranks2)))
    return pp_err(NULL, fn, MPI_ERR_ARG, "%d ranks", n);
  for (int i = 0; i < n; i++)
    if (ranks1[i] != MPI_PROC_NULL && (ranks1[i] < 0 || ranks1[i] >= na))
      return pp_err(NULL, fn, MPI_ERR_RANK, "ranks1[%d] = %d (the group has %d)", i, ranks1[i],
                    na);
  for (int i = 0; i < n; i++)
    ranks2[i] = ranks1[i] == MPI_PROC_NULL ? MPI_PROC_NULL : index_of(b, nb, a[ranks1[i]]);
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Group_translate_ranks);

int PMPI_Group_compare(MPI_Group g1, MPI_Group g2, int *result)
{
  const char *fn = "MPI_Group_compare";
  const int *a, *b;
  int na, nb, e;
  if ((e = group_arg(fn, g1, &a, &na)) || (e = group_arg(fn, g2, &b, &nb)))
    return e;
  *result = pp_members_compare(a, na, b, nb, &e);
  return e ? pp_err(NULL, fn, e, "comparing %d ranks", na) : MPI_SUCCESS;
}
PP_ALIAS(MPI_Group_compare);

/* Checks that ranks[0..k) are distinct ranks of a group of n; marks them in `seen` (n bytes). */
static int check_ranks(const char *fn, int k, const int *ranks, int n, unsigned char *seen)
{
  if (k < 0 || k > n || (k && !ranks))
    return pp_err(NULL, fn, MPI_ERR_ARG, "%d ranks of a group of %d", k, n);
  for (int i = 0; i < k; i++) {
    if (ranks[i] < 0 || ranks[i] >= n)
      return pp_err(NULL, fn, MPI_ERR_RANK, "ranks[%d] = %d (the group has %d)", i, ranks[i], n);
    if (seen[ranks[i]])
      return pp_err(NULL, fn, MPI_ERR_RANK, "ranks[%d] = %d appears twice", i, ranks[i]);
    seen[ranks[i]] = 1;
  }
  return MPI_SUCCESS;
}

/* incl (the listed ranks in list order) or excl (the others in group order) */
static int incl_excl(const char *fn, MPI_Group group, int k, const int *ranks, bool incl,
                     MPI_Group *out)
{
  const int *w;
  int n, e;
  if ((e = group_arg(fn, group, &w, &n)))
    return e;
  unsigned char *seen = calloc((size_t)n + 1, 1);
  int *nw = malloc(sizeof(int) * ((size_t)n + 1));
  if (!seen || !nw) {
    e = pp_err(NULL, fn, MPI_ERR_NO_MEM, "a group of %d", n);
    goto out;
  }
  if ((e = check_ranks(fn, k, ranks, n, seen)))
    goto out;
  int m = 0;
  if (incl)
    for (int i = 0; i < k; i++)
      nw[m++] = w[ranks[i]];
  else
    for (int i = 0; i < n; i++)
      if (!seen[i])
        nw[m++] = w[i];
  e = group_out(fn, nw, m, out);
out:
  free(seen);
  free(nw);
  return e;
}

int PMPI_Group_incl(MPI_Group group, int n, const int ranks[], MPI_Group *newgroup)
{
  return incl_excl("MPI_Group_incl", group, n, ranks, true, newgroup);
}
PP_ALIAS(MPI_Group_incl);

int PMPI_Group_excl(MPI_Group group, int n, const int ranks[], MPI_Group *newgroup)
{
  return incl_excl("MPI_Group_excl", group, n, ranks, false, newgroup);
}
PP_ALIAS(MPI_Group_excl);

/* the ranks of n (first, last, stride) triplets, at most `size` of them (each rank once) */
static int expand_ranges(const char *fn, int n, int ranges[][3], int size, int **out, int *k)
{
  if (n < 0 || (n && !ranges))
    return pp_err(NULL, fn, MPI_ERR_ARG, "%d ranges", n);
  int *r = malloc(sizeof(int) * ((size_t)size + 1));
  if (!r)
    return pp_err(NULL, fn, MPI_ERR_NO_MEM, "a group of %d", size);
  *k = 0;
  for (int i = 0; i < n; i++) {
    int first = ranges[i][0], last = ranges[i][1], stride = ranges[i][2];
    if (!stride || first < 0 || first >= size || last < 0 || last >= size ||
        (stride > 0 ? first > last : first < last)) {
      free(r);
      return pp_err(NULL, fn, MPI_ERR_RANK, "range %d: (%d, %d, %d) in a group of %d", i, first,
                    last, stride, size);
    }
    for (long v = first; stride > 0 ? v <= last : v >= last; v += stride) {
      if (*k == size) { /* more ranks than the group has: one appears twice */
        free(r);
        return pp_err(NULL, fn, MPI_ERR_RANK, "range %d names a rank twice", i);
      }
      r[(*k)++] = (int)v;
    }
  }
  *out = r;
  return MPI_SUCCESS;
}

static int range(const char *fn, MPI_Group group, int n, int ranges[][3], bool incl,
                 MPI_Group *out)
{
  const int *w;
  int size, k, *r, e;
  if ((e = group_arg(fn, group, &w, &size)) || (e = expand_ranges(fn, n, ranges, size, &r, &k)))
    return e;
  e = incl_excl(fn, group, k, r, incl, out);
  free(r);
  return e;
}

int PMPI_Group_range_incl(MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup)
{
  return range("MPI_Group_range_incl", group, n, ranges, true, newgroup);
}
PP_ALIAS(MPI_Group_range_incl);

int PMPI_Group_range_excl(MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup)
{
  return range("MPI_Group_range_excl", group, n, ranges, false, newgroup);
}
PP_ALIAS(MPI_Group_range_excl);

enum set_op { SET_UNION, SET_INTERSECTION, SET_DIFFERENCE };

/* MPI 4.0 7.3.2: union = g1's members then those of g2 not in g1; intersection = g1's members
 * also in g2; difference = g1's members not in g2; each in g1's (then g2's) order */
static int set(const char *fn, MPI_Group g1, MPI_Group g2, enum set_op op, MPI_Group *out)
{
  const int *a, *b;
  int na, nb, e;
  if ((e = group_arg(fn, g1, &a, &na)) || (e = group_arg(fn, g2, &b, &nb)))
    return e;
  int *w = malloc(sizeof(int) * ((size_t)na + (size_t)nb + 1));
  if (!w)
    return pp_err(NULL, fn, MPI_ERR_NO_MEM, "groups of %d and %d", na, nb);
  int m = 0;
  for (int i = 0; i < na; i++) {
    bool in_b = index_of(b, nb, a[i]) != MPI_UNDEFINED;
    if (op == SET_UNION || (op == SET_INTERSECTION) == in_b)
      w[m++] = a[i];
  }
  if (op == SET_UNION)
    for (int i = 0; i < nb; i++)
      if (index_of(a, na, b[i]) == MPI_UNDEFINED)
        w[m++] = b[i];
  e = group_out(fn, w, m, out);
  free(w);
  return e;
}

int PMPI_Group_union(MPI_Group g1, MPI_Group g2, MPI_Group *newgroup)
{
  return set("MPI_Group_union", g1, g2, SET_UNION, newgroup);
}
PP_ALIAS(MPI_Group_union);

int PMPI_Group_intersection(MPI_Group g1, MPI_Group g2, MPI_Group *newgroup)
{
  return set("MPI_Group_intersection", g1, g2, SET_INTERSECTION, newgroup);
}
PP_ALIAS(MPI_Group_intersection);

int PMPI_Group_difference(MPI_Group g1, MPI_Group g2, MPI_Group *newgroup)
{
  return set("MPI_Group_difference", g1, g2, SET_DIFFERENCE, newgroup);
}
PP_ALIAS(MPI_Group_difference);
