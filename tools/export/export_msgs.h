/* The messages of a trace, for the pictures (tools/export/export_perfetto.c, tools/export/export_svg.c): with
 * every packet (trace.packets all: --trace-packets) every packet from its transmission to its
 * arrival; without (a verbs trace, a simulator trace recorded without --trace-packets) every
 * send that consumes a receive, from its post to the matching receive completion (RC delivers
 * in order per QP, so the k-th consuming send of a QP meets the k-th receive completion of its
 * peer QP), and the RNR NAKs and NAKs the trace has as packets. */
#ifndef PP_EXPORT_MSGS_H
#define PP_EXPORT_MSGS_H

#include <stdbool.h>
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

/* How the protocol of a trace names its messages (its engine configuration says which). */
enum pp_xfam { PP_XFAM_PLAIN, PP_XFAM_P2P, PP_XFAM_RING_CREDITS, PP_XFAM_RING_CTS };
enum pp_xfam pp_xfam_of(const struct pp_trace *t);
/* p2p: the header the trace captured at the receiver right before m's receive completion;
 * false when m was not received or its head was not captured. */
struct pp_p2p_msg_info;
bool pp_xmsg_p2p_info(const struct pp_trace *t, const struct pp_xmsg *m,
                      struct pp_p2p_msg_info *info);
/* How to name the messages of a trace: its family and, for another protocol that names its
 * messages (a plug-in's msg_name in its struct pp_proto_def), its def. */
struct pp_proto_def;
struct pp_xnames {
  enum pp_xfam fam;
  const struct pp_proto_def *def;
};
void pp_xnames_of(const struct pp_trace *t, struct pp_xnames *out);
/* The name a protocol message (send_rec set) has in its protocol: EAGER, RTS, CTS, FIN, ACK,
 * CREDIT (p2p), data or credit (ring), the def's msg_name of its captured head, the opcode
 * otherwise; a packet: its kind or opcode. */
const char *pp_xmsg_name(const struct pp_trace *t, const struct pp_xnames *n,
                         const struct pp_xmsg *m);
/* Whether m's PSN is known: packets carry theirs; a send paired with its receive completion
 * has none in the trace (psn is 0 there). */
static inline bool pp_xmsg_has_psn(const struct pp_xmsg *m)
{
  return m->send_rec == SIZE_MAX;
}

/* Fills *out (malloc'd, free it) with the messages in the order they were sent. */
int pp_trace_messages(const struct pp_trace *t, struct pp_xmsg **out, size_t *n, char *err,
                      size_t errlen);
/* The protocol's messages whatever the backend: every send that consumes a receive, paired with
 * the receive completion it caused (as without packets above), with their record numbers. */
int pp_trace_protocol_messages(const struct pp_trace *t, struct pp_xmsg **out, size_t *n,
                               char *err, size_t errlen);

#endif
