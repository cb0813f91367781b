/*
 * The NCCL-style ring FIFO protocols (engine/proto/ring/ring.c): parameters and statistics.
 *
 * A connection between two ranks owns, per channel (one RC QP each), a ring of `slots` slots of
 * `slot_size` bytes in the receiver's registered memory. The sender RDMA-writes each chunk of a
 * message into the next slot with RDMA_WRITE_WITH_IMM (the immediate carries the chunk's sequence
 * number and a last-chunk flag: the tail); the receiver copies the chunk out to the application's
 * buffer, releases the slot and returns credit:
 *   ring-credits  the cumulative `head` (slots released), RDMA-written into a counter in the
 *                 sender's memory;
 *   ring-cts      one clear-to-send entry {addr, size, rkey, tag, idx} per released slot,
 *                 RDMA-written into a FIFO in the sender's memory (32-byte entries).
 * Either way the receiver posts the receive WQE a slot's next chunk will consume before the
 * credit that lets the sender write it, so RNR is impossible by construction. Credit updates
 * are themselves WRITE_WITH_IMM carrying the new head (or the end of the new CTS entries) in
 * their immediate: the engine is event driven, the completion wakes the sender, which uses
 * exactly the credit that completion announces (the counter, checked against it, may already hold
 * a later value: using that would let more unseen credit updates be in flight than the sender
 * has receive WQEs for) and reads CTS entries only below it. It never polls memory, and never
 * reads the last byte of a payload as a flag.
 *
 * Messages larger than a slot are cut into slot-sized chunks; the chunks of a connection are
 * striped round robin over its channels (global chunk g goes to channel g mod channels) and
 * consumed in g order, so messages arrive whole and in order.
 *
 * This header only holds types; it is included by engine.h.
 */
#ifndef PP_RING_H
#define PP_RING_H

#include <stddef.h>
#include <stdint.h>

#include "param.h"
#include "status.h"

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif
PP_API_BEGIN

struct pp_ring_params {
  uint32_t slots;          /* S: slots per channel (NCCL_STEPS = 8) */
  uint32_t slot_size;      /* bytes per slot */
  uint32_t channels;       /* QPs per connection; chunks are striped over them */
  uint32_t credit_batch;   /* return credit as soon as this many released slots are unreturned,
                              and ... */
  uint64_t credit_idle_ns; /* ... when the channel is idle (nothing left to consume): at once if
                              0, else at the latest this long after the first unreturned release */
};

/* The immediate of a ring WRITE_WITH_IMM: a credit update has PP_RING_IMM_CREDIT and 31 bits of
 * value (ring-credits: slots consumed; ring-cts: consumed + slots, the end of the CTS entries); a
 * data chunk its 30-bit sequence number, with PP_RING_IMM_LAST on a message's last chunk. */
#define PP_RING_IMM_CREDIT (1u << 31)
#define PP_RING_IMM_LAST (1u << 30)

#define PP_RING_DEFAULT_SLOTS 8u
#define PP_RING_DEFAULT_SLOT_SIZE (128u * 1024u)
#define PP_RING_MAX_SLOTS 4096u
#define PP_RING_MAX_SLOT_SIZE (1u << 30)
#define PP_RING_MAX_CONN_BYTES (1ull << 31) /* channels * slots * slot_size */

/* Fills the defaults: 8 slots of 128 KiB, 1 channel, credit returned per slot, at once. */
void pp_ring_params_default(struct pp_ring_params *p);
/* The scenario section `ring` (engine/proto/ring/ring_param.c), of PP_RING_PARAM_COUNT entries
 * (pp_ring_param_count, as a constant for static initializers). */
PP_PARAM_TABLE(pp_ring);
#define PP_RING_PARAM_COUNT 5u
/* Validates; on error writes a sentence naming the field into err. */
enum pp_status pp_ring_params_check(const struct pp_ring_params *p, char *err, size_t errlen);

/* What one connection (this rank <-> peer) did. */
struct pp_ring_conn_stats {
  uint32_t peer;
  uint64_t credit_stall_ns;    /* time a chunk was ready to go and its channel had no credit */
  uint64_t credit_stalls;      /* such episodes */
  uint64_t chunks_sent;        /* data writes posted */
  uint64_t chunks_received;    /* chunks consumed from the slots */
  uint64_t credit_updates_sent;     /* head / CTS writes posted */
  uint64_t credit_updates_received; /* head / CTS writes that woke this sender */
};

#define PP_RING_STATS_CONNS 8

struct pp_ring_stats {
  uint32_t nconns; /* entries of conn[] in use (the first PP_RING_STATS_CONNS connections) */
  struct pp_ring_conn_stats conn[PP_RING_STATS_CONNS];
  /* protocol invariants seen broken: a chunk landing in an unreleased slot, a chunk out of
   * sequence, a CTS entry with the wrong idx or tag, a head beyond the tail: 0 with honest peers,
   * each one fails its connection (pp_rank_stats.first_violation says which). */
  uint64_t violations;
};

PP_API_END
#ifdef __cplusplus
}
#endif

#endif
