#include "perfetto_out.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli/cli_util.h"

/* ---------------------------------------------------------------- protobuf, by hand */

#define PB_MAX 2048 /* one TracePacket: names are short, an event has a few arguments */

struct pbuf {
  uint8_t b[PB_MAX];
  size_t n;
  bool over;
};

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2 };

static void pb_raw(struct pbuf *p, const void *d, size_t n)
{
  if (p->over || n > PB_MAX - p->n) {
    p->over = true;
    return;
  }
  memcpy(p->b + p->n, d, n);
  p->n += n;
}

static void pb_varint(struct pbuf *p, uint64_t v)
{
  uint8_t t[10];
  size_t k = 0;
  do {
    t[k] = (uint8_t)(v & 0x7f);
    v >>= 7;
    t[k++] |= v ? 0x80 : 0;
  } while (v);
  pb_raw(p, t, k);
}

static void pb_key(struct pbuf *p, unsigned field, unsigned wt)
{
  pb_varint(p, (uint64_t)field << 3 | wt);
}

static void pb_uint(struct pbuf *p, unsigned field, uint64_t v)
{
  pb_key(p, field, WT_VARINT);
  pb_varint(p, v);
}

static void pb_fixed64(struct pbuf *p, unsigned field, uint64_t v)
{
  uint8_t t[8];
  for (int i = 0; i < 8; i++)
    t[i] = (uint8_t)(v >> (8 * i));
  pb_key(p, field, WT_I64);
  pb_raw(p, t, 8);
}

static void pb_bytes(struct pbuf *p, unsigned field, const void *d, size_t n)
{
  pb_key(p, field, WT_LEN);
  pb_varint(p, n);
  pb_raw(p, d, n);
}

static void pb_str(struct pbuf *p, unsigned field, const char *s)
{
  pb_bytes(p, field, s, strlen(s));
}

static void pb_msg(struct pbuf *p, unsigned field, const struct pbuf *m)
{
  if (m->over)
    p->over = true;
  pb_bytes(p, field, m->b, m->n);
}

/* Field numbers of protos/perfetto/trace (trace.proto, trace_packet.proto,
 * track_event/track_descriptor.proto, track_event.proto, debug_annotation.proto). */
enum {
  TRACE_PACKET = 1,
  TP_TIMESTAMP = 8, TP_SEQ_ID = 10, TP_TRACK_EVENT = 11, TP_SEQ_FLAGS = 13,
  TP_TRACK_DESCRIPTOR = 60,
  TD_UUID = 1, TD_NAME = 2, TD_PROCESS = 3, TD_THREAD = 4, TD_PARENT = 5, TD_COUNTER = 8,
  PD_PID = 1, PD_NAME = 6,
  THD_PID = 1, THD_TID = 2, THD_NAME = 5,
  TE_DEBUG = 4, TE_TYPE = 9, TE_TRACK = 11, TE_CATEGORIES = 22, TE_NAME = 23,
  TE_COUNTER_VALUE = 30, TE_FLOW_IDS = 47, TE_TERMINATING_FLOWS = 48,
  DA_UINT = 3, DA_STRING = 6, DA_NAME = 10,
  TYPE_SLICE_BEGIN = 1, TYPE_SLICE_END = 2, TYPE_INSTANT = 3, TYPE_COUNTER = 4,
  SEQ_INCREMENTAL_STATE_CLEARED = 1,
};

/* ---------------------------------------------------------------- state */

/* A set of 64-bit keys (track descriptors written), and per lane set its busy lanes. */
struct kv {
  uint64_t key; /* 0: empty */
  uint8_t *busy; /* lane sets: one flag per lane */
  uint32_t nlanes;
};

struct pf_out {
  FILE *o;
  bool proto, first, oom;
  const char *sep;
  struct kv *t;
  size_t cap, n;
};

static uint64_t mix(uint64_t x)
{
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static uint64_t uuid(uint64_t kind, uint64_t a, uint64_t b)
{
  uint64_t u = mix(mix(kind) ^ a) ^ mix(b);
  return u ? u : 1;
}

static uint64_t str_hash(const char *s)
{
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++)
    h = (h ^ (uint8_t)*s) * 1099511628211ull;
  return h;
}

/* The entry of key (created when missing); NULL when out of memory. */
static struct kv *kv_get(struct pf_out *w, uint64_t key, bool *created)
{
  if ((w->n + 1) * 2 > w->cap) {
    size_t cap = w->cap ? w->cap * 2 : 256;
    struct kv *t = calloc(cap, sizeof(*t));
    if (!t) {
      w->oom = true;
      return NULL;
    }
    for (size_t i = 0; i < w->cap; i++) {
      if (!w->t[i].key)
        continue;
      size_t h = mix(w->t[i].key) & (cap - 1);
      while (t[h].key)
        h = (h + 1) & (cap - 1);
      t[h] = w->t[i];
    }
    free(w->t);
    w->t = t;
    w->cap = cap;
  }
  size_t h = mix(key) & (w->cap - 1);
  while (w->t[h].key && w->t[h].key != key)
    h = (h + 1) & (w->cap - 1);
  *created = !w->t[h].key;
  if (*created) {
    w->t[h].key = key;
    w->n++;
  }
  return &w->t[h];
}

static void packet(struct pf_out *w, struct pbuf *tp)
{
  pb_uint(tp, TP_SEQ_ID, 1);
  if (w->first) { /* no interning: the state is "cleared" once, at the start */
    pb_uint(tp, TP_SEQ_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
    w->first = false;
  }
  if (tp->over) {
    w->oom = true;
    return;
  }
  struct pbuf hdr = {.n = 0};
  pb_key(&hdr, TRACE_PACKET, WT_LEN);
  pb_varint(&hdr, tp->n);
  fwrite(hdr.b, 1, hdr.n, w->o);
  fwrite(tp->b, 1, tp->n, w->o);
}

static void descriptor(struct pf_out *w, const struct pbuf *td)
{
  struct pbuf tp = {.n = 0};
  pb_msg(&tp, TP_TRACK_DESCRIPTOR, td);
  packet(w, &tp);
}

static void json_args(struct pf_out *w, const struct pf_arg *a, int na)
{
  fprintf(w->o, ",\"args\":{");
  for (int i = 0; i < na; i++) {
    fprintf(w->o, "%s\"%s\":", i ? "," : "", a[i].key);
    if (a[i].s)
      pp_json_string(w->o, a[i].s);
    else
      fprintf(w->o, "%" PRIu64, a[i].u);
  }
  fprintf(w->o, "}}");
}

static void pb_args(struct pbuf *te, const struct pf_arg *a, int na)
{
  for (int i = 0; i < na; i++) {
    struct pbuf da = {.n = 0};
    pb_str(&da, DA_NAME, a[i].key);
    if (a[i].s)
      pb_str(&da, DA_STRING, a[i].s);
    else
      pb_uint(&da, DA_UINT, a[i].u);
    pb_msg(te, TE_DEBUG, &da);
  }
}

static void us(FILE *o, uint64_t ns)
{
  fprintf(o, "%" PRIu64 ".%03u", ns / 1000, (unsigned)(ns % 1000));
}

static uint64_t thread_uuid(uint32_t pid, uint32_t tid)
{
  return uuid(2, pid, tid);
}

/* protobuf: the thread track (pid, tid) exists (a QP first seen in a completion gets one). */
static void ensure_thread(struct pf_out *w, uint32_t pid, uint32_t tid, const char *name)
{
  bool created;
  struct kv *k = kv_get(w, thread_uuid(pid, tid), &created);
  if (!k || !created)
    return;
  char buf[64];
  if (!name) {
    snprintf(buf, sizeof(buf), "qp 0x%x", tid);
    name = buf;
  }
  struct pbuf th = {.n = 0}, td = {.n = 0};
  pb_uint(&th, THD_PID, pid);
  pb_uint(&th, THD_TID, tid);
  pb_str(&th, THD_NAME, name);
  pb_uint(&td, TD_UUID, thread_uuid(pid, tid));
  pb_uint(&td, TD_PARENT, uuid(1, pid, 0));
  pb_msg(&td, TD_THREAD, &th);
  descriptor(w, &td);
}

/* ---------------------------------------------------------------- the API */

struct pf_out *pf_open(FILE *o, bool proto, const char *scenario)
{
  struct pf_out *w = calloc(1, sizeof(*w));
  if (!w)
    return NULL;
  *w = (struct pf_out){.o = o, .proto = proto, .first = true, .sep = ""};
  if (!proto) {
    fprintf(o, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"scenario\":");
    pp_json_string(o, scenario);
    fprintf(o, "},\"traceEvents\":[\n");
  }
  return w;
}

int pf_close(struct pf_out *w, const char *json_metadata)
{
  if (!w->proto)
    fprintf(w->o, "\n]%s%s}\n", json_metadata ? ",\"metadata\":" : "",
            json_metadata ? json_metadata : "");
  int rc = w->oom ? -1 : 0;
  for (size_t i = 0; i < w->cap; i++)
    free(w->t[i].busy);
  free(w->t);
  free(w);
  return rc;
}

void pf_process(struct pf_out *w, uint32_t pid, const char *name, uint32_t sort)
{
  if (!w->proto) {
    fprintf(w->o, "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,\"args\":{\"name\":",
            w->sep, pid);
    pp_json_string(w->o, name);
    fprintf(w->o, "}},\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%u,\"args\":"
            "{\"sort_index\":%u}}", pid, sort);
    w->sep = ",\n";
    return;
  }
  struct pbuf pd = {.n = 0}, td = {.n = 0};
  pb_uint(&pd, PD_PID, pid);
  pb_str(&pd, PD_NAME, name);
  pb_uint(&td, TD_UUID, uuid(1, pid, 0));
  pb_msg(&td, TD_PROCESS, &pd);
  descriptor(w, &td);
}

void pf_thread(struct pf_out *w, uint32_t pid, uint32_t tid, const char *name)
{
  if (!w->proto) {
    fprintf(w->o, "%s{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,\"tid\":%u,\"args\":"
            "{\"name\":", w->sep, pid, tid);
    pp_json_string(w->o, name);
    fprintf(w->o, "}}");
    w->sep = ",\n";
    return;
  }
  ensure_thread(w, pid, tid, name);
}

/* protobuf: the lowest free lane of (pid, tid, cat), its track created on first use. */
static uint32_t lane_take(struct pf_out *w, uint32_t pid, uint32_t tid, const char *cat)
{
  bool created;
  struct kv *k = kv_get(w, uuid(3, (uint64_t)pid << 32 | tid, str_hash(cat)), &created);
  if (!k)
    return 0;
  uint32_t i = 0;
  while (i < k->nlanes && k->busy[i])
    i++;
  if (i == k->nlanes) {
    uint8_t *b = realloc(k->busy, (size_t)i + 1);
    if (!b) {
      w->oom = true;
      return 0;
    }
    k->busy = b;
    k->nlanes = i + 1;
    char name[64];
    snprintf(name, sizeof(name), "%s %u", cat, i);
    struct pbuf td = {.n = 0};
    pb_uint(&td, TD_UUID, uuid(4, (uint64_t)pid << 32 | tid, str_hash(cat) ^ i));
    pb_uint(&td, TD_PARENT, thread_uuid(pid, tid));
    pb_str(&td, TD_NAME, name);
    descriptor(w, &td);
  }
  k->busy[i] = 1;
  return i;
}

static void lane_free(struct pf_out *w, uint32_t pid, uint32_t tid, const char *cat,
                      uint32_t lane)
{
  bool created;
  struct kv *k = kv_get(w, uuid(3, (uint64_t)pid << 32 | tid, str_hash(cat)), &created);
  if (k && lane < k->nlanes)
    k->busy[lane] = 0;
}

static void track_event(struct pf_out *w, uint64_t ts, uint64_t track, unsigned type,
                        const char *cat, const char *name, const struct pf_arg *a, int na,
                        uint64_t flow, bool terminating, const int64_t *value)
{
  struct pbuf te = {.n = 0}, tp = {.n = 0};
  pb_uint(&te, TE_TYPE, type);
  pb_uint(&te, TE_TRACK, track);
  if (cat)
    pb_str(&te, TE_CATEGORIES, cat);
  if (name)
    pb_str(&te, TE_NAME, name);
  if (value)
    pb_uint(&te, TE_COUNTER_VALUE, (uint64_t)*value); /* int64: two's complement varint */
  if (flow)
    pb_fixed64(&te, terminating ? TE_TERMINATING_FLOWS : TE_FLOW_IDS, flow);
  pb_args(&te, a, na);
  pb_uint(&tp, TP_TIMESTAMP, ts);
  pb_msg(&tp, TP_TRACK_EVENT, &te);
  packet(w, &tp);
}

void pf_begin(struct pf_out *w, uint32_t pid, uint32_t tid, const char *cat, const char *name,
              uint64_t id, uint64_t ts, const struct pf_arg *a, int na, uint32_t *lane)
{
  *lane = 0;
  if (!w->proto) {
    fprintf(w->o, "%s{\"ph\":\"b\",\"cat\":\"%s\",\"name\":\"%s\",\"id\":%" PRIu64
            ",\"pid\":%u,\"tid\":%u,\"ts\":", w->sep, cat, name, id, pid, tid);
    us(w->o, ts);
    json_args(w, a, na);
    w->sep = ",\n";
    return;
  }
  ensure_thread(w, pid, tid, NULL);
  *lane = lane_take(w, pid, tid, cat);
  track_event(w, ts, uuid(4, (uint64_t)pid << 32 | tid, str_hash(cat) ^ *lane),
              TYPE_SLICE_BEGIN, cat, name, a, na, 0, false, NULL);
}

void pf_end(struct pf_out *w, uint32_t pid, uint32_t tid, const char *cat, const char *name,
            uint64_t id, uint64_t ts, const struct pf_arg *a, int na, uint32_t lane)
{
  if (!w->proto) {
    fprintf(w->o, "%s{\"ph\":\"e\",\"cat\":\"%s\",\"name\":\"%s\",\"id\":%" PRIu64
            ",\"pid\":%u,\"tid\":%u,\"ts\":", w->sep, cat, name, id, pid, tid);
    us(w->o, ts);
    json_args(w, a, na);
    w->sep = ",\n";
    return;
  }
  track_event(w, ts, uuid(4, (uint64_t)pid << 32 | tid, str_hash(cat) ^ lane), TYPE_SLICE_END,
              NULL, NULL, a, na, 0, false, NULL);
  lane_free(w, pid, tid, cat, lane);
}

void pf_instant(struct pf_out *w, uint32_t pid, uint32_t tid, const char *name, uint64_t ts,
                const struct pf_arg *a, int na)
{
  if (!w->proto) {
    fprintf(w->o, "%s{\"ph\":\"i\",\"s\":\"t\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,\"ts\":",
            w->sep, name, pid, tid);
    us(w->o, ts);
    json_args(w, a, na);
    w->sep = ",\n";
    return;
  }
  ensure_thread(w, pid, tid, NULL);
  track_event(w, ts, thread_uuid(pid, tid), TYPE_INSTANT, NULL, name, a, na, 0, false, NULL);
}

static void pb_counter(struct pf_out *w, uint32_t pid, const char *name, const char *key,
                       uint64_t ts, int64_t v)
{
  char full[160];
  snprintf(full, sizeof(full), "%s: %s", name, key);
  uint64_t u = uuid(5, pid, str_hash(full));
  bool created;
  struct kv *k = kv_get(w, u, &created);
  if (k && created) {
    struct pbuf td = {.n = 0}, cd = {.n = 0};
    pb_uint(&td, TD_UUID, u);
    pb_uint(&td, TD_PARENT, uuid(1, pid, 0));
    pb_str(&td, TD_NAME, full);
    pb_msg(&td, TD_COUNTER, &cd);
    descriptor(w, &td);
  }
  track_event(w, ts, u, TYPE_COUNTER, NULL, NULL, NULL, 0, 0, false, &v);
}

void pf_counter(struct pf_out *w, uint32_t pid, const char *name, const char *const *keys,
                const int64_t *vals, int n, uint64_t ts)
{
  if (w->proto) {
    for (int i = 0; i < n; i++)
      pb_counter(w, pid, name, keys[i], ts, vals[i]);
    return;
  }
  fprintf(w->o, "%s{\"ph\":\"C\",\"name\":\"%s\",\"pid\":%u,\"ts\":", w->sep, name, pid);
  us(w->o, ts);
  fprintf(w->o, ",\"args\":{");
  for (int i = 0; i < n; i++)
    fprintf(w->o, "%s\"%s\":%" PRId64, i ? "," : "", keys[i], vals[i]);
  fprintf(w->o, "}}");
  w->sep = ",\n";
}

void pf_mark(struct pf_out *w, uint32_t pid, uint32_t tid, const char *cat, const char *name,
             uint64_t ts, uint64_t flow, bool arrives, const struct pf_arg *a, int na)
{
  if (!w->proto) {
    fprintf(w->o, "%s{\"ph\":\"X\",\"cat\":\"%s\",\"name\":\"%s%s\",\"pid\":%u,\"tid\":%u,"
            "\"ts\":", w->sep, cat, name, arrives ? " arrives" : "", pid, tid);
    us(w->o, ts);
    fprintf(w->o, ",\"dur\":0.001");
    json_args(w, a, na);
    w->sep = ",\n";
    if (flow) {
      fprintf(w->o, "%s{\"ph\":\"%s\",%s\"cat\":\"%s\",\"name\":\"%s\",\"id\":%" PRIu64
              ",\"pid\":%u,\"tid\":%u,\"ts\":", w->sep, arrives ? "f" : "s",
              arrives ? "\"bp\":\"e\"," : "", cat, name, flow, pid, tid);
      us(w->o, ts);
      fprintf(w->o, "}");
    }
    return;
  }
  char full[96];
  snprintf(full, sizeof(full), "%s%s", name, arrives ? " arrives" : "");
  ensure_thread(w, pid, tid, NULL);
  track_event(w, ts, thread_uuid(pid, tid), TYPE_INSTANT, cat, full, a, na, flow, arrives, NULL);
}
