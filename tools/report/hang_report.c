#include "tools/report/hang_report.h"

#include <inttypes.h>

#include "tools/cli/cli_util.h"

static void print_trigger(FILE *out, const struct pp_hang *h)
{
  switch ((enum pp_hang_trigger)h->trigger) {
  case PP_HANG_TRIGGER_NO_PROGRESS:
    fprintf(out, " (no progress for %" PRIu64 " ns, detected at %" PRIu64 " ns)",
            h->no_progress_ns, h->at_ns);
    break;
  case PP_HANG_TRIGGER_QUIESCENCE:
    fprintf(out, " (nothing left to happen at %" PRIu64 " ns)", h->at_ns);
    break;
  case PP_HANG_TRIGGER_TIMEOUT:
    fprintf(out, " (the time limit at %" PRIu64 " ns)", h->at_ns);
    break;
  case PP_HANG_TRIGGER_REPLAY:
    break;
  }
}

static void print_rank(FILE *out, const struct pp_hang *h, uint32_t r)
{
  const struct pp_hang_rank *k = &h->rank[r];
  if (k->state == PP_HANG_SILENT) {
    fprintf(out, "  rank %u has had no input since %" PRIu64 " ns: dead or frozen?\n", r,
            k->last_input_ns);
  } else if (k->state == PP_HANG_UNKNOWN) {
    fprintf(out, "  rank %u: no report (its process did not answer)\n", r);
    return;
  }
  if (k->state == PP_HANG_DONE) {
    for (uint32_t i = 0; i < k->nwaits; i++) /* its QPs in ERROR */
      fprintf(out, "  rank %u is done; its %s\n", r, k->waits[i].what);
    return;
  }
  fprintf(out, "  rank %u waits:\n", r);
  for (uint32_t i = 0; i < k->nwaits; i++)
    fprintf(out, "    [%s] %s\n", pp_wait_kind_name((enum pp_wait_kind)k->waits[i].kind),
            k->waits[i].what);
  if (k->total > k->nwaits)
    fprintf(out, "    ... %u more\n", k->total - k->nwaits);
  if (!k->total)
    fprintf(out, "    nothing it can name\n");
}

void pp_hang_print(FILE *out, const struct pp_hang *h)
{
  if (!h->stuck) {
    fprintf(out, "no hang: every rank's engine is done\n");
    return;
  }
  fprintf(out, "hang: %u of %u ranks are not done", h->stuck, h->nranks);
  print_trigger(out, h);
  fprintf(out, "\n  times: %s\n", pp_hang_clock_desc((enum pp_hang_clock)h->clock));
  for (uint32_t r = 0; r < h->nranks; r++)
    print_rank(out, h, r);
  fprintf(out, "  wait-for graph:");
  for (uint32_t i = 0; i < h->nedges; i++)
    fprintf(out, "%s %u -> %u (%s)", i ? "," : "", h->edge[i].from, h->edge[i].to,
            h->edge[i].why);
  fprintf(out, "%s\n", h->nedges ? "" : " no edges");
  if (h->ncycle) {
    fprintf(out, "  cycle:");
    for (uint32_t i = 0; i < h->ncycle; i++)
      fprintf(out, " %u ->", h->cycle[i]);
    bool timer = false;
    for (uint32_t i = 0; i < h->ncycle; i++)
      for (uint32_t j = 0; j < h->rank[h->cycle[i]].nwaits; j++)
        timer = timer || h->rank[h->cycle[i]].waits[j].kind == PP_WAIT_TIMER;
    fprintf(out, " %u: %s\n", h->cycle[0],
            timer ? "a rank of it has a timer pending" : "a deadlock, none of them can move first");
  } else {
    if (h->chain_timer)
      fprintf(out, "  no cycle: a chain ending at rank %u, which has a timer pending (busy "
                   "until it fires)\n", h->chain_end);
    else
      fprintf(out, "  no cycle: a chain ending at a rank that cannot help (a QP in ERROR, a "
                   "finished or dead rank)\n");
  }
  if (h->cause[0])
    fprintf(out, "  cause: %s\n", h->cause);
}

static void json_peer(FILE *out, uint32_t v)
{
  if (v == PP_WAIT_NOPEER)
    fprintf(out, "null");
  else
    fprintf(out, "%u", v);
}

static void json_rank(FILE *out, const struct pp_hang *h, uint32_t r)
{
  const struct pp_hang_rank *k = &h->rank[r];
  fprintf(out, "{\"rank\": %u, \"state\": \"%s\", \"waits\": [", r,
          pp_hang_rank_state_name((enum pp_hang_rank_state)k->state));
  for (uint32_t i = 0; i < k->nwaits; i++) {
    const struct pp_wait *w = &k->waits[i];
    fprintf(out, "%s{\"kind\": \"%s\", \"peer\": ", i ? ", " : "",
            pp_wait_kind_name((enum pp_wait_kind)w->kind));
    json_peer(out, w->peer);
    fprintf(out, ", \"tag\": ");
    json_peer(out, w->tag);
    fprintf(out, ", \"since_ns\": %" PRIu64 ", \"what\": ", w->since_ns);
    pp_json_string(out, w->what);
    fprintf(out, "}");
  }
  fprintf(out, "], \"more\": %u, \"waits_for\": [", k->total - k->nwaits);
  const char *sep = "";
  for (uint32_t i = 0; i < h->nedges; i++)
    if (h->edge[i].from == r) {
      fprintf(out, "%s{\"rank\": %u, \"why\": ", sep, h->edge[i].to);
      pp_json_string(out, h->edge[i].why);
      fprintf(out, "}");
      sep = ", ";
    }
  fprintf(out, "]}");
}

void pp_hang_json(FILE *out, const struct pp_hang *h)
{
  fprintf(out,
          "{\"stuck_ranks\": %u, \"trigger\": \"%s\", \"time_base\": \"%s\", \"at_ns\": %" PRIu64,
          h->stuck, pp_hang_trigger_name((enum pp_hang_trigger)h->trigger),
          pp_hang_clock_name((enum pp_hang_clock)h->clock), h->at_ns);
  if (h->trigger == PP_HANG_TRIGGER_NO_PROGRESS)
    fprintf(out, ", \"no_progress_ns\": %" PRIu64, h->no_progress_ns);
  fprintf(out, ", \"cause\": ");
  pp_json_string(out, h->cause);
  fprintf(out, ", \"ranks\": [");
  const char *sep = "";
  for (uint32_t r = 0; r < h->nranks; r++) {
    enum pp_hang_rank_state st = (enum pp_hang_rank_state)h->rank[r].state;
    if (st == PP_HANG_DONE && !h->rank[r].nwaits)
      continue;
    fprintf(out, "%s", sep);
    json_rank(out, h, r);
    sep = ", ";
  }
  fprintf(out, "], \"silent\": [");
  sep = "";
  for (uint32_t r = 0; r < h->nranks; r++)
    if (h->rank[r].state == PP_HANG_SILENT) {
      fprintf(out, "%s{\"rank\": %u, \"last_input_ns\": %" PRIu64 "}", sep, r,
              h->rank[r].last_input_ns);
      sep = ", ";
    }
  fprintf(out, "], \"edges\": [");
  for (uint32_t i = 0; i < h->nedges; i++) {
    fprintf(out, "%s{\"from\": %u, \"to\": %u, \"kind\": \"%s\", \"why\": ", i ? ", " : "",
            h->edge[i].from, h->edge[i].to,
            pp_wait_kind_name((enum pp_wait_kind)h->edge[i].kind));
    pp_json_string(out, h->edge[i].why);
    fprintf(out, "}");
  }
  fprintf(out, "], \"cycle\": [");
  for (uint32_t i = 0; i < h->ncycle; i++)
    fprintf(out, "%s%u", i ? ", " : "", h->cycle[i]);
  fprintf(out, "]}");
}
