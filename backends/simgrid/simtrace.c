#include "simtrace.h"

void pp_simtrace_pkt(const struct simnic_pkt *pkt, uint64_t wire_bytes, struct pp_trace_pkt *k)
{
  simnic_pkt_trace(pkt, k);
  k->wire_bytes = wire_bytes;
}

void pp_simtrace_tx(struct pp_trace_writer *w, uint64_t now, const struct simnic_pkt *pkt,
                    uint64_t wire_bytes, bool all)
{
  if (!w)
    return;
  /* a wire transfer is a train of packets (doorbell batching): the first carries its bytes */
  for (const struct simnic_pkt *p = pkt; p; p = simnic_pkt_next(p)) {
    if (!all && !simnic_pkt_is_error(p))
      continue; /* untagged: its arrival is not recorded either */
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
