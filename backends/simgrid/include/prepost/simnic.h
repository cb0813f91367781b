/*
 * A simulated RC HCA: the rules of InfiniBand/RoCE reliable connection (IBTA spec; rxe's source is the judge)
 * as a pure, deterministic state machine. It knows nothing about SimGrid: packets leave through
 * a wire callback and arrive through simnic_on_packet(); timers are pulled with
 * simnic_next_deadline() / simnic_on_timer(). The SimGrid driver (simrun.c) moves the packets with
 * SimGrid communications; the unit tests move them with a tiny event queue.
 *
 * Model: one packet per message on the wire (its simulated size counts every MTU-sized packet and
 * its headers), PSNs advance by the number of MTU packets, go-back-N retransmission at message
 * granularity, coalesced ACKs, real bytes copied between the hosts' registered buffers.
 */
#ifndef PP_SIMNIC_H
#define PP_SIMNIC_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "prepost/nic.h"
#include "prepost/param.h"
#include "prepost/run.h"

#include "prepost/export.h"

#ifdef __cplusplus
extern "C" {
#endif
PP_API_BEGIN

struct pp_trace_pkt; /* prepost/trace.h */

/* Timing and limits of a NIC model (models/nics/<name>.yaml). */
struct pp_nic_profile {
  char name[64];
  uint32_t mtu;           /* largest path MTU the port supports, bytes */
  uint32_t header_bytes;  /* wire bytes per MTU packet besides payload and extension headers
                             (RoCEv2/IPv4 with preamble, FCS and inter-frame gap: 82) */
  uint64_t wqe_ns;        /* NIC time to process one send WQE (serialises transmissions) */
  uint32_t ack_every;     /* responder ACKs at least every this many packets ... */
  uint64_t ack_delay_ns;  /* ... or this long after the first unacknowledged one (0: at once) */
  uint32_t max_qp;
  uint32_t max_qp_wr;
  uint32_t max_srq;
  uint32_t max_mr;
  uint32_t cq_depth;
  uint32_t max_rd_atomic; /* the device's max_qp_rd_atom */
  uint32_t train_max;     /* WQEs of one QP that may leave as one wire transfer (doorbell
                             batching; 1 = every message on its own) */
  double line_rate_bps;   /* the port's line rate, bits/s (> 0): every NIC of a fabric
                             serialises at it until simnic_set_line_rate() says otherwise (the
                             SimGrid driver sets the bandwidth of the host's link) */
  /* The RNR delay the requester waits after an RNR NAK carrying min_rnr_timer code c, as the
   * device implements it (simnic_rnr_delay_ns()): rnr_delay_ns[c] when nonzero, else the IBTA
   * table's (pp_rnr_timer_ns(c)); then at least rnr_min_ns; then rounded up to a whole number
   * of rnr_tick_ns (0: no rounding), as a kernel timer in jiffies does (rxe). All zero: the
   * spec's delays. Keys rnr_tick, rnr_min and the mapping rnr_delay {code: duration}. */
  uint64_t rnr_tick_ns;
  uint64_t rnr_min_ns;
  uint64_t rnr_delay_ns[32];
  /* How the RC transport departs from the IBTA (key rc_model, enum pp_rc_model): IBTA (0) for
   * hardware, RXE for Soft-RoCE (the Linux rxe driver), whose requester differs in two ways
   * (drivers/infiniband/sw/rxe/rxe_comp.c, rxe_completer): retry_cnt 7 is never counted down
   * (COMPST_ERROR_RETRY decrements comp.retry_cnt only when it is not 7), so it retries an
   * unresponsive peer forever, as only rnr_retry 7 does in the IBTA; and the retransmission
   * timer (retrans_timer) keeps running through an RNR wait (COMPST_RNR_RETRY arms
   * rnr_nak_timer and leaves retrans_timer alone), so an ACK timeout that falls in the wait
   * spends one retry_cnt (RETRY_EXC_ERR when none is left) without retransmitting: the
   * requester waits for rnr_nak_timer (rxe_req.c: wait_for_rnr_timer) before it goes back.
   * Its responder needs the receive of a multi-packet WRITE_WITH_IMM only at the last packet
   * (rxe_opcode.c RXE_RWR_MASK, rxe_resp.c check_resource): the others are placed, the last is
   * RNR-NAKed, and retries after the first resend the last packet alone (rxe_req.c, req_retry
   * from comp.psn, which the duplicates' ACKs moved there). */
  uint32_t rc_model;
};

/* Values of pp_nic_profile.rc_model (names: pp_rc_model_names, "ibta" and "rxe"). */
enum pp_rc_model { PP_RC_IBTA = 0, PP_RC_RXE = 1, PP_RC_MODEL_COUNT };
extern const char *const pp_rc_model_names[PP_RC_MODEL_COUNT];

/* Longest RNR delay a profile may give (one minute: 90 times code 0's 655 ms). */
#define PP_RNR_DELAY_MAX_NS 60000000000ull

/* Faults the fabric injects, from its seeded PRNG (the fault catalogue of `prepost explore`,
 * tools/explore/explore.h). Zero everywhere: no fault. Every fault stops at until_ns (0: never), which
 * leaves a quiet phase in which liveness is judged. */
struct pp_faults {
  double loss; /* probability that any packet (request, response, ACK) is dropped */
  uint64_t until_ns;        /* faults stop at this simulated time; 0 = never */
  uint64_t jitter_ns;       /* each wire transfer leaves its NIC U[0, jitter_ns] late (order
                               per source kept: a transfer never overtakes an earlier one) */
  double scramble;          /* probability that an RDMA WRITE (> 64 B) is placed out of order:
                               its last 64-byte chunk first, then a random part of the others in
                               a random order, the rest (and its ACK and completion) scramble_ns
                               later or when the next packet for that QP arrives */
  uint64_t scramble_ns;
  uint64_t srq_delay_ns;    /* a WQE posted to an SRQ becomes usable only this much later */
  uint64_t qp_error_ns;     /* 0 = off; at this time QP number qp_error_qp (mod the live QPs) of
                               host qp_error_host is forced to ERROR (async QP_FATAL) */
  uint32_t qp_error_host, qp_error_qp;
  uint64_t rkey_ns;         /* 0 = off; at this time every remotely accessible MR of host
                               rkey_host gets a new rkey: peers holding the old one fail */
  uint32_t rkey_host;
  /* the SimGrid driver's (simrun.c) */
  uint64_t cq_delay_ns;     /* a rank polls a completion U[0, cq_delay_ns] after it is queued */
  uint64_t pause_ranks;     /* bitmask (first 64): these ranks' processes freeze (no polling, no
                               timers; the NIC keeps going) ... */
  uint64_t pause_at_ns, pause_ns; /* ... during [pause_at_ns, pause_at_ns + pause_ns) */
  /* exhaustive mode: wire transfer number i < order_bits (of the whole fabric, in the order
   * they are handed to the wire) leaves order_window_ns late when bit i of order_mask is set */
  uint32_t order_bits;
  uint64_t order_mask;
  uint64_t order_window_ns;
  /* the driver's: the messages rank byzantine_rank sends are mutated, each with probability
   * `byzantine` (backends/simgrid/byzantine.h); 0 = off. Not stopped by until_ns: a lying peer
   * does not reform, and what is judged is that the honest ranks never accept its lies. */
  double byzantine;
  uint32_t byzantine_rank;
  bool byzantine_data_lies; /* test-only, no scenario key: pp_byz_set_data_lies() */
};

/* The scenario's `faults` keys (all but byzantine_data_lies), in backends/simgrid/sim_param.c.
 * The entries flagged PP_PARAM_F_RANK name ranks: parse them with pp_param_rank_bound(). */
PP_PARAM_TABLE(pp_faults);

/* How often each fault fired on a host: struct pp_fault_counts of prepost/run.h. */

/* Fills a profile with the values of the default ("cx6-100g") model. */
void pp_nic_profile_default(struct pp_nic_profile *p);
/* The integer keys of a NIC profile (a file, or the scenario's inline `nic:`), in
 * backends/simgrid/sim_param.c; `name` is a string, outside the table. */
PP_PARAM_TABLE(pp_nic);
/* What a requester of this profile waits after an RNR NAK with min_rnr_timer code (0..31;
 * larger codes are taken mod 32, as the 5-bit field of the AETH is). */
uint64_t simnic_rnr_delay_ns(const struct pp_nic_profile *p, unsigned code);
/* Checks a profile; on error writes a sentence into err. */
enum pp_status pp_nic_profile_check(const struct pp_nic_profile *p, char *err, size_t errlen);

struct simnic_pkt; /* opaque; owned by the fabric's pool */
struct simnic;
struct simnic_fabric;

/* How a packet leaves a host: the driver must deliver it, in order per (source, destination)
 * pair, by calling simnic_on_packet() on the destination NIC. wire_bytes is what it costs on
 * the link. */
struct simnic_wire {
  void *ctx;
  void (*send)(void *ctx, uint32_t src_host, uint32_t dst_host, struct simnic_pkt *pkt,
               uint64_t wire_bytes);
};

/* Bytes one simulated NIC of `profile` allocates for `qps` QPs whose queues hold send_wqes and
 * recv_wqes entries in all: its SRQ table (max_srq), and its QP, MR and CQ tables, which grow
 * by doubling to what the run uses (at most max_qp, max_mr, cq_depth; the CQ to one entry per
 * WQE, the MR table to an estimate of 1,024 registrations). */
uint64_t simnic_mem_bytes(const struct pp_nic_profile *profile, uint64_t qps, uint64_t send_wqes,
                          uint64_t recv_wqes);

/* The fabric owns every NIC and the packet pool; nhosts NICs share one profile. */
enum pp_status simnic_fabric_create(uint32_t nhosts, const struct pp_nic_profile *profile,
                                    const struct pp_faults *faults, uint64_t seed,
                                    const struct simnic_wire *wire, struct simnic_fabric **out);
void simnic_fabric_destroy(struct simnic_fabric *f);
struct simnic *simnic_fabric_nic(struct simnic_fabric *f, uint32_t host);
/* Packets handed to the wire and not yet delivered or dropped. */
uint64_t simnic_fabric_in_flight(const struct simnic_fabric *f);
/* One line per NIC event (packets sent, received and dropped, completions, QP state changes),
 * stamped with the simulated time; NULL turns logging off. */
void simnic_fabric_set_log(struct simnic_fabric *f, FILE *log);

/* The ops table the engine calls; its `void *nic` is a struct simnic *. */
extern const struct pp_nic_ops simnic_ops;

void simnic_on_packet(struct simnic *n, uint64_t now, struct simnic_pkt *pkt);
/* Returns a packet to the pool without delivering it (end of run). */
void simnic_pkt_discard(struct simnic_fabric *f, struct simnic_pkt *pkt);
/* The wire lost a packet (a whole train) it was handed: it no longer counts as in flight. */
void simnic_pkt_lost(struct simnic_fabric *f, struct simnic_pkt *pkt);
/* The packet after pkt in its train (NULL at the end): a wire send may carry several packets,
 * all for the same destination, delivered together by one simnic_on_packet(). */
const struct simnic_pkt *simnic_pkt_next(const struct simnic_pkt *pkt);
/* A value the driver keeps with a packet in flight (the trace recorder's packet id + 1, so that
 * its arrival names it without a lookup); 0 on a new packet. */
void simnic_pkt_set_tag(const struct simnic_pkt *pkt, uint64_t tag);
uint64_t simnic_pkt_tag(const struct simnic_pkt *pkt);
/* A second such value, the wire's own (simrun: which of the sender's SimGrid communications
 * carries the transfer, so that the sender can reap it once it arrived); 0 on a new packet. */
void simnic_pkt_set_wire_ref(struct simnic_pkt *pkt, uint64_t ref);
uint64_t simnic_pkt_wire_ref(const struct simnic_pkt *pkt);
uint64_t simnic_next_deadline(const struct simnic *n);
void simnic_on_timer(struct simnic *n, uint64_t now);

/* Operations that take time: post_send/post_recv through the ops table are stamped with the time
 * of the last simnic_set_now() (the driver calls it before handing control to the engine). */
void simnic_set_now(struct simnic *n, uint64_t now);
/* The port's line rate: the NIC serialises what it transmits, one message after the other, each
 * taking max(wqe_ns, wire bytes / rate). A NIC starts at its profile's line_rate_bps; a rate
 * that is not finite and > 0 is refused (PP_INVALID, nothing changes): bandwidth is never
 * silently infinite. */
enum pp_status simnic_set_line_rate(struct simnic *n, double bits_per_second);

int simnic_poll_cq(struct simnic *n, struct pp_wc *wc, int max);
/* 1 and fills ev when an async event is queued, else 0. */
int simnic_get_async_event(struct simnic *n, struct pp_async_event *ev);
enum pp_qp_state simnic_qp_state(const struct simnic *n, uint32_t qp_num);
void simnic_counters(const struct simnic *n, struct pp_nic_counters *out);
void simnic_fault_counts(const struct simnic *n, struct pp_fault_counts *out);
/* Completions or async events are queued (the driver may poll them later). */
bool simnic_has_events(const struct simnic *n);

/* Packet introspection for logs and traces. */
struct simnic_pkt_info {
  const char *kind; /* "REQ", "ACK", "RNR_NAK", "NAK", "READ_RESP" */
  uint32_t src_host, dst_host, dst_qpn, psn, len;
  enum pp_wr_opcode opcode;
  /* for traces and packet captures */
  uint32_t src_qpn, npkts;
  uint32_t syndrome;        /* RNR_NAK: min_rnr_timer code; NAK: 1 invalid request, 2 remote
                               access, 3 remote operational */
  bool has_ack;
  uint32_t ack_epsn;        /* every PSN before this one is acknowledged (when has_ack) */
  uint64_t remote_addr;
  uint32_t rkey, imm;
};
void simnic_pkt_describe(const struct simnic_pkt *pkt, struct simnic_pkt_info *out);
/* The same as a trace's packet (PKT_TX, prepost/trace.h) in one step, for the recorder's hot path:
 * every field but id and wire_bytes (0). */
void simnic_pkt_trace(const struct simnic_pkt *pkt, struct pp_trace_pkt *out);
/* An RNR NAK or a NAK (what a trace records without every packet). */
bool simnic_pkt_is_error(const struct simnic_pkt *pkt);
/* Whether pkt or a packet after it in its train is one (one call per wire transfer). */
bool simnic_pkt_train_has_error(const struct simnic_pkt *pkt);

PP_API_END
#ifdef __cplusplus
}
#endif

#endif
