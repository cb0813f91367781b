/*
 * A byzantine peer: a pp_nic_ops wrapper that mutates what one rank's engine sends. The engine
 * of that rank is the ordinary one; between it and its NIC, each work request it posts may be
 * rewritten before the NIC sees it: a header field of a SEND overwritten, an immediate, a remote
 * address, an rkey or a length changed, a control message dropped, duplicated or held back
 * behind the next one. The honest ranks see a peer that lies on the wire, and must never corrupt
 * memory or accept bad data because of it (issue 12, `prepost explore --faults byzantine`).
 *
 * Two sources of decisions:
 *  - seeded (the explorer's fault): each work request is mutated with probability `rate`, and
 *    only in ways an engine can detect from its own state. Left out on purpose: the tag and the
 *    context of a message (a lie there is a legal message to another receive), the length and
 *    low address bits of an RTS (a shorter or shifted message inside the peer's own registered
 *    memory is the peer's data, as far as anyone can tell), the payload bytes past a header, and
 *    dropping, shortening or holding back a plain RDMA WRITE (a FIN that arrives without its
 *    data, or before it, cannot be told from one that arrives with it: RDMA WRITE has no
 *    receiver-side notification). What is left is checkable: header fields against the
 *    receiver's state, message lengths against the bytes received, immediates against the
 *    sequence, remote accesses against the registrations (the NIC refuses them);
 *  - bytes (the libFuzzer harness tests/fuzz/fuzz_wire.c): every decision is read from the
 *    fuzzer's input, with no restriction; an exhausted input passes everything through.
 *
 * The wire layout of the p2p header (engine/proto/p2p/p2p_impl.h) that the seeded source aims
 * at: type u8 @0, flags u8 @1, credits u16 @2, ctx @4, seq @8, tag @12, len @16, nfrag @20, sreq
 * u64 @24, rreq u64 @32, addr u64 @40, rkey @48, flen @52, off @56, rcredits u16 @60
 * (tests/test_explore.c checks it against pp_p2p_msg_describe()).
 *
 * A dropped request goes out as a zero-length RDMA WRITE (IB checks no rkey for those), so the
 * engine still gets its completion in order and the peer sees nothing. Mutated headers go out of a bounce buffer the wrapper
 * registers on the NIC (the rest of a SEND still comes from the engine's buffer, as a second
 * scatter element), so the engine's own memory is never changed.
 */
#ifndef PP_BYZANTINE_H
#define PP_BYZANTINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "prepost/nic.h"
#include "prepost/prng.h"

/* X(id, name) */
#define PP_BYZ_ACTION_LIST(X)                                                  \
  X(PASS, "pass")                                                              \
  X(FIELD, "field")                                                            \
  X(IMM, "imm")                                                                \
  X(RADDR, "raddr")                                                            \
  X(RKEY, "rkey")                                                              \
  X(SHORTEN, "shorten")                                                        \
  X(DROP, "drop")                                                              \
  X(DUP, "dup")                                                                \
  X(HOLD, "hold")                                                              \
  X(INJECT, "inject")

enum pp_byz_action {
#define PP_X(id, name) PP_BYZ_##id,
  PP_BYZ_ACTION_LIST(PP_X)
#undef PP_X
  PP_BYZ_ACTION_COUNT
};
const char *pp_byz_action_name(enum pp_byz_action a);

/* What the seeded source knows of the wire format it aims at. */
enum pp_byz_wire { PP_BYZ_WIRE_P2P, PP_BYZ_WIRE_RING };

struct pp_byz_counts {
  uint64_t wrs;                       /* work requests the engine posted */
  uint64_t done[PP_BYZ_ACTION_COUNT]; /* what happened to them (PASS: untouched) */
  uint64_t reads;                     /* bytes mode: READ responses overwritten */
};

#define PP_BYZ_SLOTS 1024u /* bounce headers of 64 bytes, reused round robin */
#define PP_BYZ_MAX_QPS 256u
#define PP_BYZ_MAX_MRS 256u

struct pp_byz;

/* The seeded source: mutate each work request with probability rate (0..1). */
enum pp_status pp_byz_create_seeded(const struct pp_nic_ops *ops, void *nic, enum pp_byz_wire wire,
                                    double rate, uint64_t seed, struct pp_byz **out);
/* The bytes source: decisions read from data (not copied: it must outlive the wrapper). */
enum pp_status pp_byz_create_bytes(const struct pp_nic_ops *ops, void *nic, const uint8_t *data,
                                   size_t len, struct pp_byz **out);
/* Releases the bounce buffer (before the NIC is destroyed) and the wrapper. */
void pp_byz_destroy(struct pp_byz *b);

/* The ops table to give the engine; its `void *nic` is the struct pp_byz *. */
extern const struct pp_nic_ops pp_byz_ops;

void pp_byz_counts(const struct pp_byz *b, struct pp_byz_counts *out);
/* Test-only positive control (tests/test_explore.c): every mutation the seeded source picks
 * becomes a changed byte of the message's data instead, the one lie no receiver can detect, so
 * that the explorer's integrity invariant must fire. */
void pp_byz_set_data_lies(struct pp_byz *b, bool on);
/* Bytes source only: a peer RDMA-READs [addr, addr + len) of this (the byzantine) rank's memory
 * under rkey: the next decision may overwrite part of it from the input first (what the READ
 * response carries is the liar's to choose). Only memory the engine registered with that rkey
 * through the wrapper is touched. true when it changed something. */
bool pp_byz_read_response(struct pp_byz *b, uint64_t addr, uint32_t len, uint32_t rkey);
/* Bytes source only: how many input bytes the decisions asked for so far (past the end of the
 * input they read as 0: pass). A run on an empty input tells how long an input of that run's
 * decisions is: the fuzzer's seeds (tests/fuzz/fuzz_wire.h). */
size_t pp_byz_consumed(const struct pp_byz *b);

#endif
