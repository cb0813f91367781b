/*
 * prepost trace export --svg: a message sequence chart. Ranks are vertical lanes; time runs
 * down, one row per event (the row's time in microseconds on the left), so that bursts stay
 * readable; each message is an arrow from its sender's lane to its receiver's lane (packets on
 * the simulated backend, consuming sends on a verbs trace). RNR NAKs are red, other NAKs orange,
 * ACKs grey; a message that never arrived ends in a cross; error completions are red dots with
 * their ibverbs status. The first --max-events messages are drawn.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tools/export/export_msgs.h"
#include "tools/trace/trace_cli.h"

#define LANE_X0 150
#define LANE_DX 170
#define ROW_Y0 70
#define ROW_DY 18

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

static void label(char *buf, size_t len, const struct pp_xmsg *m)
{
  switch (m->kind) {
  case PP_MK_DATA:
    snprintf(buf, len, "%s psn 0x%x %u B", pp_wr_opcode_name((enum pp_wr_opcode)m->opcode),
             m->psn, m->len);
    break;
  case PP_MK_ACK:
    snprintf(buf, len, "ACK psn 0x%x", m->psn);
    break;
  case PP_MK_RNR_NAK:
    snprintf(buf, len, "RNR NAK psn 0x%x timer %u", m->psn, m->syndrome);
    break;
  case PP_MK_NAK:
    snprintf(buf, len, "NAK 0x%x psn 0x%x", 0x60 | m->syndrome, m->psn);
    break;
  default:
    snprintf(buf, len, "READ RESPONSE psn 0x%x %u B", m->psn, m->len);
  }
}

int pp_export_svg(const struct pp_trace *t, FILE *o, const struct pp_export_opts *opts, char *err,
                  size_t errlen)
{
  struct pp_xmsg *msgs = NULL;
  size_t nmsg = 0;
  if (pp_trace_messages(t, &msgs, &nmsg, err, errlen))
    return -1;
  size_t shown = nmsg < opts->max_events ? nmsg : (size_t)opts->max_events;
  uint64_t t_end = shown ? msgs[shown - 1].t0 : UINT64_MAX;
  for (size_t i = 0; i < shown; i++)
    if (msgs[i].t1 != UINT64_MAX && msgs[i].t1 > t_end)
      t_end = msgs[i].t1;
  if (shown < nmsg && shown)
    t_end = msgs[shown].t0; /* errors up to the first message left out */
  /* error completions within the drawn time */
  struct errc *errs = NULL;
  size_t nerr = 0, errcap = 0;
  for (size_t i = 0; i < t->nrecs; i++) {
    if (t->idx[i].type != PP_TREC_WC || t->idx[i].ts > t_end)
      continue;
    struct pp_trace_rec r;
    if (pp_trace_get(t, i, &r) != PP_OK || r.u.wc.status == PP_WC_SUCCESS)
      continue;
    if (nerr == errcap) {
      errcap = errcap ? errcap * 2 : 16;
      struct errc *n = realloc(errs, errcap * sizeof(*n));
      if (!n)
        break;
      errs = n;
    }
    errs[nerr++] = (struct errc){r.rank, r.ts, r.u.wc.status};
  }
  size_t nev = 0;
  struct ev *ev = malloc((2 * shown + nerr + 1) * sizeof(*ev));
  if (!ev) {
    free(msgs);
    free(errs);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  for (size_t i = 0; i < shown; i++) {
    ev[nev++] = (struct ev){msgs[i].t0, 0, i};
    if (msgs[i].t1 != UINT64_MAX)
      ev[nev++] = (struct ev){msgs[i].t1, 1, i};
  }
  for (size_t i = 0; i < nerr; i++)
    ev[nev++] = (struct ev){errs[i].t, 2, i};
  qsort(ev, nev, sizeof(*ev), ev_cmp);
  /* the row of each message's two ends */
  size_t *row0 = calloc(shown + 1, sizeof(size_t)), *row1 = calloc(shown + 1, sizeof(size_t));
  size_t *erow = calloc(nerr + 1, sizeof(size_t));
  if (!row0 || !row1 || !erow) {
    free(row0);
    free(row1);
    free(erow);
    free(ev);
    free(msgs);
    free(errs);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  for (size_t i = 0; i < nev; i++) {
    if (ev[i].kind == 0)
      row0[ev[i].msg] = i;
    else if (ev[i].kind == 1)
      row1[ev[i].msg] = i;
    else
      erow[ev[i].msg] = i;
  }
  uint32_t lanes = t->nranks;
  unsigned width = LANE_X0 + LANE_DX * lanes + 40;
  unsigned height = ROW_Y0 + ROW_DY * (unsigned)(nev + 2) + 20;
  const struct pp_trace_kv *name = pp_trace_kv_find(t, "scenario.name");
  fprintf(o, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
             "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%u\" height=\"%u\" "
             "viewBox=\"0 0 %u %u\" font-family=\"monospace\" font-size=\"11\">\n",
          width, height, width, height);
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
  fprintf(o, ": %zu of %zu messages</text>\n", shown, nmsg);
  fprintf(o, "<text x=\"10\" y=\"%d\">time (us)</text>\n", ROW_Y0 - 20);
  for (uint32_t r = 0; r < lanes; r++) {
    unsigned x = LANE_X0 + LANE_DX * r;
    fprintf(o, "<text x=\"%u\" y=\"%d\" text-anchor=\"middle\" font-size=\"13\">rank %u</text>\n",
            x, ROW_Y0 - 20, r);
    fprintf(o, "<line class=\"lane\" x1=\"%u\" y1=\"%d\" x2=\"%u\" y2=\"%u\" stroke=\"#444\" "
               "stroke-width=\"1.5\"/>\n", x, ROW_Y0 - 10, x, height - 20);
  }
  uint64_t last_t = UINT64_MAX;
  for (size_t i = 0; i < nev; i++) { /* time labels where the time changes */
    if (ev[i].t == last_t)
      continue;
    last_t = ev[i].t;
    fprintf(o, "<text x=\"10\" y=\"%zu\" fill=\"#666\">%" PRIu64 ".%03u</text>\n",
            ROW_Y0 + ROW_DY * i + 4, ev[i].t / 1000, (unsigned)(ev[i].t % 1000));
  }
  char lab[128];
  for (size_t i = 0; i < shown; i++) {
    const struct pp_xmsg *m = &msgs[i];
    if (m->src >= lanes || m->dst >= lanes)
      continue;
    unsigned x0 = LANE_X0 + LANE_DX * m->src, x1 = LANE_X0 + LANE_DX * m->dst;
    size_t y0 = ROW_Y0 + ROW_DY * row0[i];
    bool lost = m->t1 == UINT64_MAX;
    size_t y1 = lost ? y0 + ROW_DY : ROW_Y0 + ROW_DY * row1[i];
    double xe = lost ? (x0 + x1) / 2.0 : x1;
    label(lab, sizeof(lab), m);
    fprintf(o, "<g class=\"msg %s\"><line x1=\"%u\" y1=\"%zu\" x2=\"%.1f\" y2=\"%zu\" "
               "stroke=\"%s\" stroke-width=\"%s\"%s",
            m->kind == PP_MK_RNR_NAK ? "rnr" : m->kind == PP_MK_ACK ? "ack" : "data", x0, y0, xe,
            y1, color(m->kind), m->kind == PP_MK_ACK ? "0.8" : "1.3",
            lost ? " stroke-dasharray=\"4 3\"" : "");
    if (!lost)
      fprintf(o, " marker-end=\"url(#arrow%d)\"", (int)m->kind);
    fprintf(o, "/>");
    if (lost)
      fprintf(o, "<text x=\"%.1f\" y=\"%zu\" fill=\"%s\" text-anchor=\"middle\">x</text>", xe,
              y1 + 4, color(m->kind));
    int left = x1 < x0;
    fprintf(o, "<text x=\"%d\" y=\"%zu\" fill=\"%s\" text-anchor=\"%s\">", (int)x0 + (left ? -6 : 6),
            y0 - 3, color(m->kind), left ? "end" : "start");
    esc(o, lab);
    fprintf(o, "%s</text><title>", lost ? " (lost)" : "");
    esc(o, lab);
    fprintf(o, ": rank %u to rank %u, %" PRIu64 " ns", m->src, m->dst, m->t0);
    if (!lost)
      fprintf(o, " to %" PRIu64 " ns", m->t1);
    fprintf(o, "</title></g>\n");
  }
  for (size_t i = 0; i < nerr; i++) {
    if (errs[i].rank >= lanes)
      continue;
    unsigned x = LANE_X0 + LANE_DX * errs[i].rank;
    size_t y = ROW_Y0 + ROW_DY * erow[i];
    fprintf(o, "<g class=\"error\"><circle cx=\"%u\" cy=\"%zu\" r=\"5\" fill=\"#d62020\"/>"
               "<text x=\"%u\" y=\"%zu\" fill=\"#d62020\">%s</text></g>\n",
            x, y, x + 8, y + 4, pp_wc_status_name(errs[i].st));
  }
  fprintf(o, "</svg>\n");
  free(row0);
  free(row1);
  free(erow);
  free(ev);
  free(msgs);
  free(errs);
  if (ferror(o)) {
    snprintf(err, errlen, "writing the SVG failed");
    return -1;
  }
  return 0;
}
