/* prepost run --trace, prepost trace dump|stats|export. */
#define _POSIX_C_SOURCE 200809L
#include "tools/trace/trace_cli.h"
#include "tools/import/import.h"

#include <errno.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "tools/cli/buildinfo.h"
#include "tools/cli/cli_util.h"
#include "tools/trace/trace_sim.h"

enum { EXIT_OK = 0, EXIT_ERRORS = 1, EXIT_USAGE = 2 };

/* ---------------------------------------------------------------- compression */

/*
 * What the CLI writes goes through zstd (traces/FORMAT.md, "Compression"): one zstd stream, flushed
 * at every piece the writer hands over (the file header, the HDR chunk, each REC chunk, the END
 * chunk), so that what a run that dies leaves decompresses up to its last whole chunk, and the
 * history of earlier chunks still serves the next one (a frame per chunk compressed 10x worse:
 * each chunk's records look like the last one's). `zstd -d` gives the plain trace; the loader
 * decompresses before it opens. PREPOST_TRACE_ZSTD=0 writes the plain format, =N level N
 * (default 3).
 */
#define ZSTD_LEVEL_DEFAULT 3

struct zout {
  FILE *f;
  ZSTD_CCtx *cctx; /* NULL: plain */
  uint8_t *buf;
  size_t cap;
};

static int zout_init(struct zout *z, FILE *f)
{
  memset(z, 0, sizeof(*z));
  z->f = f;
  int level = ZSTD_LEVEL_DEFAULT;
  const char *env = getenv("PREPOST_TRACE_ZSTD");
  if (env && *env) {
    long l = strtol(env, NULL, 10);
    level = l < ZSTD_minCLevel() ? ZSTD_minCLevel() : l > ZSTD_maxCLevel() ? ZSTD_maxCLevel()
                                                                          : (int)l;
  }
  if (level == 0)
    return 0;
  z->cap = ZSTD_CStreamOutSize();
  z->cctx = ZSTD_createCCtx();
  z->buf = malloc(z->cap);
  if (!z->cctx || !z->buf ||
      ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_compressionLevel, level)) ||
      ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_checksumFlag, 1))) {
    ZSTD_freeCCtx(z->cctx);
    free(z->buf);
    return -1;
  }
  return 0;
}

/* Compresses p[0..n) and flushes (ZSTD_e_flush) or ends the stream (ZSTD_e_end). */
static int zout_put(struct zout *z, const void *p, size_t n, ZSTD_EndDirective mode)
{
  ZSTD_inBuffer in = {p, n, 0};
  for (;;) {
    ZSTD_outBuffer out = {z->buf, z->cap, 0};
    size_t left = ZSTD_compressStream2(z->cctx, &out, &in, mode);
    if (ZSTD_isError(left) || fwrite(z->buf, 1, out.pos, z->f) != out.pos)
      return -1;
    if (left == 0 && in.pos == in.size)
      return 0;
  }
}

static int zout_write(struct zout *z, const void *p, size_t n)
{
  if (!z->cctx)
    return fwrite(p, 1, n, z->f) == n ? 0 : -1;
  return zout_put(z, p, n, ZSTD_e_flush);
}

/* Ends the stream (its checksum) and frees; 0, or -1 when writing failed. */
static int zout_end(struct zout *z)
{
  int rc = z->cctx ? zout_put(z, "", 0, ZSTD_e_end) : 0;
  ZSTD_freeCCtx(z->cctx);
  free(z->buf);
  z->cctx = NULL;
  z->buf = NULL;
  return rc;
}

static bool is_zstd(const uint8_t *p, size_t n)
{
  return n >= 4 && p[0] == 0x28 && p[1] == 0xb5 && p[2] == 0x2f && p[3] == 0xfd;
}

/* The largest plain trace a compressed one may expand to: $PREPOST_TRACE_MAX_BYTES, else half the
 * machine's memory (a crafted stream of a few KB can claim terabytes: a "zstd bomb" must end in
 * an error, not in the OOM killer). */
static size_t zexpand_max(void)
{
  const char *env = getenv("PREPOST_TRACE_MAX_BYTES");
  uint64_t v;
  if (env && *env && pp_cli_parse_u64(env, &v) == 0 && v > 0)
    return v < SIZE_MAX ? (size_t)v : SIZE_MAX;
  long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || psz <= 0)
    return (size_t)1 << 32;
  return (size_t)pages / 2 * (size_t)psz;
}

/* The plain trace of a compressed one. With PP_TRACE_PARTIAL a stream cut short gives what was
 * flushed before the cut (whole chunks, then perhaps part of one: pp_trace_open stops before it);
 * without, it is an error. */
static int zexpand(const uint8_t *in, size_t n, unsigned flags, uint8_t **out, size_t *outn,
                   char *err, size_t errlen)
{
  ZSTD_DCtx *d = ZSTD_createDCtx();
  size_t max = zexpand_max();
  size_t cap = (n < SIZE_MAX / 16 ? n * 16 : n) + (1u << 16);
  if (cap > max)
    cap = max;
  uint8_t *buf = d ? malloc(cap) : NULL;
  int rc = -1;
  if (!buf) {
    snprintf(err, errlen, "out of memory");
    goto done;
  }
  ZSTD_inBuffer ib = {in, n, 0};
  ZSTD_outBuffer ob = {buf, cap, 0};
  size_t ret = 0;
  while (ib.pos < ib.size || ob.pos == ob.size) {
    if (ob.pos == ob.size) {
      if (cap >= max) {
        snprintf(err, errlen, "the compressed trace expands to more than %zu bytes (the limit: "
                 "half this machine's memory; PREPOST_TRACE_MAX_BYTES sets another)", max);
        goto done;
      }
      uint8_t *b = cap < SIZE_MAX / 2 ? realloc(buf, cap * 2 < max ? cap * 2 : max) : NULL;
      if (!b) {
        snprintf(err, errlen, "out of memory");
        goto done;
      }
      buf = b;
      cap = cap * 2 < max ? cap * 2 : max;
      ob.dst = buf;
      ob.size = cap;
    }
    size_t before_in = ib.pos, before_out = ob.pos;
    ret = ZSTD_decompressStream(d, &ob, &ib);
    if (ZSTD_isError(ret)) {
      if ((flags & PP_TRACE_PARTIAL) && ob.pos > 0)
        break;
      snprintf(err, errlen, "offset %zu of the compressed file: corrupt zstd data (%s)", ib.pos,
               ZSTD_getErrorName(ret));
      goto done;
    }
    if (ib.pos == before_in && ob.pos == before_out && ob.pos < ob.size)
      break; /* no progress: the input ends inside a block */
  }
  if (ret != 0 && !(flags & PP_TRACE_PARTIAL)) {
    snprintf(err, errlen, "offset %zu: the compressed trace is cut short there (its zstd "
             "stream does not end; --partial reads it up to its last complete chunk)", n);
    goto done;
  }
  *out = buf;
  *outn = ob.pos;
  buf = NULL;
  rc = 0;
done:
  free(buf);
  ZSTD_freeDCtx(d);
  return rc;
}

/* ---------------------------------------------------------------- recording */

/*
 * The file sink hands each finished chunk to a writer thread (a bounded queue of buffers), so
 * that the kernel's cost of writing the file is paid on the other core, not by the simulation.
 * Record chunks change hands without a copy (the writer's buffer for the queue slot's) and are
 * sealed (CRC) by the writer thread. When the queue is full the simulation waits: memory stays
 * bounded (QDEPTH chunks of 256 KiB).
 */
#define QDEPTH 8

struct pp_cli_trace {
  FILE *f;
  struct zout z; /* what goes to f */
  char path[1024];
  struct pp_trace_writer *w;
  pthread_t thread;
  bool threaded;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct {
    uint8_t *p;
    size_t n, cap;
    bool seal;
  } q[QDEPTH];
  unsigned head, count;
  bool closing, failed;
};

static void *writer_main(void *arg)
{
  struct pp_cli_trace *t = arg;
  pthread_mutex_lock(&t->mu);
  for (;;) {
    while (t->count == 0 && !t->closing)
      pthread_cond_wait(&t->cv, &t->mu);
    if (t->count == 0)
      break;
    unsigned i = t->head;
    pthread_mutex_unlock(&t->mu);
    const uint8_t *c = t->q[i].p;
    size_t n = t->q[i].n;
    if (t->q[i].seal)
      c = pp_trace_seal(t->w, t->q[i].p, &n);
    bool ok = c && zout_write(&t->z, c, n) == 0;
    pthread_mutex_lock(&t->mu);
    t->failed |= !ok;
    t->head = (t->head + 1) % QDEPTH;
    t->count--;
    pthread_cond_broadcast(&t->cv);
  }
  pthread_mutex_unlock(&t->mu);
  return NULL;
}

/* The next free queue slot (waits while the queue is full); -1 once writing failed. */
static int slot_get(struct pp_cli_trace *t, unsigned *i)
{
  pthread_mutex_lock(&t->mu);
  while (t->count == QDEPTH)
    pthread_cond_wait(&t->cv, &t->mu);
  *i = (t->head + t->count) % QDEPTH;
  bool failed = t->failed;
  pthread_mutex_unlock(&t->mu);
  return failed ? -1 : 0;
}

static void slot_put(struct pp_cli_trace *t)
{
  pthread_mutex_lock(&t->mu);
  t->count++;
  pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
}

static int file_sink(void *ctx, const void *buf, size_t len)
{
  struct pp_cli_trace *t = ctx;
  if (!t->threaded)
    return zout_write(&t->z, buf, len);
  unsigned i;
  if (slot_get(t, &i))
    return -1;
  if (t->q[i].cap < len) { /* slot i is ours until it is queued */
    uint8_t *p = realloc(t->q[i].p, len);
    if (!p)
      return -1;
    t->q[i].p = p;
    t->q[i].cap = len;
  }
  memcpy(t->q[i].p, buf, len);
  t->q[i].n = len;
  t->q[i].seal = false;
  slot_put(t);
  return 0;
}

/* Record chunks: the writer's buffer goes into the queue, the slot's buffer to the writer. */
static int swap_sink(void *ctx, uint8_t **buf, size_t len, size_t *cap)
{
  struct pp_cli_trace *t = ctx;
  if (!t->threaded) {
    const uint8_t *c = pp_trace_seal(t->w, *buf, &len);
    return c && zout_write(&t->z, c, len) == 0 ? 0 : -1;
  }
  unsigned i;
  if (slot_get(t, &i))
    return -1;
  if (t->q[i].cap < *cap) {
    uint8_t *p = realloc(t->q[i].p, *cap);
    if (!p)
      return -1;
    t->q[i].p = p;
    t->q[i].cap = *cap;
  }
  uint8_t *mine = t->q[i].p;
  size_t mine_cap = t->q[i].cap;
  t->q[i].p = *buf;
  t->q[i].cap = *cap;
  t->q[i].n = len;
  t->q[i].seal = true;
  *buf = mine;
  *cap = mine_cap;
  slot_put(t);
  return 0;
}

/* Bytes of each received message's head to record. Protocols whose engines never read what a
 * SEND delivered (naive: the stream workload only checks it; the ring protocols: data arrives by
 * WRITE_WITH_IMM and their control words are caught by the snapshots) need none; every other
 * protocol (the p2p eager/rendezvous headers, anything new) gets the default. */
static uint32_t capture_for(const struct pp_engine_cfg *c)
{
  const char *p = pp_protocol_name(c->protocol);
  if (!strcmp(p, "naive") || !strncmp(p, "ring", 4))
    return 0;
  return PP_TRACE_CAPTURE_DEFAULT;
}

struct pp_cli_trace *pp_cli_trace_start(const char *path, const struct pp_sim_config *cfg,
                                        const char *version, bool packets, char *err,
                                        size_t errlen)
{
  return pp_cli_trace_start_keys(path, cfg, version, packets, NULL, 0, err, errlen);
}

struct pp_cli_trace *pp_cli_trace_start_keys(const char *path, const struct pp_sim_config *cfg,
                                             const char *version, bool packets,
                                             const struct pp_cli_trace_key *keys, size_t nkeys,
                                             char *err, size_t errlen)
{
  struct pp_cli_trace *t = calloc(1, sizeof(*t));
  if (!t) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  snprintf(t->path, sizeof(t->path), "%s", path);
  if (!(t->f = fopen(path, "wb"))) {
    snprintf(err, errlen, "cannot write trace '%s': %s", path, strerror(errno));
    free(t);
    return NULL;
  }
  if (zout_init(&t->z, t->f)) {
    snprintf(err, errlen, "cannot write trace '%s': out of memory", path);
    fclose(t->f);
    free(t);
    return NULL;
  }
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->cv, NULL);
  const char *env = getenv("PREPOST_TRACE_CAPTURE");
  struct pp_trace_info info = {
      .version = version,
      .commit = pp_build_commit(),
      .backend = "simgrid",
      .scenario = cfg->name,
      .seed = cfg->seed,
      .nranks = cfg->engine.nranks,
      .capture_bytes = env && *env ? (uint32_t)strtoul(env, NULL, 0) : capture_for(&cfg->engine),
      .snapshot_max = PP_TRACE_SNAPSHOT_DEFAULT,
      .packets = packets ? PP_TRACE_PACKETS_ALL : PP_TRACE_PACKETS_ERRORS,
  };
  enum pp_status s = pp_trace_writer_create(file_sink, t, &info, &t->w);
  if (s == PP_OK)
    s = pp_trace_kv_sim_cfg(t->w, cfg);
  for (size_t i = 0; i < nkeys && s == PP_OK; i++)
    s = keys[i].str ? pp_trace_kv_str(t->w, keys[i].key, keys[i].str)
                    : pp_trace_kv_u64(t->w, keys[i].key, keys[i].u);
  if (s == PP_OK)
    s = pp_trace_begin(t->w);
  if (s == PP_OK)
    t->threaded = pthread_create(&t->thread, NULL, writer_main, t) == 0;
  /* PREPOST_TRACE_ENCODE=writer: records are encoded on the writer thread (less work on the
   * simulation thread, more in all: a gain only where the second core is idle; traces/FORMAT.md) */
  const char *enc = getenv("PREPOST_TRACE_ENCODE");
  bool deferred = t->threaded && enc && !strcmp(enc, "writer");
  if (s == PP_OK)
    s = pp_trace_writer_set_swap(t->w, swap_sink, deferred);
  if (s != PP_OK) {
    snprintf(err, errlen, "cannot start trace '%s': %s", path, pp_status_desc(s));
    pp_trace_writer_destroy(t->w);
    zout_end(&t->z);
    fclose(t->f);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t);
    return NULL;
  }
  pp_sim_set_trace(t->w);
  return t;
}

int pp_cli_trace_text(struct pp_cli_trace *t, uint64_t now, unsigned kind, const char *text,
                      char *err, size_t errlen)
{
  for (const char *p = text; *p;) {
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) : strlen(p);
    enum pp_status s = pp_trace_text(t->w, 0, now, kind, p, n);
    if (s != PP_OK) {
      snprintf(err, errlen, "trace '%s': a line of %zu bytes of text: %s", t->path, n,
               n > PP_TRACE_TEXT_MAX ? "longer than the format's 4096" : pp_status_desc(s));
      return -1;
    }
    p += n + (nl != NULL);
  }
  return 0;
}

int pp_cli_trace_end(struct pp_cli_trace *t, char *err, size_t errlen)
{
  pp_sim_set_trace(NULL);
  enum pp_status s = pp_trace_finish(t->w);
  if (t->threaded) {
    pthread_mutex_lock(&t->mu);
    t->closing = true;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->thread, NULL);
  }
  int rc = 0;
  if (zout_end(&t->z))
    t->failed = true;
  if (s != PP_OK || t->failed) {
    snprintf(err, errlen, "writing trace '%s' failed: %s", t->path,
             pp_status_desc(s != PP_OK ? s : PP_IO));
    rc = -1;
  }
  if (fclose(t->f) != 0 && rc == 0) {
    snprintf(err, errlen, "writing trace '%s' failed: %s", t->path, strerror(errno));
    rc = -1;
  }
  pp_trace_writer_destroy(t->w);
  for (unsigned i = 0; i < QDEPTH; i++)
    free(t->q[i].p);
  pthread_mutex_destroy(&t->mu);
  pthread_cond_destroy(&t->cv);
  free(t);
  return rc;
}

uint32_t pp_cli_trace_capture(const struct pp_engine_cfg *c)
{
  const char *env = getenv("PREPOST_TRACE_CAPTURE");
  return env && *env ? (uint32_t)strtoul(env, NULL, 0) : capture_for(c);
}

/* ---------------------------------------------------------------- merging */

static bool info_key(const char *k)
{
  static const char *const keys[] = {"prepost.version",    "prepost.commit", "trace.backend",
                                     "scenario.name",      "seed",           "nranks",
                                     "trace.capture_bytes", "trace.snapshot_max",
                                     "trace.packets"};
  for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
    if (!strcmp(k, keys[i]))
      return true;
  return false;
}

static uint64_t kv_u64(const struct pp_trace *t, const char *key)
{
  const struct pp_trace_kv *kv = pp_trace_kv_find(t, key);
  return kv && kv->type == PP_TKV_U64 ? kv->u : 0;
}

static const char *kv_str(const struct pp_trace *t, const char *key)
{
  const struct pp_trace_kv *kv = pp_trace_kv_find(t, key);
  return kv && kv->type == PP_TKV_STR ? kv->s : "";
}

/* A writer whose header is the one of `h` (every key, in its order). */
static enum pp_status writer_like(const struct pp_trace *h, pp_trace_sink sink, void *ctx,
                                  struct pp_trace_writer **w)
{
  const struct pp_trace_kv *commit = pp_trace_kv_find(h, "prepost.commit");
  struct pp_trace_info info = {.version = kv_str(h, "prepost.version"),
                               .commit = commit && commit->type == PP_TKV_STR ? commit->s : NULL,
                               .backend = kv_str(h, "trace.backend"),
                               .scenario = kv_str(h, "scenario.name"),
                               .seed = kv_u64(h, "seed"),
                               .nranks = h->nranks,
                               .capture_bytes = (uint32_t)kv_u64(h, "trace.capture_bytes"),
                               .snapshot_max = (uint32_t)kv_u64(h, "trace.snapshot_max"),
                               .packets = pp_trace_packets(h)};
  enum pp_status s = pp_trace_writer_create(sink, ctx, &info, w);
  for (size_t i = 0; s == PP_OK && i < h->nkv; i++) {
    const struct pp_trace_kv *kv = &h->kv[i];
    if (info_key(kv->key))
      continue;
    if (kv->type == PP_TKV_U64)
      s = pp_trace_kv_u64(*w, kv->key, kv->u);
    else if (kv->type == PP_TKV_F64)
      s = pp_trace_kv_f64(*w, kv->key, kv->f);
    else if (kv->type == PP_TKV_STR)
      s = pp_trace_kv_str(*w, kv->key, kv->s);
    else if (kv->type == PP_TKV_BYTES)
      s = pp_trace_kv_bytes(*w, kv->key, kv->b, kv->n);
  }
  if (s == PP_OK)
    s = pp_trace_begin(*w);
  return s;
}

static int zout_sink(void *ctx, const void *buf, size_t len)
{
  return zout_write(ctx, buf, len);
}

int pp_cli_trace_merge(const char *out, const char *const *parts, size_t n, FILE *notes,
                       char *err, size_t errlen)
{
  struct pp_trace_file *f = calloc(n ? n : 1, sizeof(*f));
  const struct pp_trace **tp = calloc(n ? n : 1, sizeof(*tp));
  FILE *o = NULL;
  struct zout z = {0};
  struct pp_trace_writer *w = NULL;
  int rc = -1;
  size_t loaded = 0;
  if (!f || !tp) {
    snprintf(err, errlen, "out of memory");
    goto free_arrays;
  }
  for (; loaded < n; loaded++) {
    if (pp_trace_file_load(parts[loaded], PP_TRACE_PARTIAL, &f[loaded], err, errlen))
      goto free_parts;
    tp[loaded] = &f[loaded].t;
    if (!f[loaded].t.complete && notes)
      fprintf(notes, "prepost: note: %s was cut short: its %zu complete records are merged\n",
              parts[loaded], f[loaded].t.nrecs);
  }
  if (n == 0) {
    snprintf(err, errlen, "no part to merge");
    goto free_parts;
  }
  if (!(o = fopen(out, "wb"))) {
    snprintf(err, errlen, "cannot write trace '%s': %s", out, strerror(errno));
    goto free_parts;
  }
  if (zout_init(&z, o)) {
    snprintf(err, errlen, "writing trace '%s': out of memory", out);
    goto close_out;
  }
  enum pp_status s = writer_like(tp[0], zout_sink, &z, &w);
  if (s != PP_OK) {
    snprintf(err, errlen, "writing trace '%s': %s", out, pp_status_desc(s));
    goto close_out;
  }
  char e2[256];
  if (pp_trace_merge(w, tp, n, e2, sizeof(e2)) != PP_OK) {
    snprintf(err, errlen, "merging into '%s': %s", out, e2);
    goto close_out;
  }
  if ((s = pp_trace_finish(w)) != PP_OK) {
    snprintf(err, errlen, "writing trace '%s': %s", out, pp_status_desc(s));
    goto close_out;
  }
  rc = 0;
close_out:
  if (zout_end(&z) && rc == 0) {
    snprintf(err, errlen, "writing trace '%s' failed", out);
    rc = -1;
  }
  if (fclose(o) != 0 && rc == 0) {
    snprintf(err, errlen, "writing trace '%s': %s", out, strerror(errno));
    rc = -1;
  }
  pp_trace_writer_destroy(w);
free_parts:
  for (size_t i = 0; i < loaded; i++)
    pp_trace_file_free(&f[i]);
free_arrays:
  free(f);
  free(tp);
  return rc;
}

/* ---------------------------------------------------------------- loading */

int pp_trace_file_load(const char *path, unsigned flags, struct pp_trace_file *f, char *err,
                       size_t errlen)
{
  memset(f, 0, sizeof(*f));
  char *text;
  size_t n;
  char e0[128];
  if (pp_read_regular(path, SIZE_MAX, &text, &n, NULL, e0, sizeof e0) != 0) {
    snprintf(err, errlen, "cannot read trace '%s': %s", path, e0);
    return -1;
  }
  uint8_t *buf = (uint8_t *)text;
  char e[512];
  bool packed = is_zstd(buf, n);
  if (packed) {
    uint8_t *plain;
    size_t pn;
    int zr = zexpand(buf, n, flags, &plain, &pn, e, sizeof(e));
    free(buf);
    if (zr) {
      snprintf(err, errlen, "%s: %s", path, e);
      return -1;
    }
    buf = plain;
    n = pn;
  }
  f->data = buf;
  f->size = n;
  if (pp_trace_open(buf, n, flags, &f->t, e, sizeof(e)) != PP_OK) {
    snprintf(err, errlen, "%s: %s%s", path, e,
             packed ? " (an offset in the decompressed trace)" : "");
    free(buf);
    f->data = NULL;
    return -1;
  }
  return 0;
}

void pp_trace_file_free(struct pp_trace_file *f)
{
  pp_trace_close(&f->t);
  free(f->data);
  f->data = NULL;
}

/* ---------------------------------------------------------------- commands */

const char *const pp_trace_usage =
    "usage: prepost trace dump TRACE [--rank R] [--type NAME[,NAME...]] [--from N] [--count N]\n"
    "                             [--header] [--partial]\n"
    "       prepost trace stats TRACE [--partial]\n"
    "       prepost trace merge -o FILE PART...\n"
    "       prepost trace export (--pcap|--perfetto|--svg) TRACE [-o FILE] [--snaplen SIZE]\n"
    "                             [--max-events N] [--window FROM:TO] [--proto] [--time-scale T]\n"
    "                             [--partial]\n"
    "       prepost trace import --pcap CAPTURE [--json] [-o TRACE] [--scenario-out FILE]\n"
    "\n"
    "Traces are written by `prepost run SCENARIO --trace FILE` (format: traces/FORMAT.md).\n"
    "\n"
    "  dump      the header, then one line per record: #index rRANK TIME_NS type fields\n"
    "            --rank R      only rank R's records\n"
    "            --type LIST   only these record types (wc,post_send,pkt_tx,...)\n"
    "            --from N      start at record N;  --count N  print at most N records\n"
    "            --header      the header only\n"
    "  stats     records per type and per rank, bytes per record\n"
    "  merge     one trace of the per-rank files of `run --backend verbs --ranks ...`\n"
    "            (FILE.rankN; the launcher merges its own): header of the first, records by time;\n"
    "            a part cut short is read up to its last complete chunk (a note says so)\n"
    "  export    --pcap      the simulated packets as RoCEv2 (Wireshark/tshark decode them);\n"
    "                        needs a trace recorded with `prepost run --trace F --trace-packets`\n"
    "            --perfetto  Chrome/Perfetto trace JSON (ui.perfetto.dev); with --proto,\n"
    "                        Perfetto's protobuf trace format (a .pftrace: smaller, for big runs)\n"
    "            --svg       a message sequence chart (ranks as lanes, time down; each message\n"
    "                        named as its protocol names it; a PSN only where the trace has it)\n"
    "            -o FILE     output file (default: stdout)\n"
    "            --snaplen S pcap: capture at most S bytes per packet, up to 64KiB - 1 (default:\n"
    "                        the whole packet)\n"
    "            --max-events N  svg: draw at most N messages (default 400); perfetto: at most\n"
    "                        N events (a WR's slice, a counter change, a message with its arrow;\n"
    "                        default: all; the slices begun still end)\n"
    "            --window FROM:TO  perfetto: only what happens from FROM to TO ns (TO empty:\n"
    "                        the end); work requests still pair with completions outside it\n"
    "            --time-scale T  svg: time to scale, T per pixel (e.g. 10ns; default: a row\n"
    "                        per event, the row's time on the left)\n"
    "  import    a RoCE/IB packet capture (pcap, pcapng): per-QP statistics, a diagnosis,\n"
    "            -o TRACE  the capture as a trace for export; --scenario-out FILE  a scenario\n"
    "            that reproduces its RNR pattern (`prepost trace import --help`)\n"
    "  --partial  read a trace cut short (no END chunk) up to its last complete chunk\n"
    "  -h, --help this help (also after a subcommand)\n"
    "\n"
    "Exit codes: 0 success, 2 usage error or unreadable/corrupt trace (the message names the\n"
    "byte offset and what was expected there).\n";

static int usage(const char *fmt, const char *arg)
{
  return pp_cli_usage_error("prepost", pp_trace_usage, fmt, arg);
}

static void print_indented(void *ctx, const char *key, const char *value)
{
  fprintf(ctx, "#   %s = %s\n", key, value);
}

/* Format 1's raw engine.cfg, as the keys format 2 writes (when this build reads it). */
static void print_v1_cfg(FILE *out, const struct pp_trace *t)
{
  struct pp_engine_cfg cfg;
  char note[256];
  memset(&cfg, 0, sizeof cfg);
  if (pp_trace_engine_cfg(t, &cfg, note, sizeof note) != PP_OK || note[0]) {
    fprintf(out, "#   (not readable as keys: %s)\n", note);
    return;
  }
  fprintf(out, "#   (format 1's struct pp_engine_cfg, as format 2's keys:)\n");
  pp_trace_engine_cfg_each(&cfg, print_indented, out);
}

static void print_header(FILE *out, const struct pp_trace *t)
{
  fprintf(out, "# prepost trace, format %u.%u, %zu records, %zu bytes%s\n", t->major, t->minor,
          t->nrecs, t->size, t->complete ? "" : " (partial: no END chunk)");
  for (size_t i = 0; i < t->nkv; i++) {
    const struct pp_trace_kv *kv = &t->kv[i];
    switch (kv->type) {
    case PP_TKV_U64:
      fprintf(out, "# %s = %" PRIu64 "\n", kv->key, kv->u);
      break;
    case PP_TKV_F64:
      fprintf(out, "# %s = %.17g\n", kv->key, kv->f);
      break;
    case PP_TKV_BYTES:
      fprintf(out, "# %s = (%zu bytes)\n", kv->key, kv->n);
      if (!strcmp(kv->key, "engine.cfg"))
        print_v1_cfg(out, t);
      break;
    default:
      if (strchr(kv->s, '\n'))
        fprintf(out, "# %s = (%zu bytes of text)\n", kv->key, strlen(kv->s));
      else
        fprintf(out, "# %s = %s\n", kv->key, kv->s);
    }
  }
}

static int type_from_name(const char *name)
{
  for (unsigned v = 0; v < 256; v++)
    if (pp_trace_rec_class(v) != PP_TCLASS_UNKNOWN && !strcmp(pp_trace_rec_name(v), name))
      return (int)v;
  return -1;
}

static int cmd_dump(int argc, char **argv, bool stats)
{
  const char *path = NULL, *types = NULL;
  uint64_t rank = UINT64_MAX, from = 0, count = UINT64_MAX;
  bool header_only = false;
  unsigned flags = 0;
  enum { D_PARTIAL = 256, D_HEADER, D_RANK, D_TYPE, D_FROM, D_COUNT };
  static const struct option dump_opts[] = {{"partial", no_argument, NULL, D_PARTIAL},
                                            {"header", no_argument, NULL, D_HEADER},
                                            {"rank", required_argument, NULL, D_RANK},
                                            {"type", required_argument, NULL, D_TYPE},
                                            {"from", required_argument, NULL, D_FROM},
                                            {"count", required_argument, NULL, D_COUNT},
                                            {"help", no_argument, NULL, 'h'},
                                            {0, 0, 0, 0}},
                             stats_opts[] = {{"partial", no_argument, NULL, D_PARTIAL},
                                             {"help", no_argument, NULL, 'h'},
                                             {0, 0, 0, 0}};
  struct pp_cli_opts g = {.argc = argc, .argv = argv, .shorts = "h",
                          .longs = stats ? stats_opts : dump_opts, .who = "prepost",
                          .usage = pp_trace_usage};
  int c;
  while ((c = pp_cli_next(&g)) != PP_CLI_END) {
    switch (c) {
    case PP_CLI_BAD:
      return EXIT_USAGE;
    case 'h':
      fputs(pp_trace_usage, stdout);
      return EXIT_OK;
    case D_PARTIAL:
      flags |= PP_TRACE_PARTIAL;
      break;
    case D_HEADER:
      header_only = true;
      break;
    case D_TYPE:
      types = g.arg;
      break;
    default:
      if (pp_cli_opt_uint(&g, 0, UINT64_MAX, c == D_RANK ? &rank : c == D_FROM ? &from : &count))
        return EXIT_USAGE;
    }
  }
  if (g.rest >= argc)
    return usage("%s", "missing TRACE");
  if (g.rest + 1 < argc)
    return usage("one trace at a time (extra argument '%s')", argv[g.rest + 1]);
  path = argv[g.rest];
  bool want[256] = {false};
  if (types) {
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", types);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
      int v = type_from_name(tok);
      if (v < 0)
        return usage("unknown record type '%s'", tok);
      want[v] = true;
    }
  }
  struct pp_trace_file f;
  char err[1024];
  if (pp_trace_file_load(path, flags, &f, err, sizeof(err))) {
    fprintf(stderr, "prepost: %s\n", err);
    return EXIT_USAGE;
  }
  const struct pp_trace *t = &f.t;
  if (stats) {
    uint64_t per_type[256] = {0}, bytes_type[256] = {0};
    for (size_t i = 0; i < t->nrecs; i++) {
      size_t end = i + 1 < t->nrecs ? t->idx[i + 1].offset : t->size;
      per_type[t->idx[i].type]++;
      if (end > t->idx[i].offset && end - t->idx[i].offset < (1u << 21))
        bytes_type[t->idx[i].type] += end - t->idx[i].offset;
    }
    printf("trace %s: format %u.%u, %zu bytes, %zu records, %u ranks%s\n", path, t->major,
           t->minor, t->size, t->nrecs, t->nranks, t->complete ? "" : " (partial)");
    printf("%-16s %12s %10s\n", "type", "records", "bytes/rec");
    for (unsigned v = 0; v < 256; v++)
      if (per_type[v])
        printf("%-16s %12" PRIu64 " %10.1f\n", pp_trace_rec_name(v), per_type[v],
               (double)bytes_type[v] / (double)per_type[v]);
    printf("%-6s %12s %14s\n", "rank", "records", "last_ns");
    for (uint32_t r = 0; r < t->nranks; r++) {
      size_t n = t->rank_nrecs[r];
      printf("%-6u %12zu %14" PRIu64 "\n", r, n, n ? t->idx[t->rank_recs[r][n - 1]].ts : 0);
    }
    pp_trace_file_free(&f);
    return EXIT_OK;
  }
  print_header(stdout, t);
  if (!header_only) {
    char line[2048];
    uint64_t printed = 0;
    for (size_t i = from; i < t->nrecs && printed < count; i++) {
      if (rank != UINT64_MAX && t->idx[i].rank != rank)
        continue;
      if (types && !want[t->idx[i].type])
        continue;
      struct pp_trace_rec r;
      if (pp_trace_get(t, i, &r) != PP_OK) {
        fprintf(stderr, "prepost: %s: record %zu does not decode\n", path, i);
        pp_trace_file_free(&f);
        return EXIT_USAGE;
      }
      pp_trace_rec_format(&r, line, sizeof(line));
      puts(line);
      printed++;
    }
  }
  pp_trace_file_free(&f);
  return EXIT_OK;
}

/* A capture of `bytes` fits on the file system of out_path (stdout: not known, not checked). */
static int room_for(const char *out_path, uint64_t bytes, uint64_t frames, char *err,
                    size_t errlen)
{
  if (!out_path || !strcmp(out_path, "-"))
    return 0;
  char dir[4096];
  const char *slash = strrchr(out_path, '/');
  snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - out_path) + 1 : 1,
           slash ? out_path : ".");
  struct statvfs fs;
  if (statvfs(dir, &fs) != 0)
    return 0; /* fopen will say what is wrong with the path */
  uint64_t avail = (uint64_t)fs.f_bavail * fs.f_frsize;
  if (bytes <= avail)
    return 0;
  snprintf(err, errlen,
           "the capture would take up to %.1f MiB (%" PRIu64 " frames), more than the %.1f MiB "
           "free where '%s' goes: --snaplen N captures at most N bytes of each frame",
           (double)bytes / (1 << 20), frames, (double)avail / (1 << 20), out_path);
  return -1;
}

static int cmd_export(int argc, char **argv)
{
  const char *path = NULL, *out_path = NULL, *kind = NULL;
  struct pp_export_opts o = {.snaplen = 0, .max_events = 0};
  bool max_given = false;
  unsigned flags = 0;
  enum { E_PCAP = 256, E_PERFETTO, E_SVG, E_PARTIAL, E_SNAPLEN, E_MAX_EVENTS, E_PROTO, E_WINDOW,
         E_TIME_SCALE };
  static const struct option opts[] = {{"pcap", no_argument, NULL, E_PCAP},
                                       {"perfetto", no_argument, NULL, E_PERFETTO},
                                       {"svg", no_argument, NULL, E_SVG},
                                       {"partial", no_argument, NULL, E_PARTIAL},
                                       {"snaplen", required_argument, NULL, E_SNAPLEN},
                                       {"max-events", required_argument, NULL, E_MAX_EVENTS},
                                       {"proto", no_argument, NULL, E_PROTO},
                                       {"window", required_argument, NULL, E_WINDOW},
                                       {"time-scale", required_argument, NULL, E_TIME_SCALE},
                                       {"help", no_argument, NULL, 'h'},
                                       {0, 0, 0, 0}};
  struct pp_cli_opts g = {.argc = argc, .argv = argv, .shorts = "ho:", .longs = opts,
                          .who = "prepost", .usage = pp_trace_usage};
  int c;
  uint64_t n;
  while ((c = pp_cli_next(&g)) != PP_CLI_END) {
    switch (c) {
    case PP_CLI_BAD:
      return EXIT_USAGE;
    case 'h':
      fputs(pp_trace_usage, stdout);
      return EXIT_OK;
    case E_PCAP:
    case E_PERFETTO:
    case E_SVG:
      if (kind)
        return usage("one export at a time (%s)", g.name);
      kind = c == E_PCAP ? "pcap" : c == E_PERFETTO ? "perfetto" : "svg";
      break;
    case E_PARTIAL:
      flags |= PP_TRACE_PARTIAL;
      break;
    case 'o':
      out_path = g.arg;
      break;
    case E_SNAPLEN:
      if (pp_cli_opt_size(&g, 0, 65535, &n))
        return EXIT_USAGE;
      o.snaplen = (uint32_t)n;
      break;
    case E_PROTO:
      o.proto = true;
      break;
    case E_TIME_SCALE:
      if (pp_cli_opt_duration(&g, 1, UINT64_C(1000000000000), &o.svg_ns_per_px))
        return EXIT_USAGE;
      break;
    case E_WINDOW: {
      const char *v = g.arg, *colon = strchr(v, ':');
      char from[32];
      if (!colon || (size_t)(colon - v) >= sizeof(from))
        return usage("--window takes FROM:TO in ns (TO may be empty: the end), got '%s'", v);
      memcpy(from, v, (size_t)(colon - v));
      from[colon - v] = '\0';
      if (pp_cli_parse_u64(from, &o.from_ns) ||
          (colon[1] && (pp_cli_parse_u64(colon + 1, &o.to_ns) || o.to_ns <= o.from_ns)))
        return usage("--window takes FROM:TO in ns with FROM < TO, got '%s'", v);
      break;
    }
    default:
      if (pp_cli_opt_uint(&g, 0, UINT64_MAX, &n))
        return EXIT_USAGE;
      o.max_events = n;
      max_given = true;
    }
  }
  if (g.rest + 1 < argc)
    return usage("one trace at a time (extra argument '%s')", argv[g.rest + 1]);
  if (g.rest < argc)
    path = argv[g.rest];
  if (!kind)
    return usage("%s", "export needs --pcap, --perfetto or --svg");
  if (!path)
    return usage("%s", "missing TRACE");
  if (!max_given && !strcmp(kind, "svg"))
    o.max_events = 400;
  if ((o.from_ns || o.to_ns || o.proto) && strcmp(kind, "perfetto"))
    return usage("%s", "--window and --proto go with --perfetto");
  if (o.svg_ns_per_px && strcmp(kind, "svg"))
    return usage("%s", "--time-scale goes with --svg");
  struct pp_trace_file f;
  char err[1024];
  if (pp_trace_file_load(path, flags, &f, err, sizeof(err))) {
    fprintf(stderr, "prepost: %s\n", err);
    return EXIT_USAGE;
  }
  uint64_t frames, bytes;
  if (!strcmp(kind, "pcap") && (pp_export_pcap_plan(&f.t, &o, &frames, &bytes, err, sizeof(err)) ||
                                room_for(out_path, bytes, frames, err, sizeof(err)))) {
    fprintf(stderr, "prepost: %s: %s\n", path, err); /* before -o FILE exists: no empty capture */
    pp_trace_file_free(&f);
    return EXIT_USAGE;
  }
  FILE *out = stdout;
  if (out_path && strcmp(out_path, "-") && !(out = fopen(out_path, "wb"))) {
    fprintf(stderr, "prepost: cannot write '%s': %s\n", out_path, strerror(errno));
    pp_trace_file_free(&f);
    return EXIT_USAGE;
  }
  int rc = !strcmp(kind, "pcap")       ? pp_export_pcap(&f.t, out, &o, err, sizeof(err))
           : !strcmp(kind, "perfetto") ? pp_export_perfetto(&f.t, out, &o, err, sizeof(err))
                                       : pp_export_svg(&f.t, out, &o, err, sizeof(err));
  if (out != stdout && fclose(out) != 0 && rc == 0) {
    snprintf(err, sizeof(err), "writing '%s' failed: %s", out_path, strerror(errno));
    rc = -1;
  }
  pp_trace_file_free(&f);
  if (rc) {
    fprintf(stderr, "prepost: %s: %s\n", path, err);
    return EXIT_USAGE;
  }
  return EXIT_OK;
}

static int cmd_merge(int argc, char **argv)
{
  const char *out = NULL;
  static const struct option opts[] = {{"help", no_argument, NULL, 'h'}, {0, 0, 0, 0}};
  struct pp_cli_opts g = {.argc = argc, .argv = argv, .shorts = "ho:", .longs = opts,
                          .who = "prepost", .usage = pp_trace_usage};
  int c;
  while ((c = pp_cli_next(&g)) != PP_CLI_END) {
    if (c == PP_CLI_BAD)
      return EXIT_USAGE;
    if (c == 'h') {
      fputs(pp_trace_usage, stdout);
      return EXIT_OK;
    }
    out = g.arg;
  }
  const char **parts = (const char **)argv + g.rest;
  size_t n = (size_t)(argc - g.rest);
  if (!out || n == 0)
    return usage("%s", "merge needs -o FILE and at least one PART");
  char err[1024];
  int rc = pp_cli_trace_merge(out, parts, n, stderr, err, sizeof(err));
  if (rc) {
    fprintf(stderr, "prepost: %s\n", err);
    return EXIT_USAGE;
  }
  return EXIT_OK;
}

int pp_cli_trace(int argc, char **argv)
{
  if (argc < 2)
    return usage("%s", "trace needs a subcommand: dump, stats, merge, export or import");
  const char *sub = argv[1];
  if (!strcmp(sub, "-h") || !strcmp(sub, "--help")) {
    fputs(pp_trace_usage, stdout);
    return EXIT_OK;
  }
  /* each subcommand gets its own name as argv[0] */
  if (!strcmp(sub, "dump"))
    return cmd_dump(argc - 1, argv + 1, false);
  if (!strcmp(sub, "stats"))
    return cmd_dump(argc - 1, argv + 1, true);
  if (!strcmp(sub, "export"))
    return cmd_export(argc - 1, argv + 1);
  if (!strcmp(sub, "merge"))
    return cmd_merge(argc - 1, argv + 1);
  if (!strcmp(sub, "import"))
    return pp_cli_trace_import(argc - 1, argv + 1, PREPOST_VERSION);
  return usage("unknown trace subcommand '%s'", sub);
}
