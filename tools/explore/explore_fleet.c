/*
 * prepost explore on a fleet (tools/explore/explore_fleet.h): shard arithmetic, the JSON summary (jansson),
 * JUnit XML, progress lines, and `prepost explore merge`.
 */
#define _POSIX_C_SOURCE 200809L
#include "tools/explore/explore_fleet.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/core/bugs.h"
#include "tools/cli/buildinfo.h"
#include "tools/cli/cli_util.h"

#define SUMMARY_FORMAT "prepost-explore-summary/1"
#define SUMMARY_FILE "summary.json"
#define JUNIT_MAX_LISTED 50 /* failing seeds listed per invariant in the JUnit file */
#define MERGE_MAX_INPUTS 4096

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

/* ------------------------------------------------------------------ shards */

int pp_fleet_parse_shard(const char *s, uint32_t *k, uint32_t *n)
{
  const char *slash = strchr(s, '/');
  char kbuf[32];
  if (!slash || (size_t)(slash - s) >= sizeof kbuf)
    return -1;
  memcpy(kbuf, s, (size_t)(slash - s));
  kbuf[slash - s] = '\0';
  uint32_t kk, nn;
  if (pp_cli_parse_u32(slash + 1, 1, 1000000, &nn) || pp_cli_parse_u32(kbuf, 1, nn, &kk))
    return -1;
  *k = kk;
  *n = nn;
  return 0;
}

uint64_t pp_fleet_shard_count(uint64_t count, uint32_t k, uint32_t n)
{
  return count > k - 1 ? (count - (k - 1) + n - 1) / n : 0;
}

/* ------------------------------------------------------------------ progress */

static void fmt_duration(double s, char *buf, size_t len)
{
  uint64_t t = s > 0 ? (uint64_t)(s + 0.5) : 0;
  if (t >= 3600)
    snprintf(buf, len, "%" PRIu64 "h%02" PRIu64 "m", t / 3600, t / 60 % 60);
  else if (t >= 60)
    snprintf(buf, len, "%" PRIu64 "m%02" PRIu64 "s", t / 60, t % 60);
  else
    snprintf(buf, len, "%" PRIu64 "s", t);
}

void pp_fleet_progress(FILE *out, uint64_t done, uint64_t total, double budget_s, double elapsed_s,
                       unsigned failures)
{
  double rate = elapsed_s > 0 ? done / elapsed_s : 0;
  char eta[32], el[32];
  fmt_duration(elapsed_s, el, sizeof el);
  if (total) {
    if (rate > 0)
      fmt_duration((double)(total - (done < total ? done : total)) / rate, eta, sizeof eta);
    else
      snprintf(eta, sizeof eta, "?");
    fprintf(out,
            "explore: progress %" PRIu64 "/%" PRIu64 " seeds (%.0f%%) in %s, %.1f seeds/s, ETA %s, "
            "%u failure%s\n",
            done, total, 100.0 * done / total, el, rate, eta, failures, failures == 1 ? "" : "s");
  } else {
    fmt_duration(budget_s - elapsed_s, eta, sizeof eta);
    fprintf(out, "explore: progress %" PRIu64 " seeds in %s, %.1f seeds/s, %s of the budget left, "
                 "%u failure%s\n",
            done, el, rate, eta, failures, failures == 1 ? "" : "s");
  }
  fflush(out);
}

/* ------------------------------------------------------------------ summary */

/* The invariant and its message with every run of digits as '#': failures that differ only in
 * numbers (a seed, a sequence number, a time) are probably the same bug. */
static void signature(const char *inv, const char *why, char *buf, size_t len)
{
  size_t at = (size_t)snprintf(buf, len, "%s: ", inv);
  for (const char *p = why; *p && at + 1 < len; p++) {
    if (isdigit((unsigned char)*p)) {
      buf[at++] = '#';
      while (isdigit((unsigned char)p[1]))
        p++;
    } else {
      buf[at++] = *p;
    }
  }
  if (at < len)
    buf[at] = '\0';
}

/* Checks every json_* allocation at once: a NULL anywhere makes the whole summary NULL. */
static bool set(json_t *o, const char *k, json_t *v, bool *ok)
{
  if (!v || json_object_set_new(o, k, v))
    *ok = false;
  return *ok;
}

static json_t *mix_object(const struct pp_fleet_run *r, bool *ok)
{
  json_t *m = json_object();
  if (!m) {
    *ok = false;
    return NULL;
  }
  char faults[256], bugs[256] = "";
  pp_faults_format(r->sp->faults, faults, sizeof faults);
  size_t at = 0;
  for (int b = 0; b < PP_BUG_COUNT; b++)
    if (r->sp->bugs >> b & 1 && at < sizeof bugs)
      at += (size_t)snprintf(bugs + at, sizeof bugs - at, "%s%s", at ? "," : "",
                             pp_bug_name((enum pp_bug)b));
  set(m, "protocol", json_string(r->sp->gen >= 0 ? pp_explore_gens[r->sp->gen].name : "mix"), ok);
  set(m, "faults", json_string(faults), ok);
  set(m, "fault_rate", json_real(r->sp->fault_rate), ok);
  set(m, "max_ranks", json_integer(r->sp->max_ranks), ok);
  set(m, "max_messages", json_integer(r->sp->max_messages), ok);
  set(m, "max_size", json_integer(r->sp->max_size), ok);
  set(m, "bugs", json_string(bugs), ok);
  set(m, "timeout_s", json_real(r->timeout_s), ok);
  set(m, "options", json_string(r->options), ok);
  return m;
}

static json_t *files_of(const char *out, uint64_t seed, bool *ok)
{
  static const char *const suffix[] = {".yaml", ".trace", ".log", "-shrunk.yaml"};
  json_t *a = json_array();
  if (!a) {
    *ok = false;
    return NULL;
  }
  for (size_t i = 0; i < sizeof suffix / sizeof suffix[0]; i++) {
    char name[96], path[PP_PATH_MAX + 96];
    struct stat st;
    snprintf(name, sizeof name, "seed-%" PRIu64 "%s", seed, suffix[i]);
    snprintf(path, sizeof path, "%s/%s", out, name);
    if (stat(path, &st) == 0 && json_array_append_new(a, json_string(name)))
      *ok = false;
  }
  return a;
}

/* The parts of a summary computed from its failures: failures_per_invariant and distinct. */
static bool derive(json_t *s)
{
  bool ok = true;
  json_t *failures = json_object_get(s, "failures");
  json_t *per = json_object(), *groups = json_object(), *distinct = json_array();
  if (!per || !groups || !distinct) {
    json_decref(per);
    json_decref(groups);
    json_decref(distinct);
    return false;
  }
  for (int i = 1; i < PP_INV_COUNT; i++)
    set(per, pp_inv_name((enum pp_inv)i), json_integer(0), &ok);
  size_t i;
  json_t *f;
  json_array_foreach(failures, i, f) {
    const char *inv = json_string_value(json_object_get(f, "invariant"));
    const char *why = json_string_value(json_object_get(f, "why"));
    if (!inv || !why)
      continue;
    json_t *n = json_object_get(per, inv);
    if (n)
      json_integer_set(n, json_integer_value(n) + 1);
    char sig[512];
    signature(inv, why, sig, sizeof sig);
    json_t *g = json_object_get(groups, sig);
    if (!g) {
      g = json_object();
      set(g, "invariant", json_string(inv), &ok);
      set(g, "signature", json_string(sig), &ok);
      set(g, "count", json_integer(0), &ok);
      set(g, "seeds", json_array(), &ok);
      if (!ok || json_object_set_new(groups, sig, g) || json_array_append(distinct, g))
        ok = false;
    }
    if (!ok)
      break;
    json_t *c = json_object_get(g, "count");
    json_integer_set(c, json_integer_value(c) + 1);
    if (json_array_append(json_object_get(g, "seeds"), json_object_get(f, "seed")))
      ok = false;
  }
  json_decref(groups);
  set(s, "failures_per_invariant", per, &ok);
  set(s, "distinct", distinct, &ok);
  return ok;
}

static json_t *rates(uint64_t seeds, uint64_t messages, double wall_s, double shard_s, bool *ok)
{
  json_t *r = json_object();
  set(r, "wall_s", json_real(wall_s), ok);
  set(r, "shard_seconds", json_real(shard_s), ok);
  set(r, "seeds_per_s", json_real(wall_s > 0 ? seeds / wall_s : 0), ok);
  set(r, "seeds_per_shard_second", json_real(shard_s > 0 ? seeds / shard_s : 0), ok);
  set(r, "messages_per_s", json_real(wall_s > 0 ? messages / wall_s : 0), ok);
  return r;
}

static json_t *summary_of_run(const struct pp_fleet_run *r)
{
  bool ok = true;
  json_t *s = json_object(), *b = json_object(), *seeds = json_object(), *tot = json_object();
  json_t *shards = json_array(), *shard = json_object(), *fails = json_array();
  if (!s || !b || !seeds || !tot || !shards || !shard || !fails) {
    json_decref(s), json_decref(b), json_decref(seeds), json_decref(tot);
    json_decref(shards), json_decref(shard), json_decref(fails);
    return NULL;
  }
  set(s, "format", json_string(SUMMARY_FORMAT), &ok);
  set(b, "version", json_string(pp_build_version()), &ok);
  set(b, "commit", json_string(pp_build_commit()), &ok);
  set(s, "prepost", b, &ok);
  set(s, "mix", mix_object(r, &ok), &ok);
  set(seeds, "from", json_integer((json_int_t)r->from), &ok);
  set(seeds, "count", json_integer((json_int_t)r->count), &ok);
  set(seeds, "budget_s", json_real(r->budget_s), &ok);
  set(seeds, "shards", json_integer(r->shards), &ok);
  set(s, "seeds", seeds, &ok);
  set(shard, "shard", json_integer(r->shard), &ok);
  set(shard, "seeds_run", json_integer((json_int_t)r->done), &ok);
  set(shard, "complete", json_boolean(r->complete), &ok);
  set(shard, "wall_s", json_real(r->wall_s), &ok);
  if (ok && json_array_append_new(shards, shard))
    ok = false;
  set(s, "shards", shards, &ok);
  set(s, "seeds_run", json_integer((json_int_t)r->done), &ok);
  set(s, "complete", json_boolean(r->complete), &ok);
  set(tot, "messages", json_integer((json_int_t)r->messages), &ok);
  set(tot, "sim_ns", json_integer((json_int_t)r->sim_ns), &ok);
  set(s, "totals", tot, &ok);
  for (unsigned i = 0; ok && i < r->nfailures; i++) {
    const struct pp_fleet_failure *f = &r->failures[i];
    json_t *o = json_object();
    char repro[1024];
    snprintf(repro, sizeof repro, "prepost explore --from %" PRIu64 " --seeds 1%s", f->seed,
             r->options);
    set(o, "seed", json_integer((json_int_t)f->seed), &ok);
    set(o, "invariant", json_string(pp_inv_name(f->inv)), &ok);
    set(o, "why", json_string(f->why), &ok);
    set(o, "reproduce", json_string(repro), &ok);
    set(o, "files", files_of(r->out, f->seed, &ok), &ok);
    if (!ok || json_array_append_new(fails, o))
      ok = false;
  }
  set(s, "failures", fails, &ok);
  set(s, "rates", rates(r->done, r->messages, r->wall_s, r->wall_s, &ok), &ok);
  if (!ok || !derive(s)) {
    json_decref(s);
    return NULL;
  }
  return s;
}

/* ------------------------------------------------------------------ writing */

static bool make_dir(const char *dir)
{
  if (mkdir(dir, 0777) == 0 || errno == EEXIST)
    return true;
  fprintf(stderr, "prepost explore: cannot create '%s': %s\n", dir, strerror(errno));
  return false;
}

static int write_json(json_t *s, const char *dir)
{
  char path[PP_PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/" SUMMARY_FILE, dir);
  if (!make_dir(dir))
    return -1;
  if (json_dump_file(s, path, JSON_INDENT(2) | JSON_REAL_PRECISION(17))) {
    fprintf(stderr, "prepost explore: cannot write %s: %s\n", path, strerror(errno));
    return -1;
  }
  printf("summary:   %s\n", path);
  return 0;
}

/* XML text or attribute value: the five entities; other control characters than tab and newline
 * are not allowed in XML 1.0 and become '?'. */
static void xml(FILE *o, const char *s)
{
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    switch (c) {
    case '&': fputs("&amp;", o); break;
    case '<': fputs("&lt;", o); break;
    case '>': fputs("&gt;", o); break;
    case '"': fputs("&quot;", o); break;
    case '\'': fputs("&apos;", o); break;
    default: fputc(c < 0x20 && c != '\n' && c != '\t' ? '?' : c, o);
    }
  }
}

static void property(FILE *o, const char *name, const char *value)
{
  fputs("      <property name=\"", o);
  xml(o, name);
  fputs("\" value=\"", o);
  xml(o, value);
  fputs("\"/>\n", o);
}

static const char *str_at(json_t *s, const char *a, const char *b)
{
  json_t *v = json_object_get(s, a);
  if (b)
    v = json_object_get(v, b);
  return json_string_value(v) ? json_string_value(v) : "";
}

static json_int_t int_at(json_t *s, const char *a, const char *b)
{
  json_t *v = json_object_get(s, a);
  if (b)
    v = json_object_get(v, b);
  return json_integer_value(v);
}

/* One testcase per invariant (a bounded file whatever the number of seeds): it fails when a seed
 * broke it, its failure lists the seeds (the first JUNIT_MAX_LISTED) with their reproductions. */
static int write_junit(json_t *s, const char *path)
{
  FILE *o = fopen(path, "w");
  if (!o) {
    fprintf(stderr, "prepost explore: cannot write %s: %s\n", path, strerror(errno));
    return -1;
  }
  json_t *per = json_object_get(s, "failures_per_invariant");
  json_t *fails = json_object_get(s, "failures");
  int broken = 0;
  for (int i = 1; i < PP_INV_COUNT; i++)
    broken += json_integer_value(json_object_get(per, pp_inv_name((enum pp_inv)i))) > 0;
  double wall = json_real_value(json_object_get(json_object_get(s, "rates"), "wall_s"));
  json_int_t run = int_at(s, "seeds_run", NULL);
  fprintf(o, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  fprintf(o, "<testsuites name=\"prepost explore\" tests=\"%d\" failures=\"%d\" errors=\"0\" "
             "time=\"%.3f\">\n", PP_INV_COUNT - 1, broken, wall);
  fprintf(o, "  <testsuite name=\"prepost explore\" tests=\"%d\" failures=\"%d\" errors=\"0\" "
             "skipped=\"0\" time=\"%.3f\">\n    <properties>\n", PP_INV_COUNT - 1, broken, wall);
  char num[64];
  property(o, "prepost.version", str_at(s, "prepost", "version"));
  property(o, "prepost.commit", str_at(s, "prepost", "commit"));
  property(o, "protocol", str_at(s, "mix", "protocol"));
  property(o, "faults", str_at(s, "mix", "faults"));
  property(o, "options", str_at(s, "mix", "options"));
  snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, int_at(s, "seeds", "from"));
  property(o, "seeds.from", num);
  snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, int_at(s, "seeds", "count"));
  property(o, "seeds.count", num);
  snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, int_at(s, "seeds", "shards"));
  property(o, "seeds.shards", num);
  snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, run);
  property(o, "seeds.run", num);
  fprintf(o, "    </properties>\n");
  for (int i = 1; i < PP_INV_COUNT; i++) {
    const char *name = pp_inv_name((enum pp_inv)i);
    json_int_t n = json_integer_value(json_object_get(per, name));
    fprintf(o, "    <testcase classname=\"prepost.explore\" name=\"invariant %s\" time=\"0\"",
            name);
    if (n == 0) {
      fprintf(o, "/>\n");
      continue;
    }
    fprintf(o, ">\n      <failure type=\"%s\" message=\"", name);
    snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT " of %" JSON_INTEGER_FORMAT " seeds", n, run);
    xml(o, num);
    fprintf(o, "\">");
    size_t k;
    json_t *f;
    json_int_t listed = 0;
    json_array_foreach(fails, k, f) {
      if (strcmp(str_at(f, "invariant", NULL), name))
        continue;
      if (listed++ == JUNIT_MAX_LISTED) {
        fprintf(o, "... and %" JSON_INTEGER_FORMAT " more (summary.json lists them all)\n",
                n - JUNIT_MAX_LISTED);
        break;
      }
      fprintf(o, "seed %" JSON_INTEGER_FORMAT ": ", int_at(f, "seed", NULL));
      xml(o, str_at(f, "why", NULL));
      fputs("\n  reproduce: ", o);
      xml(o, str_at(f, "reproduce", NULL));
      fputs("\n", o);
    }
    fprintf(o, "</failure>\n    </testcase>\n");
  }
  fprintf(o, "  </testsuite>\n</testsuites>\n");
  if (fclose(o)) {
    fprintf(stderr, "prepost explore: cannot write %s: %s\n", path, strerror(errno));
    return -1;
  }
  printf("junit:     %s\n", path);
  return 0;
}

int pp_fleet_report(const struct pp_fleet_run *r, bool json, const char *junit)
{
  json_t *s = summary_of_run(r);
  if (!s) {
    fprintf(stderr, "prepost explore: out of memory for the summary\n");
    return -1;
  }
  int rc = 0;
  if (json && write_json(s, r->out))
    rc = -1;
  if (junit && write_junit(s, junit))
    rc = -1;
  json_decref(s);
  return rc;
}

/* ------------------------------------------------------------------ merge */

const char *const pp_explore_merge_usage =
    "usage: prepost explore merge [--out DIR] [--junit FILE] [--partial] [-h|--help] DIR|FILE...\n"
    "\n"
    "Combines the outputs of shards (each the --out DIR of `prepost explore --shard K/N --json`,\n"
    "or its summary.json) into one summary (OUT/summary.json: seeds, totals, failures per\n"
    "invariant, rates) and one failure set: every failing seed once (its files copied into\n"
    "OUT), grouped by signature (the invariant and its message with numbers masked). Refuses\n"
    "summaries of other builds (version, commit), other mixes (protocol, faults, sizes, bugs,\n"
    "timeout) or other seed ranges, a shard given twice with other results, and a seed count\n"
    "whose shards are not all there (--partial merges what there is).\n"
    "\n"
    "  --out DIR     where the summary and the failure files go (default explore-merged)\n"
    "  --junit FILE  also a JUnit XML report of the merged result\n"
    "  --partial     accept missing shards (the summary says complete: false)\n"
    "\n"
    "Exit codes: 0 no failure, 1 failures, 2 usage error or summaries that do not merge.\n";

static int merge_error(const char *fmt, const char *a, const char *b)
{
  fprintf(stderr, "prepost explore merge: ");
  fprintf(stderr, fmt, a, b);
  fputc('\n', stderr);
  return EXIT_USAGE;
}

static json_t *load_summary(const char *arg, char *dir, size_t dirlen)
{
  struct stat st;
  char path[PP_PATH_MAX + 32];
  if (stat(arg, &st) == 0 && S_ISDIR(st.st_mode)) {
    snprintf(dir, dirlen, "%s", arg);
    snprintf(path, sizeof path, "%s/" SUMMARY_FILE, arg);
  } else {
    snprintf(path, sizeof path, "%s", arg);
    const char *slash = strrchr(arg, '/');
    snprintf(dir, dirlen, "%.*s", slash ? (int)(slash - arg) : 1, slash ? arg : ".");
  }
  json_error_t e;
  json_t *s = json_load_file(path, 0, &e);
  if (!s) {
    fprintf(stderr, "prepost explore merge: %s: %s (line %d)\n", path, e.text, e.line);
    return NULL;
  }
  if (strcmp(str_at(s, "format", NULL), SUMMARY_FORMAT) ||
      !json_is_array(json_object_get(s, "shards")) ||
      !json_is_array(json_object_get(s, "failures")) ||
      !json_is_object(json_object_get(s, "mix"))) {
    fprintf(stderr, "prepost explore merge: %s is not a summary of prepost explore --json (%s)\n",
            path, SUMMARY_FORMAT);
    json_decref(s);
    return NULL;
  }
  return s;
}

/* The first key of a and b whose values differ ("" when equal). */
static const char *first_difference(json_t *a, json_t *b)
{
  const char *k;
  json_t *v;
  json_object_foreach(a, k, v) {
    if (!json_equal(v, json_object_get(b, k)))
      return k;
  }
  json_object_foreach(b, k, v) {
    if (!json_object_get(a, k))
      return k;
  }
  return "";
}

static int copy_file(const char *from, const char *to)
{
  FILE *i = fopen(from, "rb"), *o = i ? fopen(to, "wb") : NULL;
  int rc = i && o ? 0 : -1;
  char buf[1 << 16];
  size_t n;
  while (rc == 0 && (n = fread(buf, 1, sizeof buf, i)) > 0)
    if (fwrite(buf, 1, n, o) != n)
      rc = -1;
  if (i && ferror(i))
    rc = -1;
  if (i)
    fclose(i);
  if (o && fclose(o))
    rc = -1;
  return rc;
}

struct merge {
  json_t *out;     /* the merged summary */
  json_t *by_seed; /* "seed" -> failure */
  json_t *shards;  /* "K" -> the shard entry and where it came from */
  json_t *origin;  /* "K" -> the input it came from */
  double wall_max, shard_s;
  const char *outdir;
};

static int merge_one(struct merge *m, json_t *s, const char *arg, const char *dir,
                     const char *first)
{
  json_t *o = m->out;
  if (!json_equal(json_object_get(s, "prepost"), json_object_get(o, "prepost"))) {
    char a[256], b[256];
    snprintf(a, sizeof a, "%s was written by prepost %s (commit %s)", arg,
             str_at(s, "prepost", "version"), str_at(s, "prepost", "commit"));
    snprintf(b, sizeof b, "%s by prepost %s (commit %s)", first, str_at(o, "prepost", "version"),
             str_at(o, "prepost", "commit"));
    return merge_error("%s, %s: refusing to mix builds (rerun the shards with one build)", a, b);
  }
  const char *d = first_difference(json_object_get(s, "mix"), json_object_get(o, "mix"));
  if (*d) {
    char a[256];
    snprintf(a, sizeof a, "%s and %s explored different mixes", arg, first);
    return merge_error("%s (mix.%s differs): refusing to merge them", a, d);
  }
  d = first_difference(json_object_get(s, "seeds"), json_object_get(o, "seeds"));
  if (*d) {
    char a[256];
    snprintf(a, sizeof a, "%s and %s ran different seed ranges", arg, first);
    return merge_error("%s (seeds.%s differs): refusing to merge them", a, d);
  }
  /* shards: new ones are added; one seen before must be the same result (a retried task) */
  size_t i;
  json_t *sh;
  bool fresh = false, repeat = false;
  json_array_foreach(json_object_get(s, "shards"), i, sh) {
    char key[32];
    snprintf(key, sizeof key, "%" JSON_INTEGER_FORMAT, int_at(sh, "shard", NULL));
    json_t *seen = json_object_get(m->shards, key);
    if (!seen) {
      fresh = true;
      continue;
    }
    repeat = true;
    json_t *a = json_copy(seen), *b = json_copy(sh);
    json_object_del(a, "wall_s");
    json_object_del(b, "wall_s");
    bool same = json_equal(a, b);
    json_decref(a);
    json_decref(b);
    if (!same) {
      char k[64];
      snprintf(k, sizeof k, "shard %s", key);
      return merge_error("%s is in %s with other results than before: refusing to merge", k, arg);
    }
  }
  if (fresh && repeat)
    return merge_error("%s holds shards merged already and new ones (%s): merge the shards "
                       "themselves", arg, "overlapping inputs");
  if (repeat) {
    fprintf(stderr, "prepost explore merge: note: %s repeats shards merged already: skipped\n",
            arg);
    return EXIT_OK;
  }
  json_array_foreach(json_object_get(s, "shards"), i, sh) {
    char key[32];
    snprintf(key, sizeof key, "%" JSON_INTEGER_FORMAT, int_at(sh, "shard", NULL));
    json_object_set(m->shards, key, sh);
    json_object_set_new(m->origin, key, json_string(arg));
    double w = json_real_value(json_object_get(sh, "wall_s"));
    m->shard_s += w;
    if (w > m->wall_max)
      m->wall_max = w;
  }
  /* totals */
  json_t *t = json_object_get(o, "totals");
  const char *k;
  json_t *v;
  json_object_foreach(json_object_get(s, "totals"), k, v) {
    json_t *cur = json_object_get(t, k);
    json_object_set_new(t, k, json_integer(json_integer_value(cur) + json_integer_value(v)));
  }
  json_object_set_new(o, "seeds_run", json_integer(int_at(o, "seeds_run", NULL) +
                                                   int_at(s, "seeds_run", NULL)));
  if (!json_is_true(json_object_get(s, "complete")))
    json_object_set_new(o, "complete", json_false());
  /* failures, one per seed; the same seed twice must have the same verdict */
  json_t *f;
  json_array_foreach(json_object_get(s, "failures"), i, f) {
    if (!json_is_integer(json_object_get(f, "seed")) || int_at(f, "seed", NULL) < 0)
      return merge_error("%s: a failure without a seed%s", arg,
                         " (not written by prepost explore --json: damaged or edited?)");
    char key[32];
    snprintf(key, sizeof key, "%" JSON_INTEGER_FORMAT, int_at(f, "seed", NULL));
    json_t *seen = json_object_get(m->by_seed, key);
    if (seen) {
      if (!json_equal(json_object_get(seen, "invariant"), json_object_get(f, "invariant")) ||
          !json_equal(json_object_get(seen, "why"), json_object_get(f, "why"))) {
        char a[64];
        snprintf(a, sizeof a, "seed %s", key);
        return merge_error("%s failed differently in %s than before: not the same build or not "
                           "deterministic", a, arg);
      }
      continue;
    }
    json_object_set(m->by_seed, key, f);
    size_t j;
    json_t *name;
    json_array_foreach(json_object_get(f, "files"), j, name) {
      const char *n = json_string_value(name);
      if (!n || !*n || strchr(n, '/') || !strcmp(n, ".") || !strcmp(n, ".."))
        continue; /* a file name of the shard's own directory, nothing else */
      char from[2 * PP_PATH_MAX], to[2 * PP_PATH_MAX];
      snprintf(from, sizeof from, "%s/%s", dir, n);
      snprintf(to, sizeof to, "%s/%s", m->outdir, n);
      if (strcmp(from, to) && copy_file(from, to))
        fprintf(stderr, "prepost explore merge: cannot copy %s to %s\n", from, to);
    }
  }
  return EXIT_OK;
}

static int cmp_failure(const void *a, const void *b)
{
  json_int_t x = int_at(*(json_t *const *)a, "seed", NULL);
  json_int_t y = int_at(*(json_t *const *)b, "seed", NULL);
  return x < y ? -1 : x > y;
}

/* The failures sorted by seed, the shards by number; missing shards of a fixed count. */
static int merge_finish(struct merge *m, bool partial)
{
  json_t *o = m->out;
  size_t n = json_object_size(m->by_seed), i = 0;
  json_t **v = malloc((n ? n : 1) * sizeof *v);
  if (!v)
    return merge_error("%s%s", "out of memory", "");
  const char *k;
  json_t *f;
  json_object_foreach(m->by_seed, k, f)
    v[i++] = f;
  qsort(v, n, sizeof *v, cmp_failure);
  json_t *fails = json_array();
  for (i = 0; i < n; i++)
    json_array_append(fails, v[i]);
  free(v);
  json_object_set_new(o, "failures", fails);
  json_int_t nshards = int_at(o, "seeds", "shards");
  json_t *shards = json_array();
  char missing[512] = "";
  size_t at = 0;
  for (json_int_t s = 1; s <= nshards; s++) {
    char key[32];
    snprintf(key, sizeof key, "%" JSON_INTEGER_FORMAT, s);
    json_t *sh = json_object_get(m->shards, key);
    if (sh)
      json_array_append(shards, sh);
    else if (at < sizeof missing)
      at += (size_t)snprintf(missing + at, sizeof missing - at, "%s%s", at ? ", " : "", key);
  }
  json_object_set_new(o, "shards", shards);
  if (at) {
    if (!partial) {
      char of[64];
      snprintf(of, sizeof of, "%" JSON_INTEGER_FORMAT, nshards);
      return merge_error("shards %s of %s are missing (merge them too, or --partial)", missing, of);
    }
    json_object_set_new(o, "complete", json_false());
  }
  json_object_set_new(o, "rates",
                      rates((uint64_t)int_at(o, "seeds_run", NULL),
                            (uint64_t)int_at(o, "totals", "messages"), m->wall_max, m->shard_s,
                            &(bool){true}));
  return derive(o) ? EXIT_OK : merge_error("%s%s", "out of memory", "");
}

static void print_merged(json_t *o)
{
  json_t *per = json_object_get(o, "failures_per_invariant");
  json_int_t nf = (json_int_t)json_array_size(json_object_get(o, "failures"));
  printf("merge: %" JSON_INTEGER_FORMAT " seeds in %zu shard%s of %" JSON_INTEGER_FORMAT
         " (prepost %s, commit %s), %" JSON_INTEGER_FORMAT " messages delivered, "
         "%" JSON_INTEGER_FORMAT " failure%s, %zu distinct",
         int_at(o, "seeds_run", NULL), json_array_size(json_object_get(o, "shards")),
         json_array_size(json_object_get(o, "shards")) == 1 ? "" : "s",
         int_at(o, "seeds", "shards"),
         str_at(o, "prepost", "version"), str_at(o, "prepost", "commit"),
         int_at(o, "totals", "messages"), nf, nf == 1 ? "" : "s",
         json_array_size(json_object_get(o, "distinct")));
  const char *sep = " (";
  for (int i = 1; i < PP_INV_COUNT; i++) {
    json_int_t n = json_integer_value(json_object_get(per, pp_inv_name((enum pp_inv)i)));
    if (n) {
      printf("%s%s %" JSON_INTEGER_FORMAT, sep, pp_inv_name((enum pp_inv)i), n);
      sep = ", ";
    }
  }
  printf("%s\n", *sep == ',' ? ")" : "");
}

int pp_cli_explore_merge(int argc, char **argv)
{
  const char *outdir = "explore-merged", *junit = NULL;
  bool partial = false;
  const char *in[MERGE_MAX_INPUTS];
  int nin = 0;
  enum { M_PARTIAL = 256, M_OUT, M_JUNIT };
  static const struct option opts[] = {{"partial", no_argument, NULL, M_PARTIAL},
                                       {"out", required_argument, NULL, M_OUT},
                                       {"junit", required_argument, NULL, M_JUNIT},
                                       {"help", no_argument, NULL, 'h'},
                                       {0, 0, 0, 0}};
  struct pp_cli_opts g = {.argc = argc, .argv = argv, .shorts = "h", .longs = opts,
                          .who = "prepost explore merge", .usage = pp_explore_merge_usage};
  int c;
  while ((c = pp_cli_next(&g)) != PP_CLI_END) {
    if (c == PP_CLI_BAD)
      return EXIT_USAGE;
    if (c == 'h') {
      fputs(pp_explore_merge_usage, stdout);
      return EXIT_OK;
    }
    if (c == M_PARTIAL)
      partial = true;
    else
      *(c == M_OUT ? &outdir : &junit) = g.arg;
  }
  for (int i = g.rest; i < argc; i++) {
    if (nin == MERGE_MAX_INPUTS)
      return pp_cli_usage_error("prepost explore merge", pp_explore_merge_usage,
                                "too many inputs (at most 4096): merge in steps, from '%s' on",
                                argv[i]);
    in[nin++] = argv[i];
  }
  if (!nin)
    return pp_cli_usage_error("prepost explore merge", pp_explore_merge_usage, "%s",
                              "no shard output to merge");
  if (!make_dir(outdir))
    return EXIT_USAGE;
  struct merge m = {.by_seed = json_object(), .shards = json_object(), .origin = json_object(),
                    .outdir = outdir};
  int rc = EXIT_USAGE;
  for (int i = 0; i < nin; i++) {
    char dir[PP_PATH_MAX];
    json_t *s = load_summary(in[i], dir, sizeof dir);
    if (!s)
      goto out;
    if (!m.out) { /* the first one sets build, mix and seeds; its counts start from zero */
      m.out = json_deep_copy(s);
      json_object_set_new(m.out, "shards", json_array());
      json_object_set_new(m.out, "failures", json_array());
      json_object_set_new(m.out, "seeds_run", json_integer(0));
      json_object_set_new(m.out, "complete", json_true());
      const char *k;
      json_t *v;
      json_object_foreach(json_object_get(m.out, "totals"), k, v)
        json_integer_set(v, 0);
    }
    rc = merge_one(&m, s, in[i], dir, in[0]);
    json_decref(s);
    if (rc != EXIT_OK)
      goto out;
  }
  if ((rc = merge_finish(&m, partial)) != EXIT_OK)
    goto out;
  print_merged(m.out);
  rc = write_json(m.out, outdir) || (junit && write_junit(m.out, junit)) ? EXIT_USAGE
       : json_array_size(json_object_get(m.out, "failures"))             ? EXIT_FAIL
                                                                           : EXIT_OK;
out:
  json_decref(m.out);
  json_decref(m.by_seed);
  json_decref(m.shards);
  json_decref(m.origin);
  return rc;
}
