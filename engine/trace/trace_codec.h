/* Trace encoding helpers shared by the writer (trace.c) and the reader (trace_read.c): LEB128
 * varints, zigzag for signed values, little-endian fixed-width integers. Not a public header. */
#ifndef PP_TRACE_CODEC_H
#define PP_TRACE_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---------------------------------------------------------------- writing (caller sized) */

static inline uint8_t *pp_put_uv(uint8_t *p, uint64_t v)
{
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

/* Fields that are almost always below 0x80 (statuses, opcodes, flags, small lengths, zeros), a
 * few at a time: one comparison for all of them, then one byte each (the bytes pp_put_uv would
 * write, without its loop and branch per field). */
static inline uint8_t *pp_put_uv4(uint8_t *p, uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
  if ((a | b | c | d) < 0x80) {
    p[0] = (uint8_t)a;
    p[1] = (uint8_t)b;
    p[2] = (uint8_t)c;
    p[3] = (uint8_t)d;
    return p + 4;
  }
  p = pp_put_uv(p, a);
  p = pp_put_uv(p, b);
  p = pp_put_uv(p, c);
  return pp_put_uv(p, d);
}

static inline uint8_t *pp_put_uv3(uint8_t *p, uint64_t a, uint64_t b, uint64_t c)
{
  if ((a | b | c) < 0x80) {
    p[0] = (uint8_t)a;
    p[1] = (uint8_t)b;
    p[2] = (uint8_t)c;
    return p + 3;
  }
  p = pp_put_uv(p, a);
  p = pp_put_uv(p, b);
  return pp_put_uv(p, c);
}

static inline uint8_t *pp_put_uv2(uint8_t *p, uint64_t a, uint64_t b)
{
  if ((a | b) < 0x80) {
    p[0] = (uint8_t)a;
    p[1] = (uint8_t)b;
    return p + 2;
  }
  p = pp_put_uv(p, a);
  return pp_put_uv(p, b);
}

static inline uint64_t pp_zigzag(int64_t v)
{
  return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t pp_unzigzag(uint64_t v)
{
  return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* wr_ids often carry flags in their top byte (1 << 63 for a send): rotated left by 8 they
 * still encode in one or two varint bytes when the rest is a small index. */
static inline uint64_t pp_rotl8(uint64_t v)
{
  return v << 8 | v >> 56;
}

static inline uint64_t pp_rotr8(uint64_t v)
{
  return v >> 8 | v << 56;
}

static inline uint8_t *pp_put_sv(uint8_t *p, int64_t v)
{
  return pp_put_uv(p, pp_zigzag(v));
}

static inline void pp_put_le32(uint8_t *p, uint32_t v)
{
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

static inline void pp_put_le16(uint8_t *p, uint16_t v)
{
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

static inline void pp_put_le64(uint8_t *p, uint64_t v)
{
  pp_put_le32(p, (uint32_t)v);
  pp_put_le32(p + 4, (uint32_t)(v >> 32));
}

static inline uint32_t pp_get_le32(const uint8_t *p)
{
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint16_t pp_get_le16(const uint8_t *p)
{
  return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint64_t pp_get_le64(const uint8_t *p)
{
  return (uint64_t)pp_get_le32(p) | (uint64_t)pp_get_le32(p + 4) << 32;
}

/* ---------------------------------------------------------------- reading (bounds-checked) */

/* A cursor over [p, end). Every get fails (returns -1, leaves *v alone) rather than read past
 * end; `bad` then stays set so a sequence of gets can be checked once. */
struct pp_rd {
  const uint8_t *p, *end;
  int bad;
};

static inline int pp_get_uv(struct pp_rd *r, uint64_t *v)
{
  uint64_t x = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (r->p >= r->end) {
      r->bad = 1;
      return -1;
    }
    uint8_t b = *r->p++;
    if (shift == 63 && b > 1) { /* more than 64 bits */
      r->bad = 1;
      return -1;
    }
    x |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = x;
      return 0;
    }
  }
  r->bad = 1;
  return -1;
}

#endif
