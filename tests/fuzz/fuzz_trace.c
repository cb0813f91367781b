/*
 * Fuzz target for the trace reader (engine/trace/trace_read.c).
 *
 *   tests/fuzz/run [SECONDS]     builds it with clang -fsanitize=fuzzer,address,undefined and
 *                                runs it on a copy of tests/fuzz/corpus
 */
#include "fuzz_trace.h"

#include <stdlib.h>
#include <string.h>

#include "prepost/trace.h"
#include "engine/trace/trace_codec.h"

/* Rewrites the CRC of every chunk whose header and payload are inside the buffer. */
static void fix_crcs(uint8_t *p, size_t n)
{
  size_t off = PP_TRACE_FILE_HEADER;
  while (off + PP_TRACE_CHUNK_HEADER <= n) {
    uint32_t len = pp_get_le32(p + off + 4);
    if (len > n - off - PP_TRACE_CHUNK_HEADER)
      return;
    pp_put_le32(p + off + 12, pp_crc32c(0, p + off + PP_TRACE_CHUNK_HEADER, len));
    off += PP_TRACE_CHUNK_HEADER + len;
  }
}

int pp_fuzz_trace_one(const uint8_t *data, size_t size)
{
  if (size < 1)
    return -1;
  unsigned mode = data[0];
  size--;
  /* an exact-size copy: any read past the end is an ASan error */
  uint8_t *p = malloc(size ? size : 1);
  if (!p)
    return -1;
  memcpy(p, data + 1, size);
  if (mode & 1)
    fix_crcs(p, size);
  struct pp_trace t;
  char err[512];
  int n = -1;
  if (pp_trace_open(p, size, mode & 2 ? PP_TRACE_PARTIAL : 0, &t, err, sizeof(err)) == PP_OK) {
    n = 0;
    char line[2048];
    for (size_t i = 0; i < t.nrecs; i++) {
      struct pp_trace_rec r;
      if (pp_trace_get(&t, i, &r) != PP_OK)
        abort(); /* an opened trace decodes */
      pp_trace_rec_format(&r, line, sizeof(line));
      n++;
    }
    for (size_t i = 0; i < t.nkv; i++)
      if (!pp_trace_kv_find(&t, t.kv[i].key))
        abort();
    if (pp_trace_packets(&t) > PP_TRACE_PACKETS_ALL)
      abort();
    struct pp_engine_cfg cfg;
    memset(&cfg, 0, sizeof(cfg));
    (void)pp_trace_engine_cfg(&t, &cfg, err, sizeof(err)); /* format 1's bytes or 2's keys */
    pp_trace_close(&t);
  } else if (strncmp(err, "offset ", 7) != 0 && strncmp(err, "out of memory", 13) != 0) {
    abort(); /* every refusal names its offset */
  }
  free(p);
  return n;
}

#ifdef PP_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  pp_fuzz_trace_one(data, size);
  return 0;
}
#endif
