#include "counters.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* One term of a counter: + or - a raw file's delta; an optional term that is absent counts 0. */
struct term {
  int8_t raw; /* index into the driver's raw list; -1 ends the list */
  int8_t sign;
  bool optional;
};

#define MAX_TERMS 3

struct vnic_driver {
  const char *name;
  const char *signature; /* a file only this driver has */
  const char *raw[VNIC_RAW_MAX];
  struct term rule[PP_NIC_COUNTER_COUNT][MAX_TERMS]; /* no term: the driver does not count it */
};

#define T(i) {(i), 1, false}
#define MINUS(i) {(i), -1, false}
#define OPT(i) {(i), 1, true}
#define END {-1, 0, false}
#define NONE {END}

/* The table (backends/verbs/README.md shows it). rxe: rxe_hw_counters.c; mlx5: the q-counters of
 * mlx5/counters.c (their meaning: NVIDIA's "Understanding mlx5 Linux counters"). */
static const struct vnic_driver drivers[] = {
    {.name = "rxe",
     .signature = "hw_counters/rcvd_rnr_err",
     .raw = {"hw_counters/rcvd_rnr_err", "hw_counters/send_rnr_err",
             "hw_counters/retry_rnr_exceeded_err", "hw_counters/completer_retry_err",
             "hw_counters/sent_pkts", "hw_counters/rcvd_pkts", "hw_counters/retry_exceeded_err",
             "hw_counters/rcvd_seq_err", "hw_counters/out_of_seq_request",
             "hw_counters/duplicate_request"},
     .rule = {[PP_NIC_CNT_rnr_naks_sent] = {T(1), END},
              [PP_NIC_CNT_rnr_naks_received] = {T(0), END},
              /* every RNR NAK that did not exhaust the budget was retried */
              [PP_NIC_CNT_rnr_retries] = {T(0), MINUS(2), END},
              /* rxe's completer retries: after an ACK timeout or a sequence-error NAK */
              [PP_NIC_CNT_timeout_retries] = {T(3), END},
              [PP_NIC_CNT_packets_sent] = {T(4), END},
              [PP_NIC_CNT_packets_dropped] = NONE,
              [PP_NIC_CNT_acks_sent] = NONE}},
    {.name = "mlx5",
     .signature = "hw_counters/out_of_buffer",
     .raw = {"hw_counters/out_of_buffer", "hw_counters/rnr_nak_retry_err",
             "hw_counters/req_rnr_retries_exceeded", "hw_counters/local_ack_timeout_err",
             "hw_counters/packet_seq_err", "hw_counters/out_of_sequence",
             "hw_counters/duplicate_request", "hw_counters/implied_nak_seq_err",
             "hw_counters/req_transport_retries_exceeded", "counters/port_xmit_packets",
             "counters/port_rcv_packets", "hw_counters/rx_write_requests",
             "hw_counters/rx_read_requests"},
     /* out_of_buffer: packets dropped for want of a receive WQE, which an RC responder answers
      * with an RNR NAK (it also counts UD drops); rnr_nak_retry_err: RNR NAKs received within
      * the retry budget; req_rnr_retries_exceeded (extended counters, not on every device): the
      * one that exhausted it */
     .rule = {[PP_NIC_CNT_rnr_naks_sent] = {T(0), END},
              [PP_NIC_CNT_rnr_naks_received] = {T(1), OPT(2), END},
              [PP_NIC_CNT_rnr_retries] = {T(1), END},
              [PP_NIC_CNT_timeout_retries] = {T(3), END},
              [PP_NIC_CNT_packets_sent] = {T(9), END},
              [PP_NIC_CNT_packets_dropped] = NONE,
              [PP_NIC_CNT_acks_sent] = NONE}},
};

static void port_path(char *out, size_t len, const char *root, const char *dev, int port,
                      const char *file)
{
  snprintf(out, len, "%s/%s/ports/%d/%s", root, dev, port, file);
}

/* 1 and *v when the file holds a number, else 0. */
static int read_u64(const char *path, uint64_t *v)
{
  FILE *f = fopen(path, "r");
  if (!f)
    return 0;
  int ok = fscanf(f, "%" SCNu64, v) == 1;
  fclose(f);
  return ok;
}

const struct vnic_driver *vnic_driver_of(const char *root, const char *dev, int port)
{
  char path[512];
  uint64_t v;
  for (size_t i = 0; i < sizeof(drivers) / sizeof(drivers[0]); i++) {
    port_path(path, sizeof(path), root, dev, port, drivers[i].signature);
    if (read_u64(path, &v))
      return &drivers[i];
  }
  return NULL;
}

const char *vnic_driver_name(const struct vnic_driver *d)
{
  return d ? d->name : "unknown";
}

unsigned vnic_driver_nraw(const struct vnic_driver *d)
{
  unsigned n = 0;
  while (d && n < VNIC_RAW_MAX && d->raw[n])
    n++;
  return n;
}

const char *vnic_driver_raw(const struct vnic_driver *d, unsigned i)
{
  return i < vnic_driver_nraw(d) ? d->raw[i] : NULL;
}

void vnic_raw_read(const char *root, const char *dev, int port, const struct vnic_driver *d,
                   struct vnic_raw *out)
{
  *out = (struct vnic_raw){0};
  char path[512];
  for (unsigned i = 0; i < vnic_driver_nraw(d); i++) {
    port_path(path, sizeof(path), root, dev, port, d->raw[i]);
    out->have[i] = read_u64(path, &out->v[i]) != 0;
  }
}

/* One counter by its rule: false when a required file is absent (or the rule is empty). */
static bool apply(const struct term *t, const struct vnic_raw *now, const struct vnic_raw *mark,
                  uint64_t *out)
{
  int64_t sum = 0;
  bool any = false;
  for (int k = 0; k < MAX_TERMS && t[k].raw >= 0 && t[k].sign; k++) {
    unsigned i = (unsigned)t[k].raw;
    if (!now->have[i] || !mark->have[i]) {
      if (t[k].optional)
        continue;
      return false;
    }
    uint64_t d = now->v[i] >= mark->v[i] ? now->v[i] - mark->v[i] : 0;
    sum += t[k].sign * (int64_t)d;
    any = true;
  }
  *out = sum > 0 ? (uint64_t)sum : 0;
  return any;
}

void vnic_counters_map(const struct vnic_driver *d, const struct vnic_raw *now,
                       const struct vnic_raw *mark, struct pp_nic_counters *out)
{
  uint64_t v[PP_NIC_COUNTER_COUNT] = {0};
  uint32_t missing = 0;
  for (int k = 0; k < PP_NIC_COUNTER_COUNT; k++)
    if (!d || !apply(d->rule[k], now, mark, &v[k]))
      missing |= 1u << k;
  *out = (struct pp_nic_counters){.missing = missing};
#define PP_X(f, desc) out->f = v[PP_NIC_CNT_##f];
  PP_NIC_COUNTER_LIST(PP_X)
#undef PP_X
}
