/*
 * TCP bootstrap and control channel of the verbs driver; see boot.h for the protocol.
 */
#define _GNU_SOURCE /* accept4 */
#include "boot.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

uint64_t boot_now_ns(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void errf(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void errf(char *err, size_t len, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  if (err && len)
    vsnprintf(err, len, fmt, ap);
  va_end(ap);
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

/* A latency histogram (engine/hist.h): 0, or 1, count, min, max, sum and the non-empty buckets
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

void boot_result_free(struct pp_run_result *res)
{
  for (uint32_t i = 0; res->ranks && i < res->nranks; i++)
    free(res->ranks[i].receives);
  free(res->ranks);
  res->ranks = NULL;
  if (res->hang)
    pp_hang_free(res->hang);
  free(res->hang);
  res->hang = NULL;
  free(res->latency_hist);
  res->latency_hist = NULL;
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
    if (x.kind >= PP_WAIT_KIND_COUNT)
      b->bad = true;
    if (!b->bad && got < max)
      w[got++] = x;
  }
  return b->bad ? 0 : got;
}

void boot_put_hello(struct boot_buf *b, uint32_t rank, const struct pp_engine_cfg *cfg,
                    const struct vnic_addr *addr, const char *host, const char *dev,
                    const bool *has, const struct pp_conn_info *info)
{
  char h[BOOT_HOST_MAX] = {0}, d[VNIC_NAME_MAX] = {0};
  snprintf(h, sizeof(h), "%s", host);
  snprintf(d, sizeof(d), "%s", dev);
  boot_put32(b, BOOT_MAGIC);
  boot_put32(b, rank);
  boot_put32(b, cfg->nranks);
  boot_put64(b, boot_cfg_hash(cfg));
  boot_put_addr(b, addr);
  boot_put_bytes(b, h, sizeof(h));
  boot_put_bytes(b, d, sizeof(d));
  for (uint32_t j = 0; j < cfg->nranks; j++) {
    boot_put8(b, has[j]);
    boot_put_conn_info(b, &info[j]);
  }
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

int boot_send(int fd, enum boot_msg type, const struct boot_buf *payload, uint64_t deadline)
{
  uint32_t len = payload ? (uint32_t)payload->len : 0;
  uint8_t h[8];
  for (int i = 0; i < 4; i++) {
    h[i] = (uint8_t)((uint32_t)type >> (8 * i));
    h[4 + i] = (uint8_t)(len >> (8 * i));
  }
  if (write_all(fd, h, 8, deadline))
    return -1;
  return len ? write_all(fd, payload->p, len, deadline) : 0;
}

int boot_send_text(int fd, enum boot_msg type, const char *text, uint64_t deadline)
{
  struct boot_buf b = {0};
  boot_put_bytes(&b, text, strlen(text));
  int rc = boot_send(fd, type, &b, deadline);
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

int boot_recv(int fd, uint32_t *type, struct boot_buf *b, uint64_t deadline, char *err,
              size_t errlen)
{
  uint8_t h[8];
  int rc = read_all(fd, h, 8, deadline, err, errlen);
  if (rc <= 0)
    return rc;
  uint32_t len = 0;
  *type = 0;
  for (int i = 0; i < 4; i++) {
    *type |= (uint32_t)h[i] << (8 * i);
    len |= (uint32_t)h[4 + i] << (8 * i);
  }
  if (len > BOOT_MAX_MSG) {
    errf(err, errlen, "message of %u bytes: not a prepost peer?", len);
    return -1;
  }
  b->len = b->at = 0;
  b->bad = false;
  if (!grow(b, len)) {
    errf(err, errlen, "out of memory");
    return -1;
  }
  b->len = len;
  /* the header arrived: the body follows at once, give it a little extra time */
  rc = read_all(fd, b->p, len, deadline > boot_now_ns() + 5000000000ull ? deadline
                                                                       : boot_now_ns() + 5000000000ull,
                err, errlen);
  if (rc == 0)
    errf(err, errlen, "truncated message");
  return rc == 1 ? 1 : -1;
}

/* ---------------------------------------------------------------- coordinator */

struct crank {
  int fd;
  bool hello, ready, idle, done, replied, reply_idle, result;
  uint64_t gen, reply_gen;
  struct vnic_addr addr;
  char host[BOOT_HOST_MAX], dev[VNIC_NAME_MAX];
  bool *has;                 /* [nranks]: has a pp_conn_info for rank j */
  struct pp_conn_info *info; /* [nranks] */
  struct pp_hist *lat; /* from its RESULT, NULL when it records no latency */
  struct pp_wait waits[PP_HANG_MAX_WAITS]; /* from its RESULT */
  uint32_t nwaits, total_waits;
};

struct run_state {
  uint64_t probe_id;
  bool probing;
  bool stop;
  bool no_progress;   /* stopped by the no-progress bound */
  uint64_t progress_at; /* the last PROGRESS from any rank (or GO) */
  uint64_t np_suspect;  /* when the bound was first seen passed (0: not yet; run_until) */
};

struct coord {
  const struct boot_coord_args *a;
  struct run_state rs;
  struct pp_run_result *res;
  uint32_t n;
  struct crank *r;
  int pending[PP_MAX_RANKS]; /* connections that have not said HELLO yet */
  uint32_t npending;
  char *err;
  size_t errlen;
};

static void close_all(struct coord *c)
{
  for (uint32_t i = 0; i < c->npending; i++)
    close(c->pending[i]);
  c->npending = 0;
  for (uint32_t i = 0; i < c->n; i++)
    if (c->r[i].fd >= 0) {
      close(c->r[i].fd);
      c->r[i].fd = -1;
    }
}

static void abort_all(struct coord *c, const char *why)
{
  uint64_t dl = boot_now_ns() + 1000000000ull;
  for (uint32_t i = 0; i < c->n; i++)
    if (c->r[i].fd >= 0)
      boot_send_text(c->r[i].fd, BOOT_ABORT, why, dl);
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

static enum pp_status handle_hello(struct coord *c, int fd, struct boot_buf *b)
{
  uint32_t magic = boot_get32(b), rank = boot_get32(b), nranks = boot_get32(b);
  uint64_t hash = boot_get64(b);
  if (b->bad || magic != BOOT_MAGIC) {
    errf(c->err, c->errlen, "bootstrap: a connection to %s sent garbage (not a prepost rank?)",
         c->a->where);
    return PP_PARSE;
  }
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
  struct crank *r = &c->r[rank];
  if (r->hello) {
    errf(c->err, c->errlen, "bootstrap: rank %u connected twice (two processes with --rank %u?)",
         rank, rank);
    return PP_INVALID;
  }
  boot_get_addr(b, &r->addr);
  boot_get_bytes(b, r->host, sizeof(r->host));
  boot_get_bytes(b, r->dev, sizeof(r->dev));
  r->host[sizeof(r->host) - 1] = r->dev[sizeof(r->dev) - 1] = '\0';
  for (uint32_t j = 0; j < c->n; j++) {
    r->has[j] = boot_get8(b) != 0;
    boot_get_conn_info(b, &r->info[j]);
  }
  if (b->bad) {
    errf(c->err, c->errlen, "bootstrap: rank %u sent a truncated HELLO", rank);
    return PP_PARSE;
  }
  r->fd = fd;
  r->hello = true;
  return PP_OK;
}

/* Waits for messages from identified ranks (or new connections during HELLO) until `until`
 * returns true or the deadline passes. */
typedef enum pp_status (*on_msg_fn)(struct coord *c, uint32_t rank, uint32_t type,
                                    struct boot_buf *b);

static enum pp_status pump(struct coord *c, bool accepting, on_msg_fn on_msg,
                           bool (*until)(struct coord *), uint64_t deadline, bool *timed_out)
{
  struct pollfd *pf = calloc(c->n + PP_MAX_RANKS + 1, sizeof(*pf));
  uint32_t *who = calloc(c->n + PP_MAX_RANKS + 1, sizeof(*who));
  struct boot_buf b = {0};
  enum pp_status s = pf && who ? PP_OK : PP_NOMEM;
  char e2[256];
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
    nfds_t k = 0;
    if (accepting)
      pf[k] = (struct pollfd){.fd = c->a->listen_fd, .events = POLLIN}, who[k++] = UINT32_MAX;
    for (uint32_t i = 0; accepting && i < c->npending; i++)
      pf[k] = (struct pollfd){.fd = c->pending[i], .events = POLLIN}, who[k++] = PP_MAX_RANKS + i;
    for (uint32_t i = 0; i < c->n; i++)
      if (c->r[i].fd >= 0)
        pf[k] = (struct pollfd){.fd = c->r[i].fd, .events = POLLIN}, who[k++] = i;
    int ms = ms_until(deadline);
    if (ms > 100)
      ms = 100;
    int got = poll(pf, k, ms);
    if (got < 0 && errno != EINTR) {
      errf(c->err, c->errlen, "coordinator: poll: %s", strerror(errno));
      s = PP_IO;
    }
    for (nfds_t i = 0; got > 0 && s == PP_OK && i < k; i++) {
      if (!pf[i].revents)
        continue;
      if (who[i] == UINT32_MAX) {
        int fd = accept4(c->a->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0 && c->npending < PP_MAX_RANKS) {
          tune(fd);
          c->pending[c->npending++] = fd;
        } else if (fd >= 0) {
          close(fd);
        }
        continue;
      }
      if (who[i] >= PP_MAX_RANKS) {
        uint32_t p = who[i] - PP_MAX_RANKS;
        int fd = c->pending[p];
        uint32_t type;
        int rc = boot_recv(fd, &type, &b, boot_now_ns() + 5000000000ull, e2, sizeof(e2));
        c->pending[p] = -1;
        if (rc == 1 && type == BOOT_HELLO) {
          s = handle_hello(c, fd, &b);
          if (s != PP_OK)
            close(fd);
        } else if (rc == 1 && type == BOOT_ERROR) {
          errf(c->err, c->errlen, "a rank failed: %.*s", (int)b.len, (const char *)b.p);
          close(fd);
          s = PP_IO;
        } else {
          close(fd); /* a stray connection (port scanner, wrong program): ignore it */
        }
        continue;
      }
      uint32_t rank = who[i];
      uint32_t type;
      int rc = boot_recv(c->r[rank].fd, &type, &b, boot_now_ns() + 5000000000ull, e2, sizeof(e2));
      if (rc != 1) {
        errf(c->err, c->errlen, "rank %u (%s) went away: %s", rank, c->r[rank].host, e2);
        close(c->r[rank].fd);
        c->r[rank].fd = -1;
        s = PP_IO;
      } else if (type == BOOT_ERROR) {
        errf(c->err, c->errlen, "rank %u failed: %.*s", rank, (int)b.len, (const char *)b.p);
        s = PP_IO;
      } else {
        s = on_msg(c, rank, type, &b);
      }
    }
    /* compact the pending list */
    uint32_t w = 0;
    for (uint32_t i = 0; i < c->npending; i++)
      if (c->pending[i] >= 0)
        c->pending[w++] = c->pending[i];
    c->npending = w;
  }
  free(pf);
  free(who);
  boot_buf_free(&b);
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

static enum pp_status unexpected(struct coord *c, uint32_t rank, uint32_t type)
{
  errf(c->err, c->errlen, "rank %u sent an unexpected message (type %u)", rank, type);
  return PP_PARSE;
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
  (void)b;
  return unexpected(c, rank, type);
}

/* ----- the run: quiescence detection */

/* The no-progress bound passed. Not yet a verdict: a coordinator that did not run for a while
 * (its CPU taken by busy-polling ranks, or the whole machine descheduled) has PROGRESS messages
 * waiting unread. So it suspects first, and stops only if none came in the next bound/8 (every
 * rank that moves reports each bound/8), read in the meantime by pump(). */
static bool run_until(struct coord *c)
{
  uint64_t bound = c->a->no_progress_ns, now = boot_now_ns();
  if (c->rs.stop || !bound || now - c->rs.progress_at < bound) {
    c->rs.np_suspect = 0;
    return c->rs.stop;
  }
  if (!c->rs.np_suspect)
    c->rs.np_suspect = now;
  else if (now - c->rs.np_suspect >= (bound / 8 ? bound / 8 : 1))
    c->rs.stop = c->rs.no_progress = true;
  return c->rs.stop;
}

static void send_probe(struct coord *c)
{
  struct boot_buf b = {0};
  boot_put64(&b, ++c->rs.probe_id);
  uint64_t dl = boot_now_ns() + 5000000000ull;
  for (uint32_t i = 0; i < c->n; i++) {
    c->r[i].replied = false;
    boot_send(c->r[i].fd, BOOT_PROBE, &b, dl);
  }
  c->rs.probing = true;
  boot_buf_free(&b);
}

static enum pp_status on_run_msg(struct coord *c, uint32_t rank, uint32_t type,
                                 struct boot_buf *b)
{
  struct crank *r = &c->r[rank];
  if (type == BOOT_PROGRESS) {
    c->rs.progress_at = boot_now_ns();
    return PP_OK;
  }
  if (type == BOOT_STATE) {
    r->idle = boot_get8(b) != 0;
    r->done = boot_get8(b) != 0;
    r->gen = boot_get64(b);
    /* somebody moved (or reports moving after it answered): the probe in flight is void, and a
     * new one starts below if everyone is idle */
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
    if (!idle || gen != r->gen) {
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
  if (type == BOOT_STATE || type == BOOT_PROBE_REPLY || type == BOOT_PROGRESS)
    return PP_OK; /* late run messages */
  if (type != BOOT_RESULT)
    return unexpected(c, rank, type);
  struct crank *r = &c->r[rank];
  if (r->result)
    return unexpected(c, rank, type);
  boot_get_result(b, &c->res->ranks[rank], &r->lat);
  if (!b->bad && b->at < b->len) /* what its pending operations wait for */
    r->nwaits = boot_get_waits(b, r->waits, PP_HANG_MAX_WAITS, &r->total_waits);
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

/* The hang report from the ranks' RESULTs (a rank that sent no waits: nothing it can name). */
static struct pp_hang *hang_of(struct coord *c, const struct pp_run_result *res)
{
  struct pp_hang *h = malloc(sizeof(*h));
  if (!h || pp_hang_init(h, c->n) != PP_OK) {
    free(h);
    return NULL;
  }
  h->trigger = res->outcome == PP_OUTCOME_NO_PROGRESS ? PP_HANG_TRIGGER_NO_PROGRESS
               : res->outcome == PP_OUTCOME_TIMEOUT   ? PP_HANG_TRIGGER_TIMEOUT
                                                      : PP_HANG_TRIGGER_QUIESCENCE;
  h->clock = PP_HANG_CLOCK_RUN; /* at_ns from the coordinator's GO, waits from each rank's */
  h->at_ns = res->sim_time_ns;
  h->no_progress_ns = c->a->no_progress_ns;
  for (uint32_t i = 0; i < c->n; i++)
    pp_hang_set_rank(h, i, res->ranks[i].stats.done ? PP_HANG_DONE : PP_HANG_STUCK, 0,
                     c->r[i].waits, c->r[i].nwaits < c->r[i].total_waits ? c->r[i].total_waits
                                                                         : c->r[i].nwaits);
  pp_hang_analyze(h);
  return h;
}

static void outcome(struct coord *c, struct pp_run_result *res, bool timed_out)
{
  uint64_t errors = 0;
  bool all_done = true;
  for (uint32_t i = 0; i < c->n; i++) {
    const struct pp_rank_result *rr = &res->ranks[i];
    for (int k = 1; k < PP_WC_STATUS_COUNT; k++)
      errors += rr->stats.status_counts[k];
    errors += rr->stats.corrupt;
    all_done = all_done && rr->stats.done;
    if (!c->r[i].lat)
      continue;
    if (!res->latency_hist && (res->latency_hist = malloc(sizeof(*res->latency_hist))))
      pp_hist_reset(res->latency_hist);
    if (res->latency_hist)
      pp_hist_merge(res->latency_hist, c->r[i].lat);
  }
  if (res->latency_hist) /* the same percentiles as the simulator's (engine/hist.h) */
    pp_hist_summarize(res->latency_hist, &res->latency);
  if (errors)
    res->outcome = PP_OUTCOME_ERRORS;
  else if (all_done)
    res->outcome = PP_OUTCOME_COMPLETED;
  else
    res->outcome = c->rs.no_progress ? PP_OUTCOME_NO_PROGRESS
                   : timed_out       ? PP_OUTCOME_TIMEOUT
                                     : PP_OUTCOME_STALLED;
  if (!all_done)
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
    int rc = b.bad ? -1 : boot_send(c->r[i].fd, BOOT_TABLE, &b, dl);
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
    if (c->r[i].fd >= 0 && boot_send(c->r[i].fd, type, b, dl)) {
      errf(c->err, c->errlen, "lost the connection to rank %u (%s)", i, c->r[i].host);
      return PP_IO;
    }
  return PP_OK;
}

enum pp_status boot_coordinate(const struct boot_coord_args *a, struct pp_run_result *res,
                               char *err, size_t errlen)
{
  struct coord c = {.a = a, .n = a->cfg->nranks, .err = err, .errlen = errlen, .res = res};
  memset(res, 0, sizeof(*res));
  c.r = calloc(c.n, sizeof(*c.r));
  enum pp_status s = c.r ? PP_OK : PP_NOMEM;
  for (uint32_t i = 0; s == PP_OK && i < c.n; i++) {
    c.r[i].fd = -1;
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
  for (uint32_t i = 0; i < c.npending; i++)
    close(c.pending[i]);
  c.npending = 0;
  /* 2. the table, then every rank READY (its QPs at RTS) */
  if (s == PP_OK)
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
  c.rs.progress_at = t0;
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
    boot_result_free(res);
  }
  for (uint32_t i = 0; c.r && i < c.n; i++) {
    free(c.r[i].has);
    free(c.r[i].info);
    free(c.r[i].lat);
  }
  free(c.r);
  return s;
}
