/* The NIC profile a device's measurements give (calib.h). Pure: no device, no clock. */
#include "tools/calibrate/calib.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

uint64_t pp_calib_rnr_delay(uint64_t t0_ns, uint64_t tr_ns, uint32_t retries)
{
  return retries && tr_ns > t0_ns ? (tr_ns - t0_ns) / retries : 0;
}

static uint32_t ib_mtu(uint32_t bytes)
{
  uint32_t m = 256;
  while (m < 4096 && m * 2 <= bytes)
    m *= 2;
  return m;
}

static void rnr_model(const struct pp_calib *c, struct pp_nic_profile *p)
{
  const struct pp_calib_rnr *shortest = NULL;
  uint64_t least = UINT64_MAX;
  for (uint32_t i = 0; i < c->nrnr && i < PP_CALIB_MAX_CODES; i++) {
    const struct pp_calib_rnr *r = &c->rnr[i];
    if (!r->delay_ns || r->code > 31)
      continue;
    uint64_t d = r->delay_ns < PP_RNR_DELAY_MAX_NS ? r->delay_ns : PP_RNR_DELAY_MAX_NS;
    p->rnr_delay_ns[r->code] = d;
    least = d < least ? d : least;
    if (!shortest || pp_rnr_timer_ns(r->code) < pp_rnr_timer_ns(shortest->code))
      shortest = r;
  }
  /* a floor no measured code contradicts: the least delay any of them waited */
  if (shortest && shortest->delay_ns > 2 * pp_rnr_timer_ns(shortest->code))
    p->rnr_min_ns = least;
}

static void limits(const struct pp_calib *c, struct pp_nic_profile *p)
{
#define LIM(field, src, hi)                                                    \
  if (c->src)                                                                  \
    p->field = c->src < (hi) ? c->src : (hi);
  LIM(max_qp, max_qp, 1u << 20)
  LIM(max_qp_wr, max_qp_wr, 1u << 20)
  LIM(max_srq, max_srq, 1u << 16)
  LIM(max_mr, max_mr, 1u << 16)
  LIM(cq_depth, cq_depth, 1u << 24)
  LIM(max_rd_atomic, max_rd_atomic, 255u)
#undef LIM
}

void pp_calib_profile(const struct pp_calib *c, struct pp_nic_profile *p)
{
  pp_nic_profile_default(p);
  snprintf(p->name, sizeof p->name, "%s", c->name[0] ? c->name : "calibrated");
  if (c->mtu)
    p->mtu = ib_mtu(c->mtu);
  if (c->wqe_rate > 0)
    p->wqe_ns = (uint64_t)llround(1e9 / c->wqe_rate);
  if (c->ack_msgs && c->ack_packets) {
    uint64_t every = (c->ack_msgs + c->ack_packets / 2) / c->ack_packets;
    p->ack_every = every < 1 ? 1 : every > UINT32_MAX ? UINT32_MAX : (uint32_t)every;
    p->ack_delay_ns = 0; /* an ACK per ack_every requests, none held back by a timer */
  }
  double best = 0;
  for (uint32_t i = 0; i < c->nsizes && i < PP_CALIB_MAX_SIZES; i++)
    best = c->sizes[i].bw_bytes_s > best ? c->sizes[i].bw_bytes_s : best;
  if (best > 0)
    p->line_rate_bps = best * 8;
  limits(c, p);
  rnr_model(c, p);
  if (c->retry7.measured && !c->retry7.failed)
    p->rc_model = PP_RC_RXE;
}

static void comments(FILE *f, const struct pp_calib *c)
{
  fprintf(f, "#\n# Latency (post -> send completion of one SEND at a time, median) and the\n"
             "# bandwidth of a stream of RDMA WRITEs, by size:\n");
  for (uint32_t i = 0; i < c->nsizes && i < PP_CALIB_MAX_SIZES; i++)
    fprintf(f, "#   %8" PRIu32 " B  latency %10.1f us  bandwidth %10.1f MB/s\n",
            c->sizes[i].size, c->sizes[i].lat_ns / 1e3, c->sizes[i].bw_bytes_s / 1048576.0);
  if (c->wqe_rate > 0)
    fprintf(f, "# Per-WQE cost: %.0f %" PRIu32 "-byte WRITEs per second streamed.\n",
            c->wqe_rate, c->wqe_size);
  if (c->ack_msgs)
    fprintf(f, "# ACKs: %" PRIu64 " packets besides the requests for %" PRIu64
               " one-packet WRITEs.\n", c->ack_packets, c->ack_msgs);
  else
    fprintf(f, "# ACKs: not measured (no packet counter); the default's coalescing.\n");
  fprintf(f, "# RNR delay per min_rnr_timer code: (t(rnr_retry N) - t(rnr_retry 0)) / N, median\n"
             "# of the repetitions, against the IBTA delay:\n");
  for (uint32_t i = 0; i < c->nrnr && i < PP_CALIB_MAX_CODES; i++) {
    const struct pp_calib_rnr *r = &c->rnr[i];
    fprintf(f, "#   code %2u: IBTA %9.3f ms, measured %9.3f ms (%.3f..%.3f, %" PRIu32
               " x rnr_retry %" PRIu32 ")\n",
            r->code, pp_rnr_timer_ns(r->code) / 1e6, r->delay_ns / 1e6, r->delay_min_ns / 1e6,
            r->delay_max_ns / 1e6, r->reps, r->retries);
  }
  for (uint32_t i = 0; i < c->ntmo && i < 4; i++) {
    const struct pp_calib_timeout *t = &c->tmo[i];
    fprintf(f, "# Retransmission: ACK timeout code %u (IBTA %.3f ms): RETRY_EXC_ERR after\n"
               "#   %.3f ms with retry_cnt 0, %.3f ms with 1: %.3f ms a timeout (the simulator\n"
               "#   waits the IBTA value; no profile key)\n",
            t->code, pp_ack_timeout_ns(t->code) / 1e6, t->t0_ns / 1e6, t->t1_ns / 1e6,
            t->t1_ns > t->t0_ns ? (t->t1_ns - t->t0_ns) / 1e6 : 0.0);
  }
}

static void retry_keys(FILE *f, const struct pp_calib *c, const struct pp_nic_profile *p)
{
  const struct pp_calib_retry7 *r = &c->retry7;
  if (!r->measured) {
    fprintf(f, "# retry_cnt 7 against a dead peer: not measured; the IBTA's retry rules\n");
  } else if (r->failed) {
    fprintf(f, "# retry_cnt 7 against a dead peer, ACK timeout code %u: RETRY_EXC_ERR after\n"
               "#   %.3f ms (bound %.3f ms): the IBTA's retry rules\n",
            r->code, r->t_ns / 1e6, r->bound_ns / 1e6);
  } else {
    fprintf(f, "# retry_cnt 7 against a dead peer, ACK timeout code %u: still retrying after\n"
               "#   %.3f ms (16 timeouts): 7 is never counted down, Soft-RoCE's rules; rc_model\n"
               "#   rxe also carries rxe's ACK timer through RNR waits and its WRITE_WITH_IMM\n"
               "#   RNR-NAKed at the last packet (from rxe's source, not measured)\n",
            r->code, r->bound_ns / 1e6);
  }
  fprintf(f, "rc_model: %s\n", pp_rc_model_names[p->rc_model]);
}

static void rnr_keys(FILE *f, const struct pp_nic_profile *p)
{
  if (p->rnr_min_ns)
    fprintf(f, "# The shortest code measured waited more than twice its IBTA delay: the\n"
               "# device rounds up; every delay is taken to last at least the least one measured.\n"
               "rnr_min: %" PRIu64 "ns\n", p->rnr_min_ns);
  bool any = false;
  for (unsigned k = 0; k < 32; k++)
    if (p->rnr_delay_ns[k]) {
      fprintf(f, "%s%u: %" PRIu64 "ns", any ? ", " : "rnr_delay: {", k, p->rnr_delay_ns[k]);
      any = true;
    }
  if (any)
    fprintf(f, "}\n");
}

int pp_calib_write(FILE *f, const struct pp_calib *c)
{
  struct pp_nic_profile p;
  pp_calib_profile(c, &p);
  fprintf(f, "# %s: measured on device %s by `prepost calibrate --backend verbs`%s%s.\n"
             "# Keys and units: models/scenarios/README.md (\"NIC profiles\"); what is not\n"
             "# measured keeps the default profile's value.\n",
          p.name, c->device[0] ? c->device : "?", c->when[0] ? ", " : "", c->when);
  comments(f, c);
  fprintf(f, "name: %s\nmtu: %" PRIu32 "\n", p.name, p.mtu);
  fprintf(f, "# RoCEv2/IPv4 framing, not measured\nheader_bytes: %" PRIu32 "\n", p.header_bytes);
  fprintf(f, "wqe: %" PRIu64 "ns\nack_every: %" PRIu32 "\nack_delay: %" PRIu64 "ns\n", p.wqe_ns,
          p.ack_every, p.ack_delay_ns);
  fprintf(f, "max_qp: %" PRIu32 "\nmax_qp_wr: %" PRIu32 "\nmax_srq: %" PRIu32
             "\nmax_mr: %" PRIu32 "\ncq_depth: %" PRIu32 "\nmax_rd_atomic: %" PRIu32 "\n",
          p.max_qp, p.max_qp_wr, p.max_srq, p.max_mr, p.cq_depth, p.max_rd_atomic);
  fprintf(f, "# the best streamed bandwidth measured (a run on SimGrid uses its platform's)\n"
             "line_rate: %.0fbps\n", p.line_rate_bps);
  rnr_keys(f, &p);
  retry_keys(f, c, &p);
  return ferror(f) ? -1 : 0;
}
