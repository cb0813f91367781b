#include "simtrace.h"

void pp_simtrace_pkt(const struct simnic_pkt *pkt, uint64_t wire_bytes, struct pp_trace_pkt *k)
{
  struct simnic_pkt_info i;
  simnic_pkt_describe(pkt, &i);
  /* the NIC names kinds with static strings: remember which pointer is which (no strcmp per
   * packet) */
  static const char *seen[PP_TPKT_COUNT];
  int kind = -1;
  for (int k = 0; k < PP_TPKT_COUNT && kind < 0; k++)
    if (seen[k] == i.kind)
      kind = k;
  if (kind < 0 && (kind = pp_trace_pkt_kind_from_name(i.kind)) >= 0)
    seen[kind] = i.kind;
  *k = (struct pp_trace_pkt){
      .kind = kind < 0 ? PP_TPKT_REQ : (uint32_t)kind,
      .opcode = kind == PP_TPKT_READ_RESP ? PP_WR_RDMA_READ : (uint32_t)i.opcode,
      .src_rank = i.src_host,
      .dst_rank = i.dst_host,
      .src_qpn = i.src_qpn,
      .dst_qpn = i.dst_qpn,
      .psn = i.psn,
      .npkts = i.npkts,
      .len = i.len,
      .syndrome = i.syndrome,
      .has_ack = i.has_ack,
      .ack_psn = i.ack_epsn,
      .remote_addr = i.remote_addr,
      .rkey = i.rkey,
      .imm = i.imm,
      .wire_bytes = wire_bytes,
  };
}

void pp_simtrace_tx(struct pp_trace_writer *w, uint64_t now, const struct simnic_pkt *pkt,
                    uint64_t wire_bytes)
{
  if (!w)
    return;
  /* a wire transfer is a train of packets (doorbell batching): the first carries its bytes */
  for (const struct simnic_pkt *p = pkt; p; p = simnic_pkt_next(p)) {
    struct pp_trace_pkt k;
    pp_simtrace_pkt(p, p == pkt ? wire_bytes : 0, &k);
    /* the id travels with the packet (+ 1: 0 is "not recorded"): its arrival needs no lookup */
    simnic_pkt_set_tag(p, pp_trace_pkt_tx_id(w, now, &k) + 1);
  }
}

void pp_simtrace_rx(struct pp_trace_writer *w, uint64_t now, uint32_t rank,
                    const struct simnic_pkt *pkt)
{
  for (const struct simnic_pkt *p = pkt; w && p; p = simnic_pkt_next(p)) {
    uint64_t tag = simnic_pkt_tag(p);
    if (!tag)
      continue; /* not seen leaving (the trace began later): nothing to name */
    simnic_pkt_set_tag(p, 0); /* named once */
    pp_trace_pkt_rx_id(w, now, rank, tag - 1);
  }
}
