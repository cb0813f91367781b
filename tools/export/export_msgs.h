/* The messages of a trace, for the pictures (tools/export/export_perfetto.c, tools/export/export_svg.c): with
 * every packet (trace.packets all: --trace-packets) every packet from its transmission to its
 * arrival; without (a verbs trace, a simulator trace recorded without --trace-packets) every
 * send that consumes a receive, from its post to the matching receive completion (RC delivers
 * in order per QP, so the k-th consuming send of a QP meets the k-th receive completion of its
 * peer QP), and the RNR NAKs and NAKs the trace has as packets. */
#ifndef PP_EXPORT_MSGS_H
#define PP_EXPORT_MSGS_H

#include <stddef.h>
#include <stdint.h>

#include "prepost/trace.h"

enum pp_msg_kind { PP_MK_DATA, PP_MK_ACK, PP_MK_RNR_NAK, PP_MK_NAK, PP_MK_READ_RESP };

struct pp_xmsg {
  uint32_t src, dst;      /* ranks */
  uint32_t src_qpn, dst_qpn;
  uint64_t t0, t1;        /* sent, arrived (t1 = UINT64_MAX: never arrived) */
  enum pp_msg_kind kind;
  uint32_t opcode;        /* enum pp_wr_opcode of data */
  uint32_t psn, len;
  uint32_t syndrome;
  size_t send_rec, recv_rec; /* protocol messages: the POST_SEND and the receive's WC record
                                (SIZE_MAX: none); packets: SIZE_MAX */
};

/* Fills *out (malloc'd, free it) with the messages in the order they were sent. */
int pp_trace_messages(const struct pp_trace *t, struct pp_xmsg **out, size_t *n, char *err,
                      size_t errlen);
/* The protocol's messages whatever the backend: every send that consumes a receive, paired with
 * the receive completion it caused (as without packets above), with their record numbers. */
int pp_trace_protocol_messages(const struct pp_trace *t, struct pp_xmsg **out, size_t *n,
                               char *err, size_t errlen);

#endif
