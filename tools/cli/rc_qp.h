/* Bringing one RC QP of a raw vnic up, the one way prepost's own raw-verbs tools do it
 * (prepost calibrate, the raw rows of prepost bench): INIT with its access flags, then RTR and
 * RTS with the attributes below. */
#ifndef PP_TOOLS_RC_QP_H
#define PP_TOOLS_RC_QP_H

#include <stdint.h>

#include "prepost/verbsnic.h"

struct pp_rc_attrs {
  enum pp_mtu mtu;
  uint32_t dest_qpn, rq_psn, sq_psn;
  uint8_t max_dest_rd_atomic, max_rd_atomic;
  uint8_t min_rnr_timer;                 /* the responder's, to RTR */
  uint8_t timeout, retry_cnt, rnr_retry; /* the requester's, to RTS */
};

/* RESET -> INIT with `access` (PP_ACCESS_*): 0, or -1 when the device refused. */
int pp_rc_qp_init(struct vnic *nic, uint32_t qpn, unsigned access);
/* INIT -> RTR -> RTS with `a`: 0, or -1 when the device refused either step. */
int pp_rc_qp_connect(struct vnic *nic, uint32_t qpn, const struct pp_rc_attrs *a);

#endif
