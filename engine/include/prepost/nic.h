/*
 * The NIC interface between the engine and a backend, shaped like ibverbs so that the verbs
 * backend is a thin translation and the simulated NIC can be held to the same semantics.
 * Every numeric value below equals its ibverbs counterpart (enum ibv_wc_status, ibv_wc_opcode,
 * ibv_wr_opcode, ibv_qp_state, ibv_access_flags, ibv_send_flags, ibv_qp_attr_mask,
 * ibv_event_type, ibv_mtu), so traces keep the numbers users know from ibv_wc.
 *
 * Objects are named by integers: a QP by its qp_num, an SRQ by its srq_num. Work requests are
 * posted one at a time (no linked lists). Completions are not polled by the engine: the driver
 * polls the backend's CQ and hands each pp_wc to pp_engine_on_wc().
 */
#ifndef PP_NIC_H
#define PP_NIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif
PP_API_BEGIN

/* enum ibv_wc_status: X(name, value) */
#define PP_WC_STATUS_LIST(X)                                                   \
  X(SUCCESS, 0)                                                                \
  X(LOC_LEN_ERR, 1)                                                            \
  X(LOC_QP_OP_ERR, 2)                                                          \
  X(LOC_EEC_OP_ERR, 3)                                                         \
  X(LOC_PROT_ERR, 4)                                                           \
  X(WR_FLUSH_ERR, 5)                                                           \
  X(MW_BIND_ERR, 6)                                                            \
  X(BAD_RESP_ERR, 7)                                                           \
  X(LOC_ACCESS_ERR, 8)                                                         \
  X(REM_INV_REQ_ERR, 9)                                                        \
  X(REM_ACCESS_ERR, 10)                                                        \
  X(REM_OP_ERR, 11)                                                            \
  X(RETRY_EXC_ERR, 12)                                                         \
  X(RNR_RETRY_EXC_ERR, 13)                                                     \
  X(LOC_RDD_VIOL_ERR, 14)                                                      \
  X(REM_INV_RD_REQ_ERR, 15)                                                    \
  X(REM_ABORT_ERR, 16)                                                         \
  X(INV_EECN_ERR, 17)                                                          \
  X(INV_EEC_STATE_ERR, 18)                                                     \
  X(FATAL_ERR, 19)                                                             \
  X(RESP_TIMEOUT_ERR, 20)                                                      \
  X(GENERAL_ERR, 21)

enum pp_wc_status {
#define PP_X(name, value) PP_WC_##name = value,
  PP_WC_STATUS_LIST(PP_X)
#undef PP_X
  PP_WC_STATUS_COUNT
};

/* enum ibv_wc_opcode (the subset a RC QP produces) */
#define PP_WC_OPCODE_LIST(X)                                                   \
  X(SEND, 0)                                                                   \
  X(RDMA_WRITE, 1)                                                             \
  X(RDMA_READ, 2)                                                              \
  X(RECV, 128)                                                                 \
  X(RECV_RDMA_WITH_IMM, 129)

enum pp_wc_opcode {
#define PP_X(name, value) PP_WC_OP_##name = value,
  PP_WC_OPCODE_LIST(PP_X)
#undef PP_X
};

/* enum ibv_wr_opcode (the subset prepost uses) */
#define PP_WR_OPCODE_LIST(X)                                                   \
  X(RDMA_WRITE, 0)                                                             \
  X(RDMA_WRITE_WITH_IMM, 1)                                                    \
  X(SEND, 2)                                                                   \
  X(SEND_WITH_IMM, 3)                                                          \
  X(RDMA_READ, 4)

enum pp_wr_opcode {
#define PP_X(name, value) PP_WR_##name = value,
  PP_WR_OPCODE_LIST(PP_X)
#undef PP_X
};

/* enum ibv_qp_state (RC uses RESET, INIT, RTR, RTS, ERR) */
#define PP_QP_STATE_LIST(X)                                                    \
  X(RESET, 0)                                                                  \
  X(INIT, 1)                                                                   \
  X(RTR, 2)                                                                    \
  X(RTS, 3)                                                                    \
  X(SQD, 4)                                                                    \
  X(SQE, 5)                                                                    \
  X(ERR, 6)

enum pp_qp_state {
#define PP_X(name, value) PP_QPS_##name = value,
  PP_QP_STATE_LIST(PP_X)
#undef PP_X
};

/* enum ibv_event_type (the subset prepost reports) */
#define PP_EVENT_LIST(X)                                                       \
  X(CQ_ERR, 0)                                                                 \
  X(QP_FATAL, 1)                                                               \
  X(QP_REQ_ERR, 2)                                                             \
  X(QP_ACCESS_ERR, 3)                                                          \
  X(COMM_EST, 4)                                                               \
  X(SRQ_ERR, 14)                                                               \
  X(SRQ_LIMIT_REACHED, 15)                                                     \
  X(QP_LAST_WQE_REACHED, 16)

enum pp_event_type {
#define PP_X(name, value) PP_EVENT_##name = value,
  PP_EVENT_LIST(PP_X)
#undef PP_X
};

/* enum ibv_mtu */
enum pp_mtu {
  PP_MTU_256 = 1,
  PP_MTU_512 = 2,
  PP_MTU_1024 = 3,
  PP_MTU_2048 = 4,
  PP_MTU_4096 = 5,
};

/* enum ibv_access_flags */
enum {
  PP_ACCESS_LOCAL_WRITE = 1 << 0,
  PP_ACCESS_REMOTE_WRITE = 1 << 1,
  PP_ACCESS_REMOTE_READ = 1 << 2,
};

/* enum ibv_send_flags */
enum {
  PP_SEND_SIGNALED = 1 << 1,
};

/* enum ibv_wc_flags */
enum {
  PP_WC_WITH_IMM = 1 << 1,
};

/* enum ibv_qp_attr_mask */
enum {
  PP_QP_STATE = 1 << 0,
  PP_QP_ACCESS_FLAGS = 1 << 3,
  PP_QP_PATH_MTU = 1 << 8,
  PP_QP_TIMEOUT = 1 << 9,
  PP_QP_RETRY_CNT = 1 << 10,
  PP_QP_RNR_RETRY = 1 << 11,
  PP_QP_RQ_PSN = 1 << 12,
  PP_QP_MAX_QP_RD_ATOMIC = 1 << 13,
  PP_QP_MIN_RNR_TIMER = 1 << 15,
  PP_QP_SQ_PSN = 1 << 16,
  PP_QP_MAX_DEST_RD_ATOMIC = 1 << 17,
  PP_QP_DEST_QPN = 1 << 20,
};

#define PP_MAX_SGE 4
#define PP_RNR_RETRY_INFINITE 7

struct pp_mr {
  uint64_t addr;
  uint64_t length;
  uint32_t lkey;
  uint32_t rkey;
  unsigned access;
};

struct pp_sge {
  uint64_t addr;
  uint32_t length;
  uint32_t lkey;
};

struct pp_send_wr {
  uint64_t wr_id;
  enum pp_wr_opcode opcode;
  unsigned send_flags;
  uint32_t num_sge;
  struct pp_sge sg_list[PP_MAX_SGE];
  uint64_t remote_addr; /* RDMA opcodes */
  uint32_t rkey;        /* RDMA opcodes */
  uint32_t imm_data;    /* *_WITH_IMM, host byte order */
};

struct pp_recv_wr {
  uint64_t wr_id;
  uint32_t num_sge;
  struct pp_sge sg_list[PP_MAX_SGE];
};

struct pp_wc {
  uint64_t wr_id;
  enum pp_wc_status status;
  enum pp_wc_opcode opcode;
  uint32_t vendor_err;
  uint32_t byte_len;
  uint32_t imm_data; /* valid when wc_flags & PP_WC_WITH_IMM, host byte order */
  uint32_t qp_num;
  uint32_t src_qp;
  unsigned wc_flags;
};

struct pp_async_event {
  enum pp_event_type type;
  uint32_t qp_num;  /* QP events */
  uint32_t srq_num; /* SRQ events */
};

struct pp_qp_init_attr {
  uint32_t srq_num; /* 0: the QP has its own receive queue */
  uint32_t max_send_wr;
  uint32_t max_recv_wr;
  uint32_t max_send_sge;
  uint32_t max_recv_sge;
  uint32_t peer;    /* the rank this QP will connect to (addressing for the backend) */
};

struct pp_qp_attr {
  enum pp_qp_state qp_state;
  enum pp_mtu path_mtu;
  uint32_t dest_qp_num;
  uint32_t rq_psn;
  uint32_t sq_psn;
  unsigned qp_access_flags;
  uint8_t min_rnr_timer; /* IB code 0..31, see pp_rnr_timer_ns() */
  uint8_t rnr_retry;     /* 0..7, 7 = infinite */
  uint8_t timeout;       /* 0..31: 4.096 us * 2^timeout, 0 = infinite */
  uint8_t retry_cnt;     /* 0..7 */
  uint8_t max_rd_atomic;
  uint8_t max_dest_rd_atomic;
};

struct pp_srq_init_attr {
  uint32_t max_wr;
  uint32_t max_sge;
  uint32_t srq_limit;
};

/* What the NIC counted; the verbs backend reads the device's counters where it has them
 * (backends/verbs/counters.h maps each driver's names). X(field, description), in struct order. */
#define PP_NIC_COUNTER_LIST(X)                                                                \
  X(rnr_naks_sent, "RNR NAKs sent (responder side)")                                         \
  X(rnr_naks_received, "RNR NAKs received (requester side)")                                 \
  X(rnr_retries, "retransmissions after an RNR NAK")                                         \
  X(timeout_retries, "retransmissions after an ACK timeout or a sequence-error NAK")         \
  X(packets_sent, "packets sent")                                                            \
  X(packets_dropped, "packets dropped by injected loss")                                     \
  X(acks_sent, "ACKs sent")

enum pp_nic_counter {
#define PP_X(f, desc) PP_NIC_CNT_##f,
  PP_NIC_COUNTER_LIST(PP_X)
#undef PP_X
  PP_NIC_COUNTER_COUNT
};

struct pp_nic_counters {
  uint64_t rnr_naks_sent;     /* responder side */
  uint64_t rnr_naks_received; /* requester side */
  uint64_t rnr_retries;       /* retransmissions after an RNR NAK */
  uint64_t timeout_retries;   /* retransmissions after an ACK timeout or a PSN sequence-error
                                 NAK (both are rxe's completer_retry_err) */
  uint64_t packets_sent;
  uint64_t packets_dropped;   /* injected loss */
  uint64_t acks_sent;
  /* bit (1u << PP_NIC_CNT_x) set: the device does not count x ("counter not available": JSON
   * null, never a silent 0). 0 on the simulator, which counts everything. */
  uint32_t missing;
};
/* Is counter k counted in c? */
static inline bool pp_nic_counter_have(const struct pp_nic_counters *c, enum pp_nic_counter k)
{
  return !(c->missing & (1u << k));
}

/*
 * The backend's operations. A backend defines one `static const struct pp_nic_ops` filled with
 * designated initializers and no NULL slot; pp_nic_ops_complete() checks the latter.
 * Every function returns an enum pp_status. None of them may call back into the engine:
 * completions and async events are queued by the backend and delivered by its driver loop.
 */
struct pp_nic_ops {
  const char *name;
  int (*reg_mr)(void *nic, void *addr, size_t length, unsigned access, struct pp_mr *mr);
  int (*dereg_mr)(void *nic, const struct pp_mr *mr);
  int (*create_srq)(void *nic, const struct pp_srq_init_attr *attr, uint32_t *srq_num);
  int (*modify_srq)(void *nic, uint32_t srq_num, uint32_t srq_limit);
  int (*destroy_srq)(void *nic, uint32_t srq_num);
  int (*create_qp)(void *nic, const struct pp_qp_init_attr *attr, uint32_t *qp_num);
  int (*modify_qp)(void *nic, uint32_t qp_num, const struct pp_qp_attr *attr, unsigned mask);
  int (*destroy_qp)(void *nic, uint32_t qp_num);
  int (*post_send)(void *nic, uint32_t qp_num, const struct pp_send_wr *wr);
  int (*post_recv)(void *nic, uint32_t qp_num, const struct pp_recv_wr *wr);
  int (*post_srq_recv)(void *nic, uint32_t srq_num, const struct pp_recv_wr *wr);
  int (*query_counters)(void *nic, struct pp_nic_counters *out);
};

/* 1 when every slot of the table is filled. */
int pp_nic_ops_complete(const struct pp_nic_ops *ops);

const char *pp_wc_status_name(enum pp_wc_status s);
/* Index by name ("RNR_RETRY_EXC_ERR"); -1 when unknown. */
int pp_wc_status_from_name(const char *name);
const char *pp_wc_opcode_name(enum pp_wc_opcode op);
const char *pp_wr_opcode_name(enum pp_wr_opcode op);
const char *pp_qp_state_name(enum pp_qp_state s);
const char *pp_event_name(enum pp_event_type t);

/* The IB min_rnr_timer table (code 0 = 655.36 ms, 1 = 10 us, ... 31 = 491.52 ms), in ns. */
uint64_t pp_rnr_timer_ns(unsigned code);
/* Local ACK timeout: 4.096 us * 2^timeout in ns; 0 for timeout 0 (infinite). */
uint64_t pp_ack_timeout_ns(unsigned timeout);
/* 256 << (mtu - 1) bytes; 0 for an invalid enum. */
uint32_t pp_mtu_bytes(enum pp_mtu mtu);
/* The enum for 256..4096 bytes; 0 when not a valid IB MTU. */
enum pp_mtu pp_mtu_from_bytes(uint32_t bytes);
/* A send opcode that consumes a receive WQE at the responder (SEND*, WRITE_WITH_IMM). */
int pp_wr_consumes_recv(enum pp_wr_opcode op);
/* May the QP go from `from` to `to` by modify_qp (ibverbs' table for RC)? */
int pp_qp_transition_ok(enum pp_qp_state from, enum pp_qp_state to);

PP_API_END
#ifdef __cplusplus
}
#endif

#endif
