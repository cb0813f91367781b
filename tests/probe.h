/*
 * The probe workload, for the tests that drive a protocol's send/recv themselves (test_ring,
 * test_hostile): it replaces a rank's workload, posts nothing of its own and records every
 * completion the protocol reports. The engines are created with the collective workload, which
 * posts nothing before it starts, so its state can be dropped.
 */
#ifndef PP_TEST_PROBE_H
#define PP_TEST_PROBE_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/core/engine_impl.h"

#define PROBE_MAX 512

struct done_rec {
  uint64_t cookie;
  enum pp_wc_status st;
  uint32_t src, len; /* receives only */
};

struct probe {
  struct done_rec sends[PROBE_MAX], recvs[PROBE_MAX];
  unsigned nsend, nrecv;
  bool repost; /* on the next recv_done, post `again` as a new receive */
  struct pp_msg again;
  enum pp_status repost_status;
};

/* Drops e's workload and makes p (zeroed) its probe. */
void probe_install(struct pp_engine *e, struct probe *p);

#endif
