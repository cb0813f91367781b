/*
 * The data of an exact replay: what the NIC moved between the replayed engines.
 *
 * A trace records each received message's first trace.capture_bytes bytes (MEM records), not
 * the payload, so a replayed receiver used to find zeros beyond them and count healthy messages
 * as corrupt. The replayed senders hold the payload, though: they are the same engines fed the
 * same inputs. This module moves it as the RC NIC did, between the engines of one replay:
 *  - a SEND (or SEND_WITH_IMM) carries the bytes its gather list held when it was posted (as
 *    the NIC reads them; the sender may not change them before its completion, and an inline
 *    send's buffer is the sender's again at once); the k-th consuming send of a QP meets the
 *    k-th successful receive completion of its peer QP (RC delivers in order), whose receive
 *    (on the QP or its SRQ, by wr_id) scatters them;
 *  - an RDMA WRITE's bytes are placed at its remote address when it is known to have landed: the
 *    receive completion of a WRITE_WITH_IMM, or a successful completion on the sender's QP of it
 *    or of a later work request (completions are in order; an unsignaled WRITE has none);
 *  - an RDMA READ copies from the responder's memory, as it is then, at its completion.
 * Remote addresses are in the recorded address space (they come from the peers' recorded
 * connection information); the caller translates them. A MEM record is applied after the move
 * and wins: what the NIC placed is the record (a Byzantine peer's lie included). Receives without
 * a replayed sender (a rank missing from the trace) are counted, not guessed.
 */
#ifndef PP_REPLAY_DATA_H
#define PP_REPLAY_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "prepost/nic.h"

/* What the mover asks the replay. */
struct rpd_env {
  void *ctx;
  /* QP qpn of rank: its peer rank, the peer's QP number (0 before RTR) and its SRQ (0: none). */
  bool (*qp)(void *ctx, uint32_t rank, uint32_t qpn, uint32_t *peer, uint32_t *dest_qpn,
             uint32_t *srq);
  /* A live pointer to len bytes at the recorded address addr of rank's region rkey; NULL when
   * no region of the replayed engine holds them. *recorded: the trace holds every change of
   * that region (a small remote-writable MR, diffed before each input): MEM records place its
   * bytes in time, and a WRITE placed late could overwrite a later one. */
  void *(*remote)(void *ctx, uint32_t rank, uint32_t rkey, uint64_t addr, uint64_t len,
                  bool *recorded);
};

struct rpd_stats {
  uint64_t moved_bytes;   /* bytes moved from senders to receivers */
  uint64_t no_sender;     /* receive completions whose sender the replay does not have */
  uint64_t no_place;      /* WRITE/READ bytes with no replayed region at their address */
};

struct rpd;

/* NULL when out of memory. */
struct rpd *rpd_create(uint32_t nranks, struct rpd_env env);
void rpd_free(struct rpd *d);
void rpd_stats(const struct rpd *d, struct rpd_stats *out);

/* A work request the replayed engine of rank posted (and the recorded call accepted), with its
 * live addresses. srq: wr went to SRQ number q instead of a QP. 0 or -1 (out of memory). */
int rpd_post_send(struct rpd *d, uint32_t rank, uint32_t qpn, const struct pp_send_wr *wr);
int rpd_post_recv(struct rpd *d, uint32_t rank, uint32_t q, bool srq, const struct pp_recv_wr *wr);

/* A completion of rank, before the engine sees it: the bytes it stands for are moved. */
void rpd_wc(struct rpd *d, uint32_t rank, const struct pp_wc *wc);

#endif
