/*
 * engine/trace: the writer, the per-rank recorder and the reader. Every record type round-trips;
 * truncated and corrupted files are refused with an offset, never read out of bounds; a whole
 * simulated run is recorded and its records agree with the run's result.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "prepost/simrun.h"
#include "prepost/trace.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wcomment"
#include "tools/scenario/scenario.h"
#pragma GCC diagnostic pop
#include "tools/trace/trace_sim.h"

/* ================================================================ a memory sink */

struct membuf {
  uint8_t *p;
  size_t n, cap;
  int fail_after; /* sink calls that succeed before it fails; -1 never */
};

static int mem_sink(void *ctx, const void *buf, size_t len)
{
  struct membuf *m = ctx;
  if (m->fail_after == 0)
    return -1;
  if (m->fail_after > 0)
    m->fail_after--;
  if (m->n + len > m->cap) {
    m->cap = (m->n + len) * 2;
    m->p = realloc(m->p, m->cap);
    cr_assert_not_null(m->p);
  }
  memcpy(m->p + m->n, buf, len);
  m->n += len;
  return 0;
}

/* ================================================================ a fake NIC */

struct fnic {
  uint32_t next_qp, next_key, calls;
};

static int f_reg_mr(void *nic, void *addr, size_t length, unsigned access, struct pp_mr *mr)
{
  struct fnic *f = nic;
  f->calls++;
  uint32_t k = ++f->next_key;
  *mr = (struct pp_mr){.addr = (uint64_t)(uintptr_t)addr, .length = length, .lkey = 0x100 + k,
                       .rkey = 0x200 + k, .access = access};
  return PP_OK;
}
static int f_dereg_mr(void *nic, const struct pp_mr *mr)
{
  (void)mr;
  ((struct fnic *)nic)->calls++;
  return PP_OK;
}
static int f_create_srq(void *nic, const struct pp_srq_init_attr *a, uint32_t *n)
{
  (void)a;
  ((struct fnic *)nic)->calls++;
  *n = 7;
  return PP_OK;
}
static int f_modify_srq(void *nic, uint32_t s, uint32_t l)
{
  (void)s;
  (void)l;
  ((struct fnic *)nic)->calls++;
  return PP_INVALID;
}
static int f_destroy_srq(void *nic, uint32_t s)
{
  (void)s;
  ((struct fnic *)nic)->calls++;
  return PP_OK;
}
static int f_create_qp(void *nic, const struct pp_qp_init_attr *a, uint32_t *qpn)
{
  (void)a;
  struct fnic *f = nic;
  f->calls++;
  *qpn = 0x100 + f->next_qp++;
  return PP_OK;
}
static int f_modify_qp(void *nic, uint32_t q, const struct pp_qp_attr *a, unsigned m)
{
  (void)q;
  (void)a;
  (void)m;
  ((struct fnic *)nic)->calls++;
  return PP_OK;
}
static int f_destroy_qp(void *nic, uint32_t q)
{
  (void)q;
  ((struct fnic *)nic)->calls++;
  return PP_OK;
}
static int f_post_send(void *nic, uint32_t q, const struct pp_send_wr *wr)
{
  (void)q;
  (void)wr;
  ((struct fnic *)nic)->calls++;
  return PP_OK;
}
static int f_post_recv(void *nic, uint32_t q, const struct pp_recv_wr *wr)
{
  (void)q;
  (void)wr;
  ((struct fnic *)nic)->calls++;
  return PP_OK;
}
static int f_query(void *nic, struct pp_nic_counters *c)
{
  ((struct fnic *)nic)->calls++;
  *c = (struct pp_nic_counters){1, 2, 3, 4, 5, 6, 7, 0};
  return PP_OK;
}

static const struct pp_nic_ops fake_ops = {
    .name = "fake",
    .reg_mr = f_reg_mr,
    .dereg_mr = f_dereg_mr,
    .create_srq = f_create_srq,
    .modify_srq = f_modify_srq,
    .destroy_srq = f_destroy_srq,
    .create_qp = f_create_qp,
    .modify_qp = f_modify_qp,
    .destroy_qp = f_destroy_qp,
    .post_send = f_post_send,
    .post_recv = f_post_recv,
    .post_srq_recv = f_post_recv,
    .query_counters = f_query,
};

/* ================================================================ a small trace */

static struct pp_engine_cfg small_cfg(void)
{
  return (struct pp_engine_cfg){
      .rank = 0,
      .nranks = 2,
      .protocol = PP_PROTO_NAIVE,
      .qp = {.min_rnr_timer = 12, .rnr_retry = 7, .timeout = 14, .retry_cnt = 7,
             .max_rd_atomic = 4, .mtu = 4096, .sq_depth = 4, .rq_depth = 4},
      .workload = {.kind = PP_WORKLOAD_STREAM, .pattern = PP_PATTERN_PAIR, .messages = 3,
                   .size = 64},
      .seed = 42,
  };
}

static struct membuf M;
static struct pp_trace T;

static void fini(void)
{
  pp_trace_close(&T);
  free(M.p);
  memset(&M, 0, sizeof(M));
}

TestSuite(trace, .fini = fini);

/* Records: every output type through the recording table, the engine's inputs through the
 * pp_tr_* wrappers (a real engine over the fake NIC), packets and notes. */
/* A swap sink that seals each chunk at once (what the CLI's writer thread does later). */
struct swapctx {
  struct membuf *m;
  struct pp_trace_writer *w;
};

static int swap_mem_sink(void *ctx, const void *buf, size_t len)
{
  return mem_sink(((struct swapctx *)ctx)->m, buf, len);
}

static int swap_seal_sink(void *ctx, uint8_t **buf, size_t len, size_t *cap)
{
  struct swapctx *x = ctx;
  (void)cap; /* consumed at once: the writer keeps its buffer */
  const uint8_t *c = pp_trace_seal(x->w, *buf, &len);
  return c ? mem_sink(x->m, c, len) : -1;
}

static struct swapctx SX;

/* mode 0: direct; 1: swap sink, encoded at once; 2: swap sink, deferred encoding */
static void write_small_mode(struct membuf *m, int mode)
{
  memset(m, 0, sizeof(*m));
  m->fail_after = -1;
  struct pp_trace_info info = {.version = "test", .backend = "fake", .scenario = "small",
                               .seed = 42, .nranks = 2, .capture_bytes = 64,
                               .snapshot_max = 4096};
  struct pp_trace_writer *w;
  SX = (struct swapctx){.m = m};
  cr_assert_eq(pp_trace_writer_create(mode ? swap_mem_sink : mem_sink, mode ? (void *)&SX : m,
                                      &info, &w),
               PP_OK);
  SX.w = w;
  if (mode)
    cr_assert_eq(pp_trace_writer_set_swap(w, swap_seal_sink, mode == 2), PP_OK);
  struct pp_engine_cfg cfg = small_cfg();
  cr_assert_eq(pp_trace_kv_engine_cfg(w, &cfg), PP_OK);
  cr_assert_eq(pp_trace_kv_f64(w, "test.f64", 0.25), PP_OK);
  cr_assert_eq(pp_trace_begin(w), PP_OK);
  cr_assert_eq(pp_trace_kv_u64(w, "too.late", 1), PP_STATE, "no key after the header");

  struct fnic nic0 = {0}, nic1 = {0};
  struct pp_trace_rank *t0 = pp_trace_rank_create(w, 0), *t1 = pp_trace_rank_create(w, 1);
  cr_assert_null(pp_trace_rank_create(w, 2), "rank beyond nranks");
  struct pp_engine *e0, *e1;
  cr_assert_eq(pp_tr_engine_create(t0, 0, &cfg, &fake_ops, &nic0, &e0), PP_OK);
  struct pp_engine_cfg c1 = cfg;
  c1.rank = 1;
  cr_assert_eq(pp_tr_engine_create(t1, 0, &c1, &fake_ops, &nic1, &e1), PP_OK);
  struct pp_conn_info i0, i1;
  cr_assert(pp_tr_local_info(t0, e0, 1, &i0));
  cr_assert(pp_tr_local_info(t1, e1, 0, &i1));
  cr_assert_eq(pp_tr_connect(t0, e0, 10, 1, &i1), PP_OK);
  cr_assert_eq(pp_tr_connect(t1, e1, 10, 0, &i0), PP_OK);
  cr_assert_eq(pp_tr_connect(t1, e1, 11, 0, &i0), PP_STATE, "connecting twice: a RET record");
  cr_assert_eq(pp_tr_start(t0, e0, 100), PP_OK);
  cr_assert_eq(pp_tr_start(t1, e1, 100), PP_OK);
  /* rank 0 posted 3 sends; complete one, and a receive at rank 1 (captures its head) */
  struct pp_wc wc = {.wr_id = 1ull << 63, .status = PP_WC_SUCCESS, .opcode = PP_WC_OP_SEND,
                     .byte_len = 64, .qp_num = 0x100};
  cr_assert_eq(pp_tr_on_wc(t0, e0, 2000, &wc), PP_OK);
  struct pp_wc rwc = {.wr_id = 0, .status = PP_WC_SUCCESS, .opcode = PP_WC_OP_RECV,
                      .byte_len = 64, .qp_num = 0x100, .src_qp = 0x100};
  cr_assert_eq(pp_tr_on_wc(t1, e1, 1500, &rwc), PP_OK);
  struct pp_async_event ev = {.type = PP_EVENT_SRQ_LIMIT_REACHED, .srq_num = 3};
  cr_assert_eq(pp_tr_on_async(t1, e1, 1600, &ev), PP_OK);
  cr_assert_eq(pp_tr_on_timer(t0, e0, 2100), PP_OK);
  /* an application's calls (P2P records): the naive engine has no p2p layer, they fail */
  pp_req q = 0;
  uint8_t pbuf[8];
  cr_assert_neq(pp_tr_p2p_isend(t1, e1, 2150, true, pbuf, 8, 0, 9, 2, 77, &q), PP_OK);
  cr_assert_not(pp_tr_p2p_iprobe(t1, e1, 2160, PP_ANY_SOURCE, 9, 2, NULL));
  cr_assert_eq(pp_tr_p2p_mem_free(t1, e1, 2170, pbuf, sizeof(pbuf)), 0, "nothing cached");
  /* the outputs the protocols do not use yet, straight through the table */
  uint32_t srq;
  struct pp_srq_init_attr sa = {.max_wr = 16, .max_sge = 1, .srq_limit = 4};
  cr_assert_eq(pp_trace_nic_ops.create_srq(t0, &sa, &srq), PP_OK);
  cr_assert_eq(srq, 7);
  cr_assert_eq(pp_trace_nic_ops.modify_srq(t0, srq, 2), PP_INVALID);
  struct pp_recv_wr rw = {.wr_id = 9, .num_sge = 1, .sg_list = {{.addr = 0x1000, .length = 8,
                                                                  .lkey = 0x555}}};
  cr_assert_eq(pp_trace_nic_ops.post_srq_recv(t0, srq, &rw), PP_OK);
  cr_assert_eq(pp_trace_nic_ops.destroy_srq(t0, srq), PP_OK);
  struct pp_nic_counters ctr;
  cr_assert_eq(pp_trace_nic_ops.query_counters(t0, &ctr), PP_OK);
  struct pp_send_wr sw = {.wr_id = 5, .opcode = PP_WR_RDMA_WRITE_WITH_IMM, .num_sge = 2,
                          .sg_list = {{0x10, 4, 1}, {0x20, 8, 2}}, .remote_addr = 0xdead0000,
                          .rkey = 0x77, .imm_data = 0xabcd};
  cr_assert_eq(pp_trace_nic_ops.post_send(t0, 0x100, &sw), PP_OK);
  int key;
  struct pp_trace_pkt k = {.kind = PP_TPKT_RNR_NAK, .src_rank = 1, .dst_rank = 0,
                           .src_qpn = 0x100, .dst_qpn = 0x100, .psn = 0xfffffe, .syndrome = 12,
                           .has_ack = 1, .ack_psn = 0xfffffe, .wire_bytes = 62};
  pp_trace_pkt_tx(w, 3000, &key, &k);
  pp_trace_pkt_rx(w, 3001, 0, &key);
  pp_trace_pkt_rx(w, 3002, 0, &key); /* delivered twice: the second names nothing */
  pp_tr_rank_end(t0, e0, 5000);
  pp_tr_rank_end(t1, e1, 5000);
  pp_tr_engine_destroy(t0, e0, 5000);
  pp_tr_engine_destroy(t1, e1, 5000);
  pp_trace_rank_destroy(t0);
  pp_trace_rank_destroy(t1);
  cr_assert_eq(pp_trace_text(w, 1, 6000, PP_TTEXT_MPI_REPORT, "a \"hang\" line", 13), PP_OK);
  static char big[PP_TRACE_TEXT_MAX + 1];
  cr_assert_eq(pp_trace_text(w, 0, 6000, PP_TTEXT_MPI_REPORT, big, sizeof(big)), PP_INVALID,
               "a text longer than PP_TRACE_TEXT_MAX is refused");
  cr_assert_eq(pp_trace_text(w, 2, 6000, PP_TTEXT_MPI_REPORT, "x", 1), PP_INVALID,
               "a rank beyond nranks");
  cr_assert_eq(pp_trace_finish(w), PP_OK);
  cr_assert_eq(pp_trace_writer_status(w), PP_OK, "a refused text leaves the writer as it was");
  if (mode < 2) /* deferred: counts the chunks before encoding */
    cr_assert_eq(pp_trace_writer_bytes(w), m->n);
  pp_trace_writer_destroy(w);
}

static void write_small(struct membuf *m)
{
  write_small_mode(m, 0);
}

static void open_ok(const uint8_t *p, size_t n, unsigned flags)
{
  char err[512] = "";
  enum pp_status s = pp_trace_open(p, n, flags, &T, err, sizeof(err));
  cr_assert_eq(s, PP_OK, "pp_trace_open: %s: %s", pp_status_name(s), err);
}

/* Finds the first record of `type` from index `from` (of rank `rank`, -1 any). */
static bool find(unsigned type, int rank, size_t from, struct pp_trace_rec *r)
{
  for (size_t i = from; i < T.nrecs; i++)
    if (T.idx[i].type == type && (rank < 0 || T.idx[i].rank == (uint32_t)rank)) {
      cr_assert_eq(pp_trace_get(&T, i, r), PP_OK);
      return true;
    }
  return false;
}

Test(trace, header_keys_round_trip)
{
  write_small(&M);
  open_ok(M.p, M.n, 0);
  cr_assert(T.complete);
  cr_assert_eq(T.major, PP_TRACE_MAJOR);
  cr_assert_eq(T.nranks, 2);
  const struct pp_trace_kv *kv = pp_trace_kv_find(&T, "trace.backend");
  cr_assert(kv && kv->type == PP_TKV_STR);
  cr_assert_str_eq(kv->s, "fake");
  cr_assert_str_eq(pp_trace_kv_find(&T, "scenario.name")->s, "small");
  cr_assert_eq(pp_trace_kv_find(&T, "seed")->u, 42);
  cr_assert_eq(pp_trace_kv_find(&T, "test.f64")->f, 0.25);
  cr_assert_str_eq(pp_trace_kv_find(&T, "engine.protocol")->s, "naive");
  cr_assert_str_eq(pp_trace_kv_find(&T, "engine.qp.min_rnr_timer")->s, "12");
  cr_assert_null(pp_trace_kv_find(&T, "engine.cfg"), "format 2: keys, no struct bytes");
  cr_assert_null(pp_trace_kv_find(&T, "too.late"));
  struct pp_engine_cfg c, want = small_cfg();
  char note[256];
  memset(&c, 0xee, sizeof(c));
  cr_assert_eq(pp_trace_engine_cfg(&T, &c, note, sizeof(note)), PP_OK);
  cr_assert_str_empty(note, "the keys give the configuration exactly");
  cr_assert_eq(memcmp(&c, &want, sizeof(c)), 0);
}

Test(trace, engine_cfg_keys_set_and_fallback)
{
  struct pp_engine_cfg c = small_cfg();
  char err[256];
  cr_assert_eq(pp_trace_engine_cfg_set(&c, "engine.qp.rnr_retry", "3", err, sizeof(err)), PP_OK);
  cr_assert_eq(c.qp.rnr_retry, 3);
  cr_assert_eq(pp_trace_engine_cfg_set(&c, "engine.qp.rnr_retry", "300", err, sizeof(err)),
               PP_INVALID, "300 does not fit a uint8_t");
  cr_assert_eq(pp_trace_engine_cfg_set(&c, "engine.workload.pattern", "ring", err, sizeof(err)),
               PP_OK);
  cr_assert_eq(c.workload.pattern, PP_PATTERN_RING);
  cr_assert_eq(pp_trace_engine_cfg_set(&c, "engine.workload.pattern", "zz", err, sizeof(err)),
               PP_INVALID);
  cr_assert_eq(pp_trace_engine_cfg_set(&c, "engine.nope", "1", err, sizeof(err)), PP_NOTFOUND);
}

Test(trace, every_record_type_round_trips)
{
  write_small(&M);
  open_ok(M.p, M.n, 0);
  bool seen[256] = {false};
  char line[2048];
  for (size_t i = 0; i < T.nrecs; i++) {
    struct pp_trace_rec r;
    cr_assert_eq(pp_trace_get(&T, i, &r), PP_OK);
    cr_assert_eq(r.index, i);
    seen[r.type] = true;
    cr_assert_gt(pp_trace_rec_format(&r, line, sizeof(line)), 0);
    cr_assert_eq(strncmp(line, "#", 1), 0);
  }
  for (unsigned v = 0; v < 256; v++)
    if (pp_trace_rec_class(v) != PP_TCLASS_UNKNOWN)
      cr_expect(seen[v], "no %s record", pp_trace_rec_name(v));
  struct pp_trace_rec r;
  cr_assert(find(PP_TREC_POST_SEND, 0, 0, &r));
  cr_assert_eq(r.u.send.wr.opcode, PP_WR_SEND, "the first send is the engine's");
  bool found = false;
  for (size_t i = 0; i < T.nrecs && !found; i++) {
    cr_assert_eq(pp_trace_get(&T, i, &r), PP_OK);
    found = r.type == PP_TREC_POST_SEND && r.u.send.wr.wr_id == 5;
  }
  cr_assert(found);
  cr_assert_eq(r.u.send.wr.opcode, PP_WR_RDMA_WRITE_WITH_IMM);
  cr_assert_eq(r.u.send.wr.num_sge, 2);
  cr_assert_eq(r.u.send.wr.sg_list[1].addr, 0x20);
  cr_assert_eq(r.u.send.wr.sg_list[1].lkey, 2);
  cr_assert_eq(r.u.send.wr.remote_addr, 0xdead0000);
  cr_assert_eq(r.u.send.wr.imm_data, 0xabcd);
  cr_assert_eq(r.ts, 2100, "an output carries its input's time");
  cr_assert(find(PP_TREC_MODIFY_SRQ, 0, 0, &r));
  cr_assert_eq(r.ret, PP_INVALID);
  cr_assert(find(PP_TREC_RET, 1, 0, &r));
  cr_assert_eq(r.ret, PP_STATE);
  cr_assert(find(PP_TREC_QUERY_COUNTERS, 0, 0, &r));
  cr_assert_eq(r.u.ctr.acks_sent, 7);
  cr_assert(find(PP_TREC_PKT_TX, 1, 0, &r));
  cr_assert_eq(r.u.pkt.kind, PP_TPKT_RNR_NAK);
  cr_assert_eq(r.u.pkt.psn, 0xfffffe);
  cr_assert_eq(r.u.pkt.syndrome, 12);
  cr_assert_eq(r.ts, 3000);
  uint64_t id = r.u.pkt.id;
  cr_assert(find(PP_TREC_PKT_RX, 0, 0, &r));
  cr_assert_eq(r.u.pkt.id, id);
  cr_assert_eq(r.ts, 3001);
  size_t nrx = 0;
  for (size_t i = 0; i < T.nrecs; i++)
    nrx += T.idx[i].type == PP_TREC_PKT_RX;
  cr_assert_eq(nrx, 1, "a packet arrives once");
  /* the receive's head was captured before its completion */
  cr_assert(find(PP_TREC_MEM, 1, 0, &r));
  cr_assert_eq(r.u.mem.total, 64);
  cr_assert_eq(r.u.mem.len, 64);
  cr_assert_eq(r.u.mem.offset, 0);
  struct pp_trace_rec wc;
  cr_assert(find(PP_TREC_WC, 1, r.index, &wc));
  cr_assert_eq(wc.index, r.index + 1);
  cr_assert_eq(wc.u.wc.opcode, PP_WC_OP_RECV);
  cr_assert(find(PP_TREC_ASYNC, 1, 0, &r));
  cr_assert_eq(r.u.ev.type, PP_EVENT_SRQ_LIMIT_REACHED);
  cr_assert_eq(r.u.ev.srq_num, 3);
  cr_assert(find(PP_TREC_P2P, 1, 0, &r));
  cr_assert_eq(r.u.p2p.op, PP_TP2P_ISSEND);
  cr_assert_eq(r.u.p2p.peer, 0);
  cr_assert_eq(r.u.p2p.tag, 9);
  cr_assert_eq(r.u.p2p.ctx, 2);
  cr_assert_eq(r.u.p2p.len, 8);
  cr_assert_eq(r.u.p2p.cookie, 77);
  cr_assert_eq(r.ts, 2150);
  struct pp_trace_rec res;
  cr_assert(find(PP_TREC_P2P, 1, r.index + 1, &res));
  cr_assert_eq(res.u.p2p.op, PP_TP2P_ISSEND | PP_TRACE_P2P_RESULT, "then its results");
  cr_assert_neq(res.u.p2p.ret, PP_OK);
  cr_assert_eq(res.u.p2p.req, 0);
  cr_assert(find(PP_TREC_P2P, 1, res.index + 1, &r));
  cr_assert_eq(r.u.p2p.op, PP_TP2P_IPROBE);
  cr_assert_eq(r.u.p2p.peer, PP_ANY_SOURCE);
  cr_assert(find(PP_TREC_P2P, 1, r.index + 1, &res));
  cr_assert_eq(res.u.p2p.ret, 0, "the probe found nothing");
  cr_assert_str_eq(pp_trace_p2p_name(res.u.p2p.op), "iprobe");
  /* the application frees a buffer: its address and length, then how many it invalidated */
  cr_assert(find(PP_TREC_P2P, 1, res.index + 1, &r));
  cr_assert_eq(r.u.p2p.op, PP_TP2P_MEM_FREE);
  cr_assert_neq(r.u.p2p.addr, 0);
  cr_assert_eq(r.u.p2p.len, 8);
  cr_assert_eq(r.ts, 2170);
  cr_assert(find(PP_TREC_P2P, 1, r.index + 1, &res));
  cr_assert_eq(res.u.p2p.op, PP_TP2P_MEM_FREE | PP_TRACE_P2P_RESULT);
  cr_assert_eq(res.u.p2p.ret, 0);
  cr_assert_str_eq(pp_trace_p2p_name(res.u.p2p.op), "mem_free");
  cr_assert(find(PP_TREC_RANK_END, 0, 0, &r));
  cr_assert_eq(r.ts, 5000);
  cr_assert_eq(r.u.end.messages_sent, 1);
  cr_assert(find(PP_TREC_TEXT, 1, 0, &r));
  cr_assert_eq(r.ts, 6000);
  cr_assert_eq(r.u.text.kind, PP_TTEXT_MPI_REPORT);
  cr_assert_eq(r.u.text.len, 13);
  cr_assert_eq(memcmp(r.u.text.data, "a \"hang\" line", 13), 0);
  cr_assert(!find(PP_TREC_TEXT, 0, 0, &r), "the refused texts are not in the trace");
  cr_assert_gt(pp_trace_rec_format(&(struct pp_trace_rec){.type = PP_TREC_TEXT,
                                                           .u.text = {.kind = 1, .len = 2,
                                                                      .data = "ok"}},
                                   line, sizeof(line)),
               0);
  cr_assert(strstr(line, "text mpirun \"ok\""), "%s", line);
  /* per-rank lists partition the records in file order */
  cr_assert_eq(T.rank_nrecs[0] + T.rank_nrecs[1], T.nrecs);
  for (uint32_t k = 0; k < 2; k++)
    for (size_t i = 1; i < T.rank_nrecs[k]; i++) {
      cr_assert_lt(T.rank_recs[k][i - 1], T.rank_recs[k][i]);
      cr_assert_eq(T.idx[T.rank_recs[k][i]].rank, k);
    }
}

Test(trace, every_truncation_is_refused_with_an_offset)
{
  write_small(&M);
  char err[512];
  for (size_t n = 0; n < M.n; n++) {
    struct pp_trace t;
    uint8_t *copy = malloc(n ? n : 1); /* exactly n bytes: ASan catches any read past them */
    memcpy(copy, M.p, n);
    enum pp_status s = pp_trace_open(copy, n, 0, &t, err, sizeof(err));
    cr_assert_eq(s, PP_PARSE, "a trace cut at %zu of %zu bytes was accepted", n, M.n);
    cr_assert_eq(strncmp(err, "offset ", 7), 0, "message without offset: %s", err);
    /* partial mode reads any prefix that holds the header chunk */
    s = pp_trace_open(copy, n, PP_TRACE_PARTIAL, &t, err, sizeof(err));
    if (s == PP_OK) {
      cr_assert(!t.complete);
      pp_trace_close(&t);
    }
    free(copy);
  }
}

Test(trace, every_byte_flip_is_detected)
{
  write_small(&M);
  char err[512];
  for (size_t i = 0; i < M.n; i++) {
    for (unsigned bit = 0; bit < 8; bit += 3) {
      uint8_t *copy = malloc(M.n);
      memcpy(copy, M.p, M.n);
      copy[i] ^= (uint8_t)(1u << bit);
      struct pp_trace t;
      enum pp_status s = pp_trace_open(copy, M.n, 0, &t, err, sizeof(err));
      if (i >= 10 && i < 16) { /* minor version and flags: a reader accepts later minors */
        if (s == PP_OK)
          pp_trace_close(&t);
      } else {
        cr_assert_neq(s, PP_OK, "flipping bit %u of byte %zu went unnoticed", bit, i);
        cr_assert_eq(strncmp(err, "offset ", 7), 0, "%s", err);
      }
      free(copy);
    }
  }
}

Test(trace, garbage_and_wrong_versions)
{
  char err[512];
  struct pp_trace t;
  cr_assert_eq(pp_trace_open((const uint8_t *)"", 0, 0, &t, err, sizeof(err)), PP_PARSE);
  cr_assert(strstr(err, "offset 0"), "%s", err);
  const char *junk = "this is not a trace at all, really";
  cr_assert_eq(pp_trace_open((const uint8_t *)junk, strlen(junk), 0, &t, err, sizeof(err)),
               PP_PARSE);
  cr_assert(strstr(err, "not a prepost trace"), "%s", err);
  write_small(&M);
  M.p[8] = PP_TRACE_MAJOR + 1; /* a later major */
  M.p[10] = 0;
  cr_assert_eq(pp_trace_open(M.p, M.n, 0, &t, err, sizeof(err)), PP_UNSUPPORTED);
  char later[16];
  snprintf(later, sizeof later, "%u.0", PP_TRACE_MAJOR + 1);
  cr_assert(strstr(err, later), "%s", err);
}

Test(trace, sink_failure_is_reported)
{
  struct membuf m = {.fail_after = 2};
  struct pp_trace_info info = {.version = "t", .backend = "b", .scenario = "s", .nranks = 1};
  struct pp_trace_writer *w;
  cr_assert_eq(pp_trace_writer_create(mem_sink, &m, &info, &w), PP_OK);
  cr_assert_eq(pp_trace_begin(w), PP_OK);
  struct pp_trace_rank *t = pp_trace_rank_create(w, 0);
  struct pp_trace_pkt k = {.kind = PP_TPKT_ACK};
  for (int i = 0; i < 10000; i++)
    pp_trace_pkt_tx(w, (uint64_t)i, &k + (i % 7), &k);
  cr_assert_eq(pp_trace_finish(w), PP_IO);
  cr_assert_eq(pp_trace_writer_status(w), PP_IO);
  pp_trace_rank_destroy(t);
  pp_trace_writer_destroy(w);
  free(m.p);
}

Test(trace, partial_trace_reads_complete_chunks)
{
  struct membuf m = {.fail_after = -1};
  struct pp_trace_info info = {.version = "t", .backend = "b", .scenario = "s", .nranks = 1};
  struct pp_trace_writer *w;
  cr_assert_eq(pp_trace_writer_create(mem_sink, &m, &info, &w), PP_OK);
  cr_assert_eq(pp_trace_begin(w), PP_OK);
  struct pp_trace_pkt k = {.kind = PP_TPKT_ACK};
  for (int i = 0; i < 5000; i++)
    pp_trace_pkt_tx(w, (uint64_t)i * 10, &k, &k);
  cr_assert_eq(pp_trace_flush(w), PP_OK);
  size_t flushed = m.n;
  for (int i = 0; i < 10; i++)
    pp_trace_pkt_tx(w, 100000, &k, &k);
  /* the process dies here: no finish, and 7 bytes of a chunk header made it to the file */
  size_t cut = flushed;
  pp_trace_writer_destroy(w);
  cr_assert_eq(mem_sink(&m, "RECxxxx", 7), 0);
  char err[512];
  cr_assert_eq(pp_trace_open(m.p, cut, 0, &T, err, sizeof(err)), PP_PARSE);
  cr_assert(strstr(err, "--partial"), "the message suggests --partial: %s", err);
  open_ok(m.p, cut + 7, PP_TRACE_PARTIAL);
  cr_assert(!T.complete);
  cr_assert_eq(T.nrecs, 5000);
  struct pp_trace_rec r;
  cr_assert_eq(pp_trace_get(&T, 4999, &r), PP_OK);
  cr_assert_eq(r.ts, 49990);
  free(m.p);
}

/* ================================================================ a simulated run */

static struct pp_scenario sc;
static struct pp_run_result res;

static void run_traced(const char *name, enum pp_trace_packets packets, struct membuf *m)
{
  char path[PP_PATH_MAX], err[1024] = "";
  snprintf(path, sizeof(path), PREPOST_MODELS_DIR "/scenarios/%s.yaml", name);
  cr_assert_eq(pp_scenario_load(path, PREPOST_MODELS_DIR, &sc, err, sizeof(err)), PP_OK, "%s",
               err);
  memset(m, 0, sizeof(*m));
  m->fail_after = -1;
  struct pp_trace_info info = {.version = "test", .backend = "simgrid", .scenario = sc.sim.name,
                               .seed = sc.sim.seed, .nranks = sc.sim.engine.nranks,
                               .capture_bytes = 64, .snapshot_max = 4096, .packets = packets};
  struct pp_trace_writer *w;
  cr_assert_eq(pp_trace_writer_create(mem_sink, m, &info, &w), PP_OK);
  cr_assert_eq(pp_trace_kv_sim_cfg(w, &sc.sim), PP_OK);
  cr_assert_eq(pp_trace_begin(w), PP_OK);
  pp_sim_set_trace(w);
  cr_assert_eq(pp_sim_run(&sc.sim, NULL, &res, err, sizeof(err)), PP_OK, "%s", err);
  pp_sim_set_trace(NULL);
  cr_assert_eq(pp_trace_finish(w), PP_OK);
  pp_trace_writer_destroy(w);
}

Test(trace, simulated_run_is_recorded, .timeout = 120)
{
  run_traced("rnr-slow-consumer", PP_TRACE_PACKETS_ALL, &M);
  open_ok(M.p, M.n, 0);
  cr_assert_eq(pp_trace_packets(&T), PP_TRACE_PACKETS_ALL);
  uint64_t wc[2] = {0}, sends = 0, recvs = 0, tx = 0, rx = 0, rnr = 0, mem = 0, ends = 0;
  for (size_t i = 0; i < T.nrecs; i++) {
    struct pp_trace_rec r;
    cr_assert_eq(pp_trace_get(&T, i, &r), PP_OK);
    switch (r.type) {
    case PP_TREC_WC:
      wc[r.rank]++;
      break;
    case PP_TREC_POST_SEND:
      sends++;
      break;
    case PP_TREC_POST_RECV:
      recvs++;
      break;
    case PP_TREC_PKT_TX:
      tx++;
      rnr += r.u.pkt.kind == PP_TPKT_RNR_NAK;
      break;
    case PP_TREC_PKT_RX:
      rx++;
      break;
    case PP_TREC_MEM:
      mem++;
      break;
    case PP_TREC_RANK_END:
      ends++;
      cr_assert_eq(r.u.end.done, 1);
      cr_assert_eq(r.u.end.messages_sent, res.ranks[r.rank].stats.messages_sent);
      cr_assert_eq(r.u.end.messages_received, res.ranks[r.rank].stats.messages_received);
      break;
    }
  }
  cr_assert_eq(wc[0], 200, "every send completion of rank 0");
  cr_assert_eq(wc[1], 200, "every receive completion of rank 1");
  cr_assert_eq(sends, 200);
  cr_assert_geq(recvs, 200, "a receive posted for every message");
  cr_assert_eq(mem, 200, "the head of every received message");
  cr_assert_eq(rnr, res.ranks[1].nic.rnr_naks_sent);
  cr_assert_eq(tx, res.ranks[0].nic.packets_sent + res.ranks[1].nic.packets_sent);
  cr_assert_eq(rx, tx, "no loss: every packet arrives");
  cr_assert_eq(ends, 2);
  struct pp_sim_config back;
  bool tmp;
  char note[256];
  cr_assert_eq(pp_trace_sim_cfg(&T, &back, &tmp, note, sizeof(note)), PP_OK, "%s", note);
  cr_assert(!tmp);
  /* the header holds the strings, not the bytes after their NUL (the scenario's path
   * resolution leaves some there) */
  char *strs[] = {sc.sim.name, sc.sim.platform.file, sc.sim.nic.name};
  size_t lens[] = {sizeof sc.sim.name, sizeof sc.sim.platform.file, sizeof sc.sim.nic.name};
  for (size_t i = 0; i < 3; i++) {
    size_t n = strlen(strs[i]);
    memset(strs[i] + n, 0, lens[i] - n);
  }
  /* the NIC profile's padding holes (after ack_every and after train_max) are 0 from
   * pp_nic_profile_default on, through the profile loader: compared as bytes too */
  cr_assert_eq(memcmp(&back, &sc.sim, sizeof(back)), 0, "the configuration round-trips");
  pp_run_result_free(&res);
}

/* The default (PP_TRACE_PACKETS_ERRORS): of the packets only the RNR NAKs and NAKs (here the
 * sequence-error NAKs behind them), each with its arrival; the engine's inputs and outputs all there. */
Test(trace, simulated_run_records_only_error_packets_by_default, .timeout = 120)
{
  run_traced("rnr-slow-consumer", PP_TRACE_PACKETS_ERRORS, &M);
  open_ok(M.p, M.n, 0);
  cr_assert_eq(pp_trace_packets(&T), PP_TRACE_PACKETS_ERRORS);
  const struct pp_trace_kv *kv = pp_trace_kv_find(&T, "trace.packets");
  cr_assert(kv && kv->type == PP_TKV_U64 && kv->u == PP_TRACE_PACKETS_ERRORS);
  uint64_t tx = 0, rx = 0, rnr = 0, seq = 0, sends = 0, wc = 0;
  for (size_t i = 0; i < T.nrecs; i++) {
    struct pp_trace_rec r;
    cr_assert_eq(pp_trace_get(&T, i, &r), PP_OK);
    tx += r.type == PP_TREC_PKT_TX;
    rx += r.type == PP_TREC_PKT_RX;
    rnr += r.type == PP_TREC_PKT_TX && r.u.pkt.kind == PP_TPKT_RNR_NAK;
    seq += r.type == PP_TREC_PKT_TX && r.u.pkt.kind == PP_TPKT_NAK && r.u.pkt.syndrome == 0;
    sends += r.type == PP_TREC_POST_SEND;
    wc += r.type == PP_TREC_WC;
  }
  cr_assert_gt(res.ranks[1].nic.rnr_naks_sent, 100, "the slow consumer RNR-NAKs");
  cr_assert_eq(rnr, res.ranks[1].nic.rnr_naks_sent, "every RNR NAK");
  /* the requests in flight behind a refused one each time: one PSN sequence-error NAK */
  cr_assert_gt(seq, 0);
  cr_assert_eq(tx, rnr + seq, "no other packet (the run has no other NAK)");
  cr_assert_eq(rx, tx, "each one's arrival");
  cr_assert_eq(sends, 200);
  cr_assert_eq(wc, 400);
  pp_run_result_free(&res);
}

Test(trace, sim_cfg_overrides)
{
  struct pp_sim_config c;
  memset(&c, 0, sizeof(c));
  char err[256];
  cr_assert_eq(pp_trace_sim_cfg_set(&c, "rnr_retry=7", err, sizeof(err)), PP_OK, "%s", err);
  cr_assert_eq(c.engine.qp.rnr_retry, 7);
  cr_assert_eq(pp_trace_sim_cfg_set(&c, "engine.workload.messages=12", err, sizeof(err)), PP_OK);
  cr_assert_eq(c.engine.workload.messages, 12);
  cr_assert_eq(pp_trace_sim_cfg_set(&c, "loss=0.01", err, sizeof(err)), PP_OK, "%s", err);
  cr_assert_eq(c.faults.loss, 0.01);
  cr_assert_eq(pp_trace_sim_cfg_set(&c, "sim.seed=9", err, sizeof(err)), PP_OK);
  cr_assert_eq(c.engine.seed, 9, "the seed is both the fabric's and the engines'");
  cr_assert_eq(pp_trace_sim_cfg_set(&c, "ack_every=4", err, sizeof(err)), PP_OK);
  cr_assert_eq(c.nic.ack_every, 4);
  cr_assert_eq(pp_trace_sim_cfg_set(&c, "nonsense=1", err, sizeof(err)), PP_NOTFOUND);
  cr_assert(strstr(err, "nonsense"), "%s", err);
  cr_assert_eq(pp_trace_sim_cfg_set(&c, "rnr_retry", err, sizeof(err)), PP_INVALID);
  cr_assert_eq(pp_trace_sim_cfg_set(&c, "rnr_retry=-1", err, sizeof(err)), PP_INVALID);
}

/* faults.KEY as a scenario writes it (the faults field table), the trace's own sim.faults.*
 * names still read; a rank key is bounded by the configuration's ranks. */
Test(trace, sim_cfg_fault_keys_by_the_table)
{
  struct pp_sim_config c;
  memset(&c, 0, sizeof(c));
  c.engine.nranks = 4;
  char err[256];
  cr_assert_eq(pp_trace_sim_cfg_set(&c, "faults.jitter=2us", err, sizeof(err)), PP_OK, "%s", err);
  cr_assert_eq(c.faults.jitter_ns, 2000);
  cr_assert_eq(pp_trace_sim_cfg_set(&c, "sim.faults.jitter_ns=3000", err, sizeof(err)), PP_OK);
  cr_assert_eq(c.faults.jitter_ns, 3000, "the trace header's name");
  cr_assert_eq(pp_trace_sim_cfg_set(&c, "faults.scramble=1", err, sizeof(err)), PP_OK, "%s", err);
  cr_assert(c.faults.scramble == 1.0);
  cr_assert_eq(pp_trace_sim_cfg_set(&c, "faults.loss=1", err, sizeof(err)), PP_INVALID);
  cr_assert_str_eq(err, "'faults.loss' must be a number 0 <= p < 1, got '1'");
  cr_assert_eq(pp_trace_sim_cfg_set(&c, "faults.pause_ranks=[0,3]", err, sizeof(err)), PP_OK,
               "%s", err);
  cr_assert_eq(c.faults.pause_ranks, 0x9);
  cr_assert_eq(pp_trace_sim_cfg_set(&c, "faults.pause_ranks=[4]", err, sizeof(err)), PP_INVALID);
  cr_assert_str_eq(err, "'faults.pause_ranks' must be a list of ranks 0..3 such as [1, 3], got "
                        "'[4]'");
  cr_assert_eq(pp_trace_sim_cfg_set(&c, "faults.rkey_host=3", err, sizeof(err)), PP_OK);
  cr_assert_eq(c.faults.rkey_host, 3);
  cr_assert_eq(pp_trace_sim_cfg_set(&c, "faults.rkey_host=4", err, sizeof(err)), PP_INVALID);
  cr_assert_str_eq(err, "'faults.rkey_host' must be an integer 0..3, got '4'");
  cr_assert_eq(c.faults.rkey_host, 3, "unchanged");
}

/* The scenario parser's keys (pp_scenario_section_table) beyond the engine's sections: the NIC's
 * line_rate, the generated cluster's bandwidth and latency, workload.slow_ranks; the cluster
 * keys refused for a run on a platform file, a composite key refused with a pointer to its
 * parts. */
Test(trace, sim_cfg_nic_and_cluster_keys_by_the_scenario_tables)
{
  struct pp_sim_config c;
  memset(&c, 0, sizeof(c));
  c.engine.nranks = 4;
  c.platform.bandwidth_bps = 100e9;
  char err[256];
  cr_assert_eq(pp_trace_sim_cfg_set(&c, "nic.line_rate=25Gbps", err, sizeof(err)), PP_OK, "%s",
               err);
  cr_assert(c.nic.line_rate_bps == 25e9);
  cr_assert_eq(pp_trace_sim_cfg_set(&c, "nic.line_rate=0", err, sizeof(err)), PP_INVALID);
  cr_assert(strstr(err, "'nic.line_rate' must be"), "%s", err);
  cr_assert(c.nic.line_rate_bps == 25e9, "unchanged");
  cr_assert_eq(pp_trace_sim_cfg_set(&c, "platform.cluster.bandwidth=200Gbps", err, sizeof(err)),
               PP_OK, "%s", err);
  cr_assert(c.platform.bandwidth_bps == 200e9);
  cr_assert_eq(pp_trace_sim_cfg_set(&c, "platform.cluster.latency=2us", err, sizeof(err)), PP_OK,
               "%s", err);
  cr_assert_eq(c.platform.latency_ns, 2000);
  cr_assert_eq(pp_trace_sim_cfg_set(&c, "platform.cluster.nonsense=1", err, sizeof(err)),
               PP_NOTFOUND);
  cr_assert_eq(pp_trace_sim_cfg_set(&c, "workload.slow_ranks=[1,3]", err, sizeof(err)), PP_OK,
               "%s", err);
  cr_assert_eq(c.engine.workload.consume_ranks, 0xa);
  cr_assert_eq(pp_trace_sim_cfg_set(&c, "workload.slow_ranks=[4]", err, sizeof(err)),
               PP_INVALID);
  cr_assert_eq(pp_trace_sim_cfg_set(&c, "nic.rnr_delay={1: 4ms}", err, sizeof(err)), PP_INVALID);
  cr_assert(strstr(err, "sim.*"), "%s", err);
  snprintf(c.platform.file, sizeof(c.platform.file), "%s", "/tmp/two-hosts.xml");
  cr_assert_eq(pp_trace_sim_cfg_set(&c, "platform.cluster.latency=3us", err, sizeof(err)),
               PP_INVALID);
  cr_assert(strstr(err, "/tmp/two-hosts.xml"), "%s", err);
  cr_assert_eq(c.platform.latency_ns, 2000, "unchanged");
}

/* collective.slow_ranks and root, bounded by the ranks; slow ranks without a window are slow
 * throughout, as in a scenario; a window already there stays. */
Test(trace, sim_cfg_collective_slow_ranks_as_the_scenario_reads_them)
{
  static struct pp_sim_config c;
  memset(&c, 0, sizeof(c));
  c.engine.nranks = 4;
  cr_assert_eq(pp_engine_cfg_protocol(&c.engine, "ring-credits"), PP_OK);
  cr_assert_eq(pp_engine_cfg_workload(&c.engine, PP_WORKLOAD_COLLECTIVE), PP_OK);
  cr_assert_eq(pp_coll_params_of(&c.engine)->slow_until, 0, "the default: no window");
  char err[256];
  cr_assert_eq(pp_trace_sim_cfg_set(&c, "collective.slow_ranks=[2]", err, sizeof(err)), PP_OK,
               "%s", err);
  cr_assert_eq(pp_coll_params_of(&c.engine)->slow_ranks, 0x4);
  cr_assert_eq(pp_coll_params_of(&c.engine)->slow_until, PP_COLL_MAX_ITERATIONS);
  pp_coll_params_of(&c.engine)->slow_until = 5;
  cr_assert_eq(pp_trace_sim_cfg_set(&c, "collective.slow_ranks=[1]", err, sizeof(err)), PP_OK,
               "%s", err);
  cr_assert_eq(pp_coll_params_of(&c.engine)->slow_until, 5, "the recorded window stays");
  cr_assert_eq(pp_trace_sim_cfg_set(&c, "collective.root=3", err, sizeof(err)), PP_OK, "%s", err);
  cr_assert_eq(pp_trace_sim_cfg_set(&c, "collective.root=4", err, sizeof(err)), PP_INVALID);
  cr_assert_str_eq(err, "'collective.root' must be an integer 0..3, got '4'");
}

/* ================================================================ merging per-rank files */

#define MERGE_ORIGIN 7000000000ull
#define MERGE_TIMERS 80000 /* about 320 KiB of TIMER records per rank: several chunks */

/* What one rank process of the verbs backend writes: its own file, its own rank only, time stamps
 * from MERGE_ORIGIN; rank r's inputs are at ORIGIN + 10 i + 5 r. */
static void write_rank(struct membuf *m, uint32_t rank)
{
  memset(m, 0, sizeof(*m));
  m->fail_after = -1;
  struct pp_trace_info info = {.version = "test", .backend = "verbs", .scenario = "small",
                               .seed = 42, .nranks = 2, .snapshot_max = 4096};
  struct pp_trace_writer *w;
  cr_assert_eq(pp_trace_writer_create(mem_sink, m, &info, &w), PP_OK);
  struct pp_engine_cfg cfg = small_cfg();
  cr_assert_eq(pp_trace_kv_engine_cfg(w, &cfg), PP_OK);
  cr_assert_eq(pp_trace_set_origin(w, MERGE_ORIGIN), PP_OK);
  cr_assert_eq(pp_trace_begin(w), PP_OK);
  cr_assert_eq(pp_trace_set_origin(w, 1), PP_STATE, "the origin is a header key");
  struct fnic nic = {0};
  struct pp_trace_rank *t = pp_trace_rank_create(w, rank);
  struct pp_engine *e;
  cfg.rank = rank;
  uint64_t o = MERGE_ORIGIN + 5 * rank;
  cr_assert_eq(pp_tr_engine_create(t, o, &cfg, &fake_ops, &nic, &e), PP_OK);
  struct pp_conn_info mine, peer = {0};
  cr_assert(pp_tr_local_info(t, e, 1 - rank, &mine));
  peer = mine;
  cr_assert_eq(pp_tr_connect(t, e, o + 10, 1 - rank, &peer), PP_OK);
  cr_assert_eq(pp_tr_start(t, e, o + 20), PP_OK); /* posts: outputs at the start's time */
  for (uint64_t i = 3; i < MERGE_TIMERS; i++)
    cr_assert_eq(pp_tr_on_timer(t, e, o + 10 * i), PP_OK);
  pp_tr_rank_end(t, e, o + 10 * MERGE_TIMERS);
  pp_tr_engine_destroy(t, e, o + 10 * MERGE_TIMERS);
  pp_trace_rank_destroy(t);
  cr_assert_eq(pp_trace_finish(w), PP_OK);
  pp_trace_writer_destroy(w);
}

static void open_part(struct membuf *m, struct pp_trace *t, unsigned flags)
{
  char err[512] = "";
  enum pp_status s = pp_trace_open(m->p, m->n, flags, t, err, sizeof(err));
  cr_assert_eq(s, PP_OK, "%s", err);
}

static enum pp_status merge_into(struct membuf *out, const struct pp_trace *const *parts,
                                 size_t n, char *err, size_t errlen)
{
  memset(out, 0, sizeof(*out));
  out->fail_after = -1;
  struct pp_trace_info info = {.version = "test", .backend = "verbs", .nranks = 2};
  struct pp_trace_writer *w;
  cr_assert_eq(pp_trace_writer_create(mem_sink, out, &info, &w), PP_OK);
  enum pp_status s = pp_trace_merge(w, parts, n, err, errlen);
  cr_assert_eq(s, PP_INVALID, "merging before the header is ended");
  cr_assert_eq(pp_trace_begin(w), PP_OK);
  s = pp_trace_merge(w, parts, n, err, errlen);
  cr_assert_eq(pp_trace_finish(w), PP_OK);
  pp_trace_writer_destroy(w);
  return s;
}

Test(trace, per_rank_files_merge_by_time)
{
  struct membuf p0, p1, mm;
  write_rank(&p0, 0);
  write_rank(&p1, 1);
  struct pp_trace t0 = {0}, t1 = {0};
  open_part(&p0, &t0, 0);
  open_part(&p1, &t1, 0);
  const struct pp_trace *parts[] = {&t1, &t0}; /* any order */
  char err[256] = "";
  cr_assert_eq(merge_into(&mm, parts, 2, err, sizeof(err)), PP_OK, "%s", err);
  open_ok(mm.p, mm.n, 0);
  cr_assert(T.complete);
  cr_assert_eq(T.nrecs, t0.nrecs + t1.nrecs);
  cr_assert_gt(t0.nrecs, MERGE_TIMERS);
  /* time stamps count from the origin; the file is in time order */
  struct pp_trace_rec r, q;
  cr_assert_eq(pp_trace_get(&T, 0, &r), PP_OK);
  cr_assert_eq(r.type, PP_TREC_CREATE);
  cr_assert_eq(r.rank, 0);
  cr_assert_eq(r.ts, 0, "relative to trace.origin_ns");
  for (size_t i = 1; i < T.nrecs; i++)
    cr_assert_geq(T.idx[i].ts, T.idx[i - 1].ts, "record %zu", i);
  /* each rank's records are its part's, in its order, with the same time stamps and fields */
  const struct pp_trace *src[] = {&t0, &t1};
  for (uint32_t k = 0; k < 2; k++) {
    cr_assert_eq(T.rank_nrecs[k], src[k]->nrecs);
    for (size_t j = 0; j < T.rank_nrecs[k]; j++) {
      cr_assert_eq(pp_trace_get(&T, T.rank_recs[k][j], &r), PP_OK);
      cr_assert_eq(pp_trace_get(src[k], j, &q), PP_OK);
      char a[1024], b[1024];
      r.index = q.index; /* the record number in its file */
      pp_trace_rec_format(&r, a, sizeof(a));
      pp_trace_rec_format(&q, b, sizeof(b));
      cr_assert_str_eq(a, b, "rank %u record %zu", k, j);
      cr_assert_eq(r.ts, q.ts);
    }
  }
  /* an input and its outputs stay together: rank 0's start and its posts */
  size_t i = 0;
  while (T.idx[i].type != PP_TREC_START)
    i++;
  cr_assert_eq(T.idx[i].rank, 0);
  cr_assert_eq(T.idx[i].ts, 20);
  cr_assert_eq(T.idx[i + 1].rank, 0);
  cr_assert_eq(pp_trace_rec_class(T.idx[i + 1].type), PP_TCLASS_OUT);
  const struct pp_trace_kv *kv = pp_trace_kv_find(&t0, "trace.origin_ns");
  cr_assert(kv && kv->u == MERGE_ORIGIN);
  cr_assert(find(PP_TREC_RANK_END, 1, 0, &r));
  cr_assert_eq(r.ts, 10 * MERGE_TIMERS + 5);
  free(mm.p);

  /* a part cut short (a killed rank) merges up to its last complete chunk */
  struct pp_trace cut = {0};
  size_t half = p1.n - 100; /* the END chunk and the end of the last one are missing */
  cr_assert_eq(pp_trace_open(p1.p, half, PP_TRACE_PARTIAL, &cut, err, sizeof(err)), PP_OK, "%s",
               err);
  cr_assert_lt(cut.nrecs, t1.nrecs);
  cr_assert_gt(cut.nrecs, 0);
  const struct pp_trace *parts2[] = {&t0, &cut};
  cr_assert_eq(merge_into(&mm, parts2, 2, err, sizeof(err)), PP_OK, "%s", err);
  pp_trace_close(&T);
  open_ok(mm.p, mm.n, 0);
  cr_assert_eq(T.nrecs, t0.nrecs + cut.nrecs);
  free(mm.p);

  /* two parts with the same rank cannot merge (their time deltas would interleave) */
  const struct pp_trace *dup[] = {&t0, &cut, &t0};
  cr_assert_eq(merge_into(&mm, dup, 3, err, sizeof(err)), PP_INVALID);
  cr_assert(strstr(err, "both have records of rank 0"), "%s", err);
  free(mm.p);
  pp_trace_close(&cut);
  pp_trace_close(&t0);
  pp_trace_close(&t1);
  free(p0.p);
  free(p1.p);
}

/* The three ways to hand chunks over write the same records (byte for byte but for addresses). */
static void same_records(struct membuf *a, struct membuf *c)
{
  /* the engine's buffer addresses differ between the runs: compare the others byte for byte */
  struct pp_trace ta = {0}, tc = {0};
  open_part(a, &ta, 0);
  open_part(c, &tc, 0);
  cr_assert_eq(ta.nrecs, tc.nrecs);
  for (size_t i = 0; i < ta.nrecs; i++) {
    struct pp_trace_rec x, y;
    cr_assert_eq(pp_trace_get(&ta, i, &x), PP_OK);
    cr_assert_eq(pp_trace_get(&tc, i, &y), PP_OK);
    cr_assert_eq(x.type, y.type, "record %zu", i);
    cr_assert_eq(x.ts, y.ts, "record %zu", i);
    const uint8_t *px, *py;
    size_t nx, ny;
    cr_assert_eq(pp_trace_rec_bytes(&ta, i, &px, &nx), PP_OK);
    cr_assert_eq(pp_trace_rec_bytes(&tc, i, &py, &ny), PP_OK);
    bool addr = x.type == PP_TREC_REG_MR || x.type == PP_TREC_DEREG_MR ||
                x.type == PP_TREC_POST_SEND || x.type == PP_TREC_POST_RECV ||
                x.type == PP_TREC_LOCAL_INFO || x.type == PP_TREC_CONNECT;
    if (!addr)
      cr_assert(nx == ny && memcmp(px, py, nx) == 0, "record %zu (%s)", i,
                pp_trace_rec_name(x.type));
  }
  pp_trace_close(&ta);
  pp_trace_close(&tc);
}

Test(trace, swap_and_deferred_encoding_write_the_same_records)
{
  struct membuf a, b, c;
  write_small_mode(&a, 0);
  write_small_mode(&b, 1);
  write_small_mode(&c, 2);
  same_records(&a, &b);
  same_records(&a, &c);
  free(a.p);
  free(b.p);
  free(c.p);
}

/* ================================================================ the CLI */

static int sh(const char *fmt, const char *a, const char *b)
{
  char cmd[4096];
  snprintf(cmd, sizeof(cmd), fmt, a, b);
  int st = system(cmd);
  cr_assert(WIFEXITED(st), "%s", cmd);
  return WEXITSTATUS(st);
}

Test(trace, cli_run_trace_dump_is_deterministic, .timeout = 120)
{
  char dir[] = "/tmp/prepost-trace-XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  const char *sc1 = PREPOST_MODELS_DIR "/scenarios/lossy.yaml";
  char cmd[2048];
  /* every packet (--trace-packets): the filters below pick packets of rank 1 */
  snprintf(cmd, sizeof(cmd), "'%s' run %s --trace %s/a.trace --trace-packets > /dev/null",
           PREPOST_CLI, sc1, dir);
  cr_assert_eq(sh("%s%s", cmd, ""), 0);
  /* b: encoded on the writer thread (PREPOST_TRACE_ENCODE=writer): the same records */
  snprintf(cmd, sizeof(cmd),
           "PREPOST_TRACE_ENCODE=writer '%s' run %s --trace %s/b.trace --trace-packets > /dev/null",
           PREPOST_CLI, sc1, dir);
  cr_assert_eq(sh("%s%s", cmd, ""), 0);
  /* the same run twice (once encoded on the writer thread): the same records (addresses of the
   * engines' buffers aside) */
  snprintf(cmd, sizeof(cmd), "cd %s && for x in a b; do '%s' trace dump $x.trace --type "
           "create,connect,start,wc,async,timer,ret,pkt_tx,pkt_rx,rank_end > $x.cmp; done && "
           "cmp -s a.cmp b.cmp && test $(wc -l < a.cmp) -gt 1000", dir, PREPOST_CLI);
  cr_assert_eq(sh("%s%s", cmd, ""), 0, "same scenario and seed, same records");
  snprintf(cmd, sizeof(cmd), "'%s' trace dump %s/a.trace > %s/a.txt", PREPOST_CLI, dir, dir);
  cr_assert_eq(sh("%s%s", cmd, ""), 0);
  cr_assert_eq(sh("grep -q '^# scenario.name = lossy$' %s/a.txt%s", dir, ""), 0);
  cr_assert_eq(sh("grep -q ' post_send qp 0x' %s/a.txt%s", dir, ""), 0);
  cr_assert_eq(sh("grep -q ' wc qp 0x.* RECV SUCCESS' %s/a.txt%s", dir, ""), 0);
  snprintf(cmd, sizeof(cmd), "'%s' trace dump %s/a.trace --rank 1 --type pkt_tx --count 3 "
           "| grep -c '^#[0-9]' | grep -qx 3", PREPOST_CLI, dir);
  cr_assert_eq(sh("%s%s", cmd, ""), 0, "filters");
  /* a truncated copy: exit 2 and the offset */
  snprintf(cmd, sizeof(cmd), "head -c 3000 %s/a.trace > %s/cut.trace", dir, dir);
  cr_assert_eq(sh("%s%s", cmd, ""), 0);
  snprintf(cmd, sizeof(cmd), "'%s' trace dump %s/cut.trace > /dev/null 2> %s/err.txt",
           PREPOST_CLI, dir, dir);
  cr_assert_eq(sh("%s%s", cmd, ""), 2);
  cr_assert_eq(sh("grep -q 'cut.trace: offset [0-9]*: ' %s/err.txt%s", dir, ""), 0);
  snprintf(cmd, sizeof(cmd), "'%s' trace stats %s/a.trace | grep -q '^pkt_tx '", PREPOST_CLI,
           dir);
  cr_assert_eq(sh("%s%s", cmd, ""), 0);
  /* merging (the verbs backend's per-rank files): a trace merged alone still replays exactly */
  snprintf(cmd, sizeof(cmd), "cd %s && '%s' trace merge -o m.trace a.trace && '%s' replay "
           "m.trace > replay.txt", dir, PREPOST_CLI, PREPOST_CLI);
  cr_assert_eq(sh("%s%s", cmd, ""), 0, "merge, then exact replay");
  snprintf(cmd, sizeof(cmd), "'%s' trace dump %s/m.trace | grep -qx '# trace.packets = 2'",
           PREPOST_CLI, dir);
  cr_assert_eq(sh("%s%s", cmd, ""), 0, "the merged trace says it has every packet");
  snprintf(cmd, sizeof(cmd), "cd %s && '%s' trace merge -o m2.trace a.trace a.trace 2> err2.txt",
           dir, PREPOST_CLI);
  cr_assert_eq(sh("%s%s", cmd, ""), 2, "the same ranks twice");
  cr_assert_eq(sh("grep -q 'both have records of rank 0' %s/err2.txt%s", dir, ""), 0);
  cr_assert_eq(sh("'%s' trace merge a.trace%s > /dev/null 2>&1", PREPOST_CLI, ""), 2);
  cr_assert_eq(sh("'%s' trace nonsense%s > /dev/null 2>&1", PREPOST_CLI, ""), 2);
  cr_assert_eq(sh("'%s' trace dump%s > /dev/null 2>&1", PREPOST_CLI, ""), 2);
  cr_assert_eq(sh("'%s' trace --help%s | grep -q 'prepost trace dump'", PREPOST_CLI, ""), 0);
  cr_assert_eq(sh("rm -rf %s%s", dir, ""), 0);
}
