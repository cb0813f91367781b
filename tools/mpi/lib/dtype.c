/*
 * Derived datatypes: Type_contiguous/vector/hvector/indexed/hindexed/create_indexed_block/
 * create_hindexed_block/create_struct/create_resized/dup, commit/free, size/extent/get_extent/
 * get_true_extent (and their _x), Pack/Unpack/Pack_size, Get_address, Get_elements(_x) and the
 * packing the point-to-point calls use for non-contiguous buffers (p2p.c).
 *
 * A derived type is one of two shapes over its children: a vector (count blocks of blen
 * children, `stride` bytes apart: contiguous, vector and hvector) or a list of blocks (blen[i]
 * children of type[i] at disp[i]: indexed, hindexed, indexed_block, struct), or a resize of one
 * child. Its typemap is walked recursively in typemap order (MPI 4.0 section 5.1): packing copies
 * the runs of bytes in that order, so the packed form is the type signature's byte stream, and a
 * receive of another layout with the same signature unpacks it. Bounds follow MPI's rules (lb the
 * least displacement, ub the greatest end; a struct's ub is padded to the largest alignment of
 * its members, as MPICH does on x86-64); MPI_LB/MPI_UB markers (removed in MPI 3.0) are refused.
 *
 * Bounded: at most PP_DT_MAX derived types alive, nesting depth PP_DT_MAX_DEPTH, a type's size
 * and extent within PP_LINK_MAX_MSG; a hit limit is MPI_ERR_TYPE (or MPI_ERR_INTERN for the
 * table) naming it, never an abort.
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "impl.h"

#define PP_DT_MAX 4096u
#define PP_DT_BASE 0x8c000100u /* MPICH's direct datatype kind; 0x8c0000xx are its pair types */

enum dkind { DK_VEC, DK_LIST, DK_RESIZED };

struct dtype {
  bool used, committed, user; /* user: the program's handle is not freed yet */
  uint8_t kind;               /* enum dkind */
  int combiner;
  int refs;      /* the program's handle + parents + requests in flight */
  int depth;     /* 1 + the deepest child (predefined: 0) */
  MPI_Count count;  /* blocks */
  MPI_Count blen;   /* DK_VEC: children per block */
  MPI_Aint stride;  /* DK_VEC: bytes between blocks */
  MPI_Datatype child; /* DK_VEC, DK_RESIZED */
  MPI_Count *blens; /* DK_LIST */
  MPI_Aint *disps;
  MPI_Datatype *types;
  MPI_Aint lb, extent, true_lb, true_ub;
  size_t size;   /* bytes of data */
  size_t align;  /* the largest alignment of a member */
  bool dense;    /* one run of `size` bytes from true_lb, and extent == size */
};

static struct dtype dts[PP_DT_MAX];
static uint32_t dt_hint; /* round robin: a stale handle stays invalid for long */

static struct dtype *dt_get(MPI_Datatype h)
{
  uint32_t i = (uint32_t)h - PP_DT_BASE;
  if ((uint32_t)h < PP_DT_BASE || i >= PP_DT_MAX || !dts[i].used)
    return NULL;
  return &dts[i];
}

/* bytes of a predefined type (MPI_PACKED too: bytes of a packed stream) */
static size_t prim_size(MPI_Datatype h)
{
  return h == MPI_PACKED ? 1 : pp_dt_size(h);
}

static size_t prim_align(MPI_Datatype h, size_t sz)
{
  switch (h) {
  case MPI_FLOAT_INT: case MPI_2INT: return 4;
  case MPI_DOUBLE_INT: case MPI_LONG_INT: return 8;
  case MPI_SHORT_INT: return 2;
  case MPI_LONG_DOUBLE: case MPI_LONG_DOUBLE_INT: case MPI_C_LONG_DOUBLE_COMPLEX: return 16;
  case MPI_C_FLOAT_COMPLEX: return 4;
  case MPI_C_DOUBLE_COMPLEX: return 8;
  default: return sz > 8 ? 8 : sz;
  }
}

/* What the walks and the bounds need of any type, predefined or derived. */
struct tinfo {
  bool ok, derived, committed, dense;
  size_t size, align;
  int depth;
  MPI_Aint lb, extent, true_lb, true_ub;
};

static struct tinfo info_of(MPI_Datatype h)
{
  size_t sz = prim_size(h);
  if (sz)
    return (struct tinfo){.ok = true, .committed = true, .dense = true, .size = sz,
                          .align = prim_align(h, sz), .extent = (MPI_Aint)sz,
                          .true_ub = (MPI_Aint)sz};
  const struct dtype *d = dt_get(h);
  if (!d || !d->user)
    return (struct tinfo){.ok = false};
  return (struct tinfo){.ok = true, .derived = true, .committed = d->committed, .dense = d->dense,
                        .size = d->size, .align = d->align, .depth = d->depth, .lb = d->lb,
                        .extent = d->extent, .true_lb = d->true_lb, .true_ub = d->true_ub};
}

/* The same for a child of a type: held alive by the parent even after the program freed it. */
static struct tinfo child_info(MPI_Datatype h)
{
  struct dtype *d = dt_get(h);
  if (!d)
    return info_of(h);
  bool u = d->user;
  d->user = true;
  struct tinfo t = info_of(h);
  d->user = u;
  return t;
}

static void dt_unref(MPI_Datatype h);

static void dt_release(struct dtype *d)
{
  if (d->kind == DK_LIST) {
    for (MPI_Count i = 0; i < d->count; i++)
      dt_unref(d->types[i]);
    free(d->blens);
    free(d->disps);
    free(d->types);
  } else {
    dt_unref(d->child);
  }
  memset(d, 0, sizeof(*d));
}

static void dt_unref(MPI_Datatype h)
{
  struct dtype *d = dt_get(h);
  if (d && --d->refs == 0)
    dt_release(d);
}

static void dt_ref(MPI_Datatype h)
{
  struct dtype *d = dt_get(h);
  if (d)
    d->refs++;
}

void pp_type_hold(MPI_Datatype dt)
{
  dt_ref(dt);
}

void pp_type_release(MPI_Datatype dt)
{
  dt_unref(dt);
}

/* ---------------------------------------------------------------- walking the typemap */

/* A walk copies runs of bytes between the typed buffer and a packed stream, at most `left`
 * bytes of the stream; it stops (false) when the stream is used up. Counts whole predefined
 * elements on the way (Get_elements). */
struct walk {
  uintptr_t base;     /* the typed buffer (MPI_BOTTOM: 0, displacements absolute) */
  unsigned char *pk;  /* the packed stream; NULL: count only */
  size_t left;
  bool unpack;
  bool partial; /* it stopped inside a predefined element */
  MPI_Count elems;
};

static bool run(struct walk *w, MPI_Aint off, size_t n, size_t elem)
{
  size_t k = n < w->left ? n : w->left;
  if (w->pk) {
    void *p = (void *)(w->base + (uintptr_t)off);
    if (w->unpack)
      memcpy(p, w->pk, k);
    else
      memcpy(w->pk, p, k);
    w->pk += k;
  }
  w->left -= k;
  w->elems += (MPI_Count)(k / elem);
  w->partial |= k % elem != 0;
  return k == n;
}

static bool walk_type(struct walk *w, MPI_Datatype h, MPI_Aint off, MPI_Count count)
{
  size_t sz = prim_size(h);
  if (sz) {
    MPI_Count before = w->elems;
    bool whole = run(w, off, (size_t)count * sz, sz);
    if (h == MPI_FLOAT_INT || h == MPI_DOUBLE_INT || h == MPI_LONG_INT || h == MPI_SHORT_INT ||
        h == MPI_2INT || h == MPI_LONG_DOUBLE_INT)
      w->elems += w->elems - before; /* a pair is two basic elements */
    return whole;
  }
  const struct dtype *d = dt_get(h);
  if (d->dense && d->kind != DK_LIST && d->depth == 1 && prim_size(d->child))
    return run(w, off + d->true_lb, (size_t)count * d->size, prim_size(d->child));
  for (MPI_Count c = 0; c < count; c++, off += d->extent) {
    switch (d->kind) {
    case DK_VEC:
      for (MPI_Count b = 0; b < d->count; b++)
        if (!walk_type(w, d->child, off + (MPI_Aint)b * d->stride, d->blen))
          return false;
      break;
    case DK_LIST:
      for (MPI_Count b = 0; b < d->count; b++)
        if (!walk_type(w, d->types[b], off + d->disps[b], d->blens[b]))
          return false;
      break;
    case DK_RESIZED:
      if (!walk_type(w, d->child, off, 1))
        return false;
      break;
    }
    if (!w->left && c + 1 < count && d->size)
      return false;
  }
  return true;
}

size_t pp_type_pack(const void *buf, int count, MPI_Datatype dt, void *out, size_t max)
{
  struct walk w = {.base = (uintptr_t)buf, .pk = out, .left = max};
  walk_type(&w, dt, 0, count);
  return max - w.left;
}

size_t pp_type_unpack(const void *in, size_t len, void *buf, int count, MPI_Datatype dt)
{
  struct walk w = {.base = (uintptr_t)buf, .pk = (unsigned char *)in, .left = len, .unpack = true};
  walk_type(&w, dt, 0, count);
  return len - w.left;
}

MPI_Count pp_type_elements(MPI_Datatype dt, size_t bytes)
{
  struct tinfo t = info_of(dt);
  if (!t.ok || !t.size)
    return bytes ? MPI_UNDEFINED : 0;
  /* whole copies of the type, then the elements of the partial one */
  size_t whole = bytes / t.size;
  struct walk w = {.left = t.size};
  walk_type(&w, dt, 0, 1);
  MPI_Count per = w.elems;
  w = (struct walk){.left = bytes % t.size};
  walk_type(&w, dt, 0, 1);
  return w.partial ? MPI_UNDEFINED : (MPI_Count)whole * per + w.elems;
}

/* ---------------------------------------------------------------- what p2p.c asks */

/* The one predefined type of a type map (reductions of derived types), MPI_DATATYPE_NULL when it
 * has several (or none: an empty list). Bounded by the nesting depth. */
MPI_Datatype pp_type_base(MPI_Datatype dt)
{
  if (prim_size(dt))
    return dt == MPI_PACKED ? MPI_DATATYPE_NULL : dt;
  const struct dtype *d = dt_get(dt);
  if (!d)
    return MPI_DATATYPE_NULL;
  if (d->kind != DK_LIST)
    return pp_type_base(d->child);
  MPI_Datatype base = MPI_DATATYPE_NULL;
  for (MPI_Count i = 0; i < d->count; i++) {
    if (!d->blens[i])
      continue;
    MPI_Datatype b = pp_type_base(d->types[i]);
    if (b == MPI_DATATYPE_NULL || (base != MPI_DATATYPE_NULL && b != base))
      return MPI_DATATYPE_NULL;
    base = b;
  }
  return base;
}

int pp_type_check(const struct pp_comm *c, const char *fn, MPI_Datatype dt, int count,
                  struct pp_tbuf *out)
{
  struct tinfo t = info_of(dt);
  if (!t.ok)
    return pp_err(c, fn, MPI_ERR_TYPE, "datatype 0x%x is neither predefined nor a derived type "
                                       "the program created and did not free", dt);
  if (!t.committed)
    return pp_err(c, fn, MPI_ERR_TYPE, "datatype 0x%x is not committed (MPI_Type_commit)", dt);
  if (count < 0)
    return pp_err(c, fn, MPI_ERR_COUNT, "count %d", count);
  if (t.size && (size_t)count > PP_LINK_MAX_MSG / t.size)
    return pp_err(c, fn, MPI_ERR_COUNT, "%d x %zu bytes: more than the %u a message may have",
                  count, t.size, PP_LINK_MAX_MSG);
  out->bytes = (size_t)count * t.size;
  out->dense = t.dense;
  out->derived = t.derived;
  out->off = t.true_lb;
  return MPI_SUCCESS;
}

/* ---------------------------------------------------------------- constructors */

static int dt_fail(const char *fn, int cls, const char *what, MPI_Datatype h)
{
  return pp_err(NULL, fn, cls, "%s (datatype 0x%x)", what, h);
}

/* A new type, its children referenced; computes the bounds. `blens`, `disps`, `types` are taken
 * (DK_LIST). */
static int dt_make(const char *fn, struct dtype *proto, MPI_Datatype *out)
{
  uint32_t i = PP_DT_MAX;
  for (uint32_t k = 0; k < PP_DT_MAX && i == PP_DT_MAX; k++)
    if (!dts[(dt_hint + k) % PP_DT_MAX].used)
      i = (dt_hint + k) % PP_DT_MAX;
  if (i == PP_DT_MAX) {
    free(proto->blens), free(proto->disps), free(proto->types);
    return pp_err(NULL, fn, MPI_ERR_INTERN, "more than %u derived datatypes alive (free some "
                                            "with MPI_Type_free)", PP_DT_MAX);
  }
  struct dtype d = *proto;
  int nkids = d.kind == DK_LIST ? (int)d.count : 1;
  bool any = false;
  MPI_Aint lb = 0, ub = 0, tlb = 0, tub = 0;
  d.size = 0;
  d.align = 1;
  d.depth = 1;
  for (int k = 0; k < nkids; k++) {
    MPI_Datatype ch = d.kind == DK_LIST ? d.types[k] : d.child;
    struct tinfo t = child_info(ch);
    if (!t.ok || ch == MPI_LB || ch == MPI_UB) {
      free(d.blens), free(d.disps), free(d.types);
      return dt_fail(fn, MPI_ERR_TYPE, ch == MPI_LB || ch == MPI_UB
                                           ? "MPI_LB and MPI_UB were removed in MPI 3.0 "
                                             "(MPI_Type_create_resized sets the bounds)"
                                           : "an old type that is no datatype", ch);
    }
    if (t.depth + 1 > PP_DT_MAX_DEPTH) {
      free(d.blens), free(d.disps), free(d.types);
      return dt_fail(fn, MPI_ERR_TYPE, "datatypes nested deeper than PP_DT_MAX_DEPTH (16)", ch);
    }
    d.depth = t.depth + 1 > d.depth ? t.depth + 1 : d.depth;
    d.align = t.align > d.align ? t.align : d.align;
    MPI_Count nb = d.kind == DK_VEC ? d.count : 1, bl = d.kind == DK_VEC ? d.blen
                                                      : d.kind == DK_LIST ? d.blens[k] : 1;
    for (MPI_Count b = 0; b < nb && bl > 0; b++) {
      MPI_Aint disp = d.kind == DK_VEC ? (MPI_Aint)b * d.stride
                      : d.kind == DK_LIST ? d.disps[k] : 0;
      MPI_Aint span = (MPI_Aint)(bl - 1) * t.extent;
      MPI_Aint lo = disp + (span < 0 ? span : 0), hi = disp + (span > 0 ? span : 0);
      MPI_Aint l = lo + t.lb, u = hi + t.lb + t.extent, tl = lo + t.true_lb, tu = hi + t.true_ub;
      if (!any || l < lb) lb = l;
      if (!any || u > ub) ub = u;
      if (!any || tl < tlb) tlb = tl;
      if (!any || tu > tub) tub = tu;
      any = true;
      if (d.kind != DK_VEC)
        break;
      if (nb > 2 && b == 0) /* a vector's blocks lie between its first and last */
        b = nb - 2;
    }
    double total = (double)d.size + (double)t.size * (double)bl * (double)nb;
    if (total > PP_LINK_MAX_MSG || (double)ub - (double)lb > PP_LINK_MAX_MSG * 4.0) {
      free(d.blens), free(d.disps), free(d.types);
      return dt_fail(fn, MPI_ERR_TYPE, "a datatype larger than a message may be (1 GiB)", ch);
    }
    d.size += t.size * (size_t)bl * (size_t)nb;
  }
  if (d.kind == DK_RESIZED) {
    /* proto carries the new lb and extent; true bounds stay the child's */
    lb = proto->lb;
    ub = proto->lb + proto->extent;
  } else if (d.combiner == MPI_COMBINER_STRUCT && any) {
    MPI_Aint a = (MPI_Aint)d.align, e = ub - lb;
    if (e % a)
      ub += a - e % a;
  }
  d.lb = lb;
  d.extent = ub - lb;
  d.true_lb = tlb;
  d.true_ub = tub;
  /* dense: a count of it is one run of bytes from true_lb (the walk's shortcut, p2p's direct
   * path): a dense child without gaps, its blocks back to back, no gap at the end */
  struct tinfo c0 = child_info(d.kind == DK_LIST ? (d.count ? d.types[0] : MPI_BYTE) : d.child);
  bool one = d.kind == DK_RESIZED || (d.kind == DK_VEC && (d.count <= 1 ||
                                                           d.stride == d.blen * c0.extent)) ||
             (d.kind == DK_LIST && d.count <= 1);
  d.dense = one && c0.dense && c0.extent == (MPI_Aint)c0.size &&
            d.extent == (MPI_Aint)d.size && tub - tlb == (MPI_Aint)d.size;
  d.used = d.user = true;
  d.committed = false;
  d.refs = 1;
  for (int k = 0; k < nkids; k++)
    dt_ref(d.kind == DK_LIST ? d.types[k] : d.child);
  dts[i] = d;
  dt_hint = i + 1;
  *out = (MPI_Datatype)(PP_DT_BASE + i);
  return MPI_SUCCESS;
}

static int vec(const char *fn, int comb, MPI_Count count, MPI_Count blen, MPI_Aint stride,
               bool stride_in_extents, MPI_Datatype old, MPI_Datatype *out)
{
  pp_need_init(fn);
  if (!out)
    return pp_err(NULL, fn, MPI_ERR_ARG, "NULL newtype");
  *out = MPI_DATATYPE_NULL;
  if (count < 0 || blen < 0)
    return pp_err(NULL, fn, MPI_ERR_COUNT, "count %lld, blocklength %lld", (long long)count,
                  (long long)blen);
  struct tinfo t = info_of(old);
  if (!t.ok)
    return dt_fail(fn, MPI_ERR_TYPE, "the old type is no datatype", old);
  struct dtype p = {.kind = DK_VEC, .combiner = comb, .count = count, .blen = blen,
                    .stride = stride_in_extents ? stride * t.extent : stride, .child = old};
  return dt_make(fn, &p, out);
}

int PMPI_Type_contiguous(int count, MPI_Datatype old, MPI_Datatype *out)
{
  return vec("MPI_Type_contiguous", MPI_COMBINER_CONTIGUOUS, 1, count, 0, false, old, out);
}
PP_ALIAS(MPI_Type_contiguous);

int PMPI_Type_vector(int count, int blen, int stride, MPI_Datatype old, MPI_Datatype *out)
{
  return vec("MPI_Type_vector", MPI_COMBINER_VECTOR, count, blen, stride, true, old, out);
}
PP_ALIAS(MPI_Type_vector);

int PMPI_Type_create_hvector(int count, int blen, MPI_Aint stride, MPI_Datatype old,
                             MPI_Datatype *out)
{
  return vec("MPI_Type_create_hvector", MPI_COMBINER_HVECTOR, count, blen, stride, false, old,
             out);
}
PP_ALIAS(MPI_Type_create_hvector);

/* indexed family: blens (NULL: every block `blen`), displacements in extents of old (ints) or
 * bytes (aints), one old type or one per block */
static int list(const char *fn, int comb, int count, const int *blens, int blen,
                const int *idisps, const MPI_Aint *adisps, const MPI_Datatype *types,
                MPI_Datatype old, MPI_Datatype *out)
{
  pp_need_init(fn);
  if (!out)
    return pp_err(NULL, fn, MPI_ERR_ARG, "NULL newtype");
  *out = MPI_DATATYPE_NULL;
  if (count < 0 || blen < 0)
    return pp_err(NULL, fn, MPI_ERR_COUNT, "count %d", count);
  if (count && ((!blens && blen < 0) || (!idisps && !adisps) || (comb == MPI_COMBINER_STRUCT &&
                                                                 !types)))
    return pp_err(NULL, fn, MPI_ERR_ARG, "NULL array with count %d", count);
  struct tinfo t = {0};
  if (!types && !(t = info_of(old)).ok)
    return dt_fail(fn, MPI_ERR_TYPE, "the old type is no datatype", old);
  struct dtype p = {.kind = DK_LIST, .combiner = comb, .count = count};
  size_t n = count ? (size_t)count : 1;
  p.blens = malloc(n * sizeof(*p.blens));
  p.disps = malloc(n * sizeof(*p.disps));
  p.types = malloc(n * sizeof(*p.types));
  if (!p.blens || !p.disps || !p.types) {
    free(p.blens), free(p.disps), free(p.types);
    return pp_err(NULL, fn, MPI_ERR_NO_MEM, "%d blocks", count);
  }
  for (int i = 0; i < count; i++) {
    int bl = blens ? blens[i] : blen;
    if (bl < 0) {
      free(p.blens), free(p.disps), free(p.types);
      return pp_err(NULL, fn, MPI_ERR_COUNT, "block %d: blocklength %d", i, bl);
    }
    p.blens[i] = bl;
    p.types[i] = types ? types[i] : old;
    p.disps[i] = idisps ? (MPI_Aint)idisps[i] * t.extent : adisps[i];
  }
  return dt_make(fn, &p, out);
}

int PMPI_Type_indexed(int count, const int blens[], const int disps[], MPI_Datatype old,
                      MPI_Datatype *out)
{
  return list("MPI_Type_indexed", MPI_COMBINER_INDEXED, count, blens, 0, disps, NULL, NULL, old,
              out);
}
PP_ALIAS(MPI_Type_indexed);

int PMPI_Type_create_hindexed(int count, const int blens[], const MPI_Aint disps[],
                              MPI_Datatype old, MPI_Datatype *out)
{
  return list("MPI_Type_create_hindexed", MPI_COMBINER_HINDEXED, count, blens, 0, NULL, disps,
              NULL, old, out);
}
PP_ALIAS(MPI_Type_create_hindexed);

int PMPI_Type_create_indexed_block(int count, int blen, const int disps[], MPI_Datatype old,
                                   MPI_Datatype *out)
{
  return list("MPI_Type_create_indexed_block", MPI_COMBINER_INDEXED_BLOCK, count, NULL, blen,
              disps, NULL, NULL, old, out);
}
PP_ALIAS(MPI_Type_create_indexed_block);

int PMPI_Type_create_hindexed_block(int count, int blen, const MPI_Aint disps[],
                                    MPI_Datatype old, MPI_Datatype *out)
{
  return list("MPI_Type_create_hindexed_block", MPI_COMBINER_HINDEXED_BLOCK, count, NULL, blen,
              NULL, disps, NULL, old, out);
}
PP_ALIAS(MPI_Type_create_hindexed_block);

int PMPI_Type_create_struct(int count, const int blens[], const MPI_Aint disps[],
                            const MPI_Datatype types[], MPI_Datatype *out)
{
  return list("MPI_Type_create_struct", MPI_COMBINER_STRUCT, count, blens, 0, NULL, disps, types,
              MPI_DATATYPE_NULL, out);
}
PP_ALIAS(MPI_Type_create_struct);

int PMPI_Type_create_resized(MPI_Datatype old, MPI_Aint lb, MPI_Aint extent, MPI_Datatype *out)
{
  const char *fn = "MPI_Type_create_resized";
  pp_need_init(fn);
  if (!out)
    return pp_err(NULL, fn, MPI_ERR_ARG, "NULL newtype");
  *out = MPI_DATATYPE_NULL;
  if (!info_of(old).ok)
    return dt_fail(fn, MPI_ERR_TYPE, "the old type is no datatype", old);
  struct dtype p = {.kind = DK_RESIZED, .combiner = MPI_COMBINER_RESIZED, .count = 1, .blen = 1,
                    .child = old, .lb = lb, .extent = extent};
  return dt_make(fn, &p, out);
}
PP_ALIAS(MPI_Type_create_resized);

int PMPI_Type_dup(MPI_Datatype old, MPI_Datatype *out)
{
  const char *fn = "MPI_Type_dup";
  pp_need_init(fn);
  if (!out)
    return pp_err(NULL, fn, MPI_ERR_ARG, "NULL newtype");
  *out = MPI_DATATYPE_NULL;
  struct tinfo t = info_of(old);
  if (!t.ok)
    return dt_fail(fn, MPI_ERR_TYPE, "the old type is no datatype", old);
  /* a resize to the old bounds: the same typemap, committed as the old one is */
  struct dtype p = {.kind = DK_RESIZED, .combiner = MPI_COMBINER_DUP, .count = 1, .blen = 1,
                    .child = old, .lb = t.lb, .extent = t.extent};
  int e = dt_make(fn, &p, out);
  if (e == MPI_SUCCESS)
    dt_get(*out)->committed = t.committed;
  return e;
}
PP_ALIAS(MPI_Type_dup);

int PMPI_Type_commit(MPI_Datatype *dt)
{
  pp_need_init("MPI_Type_commit");
  struct dtype *d = dt ? dt_get(*dt) : NULL;
  if (!d || !d->user)
    return dt_fail("MPI_Type_commit", MPI_ERR_TYPE, "not a derived datatype of the program",
                   dt ? *dt : MPI_DATATYPE_NULL);
  d->committed = true;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Type_commit);

int PMPI_Type_free(MPI_Datatype *dt)
{
  pp_need_init("MPI_Type_free");
  struct dtype *d = dt ? dt_get(*dt) : NULL;
  if (!d || !d->user)
    return dt_fail("MPI_Type_free", MPI_ERR_TYPE, dt && prim_size(*dt)
                                                      ? "a predefined datatype cannot be freed"
                                                      : "not a derived datatype of the program",
                   dt ? *dt : MPI_DATATYPE_NULL);
  d->user = false;
  dt_unref(*dt); /* types built on it and requests using it keep it until they end */
  *dt = MPI_DATATYPE_NULL;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Type_free);

/* ---------------------------------------------------------------- queries */

static int query(const char *fn, MPI_Datatype dt, struct tinfo *t)
{
  *t = info_of(dt);
  if (!t->ok)
    return dt_fail(fn, MPI_ERR_TYPE, "not a datatype", dt);
  return MPI_SUCCESS;
}

int PMPI_Type_size(MPI_Datatype dt, int *size)
{
  struct tinfo t;
  int e = query("MPI_Type_size", dt, &t);
  if (e)
    return e;
  *size = t.size > INT_MAX ? MPI_UNDEFINED : (int)t.size;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Type_size);

int PMPI_Type_size_x(MPI_Datatype dt, MPI_Count *size)
{
  struct tinfo t;
  int e = query("MPI_Type_size_x", dt, &t);
  if (e)
    return e;
  *size = (MPI_Count)t.size;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Type_size_x);

int PMPI_Type_get_extent(MPI_Datatype dt, MPI_Aint *lb, MPI_Aint *extent)
{
  struct tinfo t;
  int e = query("MPI_Type_get_extent", dt, &t);
  if (e)
    return e;
  *lb = t.lb;
  *extent = t.extent;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Type_get_extent);

int PMPI_Type_get_extent_x(MPI_Datatype dt, MPI_Count *lb, MPI_Count *extent)
{
  struct tinfo t;
  int e = query("MPI_Type_get_extent_x", dt, &t);
  if (e)
    return e;
  *lb = t.lb;
  *extent = t.extent;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Type_get_extent_x);

int PMPI_Type_get_true_extent(MPI_Datatype dt, MPI_Aint *lb, MPI_Aint *extent)
{
  struct tinfo t;
  int e = query("MPI_Type_get_true_extent", dt, &t);
  if (e)
    return e;
  *lb = t.true_lb;
  *extent = t.true_ub - t.true_lb;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Type_get_true_extent);

int PMPI_Type_get_true_extent_x(MPI_Datatype dt, MPI_Count *lb, MPI_Count *extent)
{
  struct tinfo t;
  int e = query("MPI_Type_get_true_extent_x", dt, &t);
  if (e)
    return e;
  *lb = t.true_lb;
  *extent = t.true_ub - t.true_lb;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Type_get_true_extent_x);

int PMPI_Get_address(const void *location, MPI_Aint *address)
{
  *address = (MPI_Aint)(uintptr_t)location;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Get_address);

/* ---------------------------------------------------------------- Pack / Unpack */

int PMPI_Pack_size(int count, MPI_Datatype dt, MPI_Comm comm, int *size)
{
  const char *fn = "MPI_Pack_size";
  pp_need_init(fn);
  struct pp_comm *c = pp_comm_get(comm);
  if (!c)
    return pp_err(NULL, fn, MPI_ERR_COMM, "communicator 0x%x", comm);
  struct tinfo t = info_of(dt);
  if (!t.ok)
    return dt_fail(fn, MPI_ERR_TYPE, "not a datatype", dt);
  if (count < 0)
    return pp_err(c, fn, MPI_ERR_COUNT, "count %d", count);
  if (t.size && (size_t)count > INT_MAX / t.size)
    return pp_err(c, fn, MPI_ERR_COUNT, "%d x %zu bytes do not fit an int", count, t.size);
  *size = count * (int)t.size;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Pack_size);

int PMPI_Pack(const void *inbuf, int incount, MPI_Datatype dt, void *outbuf, int outsize,
              int *position, MPI_Comm comm)
{
  const char *fn = "MPI_Pack";
  pp_need_init(fn);
  struct pp_comm *c = pp_comm_get(comm);
  if (!c)
    return pp_err(NULL, fn, MPI_ERR_COMM, "communicator 0x%x", comm);
  struct pp_tbuf tb;
  int e = pp_type_check(c, fn, dt, incount, &tb);
  if (e)
    return e;
  if (!position || *position < 0 || outsize < 0 || (outsize && !outbuf))
    return pp_err(c, fn, MPI_ERR_ARG, "position %d, outsize %d", position ? *position : -1,
                  outsize);
  if (tb.bytes > (size_t)(outsize - (*position > outsize ? outsize : *position)))
    return pp_err(c, fn, MPI_ERR_TRUNCATE, "%zu bytes to pack at position %d of %d", tb.bytes,
                  *position, outsize);
  *position += (int)pp_type_pack(inbuf, incount, dt, (char *)outbuf + *position, tb.bytes);
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Pack);

int PMPI_Unpack(const void *inbuf, int insize, int *position, void *outbuf, int outcount,
                MPI_Datatype dt, MPI_Comm comm)
{
  const char *fn = "MPI_Unpack";
  pp_need_init(fn);
  struct pp_comm *c = pp_comm_get(comm);
  if (!c)
    return pp_err(NULL, fn, MPI_ERR_COMM, "communicator 0x%x", comm);
  struct pp_tbuf tb;
  int e = pp_type_check(c, fn, dt, outcount, &tb);
  if (e)
    return e;
  if (!position || *position < 0 || insize < 0 || (insize && !inbuf))
    return pp_err(c, fn, MPI_ERR_ARG, "position %d, insize %d", position ? *position : -1,
                  insize);
  if (tb.bytes > (size_t)(insize - (*position > insize ? insize : *position)))
    return pp_err(c, fn, MPI_ERR_TRUNCATE, "%zu bytes to unpack at position %d of %d", tb.bytes,
                  *position, insize);
  *position += (int)pp_type_unpack((const char *)inbuf + *position, tb.bytes, outbuf, outcount,
                                   dt);
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Unpack);
