#include "tools/report/report.h"
#include "tools/report/hang_report.h"
#include "tools/report/report_p2p.h"
#include "tools/report/report_ring.h"

#include <inttypes.h>
#include <string.h>

struct totals {
  uint64_t messages, bytes, rnr_naks, retries, status[PP_WC_STATUS_COUNT];
  /* a rank's device does not count them (pp_nic_counters.missing): the sum would be a guess */
  bool no_rnr_naks, no_retries;
};

static void rank_totals(const struct pp_rank_result *r, struct totals *t)
{
  const struct pp_nic_counters *c = &r->nic;
  t->messages += r->stats.messages_received;
  t->bytes += r->stats.bytes_received;
  t->rnr_naks += c->rnr_naks_received;
  t->retries += c->rnr_retries + c->timeout_retries;
  t->no_rnr_naks = t->no_rnr_naks || !pp_nic_counter_have(c, PP_NIC_CNT_rnr_naks_received);
  t->no_retries = t->no_retries || !pp_nic_counter_have(c, PP_NIC_CNT_rnr_retries) ||
                  !pp_nic_counter_have(c, PP_NIC_CNT_timeout_retries);
  for (int k = 0; k < PP_WC_STATUS_COUNT; k++)
    t->status[k] += r->stats.status_counts[k];
}

/* A counter, or null: "counter not available" (the device does not count it). */
static void json_counter(FILE *out, const char *key, uint64_t v, bool missing)
{
  if (missing)
    fprintf(out, "\"%s\": null", key);
  else
    fprintf(out, "\"%s\": %" PRIu64, key, v);
}

static void json_counts(FILE *out, const struct totals *t, const struct pp_hist_summary *lat)
{
  fprintf(out, "\"messages\": %" PRIu64 ", \"bytes\": %" PRIu64 ", ", t->messages, t->bytes);
  json_counter(out, "rnr_naks", t->rnr_naks, t->no_rnr_naks);
  fprintf(out, ", ");
  json_counter(out, "retries", t->retries, t->no_retries);
  fprintf(out, ", \"status_counts\": {");
  const char *sep = "";
  for (int k = 0; k < PP_WC_STATUS_COUNT; k++) {
    if (!t->status[k])
      continue;
    fprintf(out, "%s\"%s\": %" PRIu64, sep, pp_wc_status_name((enum pp_wc_status)k), t->status[k]);
    sep = ", ";
  }
  /* prepost/hist.h: nearest-rank percentiles within 1/256 of the sample, min/max/count exact */
  fprintf(out,
          "}, \"latency_ns\": {\"count\": %" PRIu64 ", \"min\": %" PRIu64 ", \"p50\": %" PRIu64
          ", \"p90\": %" PRIu64 ", \"p99\": %" PRIu64 ", \"p999\": %" PRIu64 ", \"max\": %" PRIu64
          ", \"mean\": %" PRIu64 "}",
          lat->count, lat->min, lat->p50, lat->p90, lat->p99, lat->p999, lat->max, lat->mean);
}

void pp_report_json(FILE *out, const struct pp_sim_config *cfg, const struct pp_run_result *res)
{
  pp_report_json_on(out, cfg, res, "simgrid");
}

void pp_report_json_on(FILE *out, const struct pp_sim_config *cfg, const struct pp_run_result *res,
                       const char *backend)
{
  struct totals all = {0};
  for (uint32_t i = 0; i < res->nranks; i++)
    rank_totals(&res->ranks[i], &all);
  fprintf(out, "{\"scenario\": ");
  pp_json_string(out, cfg->name);
  fprintf(out, ", \"backend\": \"%s\", \"protocol\": \"%s\", \"seed\": %" PRIu64
               ", \"outcome\": \"%s\", \"sim_time_ns\": %" PRIu64 ", ",
          backend, pp_protocol_name(cfg->engine.protocol), cfg->seed, pp_outcome_name(res->outcome),
          res->sim_time_ns);
  json_counts(out, &all, &res->latency);
  pp_report_ring_json(out, cfg, res);
  pp_report_p2p_json(out, cfg, res);
  fprintf(out, ", \"ranks\": [");
  for (uint32_t i = 0; i < res->nranks; i++) {
    const struct pp_rank_result *r = &res->ranks[i];
    struct totals t = {0};
    rank_totals(r, &t);
    fprintf(out, "%s{\"rank\": %u, \"host\": ", i ? ", " : "", i);
    pp_json_string(out, r->host);
    fprintf(out, ", \"done\": %s, \"messages_sent\": %" PRIu64 ", \"corrupt\": %" PRIu64 ", ",
            r->stats.done ? "true" : "false", r->stats.messages_sent, r->stats.corrupt);
    json_counts(out, &t, &r->stats.latency);
    if (r->stats.peer_violations) { /* a peer broke the protocol (engine.h: untrusted peers) */
      const struct pp_violation *v = &r->stats.first_violation;
      char t[256];
      pp_violation_text(v, t, sizeof(t));
      fprintf(out, ", \"peer_violations\": %" PRIu64 ", \"first_violation\": {\"peer\": %u, "
                   "\"message\": ", r->stats.peer_violations, v->peer);
      pp_json_string(out, v->msg);
      fprintf(out, ", \"field\": \"%s\", \"value\": %" PRIu64 ", \"limit\": %" PRIu64
                   ", \"at_ns\": %" PRIu64 ", \"text\": ",
              pp_violation_field_name((enum pp_violation_field)v->field), v->value, v->limit,
              v->at_ns);
      pp_json_string(out, t);
      fputc('}', out);
    }
    const struct pp_nic_counters *c = &r->nic;
    fprintf(out, ", ");
    json_counter(out, "rnr_naks_sent", c->rnr_naks_sent,
                 !pp_nic_counter_have(c, PP_NIC_CNT_rnr_naks_sent));
    fprintf(out, ", ");
    json_counter(out, "timeout_retries", c->timeout_retries,
                 !pp_nic_counter_have(c, PP_NIC_CNT_timeout_retries));
    fprintf(out, ", ");
    json_counter(out, "packets_dropped", c->packets_dropped,
                 !pp_nic_counter_have(c, PP_NIC_CNT_packets_dropped));
    fprintf(out, "}");
  }
  fprintf(out, "]");
  if (res->hang) {
    fprintf(out, ", \"hang\": ");
    pp_hang_json(out, res->hang);
  }
  fprintf(out, "}\n");
}

static void status_list(FILE *out, const uint64_t *status)
{
  const char *sep = "";
  for (int k = 0; k < PP_WC_STATUS_COUNT; k++) {
    if (!status[k])
      continue;
    fprintf(out, "%s%s=%" PRIu64, sep, pp_wc_status_name((enum pp_wc_status)k), status[k]);
    sep = " ";
  }
  if (!*sep)
    fprintf(out, "-");
}

/* A counter for the table, or "n/a" (counter not available). */
static void table_counter(char *buf, size_t len, uint64_t v, bool missing)
{
  if (missing)
    snprintf(buf, len, "n/a");
  else
    snprintf(buf, len, "%" PRIu64, v);
}

/* The p50, p99 and max columns in us, or "-" where there is no sample (a receiver's send
 * latency: 0.00 read as "instant"). */
static void latency_cols(char *buf, size_t len, const struct pp_hist_summary *l)
{
  if (l->count)
    snprintf(buf, len, "%11.2f %11.2f %11.2f", l->p50 / 1e3, l->p99 / 1e3, l->max / 1e3);
  else
    snprintf(buf, len, "%11s %11s %11s", "-", "-", "-");
}

void pp_report_table(FILE *out, const struct pp_sim_config *cfg, const struct pp_run_result *res)
{
  pp_report_table_on(out, cfg, res, "simgrid");
}

void pp_report_table_on(FILE *out, const struct pp_sim_config *cfg,
                        const struct pp_run_result *res, const char *backend)
{
  struct totals all = {0};
  for (uint32_t i = 0; i < res->nranks; i++)
    rank_totals(&res->ranks[i], &all);
  fprintf(out, "scenario %s (protocol %s, %u ranks, seed %" PRIu64 ")\n", cfg->name,
          pp_protocol_name(cfg->engine.protocol), res->nranks, cfg->seed);
  fprintf(out, "outcome  %s after %.3f us %s\n\n", pp_outcome_name(res->outcome),
          res->sim_time_ns / 1e3, strcmp(backend, "simgrid") ? "wall clock" : "simulated");
  fprintf(out, "%-5s %-10s %5s %9s %9s %9s %8s %11s %11s %11s  %s\n", "rank", "host", "done",
          "sent", "received", "rnr_naks", "retries", "p50_us", "p99_us", "max_us", "completions");
  for (uint32_t i = 0; i < res->nranks; i++) {
    const struct pp_rank_result *r = &res->ranks[i];
    struct totals t = {0};
    rank_totals(r, &t);
    char rnr[24], ret[24], lat[48];
    table_counter(rnr, sizeof(rnr), t.rnr_naks, t.no_rnr_naks);
    table_counter(ret, sizeof(ret), t.retries, t.no_retries);
    latency_cols(lat, sizeof lat, &r->stats.latency);
    fprintf(out, "%-5u %-10s %5s %9" PRIu64 " %9" PRIu64 " %9s %8s %s  ", i, r->host,
            r->stats.done ? "yes" : "no", r->stats.messages_sent, t.messages, rnr, ret, lat);
    status_list(out, t.status);
    fputc('\n', out);
  }
  char rnr[24], ret[24], lat[48];
  table_counter(rnr, sizeof(rnr), all.rnr_naks, all.no_rnr_naks);
  table_counter(ret, sizeof(ret), all.retries, all.no_retries);
  latency_cols(lat, sizeof lat, &res->latency);
  fprintf(out, "%-5s %-10s %5s %9s %9" PRIu64 " %9s %8s %s  ", "all", "", "", "", all.messages,
          rnr, ret, lat);
  status_list(out, all.status);
  fputc('\n', out);
  for (uint32_t i = 0; i < res->nranks; i++) {
    const struct pp_rank_result *r = &res->ranks[i];
    char t[256];
    if (!r->stats.peer_violations)
      continue;
    pp_violation_text(&r->stats.first_violation, t, sizeof(t));
    fprintf(out, "rank %u: %" PRIu64 " message%s of peers broke the protocol (connection failed), "
                 "first: %s\n", i, r->stats.peer_violations,
            r->stats.peer_violations == 1 ? "" : "s", t);
  }
  pp_report_ring_table(out, cfg, res);
  pp_report_p2p_table(out, cfg, res);
  if (res->hang) {
    fputc('\n', out);
    pp_hang_print(out, res->hang);
  }
}
