/* A tiny deterministic event loop that drives simulated NICs without SimGrid, for unit tests of
 * the RC rules: packets arrive after a fixed latency plus size / bandwidth, FIFO per host pair. */
#ifndef PP_SIMNIC_HARNESS_H
#define PP_SIMNIC_HARNESS_H

#include "prepost/simnic.h"

#define H_MAX_EVENTS 65536
#define H_MAX_HOSTS 8

struct h_event {
  uint64_t at;
  uint64_t seq;
  uint32_t dst;
  struct simnic_pkt *pkt;
};

/* Return true to drop the packet described by info (called for every packet sent). */
typedef bool (*h_drop_fn)(void *ctx, const struct simnic_pkt_info *info);

struct harness {
  struct simnic_fabric *f;
  uint32_t nhosts;
  uint64_t now;
  uint64_t latency_ns;
  double bytes_per_ns;
  struct h_event ev[H_MAX_EVENTS];
  uint32_t nev;
  uint64_t seq;
  uint64_t last_arrival[H_MAX_HOSTS][H_MAX_HOSTS];
  h_drop_fn drop;
  void *drop_ctx;
  uint64_t delivered;
};

/* Default QP attributes used by h_connect (tests modify a copy). */
struct h_qp_opts {
  uint8_t min_rnr_timer, rnr_retry, timeout, retry_cnt, max_rd_atomic;
  uint32_t max_send_wr, max_recv_wr;
  uint32_t srq_a, srq_b; /* SRQ numbers for each side, 0 = own RQ */
};
struct h_qp_opts h_qp_defaults(void);

struct harness *h_create(uint32_t nhosts, const struct pp_nic_profile *prof, double loss,
                         uint64_t seed);
/* The same with any faults (struct pp_faults). */
struct harness *h_create_faults(uint32_t nhosts, const struct pp_nic_profile *prof,
                                const struct pp_faults *faults, uint64_t seed);
void h_destroy(struct harness *h);
struct simnic *h_nic(struct harness *h, uint32_t host);
/* Creates a QP on each host and takes both to RTS; *qa on host a, *qb on host b. */
void h_connect(struct harness *h, uint32_t a, uint32_t b, const struct h_qp_opts *o, uint32_t *qa,
               uint32_t *qb);
/* Runs events until nothing is scheduled or time passes `until`. Returns events processed. */
uint64_t h_run(struct harness *h, uint64_t until);
/* The time of the next packet arrival or NIC timer; UINT64_MAX when nothing is scheduled.
 * h_run(h, h_next_time(h)) advances the simulation by exactly one instant. */
uint64_t h_next_time(struct harness *h);
/* Registers buf on host with access; returns the MR. */
struct pp_mr h_reg(struct harness *h, uint32_t host, void *buf, size_t len, unsigned access);
int h_post_send(struct harness *h, uint32_t host, uint32_t qpn, enum pp_wr_opcode op, uint64_t id,
                const struct pp_mr *mr, void *buf, uint32_t len, uint64_t raddr, uint32_t rkey,
                bool signaled);
int h_post_recv(struct harness *h, uint32_t host, uint32_t qpn, uint64_t id, const struct pp_mr *mr,
                void *buf, uint32_t len);
/* Polls every completion of a host into wc (at most max); returns how many. */
int h_poll(struct harness *h, uint32_t host, struct pp_wc *wc, int max);

#endif
