/*
 * Scenario and NIC-profile parser (format: models/scenarios/README.md).
 *
 * libyaml's event parser runs over the memory buffer and builds a small tree of our own (scalars,
 * mappings, sequences, each with its 1-based line). Aliases are refused, nesting is bounded, and
 * every scalar keeps its length, so nothing below depends on NUL termination of the input. The
 * tree is then walked with a fixed schema: each mapping's keys are checked first (unknown and
 * duplicate keys are errors), then each known key is converted with a typed getter that reports
 * "path:line: ..." on the first problem. Results go into a local copy that is handed back only on
 * success.
 */
#include "tools/scenario/scenario.h"
#include "prepost/param.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "prepost/simnic.h"
#include "prepost/engine.h"
#include "prepost/proto.h"
#include "tools/cli/cli_util.h"

#define MAX_TEXT_BYTES (1u << 20) /* larger inputs are refused */
#define MAX_NODES 100000          /* so are documents with more values (bounds memory) */
#define MAX_DEPTH 64              /* and deeper nesting */
#define SHOW_MAX 40                /* bytes of an offending value quoted in messages */

#if defined(__GNUC__)
#define PP_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define PP_PRINTF(a, b)
#endif

/* ------------------------------------------------------------------------------------------ */
/* Tree                                                                                       */

enum node_kind { NODE_SCALAR, NODE_MAP, NODE_SEQ };

struct node {
  enum node_kind kind;
  unsigned long line;  /* 1-based */
  char *str;           /* scalar text plus a NUL; may contain NULs itself, use len */
  size_t len;
  struct node **kids;  /* map: key, value, key, value, ...; sequence: items */
  size_t nkids, cap;
};

/* Nodes of `--set KEY=VALUE` i carry the line SET_LINE + i: messages name the assignment. */
#define SET_LINE (ULONG_MAX / 2)

struct ctx {
  const char *path;       /* for messages */
  const char *models_dir; /* may be NULL */
  const char *const *sets; /* the --set assignments applied over the file */
  size_t nsets;
  const char *const *in_set; /* while parsing the value of one: every message is about it */
  char *err;
  size_t errlen;
  char shown[SHOW_MAX + 16];
};

static enum pp_status fail(struct ctx *c, enum pp_status st, unsigned long line, const char *fmt,
                           ...) PP_PRINTF(4, 5);

static enum pp_status fail(struct ctx *c, enum pp_status st, unsigned long line, const char *fmt,
                           ...)
{
  if (c->in_set)
    line = SET_LINE + (size_t)(c->in_set - c->sets);
  if (c->err && c->errlen > 0) {
    int n = line >= SET_LINE && line - SET_LINE < c->nsets
                ? snprintf(c->err, c->errlen, "%s: --set %s: ", c->path, c->sets[line - SET_LINE])
            : line ? snprintf(c->err, c->errlen, "%s:%lu: ", c->path, line)
                   : snprintf(c->err, c->errlen, "%s: ", c->path);
    if (n >= 0 && (size_t)n < c->errlen) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
      va_end(ap);
    }
  }
  return st;
}

/* The value as it appears in messages: 'text' (bounded, control bytes as '?'), or its kind. */
static const char *show(struct ctx *c, const struct node *n)
{
  if (!n)
    return "nothing";
  if (n->kind == NODE_MAP)
    return "a mapping";
  if (n->kind == NODE_SEQ)
    return "a sequence";
  size_t o = 0;
  c->shown[o++] = '\'';
  for (size_t i = 0; i < n->len && i < SHOW_MAX; i++) {
    unsigned char ch = (unsigned char)n->str[i];
    c->shown[o++] = (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch;
  }
  if (n->len > SHOW_MAX) {
    memcpy(c->shown + o, "...", 3);
    o += 3;
  }
  c->shown[o++] = '\'';
  c->shown[o] = '\0';
  return c->shown;
}

static void node_free(struct node *n)
{
  if (!n)
    return;
  for (size_t i = 0; i < n->nkids; i++)
    node_free(n->kids[i]);
  free(n->kids);
  free(n->str);
  free(n);
}

static bool node_add(struct node *parent, struct node *kid)
{
  if (parent->nkids == parent->cap) {
    size_t cap = parent->cap ? parent->cap * 2 : 8;
    if (cap > SIZE_MAX / sizeof *parent->kids)
      return false;
    struct node **k = realloc(parent->kids, cap * sizeof *k);
    if (!k)
      return false;
    parent->kids = k;
    parent->cap = cap;
  }
  parent->kids[parent->nkids++] = kid;
  return true;
}

static enum pp_status yaml_fail(struct ctx *c, const yaml_parser_t *p, const char *text,
                                size_t len)
{
  if (p->error == YAML_MEMORY_ERROR)
    return fail(c, PP_NOMEM, 0, "out of memory while reading YAML");
  const char *problem = p->problem ? p->problem : "malformed input";
  if (p->error == YAML_READER_ERROR) {
    /* Reader errors carry a byte offset, not a mark. */
    unsigned long line = 1;
    size_t end = p->problem_offset < len ? p->problem_offset : len;
    for (size_t i = 0; i < end; i++)
      line += text[i] == '\n';
    if (p->problem_value >= 0)
      return fail(c, PP_PARSE, line, "YAML syntax error: %s (byte #x%X)", problem,
                  (unsigned)p->problem_value);
    return fail(c, PP_PARSE, line, "YAML syntax error: %s", problem);
  }
  unsigned long line = (unsigned long)p->problem_mark.line + 1;
  if (p->context)
    return fail(c, PP_PARSE, line, "YAML syntax error: %s %s at line %lu", problem, p->context,
                (unsigned long)p->context_mark.line + 1);
  return fail(c, PP_PARSE, line, "YAML syntax error: %s", problem);
}

/* Parses text into a tree; *out is NULL for a stream with no document. */
static enum pp_status load_tree(struct ctx *c, const char *text, size_t len, struct node **out)
{
  *out = NULL;
  if (len > MAX_TEXT_BYTES)
    return fail(c, PP_INVALID, 0, "input is larger than %u bytes", MAX_TEXT_BYTES);
  if (!text) {
    if (len)
      return fail(c, PP_INVALID, 0, "no input text");
    text = "";
  }
  yaml_parser_t p;
  if (!yaml_parser_initialize(&p))
    return fail(c, PP_NOMEM, 0, "out of memory");
  yaml_parser_set_input_string(&p, (const unsigned char *)text, len);

  struct node *root = NULL;
  struct node *stack[MAX_DEPTH];
  size_t depth = 0;
  unsigned ndocs = 0;
  size_t nnodes = 0;
  enum pp_status st = PP_OK;
  bool done = false;
  while (!done && st == PP_OK) {
    yaml_event_t ev;
    if (!yaml_parser_parse(&p, &ev)) {
      st = yaml_fail(c, &p, text, len);
      break;
    }
    unsigned long line = (unsigned long)ev.start_mark.line + 1;
    struct node *n;
    switch (ev.type) {
    case YAML_STREAM_END_EVENT:
      done = true;
      break;
    case YAML_DOCUMENT_START_EVENT:
      if (++ndocs > 1)
        st = fail(c, PP_PARSE, line, "only one YAML document is allowed");
      break;
    case YAML_ALIAS_EVENT:
      st = fail(c, PP_PARSE, line, "aliases (*name) are not supported: write the value out");
      break;
    case YAML_SCALAR_EVENT:
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT:
      if (++nnodes > MAX_NODES) {
        st = fail(c, PP_INVALID, line, "more than %d values in one document", MAX_NODES);
        break;
      }
      n = calloc(1, sizeof *n);
      if (!n) {
        st = fail(c, PP_NOMEM, line, "out of memory");
        break;
      }
      n->line = line;
      if (ev.type == YAML_SCALAR_EVENT) {
        n->kind = NODE_SCALAR;
        n->len = ev.data.scalar.length;
        n->str = malloc(n->len + 1);
        if (!n->str) {
          free(n);
          st = fail(c, PP_NOMEM, line, "out of memory");
          break;
        }
        if (n->len)
          memcpy(n->str, ev.data.scalar.value, n->len);
        n->str[n->len] = '\0';
      } else {
        n->kind = ev.type == YAML_MAPPING_START_EVENT ? NODE_MAP : NODE_SEQ;
      }
      if (depth == 0) {
        if (root) { /* cannot happen with one document; be safe anyway */
          node_free(n);
          st = fail(c, PP_PARSE, line, "only one YAML document is allowed");
          break;
        }
        root = n;
      } else if (!node_add(stack[depth - 1], n)) {
        node_free(n);
        st = fail(c, PP_NOMEM, line, "out of memory");
        break;
      }
      if (n->kind != NODE_SCALAR) {
        if (depth == MAX_DEPTH) {
          st = fail(c, PP_PARSE, line, "nesting deeper than %d levels", MAX_DEPTH);
          break;
        }
        stack[depth++] = n;
      }
      break;
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
      if (depth > 0)
        depth--;
      break;
    default:
      break;
    }
    yaml_event_delete(&ev);
  }
  yaml_parser_delete(&p);
  if (st != PP_OK) {
    node_free(root);
    return st;
  }
  *out = root;
  return PP_OK;
}

static bool scalar_is(const struct node *n, const char *s)
{
  size_t l = strlen(s);
  return n->kind == NODE_SCALAR && n->len == l && memcmp(n->str, s, l) == 0;
}

/* A section's keys: its field tables (prepost/param.h) in order, each with its entry count. The
 * tables are the one description of the keys: the unknown-key check, `help keys` and the
 * getters read them (a composite entry names a key its section's code parses itself). */
struct keyset {
  const struct pp_param *t;
  const size_t *n;
};
#define KEYSET(name) {name##_param_table, &name##_param_count}
#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))
#define NKEYSETS(a) COUNT_OF(a)

/* The entry of key k among the keysets, or NULL. */
static const struct pp_param *keyset_find(const struct keyset *ks, size_t nks,
                                          const struct node *k)
{
  for (size_t s = 0; s < nks; s++)
    for (size_t i = 0; i < *ks[s].n; i++)
      if (scalar_is(k, ks[s].t[i].key))
        return &ks[s].t[i];
  return NULL;
}

/* Checks that every key of map is a scalar that one of the keysets names, given once. */
static enum pp_status check_keys(struct ctx *c, const struct node *map, const struct keyset *ks,
                                 size_t nks, const char *where)
{
  for (size_t i = 0; i + 1 < map->nkids; i += 2) {
    const struct node *k = map->kids[i];
    if (k->kind != NODE_SCALAR)
      return fail(c, PP_PARSE, k->line, "keys must be plain words, got %s %s", show(c, k), where);
    if (!keyset_find(ks, nks, k)) {
      char list[512];
      size_t o = 0;
      bool full = false;
      list[0] = '\0';
      for (size_t s = 0; s < nks && !full; s++)
        for (size_t j = 0; j < *ks[s].n && !full; j++) {
          int w = snprintf(list + o, sizeof list - o, "%s%s", o ? ", " : "", ks[s].t[j].key);
          if (w < 0 || (size_t)w >= sizeof list - o) {
            list[o] = '\0'; /* what fits, whole names */
            full = true;
          } else {
            o += (size_t)w;
          }
        }
      return fail(c, PP_PARSE, k->line, "unknown key %s %s (expected one of: %s)", show(c, k),
                  where, list);
    }
    for (size_t m = 0; m < i; m += 2)
      if (map->kids[m]->kind == NODE_SCALAR && map->kids[m]->len == k->len &&
          memcmp(map->kids[m]->str, k->str, k->len) == 0)
        return fail(c, PP_PARSE, k->line, "duplicate key %s %s (first given at line %lu)",
                    show(c, k), where, map->kids[m]->line);
  }
  return PP_OK;
}

/* The value of key in map, or NULL. */
static const struct node *get(const struct node *map, const char *key)
{
  for (size_t i = 0; i + 1 < map->nkids; i += 2)
    if (scalar_is(map->kids[i], key))
      return map->kids[i + 1];
  return NULL;
}

/* An empty plain value ("key:" with nothing after it). */
static bool is_empty(const struct node *n)
{
  return n->kind == NODE_SCALAR && n->len == 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Typed values                                                                               */

/* The typed getters: the one set of value parsers (prepost/param.h) on a scalar node, the
 * failure as "FILE:LINE: 'KEY' must be ..., got 'VALUE'". */
static enum pp_status scalar_fail(struct ctx *c, enum pp_status st, const char *key,
                                  const struct node *v, const char *why)
{
  return fail(c, st, v->line, "'%s' %s, got %s", key, why, show(c, v));
}

static enum pp_status get_uint(struct ctx *c, const char *key, const struct node *v, uint64_t min,
                               uint64_t max, uint64_t *out)
{
  char why[160];
  bool scalar = v->kind == NODE_SCALAR; /* a mapping or sequence: the shape's sentence */
  enum pp_status st = pp_parse_uint(scalar ? v->str : "", scalar ? v->len : 0, min, max, out,
                                    why, sizeof why);
  return st == PP_OK ? st : scalar_fail(c, st, key, v, why);
}

static enum pp_status get_u32(struct ctx *c, const char *key, const struct node *v, uint32_t min,
                              uint32_t max, uint32_t *out)
{
  uint64_t x;
  enum pp_status st = get_uint(c, key, v, min, max, &x);
  if (st == PP_OK)
    *out = (uint32_t)x;
  return st;
}

/* One of the IB path MTUs, in bytes. */
static enum pp_status get_mtu(struct ctx *c, const char *key, const struct node *v, uint32_t *out)
{
  uint64_t x;
  enum pp_status st = v->kind == NODE_SCALAR
                          ? pp_parse_uint(v->str, v->len, 0, UINT32_MAX, &x, NULL, 0)
                          : PP_PARSE;
  if (st == PP_OK && pp_mtu_from_bytes((uint32_t)x) == 0)
    st = PP_INVALID;
  if (st != PP_OK)
    return scalar_fail(c, st, key, v, "must be one of 256, 512, 1024, 2048, 4096");
  *out = (uint32_t)x;
  return PP_OK;
}

/* "250ns", "2us", "1.5ms", "10s", or a bare integer of nanoseconds; rounded to whole ns. */
static enum pp_status get_duration(struct ctx *c, const char *key, const struct node *v,
                                   uint64_t *out)
{
  char why[160];
  bool scalar = v->kind == NODE_SCALAR;
  enum pp_status st = pp_parse_duration(scalar ? v->str : "", scalar ? v->len : 0, 0, UINT64_MAX,
                                        out, why, sizeof why);
  return st == PP_OK ? st : scalar_fail(c, st, key, v, why);
}

enum pp_status pp_duration_parse(const char *text, const char *key, uint64_t *out, char *err,
                                 size_t errlen)
{
  char buf[64];
  snprintf(buf, sizeof buf, "%s", text);
  struct node v = {.kind = NODE_SCALAR, .line = 0, .str = buf, .len = strlen(buf)};
  struct ctx c = {.path = "command line", .err = err, .errlen = errlen};
  if (strlen(text) >= sizeof buf)
    return fail(&c, PP_PARSE, 0, "'%s' is too long", key);
  return get_duration(&c, key, &v, out);
}

/* "4096", "64B", "4KiB", "1MiB", "1GiB", "4KB" (10^3), "1MB", "1GB"; a whole number of bytes. */
static enum pp_status get_size(struct ctx *c, const char *key, const struct node *v, uint64_t min,
                               uint64_t max, uint64_t *out)
{
  char why[160];
  bool scalar = v->kind == NODE_SCALAR;
  enum pp_status st = pp_parse_size(scalar ? v->str : "", scalar ? v->len : 0, min, max, out, why,
                                    sizeof why);
  return st == PP_OK ? st : scalar_fail(c, st, key, v, why);
}

/* A non-empty string without control characters that fits in buf (size bytes with the NUL). */
static enum pp_status get_string(struct ctx *c, const char *key, const struct node *v, char *buf,
                                 size_t size)
{
  if (v->kind != NODE_SCALAR)
    return fail(c, PP_PARSE, v->line, "'%s' must be a string, got %s", key, show(c, v));
  if (v->len == 0)
    return fail(c, PP_INVALID, v->line, "'%s' must not be empty", key);
  for (size_t i = 0; i < v->len; i++)
    if ((unsigned char)v->str[i] < 0x20 || v->str[i] == 0x7f)
      return fail(c, PP_PARSE, v->line, "'%s' must not contain control characters, got %s", key,
                  show(c, v));
  if (v->len >= size)
    return fail(c, PP_INVALID, v->line, "'%s' is too long (%zu bytes, at most %zu), got %s", key,
                v->len, size - 1, show(c, v));
  memcpy(buf, v->str, v->len);
  buf[v->len] = '\0';
  return PP_OK;
}

/* The expected-names list of an enum, for messages. */
static void enum_list(char *buf, size_t size, int count, const char *(*name)(int))
{
  size_t o = 0;
  buf[0] = '\0';
  for (int i = 0; i < count; i++) {
    int w = snprintf(buf + o, size - o, "%s%s", i ? ", " : "", name(i));
    if (w < 0 || (size_t)w >= size - o)
      return;
    o += (size_t)w;
  }
}

static const char *protocol_name_i(int i)
{
  return pp_protocol_name((uint32_t)i);
}

static enum pp_status get_enum(struct ctx *c, const char *key, const struct node *v, int count,
                               const char *(*name)(int), int (*from_name)(const char *),
                               int *out)
{
  char list[256], word[64];
  enum_list(list, sizeof list, count, name);
  if (v->kind != NODE_SCALAR || v->len == 0)
    return fail(c, PP_PARSE, v->line, "'%s' must be one of: %s, got %s", key, list, show(c, v));
  int x = -1;
  if (v->len < sizeof word && !memchr(v->str, '\0', v->len)) {
    memcpy(word, v->str, v->len + 1);
    x = from_name(word);
  }
  if (x < 0 || x >= count)
    return fail(c, PP_INVALID, v->line, "unknown %s %s (expected one of: %s)%s", key, show(c, v),
                list, strcmp(key, "protocol") ? "" : "; a plug-in's protocol needs --plugin PATH");
  *out = x;
  return PP_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Field tables (prepost/param.h): one loop instead of a getter per key                        */

static bool listed(const char *const *names, const char *key)
{
  for (; names && *names; names++)
    if (!strcmp(*names, key))
      return true;
  return false;
}

/* One entry from its node: the parser of its kind, the messages of the typed getters. */
static enum pp_status get_param(struct ctx *c, const struct pp_param *p, const struct node *v,
                                void *obj)
{
  if (p->kind == PP_PARAM_ENUM) {
    char list[256];
    size_t o = 0;
    list[0] = '\0';
    for (uint64_t i = p->min; i <= p->max && o < sizeof list; i++)
      o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", i > p->min ? ", " : "",
                            p->names[i]);
    if (v->kind != NODE_SCALAR || v->len == 0)
      return fail(c, PP_PARSE, v->line, "'%s' must be one of: %s, got %s", p->key, list,
                  show(c, v));
    if (pp_param_set(p, obj, v->str, v->len, NULL, 0) != PP_OK)
      return fail(c, PP_INVALID, v->line, "unknown %s %s (expected one of: %s)", p->key,
                  show(c, v), list);
    return PP_OK;
  }
  char why[160];
  bool scalar = v->kind == NODE_SCALAR; /* a mapping or sequence: the shape's sentence */
  enum pp_status st = pp_param_set(p, obj, scalar ? v->str : "", scalar ? v->len : 0, why,
                                   sizeof why);
  return st == PP_OK ? st : scalar_fail(c, st, p->key, v, why);
}

/* A list of ranks such as [1, 3] (each 0..min(63, ranks-1)) as a bitmask. */
static enum pp_status get_rank_mask(struct ctx *c, const char *key, const struct node *v,
                                    uint32_t ranks, uint64_t *mask)
{
  if (v->kind != NODE_SEQ)
    return fail(c, PP_PARSE, v->line, "'%s' must be a list of ranks such as [1, 3], got %s", key,
                show(c, v));
  if (v->nkids == 0)
    return fail(c, PP_INVALID, v->line, "'%s' must list at least one rank", key);
  uint64_t hi = (ranks < 64 ? ranks : 64) - 1, x, m = 0;
  for (size_t i = 0; i < v->nkids; i++) {
    enum pp_status st = get_uint(c, key, v->kids[i], 0, hi, &x);
    if (st != PP_OK)
      return st;
    m |= 1ull << x;
  }
  *mask = m;
  return PP_OK;
}

/* The keys of table t given in map, but those in skip (NULL-terminated, may be NULL) and the
 * composite ones (the caller reads them itself), into obj. `ranks` bounds the entries that name
 * ranks (PP_PARAM_F_RANK: a RANKS entry is a YAML list); 0 for a table without them. */
static enum pp_status get_params_ranked(struct ctx *c, const struct node *map,
                                        const struct pp_param *t, size_t n,
                                        const char *const *skip, uint32_t ranks, void *obj)
{
  for (size_t i = 0; i < n; i++) {
    const struct node *v = t[i].kind == PP_PARAM_COMPOSITE || listed(skip, t[i].key)
                               ? NULL
                               : get(map, t[i].key);
    if (!v)
      continue;
    assert(ranks || !(t[i].flags & PP_PARAM_F_RANK)); /* the program's own tables */
    struct pp_param p = ranks ? pp_param_rank_bound(&t[i], ranks) : t[i];
    uint64_t mask = 0;
    enum pp_status st;
    if (p.kind == PP_PARAM_RANKS && (st = get_rank_mask(c, p.key, v, ranks, &mask)) == PP_OK)
      pp_param_put(&p, obj, mask);
    else if (p.kind != PP_PARAM_RANKS)
      st = get_param(c, &p, v, obj);
    if (st != PP_OK)
      return st;
  }
  return PP_OK;
}

static enum pp_status get_params(struct ctx *c, const struct node *map, const struct pp_param *t,
                                 size_t n, const char *const *skip, void *obj)
{
  return get_params_ranked(c, map, t, n, skip, 0, obj);
}

static const char *const mtu_key[] = {"mtu", NULL};

/* ------------------------------------------------------------------------------------------ */
/* Files                                                                                      */

static enum pp_status read_file(struct ctx *c, const char *path, char **out, size_t *outlen)
{
  char e[128];
  bool big;
  if (pp_read_regular(path, MAX_TEXT_BYTES, out, outlen, &big, e, sizeof e) != 0)
    return big ? fail(c, PP_INVALID, 0, "file is larger than %u bytes", MAX_TEXT_BYTES)
               : fail(c, PP_IO, 0, "cannot open: %s", e);
  return PP_OK;
}

/* "dir/name.yaml" -> "name" into buf (truncated to fit). */
static void base_name(const char *path, char *buf, size_t size)
{
  const char *b = strrchr(path, '/');
  b = b ? b + 1 : path;
  size_t l = strlen(b);
  if (l > 5 && strcmp(b + l - 5, ".yaml") == 0)
    l -= 5;
  else if (l > 4 && strcmp(b + l - 4, ".yml") == 0)
    l -= 4;
  if (l >= size)
    l = size - 1;
  memcpy(buf, b, l);
  buf[l] = '\0';
}

/* The directory of the scenario file ("." for a bare file name); false when there is no file. */
static bool scenario_dir(const struct ctx *c, char *buf, size_t size)
{
  if (!c->path || c->path[0] == '<')
    return false;
  const char *slash = strrchr(c->path, '/');
  if (!slash)
    return snprintf(buf, size, ".") > 0;
  int n = snprintf(buf, size, "%.*s", slash == c->path ? 1 : (int)(slash - c->path), c->path);
  return n > 0 && (size_t)n < size;
}

/*
 * A file named by a scenario key (platform, nic), which must be a readable regular file: an
 * absolute path as it is; a relative one next to the scenario file first, then under the models
 * directory. Not found: the message names every directory searched.
 */
static enum pp_status resolve(struct ctx *c, const char *what, const struct node *v, char *out,
                              size_t size)
{
  char rel[PP_PATH_MAX];
  enum pp_status st = get_string(c, what, v, rel, sizeof rel);
  if (st != PP_OK)
    return st;
  char dirs[2][PP_PATH_MAX];
  size_t ndirs = 0;
  if (rel[0] != '/') {
    if (scenario_dir(c, dirs[ndirs], sizeof dirs[0]))
      ndirs++;
    if (c->models_dir && c->models_dir[0] &&
        !(ndirs && !strcmp(dirs[0], c->models_dir)) &&
        snprintf(dirs[ndirs], sizeof dirs[0], "%s", c->models_dir) < (int)sizeof dirs[0])
      ndirs++;
  }
  char searched[2 * PP_PATH_MAX + 8] = "";
  for (size_t i = 0; i < (ndirs ? ndirs : 1); i++) {
    int n = ndirs ? snprintf(out, size, "%s/%s", dirs[i], rel) : snprintf(out, size, "%s", rel);
    if (n < 0 || (size_t)n >= size)
      return fail(c, PP_INVALID, v->line, "%s file path is too long (at most %zu bytes), got %s",
                  what, size - 1, show(c, v));
    char e[128];
    FILE *f = pp_open_regular(out, e, sizeof e);
    if (f) {
      fclose(f);
      return PP_OK;
    }
    if (errno != ENOENT && !ndirs) /* a directory, a FIFO (which would block a reader), ... */
      return fail(c, PP_IO, v->line, "%s file %s: %s", what, show(c, v), e);
    if (errno != ENOENT)
      return fail(c, PP_IO, v->line, "%s file %s (%s): %s", what, show(c, v), out, e);
    if (ndirs)
      snprintf(searched + strlen(searched), sizeof searched - strlen(searched), "%s%s",
               i ? ", " : "", dirs[i]);
  }
  if (!ndirs)
    return fail(c, PP_IO, v->line, "%s file %s not found", what, show(c, v));
  return fail(c, PP_IO, v->line, "%s file %s not found (searched %s: %s)", what, show(c, v),
              ndirs > 1 ? "next to the scenario, then the models directory"
              : c->models_dir && c->models_dir[0] && !strcmp(dirs[0], c->models_dir)
                  ? "the models directory"
                  : "next to the scenario",
              searched);
}

/* ------------------------------------------------------------------------------------------ */
/* NIC profiles                                                                               */

/* The keys of a NIC profile beside prepost/simnic.h's table: name first, line_rate and the
 * rnr_delay mapping after it. */
#define N struct pp_nic_profile
static const struct pp_param nic_name_param_table[] = {
    PP_PARAM_COMPOSITE_KEYED("name", "a string, the profile's name; default the file's name"),
};
static const struct pp_param nic_own_param_table[] = {
    PP_PARAM_BANDWIDTH_KEYED("line_rate", N, line_rate_bps, PP_PARAM_BW_100G,
                             "the port's rate: a message takes max(wqe, wire bytes / rate); at "
                             "most 1 Pb/s"),
    PP_PARAM_COMPOSITE_KEYED("rnr_delay",
                             "a mapping of min_rnr_timer codes 0..31 to RNR delays: {1: 9ms}"),
};
#undef N
static const size_t nic_name_param_count = COUNT_OF(nic_name_param_table);
static const size_t nic_own_param_count = COUNT_OF(nic_own_param_table);
static const struct keyset nic_keys[] = {KEYSET(nic_name), KEYSET(pp_nic), KEYSET(nic_own)};

/* rnr_delay: {CODE: DURATION, ...}, the device's RNR delay per min_rnr_timer code 0..31. */
static enum pp_status get_rnr_delays(struct ctx *c, const struct node *v, uint64_t *table)
{
  if (v->kind != NODE_MAP)
    return fail(c, PP_PARSE, v->line,
                "'rnr_delay' must be a mapping of min_rnr_timer codes to durations such as "
                "{1: 4ms, 12: 8ms}, got %s",
                show(c, v));
  enum pp_status st = PP_OK;
  for (size_t i = 0; st == PP_OK && i + 1 < v->nkids; i += 2) {
    uint64_t code, d;
    st = get_uint(c, "rnr_delay code", v->kids[i], 0, 31, &code);
    if (st == PP_OK)
      st = get_duration(c, "rnr_delay", v->kids[i + 1], &d);
    if (st == PP_OK && (d == 0 || d > PP_RNR_DELAY_MAX_NS))
      st = fail(c, PP_INVALID, v->kids[i + 1]->line,
                "rnr_delay of code %" PRIu64 " must be > 0 and at most 60s", code);
    if (st == PP_OK)
      table[code] = d;
  }
  return st;
}

static enum pp_status parse_profile(struct ctx *c, const struct node *map, const char *where,
                                    struct pp_nic_profile *p)
{
  enum pp_status st = check_keys(c, map, nic_keys, NKEYSETS(nic_keys), where);
  const struct node *v;
  if (st == PP_OK && (v = get(map, "name")))
    st = get_string(c, "name", v, p->name, sizeof p->name);
  if (st == PP_OK && (v = get(map, "mtu")))
    st = get_mtu(c, "mtu", v, &p->mtu);
  if (st == PP_OK) /* the rest: prepost/simnic.h's table */
    st = get_params(c, map, pp_nic_param_table, pp_nic_param_count, mtu_key, p);
  if (st == PP_OK) /* line_rate */
    st = get_params(c, map, nic_own_param_table, nic_own_param_count, NULL, p);
  if (st == PP_OK && (v = get(map, "rnr_delay")))
    st = get_rnr_delays(c, v, p->rnr_delay_ns);
  return st;
}

static enum pp_status check_profile(struct ctx *c, const struct pp_nic_profile *p,
                                    unsigned long line)
{
  char msg[256] = "";
  enum pp_status st = pp_nic_profile_check(p, msg, sizeof msg);
  if (st != PP_OK)
    return fail(c, st, line, "%s", msg[0] ? msg : "invalid NIC profile");
  return PP_OK;
}

static const char *top_kind(const struct node *root)
{
  return root->kind == NODE_SEQ ? "a sequence" : "a scalar";
}

enum pp_status pp_nic_profile_load(const char *path, struct pp_nic_profile *p, char *err,
                                   size_t errlen)
{
  struct ctx c = {.path = path ? path : "<nic>", .err = err, .errlen = errlen};
  if (err && errlen)
    err[0] = '\0';
  if (!path || !p)
    return fail(&c, PP_INVALID, 0, "no path or profile given");
  char *text;
  size_t len;
  enum pp_status st = read_file(&c, path, &text, &len);
  if (st != PP_OK)
    return st;
  struct node *root;
  st = load_tree(&c, text, len, &root);
  if (st == PP_OK && !root)
    st = fail(&c, PP_PARSE, 1, "empty NIC profile (expected a mapping of profile keys)");
  else if (st == PP_OK && root->kind != NODE_MAP)
    st = fail(&c, PP_PARSE, root->line, "expected a mapping at top level, got %s",
              top_kind(root));
  struct pp_nic_profile tmp;
  pp_nic_profile_default(&tmp);
  base_name(path, tmp.name, sizeof tmp.name);
  if (st == PP_OK)
    st = parse_profile(&c, root, "in the NIC profile", &tmp);
  if (st == PP_OK)
    st = check_profile(&c, &tmp, 1);
  node_free(root);
  free(text);
  if (st == PP_OK)
    memcpy(p, &tmp, sizeof *p); /* the bytes, padding (zeroed by the defaults) included */
  return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Scenarios                                                                                  */

void pp_scenario_defaults(struct pp_scenario *sc)
{
  memset(sc, 0, sizeof *sc);
  struct pp_sim_config *s = &sc->sim;
  snprintf(s->name, sizeof s->name, "%s", "scenario");
  s->platform.file[0] = '\0';
  pp_params_defaults(pp_cluster_param_table, pp_cluster_param_count, &s->platform);
  pp_nic_profile_default(&s->nic);
  s->faults.loss = 0.0;
  s->engine.rank = 0;
  s->engine.nranks = 2;
  s->engine.protocol = PP_PROTO_NAIVE;
  s->engine.qp = (struct pp_qp_params){.min_rnr_timer = 12,
                                       .rnr_retry = 7,
                                       .timeout = 14,
                                       .retry_cnt = 7,
                                       .max_rd_atomic = 16,
                                       .mtu = 4096,
                                       .sq_depth = 128,
                                       .rq_depth = 64};
  s->engine.workload = (struct pp_workload){.pattern = PP_PATTERN_PAIR,
                                            .messages = 100,
                                            .size = 4096,
                                            .interval_ns = 0,
                                            .consume_ns = 0,
                                            .consume_ranks = 0};
  s->engine.seed = 1;
  s->seed = 1;
  s->max_sim_time_ns = 60ull * 1000000000ull;
  s->no_progress_ns = PP_NO_PROGRESS_DEFAULT_NS;
  /* protocol naive and workload stream: no parameters of their own (proto_params and
   * workload_params 0) */
}

#define XSTR(x) STR(x)
#define STR(x) #x
/* The keys of a scenario's top level (struct pp_sim_config), the section of a registered
 * protocol named by `protocol:` besides (parse_scenario). */
#define S struct pp_sim_config
static const struct pp_param top_param_table[] = {
    PP_PARAM_COMPOSITE_KEYED("name", "a string, the run's name in reports; default the file's "
                                     "name"),
    PP_PARAM_UINT(S, seed, 0, UINT64_MAX, 1,
                  "the run's one seed: every seeded stream derives from it (prepost/prng.h)"),
    PP_PARAM_COMPOSITE_KEYED("ranks", "required: how many ranks run, 1.." XSTR(PP_MAX_RANKS)),
    PP_PARAM_COMPOSITE_KEYED("platform", "a SimGrid platform file, or {cluster: ...} "
                                         "(platform.cluster below)"),
    PP_PARAM_COMPOSITE_KEYED("nic", "a NIC profile file (models/nics/), or a mapping of its keys "
                                    "(nic below)"),
    PP_PARAM_COMPOSITE_KEYED("protocol", "the protocol's registry name (a plug-in's with "
                                         "--plugin); default naive"),
    PP_PARAM_COMPOSITE_KEYED("workload", "a mapping: what the ranks do (workload below)"),
    PP_PARAM_COMPOSITE_KEYED("qp", "a mapping: every queue pair's attributes (qp below)"),
    PP_PARAM_COMPOSITE_KEYED("faults", "a mapping: the faults injected (faults below)"),
    PP_PARAM_COMPOSITE_KEYED("limits", "a mapping: when the run stops (limits below)"),
    PP_PARAM_COMPOSITE_KEYED("ring", "a mapping: the ring protocols' parameters (ring below)"),
    PP_PARAM_COMPOSITE_KEYED("collective", "a mapping: the collective's parameters (collective "
                                           "below)"),
    PP_PARAM_COMPOSITE_KEYED("p2p", "a mapping: the p2p protocols' parameters (p2p below)"),
    PP_PARAM_COMPOSITE_KEYED("script", "the script workload's programs: a list of {ranks, "
                                       "repeat, ops}"),
    PP_PARAM_COMPOSITE_KEYED("test_bugs", "test only: a list of bug names to inject "
                                          "(engine/core/bugs.h)"),
};
#undef S
static const size_t top_param_count = COUNT_OF(top_param_table);
static const struct keyset top_keys[] = {KEYSET(top)}; /* `help keys`: the protocols' sections
                                                          are theirs */

static const struct pp_param platform_param_table[] = {
    PP_PARAM_COMPOSITE_KEYED("cluster", "a mapping: a generated cluster, every host on one "
                                        "switch (platform.cluster below)"),
};
static const size_t platform_param_count = COUNT_OF(platform_param_table);
static const struct keyset platform_keys[] = {KEYSET(platform)};
static const struct keyset cluster_keys[] = {KEYSET(pp_cluster)};

/* workload: the stream keys (prepost/engine.h's table), slow_ranks, the traffic keys
 * (prepost/p2p_cfg.h's table). */
#define W struct pp_workload
static const struct pp_param workload_own_param_table[] = {
    PP_PARAM_RANKS_KEYED("slow_ranks", W, consume_ranks,
                         "the ranks that apply consume (none: every receiver)"),
};
#undef W
static const size_t workload_own_param_count = COUNT_OF(workload_own_param_table);
static const struct keyset workload_keys[] = {KEYSET(pp_workload), KEYSET(workload_own),
                                              KEYSET(pp_traffic)};

/* The sections qp, faults, limits, ring and p2p: their field tables alone. */
static const struct keyset qp_keys[] = {KEYSET(pp_qp)};
static const struct keyset faults_keys[] = {KEYSET(pp_faults)};
static const struct keyset limits_keys[] = {KEYSET(pp_limits)};
static const struct keyset ring_keys[] = {KEYSET(pp_ring)};
static const struct keyset p2p_keys[] = {KEYSET(pp_p2p)};

/* A section value that must be a mapping ("key:" alone counts as an empty one). */
static enum pp_status section(struct ctx *c, const struct node *root, const char *key,
                              const struct keyset *ks, size_t nks, const struct node **out)
{
  char where[64];
  *out = NULL;
  const struct node *v = get(root, key);
  if (!v || is_empty(v))
    return PP_OK;
  if (v->kind != NODE_MAP)
    return fail(c, PP_PARSE, v->line, "'%s' must be a mapping, got %s", key, show(c, v));
  snprintf(where, sizeof where, "in '%s'", key);
  *out = v;
  return check_keys(c, v, ks, nks, where);
}

static enum pp_status parse_platform(struct ctx *c, const struct node *v, struct pp_platform *pl)
{
  if (v->kind == NODE_SCALAR) {
    if (v->len == 0)
      return fail(c, PP_PARSE, v->line,
                  "'platform' must be a file path or "
                  "{ cluster: { bandwidth: ..., latency: ... } }");
    return resolve(c, "platform", v, pl->file, sizeof pl->file);
  }
  if (v->kind != NODE_MAP)
    return fail(c, PP_PARSE, v->line,
                "'platform' must be a file path or { cluster: { bandwidth: ..., latency: ... } }, "
                "got %s",
                show(c, v));
  enum pp_status st = check_keys(c, v, platform_keys, NKEYSETS(platform_keys), "in 'platform'");
  if (st != PP_OK)
    return st;
  const struct node *cl = get(v, "cluster");
  if (!cl)
    return fail(c, PP_PARSE, v->line, "'platform' mapping needs the key 'cluster'");
  pl->file[0] = '\0';
  if (is_empty(cl))
    return PP_OK; /* default cluster */
  if (cl->kind != NODE_MAP)
    return fail(c, PP_PARSE, cl->line, "'cluster' must be a mapping, got %s", show(c, cl));
  st = check_keys(c, cl, cluster_keys, NKEYSETS(cluster_keys), "in 'platform.cluster'");
  if (st == PP_OK) /* bandwidth, latency */
    st = get_params(c, cl, pp_cluster_param_table, pp_cluster_param_count, NULL, pl);
  return st;
}

static enum pp_status parse_nic(struct ctx *c, const struct node *v, struct pp_nic_profile *nic)
{
  if (v->kind == NODE_SCALAR && v->len > 0) {
    char file[PP_PATH_MAX];
    enum pp_status st = resolve(c, "nic", v, file, sizeof file);
    if (st != PP_OK)
      return st;
    /* Errors inside the profile name the profile file and its line. */
    return pp_nic_profile_load(file, nic, c->err, c->errlen);
  }
  if (v->kind != NODE_MAP)
    return fail(c, PP_PARSE, v->line,
                "'nic' must be a profile file path or a mapping of profile keys, got %s",
                show(c, v));
  pp_nic_profile_default(nic);
  enum pp_status st = parse_profile(c, v, "in 'nic'", nic);
  if (st == PP_OK)
    st = check_profile(c, nic, v->line);
  return st;
}

static enum pp_status parse_workload(struct ctx *c, const struct node *w, uint32_t ranks,
                                     struct pp_workload *wl)
{
  /* kind, pattern, messages, size, interval, consume, consume_jitter, post_delay */
  enum pp_status st =
      get_params(c, w, pp_workload_param_table, pp_workload_param_count, NULL, wl);
  if (st == PP_OK) /* slow_ranks */
    st = get_params_ranked(c, w, workload_own_param_table, workload_own_param_count, NULL, ranks,
                           wl);
  return st;
}

static enum pp_status parse_qp(struct ctx *c, const struct node *q,
                               const struct pp_nic_profile *nic, struct pp_qp_params *qp)
{
  const struct node *v_rd = NULL, *v_mtu = NULL, *v_sq = NULL, *v_rq = NULL;
  enum pp_status st = PP_OK;
  if (q) {
    v_rd = get(q, "max_rd_atomic");
    v_sq = get(q, "sq_depth");
    v_rq = get(q, "rq_depth");
    if ((v_mtu = get(q, "mtu")))
      st = get_mtu(c, "mtu", v_mtu, &qp->mtu);
    if (st == PP_OK) /* the rest: prepost/engine.h's table */
      st = get_params(c, q, pp_qp_param_table, pp_qp_param_count, mtu_key, qp);
    if (st != PP_OK)
      return st;
  }
  /* Against the NIC: explicit values must fit, defaults are lowered to fit. */
  if (qp->max_rd_atomic > nic->max_rd_atomic) {
    if (v_rd)
      return fail(c, PP_INVALID, v_rd->line,
                  "'max_rd_atomic' must be at most the NIC's max_rd_atomic (%" PRIu32 "), got %s",
                  nic->max_rd_atomic, show(c, v_rd));
    qp->max_rd_atomic = (uint8_t)nic->max_rd_atomic;
  }
  if (qp->mtu > nic->mtu) {
    if (v_mtu)
      return fail(c, PP_INVALID, v_mtu->line,
                  "'mtu' must be at most the NIC's mtu (%" PRIu32 "), got %s", nic->mtu,
                  show(c, v_mtu));
    qp->mtu = nic->mtu;
  }
  if (qp->sq_depth > nic->max_qp_wr) {
    if (v_sq)
      return fail(c, PP_INVALID, v_sq->line,
                  "'sq_depth' must be at most the NIC's max_qp_wr (%" PRIu32 "), got %s",
                  nic->max_qp_wr, show(c, v_sq));
    qp->sq_depth = nic->max_qp_wr;
  }
  if (qp->rq_depth > nic->max_qp_wr) {
    if (v_rq)
      return fail(c, PP_INVALID, v_rq->line,
                  "'rq_depth' must be at most the NIC's max_qp_wr (%" PRIu32 "), got %s",
                  nic->max_qp_wr, show(c, v_rq));
    qp->rq_depth = nic->max_qp_wr;
  }
  return PP_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* The ring protocols and the collective workload: workload.kind, sections ring and collective */

/* collective: prepost/collective.h's table, then the keys bounded by the run's ranks. */
#define K struct pp_coll_params
static const struct pp_param coll_own_param_table[] = {
    PP_PARAM_KEYED("root", K, root, PP_PARAM_UINT, 0, UINT32_MAX, 0, "broadcast's root", NULL,
                   PP_PARAM_F_RANK),
    PP_PARAM_RANKS_KEYED("slow_ranks", K, slow_ranks,
                         "the ranks that spend slow_compute instead of compute"),
};
#undef K
static const size_t coll_own_param_count = COUNT_OF(coll_own_param_table);
static const struct keyset collective_keys[] = {KEYSET(pp_coll), KEYSET(coll_own)};

static enum pp_status parse_ring(struct ctx *c, const struct node *r, struct pp_ring_params *p)
{
  enum pp_status st = get_params(c, r, pp_ring_param_table, pp_ring_param_count, NULL, p);
  char msg[256] = "";
  if (st == PP_OK && pp_ring_params_check(p, msg, sizeof msg) != PP_OK)
    st = fail(c, PP_INVALID, r->line, "%s", msg);
  return st;
}

static enum pp_status parse_collective(struct ctx *c, const struct node *m, uint32_t ranks,
                                       struct pp_coll_params *p)
{
  /* op, datatype, size, iterations, warmup, chunk, window, compute, slow_compute, slow_from,
   * slow_until, check: prepost/collective.h's table; root and slow_ranks depend on ranks */
  enum pp_status st = get_params(c, m, pp_coll_param_table, pp_coll_param_count, NULL, p);
  if (st == PP_OK) /* root, slow_ranks */
    st = get_params_ranked(c, m, coll_own_param_table, coll_own_param_count, NULL, ranks, p);
  if (st == PP_OK && !get(m, "slow_until") && get(m, "slow_ranks"))
    p->slow_until = PP_COLL_MAX_ITERATIONS; /* slow throughout unless a window is given */
  char msg[256] = "";
  if (st == PP_OK && pp_coll_params_check(p, ranks, msg, sizeof msg) != PP_OK)
    st = fail(c, PP_INVALID, m->line, "%s", msg);
  return st;
}

/* workload.kind, then the sections `ring` and `collective` (each used only by its protocols or
 * workload, checked whenever given). A collective runs on a ring: its pattern defaults to ring. */
static enum pp_status parse_ring_keys(struct ctx *c, const struct node *root,
                                      const struct node *workload, struct pp_engine_cfg *e)
{
  const struct node *ring, *coll;
  enum pp_status st;
  /* workload.kind was read with the workload's table */
  if (workload && get(workload, "kind") && e->workload.kind == PP_WORKLOAD_COLLECTIVE &&
      !get(workload, "pattern"))
    e->workload.pattern = PP_PATTERN_RING;
  const struct node *kind = workload ? get(workload, "kind") : NULL;
  if (kind && e->workload.kind == PP_WORKLOAD_APP)
    return fail(c, PP_INVALID, kind->line,
                "workload 'app' is a program's callbacks (prepost/app.h, pp_sim_run_app): a "
                "scenario cannot run it");
  if ((st = section(c, root, "ring", ring_keys, NKEYSETS(ring_keys), &ring)) ||
      (st = section(c, root, "collective", collective_keys, NKEYSETS(collective_keys), &coll)))
    return st;
  /* a section of another protocol or workload is checked into a copy, then dropped */
  struct pp_ring_params ring_copy;
  struct pp_coll_params coll_copy;
  pp_ring_params_default(&ring_copy);
  pp_coll_params_default(&coll_copy);
  if (ring && (st = parse_ring(c, ring, pp_engine_cfg_is_ring(e) ? pp_ring_params_of(e)
                                                                 : &ring_copy)))
    return st;
  if (coll && (st = parse_collective(c, coll, e->nranks,
                                     e->workload.kind == PP_WORKLOAD_COLLECTIVE
                                         ? pp_coll_params_of(e)
                                         : &coll_copy)))
    return st;
  return PP_OK;
}

#include "tools/scenario/scenario_p2p.inc"
#include "tools/scenario/scenario_explore.inc"

/* A registered protocol's own parameters (prepost/proto.h: its field table): the top-level
 * section named after it, each key parsed by the table's kind and bounds. */
static enum pp_status parse_proto_params(struct ctx *c, const struct node *root,
                                         struct pp_engine_cfg *e)
{
  const struct pp_proto_def *d = pp_proto_get(e->protocol);
  const struct node *sec = d && d->nparams ? get(root, d->name) : NULL;
  if (!sec)
    return PP_OK;
  if (sec->kind != NODE_MAP)
    return fail(c, PP_PARSE, sec->line, "'%s' must be a mapping of its parameters", d->name);
  void *prm = pp_engine_cfg_proto_params(e);
  for (size_t i = 0; i + 1 < sec->nkids; i += 2) {
    const struct node *k = sec->kids[i], *v = sec->kids[i + 1];
    char key[64], why[192];
    const struct pp_param *p = NULL;
    if (k->kind == NODE_SCALAR && k->len < sizeof key) {
      memcpy(key, k->str, k->len + 1);
      p = pp_param_find(d->params, d->nparams, key);
    }
    if (!p) {
      char list[256];
      size_t o = 0;
      list[0] = '\0';
      for (size_t j = 0; j < d->nparams && o < sizeof list; j++)
        o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", j ? ", " : "", d->params[j].key);
      return fail(c, PP_PARSE, k->line, "unknown key %s in section '%s' (expected one of: %s)",
                  show(c, k), d->name, list);
    }
    if (v->kind != NODE_SCALAR ||
        pp_param_set(p, prm, v->str, v->len, why, sizeof why) != PP_OK)
      return fail(c, PP_INVALID, v->line, "'%s.%s' %s, got %s", d->name, p->key,
                  v->kind == NODE_SCALAR ? why : "must be a value", show(c, v));
  }
  return PP_OK;
}

/* test_bugs: the built-in bugs (engine/core/bugs.h) and the protocol's own (prepost/proto.h). */
static enum pp_status parse_test_bugs(struct ctx *c, const struct node *root,
                                      struct pp_engine_cfg *e)
{
  const struct node *v = get(root, "test_bugs");
  if (!v)
    return PP_OK;
  if (v->kind != NODE_SEQ)
    return fail(c, PP_PARSE, v->line, "'test_bugs' must be a list of bug names, got %s",
                show(c, v));
  for (size_t i = 0; i < v->nkids; i++) {
    const struct node *k = v->kids[i];
    char word[64];
    int b = -1;
    if (k->kind == NODE_SCALAR && k->len < sizeof word && !memchr(k->str, '\0', k->len)) {
      memcpy(word, k->str, k->len + 1);
      b = pp_bug_from_name(word);
      if (b < 0)
        b = pp_proto_bug_bit(e->protocol, word);
    }
    if (b < 0) {
      char list[512];
      size_t o = 0;
      for (int j = 0; j < PP_BUG_COUNT && o < sizeof list; j++)
        o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", j ? ", " : "",
                              pp_bug_name((enum pp_bug)j));
      const struct pp_proto_def *d = pp_proto_get(e->protocol);
      for (uint32_t j = 0; d && j < d->nbugs && o < sizeof list; j++)
        o += (size_t)snprintf(list + o, sizeof list - o, ", %s", d->bugs[j].name);
      return fail(c, PP_INVALID, k->line, "unknown test_bugs %s (expected one of: %s)",
                  show(c, k), list);
    }
    e->test_bugs |= 1u << b;
  }
  return PP_OK;
}

static enum pp_status parse_scenario(struct ctx *c, const struct node *root, struct pp_scenario *s)
{
  struct pp_sim_config *sim = &s->sim;
  /* the top-level keys, and the section of a registered protocol named by `protocol:` */
  const struct node *pn = get(root, "protocol");
  const struct pp_proto_def *pd = NULL;
  enum pp_status st0;
  if (pn && pn->kind == NODE_SCALAR && !memchr(pn->str, '\0', pn->len))
    pd = pp_proto_find(pn->str);
  const bool proto_params = pd && pd->nparams;
  const struct pp_param proto_section[] = {PP_PARAM_COMPOSITE_KEYED(
      proto_params ? pd->name : "", "a mapping: the protocol's parameters")};
  const size_t proto_section_count = 1;
  const struct keyset keys[] = {KEYSET(top), {proto_section, &proto_section_count}};
  int proto;
  if (pn && !pd && (st0 = get_enum(c, "protocol", pn, (int)pp_proto_count(), protocol_name_i,
                                   pp_protocol_from_name, &proto)))
    return st0; /* before its section shows as an unknown key */
  enum pp_status st = check_keys(c, root, keys, proto_params ? 2 : 1, "at top level");
  const struct node *v, *workload, *qp, *faults, *limits;
  if (st != PP_OK)
    return st;
  if ((v = get(root, "name")) && (st = get_string(c, "name", v, sim->name, sizeof sim->name)))
    return st;
  if ((st = get_params(c, root, top_param_table, top_param_count, NULL, sim))) /* seed */
    return st;
  if (!(v = get(root, "ranks")))
    return fail(c, PP_PARSE, root->line, "missing required key 'ranks'");
  if ((st = get_u32(c, "ranks", v, 1, PP_MAX_RANKS, &sim->engine.nranks)))
    return st;
  if ((v = get(root, "platform")) && (st = parse_platform(c, v, &sim->platform)))
    return st;
  if ((v = get(root, "nic")) && (st = parse_nic(c, v, &sim->nic)))
    return st;
  if ((v = get(root, "protocol"))) {
    int proto;
    if ((st = get_enum(c, "protocol", v, (int)pp_proto_count(), protocol_name_i,
                       pp_protocol_from_name, &proto)))
      return st;
    pp_engine_cfg_protocol(&sim->engine, pp_protocol_name((uint32_t)proto));
    if ((st = parse_proto_params(c, root, &sim->engine)))
      return st;
  }
  if ((st = section(c, root, "workload", workload_keys, NKEYSETS(workload_keys), &workload)) ||
      (st = section(c, root, "qp", qp_keys, NKEYSETS(qp_keys), &qp)) ||
      (st = section(c, root, "faults", faults_keys, NKEYSETS(faults_keys), &faults)) ||
      (st = section(c, root, "limits", limits_keys, NKEYSETS(limits_keys), &limits)))
    return st;
  if (workload && (st = parse_workload(c, workload, sim->engine.nranks, &sim->engine.workload)))
    return st;
  pp_engine_cfg_workload_defaults(&sim->engine); /* workload.kind's parameters */
  if ((st = parse_ring_keys(c, root, workload, &sim->engine)))
    return st;
  if ((st = parse_p2p_keys(c, root, workload, &sim->engine)))
    return st;
  if ((st = parse_qp(c, qp, &sim->nic, &sim->engine.qp)))
    return st;
  if ((st = parse_explore_keys(c, root, workload, faults, sim)))
    return st;
  if (limits && (v = get(limits, "max_sim_time"))) {
    if ((st = get_duration(c, "max_sim_time", v, &sim->max_sim_time_ns)))
      return st;
    if (sim->max_sim_time_ns == 0)
      return fail(c, PP_INVALID, v->line, "'max_sim_time' must be > 0, got %s", show(c, v));
  }
  static const char *const max_sim_time[] = {"max_sim_time", NULL}; /* its own "> 0" */
  if (limits && (st = get_params(c, limits, pp_limits_param_table, pp_limits_param_count,
                                 max_sim_time, sim)))
    return st;
  sim->engine.rank = 0;
  sim->engine.seed = sim->seed;

  char msg[256] = "";
  if ((st = pp_engine_cfg_check(&sim->engine, msg, sizeof msg)))
    return fail(c, st, 1, "invalid scenario: %s", msg[0] ? msg : pp_status_desc(st));
  return check_profile(c, &sim->nic, 1);
}

/* Marks a tree (a --set value) as coming from assignment i. */
static void mark_set(struct node *n, size_t i)
{
  n->line = SET_LINE + i;
  for (size_t k = 0; k < n->nkids; k++)
    mark_set(n->kids[k], i);
}

static struct node *scalar_node(const char *s, size_t len, unsigned long line)
{
  struct node *n = calloc(1, sizeof *n);
  if (!n || !(n->str = malloc(len + 1))) {
    free(n);
    return NULL;
  }
  n->kind = NODE_SCALAR;
  n->line = line;
  n->len = len;
  memcpy(n->str, s, len);
  n->str[len] = '\0';
  return n;
}

/* Index in map->kids of the value of key [k, k + klen), or -1. */
static long find_kid(const struct node *map, const char *k, size_t klen)
{
  for (size_t i = 0; i + 1 < map->nkids; i += 2) {
    const struct node *key = map->kids[i];
    if (key->kind == NODE_SCALAR && key->len == klen && memcmp(key->str, k, klen) == 0)
      return (long)i + 1;
  }
  return -1;
}

/* Assignment i, "A.B.C=VALUE", into the tree: the mappings on the way are made (or an empty
 * "A:" becomes one); the value (YAML: a scalar or a flow sequence like [1, 3]) replaces the
 * key's value or is added. Unknown keys are left to the schema check, which names them. */
static enum pp_status apply_set(struct ctx *c, struct node *root, size_t i)
{
  const char *a = c->sets[i], *eq = strchr(a, '=');
  unsigned long line = SET_LINE + i;
  if (!eq || eq == a)
    return fail(c, PP_PARSE, line, "--set wants KEY=VALUE or SECTION.KEY=VALUE");
  struct node *map = root, *val = NULL;
  const char *k = a;
  for (;;) {
    const char *dot = memchr(k, '.', (size_t)(eq - k));
    size_t klen = dot ? (size_t)(dot - k) : (size_t)(eq - k);
    if (klen == 0)
      return fail(c, PP_PARSE, line, "--set wants KEY=VALUE or SECTION.KEY=VALUE");
    long at = find_kid(map, k, klen);
    if (!dot) {
      c->in_set = &c->sets[i];
      enum pp_status st = load_tree(c, eq + 1, strlen(eq + 1), &val);
      c->in_set = NULL;
      if (st != PP_OK)
        return st;
      if (!val && !(val = scalar_node("", 0, line)))
        return fail(c, PP_NOMEM, line, "out of memory");
      mark_set(val, i);
      if (at >= 0) {
        node_free(map->kids[at]);
        map->kids[at] = val;
        return PP_OK;
      }
      struct node *key = scalar_node(k, klen, line);
      if (!key || !node_add(map, key) || !node_add(map, val)) {
        node_free(val);
        return fail(c, PP_NOMEM, line, "out of memory");
      }
      return PP_OK;
    }
    struct node *sub = at >= 0 ? map->kids[at] : NULL;
    if (sub && is_empty(sub)) { /* "qp:" alone: an empty mapping */
      sub->kind = NODE_MAP;
      sub->len = 0;
    }
    if (sub && sub->kind != NODE_MAP)
      return fail(c, PP_PARSE, line, "'%.*s' is not a mapping in the scenario (line %lu)",
                  (int)klen, k, sub->line);
    if (!sub) {
      struct node *key = scalar_node(k, klen, line);
      sub = calloc(1, sizeof *sub);
      if (!key || !sub || !node_add(map, key) || !node_add(map, sub)) {
        free(sub);
        return fail(c, PP_NOMEM, line, "out of memory");
      }
      sub->kind = NODE_MAP;
      sub->line = line;
    }
    map = sub;
    k = dot + 1;
  }
}

static enum pp_status parse_with(const char *text, size_t len, const char *path,
                                 const char *models_dir, const char *const *sets, size_t nsets,
                                 struct pp_scenario *sc, char *err, size_t errlen)
{
  struct ctx c = {.path = path ? path : "<scenario>",
                  .models_dir = models_dir,
                  .sets = sets,
                  .nsets = nsets,
                  .err = err,
                  .errlen = errlen};
  if (err && errlen)
    err[0] = '\0';
  if (!sc)
    return fail(&c, PP_INVALID, 0, "no scenario to fill");
  struct pp_scenario *s = malloc(sizeof *s);
  if (!s)
    return fail(&c, PP_NOMEM, 0, "out of memory");
  pp_scenario_defaults(s);
  enum pp_status st = PP_OK;
  if (path) {
    if (strlen(path) >= sizeof s->path)
      st = fail(&c, PP_INVALID, 0, "path is too long (at most %zu bytes)", sizeof s->path - 1);
    else
      snprintf(s->path, sizeof s->path, "%s", path);
    base_name(path, s->sim.name, sizeof s->sim.name);
  }
  struct node *root = NULL;
  if (st == PP_OK)
    st = load_tree(&c, text, len, &root);
  if (st == PP_OK && !root && nsets) { /* an empty file, all of it from --set */
    if ((root = calloc(1, sizeof *root)))
      *root = (struct node){.kind = NODE_MAP, .line = 1};
    else
      st = fail(&c, PP_NOMEM, 0, "out of memory");
  } else if (st == PP_OK && !root) {
    st = fail(&c, PP_PARSE, 1, "empty scenario (expected a mapping with at least 'ranks')");
  }
  if (st == PP_OK && root->kind != NODE_MAP)
    st = fail(&c, PP_PARSE, root->line, "expected a mapping at top level, got %s",
              top_kind(root));
  for (size_t i = 0; st == PP_OK && i < nsets; i++)
    st = apply_set(&c, root, i);
  if (st == PP_OK)
    st = parse_scenario(&c, root, s);
  node_free(root);
  if (st == PP_OK)
    *sc = *s;
  free(s);
  return st;
}

enum pp_status pp_scenario_parse(const char *text, size_t len, const char *path,
                                 const char *models_dir, struct pp_scenario *sc, char *err,
                                 size_t errlen)
{
  return parse_with(text, len, path, models_dir, NULL, 0, sc, err, errlen);
}

enum pp_status pp_scenario_load_set(const char *path, const char *models_dir,
                                    const char *const *sets, size_t nsets,
                                    struct pp_scenario *sc, char *err, size_t errlen)
{
  struct ctx c = {.path = path ? path : "<scenario>", .err = err, .errlen = errlen};
  if (err && errlen)
    err[0] = '\0';
  if (!path)
    return fail(&c, PP_INVALID, 0, "no path given");
  char *text;
  size_t len;
  enum pp_status st = read_file(&c, path, &text, &len);
  if (st != PP_OK)
    return st;
  st = parse_with(text, len, path, models_dir, sets, nsets, sc, err, errlen);
  free(text);
  return st;
}

enum pp_status pp_scenario_load(const char *path, const char *models_dir, struct pp_scenario *sc,
                                char *err, size_t errlen)
{
  return pp_scenario_load_set(path, models_dir, NULL, 0, sc, err, errlen);
}

bool pp_scenario_runs_nothing(const struct pp_scenario *sc, char *why, size_t whylen)
{
  const struct pp_engine_cfg *e = &sc->sim.engine;
  if (e->workload.kind == PP_WORKLOAD_APP) { /* refused by the parser; a cfg built otherwise */
    snprintf(why, whylen, "workload 'app' is a program's callbacks (prepost/app.h): "
                          "`prepost run` has nothing to run (use stream, traffic, script or "
                          "collective)");
    return true;
  }
  if (e->workload.kind != PP_WORKLOAD_SCRIPT)
    return false; /* stream, traffic: messages >= 1; collective: iterations >= 1 */
  for (uint16_t p = 0; p < pp_script_of(e)->nprogs; p++) {
    const struct pp_script_prog *pg = &pp_script_of(e)->prog[p];
    bool any_rank = false;
    for (size_t w = 0; w < sizeof pg->ranks / sizeof pg->ranks[0]; w++)
      any_rank = any_rank || pg->ranks[w];
    for (uint16_t i = 0; any_rank && i < pg->n; i++) {
      uint8_t k = pp_script_of(e)->op[pg->first + i].kind;
      if (k != PP_SOP_WAIT && k != PP_SOP_WAITALL && k != PP_SOP_CANCEL && k != PP_SOP_COMPUTE)
        return false;
    }
  }
  snprintf(why, whylen, "the script sends and receives nothing (no program has a send, receive "
                        "or probe): the run would do nothing");
  return true;
}

/* One key of a section: its kind, default and sentence (a composite: its sentence). */
static void print_key(FILE *out, const char *section, const struct pp_param *p)
{
  char full[64];
  snprintf(full, sizeof full, "%s%s%s", section ? section : "", section ? "." : "", p->key);
  if (p->kind == PP_PARAM_COMPOSITE) {
    fprintf(out, "  %-26s %s\n", full, p->doc);
    return;
  }
  char def[48], kind[160];
  pp_param_format_default(p, def, sizeof def);
  if (p->kind == PP_PARAM_ENUM) {
    size_t o = (size_t)snprintf(kind, sizeof kind, "one of");
    for (uint64_t i = p->min; i <= p->max && o < sizeof kind; i++)
      o += (size_t)snprintf(kind + o, sizeof kind - o, "%s %s", i > p->min ? "," : "",
                            p->names[i]);
  } else if (p->kind == PP_PARAM_BOOL) {
    snprintf(kind, sizeof kind, "true or false");
  } else if (p->kind == PP_PARAM_PROB) {
    snprintf(kind, sizeof kind, "probability %s", p->max < PP_PARAM_PROB_ONE ? "0 <= p < 1"
                                                                              : "0 <= p <= 1");
  } else if (p->kind == PP_PARAM_RANKS) {
    snprintf(kind, sizeof kind, "list of ranks 0..63, below ranks");
  } else if (p->flags & PP_PARAM_F_RANK) {
    snprintf(kind, sizeof kind, "rank 0..ranks-1");
  } else {
    char lo[32], hi[32];
    struct pp_param b = *p;
    b.offset = 0;
    b.width = 8;
    pp_param_format(&b, &p->min, lo, sizeof lo);
    pp_param_format(&b, &p->max, hi, sizeof hi);
    const char *name = pp_param_kind_name((enum pp_param_kind)p->kind);
    if (p->kind == PP_PARAM_BANDWIDTH && p->min == PP_PARAM_BW_MIN && p->max == PP_PARAM_BW_MAX)
      snprintf(kind, sizeof kind, "%s > 0 (bits/s)", name);
    else if (p->max == UINT64_MAX || (p->max == UINT32_MAX && p->kind == PP_PARAM_UINT))
      snprintf(kind, sizeof kind, "%s >= %s", name, lo);
    else
      snprintf(kind, sizeof kind, "%s %s..%s", name, lo, hi);
  }
  fprintf(out, "  %-26s %s; default %s\n  %-26s %s\n", full, kind, def, "", p->doc);
}

/* Every section of a scenario file with the tables its parser checks its keys against, in the
 * order `help keys` lists them. */
static const struct {
  const char *section;
  const struct keyset *ks;
  size_t nks;
} sections[] = {{NULL, top_keys, NKEYSETS(top_keys)},
                {"workload", workload_keys, NKEYSETS(workload_keys)},
                {"qp", qp_keys, NKEYSETS(qp_keys)},
                {"p2p", p2p_keys, NKEYSETS(p2p_keys)},
                {"ring", ring_keys, NKEYSETS(ring_keys)},
                {"collective", collective_keys, NKEYSETS(collective_keys)},
                {"faults", faults_keys, NKEYSETS(faults_keys)},
                {"limits", limits_keys, NKEYSETS(limits_keys)},
                {"nic", nic_keys, NKEYSETS(nic_keys)},
                {"platform", platform_keys, NKEYSETS(platform_keys)},
                {"platform.cluster", cluster_keys, NKEYSETS(cluster_keys)}};

bool pp_scenario_section_table(const char *section, size_t i, const struct pp_param **t,
                               size_t *n)
{
  for (size_t j = 0; j < NKEYSETS(sections); j++)
    if (!section ? !sections[j].section
                 : sections[j].section && !strcmp(section, sections[j].section)) {
      if (i >= sections[j].nks)
        return false;
      *t = sections[j].ks[i].t;
      *n = *sections[j].ks[i].n;
      return true;
    }
  return false;
}

void pp_scenario_print_keys(FILE *out)
{
  fprintf(out, "Scenario keys (models/scenarios/README.md), for a scenario file and for\n"
               "`prepost run --set KEY=VALUE` (SECTION.KEY for the keys of a section). Sizes:\n"
               "4096, 64B, 4KiB, 1MiB, 1GB; durations: 500ns, 2us, 1.5ms, 10s (bare: ns).\n");
  for (size_t i = 0; i < NKEYSETS(sections); i++) {
    fprintf(out, "\n%s:\n", sections[i].section ? sections[i].section : "top level");
    for (size_t s = 0; s < sections[i].nks; s++)
      for (size_t k = 0; k < *sections[i].ks[s].n; k++)
        print_key(out, sections[i].section, &sections[i].ks[s].t[k]);
  }
}
