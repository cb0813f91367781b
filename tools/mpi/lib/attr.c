/*
 * Communicator attributes: Comm_create_keyval/free_keyval, Comm_set_attr/get_attr/delete_attr
 * (and MPI-1's Keyval_create/free, Attr_put/get/delete, the same calls), with the copy callback
 * run by Comm_dup and the delete callback run by Comm_delete_attr, by a Comm_set_attr that
 * replaces a value, by Comm_free and (MPI_COMM_SELF) by MPI_Finalize; MPI_COMM_NULL_COPY_FN,
 * MPI_COMM_DUP_FN (MPICH's MPIR_Dup_fn, exported) and MPI_COMM_NULL_DELETE_FN. The predefined
 * attributes MPI_TAG_UB, MPI_HOST, MPI_IO, MPI_WTIME_IS_GLOBAL, MPI_UNIVERSE_SIZE, MPI_APPNUM
 * and MPI_LASTUSEDCODE on every communicator.
 *
 * Bounded: PP_MAX_KEYVAL keyvals, PP_MAX_ATTR attributes per communicator (MPI_ERR_NO_MEM past
 * either). A freed keyval stays until the last attribute using it is deleted (MPI 4.0 7.7.2).
 */
#include <limits.h>
#include <string.h>

#include "impl.h"

#define PP_MAX_KEYVAL 256u
#define PP_KEYVAL_BASE 0xa4400000u /* MPICH's "direct" communicator keyvals */

struct keyval {
  bool used, freed;
  uint32_t refs; /* attributes set with it */
  MPI_Comm_copy_attr_function *copy;
  MPI_Comm_delete_attr_function *del;
  void *extra;
};

static struct keyval keyvals[PP_MAX_KEYVAL];

/* MPI_COMM_DUP_FN (mpi.h: MPIR_Dup_fn): the copy is the value itself */
__attribute__((visibility("default"))) int MPIR_Dup_fn(MPI_Comm comm, int keyval, void *extra,
                                                       void *in, void *out, int *flag);

int MPIR_Dup_fn(MPI_Comm comm, int keyval, void *extra, void *in, void *out, int *flag)
{
  (void)comm, (void)keyval, (void)extra;
  *(void **)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}

/* ---------------------------------------------------------------- predefined */

bool pp_attr_predefined(const struct pp_comm *c, int keyval, void **val)
{
  (void)c;
  /* MPI_HOST: no host is special; MPI_IO: every rank can do I/O; Wtime is the simulation's
   * clock, the same at every rank: global */
  static int tag_ub = INT_MAX, host = MPI_PROC_NULL, io = MPI_ANY_SOURCE, wtime_global = 1,
             appnum = 0, lastusedcode = MPI_ERR_LASTCODE, universe;
  switch (keyval) {
  case MPI_TAG_UB: *val = &tag_ub; return true;
  case MPI_HOST: *val = &host; return true;
  case MPI_IO: *val = &io; return true;
  case MPI_WTIME_IS_GLOBAL: *val = &wtime_global; return true;
  case MPI_APPNUM: *val = &appnum; return true;
  case MPI_LASTUSEDCODE: *val = &lastusedcode; return true;
  case MPI_UNIVERSE_SIZE:
    universe = (int)pp_st.size;
    *val = &universe;
    return true;
  default:
    return false;
  }
}

/* ---------------------------------------------------------------- keyvals */

static struct keyval *keyval_get(int k)
{
  uint32_t i = (uint32_t)k - PP_KEYVAL_BASE;
  if ((uint32_t)k < PP_KEYVAL_BASE || i >= PP_MAX_KEYVAL || !keyvals[i].used)
    return NULL;
  return &keyvals[i];
}

static void keyval_unref(struct keyval *kv)
{
  if (--kv->refs == 0 && kv->freed)
    *kv = (struct keyval){0};
}

static int create_keyval(const char *fn, MPI_Comm_copy_attr_function *copy,
                         MPI_Comm_delete_attr_function *del, int *keyval, void *extra)
{
  pp_need_init(fn);
  if (!keyval)
    return pp_err(NULL, fn, MPI_ERR_ARG, "keyval is NULL");
  for (uint32_t i = 0; i < PP_MAX_KEYVAL; i++)
    if (!keyvals[i].used) {
      keyvals[i] = (struct keyval){.used = true, .copy = copy, .del = del, .extra = extra};
      *keyval = (int)(PP_KEYVAL_BASE + i);
      return MPI_SUCCESS;
    }
  return pp_err(NULL, fn, MPI_ERR_NO_MEM, "more than %u keyvals (free some with "
                                          "MPI_Comm_free_keyval)", PP_MAX_KEYVAL);
}

int PMPI_Comm_create_keyval(MPI_Comm_copy_attr_function *copy, MPI_Comm_delete_attr_function *del,
                            int *keyval, void *extra)
{
  return create_keyval("MPI_Comm_create_keyval", copy, del, keyval, extra);
}
PP_ALIAS(MPI_Comm_create_keyval);

int PMPI_Keyval_create(MPI_Copy_function *copy, MPI_Delete_function *del, int *keyval,
                       void *extra)
{
  return create_keyval("MPI_Keyval_create", copy, del, keyval, extra);
}
PP_ALIAS(MPI_Keyval_create);

static int free_keyval(const char *fn, int *keyval)
{
  pp_need_init(fn);
  if (!keyval)
    return pp_err(NULL, fn, MPI_ERR_ARG, "keyval is NULL");
  struct keyval *kv = keyval_get(*keyval);
  if (!kv || kv->freed)
    return pp_err(NULL, fn, MPI_ERR_KEYVAL, "keyval 0x%x is not a live keyval of the program",
                  *keyval);
  kv->freed = true;
  if (!kv->refs)
    *kv = (struct keyval){0};
  *keyval = MPI_KEYVAL_INVALID;
  return MPI_SUCCESS;
}

int PMPI_Comm_free_keyval(int *keyval)
{
  return free_keyval("MPI_Comm_free_keyval", keyval);
}
PP_ALIAS(MPI_Comm_free_keyval);

int PMPI_Keyval_free(int *keyval)
{
  return free_keyval("MPI_Keyval_free", keyval);
}
PP_ALIAS(MPI_Keyval_free);

/* ---------------------------------------------------------------- attributes */

static struct pp_attr *attr_find(struct pp_comm *c, int keyval)
{
  for (uint32_t i = 0; i < c->nattr; i++)
    if (c->attr[i].keyval == keyval)
      return &c->attr[i];
  return NULL;
}

/* the delete callback of attribute a of c; then a is gone */
static int attr_drop(struct pp_comm *c, struct pp_attr *a)
{
  struct keyval *kv = keyval_get(a->keyval);
  if (!kv)
    pp_fatal("MPI", MPI_ERR_INTERN, "an attribute of %s has no keyval", c->name);
  int e = kv->del ? kv->del(c->handle, a->keyval, a->val, kv->extra) : MPI_SUCCESS;
  if (e != MPI_SUCCESS)
    return e;
  uint32_t i = (uint32_t)(a - c->attr);
  memmove(&c->attr[i], &c->attr[i + 1], sizeof(c->attr[0]) * (c->nattr - i - 1));
  c->nattr--;
  keyval_unref(kv);
  return MPI_SUCCESS;
}

/* sets without callbacks: a new attribute (the table has room) or a new value */
static int attr_put(struct pp_comm *c, int keyval, void *val)
{
  struct pp_attr *a = attr_find(c, keyval);
  if (a) {
    a->val = val;
    return MPI_SUCCESS;
  }
  if (c->nattr == PP_MAX_ATTR)
    return MPI_ERR_NO_MEM;
  c->attr[c->nattr++] = (struct pp_attr){.keyval = keyval, .val = val};
  keyval_get(keyval)->refs++;
  return MPI_SUCCESS;
}

static int comm_keyval_arg(const char *fn, MPI_Comm comm, int keyval, struct pp_comm **c,
                           struct keyval **kv)
{
  pp_need_init(fn);
  if (!(*c = pp_comm_get(comm)))
    return pp_err(NULL, fn, MPI_ERR_COMM, "communicator 0x%x is not a live communicator", comm);
  void *v;
  if (pp_attr_predefined(*c, keyval, &v))
    return pp_err(*c, fn, MPI_ERR_KEYVAL, "keyval 0x%x is predefined: it cannot be set or "
                                          "deleted", keyval);
  *kv = keyval_get(keyval);
  if (!*kv || (*kv)->freed)
    return pp_err(*c, fn, MPI_ERR_KEYVAL, "keyval 0x%x is not a live keyval", keyval);
  return MPI_SUCCESS;
}

static int set_attr(const char *fn, MPI_Comm comm, int keyval, void *val)
{
  struct pp_comm *c;
  struct keyval *kv;
  int e;
  if ((e = comm_keyval_arg(fn, comm, keyval, &c, &kv)))
    return e;
  struct pp_attr *a = attr_find(c, keyval);
  if (a && kv->del && (e = kv->del(c->handle, keyval, a->val, kv->extra)))
    return pp_err(c, fn, e, "the delete callback of the value replaced failed");
  if ((e = attr_put(c, keyval, val)))
    return pp_err(c, fn, e, "more than %u attributes on %s", PP_MAX_ATTR, c->name);
  return MPI_SUCCESS;
}

int PMPI_Comm_set_attr(MPI_Comm comm, int keyval, void *val)
{
  return set_attr("MPI_Comm_set_attr", comm, keyval, val);
}
PP_ALIAS(MPI_Comm_set_attr);

int PMPI_Attr_put(MPI_Comm comm, int keyval, void *val)
{
  return set_attr("MPI_Attr_put", comm, keyval, val);
}
PP_ALIAS(MPI_Attr_put);

static int get_attr(const char *fn, MPI_Comm comm, int keyval, void *val, int *flag)
{
  pp_need_init(fn);
  struct pp_comm *c = pp_comm_get(comm);
  if (!c)
    return pp_err(NULL, fn, MPI_ERR_COMM, "communicator 0x%x is not a live communicator", comm);
  if (!val || !flag)
    return pp_err(c, fn, MPI_ERR_ARG, "attribute_val or flag is NULL");
  void *v;
  *flag = 0;
  if (pp_attr_predefined(c, keyval, &v)) {
    *(void **)val = v;
    *flag = 1;
    return MPI_SUCCESS;
  }
  struct keyval *kv = keyval_get(keyval);
  if (!kv || kv->freed)
    return pp_err(c, fn, MPI_ERR_KEYVAL, "keyval 0x%x is not a live keyval", keyval);
  struct pp_attr *a = attr_find(c, keyval);
  if (a) {
    *(void **)val = a->val;
    *flag = 1;
  }
  return MPI_SUCCESS;
}

int PMPI_Comm_get_attr(MPI_Comm comm, int keyval, void *val, int *flag)
{
  return get_attr("MPI_Comm_get_attr", comm, keyval, val, flag);
}
PP_ALIAS(MPI_Comm_get_attr);

int PMPI_Attr_get(MPI_Comm comm, int keyval, void *val, int *flag)
{
  return get_attr("MPI_Attr_get", comm, keyval, val, flag);
}
PP_ALIAS(MPI_Attr_get);

static int delete_attr(const char *fn, MPI_Comm comm, int keyval)
{
  struct pp_comm *c;
  struct keyval *kv;
  int e;
  if ((e = comm_keyval_arg(fn, comm, keyval, &c, &kv)))
    return e;
  struct pp_attr *a = attr_find(c, keyval);
  if (!a) /* nothing set: nothing to delete (as MPICH) */
    return MPI_SUCCESS;
  if ((e = attr_drop(c, a)))
    return pp_err(c, fn, e, "the attribute's delete callback failed");
  return MPI_SUCCESS;
}

int PMPI_Comm_delete_attr(MPI_Comm comm, int keyval)
{
  return delete_attr("MPI_Comm_delete_attr", comm, keyval);
}
PP_ALIAS(MPI_Comm_delete_attr);

int PMPI_Attr_delete(MPI_Comm comm, int keyval)
{
  return delete_attr("MPI_Attr_delete", comm, keyval);
}
PP_ALIAS(MPI_Attr_delete);

/* ---------------------------------------------------------------- on dup and free */

int pp_attr_copy(const struct pp_comm *from, struct pp_comm *to)
{
  for (uint32_t i = 0; i < from->nattr; i++) {
    const struct pp_attr *a = &from->attr[i];
    struct keyval *kv = keyval_get(a->keyval);
    if (!kv || !kv->copy) /* MPI_COMM_NULL_COPY_FN: not copied */
      continue;
    void *out = NULL;
    int flag = 0;
    int e = kv->copy(from->handle, a->keyval, kv->extra, a->val, &out, &flag);
    if (e != MPI_SUCCESS)
      return e;
    if (flag && (e = attr_put(to, a->keyval, out)))
      return e;
  }
  return MPI_SUCCESS;
}

int pp_attr_delete_all(struct pp_comm *c)
{
  while (c->nattr) {
    int e = attr_drop(c, &c->attr[c->nattr - 1]);
    if (e != MPI_SUCCESS)
      return e;
  }
  return MPI_SUCCESS;
}
