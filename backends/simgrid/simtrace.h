/* The simulated backend's packets in a trace (engine/trace.h): PKT_TX when a NIC hands a packet
 * to the wire, PKT_RX when the driver delivers it. NULL writer: nothing. */
#ifndef PP_SIMTRACE_H
#define PP_SIMTRACE_H

#include <stdint.h>

#include "backends/simgrid/simnic.h"
#include "engine/trace.h"

void pp_simtrace_tx(struct pp_trace_writer *w, uint64_t now, const struct simnic_pkt *pkt,
                    uint64_t wire_bytes);
void pp_simtrace_rx(struct pp_trace_writer *w, uint64_t now, uint32_t rank,
                    const struct simnic_pkt *pkt);
/* Fills a trace packet from the NIC's description. */
void pp_simtrace_pkt(const struct simnic_pkt *pkt, uint64_t wire_bytes, struct pp_trace_pkt *out);

#endif
