#include "simnic_harness.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static void h_send(void *ctx, uint32_t src, uint32_t dst, struct simnic_pkt *pkt,
                   uint64_t wire_bytes)
{
  struct harness *h = ctx;
  struct simnic_pkt_info info;
  simnic_pkt_describe(pkt, &info);
  if (h->drop && h->drop(h->drop_ctx, &info)) {
    simnic_pkt_lost(h->f, pkt);
    return;
  }
  cr_assert_lt(h->nev, H_MAX_EVENTS, "harness event queue full");
  uint64_t at = h->now + h->latency_ns + (uint64_t)(wire_bytes / h->bytes_per_ns);
  if (at < h->last_arrival[src][dst])
    at = h->last_arrival[src][dst];
  h->last_arrival[src][dst] = at;
  h->ev[h->nev++] = (struct h_event){.at = at, .seq = h->seq++, .dst = dst, .pkt = pkt};
}

struct h_qp_opts h_qp_defaults(void)
{
  return (struct h_qp_opts){
      .min_rnr_timer = 1,
      .rnr_retry = 7,
      .timeout = 14,
      .retry_cnt = 7,
      .max_rd_atomic = 4,
      .max_send_wr = 64,
      .max_recv_wr = 64,
  };
}

struct harness *h_create(uint32_t nhosts, const struct pp_nic_profile *prof, double loss,
                         uint64_t seed)
{
  struct pp_faults faults = {.loss = loss};
  return h_create_faults(nhosts, prof, &faults, seed);
}

struct harness *h_create_faults(uint32_t nhosts, const struct pp_nic_profile *prof,
                                const struct pp_faults *fl, uint64_t seed)
{
  struct harness *h = calloc(1, sizeof(*h));
  cr_assert_not_null(h);
  h->nhosts = nhosts;
  h->latency_ns = 1000;
  h->bytes_per_ns = 12.5; /* 100 Gb/s */
  struct pp_faults faults = *fl;
  struct simnic_wire wire = {.ctx = h, .send = h_send};
  struct pp_nic_profile p;
  if (prof) {
    p = *prof;
  } else {
    pp_nic_profile_default(&p);
    p.max_qp = 16;
    p.max_mr = 64;
    p.max_srq = 4;
    p.cq_depth = 4096;
  }
  cr_assert_eq(simnic_fabric_create(nhosts, &p, &faults, seed, &wire, &h->f), PP_OK);
  return h;
}

void h_destroy(struct harness *h)
{
  for (uint32_t i = 0; i < h->nev; i++)
    simnic_pkt_discard(h->f, h->ev[i].pkt);
  simnic_fabric_destroy(h->f);
  free(h);
}

struct simnic *h_nic(struct harness *h, uint32_t host)
{
  return simnic_fabric_nic(h->f, host);
}

static void to_rts(struct harness *h, uint32_t host, uint32_t qpn, uint32_t dest, uint32_t my_psn,
                   uint32_t peer_psn, const struct h_qp_opts *o)
{
  struct simnic *n = h_nic(h, host);
  struct pp_qp_attr a = {.qp_state = PP_QPS_INIT,
                         .qp_access_flags = PP_ACCESS_REMOTE_WRITE | PP_ACCESS_REMOTE_READ};
  cr_assert_eq(simnic_ops.modify_qp(n, qpn, &a, PP_QP_STATE | PP_QP_ACCESS_FLAGS), PP_OK);
  a = (struct pp_qp_attr){.qp_state = PP_QPS_RTR,
                          .path_mtu = PP_MTU_4096,
                          .dest_qp_num = dest,
                          .rq_psn = peer_psn,
                          .max_dest_rd_atomic = o->max_rd_atomic,
                          .min_rnr_timer = o->min_rnr_timer};
  cr_assert_eq(simnic_ops.modify_qp(n, qpn, &a,
                                    PP_QP_STATE | PP_QP_PATH_MTU | PP_QP_DEST_QPN | PP_QP_RQ_PSN |
                                        PP_QP_MAX_DEST_RD_ATOMIC | PP_QP_MIN_RNR_TIMER),
               PP_OK);
  a = (struct pp_qp_attr){.qp_state = PP_QPS_RTS,
                          .sq_psn = my_psn,
                          .timeout = o->timeout,
                          .retry_cnt = o->retry_cnt,
                          .rnr_retry = o->rnr_retry,
                          .max_rd_atomic = o->max_rd_atomic};
  cr_assert_eq(simnic_ops.modify_qp(n, qpn, &a,
                                    PP_QP_STATE | PP_QP_SQ_PSN | PP_QP_TIMEOUT | PP_QP_RETRY_CNT |
                                        PP_QP_RNR_RETRY | PP_QP_MAX_QP_RD_ATOMIC),
               PP_OK);
}

void h_connect(struct harness *h, uint32_t a, uint32_t b, const struct h_qp_opts *o, uint32_t *qa,
               uint32_t *qb)
{
  struct pp_qp_init_attr ia = {.max_send_wr = o->max_send_wr,
                               .max_recv_wr = o->max_recv_wr,
                               .max_send_sge = 2,
                               .max_recv_sge = 2,
                               .srq_num = o->srq_a,
                               .peer = b};
  cr_assert_eq(simnic_ops.create_qp(h_nic(h, a), &ia, qa), PP_OK);
  ia.peer = a;
  ia.srq_num = o->srq_b;
  cr_assert_eq(simnic_ops.create_qp(h_nic(h, b), &ia, qb), PP_OK);
  to_rts(h, a, *qa, *qb, 1000, 0xfffff0, o);
  to_rts(h, b, *qb, *qa, 0xfffff0, 1000, o); /* b's PSNs wrap past 2^24 on purpose */
}

static int next_event(const struct harness *h)
{
  int best = -1;
  for (uint32_t i = 0; i < h->nev; i++)
    if (best < 0 || h->ev[i].at < h->ev[best].at ||
        (h->ev[i].at == h->ev[best].at && h->ev[i].seq < h->ev[best].seq))
      best = (int)i;
  return best;
}

uint64_t h_next_time(struct harness *h)
{
  int e = next_event(h);
  uint64_t t = e >= 0 ? h->ev[e].at : UINT64_MAX;
  for (uint32_t i = 0; i < h->nhosts; i++) {
    uint64_t d = simnic_next_deadline(h_nic(h, i));
    if (d < t)
      t = d;
  }
  return t;
}

uint64_t h_run(struct harness *h, uint64_t until)
{
  uint64_t steps = 0;
  for (;;) {
    int e = next_event(h);
    uint64_t t = e >= 0 ? h->ev[e].at : UINT64_MAX;
    uint32_t timer_host = UINT32_MAX;
    for (uint32_t i = 0; i < h->nhosts; i++) {
      uint64_t d = simnic_next_deadline(h_nic(h, i));
      if (d < t) {
        t = d;
        timer_host = i;
      }
    }
    if (t == UINT64_MAX || t > until)
      return steps;
    h->now = t;
    steps++;
    if (timer_host != UINT32_MAX) {
      simnic_on_timer(h_nic(h, timer_host), t);
      continue;
    }
    struct h_event ev = h->ev[e];
    h->ev[e] = h->ev[--h->nev];
    h->delivered++;
    simnic_on_packet(h_nic(h, ev.dst), t, ev.pkt);
  }
}

struct pp_mr h_reg(struct harness *h, uint32_t host, void *buf, size_t len, unsigned access)
{
  struct pp_mr mr;
  cr_assert_eq(simnic_ops.reg_mr(h_nic(h, host), buf, len, access, &mr), PP_OK);
  return mr;
}

int h_post_send(struct harness *h, uint32_t host, uint32_t qpn, enum pp_wr_opcode op, uint64_t id,
                const struct pp_mr *mr, void *buf, uint32_t len, uint64_t raddr, uint32_t rkey,
                bool signaled)
{
  struct pp_send_wr wr = {
      .wr_id = id,
      .opcode = op,
      .send_flags = signaled ? PP_SEND_SIGNALED : 0,
      .num_sge = 1,
      .sg_list = {{.addr = (uint64_t)(uintptr_t)buf, .length = len, .lkey = mr ? mr->lkey : 0}},
      .remote_addr = raddr,
      .rkey = rkey,
      .imm_data = (uint32_t)id,
  };
  simnic_set_now(h_nic(h, host), h->now);
  return simnic_ops.post_send(h_nic(h, host), qpn, &wr);
}

int h_post_recv(struct harness *h, uint32_t host, uint32_t qpn, uint64_t id, const struct pp_mr *mr,
                void *buf, uint32_t len)
{
  struct pp_recv_wr wr = {
      .wr_id = id,
      .num_sge = buf ? 1 : 0,
      .sg_list = {{.addr = (uint64_t)(uintptr_t)buf, .length = len, .lkey = mr ? mr->lkey : 0}},
  };
  return simnic_ops.post_recv(h_nic(h, host), qpn, &wr);
}

int h_poll(struct harness *h, uint32_t host, struct pp_wc *wc, int max)
{
  return simnic_poll_cq(h_nic(h, host), wc, max);
}
