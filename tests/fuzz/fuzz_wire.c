/*
 * Fuzz target for the wire protocols (fuzz_wire.h): an honest engine against a byzantine peer
 * whose every work request and READ response the input controls.
 *
 *   tests/fuzz/run wire [SECONDS]   builds it with clang -fsanitize=fuzzer,address,undefined and
 *                                   runs it on a copy of tests/fuzz/wire-corpus
 */
#include "fuzz_wire.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "backends/simgrid/byzantine.h"
#include "prepost/simnic.h"
#include "prepost/engine.h"

#define MAX_EVENTS 4096u
#define MAX_STEPS 60000u
#define MAX_SIM_NS 20000000ull /* 20 ms of simulated time */
#define LATENCY_NS 1000u

struct ev {
  uint64_t at, seq;
  uint32_t dst;
  struct simnic_pkt *pkt;
};

struct world {
  struct simnic_fabric *f;
  struct simnic *nic[2];
  struct pp_engine *e[2];
  struct pp_byz *byz;
  uint64_t now, seq, last[2];
  struct ev ev[MAX_EVENTS];
  uint32_t nev;
  int honest_error;
};

/* Packets travel LATENCY_NS plus 1 ns per 12.5 bytes (100 Gb/s), in order per direction. An
 * RDMA READ leaving rank 0 for rank 1 lets the input choose what rank 1's memory holds first. */
static void wire(void *ctx, uint32_t src, uint32_t dst, struct simnic_pkt *pkt, uint64_t bytes)
{
  struct world *w = ctx;
  struct simnic_pkt_info info;
  simnic_pkt_describe(pkt, &info);
  if (src == 0 && !strcmp(info.kind, "REQ") && info.opcode == PP_WR_RDMA_READ)
    pp_byz_read_response(w->byz, info.remote_addr, info.len, info.rkey);
  if (w->nev == MAX_EVENTS) { /* cannot happen with these queue depths: a lost packet */
    simnic_pkt_lost(w->f, pkt);
    return;
  }
  uint64_t at = w->now + LATENCY_NS + bytes * 2 / 25;
  if (at < w->last[src])
    at = w->last[src];
  w->last[src] = at;
  w->ev[w->nev++] = (struct ev){.at = at, .seq = w->seq++, .dst = dst, .pkt = pkt};
}

static int next_ev(const struct world *w)
{
  int best = -1;
  for (uint32_t i = 0; i < w->nev; i++)
    if (best < 0 || w->ev[i].at < w->ev[best].at ||
        (w->ev[i].at == w->ev[best].at && w->ev[i].seq < w->ev[best].seq))
      best = (int)i;
  return best;
}

static void note(struct world *w, uint32_t rank, enum pp_status s)
{
  if (s != PP_OK && rank == 0 && !w->honest_error)
    w->honest_error = (int)s;
}

static void drain(struct world *w, uint32_t r)
{
  struct pp_wc wc[16];
  struct pp_async_event ev;
  simnic_set_now(w->nic[r], w->now);
  for (int guard = 0; guard < 1000; guard++) {
    int n = simnic_poll_cq(w->nic[r], wc, 16);
    for (int i = 0; i < n; i++)
      note(w, r, pp_engine_on_wc(w->e[r], w->now, &wc[i]));
    int a = 0;
    while (simnic_get_async_event(w->nic[r], &ev)) {
      note(w, r, pp_engine_on_async(w->e[r], w->now, &ev));
      a++;
    }
    if (n == 0 && a == 0)
      return;
  }
}

/* One instant: the earliest packet arrival, NIC timer or engine deadline. false: nothing left. */
static bool step(struct world *w)
{
  int k = next_ev(w);
  uint64_t t = k >= 0 ? w->ev[k].at : UINT64_MAX;
  for (uint32_t r = 0; r < 2; r++) {
    uint64_t d = simnic_next_deadline(w->nic[r]), g = pp_engine_next_deadline(w->e[r]);
    t = d < t ? d : t;
    t = g < t ? g : t;
  }
  if (t == UINT64_MAX || t > MAX_SIM_NS)
    return false;
  if (t > w->now)
    w->now = t;
  if (k >= 0 && w->ev[k].at <= w->now) {
    struct ev e = w->ev[k];
    w->ev[k] = w->ev[--w->nev];
    simnic_on_packet(w->nic[e.dst], w->now, e.pkt);
  }
  for (uint32_t r = 0; r < 2; r++) {
    if (simnic_next_deadline(w->nic[r]) <= w->now)
      simnic_on_timer(w->nic[r], w->now);
    drain(w, r);
    if (pp_engine_next_deadline(w->e[r]) <= w->now) {
      note(w, r, pp_engine_on_timer(w->e[r], w->now));
      drain(w, r);
    }
  }
  return true;
}

static bool config(const uint8_t *c, struct pp_engine_cfg *cfg)
{
  static const enum pp_protocol protos[] = {PP_PROTO_EAGER, PP_PROTO_RNDV, PP_PROTO_RING_CREDITS,
                                            PP_PROTO_RING_CTS};
  static const uint32_t sizes[] = {16, 200, 3000, 9000, 40000, 100000};
  /* PP_FUZZ_WIRE_PROTOCOL=NAME fuzzes that protocol only (to look past a known crash of
   * another): the input's protocol bits are then ignored */
  const char *only = getenv("PP_FUZZ_WIRE_PROTOCOL");
  int forced = only && *only ? pp_protocol_from_name(only) : -1;
  *cfg = (struct pp_engine_cfg){
      .nranks = 2,
      .protocol = forced >= 0 ? (enum pp_protocol)forced : protos[c[0] & 3],
      .qp = {.min_rnr_timer = 1, .rnr_retry = 2, .timeout = 10, .retry_cnt = 2,
             .max_rd_atomic = 4, .mtu = 4096, .sq_depth = 32, .rq_depth = 4 + (c[3] & 7)},
      .workload = {.kind = PP_WORKLOAD_STREAM, .pattern = PP_PATTERN_RING,
                   .messages = 1 + c[2] % 6, .size = sizes[c[1] % 6]},
      .seed = 1,
  };
  if (pp_engine_cfg_is_p2p(cfg)) { /* the parameters of the protocol drawn */
    pp_p2p_params_default(pp_p2p_params_of(cfg));
    pp_p2p_params_of(cfg)->eager_limit = 4096;
    pp_p2p_params_of(cfg)->rget_limit = 32768;
    pp_p2p_params_of(cfg)->frag_size = 16384;
    pp_p2p_params_of(cfg)->pipeline = 2;
    pp_p2p_params_of(cfg)->credits = 4;
    pp_p2p_params_of(cfg)->channels = 1 + (c[0] >> 2 & 1);
  }
  if (pp_engine_cfg_is_ring(cfg)) {
    pp_ring_params_default(pp_ring_params_of(cfg));
    pp_ring_params_of(cfg)->slots = 2 + (c[3] >> 3 & 3);
    pp_ring_params_of(cfg)->slot_size = 4096;
    pp_ring_params_of(cfg)->channels = 1 + (c[0] >> 2 & 1);
  }
  char err[256];
  return pp_engine_cfg_check(cfg, err, sizeof err) == PP_OK;
}

static bool setup(struct world *w, const struct pp_engine_cfg *cfg, const uint8_t *dec, size_t n)
{
  struct pp_nic_profile prof;
  pp_nic_profile_default(&prof);
  prof.max_qp = 16;
  prof.max_mr = 256;
  prof.max_srq = 4;
  prof.max_qp_wr = 1024;
  prof.cq_depth = 4096;
  struct pp_faults faults = {0};
  struct simnic_wire wr = {.ctx = w, .send = wire};
  if (simnic_fabric_create(2, &prof, &faults, 1, &wr, &w->f) != PP_OK)
    return false;
  for (uint32_t r = 0; r < 2; r++)
    w->nic[r] = simnic_fabric_nic(w->f, r);
  if (pp_byz_create_bytes(&simnic_ops, w->nic[1], dec, n, &w->byz) != PP_OK)
    return false;
  for (uint32_t r = 0; r < 2; r++) {
    struct pp_engine_cfg c = *cfg;
    c.rank = r;
    if (pp_engine_create(&c, r ? &pp_byz_ops : &simnic_ops, r ? (void *)w->byz : w->nic[0],
                         &w->e[r]) != PP_OK)
      return false;
  }
  for (uint32_t r = 0; r < 2; r++) {
    struct pp_conn_info info;
    if (!pp_engine_local_info(w->e[1 - r], r, &info) ||
        pp_engine_connect(w->e[r], 0, 1 - r, &info) != PP_OK)
      return false;
  }
  for (uint32_t r = 0; r < 2; r++) {
    simnic_set_now(w->nic[r], 0);
    note(w, r, pp_engine_start(w->e[r], 0));
    drain(w, r);
  }
  return true;
}

static void teardown(struct world *w)
{
  for (uint32_t r = 0; r < 2; r++)
    if (w->e[r])
      pp_engine_destroy(w->e[r]);
  pp_byz_destroy(w->byz);
  for (uint32_t i = 0; i < w->nev; i++)
    simnic_pkt_discard(w->f, w->ev[i].pkt);
  if (w->f)
    simnic_fabric_destroy(w->f);
}

void pp_fuzz_wire_run(const uint8_t *data, size_t size, struct pp_fuzz_wire_result *out)
{
  memset(out, 0, sizeof *out);
  out->received = -1;
  struct pp_engine_cfg cfg;
  if (size < PP_FUZZ_WIRE_CFG || !config(data, &cfg))
    return;
  struct world *w = calloc(1, sizeof *w);
  if (!w)
    abort();
  if (setup(w, &cfg, data + PP_FUZZ_WIRE_CFG, size - PP_FUZZ_WIRE_CFG)) {
    for (uint32_t s = 0; s < MAX_STEPS && !(pp_engine_done(w->e[0]) && pp_engine_done(w->e[1]));
         s++)
      if (!step(w))
        break;
    struct pp_rank_stats st;
    pp_engine_counts(w->e[0], &st);
    out->received = (int)st.messages_received;
    out->expected = cfg.workload.messages;
    struct pp_byz_counts bc;
    pp_byz_counts(w->byz, &bc);
    out->mutated = bc.wrs - bc.done[PP_BYZ_PASS] + bc.reads;
    out->decisions = pp_byz_consumed(w->byz);
    out->honest_error = w->honest_error;
  } else {
    abort(); /* a configuration that passed pp_engine_cfg_check must set up */
  }
  teardown(w);
  free(w);
}

int pp_fuzz_wire_one(const uint8_t *data, size_t size)
{
  struct pp_fuzz_wire_result r;
  pp_fuzz_wire_run(data, size, &r);
  return r.received;
}

#ifdef PP_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  pp_fuzz_wire_one(data, size);
  return 0;
}
#endif

#ifdef PP_FUZZ_WIRE_SEEDS
/* tests/fuzz/run wire --seeds DIR: writes the seed corpus: for each configuration, the input of
 * an honest run as it was recorded, one "pass" decision per work request rank 1 posted and per
 * READ response it served. */
#include <stdio.h>

int main(int argc, char **argv)
{
  static const struct {
    const char *name;
    uint8_t cfg[PP_FUZZ_WIRE_CFG];
  } seeds[] = {
      {"eager-16", {0, 0, 3, 0}},        {"eager-3000", {0, 2, 3, 1}},
      {"eager-2ch", {4, 1, 5, 2}},       {"eager-rget-9000", {0, 3, 2, 0}},
      {"eager-rput-40000", {0, 4, 1, 0}}, {"eager-rput-100000", {4, 5, 1, 3}},
      {"rndv-200", {1, 1, 3, 0}},        {"rndv-rput-40000", {1, 4, 2, 0}},
      {"ring-credits-200", {2, 1, 4, 0}}, {"ring-credits-9000", {6, 3, 2, 8}},
      {"ring-cts-200", {3, 1, 4, 0}},    {"ring-cts-9000", {7, 3, 2, 16}},
  };
  if (argc != 2)
    return 2;
  for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
    struct pp_fuzz_wire_result r;
    pp_fuzz_wire_run(seeds[i].cfg, PP_FUZZ_WIRE_CFG, &r);
    if (r.received < 0 || (uint64_t)r.received != r.expected || r.honest_error) {
      fprintf(stderr, "%s: the honest run delivered %d of %llu (error %d)\n", seeds[i].name,
              r.received, (unsigned long long)r.expected, r.honest_error);
      return 1;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/%s", argv[1], seeds[i].name);
    FILE *f = fopen(path, "wb");
    if (!f)
      return 1;
    fwrite(seeds[i].cfg, 1, PP_FUZZ_WIRE_CFG, f);
    for (size_t k = 0; k < r.decisions; k++)
      fputc(0, f);
    if (fclose(f))
      return 1;
    printf("%s: %zu decisions, %d messages\n", seeds[i].name, r.decisions, r.received);
  }
  return 0;
}
#endif
