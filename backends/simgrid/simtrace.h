/* The simulated backend's packets in a trace (prepost/trace.h): PKT_TX when a NIC hands a packet
 * to the wire, PKT_RX when the driver delivers it. NULL writer: nothing. Every packet when `all`
 * (PP_TRACE_PACKETS_ALL), else only RNR NAKs and NAKs (PP_TRACE_PACKETS_ERRORS: the data and ACK
 * packets are most of a trace's cost and only a pcap export needs them). */
#ifndef PP_SIMTRACE_H
#define PP_SIMTRACE_H

#include <stdbool.h>
#include <stdint.h>

#include "prepost/simnic.h"
#include "prepost/trace.h"

void pp_simtrace_tx(struct pp_trace_writer *w, uint64_t now, const struct simnic_pkt *pkt,
                    uint64_t wire_bytes, bool all);
void pp_simtrace_rx(struct pp_trace_writer *w, uint64_t now, uint32_t rank,
                    const struct simnic_pkt *pkt);
/* Fills a trace packet from the NIC's description. */
void pp_simtrace_pkt(const struct simnic_pkt *pkt, uint64_t wire_bytes, struct pp_trace_pkt *out);

#endif
