/* The wire protocols' fuzz target, shared by the libFuzzer harness (tests/fuzz/fuzz_wire.c with
 * -DPP_LIBFUZZER, tests/fuzz/run wire) and the deterministic corpus replay
 * (tests/test_wire_fuzz.c).
 *
 * Two real engines on two simulated NICs (backends/simgrid/simnic.c, driven by a small event
 * loop of their own, no SimGrid), stream workload in both directions: rank 0 is honest, rank 1's
 * engine sits behind the byzantine wrapper (backends/simgrid/byzantine.h) in its bytes mode, so
 * every work request rank 1 posts is passed, rewritten (any header byte, immediate, remote
 * address, rkey, length), dropped, duplicated, held back or preceded by an injected SEND of
 * arbitrary bytes, as the input says, and every RDMA READ rank 0 makes of rank 1's memory may
 * return bytes of the input. That covers every message rank 0 can receive: EAGER, RTS, CTS, FIN,
 * ACK, CREDIT for the p2p protocols, data chunks, credit counters and CTS entries for the ring
 * protocols, and READ responses for RGET.
 *
 * Input: 4 bytes of configuration, then the decisions.
 *   byte 0  protocol (bits 0-1: eager, rndv, ring-credits, ring-cts), channels (bit 2: 1 or 2)
 *   byte 1  message size (mod 6: 16 B, 200 B, 3000 B, 9000 B: RGET, 40000 B: RPUT, 100000 B)
 *   byte 2  messages per direction (1 + mod 6)
 *   byte 3  receive queue depth (bits 0-2: 4..11), ring slots (bits 3-4: 2..5)
 * A decision byte 0 is "pass": an input that ends early lets the rest of the run be honest.
 * PP_FUZZ_WIRE_PROTOCOL=NAME (eager, rndv, ring-credits, ring-cts) forces the protocol, to fuzz
 * one past a known crash of another.
 *
 * Must never crash, trip a sanitizer or an assertion, whatever the input. Returns the messages
 * rank 0 received intact (-1: the configuration was refused).
 */
#ifndef PP_FUZZ_WIRE_H
#define PP_FUZZ_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define PP_FUZZ_WIRE_CFG 4u

struct pp_fuzz_wire_result {
  int received;       /* rank 0's messages received intact; -1: configuration refused */
  uint64_t expected;  /* messages each direction carries */
  uint64_t mutated;   /* rank 1's work requests the input changed */
  size_t decisions;   /* input bytes the decisions asked for (a seed's length past the config) */
  int honest_error;   /* rank 0's engine returned an error status from an event (0: none) */
};

int pp_fuzz_wire_one(const uint8_t *data, size_t size);
/* The same, with what happened. */
void pp_fuzz_wire_run(const uint8_t *data, size_t size, struct pp_fuzz_wire_result *out);

#endif
