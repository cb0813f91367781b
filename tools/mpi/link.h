/*
 * The link between an MPI rank process (libmpich.so.12 of tools/mpi/, lib/) and its actor in the
 * launcher (`prepost mpirun`, serve.c): fixed-size little structs over a socketpair, written and
 * read whole, in strict lock-step: the rank sends one request and blocks until the reply, the
 * actor runs the simulation meanwhile only when the request must wait (a blocking call), so
 * exactly one rank process runs at a time and every run of a seed is the same.
 *
 * This is the whole seam between the MPI library and the engine: point-to-point requests (isend,
 * issend, irecv), completion (test/wait of a set, any or all), probe, matched probe (MPROBE:
 * the message is taken off the queues into a receive request whose id comes back), cancel, the
 * clock. A rank's messages to itself never reach the engine: the actor matches them (serve.c). Collectives
 * and everything MPI adds (communicators, datatypes, error handlers) stay in the library. Data goes
 * with the request (sends) and with the completion (receives), copied through the socket.
 */
#ifndef PP_MPI_LINK_H
#define PP_MPI_LINK_H

#include <stdint.h>

#define PP_LINK_MAGIC 0x7070u /* "pp" */
#define PP_LINK_MAX_WAIT 4096u /* requests one test/wait names at most */
#define PP_LINK_MAX_MSG (1u << 30) /* bytes of one message (PP_MAX_MSG_SIZE) */
#define PP_LINK_FD_ENV "PREPOST_MPI_FD"

/* X(id, name) */
#define PP_LINK_OP_LIST(X)                                                     \
  X(INIT, "init")                                                              \
  X(ISEND, "isend")                                                            \
  X(IRECV, "irecv")                                                            \
  X(TEST, "test")                                                              \
  X(PROBE, "probe")                                                            \
  X(MPROBE, "mprobe")                                                          \
  X(CANCEL, "cancel")                                                          \
  X(WTIME, "wtime")                                                            \
  X(FINALIZE, "finalize")                                                      \
  X(ABORT, "abort")

enum pp_link_op {
#define PP_X(id, name) PP_LINK_##id,
  PP_LINK_OP_LIST(PP_X)
#undef PP_X
  PP_LINK_OP_COUNT
};

/* test modes */
enum pp_link_mode { PP_LINK_ALL = 0, PP_LINK_ANY = 1, PP_LINK_SOME = 2 };

/* The MPI call a blocking request stands for, for the hang report: "MPI_Send", peer, tag. */
struct pp_link_call {
  char fn[24];
  int32_t peer; /* -1: none / any */
  int32_t tag;  /* -1: any */
  char comm[32];
};

/* rank -> actor; `nreq` uint64 request ids follow a TEST, `len` bytes of data an ISEND */
struct pp_link_req {
  uint16_t magic;
  uint8_t op;     /* enum pp_link_op */
  uint8_t flags;  /* ISEND: 1 synchronous; TEST, PROBE, MPROBE: 1 block until done; TEST: 2
                   * report what is done now without letting time pass (never sleeps), 4 peek:
                   * report without freeing (Request_get_status) */
  uint8_t mode;   /* TEST: enum pp_link_mode */
  uint8_t pad[3];
  int32_t peer;   /* ISEND: dest; IRECV, PROBE: source (-1 any) */
  int32_t tag;    /* -1: any */
  uint32_t ctx;
  uint32_t len;   /* ISEND: bytes following; IRECV: buffer size */
  uint32_t nreq;  /* TEST: ids following */
  int32_t code;   /* ABORT: exit code */
  uint64_t id;    /* CANCEL: request id */
  struct pp_link_call call;
};

/* One completed request in a TEST reply; a receive's `len` bytes follow it. */
struct pp_link_done {
  uint32_t index; /* position in the TEST's list */
  int32_t source;
  int32_t tag;
  uint32_t len;      /* bytes delivered */
  uint32_t msg_len;  /* the message's length (> len: truncated) */
  uint8_t error;     /* enum pp_p2p_err */
  uint8_t cancelled;
  uint8_t pad[2];
};

/* actor -> rank; TEST: `ndone` struct pp_link_done (each with its data) follow */
struct pp_link_rep {
  uint16_t magic;
  uint8_t op;
  uint8_t found;  /* PROBE, MPROBE: a message is there */
  int32_t status; /* 0, or an enum pp_status of the engine (negative: the actor refused) */
  uint32_t rank, size;
  uint32_t ndone;
  int32_t source, tag; /* PROBE, MPROBE */
  uint32_t msg_len;    /* PROBE, MPROBE */
  uint64_t id;         /* ISEND, IRECV, MPROBE: the request */
  uint64_t now_ns;     /* simulated time */
};

#endif
