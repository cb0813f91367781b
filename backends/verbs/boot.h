/*
 * Bootstrap and control channel of the verbs driver: TCP to a coordinator.
 *
 * Why TCP and not rdma_cm: the engine creates its QPs itself (pp_nic_ops.create_qp) and takes
 * them through INIT, RTR and RTS with the scenario's attributes by its own modify_qp calls;
 * rdma_cm's rdma_connect/rdma_accept would perform those transitions for it (and wants to own the
 * QP). A connection is also up to PP_MAX_CHANNELS QPs plus memory regions per peer
 * (struct pp_conn_info, 132 bytes on the wire), more than the 56 bytes of private data a RoCE
 * connect request carries. So ranks exchange addresses and pp_conn_info over a TCP side channel
 * and the engine connects the QPs with its own attributes; the same channel carries the start
 * barrier, global quiescence detection and the results.
 *
 * Every rank (one process each) connects to the coordinator (the launcher process, or a thread of
 * rank 0), says HELLO with its address and its pp_conn_info for every peer, gets the TABLE of
 * everyone's address and of the pp_conn_info meant for it, connects its QPs, says READY, and
 * starts on GO. While running it reports STATE (idle: no engine deadline and no signalled send
 * outstanding; done); when every rank is idle the coordinator PROBEs, and if nobody moved in
 * between it says STOP. A rank also says PROGRESS when its progress mark changed (looked at every
 * no_progress/8): when none came for no_progress, the coordinator says STOP as well. Ranks
 * answer with their RESULT (with what their pending operations wait for: the hang report) and
 * get BYE with the run's outcome.
 * Every wait has a deadline; every failure names what failed.
 */
#ifndef PP_BOOT_H
#define PP_BOOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/simgrid/simrun.h"
#include "backends/verbs/verbsnic.h"
#include "engine/engine.h"
#include "engine/hang.h"

enum boot_msg {
  BOOT_HELLO = 1,
  BOOT_TABLE,
  BOOT_READY,
  BOOT_GO,
  BOOT_STATE,
  BOOT_PROBE,
  BOOT_PROBE_REPLY,
  BOOT_STOP,
  BOOT_RESULT,
  BOOT_BYE,
  BOOT_ERROR, /* rank -> coordinator: text */
  BOOT_ABORT, /* coordinator -> rank: text */
  BOOT_PROGRESS, /* rank -> coordinator: its progress mark changed (engine/hang.h) */
};

#define BOOT_MAX_MSG (64u << 20)
#define BOOT_CONN_INFO_BYTES 132u
#define BOOT_ADDR_BYTES 20u
#define BOOT_HOST_MAX 64

uint64_t boot_now_ns(void); /* CLOCK_MONOTONIC */

/* A byte buffer with little-endian fixed-width writers and bounds-checked readers. */
struct boot_buf {
  uint8_t *p;
  size_t len, cap, at; /* at: read position */
  bool bad;            /* a read ran past the end, or an allocation failed */
};
void boot_buf_free(struct boot_buf *b);
void boot_put8(struct boot_buf *b, uint8_t v);
void boot_put32(struct boot_buf *b, uint32_t v);
void boot_put64(struct boot_buf *b, uint64_t v);
void boot_put_bytes(struct boot_buf *b, const void *p, size_t n);
uint8_t boot_get8(struct boot_buf *b);
uint32_t boot_get32(struct boot_buf *b);
uint64_t boot_get64(struct boot_buf *b);
void boot_get_bytes(struct boot_buf *b, void *p, size_t n);

/* struct pp_conn_info <-> 132 bytes; struct vnic_addr <-> 20 bytes. */
void boot_put_conn_info(struct boot_buf *b, const struct pp_conn_info *ci);
void boot_get_conn_info(struct boot_buf *b, struct pp_conn_info *ci);
void boot_put_addr(struct boot_buf *b, const struct vnic_addr *a);
void boot_get_addr(struct boot_buf *b, struct vnic_addr *a);
/* What a rank reports at the end: stats, counters, host, its latency histogram (engine/hist.h,
 * NULL: it records none; a bounded size however long the run). */
void boot_put_result(struct boot_buf *b, const struct pp_rank_result *r, const struct pp_hist *lat);
/* *lat: malloc'd (free it), NULL when none; r->receives malloc'd too. A histogram that does not
 * add up sets b->bad. */
void boot_get_result(struct boot_buf *b, struct pp_rank_result *r, struct pp_hist **lat);
/* A rank's pending waits (engine/hang.h), appended to its RESULT: the first n of total. */
void boot_put_waits(struct boot_buf *b, const struct pp_wait *w, uint32_t n, uint32_t total);
/* Reads at most max waits into w (the rest are skipped); returns how many were read, *total how
 * many the rank had. */
uint32_t boot_get_waits(struct boot_buf *b, struct pp_wait *w, uint32_t max, uint32_t *total);
/* pp_run_result_free() without linking the simulator. */
void boot_result_free(struct pp_run_result *res);

/* HELLO (rank -> coordinator): who I am, my address, and for every rank j whether I talk to it
 * and my pp_conn_info for it (has and info are nranks long). */
#define BOOT_MAGIC 0x31425050u /* "PPB1" */
void boot_put_hello(struct boot_buf *b, uint32_t rank, const struct pp_engine_cfg *cfg,
                    const struct vnic_addr *addr, const char *host, const char *dev,
                    const bool *has, const struct pp_conn_info *info);
/* TABLE (coordinator -> rank): every rank's address, then whether rank j talks to me and its
 * pp_conn_info for me. Arrays are nranks long. */
void boot_get_table(struct boot_buf *b, uint32_t nranks, struct vnic_addr *addr, bool *has,
                    struct pp_conn_info *info);

/* A hash of what every rank must agree on (ranks, protocol, workload, QP attributes, seed). */
uint64_t boot_cfg_hash(const struct pp_engine_cfg *cfg);

/* "host:port" / "[v6]:port" / "host" (port = defport). 0 or -1 with a sentence in err. */
int boot_parse_hostport(const char *s, uint16_t defport, char *host, size_t hostlen,
                        uint16_t *port, char *err, size_t errlen);
/* A listening TCP socket on host:port (port 0: any; the chosen port comes back in *port).
 * -1 with a sentence in err (unknown address, address not local, port busy). */
int boot_listen(const char *host, uint16_t *port, char *err, size_t errlen);
/* Connects to host:port, retrying refused connections until `deadline` (CLOCK_MONOTONIC ns).
 * -1 with a sentence in err naming the address and why. */
int boot_connect(const char *host, uint16_t port, uint64_t deadline, char *err, size_t errlen);

/* Sends one message (type, payload); 0, or -1 (peer gone). Blocking with a deadline. */
int boot_send(int fd, enum boot_msg type, const struct boot_buf *payload, uint64_t deadline);
int boot_send_text(int fd, enum boot_msg type, const char *text, uint64_t deadline);
/* Receives one whole message into b (b->at reset to 0): 1 got one, 0 deadline passed, -1 EOF or
 * error (err says which). */
int boot_recv(int fd, uint32_t *type, struct boot_buf *b, uint64_t deadline, char *err,
              size_t errlen);

/* ---------------------------------------------------------------- coordinator */

struct boot_coord_args {
  int listen_fd;
  char where[300];           /* "127.0.0.1:18515", for messages */
  const struct pp_engine_cfg *cfg;
  uint64_t boot_timeout_ns;  /* for all ranks to say HELLO, then READY */
  uint64_t run_timeout_ns;   /* wall-clock bound of the data phase */
  uint64_t no_progress_ns;   /* stop when no rank reported progress for this long (0: never) */
  /* Launcher mode: called about every 100 ms; returns non-zero with a sentence in err when a
   * rank process died (then the coordinator aborts the run). NULL otherwise. */
  int (*check)(void *ctx, char *err, size_t errlen);
  void *check_ctx;
};

/* Runs the coordinator to the end. On success fills res (ranks malloc'd, see
 * pp_run_result_free) and returns PP_OK; on a bootstrap failure returns an error with a sentence
 * in err (every connected rank is told ABORT). */
enum pp_status boot_coordinate(const struct boot_coord_args *a, struct pp_run_result *res,
                               char *err, size_t errlen);

#endif
