/*
 * TCP bootstrap and control channel of the verbs driver; see boot.h for the protocol.
 */
#define _GNU_SOURCE /* accept4 */
#include "boot.h"
#include "errf.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

uint64_t boot_now_ns(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int ms_until(uint64_t deadline)
{
  uint64_t now = boot_now_ns();
  if (deadline <= now)
    return 0;
  uint64_t ms = (deadline - now + 999999) / 1000000;
  return ms > 100000 ? 100000 : (int)ms;
}

/* ---------------------------------------------------------------- buffers */

void boot_buf_free(struct boot_buf *b)
{
  free(b->p);
  *b = (struct boot_buf){0};
}

static bool grow(struct boot_buf *b, size_t n)
{
  if (b->bad)
    return false;
  if (b->len + n <= b->cap)
    return true;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + n)
    cap *= 2;
  uint8_t *p = realloc(b->p, cap);
  if (!p) {
    b->bad = true;
    return false;
  }
  b->p = p;
  b->cap = cap;
  return true;
}

void boot_put_bytes(struct boot_buf *b, const void *p, size_t n)
{
  if (!grow(b, n))
    return;
  if (n)
    memcpy(b->p + b->len, p, n);
  b->len += n;
}

void boot_put8(struct boot_buf *b, uint8_t v)
{
  boot_put_bytes(b, &v, 1);
}

void boot_put32(struct boot_buf *b, uint32_t v)
{
  uint8_t x[4];
  for (int i = 0; i < 4; i++)
    x[i] = (uint8_t)(v >> (8 * i));
  boot_put_bytes(b, x, 4);
}

void boot_put64(struct boot_buf *b, uint64_t v)
{
  boot_put32(b, (uint32_t)v);
  boot_put32(b, (uint32_t)(v >> 32));
}

void boot_get_bytes(struct boot_buf *b, void *p, size_t n)
{
  if (b->bad || b->at + n > b->len) {
    b->bad = true;
    memset(p, 0, n);
    return;
  }
  memcpy(p, b->p + b->at, n);
  b->at += n;
}

uint8_t boot_get8(struct boot_buf *b)
{
  uint8_t v;
  boot_get_bytes(b, &v, 1);
  return v;
}

uint32_t boot_get32(struct boot_buf *b)
{
  uint8_t x[4];
  boot_get_bytes(b, x, 4);
  return (uint32_t)x[0] | (uint32_t)x[1] << 8 | (uint32_t)x[2] << 16 | (uint32_t)x[3] << 24;
}

uint64_t boot_get64(struct boot_buf *b)
{
  uint64_t lo = boot_get32(b);
  return lo | (uint64_t)boot_get32(b) << 32;
}

void boot_put_conn_info(struct boot_buf *b, const struct pp_conn_info *ci)
{
  boot_put32(b, ci->nchannels);
  for (int i = 0; i < PP_MAX_CHANNELS; i++)
    boot_put32(b, ci->qp_num[i]);
  for (int i = 0; i < PP_MAX_CHANNELS; i++)
    boot_put32(b, ci->psn[i]);
  for (int i = 0; i < PP_MAX_REGIONS; i++) {
    boot_put64(b, ci->region[i].addr);
    boot_put32(b, ci->region[i].rkey);
    boot_put32(b, ci->region[i].len);
  }
}

void boot_get_conn_info(struct boot_buf *b, struct pp_conn_info *ci)
{
  *ci = (struct pp_conn_info){0};
  ci->nchannels = boot_get32(b);
  for (int i = 0; i < PP_MAX_CHANNELS; i++)
    ci->qp_num[i] = boot_get32(b);
  for (int i = 0; i < PP_MAX_CHANNELS; i++)
    ci->psn[i] = boot_get32(b);
  for (int i = 0; i < PP_MAX_REGIONS; i++) {
    ci->region[i].addr = boot_get64(b);
    ci->region[i].rkey = boot_get32(b);
    ci->region[i].len = boot_get32(b);
  }
}

_Static_assert(4 + 4 * PP_MAX_CHANNELS * 2 + 16 * PP_MAX_REGIONS == BOOT_CONN_INFO_BYTES,
               "pp_conn_info wire size");

void boot_put_addr(struct boot_buf *b, const struct vnic_addr *a)
{
  boot_put_bytes(b, a->gid, 16);
  boot_put8(b, (uint8_t)a->lid);
  boot_put8(b, (uint8_t)(a->lid >> 8));
  boot_put8(b, a->link_layer);
  boot_put8(b, a->port);
}

void boot_get_addr(struct boot_buf *b, struct vnic_addr *a)
{
  boot_get_bytes(b, a->gid, 16);
  uint16_t lo = boot_get8(b);
  a->lid = (uint16_t)(lo | boot_get8(b) << 8);
  a->link_layer = boot_get8(b);
  a->port = boot_get8(b);
}

/* Peer text shown to the user: every byte outside 0x20..0x7e becomes '?', in place. */
static void printable(char *s)
{
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
      *s = '?';
}

char *boot_sanitize(const void *p, size_t n, char *out, size_t outlen)
{
  const unsigned char *q = p;
  size_t at = 0;
  if (!outlen)
    return out;
  for (size_t i = 0; i < n; i++) {
    char x[5];
    int k = q[i] >= 0x20 && q[i] <= 0x7e ? snprintf(x, sizeof(x), "%c", q[i])
                                         : snprintf(x, sizeof(x), "\\x%02x", q[i]);
    if (at + (size_t)k + 4 > outlen) { /* room for "..." and the NUL */
      snprintf(out + at, outlen - at, "...");
      return out;
    }
    memcpy(out + at, x, (size_t)k);
    at += (size_t)k;
  }
  out[at] = '\0';
  return out;
}

/* pp_rank_stats travels as its bytes, with its size as a check: the per-protocol sections it grows
 * (ring, collective, ...) come along without a change here. Every rank runs the same build. */
static void put_stats(struct boot_buf *b, const struct pp_rank_stats *s)
{
  boot_put32(b, (uint32_t)sizeof(*s));
  boot_put_bytes(b, s, sizeof(*s));
}

static void get_stats(struct boot_buf *b, struct pp_rank_stats *s)
{
  memset(s, 0, sizeof(*s));
  if (boot_get32(b) != sizeof(*s)) {
    b->bad = true; /* a different prepost build */
    return;
  }
  boot_get_bytes(b, s, sizeof(*s));
}

/* A latency histogram (prepost/hist.h): 0, or 1, count, min, max, sum and the non-empty buckets
 * as (index, count), indexes increasing: at most PP_HIST_BUCKETS x 12 bytes whatever the run's
 * length. */
static void put_hist(struct boot_buf *b, const struct pp_hist *h)
{
  boot_put8(b, h != NULL);
  if (!h)
    return;
  uint32_t n = 0;
  for (uint32_t i = 0; i < PP_HIST_BUCKETS; i++)
    n += h->bucket[i] != 0;
  boot_put64(b, h->count);
  boot_put64(b, h->min);
  boot_put64(b, h->max);
  boot_put64(b, h->sum);
  boot_put32(b, n);
  for (uint32_t i = 0; i < PP_HIST_BUCKETS; i++)
    if (h->bucket[i]) {
      boot_put32(b, i);
      boot_put64(b, h->bucket[i]);
    }
}

/* *out: malloc'd, NULL when the rank sent none; b->bad on a malformed or inconsistent one. */
static void get_hist(struct boot_buf *b, struct pp_hist **out)
{
  *out = NULL;
  if (!boot_get8(b) || b->bad)
    return;
  struct pp_hist *h = malloc(sizeof(*h));
  if (!h) {
    b->bad = true;
    return;
  }
  pp_hist_reset(h);
  h->count = boot_get64(b);
  h->min = boot_get64(b);
  h->max = boot_get64(b);
  h->sum = boot_get64(b);
  uint32_t n = boot_get32(b);
  if (n > PP_HIST_BUCKETS)
    b->bad = true;
  for (uint32_t k = 0, last = 0; k < n && !b->bad; k++) {
    uint32_t i = boot_get32(b);
    uint64_t c = boot_get64(b);
    if (i >= PP_HIST_BUCKETS || (k && i <= last) || !c)
      b->bad = true;
    else
      h->bucket[i] = c;
    last = i;
  }
  if (b->bad || !pp_hist_valid(h)) {
    b->bad = true;
    free(h);
    return;
  }
  *out = h;
}

void boot_put_result(struct boot_buf *b, const struct pp_rank_result *r, const struct pp_hist *lat)
{
  put_stats(b, &r->stats);
  const struct pp_nic_counters *c = &r->nic;
  boot_put64(b, c->rnr_naks_sent);
  boot_put64(b, c->rnr_naks_received);
  boot_put64(b, c->rnr_retries);
  boot_put64(b, c->timeout_retries);
  boot_put64(b, c->packets_sent);
  boot_put64(b, c->packets_dropped);
  boot_put64(b, c->acks_sent);
  boot_put32(b, c->missing); /* what the device does not count (counters.h) */
  boot_put_bytes(b, r->host, sizeof(r->host));
  put_hist(b, lat);
  /* p2p protocols: their statistics and every completed receive (source, tag, size, status,
   * checksum, in completion order), as bytes with their sizes as a check, like the stats */
  boot_put32(b, (uint32_t)sizeof(r->p2p));
  boot_put_bytes(b, &r->p2p, sizeof(r->p2p));
  boot_put32(b, (uint32_t)sizeof(*r->receives));
  boot_put64(b, r->nreceives);
  if (r->nreceives)
    boot_put_bytes(b, r->receives, r->nreceives * sizeof(*r->receives));
  boot_put64(b, r->receives_dropped);
}

void boot_get_result(struct boot_buf *b, struct pp_rank_result *r, struct pp_hist **lat)
{
  get_stats(b, &r->stats);
  struct pp_nic_counters *c = &r->nic;
  c->rnr_naks_sent = boot_get64(b);
  c->rnr_naks_received = boot_get64(b);
  c->rnr_retries = boot_get64(b);
  c->timeout_retries = boot_get64(b);
  c->packets_sent = boot_get64(b);
  c->packets_dropped = boot_get64(b);
  c->acks_sent = boot_get64(b);
  c->missing = boot_get32(b);
  boot_get_bytes(b, r->host, sizeof(r->host));
  r->host[sizeof(r->host) - 1] = '\0';
  printable(r->host);
  get_hist(b, lat);
  if (b->bad)
    return;
  r->receives = NULL;
  r->nreceives = 0;
  if (boot_get32(b) != sizeof(r->p2p)) {
    b->bad = true; /* a different prepost build */
    return;
  }
  boot_get_bytes(b, &r->p2p, sizeof(r->p2p));
  uint32_t rs = boot_get32(b);
  uint64_t nr = boot_get64(b);
  if (b->bad || rs != sizeof(*r->receives) || nr > (b->len - b->at) / rs) {
    b->bad = true;
    return;
  }
  if (nr) {
    if (!(r->receives = malloc(nr * sizeof(*r->receives)))) {
      b->bad = true;
      return;
    }
    boot_get_bytes(b, r->receives, nr * sizeof(*r->receives));
    r->nreceives = nr;
  }
  r->receives_dropped = boot_get64(b);
}

void boot_put_waits(struct boot_buf *b, const struct pp_wait *w, uint32_t n, uint32_t total)
{
  boot_put32(b, total);
  boot_put32(b, n);
  for (uint32_t i = 0; i < n; i++) {
    boot_put8(b, w[i].kind);
    boot_put32(b, w[i].peer);
    boot_put32(b, w[i].tag);
    boot_put64(b, w[i].since_ns);
    boot_put_bytes(b, w[i].what, PP_WAIT_TEXT);
  }
}

uint32_t boot_get_waits(struct boot_buf *b, struct pp_wait *w, uint32_t max, uint32_t *total)
{
  *total = boot_get32(b);
  uint32_t n = boot_get32(b), got = 0;
  for (uint32_t i = 0; i < n && !b->bad; i++) {
    struct pp_wait x = {0};
    x.kind = boot_get8(b);
    x.peer = boot_get32(b);
    x.tag = boot_get32(b);
    x.since_ns = boot_get64(b);
    boot_get_bytes(b, x.what, PP_WAIT_TEXT);
    x.what[PP_WAIT_TEXT - 1] = '\0';
    printable(x.what); /* shown in the hang report */
    if (x.kind >= PP_WAIT_KIND_COUNT)
      b->bad = true;
    if (!b->bad && got < max)
      w[got++] = x;
  }
  return b->bad ? 0 : got;
}

void boot_put_qps(struct boot_buf *b, const struct vnic_qp_state *q, uint32_t n, uint32_t total)
{
  boot_put32(b, total);
  boot_put32(b, n);
  for (uint32_t i = 0; i < n; i++) {
    boot_put32(b, q[i].qpn);
    boot_put32(b, q[i].peer);
    boot_put32(b, q[i].dest_qpn);
    boot_put32(b, q[i].state);
    boot_put32(b, q[i].sq_psn);
    boot_put32(b, q[i].rq_psn);
    boot_put32(b, q[i].sq_outstanding);
    boot_put32(b, q[i].sq_takes_recv);
    boot_put32(b, q[i].rq_posted);
    boot_put32(b, q[i].srq_num);
  }
}

uint32_t boot_get_qps(struct boot_buf *b, struct vnic_qp_state *q, uint32_t max)
{
  (void)boot_get32(b); /* total: the rest are not needed to pair QPs */
  uint32_t n = boot_get32(b), got = 0;
  for (uint32_t i = 0; i < n && !b->bad; i++) {
    struct vnic_qp_state x;
    x.qpn = boot_get32(b);
    x.peer = boot_get32(b);
    x.dest_qpn = boot_get32(b);
    x.state = boot_get32(b);
    x.sq_psn = boot_get32(b) & 0xffffffu;
    x.rq_psn = boot_get32(b) & 0xffffffu;
    x.sq_outstanding = boot_get32(b);
    x.sq_takes_recv = boot_get32(b);
    x.rq_posted = boot_get32(b);
    x.srq_num = boot_get32(b);
    if (!b->bad && got < max)
      q[got++] = x;
  }
  return b->bad ? 0 : got;
}

void boot_put_hello(struct boot_buf *b, uint32_t nranks, const struct vnic_addr *addr,
                    const char *host, const char *dev, const bool *has,
                    const struct pp_conn_info *info)
{
  char h[BOOT_HOST_MAX] = {0}, d[VNIC_NAME_MAX] = {0};
  snprintf(h, sizeof(h), "%s", host);
  snprintf(d, sizeof(d), "%s", dev);
  boot_put_addr(b, addr);
  boot_put_bytes(b, h, sizeof(h));
  boot_put_bytes(b, d, sizeof(d));
  for (uint32_t j = 0; j < nranks; j++) {
    boot_put8(b, has[j]);
    boot_put_conn_info(b, &info[j]);
  }
}

size_t boot_hello_bytes(uint32_t nranks)
{
  return BOOT_ADDR_BYTES + BOOT_HOST_MAX + VNIC_NAME_MAX +
         (size_t)nranks * (1 + BOOT_CONN_INFO_BYTES);
}

void boot_get_table(struct boot_buf *b, uint32_t nranks, struct vnic_addr *addr, bool *has,
                    struct pp_conn_info *info)
{
  for (uint32_t j = 0; j < nranks; j++)
    boot_get_addr(b, &addr[j]);
  for (uint32_t j = 0; j < nranks; j++) {
    has[j] = boot_get8(b) != 0;
    boot_get_conn_info(b, &info[j]);
  }
}

static uint64_t fnv(uint64_t h, uint64_t v)
{
  for (int i = 0; i < 8; i++) {
    h ^= (v >> (8 * i)) & 0xff;
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t boot_cfg_hash(const struct pp_engine_cfg *c)
{
  uint64_t h = 0xcbf29ce484222325ull;
  const struct pp_workload *w = &c->workload;
  const struct pp_qp_params *q = &c->qp;
  uint64_t v[] = {c->nranks,     (uint64_t)c->protocol, (uint64_t)w->kind, (uint64_t)w->pattern,
                  w->messages,   w->size,               w->interval_ns,    w->consume_ns,
                  w->consume_ranks, q->min_rnr_timer,   q->rnr_retry,      q->timeout,
                  q->retry_cnt,  q->max_rd_atomic,      q->mtu,            q->sq_depth,
                  q->rq_depth,   c->seed};
  for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
    h = fnv(h, v[i]);
  return h;
}

/* ---------------------------------------------------------------- sockets */

int boot_parse_hostport(const char *s, uint16_t defport, char *host, size_t hostlen,
                        uint16_t *port, char *err, size_t errlen)
{
  const char *colon = NULL;
  if (s[0] == '[') {
    const char *end = strchr(s, ']');
    if (!end) {
      errf(err, errlen, "'%s': missing ']'", s);
      return -1;
    }
    snprintf(host, hostlen, "%.*s", (int)(end - s - 1), s + 1);
    colon = end[1] == ':' ? end + 1 : NULL;
    if (end[1] && !colon) {
      errf(err, errlen, "'%s': expected ':PORT' after ']'", s);
      return -1;
    }
  } else {
    colon = strrchr(s, ':');
    if (colon && strchr(s, ':') != colon)
      colon = NULL; /* a bare IPv6 address */
    snprintf(host, hostlen, "%.*s", colon ? (int)(colon - s) : (int)strlen(s), s);
  }
  if (!host[0]) {
    errf(err, errlen, "'%s': empty host", s);
    return -1;
  }
  *port = defport;
  if (colon) {
    char *end;
    errno = 0;
    long p = strtol(colon + 1, &end, 10);
    if (errno || *end || end == colon + 1 || p < 0 || p > 65535) {
      errf(err, errlen, "'%s': the port must be 0..65535", s);
      return -1;
    }
    *port = (uint16_t)p;
  }
  return 0;
}

static int resolve(const char *host, uint16_t port, bool passive, struct addrinfo **res, char *err,
                   size_t errlen)
{
  char ps[8];
  snprintf(ps, sizeof(ps), "%u", port);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                           .ai_flags = passive ? AI_PASSIVE : 0};
  int rc = getaddrinfo(host, ps, &hints, res);
  if (rc) {
    errf(err, errlen, "cannot resolve '%s': %s", host, gai_strerror(rc));
    return -1;
  }
  return 0;
}

int boot_listen(const char *host, uint16_t *port, char *err, size_t errlen)
{
  struct addrinfo *ai;
  if (resolve(host, *port, true, &ai, err, errlen))
    return -1;
  int fd = -1, e = 0;
  for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      e = errno;
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) || listen(fd, 1024)) {
      e = errno;
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(ai);
  if (fd < 0) {
    const char *hint = e == EADDRINUSE       ? " (port busy: another run or program uses it; "
                                               "pick another with --port)"
                       : e == EADDRNOTAVAIL ? " (address not on this machine)"
                                            : "";
    errf(err, errlen, "cannot listen on %s:%u: %s%s", host, *port, strerror(e), hint);
    return -1;
  }
  struct sockaddr_storage ss;
  socklen_t sl = sizeof(ss);
  if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
    *port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                           : ((struct sockaddr_in *)&ss)->sin_port);
  return fd;
}

static void tune(int fd)
{
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* One non-blocking connect attempt bounded by the deadline: 0 connected, else an errno
 * (ETIMEDOUT when the deadline passed). */
static int try_connect(const struct addrinfo *a, uint64_t deadline, int *out)
{
  int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
  if (fd < 0)
    return errno;
  int rc = connect(fd, a->ai_addr, a->ai_addrlen);
  int e = rc == 0 ? 0 : errno;
  if (e == EINPROGRESS) {
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int k;
    do
      k = poll(&p, 1, ms_until(deadline));
    while (k < 0 && errno == EINTR);
    if (k == 0) {
      e = ETIMEDOUT;
    } else {
      socklen_t sl = sizeof(e);
      if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &sl))
        e = errno;
    }
  }
  if (e) {
    close(fd);
    return e;
  }
  int fl = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  tune(fd);
  *out = fd;
  return 0;
}

int boot_connect(const char *host, uint16_t port, uint64_t deadline, char *err, size_t errlen)
{
  struct addrinfo *ai;
  if (resolve(host, port, false, &ai, err, errlen))
    return -1;
  uint64_t t0 = boot_now_ns();
  int e = 0, fd = -1;
  for (;;) {
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next)
      e = try_connect(a, deadline, &fd);
    if (fd >= 0 || boot_now_ns() >= deadline)
      break;
    if (e != ECONNREFUSED && e != ETIMEDOUT && e != EAGAIN && e != ECONNRESET)
      break; /* unreachable network, no route...: retrying will not help */
    struct timespec ts = {0, 100 * 1000000};
    nanosleep(&ts, NULL);
  }
  freeaddrinfo(ai);
  if (fd >= 0)
    return fd;
  double s = (boot_now_ns() - t0) / 1e9;
  errf(err, errlen, "cannot reach the coordinator (rank 0) at %s:%u after %.1f s: %s%s", host,
       port, s, strerror(e),
       e == ECONNREFUSED ? " (nobody listens there: is rank 0 running, on that address and port?)"
       : e == ETIMEDOUT  ? " (no answer: wrong address, or a firewall)"
                         : "");
  return -1;
}

static int write_all(int fd, const uint8_t *p, size_t n, uint64_t deadline)
{
  while (n) {
    struct pollfd pf = {.fd = fd, .events = POLLOUT};
    int k = poll(&pf, 1, ms_until(deadline));
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return -1;
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (w <= 0)
      return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* ----- frames: [type u32][len u32][payload], then (keyed) the tag */

static void put_header(uint8_t h[8], uint32_t type, uint32_t len)
{
  for (int i = 0; i < 4; i++) {
    h[i] = (uint8_t)(type >> (8 * i));
    h[4 + i] = (uint8_t)(len >> (8 * i));
  }
}

static uint32_t le32(const uint8_t *p)
{
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* HMAC-SHA-512-256 over (seq, header, payload) under key. */
static void frame_tag(const uint8_t *key, uint64_t seq, const uint8_t h[8], const uint8_t *p,
                      size_t n, uint8_t tag[BOOT_TAG_BYTES])
{
  uint8_t s8[8];
  for (int i = 0; i < 8; i++)
    s8[i] = (uint8_t)(seq >> (8 * i));
  crypto_auth_hmacsha512256_state st;
  int rc = crypto_auth_hmacsha512256_init(&st, key, BOOT_SECRET_BYTES);
  rc |= crypto_auth_hmacsha512256_update(&st, s8, 8);
  rc |= crypto_auth_hmacsha512256_update(&st, h, 8);
  if (n)
    rc |= crypto_auth_hmacsha512256_update(&st, p, n);
  rc |= crypto_auth_hmacsha512256_final(&st, tag);
  if (rc) /* libsodium's HMAC functions cannot fail; a tag that never verifies if they did */
    memset(tag, 0, BOOT_TAG_BYTES);
  sodium_memzero(&st, sizeof(st));
}

/* Does the received frame's tag (after its len payload bytes) verify? Advances rx_seq. */
static bool frame_ok(struct boot_link *l, const uint8_t h[8], const uint8_t *p, uint32_t len)
{
  if (!l->keyed)
    return true;
  uint8_t want[BOOT_TAG_BYTES];
  frame_tag(l->rx_key, l->rx_seq++, h, p, len, want);
  return crypto_verify_32(want, p + len) == 0;
}

/* The whole frame in one buffer (freed by the caller); NULL when out of memory or too big. */
static uint8_t *frame_build(struct boot_link *l, uint32_t type, const uint8_t *p, size_t len,
                            size_t *out_len)
{
  if (len > BOOT_MAX_MSG)
    return NULL;
  size_t n = 8 + len + (l->keyed ? BOOT_TAG_BYTES : 0);
  uint8_t *f = malloc(n);
  if (!f)
    return NULL;
  put_header(f, type, (uint32_t)len);
  if (len)
    memcpy(f + 8, p, len);
  if (l->keyed)
    frame_tag(l->tx_key, l->tx_seq++, f, f + 8, len, f + 8 + len);
  *out_len = n;
  return f;
}

int boot_send(struct boot_link *l, enum boot_msg type, const struct boot_buf *payload,
              uint64_t deadline)
{
  size_t n;
  uint8_t *f = frame_build(l, type, payload ? payload->p : NULL, payload ? payload->len : 0, &n);
  int rc = f ? write_all(l->fd, f, n, deadline) : -1;
  free(f);
  return rc;
}

int boot_send_text(struct boot_link *l, enum boot_msg type, const char *text, uint64_t deadline)
{
  struct boot_buf b = {0};
  boot_put_bytes(&b, text, strnlen(text, BOOT_TEXT_MAX));
  int rc = boot_send(l, type, &b, deadline);
  boot_buf_free(&b);
  return rc;
}

/* 1 done, 0 deadline, -1 EOF/error */
static int read_all(int fd, uint8_t *p, size_t n, uint64_t deadline, char *err, size_t errlen)
{
  while (n) {
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    int k = poll(&pf, 1, ms_until(deadline));
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0) {
      errf(err, errlen, "poll: %s", strerror(errno));
      return -1;
    }
    if (k == 0)
      return 0;
    ssize_t r = recv(fd, p, n, 0);
    if (r < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (r <= 0) {
      errf(err, errlen, "%s", r == 0 ? "connection closed" : strerror(errno));
      return -1;
    }
    p += r;
    n -= (size_t)r;
  }
  return 1;
}

/* One frame of at most max payload bytes: 1 got one, 0 deadline, -1 EOF, error, too big or a tag
 * that does not verify. */
static int recv_frame(struct boot_link *l, uint32_t *type, struct boot_buf *b, uint32_t max,
                      uint64_t deadline, char *err, size_t errlen)
{
  uint8_t h[8];
  int rc = read_all(l->fd, h, 8, deadline, err, errlen);
  if (rc <= 0)
    return rc;
  *type = le32(h);
  uint32_t len = le32(h + 4);
  if (len > max) {
    errf(err, errlen, "a message of %u bytes (at most %u): not a prepost peer?", len, max);
    return -1;
  }
  size_t need = len + (l->keyed ? BOOT_TAG_BYTES : 0);
  b->len = b->at = 0;
  b->bad = false;
  if (!grow(b, need)) {
    errf(err, errlen, "out of memory");
    return -1;
  }
  /* the header arrived: the body follows at once, give it a little extra time */
  uint64_t late = boot_now_ns() + 5000000000ull;
  rc = read_all(l->fd, b->p, need, deadline > late ? deadline : late, err, errlen);
  if (rc == 0)
    errf(err, errlen, "truncated message");
  if (rc != 1)
    return -1;
  if (!frame_ok(l, h, b->p, len)) {
    errf(err, errlen, "a message failed authentication (altered on the way, or not from this "
                      "job's peer)");
    return -1;
  }
  b->len = len;
  return 1;
}

int boot_recv(struct boot_link *l, uint32_t *type, struct boot_buf *b, uint64_t deadline,
              char *err, size_t errlen)
{
  return recv_frame(l, type, b, BOOT_MAX_MSG, deadline, err, errlen);
}

/* ---------------------------------------------------------------- the job secret */

int boot_secret_generate(uint8_t secret[BOOT_SECRET_BYTES], char *err, size_t errlen)
{
  if (sodium_init() < 0) {
    errf(err, errlen, "libsodium cannot initialise (no random source?)");
    return -1;
  }
  randombytes_buf(secret, BOOT_SECRET_BYTES);
  return 0;
}

/* 64 hex digits (white space around and between pairs allowed), or exactly 32 raw bytes. */
static int secret_parse(const uint8_t *p, size_t n, bool raw_ok, uint8_t out[BOOT_SECRET_BYTES])
{
  size_t got = 0;
  const char *end = NULL;
  if (raw_ok && n == BOOT_SECRET_BYTES) { /* 64 hex digits are 64 bytes: no ambiguity */
    memcpy(out, p, BOOT_SECRET_BYTES);
    return 0;
  }
  while (n && p[n - 1] && strchr(" \t\r\n", p[n - 1]))
    n--;
  if (sodium_hex2bin(out, BOOT_SECRET_BYTES, (const char *)p, n, " \t\r\n", &got, &end) == 0 &&
      got == BOOT_SECRET_BYTES && end == (const char *)p + n)
    return 0;
  return -1;
}

int boot_secret_load(const char *path, uint8_t secret[BOOT_SECRET_BYTES], char *err,
                     size_t errlen)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    errf(err, errlen, "job secret file '%s': %s", path, strerror(errno));
    return -1;
  }
  struct stat st;
  uint8_t buf[160];
  ssize_t n = -1;
  int rc = -1;
  if (fstat(fd, &st) || !S_ISREG(st.st_mode))
    errf(err, errlen, "job secret file '%s': not a regular file", path);
  else if (st.st_uid != geteuid())
    errf(err, errlen, "job secret file '%s': owned by another user (uid %u)", path,
         (unsigned)st.st_uid);
  else if (st.st_mode & 077)
    errf(err, errlen, "job secret file '%s': others can access it (mode %03o): chmod 600 it",
         path, (unsigned)(st.st_mode & 0777));
  else if ((n = read(fd, buf, sizeof(buf))) < 0)
    errf(err, errlen, "job secret file '%s': %s", path, strerror(errno));
  else if (secret_parse(buf, (size_t)n, true, secret))
    errf(err, errlen, "job secret file '%s': expected 32 bytes or 64 hex digits, got %zd bytes",
         path, n);
  else
    rc = 0;
  sodium_memzero(buf, sizeof(buf));
  close(fd);
  return rc;
}

int boot_secret_from_env(uint8_t secret[BOOT_SECRET_BYTES], char *err, size_t errlen)
{
  const char *f = getenv("PREPOST_JOB_SECRET_FILE"), *x = getenv("PREPOST_JOB_SECRET");
  if (f && *f)
    return boot_secret_load(f, secret, err, errlen) ? -1 : 1;
  if (!x || !*x)
    return 0;
  if (secret_parse((const uint8_t *)x, strlen(x), false, secret)) {
    errf(err, errlen, "PREPOST_JOB_SECRET: expected 64 hex digits");
    return -1;
  }
  return 1;
}

/* ---------------------------------------------------------------- the handshake */

#define AUTH_SIGNED (BOOT_AUTH_BYTES - BOOT_TAG_BYTES) /* what the rank's MAC covers after Nc */

static const char LABEL_RANK[] = "prepost bootstrap v2: rank";
static const char LABEL_COORD[] = "prepost bootstrap v2: coordinator";
static const char LABEL_R2C[] = "prepost bootstrap v2: key rank to coordinator";
static const char LABEL_C2R[] = "prepost bootstrap v2: key coordinator to rank";

/* HMAC-SHA-512-256 under the secret over (label, Nc, the signed part of the AUTH). */
static void auth_mac(const char *label, const uint8_t *secret, const uint8_t *nc,
                     const uint8_t *signed_part, uint8_t mac[BOOT_TAG_BYTES])
{
  crypto_auth_hmacsha512256_state st;
  int rc = crypto_auth_hmacsha512256_init(&st, secret, BOOT_SECRET_BYTES);
  rc |= crypto_auth_hmacsha512256_update(&st, (const uint8_t *)label, strlen(label) + 1);
  rc |= crypto_auth_hmacsha512256_update(&st, nc, BOOT_NONCE_BYTES);
  rc |= crypto_auth_hmacsha512256_update(&st, signed_part, AUTH_SIGNED);
  rc |= crypto_auth_hmacsha512256_final(&st, mac);
  if (rc)
    memset(mac, 0, BOOT_TAG_BYTES);
  sodium_memzero(&st, sizeof(st));
}

/* A direction's frame key: keyed BLAKE2b of (label, Nc, the signed part of the AUTH). */
static void derive_key(const char *label, const uint8_t *secret, const uint8_t *nc,
                       const uint8_t *signed_part, uint8_t key[BOOT_SECRET_BYTES])
{
  crypto_generichash_state st;
  int rc = crypto_generichash_init(&st, secret, BOOT_SECRET_BYTES, BOOT_SECRET_BYTES);
  rc |= crypto_generichash_update(&st, (const uint8_t *)label, strlen(label) + 1);
  rc |= crypto_generichash_update(&st, nc, BOOT_NONCE_BYTES);
  rc |= crypto_generichash_update(&st, signed_part, AUTH_SIGNED);
  rc |= crypto_generichash_final(&st, key, BOOT_SECRET_BYTES);
  if (rc)
    randombytes_buf(key, BOOT_SECRET_BYTES); /* a key nobody shares: every frame fails */
  sodium_memzero(&st, sizeof(st));
}

/* Both directions' keys of a link; `rank_side` says which is which. */
static void key_link(struct boot_link *l, bool rank_side, const uint8_t *secret,
                     const uint8_t *nc, const uint8_t *signed_part)
{
  derive_key(rank_side ? LABEL_R2C : LABEL_C2R, secret, nc, signed_part, l->tx_key);
  derive_key(rank_side ? LABEL_C2R : LABEL_R2C, secret, nc, signed_part, l->rx_key);
  l->tx_seq = l->rx_seq = 0;
  l->keyed = true;
}

void boot_put_auth(struct boot_buf *b, uint32_t rank, uint32_t nranks, uint64_t cfg_hash,
                   const uint8_t secret[BOOT_SECRET_BYTES], const uint8_t nc[BOOT_NONCE_BYTES],
                   const uint8_t nr[BOOT_NONCE_BYTES])
{
  size_t at = b->len;
  boot_put32(b, BOOT_MAGIC);
  boot_put32(b, BOOT_VERSION);
  boot_put32(b, rank);
  boot_put32(b, nranks);
  boot_put64(b, cfg_hash);
  boot_put_bytes(b, nr, BOOT_NONCE_BYTES);
  uint8_t mac[BOOT_TAG_BYTES];
  if (b->bad)
    return;
  auth_mac(LABEL_RANK, secret, nc, b->p + at, mac);
  boot_put_bytes(b, mac, sizeof(mac));
}

static void refused(const struct boot_buf *b, char *err, size_t errlen)
{
  char t[BOOT_TEXT_MAX];
  errf(err, errlen, "the coordinator refused this rank: %s",
       boot_sanitize(b->p, b->len, t, sizeof(t)));
}

/* Waits for the coordinator's CHALLENGE; 1 with nc filled, 0 closed, -1 err. */
static int get_challenge(struct boot_link *l, struct boot_buf *b, uint64_t deadline,
                         uint8_t nc[BOOT_NONCE_BYTES], char *err, size_t errlen)
{
  uint32_t type = 0;
  char e2[200];
  int rc = recv_frame(l, &type, b, BOOT_PENDING_MAX_FRAME, deadline, e2, sizeof(e2));
  if (rc == 0) {
    errf(err, errlen, "no challenge from the coordinator before the deadline (overloaded, or "
                      "not a prepost coordinator)");
    return -1;
  }
  if (rc < 0) {
    errf(err, errlen, "the coordinator closed the connection before authentication: %s", e2);
    return 0;
  }
  if (type == BOOT_ABORT) {
    refused(b, err, errlen);
    return -1;
  }
  uint32_t magic = boot_get32(b), version = boot_get32(b);
  boot_get_bytes(b, nc, BOOT_NONCE_BYTES);
  if (type != BOOT_CHALLENGE || b->len != BOOT_CHALLENGE_BYTES || magic != BOOT_MAGIC) {
    errf(err, errlen, "the peer is not a prepost coordinator (message %u of %zu bytes instead "
                      "of a challenge)", type, b->len);
    return -1;
  }
  if (version != BOOT_VERSION) {
    errf(err, errlen, "the coordinator speaks bootstrap version %u, this rank %u (different "
                      "prepost versions)", version, BOOT_VERSION);
    return -1;
  }
  return 1;
}

int boot_rank_auth(struct boot_link *l, uint32_t rank, const struct pp_engine_cfg *cfg,
                   const uint8_t secret[BOOT_SECRET_BYTES], uint64_t deadline, char *err,
                   size_t errlen)
{
  uint8_t nc[BOOT_NONCE_BYTES], nr[BOOT_NONCE_BYTES], want[BOOT_TAG_BYTES];
  struct boot_buf b = {0}, a = {0};
  uint32_t type = 0;
  char e2[200];
  int ret = -1;
  l->keyed = false;
  if (sodium_init() < 0) {
    errf(err, errlen, "libsodium cannot initialise");
    return -1;
  }
  int rc = get_challenge(l, &b, deadline, nc, err, errlen);
  if (rc <= 0) {
    ret = rc == 0 ? 1 : -1;
    goto out;
  }
  randombytes_buf(nr, sizeof(nr));
  boot_put_auth(&a, rank, cfg->nranks, boot_cfg_hash(cfg), secret, nc, nr);
  if (a.bad || boot_send(l, BOOT_AUTH, &a, deadline)) {
    errf(err, errlen, "the coordinator closed the connection during authentication");
    ret = 1;
    goto out;
  }
  rc = recv_frame(l, &type, &b, BOOT_PENDING_MAX_FRAME, deadline, e2, sizeof(e2));
  if (rc <= 0) {
    errf(err, errlen, "%s during authentication%s", rc ? "the coordinator closed the connection"
                                                      : "no answer from the coordinator",
         rc ? "" : " before the deadline");
    ret = rc ? 1 : -1;
    goto out;
  }
  if (type == BOOT_ABORT) {
    refused(&b, err, errlen);
    goto out;
  }
  auth_mac(LABEL_COORD, secret, nc, a.p, want);
  if (type != BOOT_AUTH_OK || b.len != BOOT_TAG_BYTES || crypto_verify_32(want, b.p) != 0) {
    errf(err, errlen, "the coordinator did not prove it holds the job secret (an impostor on "
                      "its address, or another job's secret)");
    goto out;
  }
  key_link(l, true, secret, nc, a.p);
  ret = 0;
out:
  boot_buf_free(&a);
  boot_buf_free(&b);
  return ret;
}

int boot_join(const char *host, uint16_t port, uint32_t rank, const struct pp_engine_cfg *cfg,
              const uint8_t secret[BOOT_SECRET_BYTES], uint64_t deadline, struct boot_link *l,
              char *err, size_t errlen)
{
  for (;;) {
    int fd = boot_connect(host, port, deadline, err, errlen);
    if (fd < 0)
      return -1;
    *l = boot_link_of(fd);
    char e2[300];
    int rc = boot_rank_auth(l, rank, cfg, secret, deadline, e2, sizeof(e2));
    if (rc == 0)
      return 0;
    close(fd);
    *l = boot_link_of(-1);
    if (rc < 0 || boot_now_ns() >= deadline) {
      errf(err, errlen, "coordinator at %s:%u: %s", host, port, e2);
      return -1;
    }
    struct timespec ts = {0, 50 * 1000000}; /* it shed the connection: come back in line */
    nanosleep(&ts, NULL);
  }
}

/* ---------------------------------------------------------------- coordinator */

#define ACCEPT_PAUSE_NS 100000000ull        /* listen fd not polled after EMFILE/ENFILE */
#define ACCEPT_BATCH 64                     /* accept() calls per poll round */
#define PEND_BASE 0x80000000u               /* who[]: pending connection PEND_BASE + i */
#define WHO_LISTEN UINT32_MAX

/* A frame read without blocking: header, payload, tag when keyed. */
struct rx {
  uint8_t hdr[8];
  size_t got; /* bytes of this frame so far */
  uint32_t type, len;
  struct boot_buf body; /* payload (then the tag); body.len = len when whole */
};

/* A connection that has not authenticated yet. */
struct pend {
  struct boot_link l;
  struct rx rx;
  uint64_t deadline;
  uint8_t nc[BOOT_NONCE_BYTES];
  char peer[80]; /* its address, for the log */
};

struct crank {
  struct boot_link l; /* fd -1 until a connection authenticated as this rank */
  struct rx rx;
  char peer[80];
  bool hello, ready, idle, done, replied, reply_idle, result;
  bool mark_still; /* answered the MARK_PROBE in flight: its progress mark did not change */
  uint64_t gen, reply_gen;
  struct vnic_addr addr;
  char host[BOOT_HOST_MAX], dev[VNIC_NAME_MAX];
  bool *has;                 /* [nranks]: has a pp_conn_info for rank j */
  struct pp_conn_info *info; /* [nranks] */
  struct pp_hist *lat; /* from its RESULT, NULL when it records no latency */
  struct pp_wait waits[PP_HANG_MAX_WAITS]; /* from its RESULT */
  uint32_t nwaits, total_waits;
  struct vnic_qp_state qps[BOOT_MAX_QPS]; /* from a stopped rank's RESULT: what its device says */
  uint32_t nqps;
};

struct run_state {
  uint64_t probe_id;
  bool probing;
  bool stop;
  bool no_progress;   /* stopped by the no-progress bound */
  uint64_t progress_at; /* the last PROGRESS from any rank (or GO) */
  uint64_t np_suspect;  /* when the bound was first seen passed (0: not yet; run_until) */
  uint64_t mark_id;     /* the MARK_PROBE in flight (sent at np_suspect) */
  /* every rank still, but the device owes work (device_owes): the QPs' PSNs as last seen and
   * since when they have not changed (0: the device owes nothing) */
  uint64_t dev_psns, dev_since;
};

struct coord {
  const struct boot_coord_args *a;
  struct run_state rs;
  struct pp_run_result *res;
  uint32_t n;
  struct crank *r;
  struct pend *pending; /* [max_pending], oldest first; l.fd -1: gone (compacted away) */
  uint32_t npending, max_pending;
  uint64_t auth_ns;
  uint64_t listen_resume; /* after an accept error: the listen fd rests until then */
  uint32_t nlog, ndropped, accept_errors;
  bool accept_paused; /* said once in the log */
  char *err;
  size_t errlen;
};

static void coord_log(struct coord *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void coord_log(struct coord *c, const char *fmt, ...)
{
  if (c->nlog > BOOT_LOG_LINES)
    return;
  char line[600];
  if (c->nlog++ == BOOT_LOG_LINES) {
    snprintf(line, sizeof(line), "bootstrap: more connections dropped: counted, not logged");
  } else {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
  }
  if (c->a->log)
    c->a->log(c->a->log_ctx, line);
  else
    fprintf(stderr, "prepost: %s\n", line);
}

static void rx_free(struct rx *x)
{
  boot_buf_free(&x->body);
  x->got = 0;
}

/* Reads what is there of one frame: 1 whole (x->type, x->body of x->len bytes, tag verified when
 * keyed), 0 not yet, -1 with *why (closed, error, too big, not `expect`, failed tag). */
static int rx_step(struct boot_link *l, struct rx *x, uint32_t expect, uint32_t max,
                   const char **why)
{
  for (;;) {
    bool head = x->got < 8;
    size_t need = head ? 8 : 8 + x->len + (l->keyed ? BOOT_TAG_BYTES : 0);
    uint8_t *to = head ? x->hdr + x->got : x->body.p + (x->got - 8);
    ssize_t k = need > x->got ? recv(l->fd, to, need - x->got, MSG_DONTWAIT) : 0;
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return 0;
    if (k < 0) {
      *why = strerror(errno);
      return -1;
    }
    if (k == 0 && need > x->got) {
      *why = x->got ? "closed in the middle of a frame (truncated)" : "closed the connection";
      return -1;
    }
    x->got += (size_t)k;
    if (head && x->got == 8) {
      x->type = le32(x->hdr);
      x->len = le32(x->hdr + 4);
      if (expect && x->type != expect) {
        *why = x->type == BOOT_HELLO ? "sent a HELLO without authenticating (an impostor, or "
                                       "bootstrap version 1)"
                                     : "sent junk (not a prepost bootstrap frame)";
        return -1;
      }
      if (x->len > max) {
        *why = "announced a frame larger than allowed";
        return -1;
      }
      x->body.len = x->body.at = 0;
      x->body.bad = false;
      if (!grow(&x->body, x->len + (l->keyed ? BOOT_TAG_BYTES : 0) + 1)) {
        *why = "out of memory";
        return -1;
      }
      continue;
    }
    if (!head && x->got == need) {
      x->got = 0;
      if (!frame_ok(l, x->hdr, x->body.p, x->len)) {
        *why = "sent a message that fails authentication (altered on the way?)";
        return -1;
      }
      x->body.len = x->len;
      x->body.at = 0;
      return 1;
    }
  }
}

/* Sends a small frame now or never (a connection that cannot take 100 bytes is not waited for). */
static int send_now(struct boot_link *l, uint32_t type, const void *p, size_t n)
{
  size_t len;
  uint8_t *f = frame_build(l, type, p, n, &len);
  ssize_t w = f ? send(l->fd, f, len, MSG_DONTWAIT | MSG_NOSIGNAL) : -1;
  free(f);
  return w == (ssize_t)len ? 0 : -1;
}

static void drop_pending(struct coord *c, uint32_t i, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void drop_pending(struct coord *c, uint32_t i, const char *fmt, ...)
{
  struct pend *p = &c->pending[i];
  char why[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof(why), fmt, ap);
  va_end(ap);
  coord_log(c, "bootstrap: dropped the connection from %s: %s (the job goes on)", p->peer, why);
  c->ndropped++;
  close(p->l.fd);
  p->l.fd = -1;
  rx_free(&p->rx);
}

static void compact_pending(struct coord *c)
{
  uint32_t w = 0;
  for (uint32_t i = 0; i < c->npending; i++)
    if (c->pending[i].l.fd >= 0)
      c->pending[w++] = c->pending[i];
  c->npending = w;
}

static void close_all(struct coord *c)
{
  for (uint32_t i = 0; i < c->npending; i++)
    if (c->pending[i].l.fd >= 0) {
      close(c->pending[i].l.fd);
      rx_free(&c->pending[i].rx);
    }
  c->npending = 0;
  for (uint32_t i = 0; c->r && i < c->n; i++) {
    if (c->r[i].l.fd >= 0)
      close(c->r[i].l.fd);
    c->r[i].l.fd = -1;
    rx_free(&c->r[i].rx);
  }
}

static void abort_all(struct coord *c, const char *why)
{
  uint64_t dl = boot_now_ns() + 1000000000ull;
  for (uint32_t i = 0; c->r && i < c->n; i++)
    if (c->r[i].l.fd >= 0)
      boot_send_text(&c->r[i].l, BOOT_ABORT, why, dl);
  close_all(c);
}

static void missing_list(struct coord *c, int what, char *buf, size_t len)
{
  size_t at = 0;
  uint32_t shown = 0, miss = 0;
  buf[0] = '\0';
  for (uint32_t i = 0; i < c->n; i++) {
    bool ok = what == 0 ? c->r[i].hello : what == 1 ? c->r[i].ready : c->r[i].result;
    if (ok)
      continue;
    miss++;
    if (shown++ < 8 && at < len)
      at += (size_t)snprintf(buf + at, len - at, "%s%u", shown > 1 ? ", " : "", i);
  }
  if (miss > 8 && at < len)
    snprintf(buf + at, len - at, " and %u more", miss - 8);
}

static void peer_name(const struct sockaddr_storage *ss, socklen_t sl, char *out, size_t len)
{
  char h[64], p[16];
  if (getnameinfo((const struct sockaddr *)ss, sl, h, sizeof(h), p, sizeof(p),
                  NI_NUMERICHOST | NI_NUMERICSERV))
    snprintf(out, len, "an unknown address");
  else
    snprintf(out, len, ss->ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", h, p);
}

/* A new connection: held (the oldest goes when the table is full) and challenged. */
static void add_pending(struct coord *c, int fd, const char *peer)
{
  if (c->npending == c->max_pending) {
    drop_pending(c, 0, "%u unauthenticated connections were held (the limit) and it was the "
                       "oldest", c->max_pending);
    compact_pending(c);
  }
  struct pend *p = &c->pending[c->npending++];
  *p = (struct pend){.l = boot_link_of(fd), .deadline = boot_now_ns() + c->auth_ns};
  snprintf(p->peer, sizeof(p->peer), "%s", peer);
  tune(fd);
  randombytes_buf(p->nc, sizeof(p->nc));
  uint8_t ch[BOOT_CHALLENGE_BYTES];
  put_header(ch, BOOT_MAGIC, BOOT_VERSION); /* the same two little-endian words */
  memcpy(ch + 8, p->nc, BOOT_NONCE_BYTES);
  if (send_now(&p->l, BOOT_CHALLENGE, ch, sizeof(ch))) {
    drop_pending(c, c->npending - 1, "cannot send it the challenge");
    compact_pending(c);
  }
}

/* Takes what the listen socket has; after EMFILE/ENFILE it sheds the oldest unauthenticated
 * connection to make room, or (none held) rests the listen fd for ACCEPT_PAUSE_NS: no spinning. */
static void accept_some(struct coord *c)
{
  for (int i = 0; i < ACCEPT_BATCH; i++) {
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    int fd = accept4(c->a->listen_fd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0 && (errno == EINTR || errno == ECONNABORTED))
      continue;
    if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)) {
      int e = errno;
      c->accept_errors++;
      if (c->npending) {
        drop_pending(c, 0, "accept: %s: making room", strerror(e));
        compact_pending(c);
        continue;
      }
      if (!c->accept_paused) /* once: it may go on for a while */
        coord_log(c, "bootstrap: accept on %s: %s: new connections wait (polled every %llu ms)",
                  c->a->where, strerror(e), ACCEPT_PAUSE_NS / 1000000ull);
      c->accept_paused = true;
      c->listen_resume = boot_now_ns() + ACCEPT_PAUSE_NS;
      return;
    }
    if (fd < 0)
      return; /* EAGAIN: nothing more; other errors: the next round says again */
    char peer[80];
    peer_name(&ss, sl, peer, sizeof(peer));
    add_pending(c, fd, peer);
  }
}

static void expire_pending(struct coord *c, uint64_t now)
{
  bool any = false;
  for (uint32_t i = 0; i < c->npending; i++) {
    struct pend *p = &c->pending[i];
    if (p->l.fd < 0 || now < p->deadline)
      continue;
    if (p->rx.got)
      drop_pending(c, i, "%zu byte(s) of a frame in %.1f s (too slow, or a truncated frame)",
                   p->rx.got, c->auth_ns / 1e9);
    else
      drop_pending(c, i, "no authentication within %.1f s (silent)", c->auth_ns / 1e9);
    any = true;
  }
  if (any)
    compact_pending(c);
}

/* An authenticated AUTH with another scenario or rank table: a member of this job misconfigured,
 * so the job fails (as before authentication existed). */
static enum pp_status auth_mismatch(struct coord *c, uint32_t rank, uint32_t nranks, uint64_t hash)
{
  if (nranks != c->n || rank >= c->n) {
    errf(c->err, c->errlen,
         "bootstrap: a rank says it is rank %u of %u, the coordinator runs %u ranks "
         "(different scenario or rank table?)",
         rank, nranks, c->n);
    return PP_INVALID;
  }
  if (hash != boot_cfg_hash(c->a->cfg)) {
    errf(c->err, c->errlen,
         "bootstrap: rank %u runs a different scenario configuration than the coordinator", rank);
    return PP_INVALID;
  }
  return PP_OK;
}

/* The AUTH of pending connection i: it becomes its rank, or is dropped; an error only for an
 * authenticated member of this job with another configuration. */
static enum pp_status on_auth(struct coord *c, uint32_t i)
{
  struct pend *p = &c->pending[i];
  struct boot_buf *b = &p->rx.body;
  if (b->len != BOOT_AUTH_BYTES) {
    drop_pending(c, i, "an AUTH of %zu bytes (%u expected)", b->len, BOOT_AUTH_BYTES);
    return PP_OK;
  }
  uint32_t magic = boot_get32(b), version = boot_get32(b), rank = boot_get32(b);
  uint32_t nranks = boot_get32(b);
  uint64_t hash = boot_get64(b);
  uint8_t want[BOOT_TAG_BYTES];
  if (magic != BOOT_MAGIC) {
    drop_pending(c, i, "sent junk (not a prepost bootstrap frame)");
    return PP_OK;
  }
  if (version != BOOT_VERSION) {
    send_now(&p->l, BOOT_ABORT, "bootstrap version 2 expected", 28);
    drop_pending(c, i, "speaks bootstrap version %u, this coordinator %u (another prepost)",
                 version, BOOT_VERSION);
    return PP_OK;
  }
  auth_mac(LABEL_RANK, c->a->secret, p->nc, b->p, want);
  if (crypto_verify_32(want, b->p + AUTH_SIGNED) != 0) {
    static const char no[] = "authentication failed: not this job's secret";
    send_now(&p->l, BOOT_ABORT, no, sizeof(no) - 1);
    drop_pending(c, i, "failed authentication (no or another job secret, or a replayed AUTH)");
    return PP_OK;
  }
  enum pp_status s = auth_mismatch(c, rank, nranks, hash);
  if (s != PP_OK) {
    send_now(&p->l, BOOT_ABORT, c->err, strnlen(c->err, BOOT_TEXT_MAX));
    drop_pending(c, i, "authenticated, but another configuration (the job fails)");
    return s;
  }
  struct crank *r = &c->r[rank];
  if (r->l.fd >= 0) {
    static const char dup[] = "this rank number is taken";
    send_now(&p->l, BOOT_ABORT, dup, sizeof(dup) - 1);
    drop_pending(c, i, "authenticated as rank %u, which %s already is (two processes with "
                       "--rank %u?)", rank, r->peer, rank);
    return PP_OK;
  }
  auth_mac(LABEL_COORD, c->a->secret, p->nc, b->p, want);
  if (send_now(&p->l, BOOT_AUTH_OK, want, sizeof(want))) {
    drop_pending(c, i, "cannot send it the answer");
    return PP_OK;
  }
  key_link(&p->l, false, c->a->secret, p->nc, b->p);
  r->l = p->l;
  snprintf(r->peer, sizeof(r->peer), "%s", p->peer);
  rx_free(&p->rx);
  p->l.fd = -1; /* moved, not closed */
  return PP_OK;
}

static void pend_read(struct coord *c, uint32_t i, enum pp_status *s)
{
  struct pend *p = &c->pending[i];
  const char *why = NULL;
  int rc = rx_step(&p->l, &p->rx, BOOT_AUTH, BOOT_PENDING_MAX_FRAME, &why);
  if (rc < 0 && p->rx.got == 8 && p->rx.len > BOOT_PENDING_MAX_FRAME)
    drop_pending(c, i, "%s (%u bytes, at most %u before authentication)", why, p->rx.len,
                 BOOT_PENDING_MAX_FRAME);
  else if (rc < 0)
    drop_pending(c, i, "%s", why);
  else if (rc > 0)
    *s = on_auth(c, i);
}

static enum pp_status handle_hello(struct coord *c, uint32_t rank, struct boot_buf *b)
{
  struct crank *r = &c->r[rank];
  if (b->len != boot_hello_bytes(c->n)) {
    errf(c->err, c->errlen, "bootstrap: rank %u (%s) sent a HELLO of %zu bytes, %zu expected",
         rank, r->peer, b->len, boot_hello_bytes(c->n));
    return PP_PARSE;
  }
  boot_get_addr(b, &r->addr);
  boot_get_bytes(b, r->host, sizeof(r->host));
  boot_get_bytes(b, r->dev, sizeof(r->dev));
  r->host[sizeof(r->host) - 1] = r->dev[sizeof(r->dev) - 1] = '\0';
  printable(r->host);
  printable(r->dev);
  for (uint32_t j = 0; j < c->n; j++) {
    r->has[j] = boot_get8(b) != 0;
    boot_get_conn_info(b, &r->info[j]);
  }
  r->hello = !b->bad;
  return b->bad ? PP_PARSE : PP_OK;
}

/* Waits for messages from identified ranks (or new connections during HELLO) until `until`
 * returns true or the deadline passes. */
typedef enum pp_status (*on_msg_fn)(struct coord *c, uint32_t rank, uint32_t type,
                                    struct boot_buf *b);

static enum pp_status unexpected(struct coord *c, uint32_t rank, uint32_t type)
{
  errf(c->err, c->errlen, "rank %u sent an unexpected message (type %u)", rank, type);
  return PP_PARSE;
}

/* A frame (or the end) from authenticated rank `rank`. */
static enum pp_status rank_read(struct coord *c, uint32_t rank, on_msg_fn on_msg)
{
  struct crank *r = &c->r[rank];
  const char *why = NULL;
  int rc = rx_step(&r->l, &r->rx, 0, BOOT_MAX_MSG, &why);
  if (rc == 0)
    return PP_OK;
  if (rc < 0) {
    errf(c->err, c->errlen, "rank %u (%s) went away: %s", rank, r->hello ? r->host : r->peer,
         why);
    close(r->l.fd);
    r->l.fd = -1;
    return PP_IO;
  }
  struct boot_buf *b = &r->rx.body;
  if (r->rx.type == BOOT_ERROR) {
    char t[BOOT_TEXT_MAX];
    errf(c->err, c->errlen, "rank %u failed: %s", rank, boot_sanitize(b->p, b->len, t, sizeof(t)));
    return PP_IO;
  }
  if (!r->hello)
    return r->rx.type == BOOT_HELLO ? handle_hello(c, rank, b) : unexpected(c, rank, r->rx.type);
  return on_msg(c, rank, r->rx.type, b);
}

/* How long poll may sleep: the phase's deadline, the next pending deadline, the listen pause. */
static int poll_ms(const struct coord *c, bool accepting, uint64_t deadline, uint64_t now)
{
  uint64_t until = deadline;
  for (uint32_t i = 0; accepting && i < c->npending; i++)
    if (c->pending[i].deadline < until)
      until = c->pending[i].deadline;
  if (accepting && c->listen_resume > now && c->listen_resume < until)
    until = c->listen_resume;
  int ms = ms_until(until);
  return ms > 100 ? 100 : ms;
}

static enum pp_status pump(struct coord *c, bool accepting, on_msg_fn on_msg,
                           bool (*until)(struct coord *), uint64_t deadline, bool *timed_out)
{
  size_t cap = (size_t)c->n + c->max_pending + 1;
  struct pollfd *pf = calloc(cap, sizeof(*pf));
  uint32_t *who = calloc(cap, sizeof(*who));
  enum pp_status s = pf && who ? PP_OK : PP_NOMEM;
  *timed_out = false;
  while (s == PP_OK && !until(c)) {
    uint64_t now = boot_now_ns();
    if (now >= deadline) {
      *timed_out = true;
      break;
    }
    if (c->a->check && c->a->check(c->a->check_ctx, c->err, c->errlen)) {
      s = PP_IO;
      break;
    }
    if (accepting)
      expire_pending(c, now);
    nfds_t k = 0;
    if (accepting && now >= c->listen_resume)
      pf[k] = (struct pollfd){.fd = c->a->listen_fd, .events = POLLIN}, who[k++] = WHO_LISTEN;
    for (uint32_t i = 0; accepting && i < c->npending; i++)
      pf[k] = (struct pollfd){.fd = c->pending[i].l.fd, .events = POLLIN}, who[k++] = PEND_BASE + i;
    for (uint32_t i = 0; i < c->n; i++)
      if (c->r[i].l.fd >= 0)
        pf[k] = (struct pollfd){.fd = c->r[i].l.fd, .events = POLLIN}, who[k++] = i;
    int got = poll(pf, k, poll_ms(c, accepting, deadline, now));
    if (got < 0 && errno != EINTR) {
      errf(c->err, c->errlen, "coordinator: poll: %s", strerror(errno));
      s = PP_IO;
    }
    bool listen_ready = false;
    for (nfds_t i = 0; got > 0 && s == PP_OK && i < k; i++) {
      if (!pf[i].revents)
        continue;
      if (who[i] == WHO_LISTEN)
        listen_ready = true;
      else if (who[i] >= PEND_BASE)
        pend_read(c, who[i] - PEND_BASE, &s);
      else
        s = rank_read(c, who[i], on_msg);
    }
    compact_pending(c);
    if (s == PP_OK && listen_ready)
      accept_some(c); /* last: it may shed and compact pending connections */
  }
  free(pf);
  free(who);
  return s;
}

static bool all_hello(struct coord *c)
{
  for (uint32_t i = 0; i < c->n; i++)
    if (!c->r[i].hello)
      return false;
  return true;
}

static bool all_ready(struct coord *c)
{
  for (uint32_t i = 0; i < c->n; i++)
    if (!c->r[i].ready)
      return false;
  return true;
}

static bool all_results(struct coord *c)
{
  for (uint32_t i = 0; i < c->n; i++)
    if (!c->r[i].result)
      return false;
  return true;
}


static enum pp_status on_ready(struct coord *c, uint32_t rank, uint32_t type, struct boot_buf *b)
{
  (void)b;
  if (type != BOOT_READY)
    return unexpected(c, rank, type);
  c->r[rank].ready = true;
  return PP_OK;
}

static enum pp_status on_hello_phase(struct coord *c, uint32_t rank, uint32_t type,
                                     struct boot_buf *b)
{
  /* the ranks exchanged their connection information elsewhere (PMIx): they connect their QPs
   * without waiting for a TABLE, and a READY may come before every HELLO did */
  if (c->a->tables_exchanged && type == BOOT_READY)
    return on_ready(c, rank, type, b);
  return unexpected(c, rank, type);
}

/* The QP of rank `rank` whose number is qpn, or NULL. */
static const struct vnic_qp_state *qp_of(const struct coord *c, uint32_t rank, uint32_t qpn)
{
  if (rank >= c->n)
    return NULL;
  for (uint32_t i = 0; i < c->r[rank].nqps; i++)
    if (c->r[rank].qps[i].qpn == qpn)
      return &c->r[rank].qps[i];
  return NULL;
}

static const char *dev_of(const struct coord *c, uint32_t rank)
{
  return c->r[rank].dev[0] ? c->r[rank].dev : "its device";
}

/* RC completes a request at its requester only once the responder took it (rxe 6.1 moves the
 * responder's expected PSN past a READ only once it sent the whole response, rxe_resp.c
 * read_reply), so a requester whose next PSN is ahead of its peer QP's expected PSN has sent
 * requests that responder has not finished. Only one thing the protocol does can hold them
 * there: a responder with no receive posted RNR-NAKs every request that needs one, forever
 * (traces/hangs/rnr-forever on rxe), the protocol's hang. So a requester ahead means the device
 * owes work (and the engines that wait for it wait for the device, not for each other,
 * backends/verbs/README.md: Soft-RoCE on a starved CPU) unless an RNR wait is possible: some of
 * its outstanding send WRs take a receive (SEND, WRITE_WITH_IMM; READ and WRITE take none) and
 * the responder has no receive posted (on the QP, or on its SRQ). Every request completed, or
 * only READs and WRITEs outstanding, or receives posted for them: the device's. The first such
 * pair, from the QPs the ranks last reported. */
static bool rnr_possible(const struct vnic_qp_state *req, const struct vnic_qp_state *resp)
{
  return req->sq_takes_recv && !resp->rq_posted;
}

static bool device_owes(const struct coord *c, uint32_t *rank, const struct vnic_qp_state **req,
                        const struct vnic_qp_state **resp)
{
  for (uint32_t i = 0; i < c->n; i++)
    for (uint32_t k = 0; k < c->r[i].nqps; k++) {
      const struct vnic_qp_state *a = &c->r[i].qps[k];
      const struct vnic_qp_state *b = qp_of(c, a->peer, a->dest_qpn);
      if (a->state == VNIC_QP_UNKNOWN || !b || b->dest_qpn != a->qpn ||
          b->state == VNIC_QP_UNKNOWN || rnr_possible(a, b))
        continue;
      uint32_t ahead = (a->sq_psn - b->rq_psn) & 0xffffffu;
      if (ahead == 0 || ahead >= 0x800000u) /* equal, or the responder is past it (wrapped) */
        continue;
      *rank = i;
      *req = a;
      *resp = b;
      return true;
    }
  return false;
}

/* The PSNs of every QP the ranks reported, folded: a change says the device moved. */
static uint64_t device_psns(const struct coord *c)
{
  uint64_t x = 1469598103934665603ull;
  for (uint32_t i = 0; i < c->n; i++)
    for (uint32_t k = 0; k < c->r[i].nqps; k++) {
      const struct vnic_qp_state *q = &c->r[i].qps[k];
      uint64_t v = ((uint64_t)q->qpn << 48) ^ ((uint64_t)q->sq_psn << 24) ^ q->rq_psn;
      x = (x ^ v) * 1099511628211ull;
    }
  return x;
}

/* ----- the run: quiescence detection
 *
 * A rank reports STATE "idle at gen" (gen: its count of completions, async events and timers
 * handed to its engine) after a grace of quiet time, and never reports that it is busy again: a
 * report stands until a probe reply refutes it or the rank reports again. When every rank's report
 * stands (crank.idle), the coordinator sends PROBE; a rank answers after polling its CQs, with
 * whether it is idle and its gen. A reply that is not idle, or whose gen is not its report's,
 * voids that report (crank.idle false: no probe until the rank reports again, which it does once
 * idle for its grace, as it knows its reply refuted it) and the probe; a new report voids the
 * probe in flight. STOP when every reply of one probe confirms its rank's standing report.
 *
 * Why STOP never comes while a rank works or a message is in flight. Say rank i reported idle
 * at gen g_i at time R_i, the probe went out at P (after every R_i: it is sent only when every
 * report was received) and rank i answered at A_i > P, idle, gen g_i. (1) A rank's engine state
 * changes only inside the calls that count gen (a completion, an async event, a timer; a probe
 * polls the CQs first and counts what it found), so equal gens at R_i and A_i mean no call in
 * between: rank i was idle, with no timer set and no send outstanding, throughout [R_i, A_i],
 * which holds P. So at P no rank works, and none posts anything in [R_i, A_i]. (2) A message in
 * flight at P was posted by some rank s before R_s (not in [R_s, A_s]); rank s had no send
 * outstanding at R_s, so its completion had been polled before R_s, and on RC a send completes
 * only after the responder acknowledged it, which (the premise this rests on, as the protocol
 * before it did) it does after it placed the data and wrote its receive completion: rxe's
 * responder completes, then acknowledges (an RDMA READ or WRITE without immediate completes at
 * its requester only; the responder's CPU has nothing to do). So the receiver's completion was in its CQ before R_s < P < A_r: polled
 * before R_r, the message was not in flight at P; polled in [R_r, A_r] (the probe polls first),
 * gen_r moved and the reply refutes the report. No stale report can stop a run either: a report
 * followed by activity has a gen below the rank's at any later probe reply. Old replies are
 * told apart by the probe id. The graces are liveness only: a premature report costs a probe
 * (at most one per report), never a wrong verdict. */

/* The clock of the no-progress judgement (boot_coord_args.clock). */
static uint64_t judge_now(const struct coord *c)
{
  return c->a->clock ? c->a->clock(c->a->clock_ctx) : boot_now_ns();
}

/* Whether some rank's connection has something unread (a message, or its end). */
static bool input_waiting(const struct coord *c)
{
  struct pollfd pf[64];
  for (uint32_t i = 0; i < c->n;) {
    nfds_t k = 0;
    for (; i < c->n && k < 64; i++)
      if (c->r[i].l.fd >= 0)
        pf[k++] = (struct pollfd){.fd = c->r[i].l.fd, .events = POLLIN};
    if (k && poll(pf, k, 0) > 0)
      return true;
  }
  return false;
}

/* Asks every rank whether its progress mark changed (after it polled its CQs). */
static void send_mark_probe(struct coord *c)
{
  struct boot_buf b = {0};
  boot_put64(&b, ++c->rs.mark_id);
  uint64_t dl = boot_now_ns() + 5000000000ull;
  for (uint32_t i = 0; i < c->n; i++) {
    c->r[i].mark_still = false;
    boot_send(&c->r[i].l, BOOT_MARK_PROBE, &b, dl);
  }
  boot_buf_free(&b);
}

static bool all_still(const struct coord *c)
{
  for (uint32_t i = 0; i < c->n; i++)
    if (!c->r[i].mark_still)
      return false;
  return true;
}

/* Every rank answered "still", but its device may owe work: a requester ahead of its peer QP's
 * responder (device_owes), e.g. every request completed while the responder has not reached
 * them. Soft-RoCE on Linux 6.1 with a starved vCPU does that, and most often the work comes,
 * late (backends/verbs/README.md). So the coordinator waits while the device owes work and its
 * QPs' PSNs keep changing, and for DEVICE_PATIENCE bounds after they last changed; then
 * no_progress, and the hang report names the device (device_cause). */
#define DEVICE_PATIENCE 30
static bool device_patient(struct coord *c, uint64_t now)
{
  uint32_t i;
  const struct vnic_qp_state *a, *b;
  if (!device_owes(c, &i, &a, &b)) {
    c->rs.dev_since = 0;
    return false;
  }
  uint64_t psns = device_psns(c);
  if (!c->rs.dev_since || psns != c->rs.dev_psns) {
    c->rs.dev_psns = psns;
    c->rs.dev_since = now;
  }
  return now - c->rs.dev_since < DEVICE_PATIENCE * c->a->no_progress_ns;
}

/* The no-progress bound passed. Not yet a verdict: silence is not proof. A coordinator that did
 * not run for a while (its CPU taken by busy-polling ranks, or the whole machine descheduled)
 * has PROGRESS messages waiting unread, and a rank inside one long system call cannot report
 * (rxe does its protocol work inside ibv_post_send: on a loaded emulated guest one call took
 * 0.6-1.6 s while data moved). So the coordinator suspects and asks every rank (MARK_PROBE);
 * a PROGRESS, or a rank that answers it moved, clears the suspicion; it stops when every rank
 * answered that its mark did not change, or when some did not answer within ANSWER_PATIENCE
 * bounds; and it neither asks nor judges while a message from a rank waits unread. A rank that
 * does not answer is inside a system call or frozen, not waiting in the protocol (a rank in a
 * deadlock polls and answers "still" at once): on rxe the call is its own device's work (the
 * guest's busy RGET soak stopped a run 2.8 s in, the receiver silent inside ibv_post_send with
 * 12 READs and FINs outstanding and 268 receives posted at its peer), so it gets the patience a
 * device that owes work gets. */
#define ANSWER_PATIENCE DEVICE_PATIENCE
static bool run_until(struct coord *c)
{
  uint64_t bound = c->a->no_progress_ns, now = judge_now(c);
  if (c->rs.stop || !bound || now - c->rs.progress_at < bound) {
    c->rs.np_suspect = 0;
    return c->rs.stop;
  }
  /* messages first: a coordinator that did not run for a while finds PROGRESS and answers
   * waiting unread, and neither a question nor a verdict may come before they are read */
  if (input_waiting(c))
    return false;
  if (!c->rs.np_suspect) {
    c->rs.np_suspect = now;
    send_mark_probe(c);
  } else if (all_still(c) || now - c->rs.np_suspect >= ANSWER_PATIENCE * bound) {
    if (device_patient(c, now)) { /* the device owes work: suspect again after a bound */
      c->rs.progress_at = now;
      c->rs.np_suspect = 0;
    } else {
      c->rs.stop = c->rs.no_progress = true;
      for (uint32_t i = 0; i < c->n; i++) /* judged without its word (and without its QPs) */
        if (!c->r[i].mark_still)
          fprintf(stderr, "prepost: no progress: rank %u did not answer whether it moved within "
                          "%u bounds (frozen, or starved inside a system call)\n", i,
                  ANSWER_PATIENCE);
    }
  }
  return c->rs.stop;
}

static void send_probe(struct coord *c)
{
  struct boot_buf b = {0};
  boot_put64(&b, ++c->rs.probe_id);
  uint64_t dl = boot_now_ns() + 5000000000ull;
  for (uint32_t i = 0; i < c->n; i++) {
    c->r[i].replied = false;
    boot_send(&c->r[i].l, BOOT_PROBE, &b, dl);
  }
  c->rs.probing = true;
  boot_buf_free(&b);
}

static enum pp_status on_run_msg(struct coord *c, uint32_t rank, uint32_t type,
                                 struct boot_buf *b)
{
  struct crank *r = &c->r[rank];
  if (type == BOOT_PROGRESS) {
    c->rs.progress_at = judge_now(c);
    return PP_OK;
  }
  if (type == BOOT_MARK_REPLY) {
    uint64_t id = boot_get64(b);
    bool moved = boot_get8(b) != 0;
    if (b->bad)
      return unexpected(c, rank, type);
    if (!b->bad && b->at < b->len) /* what its device says about its QPs now */
      r->nqps = boot_get_qps(b, r->qps, BOOT_MAX_QPS);
    if (b->bad)
      return unexpected(c, rank, type);
    if (!c->rs.np_suspect || id != c->rs.mark_id)
      return PP_OK; /* the suspicion it answers is over */
    if (moved)
      c->rs.progress_at = judge_now(c);
    else
      r->mark_still = true;
    return PP_OK;
  }
  if (type == BOOT_STATE) {
    r->idle = true;
    r->done = boot_get8(b) != 0;
    r->gen = boot_get64(b);
    /* a rank reporting after it answered (it moved since): the probe in flight is void, and a
     * new one starts below if every report stands */
    c->rs.probing = false;
  } else if (type == BOOT_PROBE_REPLY) {
    uint64_t id = boot_get64(b);
    bool idle = boot_get8(b) != 0;
    uint64_t gen = boot_get64(b);
    if (id != c->rs.probe_id || !c->rs.probing)
      return PP_OK; /* a stale reply */
    r->replied = true;
    r->reply_idle = idle;
    r->reply_gen = gen;
    if (b->bad)
      return unexpected(c, rank, type);
    if (!idle || gen != r->gen) {
      /* it moved since its report (this reply is its "busy"): the report and the probe are void,
       * and the rank reports again when it is idle */
      r->idle = false;
      c->rs.probing = false;
      return PP_OK;
    }
  } else {
    return unexpected(c, rank, type);
  }
  if (b->bad)
    return unexpected(c, rank, type);
  bool all_idle = true, all_replied = true;
  for (uint32_t i = 0; i < c->n; i++) {
    all_idle = all_idle && c->r[i].idle;
    all_replied = all_replied && c->r[i].replied && c->r[i].reply_idle &&
                  c->r[i].reply_gen == c->r[i].gen;
  }
  if (c->rs.probing && all_replied)
    c->rs.stop = true; /* nobody moved between the idle reports and the probe */
  else if (all_idle && !c->rs.probing)
    send_probe(c);
  return PP_OK;
}

static enum pp_status on_result_msg(struct coord *c, uint32_t rank, uint32_t type,
                                    struct boot_buf *b)
{
  if (type == BOOT_STATE || type == BOOT_PROBE_REPLY || type == BOOT_PROGRESS ||
      type == BOOT_MARK_REPLY)
    return PP_OK; /* late run messages */
  if (type != BOOT_RESULT)
    return unexpected(c, rank, type);
  struct crank *r = &c->r[rank];
  if (r->result)
    return unexpected(c, rank, type);
  boot_get_result(b, &c->res->ranks[rank], &r->lat);
  if (!b->bad && b->at < b->len) /* what its pending operations wait for */
    r->nwaits = boot_get_waits(b, r->waits, PP_HANG_MAX_WAITS, &r->total_waits);
  if (!b->bad && b->at < b->len) /* its QPs, when it stopped before it was done */
    r->nqps = boot_get_qps(b, r->qps, BOOT_MAX_QPS);
  if (b->bad)
    return unexpected(c, rank, type);
  r->result = true;
  return PP_OK;
}

/* Device-wide hw_counters: ranks sharing one device each read the whole device's counts.
 * Credit them once: requester-side counts to the first sending rank of the device, responder-side
 * counts to the first receiving rank. */
static void credit_counters(struct coord *c, struct pp_run_result *res)
{
  const struct pp_engine_cfg *cfg = c->a->cfg;
  bool *seen = calloc(c->n, sizeof(*seen));
  if (!seen)
    return;
  for (uint32_t i = 0; i < c->n; i++) {
    if (seen[i])
      continue;
    struct pp_nic_counters max = {0};
    int sender = -1, receiver = -1, members = 0;
    for (uint32_t j = i; j < c->n; j++) {
      if (strcmp(c->r[j].host, c->r[i].host) || strcmp(c->r[j].dev, c->r[i].dev) ||
          c->r[j].addr.port != c->r[i].addr.port)
        continue;
      seen[j] = true;
      members++;
      const struct pp_nic_counters *x = &res->ranks[j].nic;
#define MAX_OF(f) max.f = x->f > max.f ? x->f : max.f
      MAX_OF(rnr_naks_sent);
      MAX_OF(rnr_naks_received);
      MAX_OF(rnr_retries);
      MAX_OF(timeout_retries);
      MAX_OF(packets_sent);
#undef MAX_OF
      if (sender < 0 && pp_workload_dest(&cfg->workload, j, c->n) >= 0)
        sender = (int)j;
      if (receiver < 0 && pp_workload_source(&cfg->workload, j, c->n) >= 0)
        receiver = (int)j;
    }
    if (members < 2)
      continue;
    for (uint32_t j = i; j < c->n; j++)
      if (!strcmp(c->r[j].host, c->r[i].host) && !strcmp(c->r[j].dev, c->r[i].dev) &&
          c->r[j].addr.port == c->r[i].addr.port) /* credited below; what is missing stays so */
        res->ranks[j].nic = (struct pp_nic_counters){.missing = res->ranks[j].nic.missing};
    if (sender < 0)
      sender = (int)i;
    if (receiver < 0)
      receiver = (int)i;
    res->ranks[sender].nic.rnr_naks_received = max.rnr_naks_received;
    res->ranks[sender].nic.rnr_retries = max.rnr_retries;
    res->ranks[sender].nic.timeout_retries = max.timeout_retries;
    res->ranks[sender].nic.packets_sent = max.packets_sent;
    res->ranks[receiver].nic.rnr_naks_sent = max.rnr_naks_sent;
  }
  free(seen);
}

/* A device that owes work (device_owes) is the cause of the hang: it replaces the cause the
 * waits gave (kept at the end); the wait-for graph stays as it is. */
static void device_cause(const struct coord *c, struct pp_hang *h)
{
  uint32_t i;
  const struct vnic_qp_state *a, *b;
  if (!device_owes(c, &i, &a, &b))
    return;
  char prev[sizeof(h->cause)];
  memcpy(prev, h->cause, sizeof(prev));
  prev[sizeof(prev) - 1] = '\0';
  uint32_t behind = (a->sq_psn - b->rq_psn) & 0xffffffu;
  int n;
  if (!a->sq_outstanding)
    n = snprintf(h->cause, sizeof(h->cause),
                 "device: rank %u's QP %u (%s) has every request it sent completed (next PSN "
                 "%u), but rank %u's QP %u (%s) expects PSN %u, %u PSNs behind: the device "
                 "completed requests the peer's responder never processed (lost or held by the "
                 "NIC or driver), so the ranks wait for the device, not for each other (waits: "
                 "%s)",
                 i, a->qpn, dev_of(c, i), a->sq_psn, a->peer, b->qpn, dev_of(c, a->peer),
                 b->rq_psn, behind, prev[0] ? prev : "none named");
  else
    n = snprintf(h->cause, sizeof(h->cause),
                 "device: rank %u's QP %u (%s) has %u send WRs outstanding (%u take a receive) "
                 "and sent up to PSN %u, but rank %u's QP %u (%s) expects PSN %u, %u PSNs "
                 "behind, with %u receives posted: no RNR wait, the device has not delivered "
                 "or answered the requests (held by the NIC or driver), so the ranks wait for "
                 "the device, not for each other (waits: %s)",
                 i, a->qpn, dev_of(c, i), a->sq_outstanding, a->sq_takes_recv, a->sq_psn,
                 a->peer, b->qpn, dev_of(c, a->peer), b->rq_psn, behind, b->rq_posted,
                 prev[0] ? prev : "none named");
  if (n < 0 || (size_t)n >= sizeof(h->cause)) /* a cause longer than h->cause is cut */
    h->cause[sizeof(h->cause) - 1] = '\0';
}

/* The hang report from the ranks' RESULTs (a rank that sent no waits: nothing it can name). */
static struct pp_hang *hang_of(struct coord *c, const struct pp_run_result *res)
{
  struct pp_hang *h = pp_run_hang_new(res, c->a->no_progress_ns);
  if (!h)
    return NULL;
  h->clock = PP_HANG_CLOCK_RUN; /* at_ns from the coordinator's GO, waits from each rank's */
  for (uint32_t i = 0; i < c->n; i++)
    pp_hang_set_rank(h, i, res->ranks[i].stats.done ? PP_HANG_DONE : PP_HANG_STUCK, 0,
                     c->r[i].waits, c->r[i].nwaits < c->r[i].total_waits ? c->r[i].total_waits
                                                                         : c->r[i].nwaits);
  pp_hang_analyze(h);
  device_cause(c, h);
  return h;
}

static void outcome(struct coord *c, struct pp_run_result *res, bool timed_out)
{
  for (uint32_t i = 0; i < c->n; i++)
    pp_run_result_add_latency(res, c->r[i].lat);
  enum pp_outcome stuck = c->rs.no_progress ? PP_OUTCOME_NO_PROGRESS
                          : timed_out       ? PP_OUTCOME_TIMEOUT
                                            : PP_OUTCOME_STALLED;
  if (!pp_run_result_finish(res, stuck))
    res->hang = hang_of(c, res);
}

static enum pp_status send_tables(struct coord *c)
{
  uint64_t dl = boot_now_ns() + c->a->boot_timeout_ns;
  for (uint32_t i = 0; i < c->n; i++) {
    struct boot_buf b = {0};
    for (uint32_t j = 0; j < c->n; j++)
      boot_put_addr(&b, &c->r[j].addr);
    for (uint32_t j = 0; j < c->n; j++) {
      boot_put8(&b, c->r[j].has[i]);
      boot_put_conn_info(&b, &c->r[j].info[i]);
    }
    int rc = b.bad ? -1 : boot_send(&c->r[i].l, BOOT_TABLE, &b, dl);
    boot_buf_free(&b);
    if (rc) {
      errf(c->err, c->errlen, "bootstrap: cannot send the table to rank %u (%s)", i,
           c->r[i].host);
      return PP_IO;
    }
  }
  return PP_OK;
}

static enum pp_status broadcast(struct coord *c, enum boot_msg type, const struct boot_buf *b)
{
  uint64_t dl = boot_now_ns() + 5000000000ull;
  for (uint32_t i = 0; i < c->n; i++)
    if (c->r[i].l.fd >= 0 && boot_send(&c->r[i].l, type, b, dl)) {
      errf(c->err, c->errlen, "lost the connection to rank %u (%s)", i, c->r[i].host);
      return PP_IO;
    }
  return PP_OK;
}

enum pp_status boot_coordinate(const struct boot_coord_args *a, struct pp_run_result *res,
                               char *err, size_t errlen)
{
  struct coord c = {.a = a, .n = a->cfg->nranks, .err = err, .errlen = errlen, .res = res,
                    .max_pending = a->max_pending ? a->max_pending : 64,
                    .auth_ns = a->auth_timeout_ns ? a->auth_timeout_ns : 5000000000ull};
  memset(res, 0, sizeof(*res));
  if (!a->secret || sodium_init() < 0) {
    errf(err, errlen, "bootstrap: %s", a->secret ? "libsodium cannot initialise"
                                                 : "no job secret given to the coordinator");
    return PP_INVALID;
  }
  int fl = fcntl(a->listen_fd, F_GETFL);
  if (fl < 0 || fcntl(a->listen_fd, F_SETFL, fl | O_NONBLOCK) < 0) { /* accept_some drains it */
    errf(err, errlen, "bootstrap: listen socket: %s", strerror(errno));
    return PP_IO;
  }
  c.r = calloc(c.n, sizeof(*c.r));
  c.pending = calloc(c.max_pending, sizeof(*c.pending));
  enum pp_status s = c.r && c.pending ? PP_OK : PP_NOMEM;
  for (uint32_t i = 0; c.r && i < c.n; i++)
    c.r[i].l.fd = -1;
  for (uint32_t i = 0; s == PP_OK && i < c.n; i++) {
    c.r[i].has = calloc(c.n, sizeof(bool));
    c.r[i].info = calloc(c.n, sizeof(struct pp_conn_info));
    if (!c.r[i].has || !c.r[i].info)
      s = PP_NOMEM;
  }
  res->nranks = c.n;
  if (s == PP_OK && !(res->ranks = calloc(c.n, sizeof(*res->ranks))))
    s = PP_NOMEM;
  if (s == PP_NOMEM)
    errf(err, errlen, "out of memory");
  bool to = false;
  char miss[128];
  /* 1. every rank says HELLO */
  if (s == PP_OK) {
    s = pump(&c, true, on_hello_phase, all_hello, boot_now_ns() + a->boot_timeout_ns, &to);
    if (s == PP_OK && to) {
      missing_list(&c, 0, miss, sizeof(miss));
      errf(err, errlen,
           "bootstrap: rank(s) %s did not connect to the coordinator at %s within %.0f s", miss,
           a->where, a->boot_timeout_ns / 1e9);
      s = PP_IO;
    }
  }
  for (uint32_t i = 0; i < c.npending; i++) /* no more ranks to come */
    drop_pending(&c, i, "the bootstrap is over");
  c.npending = 0;
  if (c.ndropped && c.nlog > BOOT_LOG_LINES) {
    c.nlog = 0; /* one summary line past the budget */
    coord_log(&c, "bootstrap: %u unauthenticated connection(s) dropped in all", c.ndropped);
  }
  /* 2. the table (unless the ranks exchanged it through PMIx), then every rank READY (its QPs
   * at RTS) */
  if (s == PP_OK && !a->tables_exchanged)
    s = send_tables(&c);
  if (s == PP_OK) {
    s = pump(&c, false, on_ready, all_ready, boot_now_ns() + a->boot_timeout_ns, &to);
    if (s == PP_OK && to) {
      missing_list(&c, 1, miss, sizeof(miss));
      errf(err, errlen, "bootstrap: rank(s) %s did not connect their QPs within %.0f s", miss,
           a->boot_timeout_ns / 1e9);
      s = PP_IO;
    }
  }
  /* 3. GO, run to global quiescence or the time bound */
  uint64_t t0 = boot_now_ns(), t1 = t0;
  bool timed_out = false;
  c.rs.progress_at = judge_now(&c);
  if (s == PP_OK)
    s = broadcast(&c, BOOT_GO, NULL);
  if (s == PP_OK) {
    s = pump(&c, false, on_run_msg, run_until, t0 + a->run_timeout_ns, &timed_out);
    t1 = boot_now_ns();
  }
  /* 4. STOP, results, BYE */
  if (s == PP_OK) {
    struct boot_buf b = {0};
    boot_put8(&b, timed_out);
    s = broadcast(&c, BOOT_STOP, &b);
    boot_buf_free(&b);
  }
  if (s == PP_OK) {
    s = pump(&c, false, on_result_msg, all_results, boot_now_ns() + 30000000000ull, &to);
    if (s == PP_OK && to) {
      missing_list(&c, 2, miss, sizeof(miss));
      errf(err, errlen, "rank(s) %s did not report their results within 30 s", miss);
      s = PP_IO;
    }
  }
  if (s == PP_OK) {
    res->sim_time_ns = t1 - t0;
    credit_counters(&c, res);
    outcome(&c, res, timed_out);
    struct boot_buf b = {0};
    boot_put8(&b, (uint8_t)res->outcome);
    broadcast(&c, BOOT_BYE, &b);
    boot_buf_free(&b);
    close_all(&c);
  } else {
    abort_all(&c, err);
    pp_run_result_free(res);
  }
  for (uint32_t i = 0; c.r && i < c.n; i++) {
    free(c.r[i].has);
    free(c.r[i].info);
    free(c.r[i].lat);
  }
  free(c.r);
  free(c.pending);
  if (a->stats)
    *a->stats = (struct boot_coord_stats){.dropped = c.ndropped, .accept_errors = c.accept_errors};
  return s;
}
