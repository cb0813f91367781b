/*
 * Internals of tools/mpi's MPI library (libmpich.so.12, MPICH 4.0.2's ABI): the state of the
 * rank, its communicators, requests and datatypes, and the link to its actor (link.c, the only
 * file that knows how requests reach the engine).
 */
#ifndef PP_MPI_IMPL_H
#define PP_MPI_IMPL_H

#include <mpi.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../link.h"

/* MPI_ name = PMPI_ name (profiling libraries interpose MPI_ and call PMPI_) */
#define PP_ALIAS(name) extern __typeof__(P##name) name __attribute__((alias("P" #name)))

/* ---------------------------------------------------------------- communicators (comm.c) */

/* Communicators alive at once (MPI_COMM_WORLD and MPI_COMM_SELF included): the table is indexed
 * by the context id, agreed by the members when a communicator is created (comm.c). */
#define PP_MAX_COMM 1024u
#define PP_MAX_ATTR 64u /* attributes on one communicator */
#define PP_MAX_ERRH 64u /* the program's error handlers alive at once */
#define PP_COMM_BASE 0x84000000u /* MPICH's "direct" communicator handles */

struct pp_attr {
  int keyval;
  void *val;
};

struct pp_comm {
  MPI_Comm handle;
  const char *name; /* uname when set, else label: what messages and hang reports show */
  uint32_t ctx;     /* point-to-point context (2 * id); ctx + 1: the library's collectives */
  int rank, size;
  MPI_Errhandler errh;
  int *members;     /* the world rank of each rank (size of them) */
  bool used;        /* the id is taken: alive, or freed with requests still pending */
  bool freed;       /* Comm_free'd: the handle is invalid */
  uint32_t pending; /* live requests started on it */
  uint32_t nattr;
  struct pp_attr attr[PP_MAX_ATTR]; /* in the order they were set */
  char uname[MPI_MAX_OBJECT_NAME];
  char label[48];
};

/* A request that is complete already, with an empty status (MPI_Comm_idup's) */
int pp_done_request(const char *fn, const struct pp_comm *c, MPI_Request *out);
/* A communicator takes (+1) or drops (-1) an error handler: the program's stay alive while used
 * (env.c); predefined ones are not counted. */
void pp_errh_ref(MPI_Errhandler h, int delta);
/* MPI_Init: MPI_COMM_WORLD's and MPI_COMM_SELF's members */
void pp_comm_start(uint32_t rank, uint32_t size);
/* a live communicator, NULL for anything else (MPI_COMM_NULL, freed, not a handle) */
struct pp_comm *pp_comm_get(MPI_Comm c);
/* the world rank of rank r of c */
int pp_comm_world(const struct pp_comm *c, int r);
/* the rank in c of world rank w; MPI_UNDEFINED when w is not a member */
int pp_comm_rank_of(const struct pp_comm *c, int w);
/* a request on c started (+1) or ended (-1): a freed communicator's id is released at 0 */
void pp_comm_hold(const struct pp_comm *c, int delta);
/* MPI_Finalize's first step: MPI_COMM_SELF's attributes deleted (MPI 4.0 11.2.4) */
int pp_comm_finalize(void);

/* attributes (attr.c): the value of a predefined attribute keyval (MPI_TAG_UB...) or false */
bool pp_attr_predefined(const struct pp_comm *c, int keyval, void **val);
/* calls the copy callbacks of from's attributes onto to (Comm_dup); MPI_SUCCESS or the error */
int pp_attr_copy(const struct pp_comm *from, struct pp_comm *to);
/* deletes every attribute of c, the last set first, calling the delete callbacks; stops at the
 * first that fails and returns its error */
int pp_attr_delete_all(struct pp_comm *c);

/* groups (group.c): a group is its members' world ranks, in group order */
/* a new group of n world ranks (copied); MPI_SUCCESS or MPI_ERR_NO_MEM (table full) */
int pp_group_new(const int *world, int n, MPI_Group *out);
/* the members of g (n of them) or NULL for an invalid handle */
const int *pp_group_get(MPI_Group g, int *n);
/* two member lists: MPI_IDENT (same order), MPI_SIMILAR (same members) or MPI_UNEQUAL; *err
 * MPI_ERR_NO_MEM when the comparison could not be made */
int pp_members_compare(const int *a, int na, const int *b, int nb, int *err);

/* ---------------------------------------------------------------- errors */

/* Raises error class `cls` of call `fn` on comm c (NULL: MPI_COMM_WORLD's handler): with
 * MPI_ERRORS_ARE_FATAL/ABORT prints "fn: text" and aborts the job with exit code cls; with
 * MPI_ERRORS_RETURN returns cls. */
int pp_err(const struct pp_comm *c, const char *fn, int cls, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Ends the job: a message naming fn, MPI_Abort's path with `code`. Never returns. */
_Noreturn void pp_fatal(const char *fn, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Before MPI_Init or after MPI_Finalize: fatal. */
void pp_need_init(const char *fn);

/* ---------------------------------------------------------------- datatypes and ops */

/* bytes of one element of a predefined datatype; 0 when dt is not one the library has */
size_t pp_dt_size(MPI_Datatype dt);
/* inout = in op inout over count elements of dt (a user operation: its function); MPI_SUCCESS
 * or MPI_ERR_OP (the op does not apply to the type) */
int pp_op_apply(MPI_Op op, MPI_Datatype dt, const void *in, void *inout, size_t count);
/* a predefined reduction operation or a live user operation */
bool pp_op_valid(MPI_Op op);

/* ---------------------------------------------------------------- collectives inside the library */

/* Allreduce / Allgather over c for the library's own agreements (context ids, Comm_split's
 * colours): fn names the MPI call in errors and hang reports. in may be MPI_IN_PLACE. */
int pp_allreduce(const char *fn, const struct pp_comm *c, const void *in, void *out, size_t count,
                 MPI_Datatype dt, MPI_Op op);
int pp_allgather(const char *fn, const struct pp_comm *c, const void *in, void *out,
                 size_t bytes);

/* ---------------------------------------------------------------- requests */

enum pp_lreq_kind {
  PP_LREQ_SEND,
  PP_LREQ_RECV,
  PP_LREQ_DONE,   /* complete at once (PROC_NULL, a buffered send): its status in `st` */
  PP_LREQ_PERSIST /* a persistent request: `inner` is its running operation while active */
};

struct pp_lreq {
  bool used;
  uint8_t kind;
  uint64_t id;  /* the actor's request */
  void *buf;    /* receive: where the data goes (a packed copy when `tmp`) */
  size_t bytes; /* receive: room; send: length */
  int peer, tag;
  const struct pp_comm *comm;
  const char *fn; /* the MPI call that started it */
  /* a receive of a non-contiguous datatype lands in `buf` = tmp, unpacked into ubuf at the end */
  bool tmp, mrecv; /* mrecv: a matched message, possibly longer than the room */
  bool held;       /* udt is held (pp_type_hold) until the request is freed */
  void *ubuf;
  int ucount;
  MPI_Datatype udt;
  bool background;   /* freed while active (Request_free) or a buffered send's transfer */
  int64_t bsend_seg; /* a buffered send's segment of the attached buffer, -1 none */
  MPI_Status st;     /* PP_LREQ_DONE */
  /* PP_LREQ_PERSIST */
  bool active;
  uint8_t pmode; /* enum pp_send_mode, or PP_MODE_RECV */
  const void *pbuf;
  int pcount;
  MPI_Datatype pdt;
  MPI_Comm pcomm;
  MPI_Request inner;
};

#define PP_MAX_LREQ (1u << 16)
#define PP_REQ_BASE 0x6c000000 /* MPICH's request kind bits with "direct" */

struct pp_lreq *pp_lreq_get(MPI_Request r);
/* a new request or NULL (every slot in use) */
struct pp_lreq *pp_lreq_new(MPI_Request *out);

/* Starts a send / receive; MPI_SUCCESS or an error class (through pp_err on comm). world peers,
 * comm ranks in the request. ctx_off: 0 for point-to-point, 1 for collectives. */
int pp_start_send(const char *fn, const struct pp_comm *c, int ctx_off, const void *buf,
                  size_t bytes, int dest, int tag, bool sync, MPI_Request *out);
int pp_start_recv(const char *fn, const struct pp_comm *c, int ctx_off, void *buf, size_t bytes,
                  int source, int tag, MPI_Request *out);
/* Waits for (block) or tests n requests (mode PP_LINK_ALL / ANY / SOME), completing what the
 * actor reports: statuses (may be MPI_STATUSES_IGNORE) per index, *index (ANY), *flag (tests).
 * Returns MPI_SUCCESS, or MPI_ERR_IN_STATUS / the error of the request (ANY, single). */
int pp_complete(const char *fn, int n, MPI_Request *reqs, MPI_Status *sts, int mode, bool block,
                int *index, int *flag, int *outcount, int *indices);

/* MPI_Finalize: waits for what runs in the background (freed requests, buffered sends). */
void pp_p2p_quiesce(void);

/* ---------------------------------------------------------------- datatypes (dtype.c) */

#define PP_DT_MAX_DEPTH 16 /* nesting of derived types */

/* A buffer of count elements of a datatype, as a message sees it. */
struct pp_tbuf {
  size_t bytes; /* packed: count x the type's size */
  MPI_Aint off; /* dense: the data starts at buf + off */
  bool dense;   /* one run of `bytes` bytes: sent and received in place */
  bool derived;
};
/* Checks dt (predefined, or derived, committed and not freed) and count for a message;
 * MPI_SUCCESS or the class through c's handler (MPI_ERR_TYPE, MPI_ERR_COUNT). */
int pp_type_check(const struct pp_comm *c, const char *fn, MPI_Datatype dt, int count,
                  struct pp_tbuf *out);
/* The one predefined type every element of dt's type map has (a reduction of a derived type
 * runs on its packed elements as that type), else MPI_DATATYPE_NULL. */
MPI_Datatype pp_type_base(MPI_Datatype dt);
/* Packs count elements of dt at buf into out (at most max bytes); the bytes written. */
size_t pp_type_pack(const void *buf, int count, MPI_Datatype dt, void *out, size_t max);
/* Unpacks the first len bytes of a packed stream into count elements of dt at buf (a short
 * stream fills a prefix); the bytes used. */
size_t pp_type_unpack(const void *in, size_t len, void *buf, int count, MPI_Datatype dt);
/* The predefined elements in the first `bytes` bytes of a stream of dt (Get_elements);
 * MPI_UNDEFINED when the bytes end inside one. */
MPI_Count pp_type_elements(MPI_Datatype dt, size_t bytes);
/* A request in flight keeps a derived type alive past MPI_Type_free. */
void pp_type_hold(MPI_Datatype dt);
void pp_type_release(MPI_Datatype dt);

/* ---------------------------------------------------------------- the link (link.c) */

struct pp_link_call pp_call(const char *fn, int peer, int tag, const struct pp_comm *c);
/* Connects to the actor (the constructor waited for its go); fills rank and size. */
void pp_link_init(uint32_t *rank, uint32_t *size);
/* request q with `extra` bytes after it; the reply into rep */
void pp_link_call(const struct pp_link_req *q, const void *extra, size_t elen,
                  struct pp_link_rep *rep);
void pp_link_read(void *buf, size_t n);
uint64_t pp_link_now(void);
void pp_link_finalize(void);
_Noreturn void pp_link_abort(int code);
bool pp_link_up(void);

/* ---------------------------------------------------------------- the rank */

struct pp_state {
  bool initialized, finalized;
  int thread_level;
  uint32_t rank, size;
  pthread_t main_thread; /* the thread that called MPI_Init (MPI_Is_thread_main) */
};
extern struct pp_state pp_st;

#endif
