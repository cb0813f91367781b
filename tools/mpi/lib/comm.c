/*
 * Communicators: MPI_COMM_WORLD, MPI_COMM_SELF and the ones the program makes with Comm_dup,
 * Comm_dup_with_info, Comm_split, Comm_split_type and Comm_create; Comm_free, Comm_compare,
 * Comm_rank/size, Comm_group, Comm_set_name/get_name.
 *
 * A communicator is its members' world ranks and a context id. The id indexes the table and
 * gives the engine's contexts (2 * id for point-to-point, 2 * id + 1 for the library's
 * collectives), so messages of different communicators never match. The members agree on it
 * deterministically the way MPICH does (its context-id mask): each rank contributes the bitmap
 * of the ids it has free, an Allreduce with MPI_BAND over the parent communicator gives the ids
 * free at every member, and all take the lowest. A rank whose table is full contributes nothing
 * free, so every member sees the same exhaustion and returns the same error. Ranks of the parent
 * that do not join (MPI_UNDEFINED colour, not in the group) contribute every id: communicators
 * of disjoint groups may share one, their messages never meet.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "impl.h"

#define MASK_WORDS (PP_MAX_COMM / 32u)

static struct pp_comm comms[PP_MAX_COMM];
static int world_rank_self; /* MPI_COMM_SELF's one member */

static void comm_init_builtin(struct pp_comm *c, MPI_Comm h, uint32_t id, const char *name)
{
  c->handle = h;
  c->ctx = 2 * id;
  c->used = true;
  c->errh = MPI_ERRORS_ARE_FATAL;
  snprintf(c->uname, sizeof(c->uname), "%s", name);
  c->name = c->uname;
}

/* Before MPI_Init the two predefined communicators exist already (their handles are valid
 * arguments for error-handler calls), with rank and size set by pp_comm_start. */
__attribute__((constructor)) static void comm_builtin(void)
{
  comm_init_builtin(&comms[0], MPI_COMM_WORLD, 0, "MPI_COMM_WORLD");
  comm_init_builtin(&comms[1], MPI_COMM_SELF, 1, "MPI_COMM_SELF");
  comms[1].rank = 0;
  comms[1].size = 1;
  comms[1].members = &world_rank_self;
}

/* MPI_Init: WORLD's members are every rank, SELF's the rank itself */
void pp_comm_start(uint32_t rank, uint32_t size)
{
  struct pp_comm *w = &comms[0];
  w->rank = (int)rank;
  w->size = (int)size;
  w->members = malloc(sizeof(int) * size);
  if (!w->members)
    pp_fatal("MPI_Init", MPI_ERR_NO_MEM, "%u ranks", size);
  for (uint32_t i = 0; i < size; i++)
    w->members[i] = (int)i;
  world_rank_self = (int)rank;
}

struct pp_comm *pp_comm_get(MPI_Comm h)
{
  uint32_t id;
  if (h == MPI_COMM_WORLD)
    id = 0;
  else if (h == MPI_COMM_SELF)
    id = 1;
  else if ((uint32_t)h >= PP_COMM_BASE && (uint32_t)h - PP_COMM_BASE < PP_MAX_COMM)
    id = (uint32_t)h - PP_COMM_BASE;
  else
    return NULL;
  struct pp_comm *c = &comms[id];
  return c->used && !c->freed && c->handle == h ? c : NULL;
}

int pp_comm_world(const struct pp_comm *c, int r)
{
  return c->members[r];
}

int pp_comm_rank_of(const struct pp_comm *c, int w)
{
  if (c == &comms[0])
    return w;
  for (int i = 0; i < c->size; i++)
    if (c->members[i] == w)
      return i;
  return MPI_UNDEFINED;
}

static void comm_release(struct pp_comm *c)
{
  pp_errh_ref(c->errh, -1); /* its requests could still call it until now */
  free(c->members);
  memset(c, 0, sizeof(*c));
}

void pp_comm_hold(const struct pp_comm *cc, int delta)
{
  struct pp_comm *c = &comms[cc->ctx / 2];
  if (delta > 0) {
    c->pending++;
    return;
  }
  if (!c->pending)
    pp_fatal("MPI", MPI_ERR_INTERN, "a request ended on %s that had none pending", c->name);
  if (--c->pending == 0 && c->freed)
    comm_release(c);
}

/* ---------------------------------------------------------------- creating */

static int comm_arg(const char *fn, MPI_Comm h, struct pp_comm **c)
{
  pp_need_init(fn);
  *c = pp_comm_get(h);
  if (!*c)
    return pp_err(NULL, fn, MPI_ERR_COMM, "communicator 0x%x is not a live communicator", h);
  return MPI_SUCCESS;
}

/* The context id every member of parent agrees on (see the top of the file): join false for a
 * rank that will not be a member. */
static int agree_id(const char *fn, struct pp_comm *parent, bool join, uint32_t *id)
{
  uint32_t mask[MASK_WORDS] = {0};
  for (uint32_t i = 0; i < PP_MAX_COMM; i++)
    if (!join || !comms[i].used)
      mask[i / 32] |= 1u << (i % 32);
  int e = pp_allreduce(fn, parent, MPI_IN_PLACE, mask, MASK_WORDS, MPI_UINT32_T, MPI_BAND);
  if (e)
    return e;
  for (uint32_t w = 0; w < MASK_WORDS; w++)
    if (mask[w]) {
      *id = w * 32 + (uint32_t)__builtin_ctz(mask[w]);
      return MPI_SUCCESS;
    }
  return pp_err(parent, fn, MPI_ERR_OTHER, "no context id free at every member: at most %u "
                "communicators may be alive at once (MPI_COMM_WORLD and MPI_COMM_SELF "
                "included; free some with MPI_Comm_free)", PP_MAX_COMM);
}

/* Fills table slot id as a communicator of the n world ranks `world` (taken over: the slot
 * frees it); the caller is a member. */
static struct pp_comm *comm_make(uint32_t id, int *world, int n, const struct pp_comm *parent,
                                 const char *how)
{
  struct pp_comm *c = &comms[id];
  if (c->used)
    pp_fatal(how, MPI_ERR_INTERN, "context id %u agreed but in use here", id);
  memset(c, 0, sizeof(*c));
  c->handle = (MPI_Comm)(PP_COMM_BASE + id);
  c->ctx = 2 * id;
  c->used = true;
  c->members = world;
  c->size = n;
  c->rank = pp_comm_rank_of(c, parent->members[parent->rank]);
  c->errh = parent->errh; /* MPI: a new communicator inherits its parent's error handler */
  pp_errh_ref(c->errh, 1);
  snprintf(c->label, sizeof(c->label), "comm 0x%x (%s)", (unsigned)c->handle, how);
  c->name = c->label;
  return c;
}

static int dup(const char *fn, MPI_Comm comm, MPI_Comm *out)
{
  struct pp_comm *p;
  uint32_t id;
  int e;
  if ((e = comm_arg(fn, comm, &p)))
    return e;
  if (!out)
    return pp_err(p, fn, MPI_ERR_ARG, "newcomm is NULL");
  if ((e = agree_id(fn, p, true, &id)))
    return e;
  int *world = malloc(sizeof(int) * (size_t)p->size);
  if (!world)
    return pp_err(p, fn, MPI_ERR_NO_MEM, "%d ranks", p->size);
  memcpy(world, p->members, sizeof(int) * (size_t)p->size);
  struct pp_comm *c = comm_make(id, world, p->size, p, "a dup");
  if ((e = pp_attr_copy(p, c))) {
    int e2 = pp_attr_delete_all(c); /* what was copied already goes again */
    comm_release(c);
    return pp_err(p, fn, e, "an attribute copy callback failed (error %d, then %d deleting)", e,
                  e2);
  }
  *out = c->handle;
  return MPI_SUCCESS;
}

int PMPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
  return dup("MPI_Comm_dup", comm, newcomm);
}
PP_ALIAS(MPI_Comm_dup);

/* Non-blocking in name only: the dup completes before the call returns (its agreement on the
 * context id is a collective every member enters with its own MPI_Comm_idup, in the same order
 * as its other collectives on comm, as MPI asks) and the request is complete already. */
int PMPI_Comm_idup(MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request)
{
  const char *fn = "MPI_Comm_idup";
  if (!request)
    return pp_err(pp_comm_get(comm), fn, MPI_ERR_ARG, "request is NULL");
  int e = dup(fn, comm, newcomm);
  return e ? e : pp_done_request(fn, pp_comm_get(comm), request);
}
PP_ALIAS(MPI_Comm_idup);

int PMPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm)
{
  (void)info; /* hints only: the library takes none */
  return dup("MPI_Comm_dup_with_info", comm, newcomm);
}
PP_ALIAS(MPI_Comm_dup_with_info);

struct split_entry {
  int colour, key, rank;
};

static int by_key(const void *a, const void *b)
{
  const struct split_entry *x = a, *y = b;
  if (x->key != y->key)
    return x->key < y->key ? -1 : 1;
  return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static int split(const char *fn, MPI_Comm comm, int colour, int key, MPI_Comm *out)
{
  struct pp_comm *p;
  int e;
  if ((e = comm_arg(fn, comm, &p)))
    return e;
  if (!out)
    return pp_err(p, fn, MPI_ERR_ARG, "newcomm is NULL");
  if (colour < 0 && colour != MPI_UNDEFINED)
    return pp_err(p, fn, MPI_ERR_ARG, "colour %d (a colour is >= 0 or MPI_UNDEFINED)", colour);
  int n = p->size;
  struct split_entry *all = malloc(sizeof(*all) * (size_t)n);
  if (!all)
    return pp_err(p, fn, MPI_ERR_NO_MEM, "%d ranks", n);
  struct split_entry mine = {.colour = colour, .key = key, .rank = p->rank};
  if ((e = pp_allgather(fn, p, &mine, all, sizeof(mine))))
    goto out;
  uint32_t id;
  if ((e = agree_id(fn, p, colour != MPI_UNDEFINED, &id)))
    goto out;
  *out = MPI_COMM_NULL;
  if (colour == MPI_UNDEFINED)
    goto out;
  int m = 0;
  for (int i = 0; i < n; i++)
    if (all[i].colour == colour)
      all[m++] = all[i];
  qsort(all, (size_t)m, sizeof(*all), by_key); /* key order, ties in the parent's rank order */
  int *world = malloc(sizeof(int) * (size_t)m);
  if (!world) {
    e = pp_err(p, fn, MPI_ERR_NO_MEM, "%d ranks", m);
    goto out;
  }
  for (int i = 0; i < m; i++)
    world[i] = p->members[all[i].rank];
  *out = comm_make(id, world, m, p, "a split")->handle;
out:
  free(all);
  return e;
}

int PMPI_Comm_split(MPI_Comm comm, int colour, int key, MPI_Comm *newcomm)
{
  return split("MPI_Comm_split", comm, colour, key, newcomm);
}
PP_ALIAS(MPI_Comm_split);

int PMPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *newcomm)
{
  (void)info;
  const char *fn = "MPI_Comm_split_type";
  struct pp_comm *p;
  int e;
  if ((e = comm_arg(fn, comm, &p)))
    return e;
  if (type != MPI_UNDEFINED && type != MPI_COMM_TYPE_SHARED)
    return pp_err(p, fn, MPI_ERR_ARG, "split type %d (MPI_COMM_TYPE_SHARED or MPI_UNDEFINED)",
                  type);
  /* every rank is a host of its own (the simulated cluster): shared memory is the rank alone */
  return split(fn, comm, type == MPI_UNDEFINED ? MPI_UNDEFINED : p->members[p->rank], key,
               newcomm);
}
PP_ALIAS(MPI_Comm_split_type);

int PMPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
  const char *fn = "MPI_Comm_create";
  struct pp_comm *p;
  int e, n;
  if ((e = comm_arg(fn, comm, &p)))
    return e;
  const int *g = pp_group_get(group, &n);
  if (!g)
    return pp_err(p, fn, MPI_ERR_GROUP, "group 0x%x is not a live group", group);
  if (!newcomm)
    return pp_err(p, fn, MPI_ERR_ARG, "newcomm is NULL");
  bool member = false;
  for (int i = 0; i < n; i++) {
    if (pp_comm_rank_of(p, g[i]) == MPI_UNDEFINED)
      return pp_err(p, fn, MPI_ERR_GROUP, "the group's rank %d (world rank %d) is not in %s", i,
                    g[i], p->name);
    member |= g[i] == p->members[p->rank];
  }
  uint32_t id;
  if ((e = agree_id(fn, p, member, &id)))
    return e;
  *newcomm = MPI_COMM_NULL;
  if (!member)
    return MPI_SUCCESS;
  int *world = malloc(sizeof(int) * (size_t)n);
  if (!world)
    return pp_err(p, fn, MPI_ERR_NO_MEM, "%d ranks", n);
  memcpy(world, g, sizeof(int) * (size_t)n);
  *newcomm = comm_make(id, world, n, p, "a create")->handle;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Comm_create);

/* ---------------------------------------------------------------- freeing, comparing */

int PMPI_Comm_free(MPI_Comm *comm)
{
  const char *fn = "MPI_Comm_free";
  struct pp_comm *c;
  int e;
  if (!comm)
    return pp_err(NULL, fn, MPI_ERR_ARG, "comm is NULL");
  if ((e = comm_arg(fn, *comm, &c)))
    return e;
  if (c->handle == MPI_COMM_WORLD || c->handle == MPI_COMM_SELF)
    return pp_err(c, fn, MPI_ERR_COMM, "%s is predefined: it cannot be freed", c->name);
  if ((e = pp_attr_delete_all(c)))
    return pp_err(c, fn, e, "an attribute delete callback failed: the communicator stays");
  c->freed = true;
  *comm = MPI_COMM_NULL;
  if (!c->pending) /* else the last request that ends releases its id */
    comm_release(c);
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Comm_free);

static int cmp_int(const void *a, const void *b)
{
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

int pp_members_compare(const int *a, int na, const int *b, int nb, int *err)
{
  *err = MPI_SUCCESS;
  if (na != nb)
    return MPI_UNEQUAL;
  if (!memcmp(a, b, sizeof(int) * (size_t)na))
    return MPI_IDENT;
  int *x = malloc(sizeof(int) * (size_t)na * 2 + 1);
  if (!x) {
    *err = MPI_ERR_NO_MEM;
    return MPI_UNEQUAL;
  }
  memcpy(x, a, sizeof(int) * (size_t)na);
  memcpy(x + na, b, sizeof(int) * (size_t)na);
  qsort(x, (size_t)na, sizeof(int), cmp_int);
  qsort(x + na, (size_t)na, sizeof(int), cmp_int);
  int r = memcmp(x, x + na, sizeof(int) * (size_t)na) ? MPI_UNEQUAL : MPI_SIMILAR;
  free(x);
  return r;
}

int PMPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int *result)
{
  const char *fn = "MPI_Comm_compare";
  struct pp_comm *a, *b;
  int e;
  if ((e = comm_arg(fn, comm1, &a)) || (e = comm_arg(fn, comm2, &b)))
    return e;
  if (!result)
    return pp_err(a, fn, MPI_ERR_ARG, "result is NULL");
  if (a == b) {
    *result = MPI_IDENT;
    return MPI_SUCCESS;
  }
  int r = pp_members_compare(a->members, a->size, b->members, b->size, &e);
  if (e)
    return pp_err(a, fn, e, "comparing %d ranks", a->size);
  *result = r == MPI_IDENT ? MPI_CONGRUENT : r; /* another context: congruent at most */
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Comm_compare);

/* ---------------------------------------------------------------- queries */

int PMPI_Comm_rank(MPI_Comm comm, int *rank)
{
  struct pp_comm *c;
  int e = comm_arg("MPI_Comm_rank", comm, &c);
  if (e)
    return e;
  *rank = c->rank;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Comm_rank);

int PMPI_Comm_size(MPI_Comm comm, int *size)
{
  struct pp_comm *c;
  int e = comm_arg("MPI_Comm_size", comm, &c);
  if (e)
    return e;
  *size = c->size;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Comm_size);

int PMPI_Comm_test_inter(MPI_Comm comm, int *flag)
{
  struct pp_comm *c;
  int e = comm_arg("MPI_Comm_test_inter", comm, &c);
  if (e)
    return e;
  *flag = 0; /* the library makes intra-communicators only */
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Comm_test_inter);

int PMPI_Comm_group(MPI_Comm comm, MPI_Group *group)
{
  struct pp_comm *c;
  int e = comm_arg("MPI_Comm_group", comm, &c);
  if (e)
    return e;
  if (!group)
    return pp_err(c, "MPI_Comm_group", MPI_ERR_ARG, "group is NULL");
  if ((e = pp_group_new(c->members, c->size, group)))
    return pp_err(c, "MPI_Comm_group", e, "every group slot is in use");
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Comm_group);

int PMPI_Comm_set_name(MPI_Comm comm, const char *name)
{
  struct pp_comm *c;
  int e = comm_arg("MPI_Comm_set_name", comm, &c);
  if (e)
    return e;
  if (!name)
    return pp_err(c, "MPI_Comm_set_name", MPI_ERR_ARG, "name is NULL");
  snprintf(c->uname, sizeof(c->uname), "%s", name); /* longer names are cut (MPI allows it) */
  c->name = c->uname[0] ? c->uname : c->label;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Comm_set_name);

int PMPI_Comm_get_name(MPI_Comm comm, char *name, int *resultlen)
{
  struct pp_comm *c;
  int e = comm_arg("MPI_Comm_get_name", comm, &c);
  if (e)
    return e;
  if (!name || !resultlen)
    return pp_err(c, "MPI_Comm_get_name", MPI_ERR_ARG, "name or resultlen is NULL");
  *resultlen = snprintf(name, MPI_MAX_OBJECT_NAME, "%s", c->uname); /* unnamed: "" */
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Comm_get_name);

int pp_comm_finalize(void)
{
  return pp_attr_delete_all(&comms[1]);
}
