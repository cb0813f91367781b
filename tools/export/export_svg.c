/*
 * prepost trace export --svg: a message sequence chart. Ranks are vertical lanes and time runs
 * down: by default one row per event (the row's time in microseconds on the left), so that bursts
 * stay readable; with a time scale (--time-scale T: T of trace time per pixel) each event sits at
 * its time, with a ruler on the left. Each message is an arrow from its sender's lane to its
 * receiver's lane (packets with --trace-packets; otherwise each send that consumes a receive,
 * paired with the receive completion it caused, plus the RNR NAKs and NAKs the trace holds as
 * packets).
 *
 * What an arrow says: the protocol's name of the message (EAGER, RTS, CTS, FIN, ACK, CREDIT for
 * p2p; data and credit for the rings; the opcode for a protocol without named messages or a
 * packet: tools/export/export_msgs.h, the names Perfetto's export uses too), its PSN only where
 * the trace has one (packets), its bytes. RNR NAKs are red, other NAKs orange, ACKs grey. A
 * message that did not arrive is dashed and ends half-way with a cross and the reason: "lost"
 * for a packet the network dropped; for a send, the status of its completion at the sender
 * (WR_FLUSH_ERR, RNR_RETRY_EXC_ERR, ...), "in flight" when the send completed well but the trace
 * ended before the receive completion, or "no completion". Error completions are red dots with
 * their ibverbs status. Lanes are as wide as the longest label needs. The first --max-events
 * messages are drawn.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tools/export/export_msgs.h"
#include "tools/trace/trace_cli.h"

#define LANE_X0 150
#define LANE_DX_MIN 170
#define CHAR_PX 6.7 /* an 11 px monospace glyph's advance, rounded up */
#define ROW_Y0 70
#define ROW_DY 18
#define MAX_PX 200000u /* pixels: a taller or wider picture is refused with what to do instead */
#define RULER_PX 100       /* pixels between two ticks of the time ruler */

struct ev {
  uint64_t t;
  uint32_t kind; /* 0 message leaves, 1 arrives, 2 error completion */
  size_t msg;    /* message index, or error index */
};

struct errc {
  uint32_t rank;
  uint64_t t;
  enum pp_wc_status st;
};

/* Everything one picture needs; freed by chart_free(). */
struct chart {
  struct pp_xmsg *msgs;
  size_t nmsg, shown;
  const char **name; /* shown entries: the protocol's name of each message */
  const char **fate; /* shown entries: why it did not arrive (NULL: it did) */
  struct errc *errs;
  size_t nerr;
  struct ev *ev;
  size_t nev;
  size_t *row0, *row1, *erow; /* the event index of each message's ends and of each error */
  uint64_t t_first, ns_per_px;
  unsigned lane_dx, width, height;
};

static int ev_cmp(const void *a, const void *b)
{
  const struct ev *x = a, *y = b;
  if (x->t != y->t)
    return x->t < y->t ? -1 : 1;
  if (x->kind != y->kind)
    return x->kind < y->kind ? -1 : 1;
  return x->msg < y->msg ? -1 : x->msg > y->msg;
}

static void esc(FILE *o, const char *s)
{
  for (; *s; s++) {
    if (*s == '&')
      fputs("&amp;", o);
    else if (*s == '<')
      fputs("&lt;", o);
    else if (*s == '>')
      fputs("&gt;", o);
    else if (*s == '"')
      fputs("&quot;", o);
    else if ((unsigned char)*s >= 0x20)
      fputc(*s, o);
  }
}

static const char *color(enum pp_msg_kind k)
{
  switch (k) {
  case PP_MK_DATA:
    return "#1f5fbf";
  case PP_MK_READ_RESP:
    return "#2a8a2a";
  case PP_MK_ACK:
    return "#999999";
  case PP_MK_RNR_NAK:
    return "#d62020";
  default:
    return "#e07000";
  }
}

/* The text next to an arrow: name, PSN where known, bytes or NAK details, and its fate. */
static void label(char *buf, size_t len, const struct pp_xmsg *m, const char *name,
                  const char *fate)
{
  char psn[24] = "";
  if (pp_xmsg_has_psn(m))
    snprintf(psn, sizeof(psn), " psn 0x%x", m->psn);
  char tail[40] = "";
  if (fate)
    snprintf(tail, sizeof(tail), " (%s)", fate);
  switch (m->kind) {
  case PP_MK_ACK:
    snprintf(buf, len, "%s%s%s", name, psn, tail);
    break;
  case PP_MK_RNR_NAK:
    snprintf(buf, len, "%s%s timer %u%s", name, psn, m->syndrome, tail);
    break;
  case PP_MK_NAK:
    snprintf(buf, len, "%s 0x%x%s%s", name, 0x60 | m->syndrome, psn, tail);
    break;
  default:
    snprintf(buf, len, "%s%s %u B%s", name, psn, m->len, tail);
  }
}

/* A send's completion at its sender: (rank, qp, wr_id) -> the shown message waiting for it. */
struct slot {
  uint32_t rank, qpn;
  uint64_t wr_id;
  size_t msg; /* SIZE_MAX: empty */
};

static size_t slot_hash(uint32_t rank, uint32_t qpn, uint64_t wr_id, size_t cap)
{
  uint64_t h = (wr_id ^ ((uint64_t)rank << 32 | qpn)) * 0x9e3779b97f4a7c15ull;
  return (size_t)(h >> 17) & (cap - 1);
}

static const char NO_COMPLETION[] = "no completion";

/* Why each shown message that never arrived did not: one pass over the completions, with the
 * waiting sends in an open-addressed table (the first completion after the post wins). */
static int fates(const struct pp_trace *t, struct chart *c)
{
  size_t cap = 16;
  while (cap < 2 * c->shown + 2)
    cap *= 2;
  struct slot *tab = malloc(cap * sizeof(*tab));
  if (!tab)
    return -1;
  for (size_t i = 0; i < cap; i++)
    tab[i].msg = SIZE_MAX;
  size_t waiting = 0, first = t->nrecs;
  for (size_t i = 0; i < c->shown; i++) {
    const struct pp_xmsg *m = &c->msgs[i];
    if (m->t1 != UINT64_MAX)
      continue;
    if (m->send_rec == SIZE_MAX) {
      c->fate[i] = "lost"; /* a packet sent and never received: the network dropped it */
      continue;
    }
    struct pp_trace_rec r;
    c->fate[i] = NO_COMPLETION;
    if (m->send_rec >= t->nrecs || pp_trace_get(t, m->send_rec, &r) != PP_OK)
      continue;
    size_t h = slot_hash(m->src, m->src_qpn, r.u.send.wr.wr_id, cap);
    while (tab[h].msg != SIZE_MAX)
      h = (h + 1) & (cap - 1);
    tab[h] = (struct slot){m->src, m->src_qpn, r.u.send.wr.wr_id, i};
    waiting++;
    first = m->send_rec < first ? m->send_rec : first;
  }
  for (size_t i = first; waiting && i < t->nrecs; i++) {
    struct pp_trace_rec r;
    if (t->idx[i].type != PP_TREC_WC || pp_trace_get(t, i, &r) != PP_OK)
      continue;
    const struct pp_wc *wc = &r.u.wc;
    for (size_t h = slot_hash(r.rank, wc->qp_num, wc->wr_id, cap); tab[h].msg != SIZE_MAX;
         h = (h + 1) & (cap - 1)) {
      struct slot *s = &tab[h];
      if (s->rank != r.rank || s->qpn != wc->qp_num || s->wr_id != wc->wr_id ||
          i <= c->msgs[s->msg].send_rec || c->fate[s->msg] != NO_COMPLETION)
        continue;
      c->fate[s->msg] = wc->status == PP_WC_SUCCESS ? "in flight" : pp_wc_status_name(wc->status);
      waiting--;
      break;
    }
  }
  free(tab);
  return 0;
}

/* Error completions up to t_end. */
static int collect_errors(const struct pp_trace *t, uint64_t t_end, struct chart *c)
{
  size_t cap = 0;
  for (size_t i = 0; i < t->nrecs; i++) {
    if (t->idx[i].type != PP_TREC_WC || t->idx[i].ts > t_end)
      continue;
    struct pp_trace_rec r;
    if (pp_trace_get(t, i, &r) != PP_OK || r.u.wc.status == PP_WC_SUCCESS)
      continue;
    if (c->nerr == cap) {
      cap = cap ? cap * 2 : 16;
      struct errc *n = realloc(c->errs, cap * sizeof(*n));
      if (!n)
        return -1;
      c->errs = n;
    }
    c->errs[c->nerr++] = (struct errc){r.rank, r.ts, r.u.wc.status};
  }
  return 0;
}

/* The events in time order, and the row of each message's two ends and of each error. */
static int order_events(struct chart *c)
{
  c->ev = malloc((2 * c->shown + c->nerr + 1) * sizeof(*c->ev));
  c->row0 = calloc(c->shown + 1, sizeof(size_t));
  c->row1 = calloc(c->shown + 1, sizeof(size_t));
  c->erow = calloc(c->nerr + 1, sizeof(size_t));
  if (!c->ev || !c->row0 || !c->row1 || !c->erow)
    return -1;
  for (size_t i = 0; i < c->shown; i++) {
    c->ev[c->nev++] = (struct ev){c->msgs[i].t0, 0, i};
    if (c->msgs[i].t1 != UINT64_MAX)
      c->ev[c->nev++] = (struct ev){c->msgs[i].t1, 1, i};
  }
  for (size_t i = 0; i < c->nerr; i++)
    c->ev[c->nev++] = (struct ev){c->errs[i].t, 2, i};
  qsort(c->ev, c->nev, sizeof(*c->ev), ev_cmp);
  for (size_t i = 0; i < c->nev; i++) {
    if (c->ev[i].kind == 0)
      c->row0[c->ev[i].msg] = i;
    else if (c->ev[i].kind == 1)
      c->row1[c->ev[i].msg] = i;
    else
      c->erow[c->ev[i].msg] = i;
  }
  c->t_first = c->nev ? c->ev[0].t : 0;
  return 0;
}

/* The y of event i: its row, or its time on the scale. */
static double ev_y(const struct chart *c, size_t i)
{
  if (!c->ns_per_px)
    return ROW_Y0 + (double)ROW_DY * (double)i;
  return ROW_Y0 + (double)(c->ev[i].t - c->t_first) / (double)c->ns_per_px;
}

static void chart_free(struct chart *c)
{
  free(c->msgs);
  free(c->name);
  free(c->fate);
  free(c->errs);
  free(c->ev);
  free(c->row0);
  free(c->row1);
  free(c->erow);
}

/* Names, fates, errors, events, and the picture's size (refused when too tall). */
static int chart_build(const struct pp_trace *t, const struct pp_export_opts *opts,
                       struct chart *c, char *err, size_t errlen)
{
  if (pp_trace_messages(t, &c->msgs, &c->nmsg, err, errlen))
    return -1;
  c->shown = c->nmsg < opts->max_events ? c->nmsg : (size_t)opts->max_events;
  c->ns_per_px = opts->svg_ns_per_px;
  uint64_t t_end = c->shown ? c->msgs[c->shown - 1].t0 : UINT64_MAX;
  for (size_t i = 0; i < c->shown; i++)
    if (c->msgs[i].t1 != UINT64_MAX && c->msgs[i].t1 > t_end)
      t_end = c->msgs[i].t1;
  if (c->shown < c->nmsg && c->shown)
    t_end = c->msgs[c->shown].t0; /* errors up to the first message left out */
  c->name = calloc(c->shown + 1, sizeof(*c->name));
  c->fate = calloc(c->shown + 1, sizeof(*c->fate));
  if (!c->name || !c->fate || fates(t, c) || collect_errors(t, t_end, c) || order_events(c)) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  struct pp_xnames names;
  pp_xnames_of(t, &names);
  size_t longest = 0;
  char lab[160];
  for (size_t i = 0; i < c->shown; i++) {
    c->name[i] = pp_xmsg_name(t, &names, &c->msgs[i]);
    label(lab, sizeof(lab), &c->msgs[i], c->name[i], c->fate[i]);
    longest = strlen(lab) > longest ? strlen(lab) : longest;
  }
  double need = (double)longest * CHAR_PX + 16; /* the label between two neighbouring lanes */
  c->lane_dx = need > LANE_DX_MIN ? (unsigned)need : LANE_DX_MIN;
  double bottom = c->nev ? ev_y(c, c->nev - 1) : ROW_Y0;
  if (bottom + 2 * ROW_DY + 20 > MAX_PX || (uint64_t)c->lane_dx * t->nranks > MAX_PX) {
    snprintf(err, errlen, "the chart would be %.0f by %u pixels, more than %u: use a larger "
             "--time-scale, or fewer --max-events", bottom + 2 * ROW_DY + 20,
             LANE_X0 + c->lane_dx * t->nranks + 40, MAX_PX);
    return -1;
  }
  c->width = LANE_X0 + c->lane_dx * t->nranks + 40;
  c->height = (unsigned)bottom + 2 * ROW_DY + 20;
  return 0;
}

static void draw_head(FILE *o, const struct pp_trace *t, const struct chart *c)
{
  const struct pp_trace_kv *name = pp_trace_kv_find(t, "scenario.name");
  fprintf(o, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
             "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%u\" height=\"%u\" "
             "viewBox=\"0 0 %u %u\" font-family=\"monospace\" font-size=\"11\">\n",
          c->width, c->height, c->width, c->height);
  fprintf(o, "<defs>\n");
  const enum pp_msg_kind kinds[] = {PP_MK_DATA, PP_MK_ACK, PP_MK_RNR_NAK, PP_MK_NAK,
                                    PP_MK_READ_RESP};
  for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
    fprintf(o, "<marker id=\"arrow%d\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" "
               "markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\">"
               "<path d=\"M 0 0 L 10 5 L 0 10 z\" fill=\"%s\"/></marker>\n",
            (int)kinds[k], color(kinds[k]));
  fprintf(o, "</defs>\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
  fprintf(o, "<text x=\"10\" y=\"20\" font-size=\"14\">");
  esc(o, name && name->type == PP_TKV_STR ? name->s : "trace");
  fprintf(o, ": %zu of %zu messages</text>\n", c->shown, c->nmsg);
  fprintf(o, "<text x=\"10\" y=\"%d\">time (us)</text>\n", ROW_Y0 - 20);
  for (uint32_t r = 0; r < t->nranks; r++) {
    unsigned x = LANE_X0 + c->lane_dx * r;
    fprintf(o, "<text x=\"%u\" y=\"%d\" text-anchor=\"middle\" font-size=\"13\">rank %u</text>\n",
            x, ROW_Y0 - 20, r);
    fprintf(o, "<line class=\"lane\" x1=\"%u\" y1=\"%d\" x2=\"%u\" y2=\"%u\" stroke=\"#444\" "
               "stroke-width=\"1.5\"/>\n", x, ROW_Y0 - 10, x, c->height - 20);
  }
}

static void time_text(FILE *o, double y, uint64_t t)
{
  fprintf(o, "<text x=\"10\" y=\"%.1f\" fill=\"#666\">%" PRIu64 ".%03u</text>\n", y + 4,
          t / 1000, (unsigned)(t % 1000));
}

/* Rows: the time where it changes. To scale: a ruler with a tick every RULER_PX pixels. */
static void draw_times(FILE *o, const struct chart *c)
{
  if (c->ns_per_px) {
    fprintf(o, "<g class=\"ruler\">");
    for (double y = ROW_Y0; y < c->height - 20; y += RULER_PX) {
      fprintf(o, "<line x1=\"70\" y1=\"%.1f\" x2=\"%u\" y2=\"%.1f\" stroke=\"#eee\"/>", y,
              c->width - 20, y);
      time_text(o, y, c->t_first + (uint64_t)((y - ROW_Y0) * (double)c->ns_per_px));
    }
    fprintf(o, "</g>\n");
    return;
  }
  uint64_t last_t = UINT64_MAX;
  for (size_t i = 0; i < c->nev; i++) {
    if (c->ev[i].t == last_t)
      continue;
    last_t = c->ev[i].t;
    time_text(o, ev_y(c, i), c->ev[i].t);
  }
}

static void draw_message(FILE *o, const struct chart *c, uint32_t lanes, size_t i)
{
  const struct pp_xmsg *m = &c->msgs[i];
  if (m->src >= lanes || m->dst >= lanes)
    return;
  unsigned x0 = LANE_X0 + c->lane_dx * m->src, x1 = LANE_X0 + c->lane_dx * m->dst;
  double y0 = ev_y(c, c->row0[i]);
  const char *fate = c->fate[i];
  double y1 = fate ? y0 + ROW_DY : ev_y(c, c->row1[i]);
  double xe = fate ? (x0 + x1) / 2.0 : x1;
  char lab[160];
  label(lab, sizeof(lab), m, c->name[i], fate);
  const char *cls = m->kind == PP_MK_RNR_NAK ? "rnr" : m->kind == PP_MK_ACK ? "ack" : "data";
  fprintf(o, "<g class=\"msg %s%s\"><line x1=\"%u\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
             "stroke=\"%s\" stroke-width=\"%s\"%s",
          cls, fate ? " undelivered" : "", x0, y0, xe, y1, color(m->kind),
          m->kind == PP_MK_ACK ? "0.8" : "1.3", fate ? " stroke-dasharray=\"4 3\"" : "");
  if (!fate)
    fprintf(o, " marker-end=\"url(#arrow%d)\"", (int)m->kind);
  fprintf(o, "/>");
  if (fate)
    fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\" text-anchor=\"middle\">x</text>", xe,
            y1 + 4, color(m->kind));
  int left = x1 < x0;
  fprintf(o, "<text x=\"%d\" y=\"%.1f\" fill=\"%s\" text-anchor=\"%s\">", (int)x0 + (left ? -6 : 6),
          y0 - 3, color(m->kind), left ? "end" : "start");
  esc(o, lab);
  fprintf(o, "</text><title>");
  esc(o, lab);
  fprintf(o, ": %s, rank %u to rank %u, %" PRIu64 " ns",
          m->kind == PP_MK_DATA ? pp_wr_opcode_name((enum pp_wr_opcode)m->opcode) : "packet",
          m->src, m->dst, m->t0);
  if (!fate)
    fprintf(o, " to %" PRIu64 " ns", m->t1);
  fprintf(o, "</title></g>\n");
}

static void draw_errors(FILE *o, const struct chart *c, uint32_t lanes)
{
  for (size_t i = 0; i < c->nerr; i++) {
    if (c->errs[i].rank >= lanes)
      continue;
    unsigned x = LANE_X0 + c->lane_dx * c->errs[i].rank;
    double y = ev_y(c, c->erow[i]);
    fprintf(o, "<g class=\"error\"><circle cx=\"%u\" cy=\"%.1f\" r=\"5\" fill=\"#d62020\"/>"
               "<text x=\"%u\" y=\"%.1f\" fill=\"#d62020\">%s</text></g>\n",
            x, y, x + 8, y + 4, pp_wc_status_name(c->errs[i].st));
  }
}

int pp_export_svg(const struct pp_trace *t, FILE *o, const struct pp_export_opts *opts, char *err,
                  size_t errlen)
{
  struct chart c = {0};
  if (chart_build(t, opts, &c, err, errlen)) {
    chart_free(&c);
    return -1;
  }
  draw_head(o, t, &c);
  draw_times(o, &c);
  for (size_t i = 0; i < c.shown; i++)
    draw_message(o, &c, t->nranks, i);
  draw_errors(o, &c, t->nranks);
  fprintf(o, "</svg>\n");
  chart_free(&c);
  if (ferror(o)) {
    snprintf(err, errlen, "writing the SVG failed");
    return -1;
  }
  return 0;
}
