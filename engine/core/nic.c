#include "prepost/nic.h"
#include "prepost/names.h"

#include <string.h>

int pp_nic_ops_complete(const struct pp_nic_ops *ops)
{
  return ops && ops->name && ops->reg_mr && ops->dereg_mr && ops->create_srq && ops->modify_srq &&
         ops->destroy_srq && ops->create_qp && ops->modify_qp && ops->destroy_qp &&
         ops->post_send && ops->post_recv && ops->post_srq_recv && ops->query_counters;
}

static const char *const wc_status_names[PP_WC_STATUS_COUNT] = {
#define PP_X(name, value) [value] = #name,
    PP_WC_STATUS_LIST(PP_X)
#undef PP_X
};

const char *pp_wc_status_name(enum pp_wc_status s)
{
  return pp_name_of(wc_status_names, PP_WC_STATUS_COUNT, s);
}

int pp_wc_status_from_name(const char *name)
{
  return pp_name_index(wc_status_names, PP_WC_STATUS_COUNT, name);
}

const char *pp_wc_opcode_name(enum pp_wc_opcode op)
{
  switch (op) {
#define PP_X(name, value)                                                      \
  case PP_WC_OP_##name:                                                        \
    return #name;
    PP_WC_OPCODE_LIST(PP_X)
#undef PP_X
  }
  return "?";
}

const char *pp_wr_opcode_name(enum pp_wr_opcode op)
{
  switch (op) {
#define PP_X(name, value)                                                      \
  case PP_WR_##name:                                                           \
    return #name;
    PP_WR_OPCODE_LIST(PP_X)
#undef PP_X
  }
  return "?";
}

const char *pp_qp_state_name(enum pp_qp_state s)
{
  switch (s) {
#define PP_X(name, value)                                                      \
  case PP_QPS_##name:                                                          \
    return #name;
    PP_QP_STATE_LIST(PP_X)
#undef PP_X
  }
  return "?";
}

const char *pp_event_name(enum pp_event_type t)
{
  switch (t) {
#define PP_X(name, value)                                                      \
  case PP_EVENT_##name:                                                        \
    return #name;
    PP_EVENT_LIST(PP_X)
#undef PP_X
  }
  return "?";
}

/* IB spec table 45 (min RNR NAK timer field), in microseconds * 100 to stay integral. */
static const uint32_t rnr_timer_10ns[32] = {
    65536000, 1000,    2000,    3000,    4000,    6000,     8000,     12000,
    16000,    24000,   32000,   48000,   64000,   96000,    128000,   192000,
    256000,   384000,  512000,  768000,  1024000, 1536000,  2048000,  3072000,
    4096000,  6144000, 8192000, 12288000, 16384000, 24576000, 32768000, 49152000,
};

uint64_t pp_rnr_timer_ns(unsigned code)
{
  return (uint64_t)rnr_timer_10ns[code & 31] * 10;
}

uint64_t pp_ack_timeout_ns(unsigned timeout)
{
  timeout &= 31;
  if (timeout == 0)
    return 0;
  return 4096ull << timeout;
}

uint32_t pp_mtu_bytes(enum pp_mtu mtu)
{
  if (mtu < PP_MTU_256 || mtu > PP_MTU_4096)
    return 0;
  return 256u << (mtu - 1);
}

enum pp_mtu pp_mtu_from_bytes(uint32_t bytes)
{
  for (int m = PP_MTU_256; m <= PP_MTU_4096; m++)
    if (pp_mtu_bytes((enum pp_mtu)m) == bytes)
      return (enum pp_mtu)m;
  return (enum pp_mtu)0;
}

int pp_wr_consumes_recv(enum pp_wr_opcode op)
{
  return op == PP_WR_SEND || op == PP_WR_SEND_WITH_IMM || op == PP_WR_RDMA_WRITE_WITH_IMM;
}

int pp_qp_transition_ok(enum pp_qp_state from, enum pp_qp_state to)
{
  if (to == PP_QPS_RESET || to == PP_QPS_ERR)
    return 1; /* any state may be reset or moved to ERROR */
  switch (from) {
  case PP_QPS_RESET:
    return to == PP_QPS_INIT;
  case PP_QPS_INIT:
    return to == PP_QPS_INIT || to == PP_QPS_RTR;
  case PP_QPS_RTR:
    return to == PP_QPS_RTS;
  case PP_QPS_RTS:
    return to == PP_QPS_RTS;
  default:
    return 0;
  }
}
