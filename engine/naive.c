/*
 * The naive protocol of the seed article (section 5.1): the sender posts SENDs as fast as its
 * application submits them, with no regard for the receiver; the receiver re-posts each buffer
 * when its application is done with it (after consume_ns on a slow rank). Nothing prevents RNR:
 * that is the point. It is the positive control for the flow-controlled protocols.
 */
#include <assert.h>
#include <string.h>

#include "engine_impl.h"

static uint64_t pattern_word(uint32_t src, uint64_t seq, uint64_t i)
{
  uint64_t x = (seq + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(src + 1) * 0xc2b2ae3d27d4eb4full;
  x ^= i * 0x165667b19e3779f9ull;
  return x ^ (x >> 29);
}

static uint32_t header_check(uint32_t src, uint64_t seq)
{
  return (uint32_t)(pattern_word(src, seq, UINT64_MAX) >> 32);
}

void pp_msg_fill(uint8_t *buf, uint32_t size, uint32_t src, uint64_t seq)
{
  uint32_t check = header_check(src, seq);
  memcpy(buf, &seq, 8);
  memcpy(buf + 8, &src, 4);
  memcpy(buf + 12, &check, 4);
  uint32_t i = PP_MSG_HEADER;
  for (; i + 8 <= size; i += 8) {
    uint64_t w = pattern_word(src, seq, i);
    memcpy(buf + i, &w, 8);
  }
  if (i < size) {
    uint64_t w = pattern_word(src, seq, i);
    memcpy(buf + i, &w, size - i);
  }
}

int pp_msg_check(const uint8_t *buf, uint32_t size, uint32_t src, uint64_t seq)
{
  uint64_t hseq;
  uint32_t hsrc, hcheck;
  if (size < PP_MSG_HEADER)
    return -1;
  memcpy(&hseq, buf, 8);
  memcpy(&hsrc, buf + 8, 4);
  memcpy(&hcheck, buf + 12, 4);
  if (hseq != seq || hsrc != src || hcheck != header_check(src, seq))
    return -1;
  uint32_t i = PP_MSG_HEADER;
  for (; i + 8 <= size; i += 8) {
    uint64_t w = pattern_word(src, seq, i);
    if (memcmp(buf + i, &w, 8) != 0)
      return -1;
  }
  if (i < size) {
    uint64_t w = pattern_word(src, seq, i);
    if (memcmp(buf + i, &w, size - i) != 0)
      return -1;
  }
  return 0;
}

static uint64_t submit_time(const struct pp_engine *e, uint64_t seq)
{
  return e->start_ns + seq * e->cfg.workload.interval_ns;
}

/* Posts submitted messages while send slots are free. */
static enum pp_status pump(struct pp_engine *e)
{
  struct pp_conn *c = &e->conns[e->dest];
  uint32_t size = e->cfg.workload.size;
  while (!c->failed && e->posted < e->submitted && c->nsfree > 0) {
    uint32_t slot = c->sfree[--c->nsfree];
    uint8_t *buf = c->sbuf + (size_t)slot * size;
    uint64_t seq = e->posted;
    pp_msg_fill(buf, size, e->cfg.rank, seq);
    c->slot_seq[slot] = seq;
    struct pp_send_wr wr = {
        .wr_id = pp_wr_id((uint32_t)e->dest, PP_WRK_SEND, slot),
        .opcode = PP_WR_SEND,
        .send_flags = PP_SEND_SIGNALED,
        .num_sge = 1,
        .sg_list = {{.addr = (uint64_t)(uintptr_t)buf, .length = size, .lkey = c->smr.lkey}},
    };
    enum pp_status s = (enum pp_status)e->ops->post_send(e->nic, c->qp_num, &wr);
    if (s != PP_OK) {
      c->sfree[c->nsfree++] = slot;
      /* A full NIC send queue while sends are outstanding is not an error: the message stays
       * submitted and the next send completion posts it. */
      if (s == PP_AGAIN && e->posted > e->completed)
        return PP_OK;
      return s;
    }
    e->posted++;
  }
  return PP_OK;
}

enum pp_status pp_naive_start(struct pp_engine *e, uint64_t now)
{
  if (e->dest < 0)
    return PP_OK;
  const struct pp_workload *w = &e->cfg.workload;
  if (w->interval_ns == 0) {
    e->submitted = w->messages;
  } else {
    e->submitted = 1;
    if (w->messages > 1) {
      enum pp_status s = pp_engine_push_timer(e, submit_time(e, 1), PP_TIMER_SUBMIT, 0);
      if (s != PP_OK)
        return s;
    }
  }
  (void)now;
  return pump(e);
}

static enum pp_status on_send_wc(struct pp_engine *e, uint64_t now, const struct pp_wc *wc)
{
  uint32_t ci = pp_wr_id_conn(wc->wr_id);
  struct pp_conn *c = &e->conns[ci];
  uint32_t slot = pp_wr_id_slot(wc->wr_id);
  if ((int)ci != e->dest || slot >= e->cfg.qp.sq_depth)
    return PP_INVALID;
  assert(c->nsfree < e->cfg.qp.sq_depth);
  c->sfree[c->nsfree++] = slot;
  e->completed++;
  if (wc->status == PP_WC_SUCCESS) {
    e->st.messages_sent++;
    e->st.bytes_sent += e->cfg.workload.size;
    if (e->nlat < e->cfg.workload.messages)
      e->lat[e->nlat++] = now - submit_time(e, c->slot_seq[slot]);
  } else {
    c->failed = true;
  }
  return pump(e);
}

static enum pp_status on_recv_wc(struct pp_engine *e, uint64_t now, const struct pp_wc *wc)
{
  uint32_t ci = pp_wr_id_conn(wc->wr_id);
  struct pp_conn *c = &e->conns[ci];
  uint32_t slot = pp_wr_id_slot(wc->wr_id);
  uint32_t size = e->cfg.workload.size;
  if ((int)ci != e->source || slot >= e->cfg.qp.rq_depth)
    return PP_INVALID;
  if (wc->status != PP_WC_SUCCESS) {
    c->recv_failed++;
    c->failed = true;
    return PP_OK;
  }
  const uint8_t *buf = c->rbuf + (size_t)slot * size;
  if (wc->byte_len == size && pp_msg_check(buf, size, c->peer, c->expected_seq) == 0) {
    e->st.messages_received++;
    e->st.bytes_received += size;
  } else {
    e->st.corrupt++;
  }
  c->expected_seq++;
  c->received++;
  if (c->received >= e->cfg.workload.messages)
    return PP_OK; /* every expected message arrived: nothing more to post for */
  if (e->slow)
    return pp_engine_push_timer(e, now + e->cfg.workload.consume_ns, PP_TIMER_REPOST,
                                ci << 16 | slot);
  return pp_engine_post_recv(e, ci, slot);
}

enum pp_status pp_naive_on_wc(struct pp_engine *e, uint64_t now, const struct pp_wc *wc)
{
  switch (pp_wr_id_kind(wc->wr_id)) {
  case PP_WRK_SEND:
    return on_send_wc(e, now, wc);
  case PP_WRK_RECV:
    return on_recv_wc(e, now, wc);
  }
  return PP_INVALID;
}

enum pp_status pp_naive_on_timer(struct pp_engine *e, uint64_t now, const struct pp_timer *t)
{
  switch ((enum pp_timer_kind)t->kind) {
  case PP_TIMER_SUBMIT: {
    struct pp_conn *c = &e->conns[e->dest];
    if (c->failed)
      return PP_OK;
    e->submitted++;
    if (e->submitted < e->cfg.workload.messages) {
      enum pp_status s =
          pp_engine_push_timer(e, submit_time(e, e->submitted), PP_TIMER_SUBMIT, 0);
      if (s != PP_OK)
        return s;
    }
    return pump(e);
  }
  case PP_TIMER_REPOST: {
    uint32_t ci = t->arg >> 16, slot = t->arg & 0xffff;
    if (e->conns[ci].failed)
      return PP_OK;
    return pp_engine_post_recv(e, ci, slot);
  }
  }
  (void)now;
  return PP_INVALID;
}

bool pp_naive_done(const struct pp_engine *e)
{
  if (e->dest >= 0) {
    const struct pp_conn *c = &e->conns[e->dest];
    if (e->posted != e->completed)
      return false;
    if (!c->failed && e->completed < e->cfg.workload.messages)
      return false;
  }
  if (e->source >= 0) {
    const struct pp_conn *c = &e->conns[e->source];
    if (!c->failed && c->received < e->cfg.workload.messages)
      return false;
  }
  return true;
}
