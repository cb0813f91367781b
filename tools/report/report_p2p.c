#include "tools/report/report_p2p.h"

#include <inttypes.h>

#include "tools/report/report.h"

void pp_report_p2p_json(FILE *out, const struct pp_sim_config *cfg, const struct pp_run_result *res)
{
  if (!pp_p2p_proto(cfg->engine.protocol))
    return;
  fprintf(out, ", \"p2p\": [");
  for (uint32_t i = 0; i < res->nranks; i++) {
    const struct pp_p2p_stats *p = &res->ranks[i].p2p;
    fprintf(out,
            "%s{\"rank\": %u, \"sent\": {\"eager\": %" PRIu64 ", \"rndv-put\": %" PRIu64
            ", \"rndv-get\": %" PRIu64 "}, \"received\": {\"eager\": %" PRIu64
            ", \"rndv-put\": %" PRIu64 ", \"rndv-get\": %" PRIu64 "}, \"credit_msgs\": %" PRIu64
            ", \"credits_piggybacked\": %" PRIu64 ", \"parked\": %" PRIu64
            ", \"unexpected\": %" PRIu64 ", \"unexpected_max\": %" PRIu64
            ", \"out_of_order\": %" PRIu64 ", \"sync_acks\": %" PRIu64 ", \"truncated\": %" PRIu64
            ", \"cancelled\": %" PRIu64 ", \"failed\": %" PRIu64 ", \"fragments\": %" PRIu64
            ", \"rcache\": {\"hits\": %" PRIu64 ", \"misses\": %" PRIu64 ", \"evictions\": %" PRIu64
            ", \"invalidations\": %" PRIu64 "}, \"receives_dropped\": %" PRIu64,
            i ? ", " : "", i, p->sent[PP_P2P_EAGER], p->sent[PP_P2P_RNDV_PUT],
            p->sent[PP_P2P_RNDV_GET], p->received[PP_P2P_EAGER], p->received[PP_P2P_RNDV_PUT],
            p->received[PP_P2P_RNDV_GET], p->credit_msgs, p->credits_piggybacked, p->parked,
            p->unexpected, p->unexpected_max, p->out_of_order, p->sync_acks, p->truncated,
            p->cancelled, p->failed, p->fragments, p->rcache.hits, p->rcache.misses,
            p->rcache.evictions, p->rcache.invalidations, res->ranks[i].receives_dropped);
    if (p->srq_buffers) /* p2p.srq only: the other runs' reports stay as they were */
      fprintf(out,
              ", \"srq\": {\"buffers\": %" PRIu64 ", \"eager_rx_bytes\": %" PRIu64
              ", \"lent\": %" PRIu64 ", \"reclaimed\": %" PRIu64 ", \"lent_max\": %" PRIu64
              ", \"limit_events\": %" PRIu64 ", \"refilled\": %" PRIu64
              ", \"overruns\": %" PRIu64 "}",
              p->srq_buffers, p->eager_rx_bytes, p->srq_lent, p->srq_reclaimed, p->srq_lent_max,
              p->srq_limit_events, p->srq_refilled, p->srq_overruns);
    fputc('}', out);
  }
  fprintf(out, "], \"receives\": [");
  const char *sep = "";
  for (uint32_t i = 0; i < res->nranks; i++) {
    const struct pp_rank_result *r = &res->ranks[i];
    for (size_t k = 0; k < r->nreceives; k++) {
      const struct pp_recv_record *x = &r->receives[k];
      fprintf(out,
              "%s{\"rank\": %u, \"source\": %u, \"tag\": %u, \"comm\": %u, \"size\": %u"
              ", \"msg_len\": %u, \"status\": \"%s\", \"protocol\": \"%s\", \"checksum\": "
              "\"%016" PRIx64 "\"",
              sep, x->rank, x->source, x->tag, x->ctx, x->size, x->msg_len,
              pp_p2p_err_name((enum pp_p2p_err)x->error),
              pp_p2p_proto_name((enum pp_p2p_proto)x->proto), x->checksum);
      if (x->error == PP_P2P_E_FAILED)
        fprintf(out, ", \"wc_status\": \"%s\"", pp_wc_status_name((enum pp_wc_status)x->wc_status));
      fputc('}', out);
      sep = ", ";
    }
  }
  fputc(']', out);
}

void pp_report_p2p_table(FILE *out, const struct pp_sim_config *cfg,
                         const struct pp_run_result *res)
{
  if (!pp_p2p_proto(cfg->engine.protocol))
    return;
  fprintf(out, "\n%-5s %9s %9s %9s %9s %8s %8s %10s %8s %9s  %s\n", "p2p", "eager", "rndv-put",
          "rndv-get", "credits", "parked", "unexp", "unexp_max", "ooo", "trunc", "(sent / received)");
  for (uint32_t i = 0; i < res->nranks; i++) {
    const struct pp_p2p_stats *p = &res->ranks[i].p2p;
    char a[32], b[32], c[32];
    snprintf(a, sizeof a, "%" PRIu64 "/%" PRIu64, p->sent[PP_P2P_EAGER], p->received[PP_P2P_EAGER]);
    snprintf(b, sizeof b, "%" PRIu64 "/%" PRIu64, p->sent[PP_P2P_RNDV_PUT],
             p->received[PP_P2P_RNDV_PUT]);
    snprintf(c, sizeof c, "%" PRIu64 "/%" PRIu64, p->sent[PP_P2P_RNDV_GET],
             p->received[PP_P2P_RNDV_GET]);
    fprintf(out, "%-5u %9s %9s %9s %9" PRIu64 " %8" PRIu64 " %8" PRIu64 " %10" PRIu64
                 " %8" PRIu64 " %9" PRIu64 "\n",
            i, a, b, c, p->credit_msgs, p->parked, p->unexpected, p->unexpected_max,
            p->out_of_order, p->truncated);
  }
}
