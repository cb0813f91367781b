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
 * Authentication (before any job data): the coordinator sends every new connection a CHALLENGE
 * (magic, version, a fresh 32-byte nonce Nc); the rank answers AUTH (magic, version, rank, nranks,
 * the scenario hash, its own nonce Nr, and a MAC over all of it and Nc keyed with the per-job
 * secret); the coordinator checks version and MAC and answers AUTH_OK (a MAC keyed with the secret
 * over Nc, Nr and the AUTH: the rank learns the coordinator is genuine) or drops the connection.
 * Both sides then derive one key per direction from the secret and both nonces, and every later
 * frame carries an HMAC over a per-direction sequence number, its header and its payload. MACs
 * are libsodium's crypto_auth (HMAC-SHA-512-256), the keys its keyed BLAKE2b (crypto_generichash).
 * The channel is authenticated, not encrypted: see backends/verbs/README.md, "Security".
 * The coordinator never blocks on a connection that has not authenticated: each has its own
 * deadline, frames are bounded, at most max_pending are held (the oldest goes first), and what
 * fails is dropped and logged by address without affecting the job.
 *
 * Every rank (one process each) connects to the coordinator (the launcher process, or a thread of
 * rank 0), authenticates, says HELLO with its address and its pp_conn_info for every peer, gets the TABLE of
 * everyone's address and of the pp_conn_info meant for it, connects its QPs, says READY, and
 * starts on GO. While running it reports STATE (u8 done, u64 gen: idle at activity count gen,
 * idle meaning no engine deadline and no signalled send outstanding), after a grace of quiet time
 * and never on the data path: a rank does not report that it is busy again. When every rank's
 * last report stands the coordinator PROBEs (u64 id); each answers PROBE_REPLY (u64 id, u8 idle,
 * u64 gen, after polling its CQs): a reply not idle at its report's gen voids that report (the
 * rank reports again when idle), and when every reply confirms its report it says STOP
 * (boot.c, "the run: quiescence detection", says why that is safe). A rank also says PROGRESS when its progress mark changed (looked at every
 * no_progress/8): when none came for no_progress, the coordinator asks every rank (MARK_PROBE)
 * and says STOP as well only when each answered that its mark did not change, or when not all
 * answered within 30 no_progress bounds (a rank inside a long system call answers late, and
 * moved: rxe does its protocol work inside ibv_post_send, over a second on a loaded emulated
 * guest, backends/verbs/README.md). Ranks
 * answer with their RESULT (with what their pending operations wait for: the hang report) and
 * get BYE with the run's outcome.
 * Every wait has a deadline; every failure names what failed.
 */
#ifndef PP_BOOT_H
#define PP_BOOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "prepost/run.h"
#include "prepost/verbsnic.h"
#include "prepost/engine.h"
#include "prepost/hang.h"

enum boot_msg {
  BOOT_HELLO = 1,
  BOOT_TABLE,
  BOOT_READY,
  BOOT_GO,
  BOOT_STATE, /* rank -> coordinator: u8 done, u64 gen: idle at gen (version 4; before: u8 idle
               * first, and busy reported too) */
  BOOT_PROBE,
  BOOT_PROBE_REPLY,
  BOOT_STOP,
  BOOT_RESULT,
  BOOT_BYE,
  BOOT_ERROR, /* rank -> coordinator: text */
  BOOT_ABORT, /* coordinator -> rank: text */
  BOOT_PROGRESS, /* rank -> coordinator: its progress mark changed (prepost/hang.h) */
  BOOT_CHALLENGE, /* coordinator -> new connection: magic, version, Nc */
  BOOT_AUTH,      /* connection -> coordinator: magic, version, rank, nranks, hash, Nr, MAC */
  BOOT_AUTH_OK,   /* coordinator -> rank: its MAC (proof it holds the secret) */
  BOOT_MARK_PROBE, /* coordinator -> rank: u64 id: did your progress mark change? */
  BOOT_MARK_REPLY, /* rank -> coordinator: u64 id, u8 moved (after polling its CQs) */
};

#define BOOT_MAGIC 0x54425050u    /* "PPBT", first in CHALLENGE and AUTH */
#define BOOT_MAGIC_V1 0x31425050u /* "PPB1": bootstrap version 1 began its HELLO with it */
#define BOOT_VERSION 4u         /* of the frames and the handshake; checked both ways (3: the QP
                                 * reports carry the posted receives; 4: STATE is an idle report
                                 * only, the probe voids it) */
#define BOOT_SECRET_BYTES 32u   /* the per-job secret */
#define BOOT_NONCE_BYTES 32u
#define BOOT_TAG_BYTES 32u      /* crypto_auth_BYTES */
#define BOOT_CHALLENGE_BYTES (8u + BOOT_NONCE_BYTES)
#define BOOT_AUTH_BYTES (24u + BOOT_NONCE_BYTES + BOOT_TAG_BYTES)
/* Largest frame an unauthenticated connection may send (the AUTH is 88 bytes). */
#define BOOT_PENDING_MAX_FRAME 256u
#define BOOT_TEXT_MAX 512u      /* peer text (ERROR, ABORT) shown at most this long */
#define BOOT_LOG_LINES 32u      /* lines about dropped connections per run, then a count */

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
/* What a rank reports at the end: stats, counters, host, its latency histogram (prepost/hist.h,
 * NULL: it records none; a bounded size however long the run). */
void boot_put_result(struct boot_buf *b, const struct pp_rank_result *r, const struct pp_hist *lat);
/* *lat: malloc'd (free it), NULL when none; r->receives malloc'd too. A histogram that does not
 * add up sets b->bad. */
void boot_get_result(struct boot_buf *b, struct pp_rank_result *r, struct pp_hist **lat);
/* A rank's pending waits (prepost/hang.h), appended to its RESULT: the first n of total. */
void boot_put_waits(struct boot_buf *b, const struct pp_wait *w, uint32_t n, uint32_t total);
/* Reads at most max waits into w (the rest are skipped); returns how many were read, *total how
 * many the rank had. */
uint32_t boot_get_waits(struct boot_buf *b, struct pp_wait *w, uint32_t max, uint32_t *total);
/* A stopped rank's QPs as its device reports them (vnic_qp_states), appended after the waits:
 * the first n of total. */
#define BOOT_MAX_QPS 64
void boot_put_qps(struct boot_buf *b, const struct vnic_qp_state *q, uint32_t n, uint32_t total);
/* Reads at most max into q (the rest are skipped); returns how many were read. */
uint32_t boot_get_qps(struct boot_buf *b, struct vnic_qp_state *q, uint32_t max);

/* HELLO (rank -> coordinator, after AUTH, so the rank is known): my address, host and device,
 * and for every rank j whether I talk to it and my pp_conn_info for it (has and info are nranks
 * long). */
void boot_put_hello(struct boot_buf *b, uint32_t nranks, const struct vnic_addr *addr, const char *host, const char *dev,
                    const bool *has, const struct pp_conn_info *info);
/* The exact size of a HELLO for nranks ranks. */
size_t boot_hello_bytes(uint32_t nranks);
/* TABLE (coordinator -> rank): every rank's address, then whether rank j talks to me and its
 * pp_conn_info for me. Arrays are nranks long. */
void boot_get_table(struct boot_buf *b, uint32_t nranks, struct vnic_addr *addr, bool *has,
                    struct pp_conn_info *info);

/* A hash of what every rank must agree on (ranks, protocol, workload, QP attributes, seed). */
uint64_t boot_cfg_hash(const struct pp_engine_cfg *cfg);

/* Peer-provided text made printable: bytes outside 0x20..0x7e become \xNN, at most outlen-1
 * characters (a cut ends in "..."). Returns out. */
char *boot_sanitize(const void *p, size_t n, char *out, size_t outlen);

/* ---------------------------------------------------------------- the job secret */

/* 32 random bytes (libsodium randombytes_buf). 0, or -1 with a sentence. */
int boot_secret_generate(uint8_t secret[BOOT_SECRET_BYTES], char *err, size_t errlen);
/* Reads a secret file: 32 raw bytes, or 64 hex digits (and white space). It must be a regular
 * file owned by this user that nobody else can read or write (mode 0600 or 0400). */
int boot_secret_load(const char *path, uint8_t secret[BOOT_SECRET_BYTES], char *err,
                     size_t errlen);
/* The secret from the environment: PREPOST_JOB_SECRET_FILE (a file as above), else
 * PREPOST_JOB_SECRET (64 hex digits). 1 found, 0 neither is set, -1 with a sentence. */
int boot_secret_from_env(uint8_t secret[BOOT_SECRET_BYTES], char *err, size_t errlen);

/* "host:port" / "[v6]:port" / "host" (port = defport). 0 or -1 with a sentence in err. */
int boot_parse_hostport(const char *s, uint16_t defport, char *host, size_t hostlen,
                        uint16_t *port, char *err, size_t errlen);
/* A listening TCP socket on host:port (port 0: any; the chosen port comes back in *port).
 * -1 with a sentence in err (unknown address, address not local, port busy). */
int boot_listen(const char *host, uint16_t *port, char *err, size_t errlen);
/* Connects to host:port, retrying refused connections until `deadline` (CLOCK_MONOTONIC ns).
 * -1 with a sentence in err naming the address and why. */
int boot_connect(const char *host, uint16_t port, uint64_t deadline, char *err, size_t errlen);

/* One end of a bootstrap connection. Frames are [type u32][len u32][payload]; once keyed (after
 * the handshake) each also carries BOOT_TAG_BYTES of HMAC over (sequence number, header,
 * payload), one key and one sequence per direction. */
struct boot_link {
  int fd;
  bool keyed;
  uint8_t tx_key[BOOT_SECRET_BYTES], rx_key[BOOT_SECRET_BYTES];
  uint64_t tx_seq, rx_seq;
};
static inline struct boot_link boot_link_of(int fd)
{
  return (struct boot_link){.fd = fd};
}

/* Sends one message (type, payload); 0, or -1 (peer gone). Blocking with a deadline. */
int boot_send(struct boot_link *l, enum boot_msg type, const struct boot_buf *payload,
              uint64_t deadline);
int boot_send_text(struct boot_link *l, enum boot_msg type, const char *text, uint64_t deadline);
/* Receives one whole message into b (b->at reset to 0): 1 got one, 0 deadline passed, -1 EOF or
 * error, or a frame that fails authentication (err says which). */
int boot_recv(struct boot_link *l, uint32_t *type, struct boot_buf *b, uint64_t deadline,
              char *err, size_t errlen);

/* The AUTH answering challenge nonce nc (BOOT_AUTH_BYTES; nr: this rank's fresh nonce). */
void boot_put_auth(struct boot_buf *b, uint32_t rank, uint32_t nranks, uint64_t cfg_hash,
                   const uint8_t secret[BOOT_SECRET_BYTES], const uint8_t nc[BOOT_NONCE_BYTES],
                   const uint8_t nr[BOOT_NONCE_BYTES]);
/* The rank's side of the handshake on a connected l->fd (CHALLENGE, AUTH, AUTH_OK): 0 done, l
 * keyed; 1 the coordinator closed the connection first (it sheds unauthenticated connections when
 * it is full: connect again); -1 with a sentence (refused, another version, no proof that the
 * coordinator holds the secret, deadline). */
int boot_rank_auth(struct boot_link *l, uint32_t rank, const struct pp_engine_cfg *cfg,
                   const uint8_t secret[BOOT_SECRET_BYTES], uint64_t deadline, char *err,
                   size_t errlen);
/* boot_connect + boot_rank_auth, connecting again while the coordinator sheds the connection,
 * until the deadline. 0 with *l keyed, or -1 with a sentence. */
int boot_join(const char *host, uint16_t port, uint32_t rank, const struct pp_engine_cfg *cfg,
              const uint8_t secret[BOOT_SECRET_BYTES], uint64_t deadline, struct boot_link *l,
              char *err, size_t errlen);

/* ---------------------------------------------------------------- coordinator */

struct boot_coord_stats;
struct boot_coord_args {
  int listen_fd;             /* made non-blocking */
  char where[300];           /* "127.0.0.1:18515", for messages */
  const struct pp_engine_cfg *cfg;
  uint64_t boot_timeout_ns;  /* for all ranks to say HELLO, then READY */
  uint64_t run_timeout_ns;   /* wall-clock bound of the data phase */
  uint64_t no_progress_ns;   /* stop when no rank reported progress for this long (0: never) */
  /* Launcher mode: called about every 100 ms; returns non-zero with a sentence in err when a
   * rank process died (then the coordinator aborts the run). NULL otherwise. */
  int (*check)(void *ctx, char *err, size_t errlen);
  void *check_ctx;
  const uint8_t *secret;     /* BOOT_SECRET_BYTES: the job secret (required) */
  uint64_t auth_timeout_ns;  /* a new connection's deadline to authenticate (0: 5 s) */
  uint32_t max_pending;      /* unauthenticated connections held at once (0: 64) */
  /* Dropped connections, accept errors (one line each, no newline, at most BOOT_LOG_LINES, then
   * one line when more came and a count at the end of the bootstrap). NULL: "prepost: LINE" on
   * stderr. */
  void (*log)(void *ctx, const char *line);
  void *log_ctx;
  struct boot_coord_stats *stats; /* filled when the coordinator returns (NULL: not wanted) */
  /* The ranks exchanged their addresses and pp_conn_info through the launcher (PMIx, pmix.h):
   * no TABLE is sent, and a rank's READY may follow its HELLO at once. */
  bool tables_exchanged;
  /* The clock of the run's no-progress judgement (the bound, the bound to answer a MARK_PROBE,
   * the device's patience); NULL: boot_now_ns. Tests drive it by hand, so that none of their
   * verdicts depends on how fast the machine runs. The other deadlines are boot_now_ns's. */
  uint64_t (*clock)(void *ctx);
  void *clock_ctx;
};

/* What the coordinator shed on its way. */
struct boot_coord_stats {
  uint32_t dropped;       /* unauthenticated (or refused) connections dropped */
  uint32_t accept_errors; /* accept() failures with EMFILE, ENFILE, ENOBUFS or ENOMEM */
};

/* Runs the coordinator to the end. On success fills res (ranks malloc'd, see
 * pp_run_result_free) and returns PP_OK; on a bootstrap failure returns an error with a sentence
 * in err (every connected rank is told ABORT). */
enum pp_status boot_coordinate(const struct boot_coord_args *a, struct pp_run_result *res,
                               char *err, size_t errlen);

#endif
