/* p2p: the parameters with their defaults and checks, and the names of protocols and errors. */
#include "p2p_impl.h"

#include <stdio.h>
#include <string.h>

static const char *const proto_names[] = {
#define PP_X(id, name) [PP_P2P_##id] = name,
    PP_P2P_PROTO_LIST(PP_X)
#undef PP_X
};

static const char *const err_names[] = {
#define PP_X(id, name, desc) [PP_P2P_E_##id] = name,
    PP_P2P_ERR_LIST(PP_X)
#undef PP_X
};

const char *pp_p2p_proto_name(enum pp_p2p_proto p)
{
  return (unsigned)p < PP_P2P_PROTO_COUNT ? proto_names[p] : "?";
}

const char *pp_p2p_err_name(enum pp_p2p_err e)
{
  return (unsigned)e < PP_P2P_ERR_COUNT ? err_names[e] : "?";
}

/* Little-endian 64-bit word at b (any alignment), the same on every host. */
static uint64_t load_le64(const uint8_t *b)
{
  uint64_t w;
  memcpy(&w, b, sizeof(w));
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  w = __builtin_bswap64(w);
#endif
  return w;
}

static uint64_t cs_round(uint64_t h, uint64_t w)
{
  h = (h ^ w) * 0x9e3779b97f4a7c15ull; /* 2^64 / golden ratio, odd */
  return h << 31 | h >> 33;
}

/* Four independent lanes over 32-byte blocks, the tail's bytes folded into one last word with
 * the length, then a final avalanche (the murmur3 64-bit finaliser's constants). About 0.6
 * instructions per byte, a tenth of byte-wise FNV-1a, which made the record of a 4 KiB receive
 * the largest single cost of a simulated message. */
uint64_t pp_p2p_checksum(const void *buf, size_t len)
{
  const uint8_t *b = buf;
  uint64_t h0 = 0x243f6a8885a308d3ull, h1 = 0x13198a2e03707344ull, h2 = 0xa4093822299f31d0ull,
           h3 = 0x082efa98ec4e6c89ull; /* digits of pi */
  size_t i = 0;
  for (; i + 32 <= len; i += 32) {
    h0 = cs_round(h0, load_le64(b + i));
    h1 = cs_round(h1, load_le64(b + i + 8));
    h2 = cs_round(h2, load_le64(b + i + 16));
    h3 = cs_round(h3, load_le64(b + i + 24));
  }
  for (; i + 8 <= len; i += 8)
    h0 = cs_round(h0, load_le64(b + i));
  uint64_t t = (uint64_t)(len & 0xff) << 56; /* the tail has at most 7 bytes */
  for (size_t j = 0; i + j < len; j++)
    t ^= (uint64_t)b[i + j] << (8 * j);
  h1 = cs_round(h1, t);
  uint64_t x = h0 ^ (h1 << 17 | h1 >> 47) ^ (h2 << 29 | h2 >> 35) ^ (h3 << 43 | h3 >> 21) ^
               (uint64_t)len;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

/* ------------------------------------------------------------------ configuration */

static uint32_t def(uint32_t v, uint32_t d)
{
  return v ? v : d;
}

_Static_assert(sizeof(struct pp_p2p_params) <= PP_PROTO_PARAMS_MAX, "fits pp_engine_cfg.proto_params");

void pp_p2p_params_default(struct pp_p2p_params *p)
{
  *p = (struct pp_p2p_params){.eager_limit = 12u << 10, .rget_limit = 1u << 20, .record = 4096};
}

void pp_p2p_params_resolve(const struct pp_engine_cfg *c, struct pp_p2p_params *o)
{
  *o = *pp_p2p_params_of(c);
  if (c->protocol == PP_PROTO_RNDV)
    o->eager_limit = 0;
  o->frag_size = def(o->frag_size, 512u << 10);
  o->pipeline = def(o->pipeline, 4);
  o->channels = def(o->channels, 1);
  o->credits = def(o->credits, c->qp.rq_depth);
  o->credit_threshold = def(o->credit_threshold, (o->credits + 1) / 2);
  o->reply_slots = def(o->reply_slots, o->pipeline > 8 ? o->pipeline : 8);
  o->send_buffers = def(o->send_buffers, 64);
  uint32_t reqs = 2 * (c->qp.sq_depth + c->qp.rq_depth);
  o->max_requests = def(o->max_requests, reqs > 1024 ? reqs : 1024);
  o->rcache_entries = def(o->rcache_entries, 256);
  if (!o->rcache_bytes)
    o->rcache_bytes = 1ull << 30;
  o->srq_buffers = def(o->srq_buffers, 256);
  o->srq_limit = def(o->srq_limit, o->srq_buffers / 16 ? o->srq_buffers / 16 : 1);
}

int pp_p2p_proto(int protocol)
{
  return p2p_proto_ok(protocol);
}

int pp_p2p_app(int kind)
{
  return kind == PP_WORKLOAD_SCRIPT || kind == PP_WORKLOAD_TRAFFIC || kind == PP_WORKLOAD_APP;
}

int pp_script_cfg_check(const struct pp_engine_cfg *c, char *err, size_t errlen);
int pp_traffic_cfg_check(const struct pp_engine_cfg *c, char *err, size_t errlen);

int pp_p2p_cfg_check(const struct pp_engine_cfg *c, char *err, size_t errlen)
{
  const struct pp_workload *w = &c->workload;
  CHECK(!pp_p2p_app(w->kind) || pp_p2p_proto(c->protocol),
        "workload '%s' needs protocol eager or rndv, got '%s'", pp_workload_name(w->kind),
        pp_protocol_name(c->protocol));
  CHECK(w->pattern != PP_PATTERN_ALLTOALL || w->kind == PP_WORKLOAD_TRAFFIC,
        "pattern 'alltoall' is only for workload 'traffic'");
  if (pp_p2p_proto(c->protocol)) {
    struct pp_p2p_params p;
    pp_p2p_params_resolve(c, &p);
    CHECK(p.eager_limit <= PP_P2P_MAX_EAGER, "eager_limit must be at most %u bytes, got %u",
          PP_P2P_MAX_EAGER, p.eager_limit);
    CHECK(p.frag_size >= 4096, "frag_size must be at least 4096 bytes, got %u", p.frag_size);
    CHECK(p.pipeline <= PIPE_MAX, "pipeline must be 1..%u, got %u", PIPE_MAX, p.pipeline);
    CHECK(p.channels <= PP_P2P_MAX_CHANNELS, "channels must be 1..%u, got %u",
          PP_P2P_MAX_CHANNELS, p.channels);
    CHECK(p.credits <= PP_P2P_MAX_CREDITS, "credits must be 1..%u, got %u", PP_P2P_MAX_CREDITS,
          p.credits);
    CHECK(p.credit_threshold <= p.credits, "credit_threshold must be 1..credits (%u), got %u",
          p.credits, p.credit_threshold);
    CHECK(p.reply_slots <= PP_P2P_MAX_CREDITS, "reply_slots must be 1..%u, got %u",
          PP_P2P_MAX_CREDITS, p.reply_slots);
    CHECK(p.send_buffers <= 65536, "send_buffers must be 1..65536, got %u", p.send_buffers);
    CHECK(p.max_requests <= PP_P2P_MAX_REQUESTS, "max_requests must be 1..%u, got %u",
          PP_P2P_MAX_REQUESTS, p.max_requests);
    CHECK(p.rcache_entries <= 65536, "rcache_entries must be 1..65536, got %u",
          p.rcache_entries);
    CHECK(p.rcache_bytes >= (uint64_t)p.frag_size + 2 * PP_RCACHE_PAGE &&
              p.rcache_bytes >= (uint64_t)p.rget_limit + 2 * PP_RCACHE_PAGE,
          "rcache_bytes must hold a fragment and an RGET message (%llu), got %llu",
          (unsigned long long)(p.frag_size > p.rget_limit ? p.frag_size : p.rget_limit) +
              2 * PP_RCACHE_PAGE,
          (unsigned long long)p.rcache_bytes);
    CHECK(p.record <= PP_P2P_MAX_RECORD, "record must be at most %u, got %u", PP_P2P_MAX_RECORD,
          p.record);
    CHECK(!p.srq || p.channels == 1, "srq lends credits per channel: channels must be 1, got %u",
          p.channels);
    CHECK(p.srq_buffers <= PP_P2P_MAX_SRQ, "srq_buffers must be 2..%u, got %u", PP_P2P_MAX_SRQ,
          p.srq_buffers);
    /* credits + reply_slots + credit messages <= 3 * 4096 receive buffers per QP */
  }
  if (w->kind == PP_WORKLOAD_SCRIPT)
    return pp_script_cfg_check(c, err, errlen);
  if (w->kind == PP_WORKLOAD_TRAFFIC)
    return pp_traffic_cfg_check(c, err, errlen);
  CHECK(w->kind != PP_WORKLOAD_APP || c->nranks - 1 <= PP_MAX_PEERS,
        "workload 'app' connects every pair of ranks: at most %u ranks, got %u",
        PP_MAX_PEERS + 1, c->nranks);
  return PP_OK;
}

