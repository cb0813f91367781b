/*
 * The verbs NIC: prepost/nic.h's pp_nic_ops table implemented on libibverbs (rdma-core).
 *
 * One `struct vnic` per rank: one device context, one protection domain, one send CQ and one
 * receive CQ (both on one completion channel, polled by the driver's progress loop), the QPs and
 * SRQs the engine creates, and the addresses of the peer ranks (filled at bootstrap) from which
 * modify_qp builds the address vector at RTR. Numbers cross the interface unchanged: every value
 * in prepost/nic.h equals its ibverbs counterpart.
 *
 * Nothing here talks to other ranks; backends/verbs/boot.c exchanges addresses and connection
 * information, backends/verbs/verbsrun.c is the driver.
 */
#ifndef PP_VERBSNIC_H
#define PP_VERBSNIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "prepost/nic.h"

#include "prepost/export.h"

#ifdef __cplusplus
extern "C" {
#endif
PP_API_BEGIN

#define VNIC_NAME_MAX 64

struct vnic_config {
  char device[VNIC_NAME_MAX]; /* "" = the first device with an ACTIVE port */
  int port;                   /* 0 = the first ACTIVE port of the device */
  int gid_index;              /* -1 = automatic (see vnic_pick_gid) */
};

/* What a peer needs to address this NIC; exchanged at bootstrap (fixed layout, see boot.c). */
struct vnic_addr {
  uint8_t gid[16];
  uint16_t lid;
  uint8_t link_layer; /* IBV_LINK_LAYER_INFINIBAND (1) or IBV_LINK_LAYER_ETHERNET (2) */
  uint8_t port;
};

struct vnic;

/* The table the engine drives (designated initializers, no NULL slot). */
extern const struct pp_nic_ops vnic_ops;

/*
 * Opens the device and port of cfg (or the first ACTIVE port), allocates the PD, the completion
 * channel and the CQs, picks the GID. nranks bounds the peer table. On error returns PP_NOTFOUND
 * (no device / no such device), PP_STATE (port not ACTIVE), PP_IO (a verbs call failed) or
 * PP_NOMEM and writes a sentence naming what failed into err.
 */
enum pp_status vnic_open(const struct vnic_config *cfg, uint32_t nranks, struct vnic **out,
                         char *err, size_t errlen);
/* Destroys what the engine left (QPs, SRQs, MRs), then the CQs, channel, PD and context. */
void vnic_close(struct vnic *n);

const char *vnic_device_name(const struct vnic *n);
int vnic_port(const struct vnic *n);
int vnic_gid_index(const struct vnic *n);
/* The active MTU of the port in bytes (path MTUs above it are clamped to it). */
uint32_t vnic_active_mtu(const struct vnic *n);
void vnic_local_addr(const struct vnic *n, struct vnic_addr *out);
/* Where `rank` is: used by modify_qp to RTR for the QPs created with attr->peer == rank. */
enum pp_status vnic_set_peer_addr(struct vnic *n, uint32_t rank, const struct vnic_addr *a);

/* Polls both CQs: up to max completions into wc (send CQ first). Returns the count, or -1 when
 * polling failed (the CQ is in error). */
int vnic_poll_cq(struct vnic *n, struct pp_wc *wc, int max);
/* One pending async event, without blocking; false when none. Events of types outside
 * prepost/nic.h's list keep their ibverbs number. */
bool vnic_get_async_event(struct vnic *n, struct pp_async_event *ev);
/* Arms both CQs for the next completion event; 0 or an errno. */
int vnic_arm_cq(struct vnic *n);
/* After the completion channel's fd polled readable: reads and acknowledges the events. */
void vnic_consume_cq_events(struct vnic *n);
int vnic_comp_fd(const struct vnic *n);
int vnic_async_fd(const struct vnic *n);
/* Send WRs posted and not completed yet, signalled or not (0 when the send side is quiet). */
uint64_t vnic_sends_outstanding(const struct vnic *n);
/* What the device says about this rank's queues, for a run that stops before it is done: the
 * completions polled and WRs posted so far, and per QP its state, the next PSN its requester
 * sends, the PSN its responder expects and the send WRs outstanding (ibv_query_qp). A peer's
 * "next send psn" equal to this QP's "expected receive psn" says every request the peer sent
 * was taken by this QP's responder. snprintf-like: writes at most len bytes (NUL-terminated
 * when len > 0), returns the length of the whole text. */
size_t vnic_describe(struct vnic *n, char *buf, size_t len);
/* One QP as the device reports it (ibv_query_qp), with the backend's counts of its send WRs not
 * covered by a completion yet and of the receives posted for its responder (every WR the engine
 * posts goes through vnic_ops, every completion through vnic_poll_cq: posted minus polled). */
struct vnic_qp_state {
  uint32_t qpn, peer, dest_qpn;
  uint32_t state;          /* enum ibv_qp_state; VNIC_QP_UNKNOWN: ibv_query_qp failed */
  uint32_t sq_psn, rq_psn; /* the next PSN its requester sends, the PSN its responder expects */
  uint32_t sq_outstanding; /* send WRs posted and not completed */
  uint32_t sq_takes_recv;  /* of those, the ones that consume a receive at the responder (SEND,
                            * SEND_WITH_IMM, RDMA_WRITE_WITH_IMM; READ and WRITE do not) */
  uint32_t rq_posted;      /* receives posted and not completed: the QP's, or its SRQ's */
  uint32_t srq_num;        /* 0: the QP's own receive queue */
};
#define VNIC_QP_UNKNOWN 255u
/* Fills s with at most max of the rank's QPs; returns how many it has. */
size_t vnic_qp_states(struct vnic *n, struct vnic_qp_state *s, size_t max);
/* Takes the device's current counters (its driver's, backends/verbs/counters.h) as the zero of
 * query_counters, which marks what the driver does not count as missing (PP_UNSUPPORTED, all
 * missing, for a driver counters.c does not know). */
void vnic_counters_mark(struct vnic *n);

/* A GID table entry as doctor and the GID choice see it. */
struct vnic_gid {
  uint32_t index;
  uint8_t gid[16];
  int type; /* 0 IB, 1 RoCE v1, 2 RoCE v2 (enum ibv_gid_type) */
  char netdev[32];
};
/* The GID to use among n entries of an Ethernet port: the RoCE v2 IPv4-mapped one
 * (::ffff:a.b.c.d), else the first RoCE v2, else the first RoCE v1, else index 0. -1 when n == 0. */
int vnic_pick_gid(const struct vnic_gid *g, int n);
/* "::ffff:169.254.77.1" / "fe80::...": writes the printable GID. */
void vnic_gid_str(const uint8_t gid[16], char *buf, size_t len);
const char *vnic_gid_type_name(int type);

PP_API_END
#ifdef __cplusplus
}
#endif

#endif
