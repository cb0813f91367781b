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

#ifdef __cplusplus
}
#endif

#endif
