/* p2p: protocol violations of untrusted peers, the checks of the rendezvous replies (CTS, FIN),
 * and the wire messages described for tools. The receive path's checks (p2p_on_recv) are in
 * eager.c, where the eager path's receive is one function. */
#include "p2p_impl.h"

#include <stdio.h>
#include <string.h>

#include "prepost/names.h"

/* Untrusted peers: the message in x broke the protocol (field f said `value`; `limit` is what
 * was allowed: the bound when at_most, else the value expected). It is reported, its buffer is
 * never posted again and the connection to its peer fails (PP_P2P_E_PEER, GENERAL_ERR). */
enum pp_status p2p_violation(struct pp_engine *e, uint64_t now, struct rx *x, uint8_t type,
                             enum pp_violation_field f, uint64_t value, uint64_t limit,
                             bool at_most)
{
  struct p2p *p = P2P(e);
  uint32_t pi = p->ch[x->ch].peer;
  if (x->pool) /* srq: a buffer of the shared pool goes back to the SRQ */
    p2p_srq_recycle(e, x);
  else
    x->state = RX_DEAD;
  /* A peer that failed already (a QP error on one of its channels) is judged no more: what it
   * sent before its other channels went to ERROR may name requests that failed with it. */
  if (p->peer[pi].failed)
    return PP_OK;
  struct pp_violation v = {.peer = p->peer[pi].rank, .field = (uint8_t)f, .at_most = at_most,
                           .value = value, .limit = limit};
  snprintf(v.msg, sizeof(v.msg), "%s", pp_p2p_msg_name((enum pp_p2p_msg)type));
  pp_engine_violation(e, now, &v);
  p2p_fail_peer(e, now, pi, 0, PP_P2P_E_PEER, PP_WC_GENERAL_ERR);
  return PP_OK;
}

/* A fragment's index, offset and length as the transfer has them (CTS, RPUT FIN). */
enum pp_status p2p_check_frag(struct pp_engine *e, uint64_t now, struct rx *x,
                              const struct hdr *h, uint32_t idx, uint32_t len)
{
  struct p2p *p = P2P(e);
  if (h->seq != idx)
    return p2p_violation(e, now, x, h->type, PP_VF_FRAG, h->seq, idx, false);
  if (h->off != (uint64_t)idx * p->prm.frag_size)
    return p2p_violation(e, now, x, h->type, PP_VF_OFF, h->off, (uint64_t)idx * p->prm.frag_size,
                         false);
  if (h->flen != frag_len(p, len, idx))
    return p2p_violation(e, now, x, h->type, PP_VF_FLEN, h->flen, frag_len(p, len, idx), false);
  return PP_OK;
}

/* A CTS at the RPUT sender r: its flags, the length the receiver takes (at most ours, then the
 * same in every CTS), its handle, its fragment count, and the next fragment in order within
 * the message and the pipeline. */
enum pp_status p2p_check_cts(struct pp_engine *e, uint64_t now, struct rx *x, const struct hdr *h,
                             const struct req *r)
{
  struct p2p *p = P2P(e);
  uint32_t idx = r->fnext + r->fq_n; /* the CTSs so far */
  if (h->flags & ~F_ABORT)
    return p2p_violation(e, now, x, h->type, PP_VF_FLAGS, h->flags, F_ABORT, true);
  if (idx == 0 && h->len > r->len)
    return p2p_violation(e, now, x, h->type, PP_VF_LEN, h->len, r->len, true);
  if (idx > 0 && (h->len != r->plen || h->rreq != r->peer_req))
    return p2p_violation(e, now, x, h->type, h->len != r->plen ? PP_VF_LEN : PP_VF_HANDLE,
                         h->len != r->plen ? h->len : h->rreq,
                         h->len != r->plen ? r->plen : r->peer_req, false);
  if (h->nfrag != nfrag_of(p, h->len))
    return p2p_violation(e, now, x, h->type, PP_VF_NFRAG, h->nfrag, nfrag_of(p, h->len), false);
  if (idx >= h->nfrag || r->fq_n >= p->P)
    return p2p_violation(e, now, x, h->type, PP_VF_FRAG, h->seq,
                         idx >= h->nfrag ? h->nfrag - 1ull : r->fnext + p->P - 1ull, true);
  return p2p_check_frag(e, now, x, h, idx, h->len);
}

/* ---------------------------------------------------------------- wire messages, for tools */

#define PP_X(id, value, name) _Static_assert(M_##id == (value), "PP_P2P_MSG_LIST is the wire's");
PP_P2P_MSG_LIST(PP_X)
#undef PP_X

static const char *const msg_names[] = {
#define PP_X(id, value, name) [value] = name,
    PP_P2P_MSG_LIST(PP_X)
#undef PP_X
};

const char *pp_p2p_msg_name(enum pp_p2p_msg m)
{
  return pp_name_of(msg_names, PP_NAMES_COUNT(msg_names), m);
}

bool pp_p2p_msg_describe(const void *head, size_t len, struct pp_p2p_msg_info *out)
{
  struct hdr h;
  if (len < sizeof(h))
    return false;
  memcpy(&h, head, sizeof(h));
  if (h.type < M_EAGER || h.type > M_CREDIT)
    return false;
  *out = (struct pp_p2p_msg_info){.type = (enum pp_p2p_msg)h.type,
                                  .credits = h.credits,
                                  .rcredits = h.rcredits,
                                  .seq = h.seq,
                                  .tag = h.tag,
                                  .len = h.len};
  return true;
}

