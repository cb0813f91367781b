/* Engine internals shared by engine.c and the protocol modules; not a public header. */
#ifndef PP_ENGINE_IMPL_H
#define PP_ENGINE_IMPL_H

#include "engine.h"
#include "prng.h"
#include "timerq.h"

/* wr_id = conn << 40 | kind << 32 | slot */
enum pp_wr_kind { PP_WRK_SEND = 1, PP_WRK_RECV = 2 };

static inline uint64_t pp_wr_id(uint32_t conn, enum pp_wr_kind kind, uint32_t slot)
{
  return (uint64_t)conn << 40 | (uint64_t)kind << 32 | slot;
}
static inline uint32_t pp_wr_id_conn(uint64_t id) { return (uint32_t)(id >> 40); }
static inline enum pp_wr_kind pp_wr_id_kind(uint64_t id) { return (enum pp_wr_kind)((id >> 32) & 0xff); }
static inline uint32_t pp_wr_id_slot(uint64_t id) { return (uint32_t)id; }

enum pp_timer_kind { PP_TIMER_SUBMIT = 1, PP_TIMER_REPOST = 2 };

/* One connection (one RC QP) to a peer rank. */
struct pp_conn {
  uint32_t peer;
  uint32_t qp_num;
  uint32_t psn;
  bool sends;      /* this rank sends to peer */
  bool recvs;      /* this rank receives from peer */
  bool connected;
  bool failed;     /* an error completion was seen: the QP is in ERROR */
  /* send side: sq_depth message buffers */
  uint8_t *sbuf;
  struct pp_mr smr;
  uint32_t *sfree; /* stack of free send slots */
  uint32_t nsfree;
  uint64_t *slot_seq;
  /* receive side: rq_depth message buffers */
  uint8_t *rbuf;
  struct pp_mr rmr;
  uint64_t expected_seq;
  uint64_t received;
  uint64_t recv_failed; /* receive WQEs that completed in error */
};

struct pp_engine {
  struct pp_engine_cfg cfg;
  const struct pp_nic_ops *ops;
  void *nic;
  struct pp_conn conns[2];
  uint32_t nconns;
  int dest;   /* index into conns of the connection we send on, or -1 */
  int source; /* index into conns of the connection we receive on, or -1 */
  bool slow;  /* this rank holds each received buffer consume_ns */
  bool started;
  struct pp_timerq timers;
  struct pp_prng prng;
  /* sending application */
  uint64_t start_ns;
  uint64_t submitted, posted, completed;
  uint64_t *lat;
  uint64_t nlat;
  struct pp_rank_stats st;
};

enum pp_status pp_engine_post_recv(struct pp_engine *e, uint32_t ci, uint32_t slot);
enum pp_status pp_engine_push_timer(struct pp_engine *e, uint64_t deadline, uint32_t kind,
                                    uint32_t arg);

/* The naive protocol (naive.c). */
enum pp_status pp_naive_start(struct pp_engine *e, uint64_t now);
enum pp_status pp_naive_on_wc(struct pp_engine *e, uint64_t now, const struct pp_wc *wc);
enum pp_status pp_naive_on_timer(struct pp_engine *e, uint64_t now, const struct pp_timer *t);
bool pp_naive_done(const struct pp_engine *e);

/* Message contents: a header and a pattern derived from (source, seq), checked byte by byte. */
void pp_msg_fill(uint8_t *buf, uint32_t size, uint32_t src, uint64_t seq);
/* 0 when buf holds message `seq` from `src` intact. */
int pp_msg_check(const uint8_t *buf, uint32_t size, uint32_t src, uint64_t seq);

#endif
