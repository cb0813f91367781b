/*
 * prepost calibrate: what a device was measured to do (struct pp_calib, filled by calibrate.c on
 * verbs) and the NIC profile those measurements give (models/nics/, struct pp_nic_profile of
 * prepost/simnic.h). The derivation and the profile's text are pure (tests/test_calibrate.c).
 */
#ifndef PP_CALIB_H
#define PP_CALIB_H

#include <stdint.h>
#include <stdio.h>

#include "prepost/simnic.h"

#define PP_CALIB_MAX_SIZES 16
#define PP_CALIB_MAX_CODES 32

/* One message size: post -> send completion of one SEND at a time (median), and the bytes per
 * second of a stream of RDMA WRITEs. 0: not measured. */
struct pp_calib_size {
  uint32_t size;
  uint64_t lat_ns;
  double bw_bytes_s;
};

/* One min_rnr_timer code: post -> RNR_RETRY_EXC_ERR of a SEND the responder never has a
 * receive for, with rnr_retry 0 (t0_ns) and rnr_retry `retries` (tr_ns), medians of `reps`; the
 * delay is (tr - t0) / retries, min and max over the repetitions. */
struct pp_calib_rnr {
  uint8_t code;
  uint32_t retries, reps;
  uint64_t t0_ns, tr_ns;
  uint64_t delay_ns, delay_min_ns, delay_max_ns;
};

/* The ACK timeout: post -> RETRY_EXC_ERR of a SEND to a QP that no longer exists, with
 * retry_cnt 0 (t0_ns) and 1 (t1_ns): the device's timeout for `code` is t1 - t0. */
struct pp_calib_timeout {
  uint8_t code;
  uint64_t t0_ns, t1_ns;
};

/* retry_cnt 7 against a peer that stopped answering (its QP destroyed), ACK timeout `code`: the
 * device's retry rules. The IBTA's fail RETRY_EXC_ERR after 7 retries (t_ns); rxe never counts
 * 7 down (rxe_comp.c, rxe_completer, COMPST_ERROR_RETRY) and is still retrying at bound_ns
 * (16 timeouts after the post, twice what 7 retries take; a timeout: the longest of the
 * measured ones and the IBTA's). */
struct pp_calib_retry7 {
  bool measured;
  bool failed; /* RETRY_EXC_ERR within bound_ns, after t_ns */
  uint8_t code;
  uint64_t bound_ns, t_ns;
};

struct pp_calib {
  char name[64];
  char device[64];
  char when[64];  /* UTC, for the profile's header */
  uint32_t mtu;   /* the port's active MTU, bytes */
  /* ibv_query_device (0: not known) */
  uint32_t max_qp, max_qp_wr, max_srq, max_mr, cq_depth, max_rd_atomic;
  struct pp_calib_size sizes[PP_CALIB_MAX_SIZES];
  uint32_t nsizes;
  double wqe_rate;        /* small (one packet) WRITEs streamed per second; 0: not measured */
  uint32_t wqe_size;
  /* ACKs: over a stream of `ack_msgs` one-packet WRITEs the device sent this many packets
   * besides the requests (the responder's ACKs); ack_msgs 0: not measured (no counter) */
  uint64_t ack_msgs, ack_packets;
  struct pp_calib_rnr rnr[PP_CALIB_MAX_CODES];
  uint32_t nrnr;
  struct pp_calib_timeout tmo[4];
  uint32_t ntmo;
  struct pp_calib_retry7 retry7;
};

/* The delay one RNR measurement gives ((tr - t0) / retries, 0 when tr <= t0). */
uint64_t pp_calib_rnr_delay(uint64_t t0_ns, uint64_t tr_ns, uint32_t retries);
/* The profile the measurements give, over the default profile: mtu, wqe, ACK coalescing, line
 * rate, device limits, and the RNR model: an rnr_delay entry per measured code and, when the
 * shortest code measured waited more than twice its IBTA delay (a device that rounds up),
 * rnr_min = the least delay measured over all codes (the floor the unmeasured short codes get;
 * no measured code is raised by it). */
void pp_calib_profile(const struct pp_calib *c, struct pp_nic_profile *p);
/* rc_model from the retry_cnt 7 measurement: rxe when the device was still retrying at the
 * bound, ibta when it failed (and when not measured). */
/* Writes the profile as YAML that pp_nic_profile_load() reads, each measurement as a comment.
 * 0, or -1 when writing failed. */
int pp_calib_write(FILE *f, const struct pp_calib *c);

#endif
