#include "tools/report/report_ring.h"

#include <inttypes.h>
#include <stdlib.h>

static bool is_ring(const struct pp_sim_config *cfg)
{
  return cfg->engine.protocol == PP_PROTO_RING_CREDITS || cfg->engine.protocol == PP_PROTO_RING_CTS;
}

static bool is_collective(const struct pp_sim_config *cfg)
{
  return cfg->engine.workload.kind == PP_WORKLOAD_COLLECTIVE;
}

/* The end of iteration k as the latest rank saw it (k < PP_COLL_ITER_LOG), or 0. */
static uint64_t iter_end(const struct pp_run_result *res, uint32_t k)
{
  uint64_t t = 0;
  for (uint32_t i = 0; i < res->nranks; i++) {
    const struct pp_coll_stats *c = &res->ranks[i].stats.coll;
    if (c->active && c->iterations_done > k && c->iter_end_ns[k] > t)
      t = c->iter_end_ns[k];
  }
  return t;
}

int pp_coll_figures(const struct pp_sim_config *cfg, const struct pp_run_result *res,
                    struct pp_coll_figures *out)
{
  *out = (struct pp_coll_figures){0};
  if (!is_collective(cfg) || res->nranks == 0)
    return 0;
  const struct pp_coll_params *p = pp_coll_params_of(&cfg->engine);
  uint32_t done = UINT32_MAX;
  uint64_t start = UINT64_MAX, end = 0;
  for (uint32_t i = 0; i < res->nranks; i++) {
    const struct pp_coll_stats *c = &res->ranks[i].stats.coll;
    if (c->iterations_done < done)
      done = c->iterations_done;
    if (c->start_ns < start)
      start = c->start_ns;
    if (c->end_ns > end)
      end = c->end_ns;
    out->elements_checked += c->elements_checked;
    out->elements_wrong += c->elements_wrong;
  }
  out->factor = pp_coll_bus_factor(p->op, res->nranks);
  if (done <= p->warmup || done != p->iterations)
    return 0; /* no complete measurement */
  if (p->warmup > 0)
    start = p->warmup <= PP_COLL_ITER_LOG ? iter_end(res, p->warmup - 1) : start;
  if (end <= start)
    return 0;
  out->iterations = done - (p->warmup <= PP_COLL_ITER_LOG ? p->warmup : 0);
  out->time_ns = end - start;
  out->algbw_gbps = (double)p->bytes * 8 * out->iterations / (double)out->time_ns;
  out->busbw_gbps = out->algbw_gbps * out->factor;
  return 1;
}

static void json_collective(FILE *out, const struct pp_sim_config *cfg,
                            const struct pp_run_result *res)
{
  const struct pp_coll_params *p = pp_coll_params_of(&cfg->engine);
  struct pp_coll_figures f;
  pp_coll_figures(cfg, res, &f);
  fprintf(out,
          ", \"collective\": {\"op\": \"%s\", \"datatype\": \"%s\", \"bytes\": %" PRIu64
          ", \"iterations\": %u, \"warmup\": %u, \"chunk\": %u, \"measured_iterations\": %u"
          ", \"time_ns\": %" PRIu64 ", \"bus_factor\": %.6f, \"elements_checked\": %" PRIu64
          ", \"elements_wrong\": %" PRIu64 ", \"iteration_ns\": [",
          pp_coll_op_name(p->op), pp_dtype_name(p->dtype), p->bytes, p->iterations, p->warmup,
          p->chunk, f.iterations, f.time_ns, f.factor, f.elements_checked, f.elements_wrong);
  /* per iteration (the first PP_COLL_ITER_LOG): from the previous iteration's end to this one's,
   * both the latest rank's; its bus bandwidth shows a slow rank and the recovery */
  uint64_t prev = UINT64_MAX;
  for (uint32_t i = 0; i < res->nranks; i++)
    if (res->ranks[i].stats.coll.start_ns < prev)
      prev = res->ranks[i].stats.coll.start_ns;
  char bus[PP_COLL_ITER_LOG * 24];
  size_t o = 0;
  bus[0] = '\0';
  for (uint32_t k = 0; k < PP_COLL_ITER_LOG && k < p->iterations; k++) {
    uint64_t t = iter_end(res, k);
    if (t == 0 || t <= prev)
      break;
    double gbps = (double)p->bytes * 8 / (double)(t - prev) * f.factor;
    fprintf(out, "%s%" PRIu64, k ? ", " : "", t - prev);
    int w = snprintf(bus + o, sizeof bus - o, "%s%.3f", k ? ", " : "", gbps);
    if (w > 0 && (size_t)w < sizeof bus - o)
      o += (size_t)w;
    prev = t;
  }
  fprintf(out, "], \"iteration_busbw_gbps\": [%s], \"algbw_gbps\": %.3f, \"busbw_gbps\": %.3f}",
          bus, f.algbw_gbps, f.busbw_gbps);
  fprintf(out, ", \"algbw_gbps\": %.3f, \"busbw_gbps\": %.3f", f.algbw_gbps, f.busbw_gbps);
}

static void json_ring(FILE *out, const struct pp_sim_config *cfg, const struct pp_run_result *res)
{
  const struct pp_ring_params *p = pp_ring_params_of(&cfg->engine);
  uint64_t stall = 0, violations = 0;
  for (uint32_t i = 0; i < res->nranks; i++) {
    const struct pp_ring_stats *r = &res->ranks[i].stats.ring;
    violations += r->violations;
    for (uint32_t k = 0; k < r->nconns && k < PP_RING_STATS_CONNS; k++)
      stall += r->conn[k].credit_stall_ns;
  }
  fprintf(out,
          ", \"ring\": {\"slots\": %u, \"slot_size\": %u, \"channels\": %u, \"credit_batch\": %u"
          ", \"credit_idle_ns\": %" PRIu64 ", \"violations\": %" PRIu64
          ", \"credit_stall_ns\": %" PRIu64 ", \"connections\": [",
          p->slots, p->slot_size, p->channels, p->credit_batch, p->credit_idle_ns, violations,
          stall);
  const char *sep = "";
  for (uint32_t i = 0; i < res->nranks; i++) {
    const struct pp_ring_stats *r = &res->ranks[i].stats.ring;
    for (uint32_t k = 0; k < r->nconns && k < PP_RING_STATS_CONNS; k++) {
      const struct pp_ring_conn_stats *c = &r->conn[k];
      fprintf(out,
              "%s{\"rank\": %u, \"peer\": %u, \"credit_stall_ns\": %" PRIu64
              ", \"credit_stalls\": %" PRIu64 ", \"chunks_sent\": %" PRIu64
              ", \"chunks_received\": %" PRIu64 ", \"credit_updates_sent\": %" PRIu64
              ", \"credit_updates_received\": %" PRIu64 "}",
              sep, i, c->peer, c->credit_stall_ns, c->credit_stalls, c->chunks_sent,
              c->chunks_received, c->credit_updates_sent, c->credit_updates_received);
      sep = ", ";
    }
  }
  fprintf(out, "]}");
}

void pp_report_ring_json(FILE *out, const struct pp_sim_config *cfg,
                         const struct pp_run_result *res)
{
  if (is_collective(cfg))
    json_collective(out, cfg, res);
  if (is_ring(cfg))
    json_ring(out, cfg, res);
}

/* The connections that sent chunks, the longest credit stall first (ties: rank, then peer). */
struct stall {
  uint32_t rank, peer;
  uint64_t ns, count;
};

static int stall_cmp(const void *a, const void *b)
{
  const struct stall *x = a, *y = b;
  if (x->ns != y->ns)
    return x->ns < y->ns ? 1 : -1;
  if (x->rank != y->rank)
    return x->rank < y->rank ? -1 : 1;
  return x->peer < y->peer ? -1 : x->peer > y->peer;
}

/* The top PP_REPORT_TOP_STALLS stalls (sorted; connections that never waited are not listed),
 * then how many were left out: with 48 ranks the one slow rank's 7 ms shows, not 16 zeros. */
static void print_top_stalls(FILE *out, const struct pp_run_result *res)
{
  size_t n = 0, cap = 0;
  for (uint32_t i = 0; i < res->nranks; i++)
    cap += res->ranks[i].stats.ring.nconns < PP_RING_STATS_CONNS
               ? res->ranks[i].stats.ring.nconns
               : PP_RING_STATS_CONNS;
  struct stall *s = cap ? malloc(cap * sizeof *s) : NULL;
  if (cap && !s) {
    fprintf(out, " (out of memory)\n");
    return;
  }
  size_t idle = 0; /* sent chunks, never waited for credits */
  for (uint32_t i = 0; i < res->nranks; i++) {
    const struct pp_ring_stats *r = &res->ranks[i].stats.ring;
    for (uint32_t k = 0; k < r->nconns && k < PP_RING_STATS_CONNS; k++) {
      const struct pp_ring_conn_stats *c = &r->conn[k];
      if (!c->chunks_sent)
        continue;
      if (!c->credit_stall_ns && !c->credit_stalls)
        idle++;
      else
        s[n++] = (struct stall){i, c->peer, c->credit_stall_ns, c->credit_stalls};
    }
  }
  qsort(s, n, sizeof *s, stall_cmp);
  size_t shown = n < PP_REPORT_TOP_STALLS ? n : PP_REPORT_TOP_STALLS;
  for (size_t j = 0; j < shown; j++)
    fprintf(out, "%s %u->%u %.2f us (%" PRIu64 ")", j ? "," : "", s[j].rank, s[j].peer,
            s[j].ns / 1e3, s[j].count);
  if (!n)
    fprintf(out, " none");
  if (n > shown)
    fprintf(out, "; %zu more connection%s stalled less", n - shown, n - shown == 1 ? "" : "s");
  if (n && idle)
    fprintf(out, "; %zu never stalled", idle);
  fputc('\n', out);
  free(s);
}

void pp_report_ring_table(FILE *out, const struct pp_sim_config *cfg,
                          const struct pp_run_result *res)
{
  if (is_collective(cfg)) {
    const struct pp_coll_params *p = pp_coll_params_of(&cfg->engine);
    struct pp_coll_figures f;
    if (pp_coll_figures(cfg, res, &f))
      fprintf(out,
              "\n%s %s of %" PRIu64 " bytes, %u iterations measured: algbw %.2f Gb/s, busbw "
              "%.2f Gb/s (x%.3f)\n",
              pp_coll_op_name(p->op), pp_dtype_name(p->dtype), p->bytes, f.iterations,
              f.algbw_gbps, f.busbw_gbps, f.factor);
    else
      fprintf(out, "\n%s %s of %" PRIu64 " bytes: no complete measurement\n",
              pp_coll_op_name(p->op), pp_dtype_name(p->dtype), p->bytes);
    fprintf(out, "elements checked %" PRIu64 ", wrong %" PRIu64 "\n", f.elements_checked,
            f.elements_wrong);
  }
  if (!is_ring(cfg))
    return;
  const struct pp_ring_params *p = pp_ring_params_of(&cfg->engine);
  fprintf(out, "\n%s: %u slots x %u bytes, %u channel%s, credit every %u slot%s; credit stalls:",
          pp_protocol_name(cfg->engine.protocol), p->slots, p->slot_size, p->channels,
          p->channels == 1 ? "" : "s", p->credit_batch, p->credit_batch == 1 ? "" : "s");
  print_top_stalls(out, res);
}
