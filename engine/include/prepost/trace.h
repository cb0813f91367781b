/*
 * Traces: record what one engine per rank consumed and produced, read it back.
 *
 * The engine is sans-I/O, so a trace is, per rank, every input it consumed (creation, connection
 * info, start, completions with all their fields, async events, timer expiries, each with its
 * nanosecond timestamp), every output it produced (each pp_nic_ops call with its arguments, its
 * out-parameters and its return value), the bytes the NIC placed in memory the engine reads, and
 * (simulated backend) the packets on the wire. The byte format is specified in traces/FORMAT.md.
 *
 * Recording never touches engine internals and does no I/O:
 *  - a pp_trace_writer encodes records into 64 KiB chunks and hands each finished chunk to a
 *    sink callback (the CLI's sink is fwrite; a test's sink appends to memory);
 *  - a pp_trace_rank is one rank's recorder. Its ops table pp_trace_nic_ops logs every call and
 *    forwards it to the backend's real table (the rank recorder is the `void *nic` the engine
 *    sees);
 *  - the driver calls the pp_tr_*() wrappers instead of pp_engine_*(): each logs the input, then
 *    calls the engine. With a NULL recorder they only call the engine.
 *
 * Hook for a backend (the simulated driver backends/simgrid/simrun.c does exactly this):
 *
 *   struct pp_trace_rank *tr = writer ? pp_trace_rank_create(writer, rank) : NULL;
 *   pp_tr_engine_create(tr, now, &cfg, &my_ops, my_nic, &engine);   // instead of pp_engine_create
 *   pp_tr_local_info(tr, engine, peer, &info);                       // ... pp_engine_local_info
 *   pp_tr_connect(tr, engine, now, peer, &remote);                   // ... pp_engine_connect
 *   pp_tr_start / pp_tr_on_wc / pp_tr_on_async / pp_tr_on_timer      // same arguments + tr
 *   pp_tr_rank_end(tr, engine, now);  pp_tr_engine_destroy(tr, engine, now);
 *   pp_trace_rank_destroy(tr);
 *
 * A writer is not thread-safe: a backend that runs ranks on several threads gives each thread
 * its own writer (and file); the records carry their rank, so the files can be merged.
 */
#ifndef PP_TRACE_H
#define PP_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "nic.h"
#include "app.h"
#include "p2p.h"
#include "status.h"

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif
PP_API_BEGIN

#define PP_TRACE_MAJOR 2 /* incompatible changes; 2: the engine configuration as keys, not raw
                           * struct bytes (a reader of 1.x would miss it). Readers take 1.x too */
#define PP_TRACE_MINOR 1 /* compatible additions (new keys, new record types, fields appended);
                           * 1.1: the trace.packets key; 1.2: the prepost.commit key;
                           * 2.1: the TEXT record (prepost mpirun's report lines) */

#define PP_TRACE_MAGIC "PPTRACE\x1a"
#define PP_TRACE_FILE_HEADER 16u
#define PP_TRACE_CHUNK_HEADER 16u
#define PP_TRACE_CHUNK_MAX (1u << 20) /* a reader refuses larger chunks */

/* Chunk types (the first 4 bytes of a chunk header). */
#define PP_TRACE_CHUNK_HDR 0x31524448u /* "HDR1": configuration key/values */
#define PP_TRACE_CHUNK_REC 0x31434552u /* "REC1": records */
#define PP_TRACE_CHUNK_END 0x31444e45u /* "END1": totals, marks a complete trace */

/* Record types: X(id, value, name, class). Classes: IN an input the engine consumed (carries
 * a time stamp), OUT a pp_nic_ops call the engine made (time of the enclosing input), NOTE
 * information that is neither (packets, bytes placed, statistics). */
#define PP_TRACE_REC_LIST(X)                                                   \
  X(CREATE, 0x01, "create", IN)                                                \
  X(LOCAL_INFO, 0x02, "local_info", IN)                                        \
  X(CONNECT, 0x03, "connect", IN)                                              \
  X(START, 0x04, "start", IN)                                                  \
  X(WC, 0x05, "wc", IN)                                                        \
  X(ASYNC, 0x06, "async", IN)                                                  \
  X(TIMER, 0x07, "timer", IN)                                                  \
  X(DESTROY, 0x08, "destroy", IN)                                              \
  X(RET, 0x09, "ret", IN)                                                      \
  X(MEM, 0x0a, "mem", IN)                                                      \
  X(P2P, 0x0b, "p2p", IN)                                                      \
  X(REG_MR, 0x20, "reg_mr", OUT)                                               \
  X(DEREG_MR, 0x21, "dereg_mr", OUT)                                           \
  X(CREATE_SRQ, 0x22, "create_srq", OUT)                                       \
  X(MODIFY_SRQ, 0x23, "modify_srq", OUT)                                       \
  X(DESTROY_SRQ, 0x24, "destroy_srq", OUT)                                     \
  X(CREATE_QP, 0x25, "create_qp", OUT)                                         \
  X(MODIFY_QP, 0x26, "modify_qp", OUT)                                         \
  X(DESTROY_QP, 0x27, "destroy_qp", OUT)                                       \
  X(POST_SEND, 0x28, "post_send", OUT)                                         \
  X(POST_RECV, 0x29, "post_recv", OUT)                                         \
  X(POST_SRQ_RECV, 0x2a, "post_srq_recv", OUT)                                 \
  X(QUERY_COUNTERS, 0x2b, "query_counters", OUT)                               \
  X(PKT_TX, 0x40, "pkt_tx", NOTE)                                              \
  X(PKT_RX, 0x41, "pkt_rx", NOTE)                                              \
  X(RANK_END, 0x42, "rank_end", NOTE)                                          \
  X(TEXT, 0x43, "text", NOTE)

enum pp_trace_rec_type {
#define PP_X(id, value, name, cls) PP_TREC_##id = value,
  PP_TRACE_REC_LIST(PP_X)
#undef PP_X
};

enum pp_trace_rec_class { PP_TCLASS_UNKNOWN, PP_TCLASS_IN, PP_TCLASS_OUT, PP_TCLASS_NOTE };

const char *pp_trace_rec_name(unsigned type); /* "?" when unknown */
enum pp_trace_rec_class pp_trace_rec_class(unsigned type);

/* Packet kinds of PKT_TX records (the simulated NIC's; a real NIC does not report packets). */
#define PP_TRACE_PKT_LIST(X)                                                   \
  X(REQ, 0, "REQ")                                                             \
  X(ACK, 1, "ACK")                                                             \
  X(RNR_NAK, 2, "RNR_NAK")                                                     \
  X(NAK, 3, "NAK")                                                             \
  X(READ_RESP, 4, "READ_RESP")

enum pp_trace_pkt_kind {
#define PP_X(id, value, name) PP_TPKT_##id = value,
  PP_TRACE_PKT_LIST(PP_X)
#undef PP_X
  PP_TPKT_COUNT
};
const char *pp_trace_pkt_kind_name(unsigned kind);
int pp_trace_pkt_kind_from_name(const char *name); /* -1 when unknown */

/* One packet (one message's worth of MTU packets, as the simulated NIC models it). */
struct pp_trace_pkt {
  uint64_t id;          /* unique per trace, assigned by the writer; PKT_RX names it */
  uint32_t kind;        /* enum pp_trace_pkt_kind */
  uint32_t opcode;      /* enum pp_wr_opcode of a REQ (READ_RESP: RDMA_READ) */
  uint32_t src_rank, dst_rank, src_qpn, dst_qpn;
  uint32_t psn;         /* first PSN (NAKs: the PSN refused; ACK: the last PSN acknowledged) */
  uint32_t npkts;       /* MTU packets it spans */
  uint32_t len;         /* payload bytes */
  uint32_t syndrome;    /* RNR_NAK: min_rnr_timer code; NAK: AETH NAK code (1, 2, 3) */
  uint32_t has_ack;     /* carries an acknowledgement (ACK, NAKs, piggy-backed) */
  uint32_t ack_psn;     /* every PSN before this one is acknowledged (when has_ack) */
  uint64_t remote_addr; /* RDMA opcodes */
  uint32_t rkey, imm;
  uint64_t wire_bytes;  /* what it costs on the link (headers of every MTU packet included) */
};

/* Statistics of a rank at the end of the run (RANK_END). */
struct pp_trace_end {
  uint32_t done;
  uint64_t messages_sent, messages_received, bytes_sent, bytes_received, corrupt, async_events;
  uint64_t next_deadline;
};

/* A line of text a tool stored with the run (TEXT), by kind. */
enum pp_trace_text_kind {
  PP_TTEXT_MPI_REPORT = 1, /* prepost mpirun's report: a hang's lines, or why the job ended */
};
#define PP_TRACE_TEXT_MAX 4096u /* bytes of one TEXT record's text */
struct pp_trace_text {
  uint32_t kind; /* enum pp_trace_text_kind (a reader keeps kinds it does not know) */
  uint32_t len;
  const char *data; /* len bytes inside the file's data, not NUL-terminated */
};

/* ================================================================ writing */

/* Receives each finished chunk; returns 0 on success. */
typedef int (*pp_trace_sink)(void *ctx, const void *buf, size_t len);

/* Which PKT_TX/PKT_RX records a trace holds (header key trace.packets). */
#define PP_TRACE_PACKETS_LIST(X)                                                                \
  X(NONE, 0, "none")     /* a real NIC reports no packets (verbs) */                            \
  X(ERRORS, 1, "errors") /* only RNR NAKs and NAKs (the simulator's default) */                \
  X(ALL, 2, "all")       /* every packet (--trace-packets): what pcap export needs */
enum pp_trace_packets {
#define PP_X(id, value, name) PP_TRACE_PACKETS_##id = value,
  PP_TRACE_PACKETS_LIST(PP_X)
#undef PP_X
};
const char *pp_trace_packets_name(unsigned packets);

struct pp_trace_info {
  const char *version;  /* prepost version */
  const char *commit;   /* git commit of the build (key prepost.commit); NULL: no key */
  const char *backend;  /* "simgrid", "verbs" */
  const char *scenario; /* scenario name */
  uint64_t seed;
  uint32_t nranks;
  uint32_t capture_bytes; /* bytes of each received message's head recorded (MEM), 0 = none */
  uint32_t snapshot_max;  /* remote-writable MRs up to this size are diffed before each input */
  uint32_t packets;       /* enum pp_trace_packets: which packets the backend records */
};
#define PP_TRACE_CAPTURE_DEFAULT 64u
#define PP_TRACE_SNAPSHOT_DEFAULT 4096u

/* A sink that takes a finished REC chunk's buffer instead of copying it: *buf (len bytes, capacity
 * *cap) becomes the sink's, which puts in its place a buffer of at least the same capacity (and
 * sets *cap); 0 on success. The chunk is handed over unsealed: the sink, on whatever thread writes
 * it out, calls pp_trace_seal() first (the CRC is then computed off the recording thread). */
typedef int (*pp_trace_swap_sink)(void *ctx, uint8_t **buf, size_t len, size_t *cap);

struct pp_trace_writer;
struct pp_trace; /* a trace opened for reading (below) */

/* Writes the file header and the info keys (prepost.version, prepost.commit, trace.backend,
 * scenario.name, seed, nranks, trace.capture_bytes, trace.snapshot_max, trace.packets). Add more
 * keys, then pp_trace_begin(). */
enum pp_status pp_trace_writer_create(pp_trace_sink sink, void *ctx,
                                      const struct pp_trace_info *info,
                                      struct pp_trace_writer **out);
/* info->packets, for the backend that records them */
enum pp_trace_packets pp_trace_writer_packets(const struct pp_trace_writer *w);
enum pp_status pp_trace_kv_u64(struct pp_trace_writer *w, const char *key, uint64_t v);
enum pp_status pp_trace_kv_f64(struct pp_trace_writer *w, const char *key, double v);
enum pp_status pp_trace_kv_str(struct pp_trace_writer *w, const char *key, const char *v);
enum pp_status pp_trace_kv_bytes(struct pp_trace_writer *w, const char *key, const void *v,
                                 size_t n);
/* The engine configuration as keys with their canonical text: engine.protocol, engine.SECTION.KEY
 * from the field tables, engine.script.*, a plug-in's proto.KEY (engine/trace/trace_cfg.c). */
enum pp_status pp_trace_kv_engine_cfg(struct pp_trace_writer *w, const struct pp_engine_cfg *c);
/* Time stamps are written relative to `origin_ns` (default 0), for a backend whose clock does not
 * start at 0 (the verbs backend's CLOCK_MONOTONIC: origin = the run's start). Writes the key
 * trace.origin_ns; before pp_trace_begin() (PP_STATE after). The engine must not care about the
 * shift (it only ever subtracts times): a replay feeds it the relative times. */
enum pp_status pp_trace_set_origin(struct pp_trace_writer *w, uint64_t origin_ns);
/* REC chunks go to `swap` (same ctx as the sink); the header and END chunks still go to the sink,
 * in order with them. `deferred`: the recording thread only copies each record's fields into the
 * chunk as 64-bit words, and pp_trace_seal() encodes them (on the sink's thread: the varint work
 * leaves the recording thread). Before any record (PP_STATE after). */
enum pp_status pp_trace_writer_set_swap(struct pp_trace_writer *w, pp_trace_swap_sink swap,
                                        bool deferred);
/* Makes a chunk a swap sink received ready to write: encodes it (deferred) and computes its CRC.
 * Returns the bytes to write and sets *len (in: the chunk's length), NULL when out of memory. The
 * result stays valid until the next call. One thread at a time (the writer's own buffers). In
 * deferred mode pp_trace_writer_bytes() counts the chunks before encoding. */
const uint8_t *pp_trace_seal(struct pp_trace_writer *w, uint8_t *chunk, size_t *len);
/* Ends the header: writes the HDR chunk. Records may follow. */
enum pp_status pp_trace_begin(struct pp_trace_writer *w);
/* Hands the records so far to the sink (a chunk is also written whenever 64 KiB fill up). A
 * backend that may be killed flushes now and then: a reader can load the complete chunks. */
enum pp_status pp_trace_flush(struct pp_trace_writer *w);
/* Flushes and writes the END chunk. */
enum pp_status pp_trace_finish(struct pp_trace_writer *w);
/* The first error (sink failure, out of memory, misuse); PP_OK when none. */
enum pp_status pp_trace_writer_status(const struct pp_trace_writer *w);
uint64_t pp_trace_writer_records(const struct pp_trace_writer *w);
uint64_t pp_trace_writer_bytes(const struct pp_trace_writer *w);
void pp_trace_writer_destroy(struct pp_trace_writer *w);

/* Packets (a driver with a wire: the simulated backend). `key` identifies the packet in flight
 * (any pointer unique while it is in flight) so that its arrival names the same id. */
void pp_trace_pkt_tx(struct pp_trace_writer *w, uint64_t now, const void *key,
                     const struct pp_trace_pkt *p);
void pp_trace_pkt_rx(struct pp_trace_writer *w, uint64_t now, uint32_t rank, const void *key);
/* The same for a driver that keeps the id with its packet (no lookup): pkt_tx returns the id it
 * assigned (k->id is ignored), pkt_rx names it. */
uint64_t pp_trace_pkt_tx_id(struct pp_trace_writer *w, uint64_t now,
                            const struct pp_trace_pkt *k);
void pp_trace_pkt_rx_id(struct pp_trace_writer *w, uint64_t now, uint32_t rank, uint64_t id);
/* A TEXT record of rank at now: n bytes of s (PP_INVALID beyond PP_TRACE_TEXT_MAX or for a rank
 * beyond nranks, nothing written then; otherwise the writer's status). */
enum pp_status pp_trace_text(struct pp_trace_writer *w, uint32_t rank, uint64_t now,
                             unsigned kind, const char *s, size_t n);

/* Copies the records of other traces (opened with pp_trace_open) into w, merged by time stamp
 * (a rank's records keep their order; at equal times the rank last copied goes on, so an input
 * stays next to its outputs). The bytes are copied as they are: a rank's time deltas stay valid
 * because each rank comes from exactly one part (PP_INVALID, with a sentence in err, when two
 * parts hold the same rank, when a part has more ranks than w, or before pp_trace_begin()). The
 * verbs backend merges its per-process files with it (`prepost trace merge`). */
enum pp_status pp_trace_merge(struct pp_trace_writer *w, const struct pp_trace *const *parts,
                              size_t nparts, char *err, size_t errlen);

/* ---------------------------------------------------------------- one rank */

struct pp_trace_rank;

struct pp_trace_rank *pp_trace_rank_create(struct pp_trace_writer *w, uint32_t rank);
void pp_trace_rank_destroy(struct pp_trace_rank *t);

/* Logs each call with its result and forwards it to the real table; `nic` is the recorder. */
extern const struct pp_nic_ops pp_trace_nic_ops;

/* Drop-in wrappers of the engine's entry points; t may be NULL (no tracing). */
enum pp_status pp_tr_engine_create(struct pp_trace_rank *t, uint64_t now,
                                   const struct pp_engine_cfg *cfg, const struct pp_nic_ops *ops,
                                   void *nic, struct pp_engine **out);
bool pp_tr_local_info(struct pp_trace_rank *t, const struct pp_engine *e, uint32_t peer,
                      struct pp_conn_info *out);
enum pp_status pp_tr_connect(struct pp_trace_rank *t, struct pp_engine *e, uint64_t now,
                             uint32_t peer, const struct pp_conn_info *remote);
enum pp_status pp_tr_start(struct pp_trace_rank *t, struct pp_engine *e, uint64_t now);
enum pp_status pp_tr_on_wc(struct pp_trace_rank *t, struct pp_engine *e, uint64_t now,
                           const struct pp_wc *wc);
enum pp_status pp_tr_on_async(struct pp_trace_rank *t, struct pp_engine *e, uint64_t now,
                              const struct pp_async_event *ev);
enum pp_status pp_tr_on_timer(struct pp_trace_rank *t, struct pp_engine *e, uint64_t now);
/* An application's engine (prepost/app.h): as pp_engine_create_app, recorded as CREATE; the
 * replay creates it with the default (no-op) callbacks, so only an application that drives the
 * engine through the calls below and pp_p2p_test (not from callbacks) replays exactly. */
enum pp_status pp_tr_engine_create_app(struct pp_trace_rank *t, uint64_t now,
                                       const struct pp_engine_cfg *cfg,
                                       const struct pp_nic_ops *ops, void *nic,
                                       const struct pp_app_callbacks *cb, void *user_data,
                                       struct pp_engine **out);
/* The application's calls into the p2p API (prepost/p2p.h), each one P2P input record with its
 * arguments and results. The buffers' bytes are not recorded. */
enum pp_status pp_tr_p2p_isend(struct pp_trace_rank *t, struct pp_engine *e, uint64_t now,
                               bool sync, const void *buf, uint32_t len, uint32_t dest,
                               uint32_t tag, uint32_t ctx, uint64_t cookie, pp_req *req);
enum pp_status pp_tr_p2p_irecv(struct pp_trace_rank *t, struct pp_engine *e, uint64_t now,
                               void *buf, uint32_t len, uint32_t source, uint32_t tag,
                               uint32_t ctx, uint64_t cookie, pp_req *req);
bool pp_tr_p2p_test(struct pp_trace_rank *t, struct pp_engine *e, uint64_t now, pp_req *req,
                    struct pp_p2p_status *st);
bool pp_tr_p2p_iprobe(struct pp_trace_rank *t, struct pp_engine *e, uint64_t now,
                      uint32_t source, uint32_t tag, uint32_t ctx, struct pp_p2p_status *st);
enum pp_status pp_tr_p2p_cancel(struct pp_trace_rank *t, struct pp_engine *e, uint64_t now,
                                pp_req req);
uint32_t pp_tr_p2p_mem_free(struct pp_trace_rank *t, struct pp_engine *e, uint64_t now,
                            const void *buf, uint32_t len);
/* Records the rank's statistics (RANK_END); call before destroying the engine. */
void pp_tr_rank_end(struct pp_trace_rank *t, const struct pp_engine *e, uint64_t now);
void pp_tr_engine_destroy(struct pp_trace_rank *t, struct pp_engine *e, uint64_t now);

/* ================================================================ reading */

enum pp_trace_kv_type { PP_TKV_U64 = 1, PP_TKV_STR = 2, PP_TKV_F64 = 3, PP_TKV_BYTES = 4 };

struct pp_trace_kv {
  const char *key;
  unsigned type;
  uint64_t u;
  double f;
  const char *s;    /* STR ("" otherwise) */
  const uint8_t *b; /* BYTES: n bytes inside the file's data */
  size_t n;
};

/* A record, decoded. */
struct pp_trace_conn {
  uint32_t peer;
  uint32_t ok; /* LOCAL_INFO: what pp_engine_local_info returned */
  struct pp_conn_info info;
};

struct pp_trace_mem {
  uint32_t key;    /* lkey of the MR the bytes are in */
  uint64_t offset; /* from the MR's start */
  uint32_t total;  /* bytes the NIC placed there */
  uint32_t len;    /* bytes recorded (a head of `total`) */
  const uint8_t *data;
};

/* P2P records: which call (X(id, value, name)) */
#define PP_TRACE_P2P_LIST(X)                                                   \
  X(ISEND, 0, "isend")                                                         \
  X(ISSEND, 1, "issend")                                                       \
  X(IRECV, 2, "irecv")                                                         \
  X(TEST, 3, "test")                                                           \
  X(IPROBE, 4, "iprobe")                                                       \
  X(CANCEL, 5, "cancel")                                                       \
  X(MEM_FREE, 6, "mem_free")
enum pp_trace_p2p_op {
#define PP_X(id, value, name) PP_TP2P_##id = value,
  PP_TRACE_P2P_LIST(PP_X)
#undef PP_X
  PP_TP2P_COUNT
};
#define PP_TRACE_P2P_RESULT 0x80u /* op of the record that follows a call: its results */
const char *pp_trace_p2p_name(unsigned op); /* "?" when unknown; the RESULT bit ignored */

struct pp_trace_p2p {
  uint32_t op;   /* enum pp_trace_p2p_op */
  uint32_t peer; /* isend/issend: dest; irecv, iprobe: source */
  uint32_t tag, ctx, len;
  uint64_t cookie;
  uint64_t addr; /* isend/issend/irecv/mem_free: the buffer's address in the recording process */
  uint64_t req; /* isend/issend/irecv: the request made; test, cancel: the request given */
  int32_t ret;  /* isend/issend/irecv/cancel: the status; test, iprobe: 1 true, 0 false;
                 * mem_free: the registrations it invalidated */
  struct pp_p2p_status st; /* test, iprobe when true */
};

struct pp_trace_rec {
  unsigned type;
  uint32_t rank;
  uint64_t ts;     /* ns: inputs, packets, notes; outputs carry their input's */
  uint64_t index;  /* record number in the file (0-based) */
  uint64_t offset; /* byte offset of the record in the file */
  int32_t ret;     /* outputs and RET: the pp_status returned */
  union {
    struct pp_trace_conn conn; /* LOCAL_INFO, CONNECT */
    struct pp_wc wc;
    struct pp_async_event ev;
    struct pp_mr mr; /* REG_MR (addr, length, access in; lkey, rkey out), DEREG_MR */
    struct {
      struct pp_srq_init_attr attr;
      uint32_t srq_num;
    } srq; /* CREATE_SRQ; MODIFY_SRQ (attr.srq_limit), DESTROY_SRQ */
    struct {
      struct pp_qp_init_attr attr;
      uint32_t qp_num;
    } cqp; /* CREATE_QP, DESTROY_QP (qp_num) */
    struct {
      uint32_t qp_num;
      unsigned mask;
      struct pp_qp_attr attr;
    } mqp;
    struct {
      uint32_t qp_num;
      struct pp_send_wr wr;
    } send;
    struct {
      uint32_t qp_num; /* POST_SRQ_RECV: the srq_num */
      struct pp_recv_wr wr;
    } recv;
    struct pp_nic_counters ctr;
    struct pp_trace_mem mem;
    struct pp_trace_pkt pkt; /* PKT_TX; PKT_RX fills id only */
    struct pp_trace_end end;
    struct pp_trace_p2p p2p;
    struct pp_trace_text text;
  } u;
};

struct pp_trace_idx {
  uint64_t offset;
  uint64_t ts;
  uint32_t rank;
  uint32_t type;
};

struct pp_trace {
  const uint8_t *data; /* the file's bytes (not owned) */
  size_t size;
  unsigned major, minor;
  struct pp_trace_kv *kv;
  size_t nkv;
  uint32_t nranks;
  struct pp_trace_idx *idx; /* every record in file order */
  size_t nrecs;
  uint32_t **rank_recs;     /* rank_recs[r]: indices into idx of rank r's records */
  size_t *rank_nrecs;
  bool complete;            /* the END chunk was there and its totals matched */
  char *strings;
};

enum { PP_TRACE_PARTIAL = 1 }; /* accept a trace cut short after its last complete chunk */

/*
 * Checks the whole file (header, every chunk's length and CRC, every record's framing and
 * fields, the END totals) and indexes it. Never reads outside data[0..size). On error returns
 * PP_PARSE (PP_UNSUPPORTED for a newer major version, PP_NOMEM) and writes "offset N: what was
 * expected" into err. The trace borrows `data`: keep it alive until pp_trace_close().
 */
enum pp_status pp_trace_open(const uint8_t *data, size_t size, unsigned flags,
                             struct pp_trace *t, char *err, size_t errlen);
void pp_trace_close(struct pp_trace *t);
/* The bytes of record i as they are in the file (header and payload); PP_NOTFOUND / PP_PARSE. */
enum pp_status pp_trace_rec_bytes(const struct pp_trace *t, size_t i, const uint8_t **p,
                                  size_t *n);
/* Decodes record i (cannot fail on an opened trace, but checks anyway). */
enum pp_status pp_trace_get(const struct pp_trace *t, size_t i, struct pp_trace_rec *rec);
const struct pp_trace_kv *pp_trace_kv_find(const struct pp_trace *t, const char *key);
/* The trace's trace.packets; a format 1.0 trace (no key) holds every packet it has: ALL when it
 * has a PKT_TX record, else NONE. */
enum pp_trace_packets pp_trace_packets(const struct pp_trace *t);
/* The engine configuration (rank 0). Format 2: from the keys pp_trace_kv_engine_cfg() writes,
 * exactly; PP_PARSE (a sentence in note) for a key with a bad value, a missing required key or
 * an engine.* key this build does not know; PP_NOTFOUND for a protocol not registered. Format 1:
 * engine.cfg (raw bytes) when its size matches this build's struct, else the readable engine.*
 * keys over cfg's values, with a warning sentence in `note` (empty when exact). */
enum pp_status pp_trace_engine_cfg(const struct pp_trace *t, struct pp_engine_cfg *cfg, char *note,
                                   size_t notelen);
/* Sets one engine.* key from text ("engine.qp.rnr_retry", "7"; "engine.p2p.eager_limit", "8KiB"),
 * within its table's bounds; format 1's names too ("engine.ring.credit_idle_ns", "5000");
 * PP_NOTFOUND for another key. */
enum pp_status pp_trace_engine_cfg_set(struct pp_engine_cfg *cfg, const char *key,
                                       const char *value, char *err, size_t errlen);
/* Calls fn for each key pp_trace_kv_engine_cfg() writes, with its canonical text (for dumps
 * and --list-keys; the script's lines are shown, not settable). */
void pp_trace_engine_cfg_each(const struct pp_engine_cfg *cfg,
                              void (*fn)(void *ctx, const char *key, const char *value),
                              void *ctx);

/* One line describing a record (no newline), like `trace dump` prints it. Returns the length
 * snprintf would have written. */
int pp_trace_rec_format(const struct pp_trace_rec *r, char *buf, size_t len);

/* CRC-32 (IEEE 802.3, the one of zlib and of the RoCE ICRC): crc = pp_crc32(0, buf, n), and
 * pp_crc32(crc, more, m) continues it. */
uint32_t pp_crc32(uint32_t crc, const void *buf, size_t len);
/* CRC-32C (Castagnoli, iSCSI; SSE4.2 when the CPU has it), the chunk checksum; same use. */
uint32_t pp_crc32c(uint32_t crc, const void *buf, size_t len);

PP_API_END
#ifdef __cplusplus
}
#endif

#endif
