/*
 * tools/explore_fleet: the explorer on a fleet. Shards partition a seed range exactly; the merged
 * summary of the shards equals the summary of the unsharded run (every deterministic field);
 * merge refuses other builds, other mixes, other ranges, missing shards and conflicting repeats;
 * the JUnit file has the testsuite/testcase/failure shape CI systems read (checked with python3's
 * XML parser); progress lines appear off a terminal; failure files and traces name the build.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "tools/cli/buildinfo.h"
#include "tools/explore/explore_fleet.h"
#include "scratch.h"

static char tmpdir[64];
static char *out_text, *err_text;

static void setup(void)
{
  scratch_make(tmpdir, sizeof tmpdir, "fleet");
}

static void teardown(void)
{
  scratch_remove(tmpdir);
}

static char *slurp(const char *name)
{
  char path[256];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  return scratch_slurp(path, NULL);
}

/* Runs `sh -c` in tmpdir with PREPOST set to the CLI; stdout/stderr kept in out_text/err_text. */
static int sh(const char *fmt, ...)
{
  char script[4096], cmd[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(script, sizeof script, fmt, ap);
  va_end(ap);
  snprintf(cmd, sizeof cmd, "cd '%s' && PREPOST='%s' sh -c '%s' > out 2> err < /dev/null", tmpdir,
           PREPOST_CLI, script);
  int st = system(cmd);
  cr_assert(WIFEXITED(st), "%s: did not exit normally", script);
  free(out_text);
  free(err_text);
  out_text = slurp("out");
  err_text = slurp("err");
  return WEXITSTATUS(st);
}

static json_t *load(const char *dir)
{
  char path[256];
  snprintf(path, sizeof path, "%s/%s/summary.json", tmpdir, dir);
  json_error_t e;
  json_t *s = json_load_file(path, 0, &e);
  cr_assert_not_null(s, "%s: %s", path, e.text);
  return s;
}

/* ================================================================ shards */

TestSuite(fleet, .init = setup, .fini = teardown);

Test(fleet, shard_counts_partition_every_range)
{
  for (uint64_t count = 0; count < 60; count++)
    for (uint32_t n = 1; n < 9; n++) {
      uint64_t sum = 0;
      for (uint32_t k = 1; k <= n; k++)
        sum += pp_fleet_shard_count(count, k, n);
      cr_assert_eq(sum, count, "count %" PRIu64 " in %u shards", count, n);
    }
  uint32_t k, n;
  cr_assert_eq(pp_fleet_parse_shard("3/4", &k, &n), 0);
  cr_assert(k == 3 && n == 4);
  cr_assert_eq(pp_fleet_parse_shard("0/4", &k, &n), -1);
  cr_assert_eq(pp_fleet_parse_shard("5/4", &k, &n), -1);
  cr_assert_eq(pp_fleet_parse_shard("1/0", &k, &n), -1);
  cr_assert_eq(pp_fleet_parse_shard("4", &k, &n), -1);
  cr_assert_eq(pp_fleet_parse_shard("1/x", &k, &n), -1);
}

/* The seeds each shard runs (-v prints one line per seed): every seed of 5..27 once in all. */
Test(fleet, shards_run_exactly_the_seeds_of_the_range)
{
  int seen[64] = {0};
  for (int k = 1; k <= 3; k++) {
    sh("$PREPOST explore --from 5 --seeds 23 --shard %d/3 --max-messages 20 --faults none "
       "--no-trace -v --out o", k);
    for (const char *p = out_text; (p = strstr(p, "\nseed ")) != NULL; p++) {
      unsigned s = (unsigned)strtoul(p + 6, NULL, 10);
      cr_assert(s < 64);
      seen[s]++;
      cr_assert_eq((s - 5) % 3, (unsigned)k - 1, "seed %u in shard %d", s, k);
    }
  }
  for (unsigned s = 0; s < 64; s++)
    cr_assert_eq(seen[s], s >= 5 && s < 28 ? 1 : 0, "seed %u ran %d times", s, seen[s]);
}

/* ================================================================ summary and merge */

static void assert_same(json_t *a, json_t *b, const char *key)
{
  char *x = json_dumps(json_object_get(a, key), JSON_SORT_KEYS | JSON_COMPACT | JSON_ENCODE_ANY);
  char *y = json_dumps(json_object_get(b, key), JSON_SORT_KEYS | JSON_COMPACT | JSON_ENCODE_ANY);
  cr_assert(x && y && !strcmp(x, y), "%s differs:\n%s\n%s", key, x, y);
  free(x);
  free(y);
}

/* naive, 30 seeds (76..105: four RNR failures, the positive control), so the failure set is not
 * empty */
#define RUN                                                                                        \
  "$PREPOST explore --protocol naive --from 76 --seeds 30 --max-messages 40 --no-shrink " \
  "--no-trace --json --jobs 2"

Test(fleet, merged_shards_equal_the_unsharded_run)
{
  cr_assert_eq(sh(RUN " --out all --junit all.xml"), 1, "%s%s", out_text, err_text);
  for (int k = 1; k <= 4; k++)
    cr_assert_eq(sh(RUN " --shard %d/4 --out s%d --jobs 2", k, k) >> 1, 0, "%s", err_text);
  cr_assert_eq(sh("$PREPOST explore merge --out m --junit m.xml s3 s1 s4 s2"), 1, "%s%s",
               out_text, err_text);
  cr_assert(strstr(out_text, "merge: 30 seeds in 4 shards of 4"), "%s", out_text);
  json_t *a = load("all"), *m = load("m");
  const char *keys[] = {"format", "prepost", "mix", "seeds_run", "complete", "totals",
                        "failures_per_invariant", "failures", "distinct"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    assert_same(a, m, keys[i]);
  cr_assert_gt(json_array_size(json_object_get(a, "failures")), 0);
  cr_assert_gt(json_integer_value(json_object_get(json_object_get(a, "totals"), "messages")), 0);
  cr_assert_eq(json_integer_value(json_object_get(json_object_get(m, "seeds"), "shards")), 4);
  cr_assert_eq(json_array_size(json_object_get(m, "shards")), 4);
  cr_assert_str_eq(json_string_value(json_object_get(json_object_get(a, "prepost"), "commit")),
                   pp_build_commit());
  /* the failure files came along, one per seed */
  json_t *f0 = json_array_get(json_object_get(m, "failures"), 0);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "test -f m/seed-%" JSON_INTEGER_FORMAT ".yaml",
           json_integer_value(json_object_get(f0, "seed")));
  cr_assert_eq(sh("%s", cmd), 0, "%s", cmd);
  /* merging a shard again is a repeat, skipped; the result is the same */
  cr_assert_eq(sh("$PREPOST explore merge --out m2 s1 s2 s3 s4 s2"), 1, "%s", err_text);
  cr_assert(strstr(err_text, "repeats shards merged already"), "%s", err_text);
  json_t *m2 = load("m2");
  assert_same(m, m2, "failures");
  assert_same(m, m2, "totals");
  json_decref(a);
  json_decref(m);
  json_decref(m2);
}

Test(fleet, merge_refuses_other_builds_mixes_ranges_and_missing_shards)
{
  for (int k = 1; k <= 2; k++)
    sh(RUN " --shard %d/2 --out s%d", k, k);
  /* another commit */
  cr_assert_eq(sh("mkdir -p c && sed "
                  "\"s/\\\"commit\\\": \\\"[^\\\"]*\\\"/\\\"commit\\\": \\\"0000deadbeef\\\"/\" "
                  "s2/summary.json > c/summary.json && grep -q 0000deadbeef c/summary.json"),
               0, "%s", err_text);
  cr_assert_eq(sh("$PREPOST explore merge --out m s1 c"), 2);
  cr_assert(strstr(err_text, "refusing to mix builds"), "%s", err_text);
  cr_assert(strstr(err_text, "0000deadbeef"), "%s", err_text);
  /* another mix */
  sh("$PREPOST explore --protocol naive --from 76 --seeds 30 --max-messages 40 --no-shrink "
     "--no-trace --json --faults loss --shard 2/2 --out x");
  cr_assert_eq(sh("$PREPOST explore merge --out m s1 x"), 2);
  cr_assert(strstr(err_text, "different mixes (mix.faults differs)"), "%s", err_text);
  /* another range */
  sh("$PREPOST explore --protocol naive --from 77 --seeds 30 --max-messages 40 --no-shrink "
     "--no-trace --json --shard 2/2 --out y");
  cr_assert_eq(sh("$PREPOST explore merge --out m s1 y"), 2);
  cr_assert(strstr(err_text, "seeds.from differs"), "%s", err_text);
  /* a missing shard */
  cr_assert_eq(sh("$PREPOST explore merge --out m s1"), 2);
  cr_assert(strstr(err_text, "shards 2 of 2 are missing"), "%s", err_text);
  cr_assert_neq(sh("$PREPOST explore merge --partial --out m s1") & 2, 2, "%s", err_text);
  json_t *p = load("m");
  cr_assert(json_is_false(json_object_get(p, "complete")));
  json_decref(p);
  /* not a summary */
  cr_assert_eq(sh("mkdir -p j && echo {} > j/summary.json && $PREPOST explore merge --out m j"), 2);
  cr_assert(strstr(err_text, "is not a summary"), "%s", err_text);
  /* a failure entry without an integer seed (a damaged or edited summary) */
  json_t *d = load("s2");
  json_t *bad = json_pack("[{s:s, s:[s]}]", "seed", "zz", "files", "..");
  cr_assert_not_null(bad);
  json_object_set_new(d, "failures", bad);
  char zp[128];
  cr_assert_eq(sh("mkdir -p z"), 0);
  snprintf(zp, sizeof zp, "%s/z/summary.json", tmpdir);
  cr_assert_eq(json_dump_file(d, zp, 0), 0);
  json_decref(d);
  cr_assert_eq(sh("$PREPOST explore merge --partial --out m z"), 2);
  cr_assert(strstr(err_text, "a failure without a seed"), "%s", err_text);
}

/* ================================================================ JUnit, progress, build */

Test(fleet, junit_has_the_shape_ci_systems_read)
{
  cr_assert_eq(sh(RUN " --out all --junit r.xml"), 1, "%s", err_text);
  /* python3's XML parser: the document, its counts, a failure per broken invariant */
  static const char check[] =
      "import sys, xml.etree.ElementTree as E\n"
      "r = E.parse(sys.argv[1]).getroot()\n"
      "assert r.tag == 'testsuites', r.tag\n"
      "s = r.findall('testsuite'); assert len(s) == 1\n"
      "s = s[0]; cases = s.findall('testcase')\n"
      "assert int(s.get('tests')) == len(cases) == 11, (s.get('tests'), len(cases))\n"
      "fails = [c for c in cases if c.find('failure') is not None]\n"
      "assert int(s.get('failures')) == len(fails) == int(r.get('failures')) >= 1\n"
      "assert int(s.get('errors')) == 0 and float(s.get('time')) >= 0\n"
      "for c in cases: assert c.get('classname') and c.get('name').startswith('invariant ')\n"
      "f = fails[0].find('failure'); assert f.get('type') and f.get('message')\n"
      "assert 'reproduce: prepost explore --from' in f.text, f.text\n"
      "p = {x.get('name'): x.get('value') for x in s.find('properties')}\n"
      "assert p['seeds.run'] == '30' and p['prepost.commit'] == sys.argv[2], p\n"
      "print('junit ok', len(fails))\n";
  char path[256];
  snprintf(path, sizeof path, "%s/junit.py", tmpdir);
  scratch_write(path, check);
  cr_assert_eq(sh("/usr/bin/python3 junit.py r.xml %s", pp_build_commit()), 0,
               "%s%s", out_text, err_text);
  cr_assert(strstr(out_text, "junit ok"), "%s", out_text);
}

Test(fleet, progress_lines_off_a_terminal)
{
  cr_assert_eq(sh("$PREPOST explore --seeds 60 --max-messages 20 --faults none --no-trace "
                  "--progress 20ms --out o"),
               0, "%s", err_text);
  const char *p = strstr(err_text, "explore: progress ");
  cr_assert_not_null(p, "no progress line in:\n%s", err_text);
  unsigned done, total;
  cr_assert_eq(sscanf(p, "explore: progress %u/%u seeds", &done, &total), 2, "%s", p);
  cr_assert_eq(total, 60u);
  cr_assert(strstr(p, "seeds/s, ETA ") && strstr(p, " failures"), "%s", p);
  /* --progress 0: none */
  sh("$PREPOST explore --seeds 20 --max-messages 20 --faults none --no-trace --progress 0 --out o");
  cr_assert_null(strstr(err_text, "explore: progress"), "%s", err_text);
}

Test(fleet, failure_files_and_traces_name_the_build)
{
  cr_assert_eq(sh("$PREPOST explore --protocol naive --from 80 --seeds 10 --max-messages 40 --stop-after 1 "
                  "--shrink-runs 5 --out f"),
               1);
  char want[128];
  snprintf(want, sizeof want, "# build: prepost %s, commit %s", pp_build_version(),
           pp_build_commit());
  cr_assert_eq(sh("cat f/seed-*.yaml"), 0);
  cr_assert(strstr(out_text, want), "'%s' not in\n%s", want, out_text);
  cr_assert_eq(sh("cat f/seed-*-shrunk.yaml"), 0);
  cr_assert(strstr(out_text, want), "'%s' not in the shrunk file", want);
  cr_assert_eq(sh("$PREPOST trace dump --header f/seed-*.trace"), 0, "%s", err_text);
  snprintf(want, sizeof want, "prepost.commit = %s", pp_build_commit());
  cr_assert(strstr(out_text, want), "'%s' not in\n%s", want, out_text);
}
