/* Small C wrappers over SimGrid's S4U where the 3.32 C API falls short. */
#ifndef PP_SGSHIM_H
#define PP_SGSHIM_H

#include <simgrid/forward.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Waits for `comm` (a handle from sg_mailbox_get_async) at most `timeout` seconds (< 0: no
 * limit). Returns 1 when it completed (the handle is consumed, as by sg_comm_wait), 0 on timeout
 * (the comm stays pending and the handle stays valid: sg_comm_wait_any_for would release it). */
int pp_sg_wait_for(sg_comm_t comm, double timeout);

/* Builds the generated cluster: hosts host0..host<n-1> in a star zone where a route crosses
 * only its destination's port link (bytes_per_s, latency_s): the switch's egress queue to that
 * host, shared by whatever flows into it. Returns 1, or 0 when SimGrid refused it. */
int pp_sg_star_cluster(unsigned n, double bytes_per_s, double latency_s);

#ifdef __cplusplus
}
#endif

#endif
