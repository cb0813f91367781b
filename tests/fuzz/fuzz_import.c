/*
 * Fuzz target for the capture import (tools/import/: libpcap's reader under the importer, the
 * RoCE/IB frame decoder, the conversation rebuild, the report, the JSON, the trace and the
 * scenario it writes).
 *
 *   tests/fuzz/run import [SECONDS]   builds it with clang -fsanitize=fuzzer,address,undefined
 *                                     and runs it on copies of tests/captures/*.pcap
 *
 * Each input is read twice: as a whole capture (pcap or pcapng, through fmemopen), and as one
 * frame of every link type the decoder knows, in a buffer of exactly its size (ASan sees any
 * read past the captured bytes). A refusal must say why; nothing may crash, leak or hang.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/import/import.h"

static const int link_types[] = {PP_LT_ETHERNET, PP_LT_RAW,        PP_LT_LINUX_SLL, PP_LT_IPV4,
                                 PP_LT_IPV6,     PP_LT_INFINIBAND, PP_LT_LINUX_SLL2};

static void as_capture(const uint8_t *data, size_t size)
{
  FILE *f = fmemopen((void *)data, size ? size : 1, "rb");
  if (!f)
    return;
  struct pp_import *m = NULL;
  char err[512] = "";
  if (pp_import_pcap_fp(f, "fuzz", &m, err, sizeof(err)) != 0) {
    if (!err[0])
      abort(); /* a refusal says why */
    return;    /* pp_import_pcap_fp closed f */
  }
  FILE *null = fopen("/dev/null", "w");
  if (null) {
    pp_import_report(m, "fuzz", null);
    pp_import_json(m, "fuzz", null);
    if (pp_import_scenario(m, "fuzz", null, err, sizeof(err)) != 0 && !err[0])
      abort();
    fclose(null);
  }
  if (pp_import_trace(m, "fuzz", "/dev/null", "fuzz", err, sizeof(err)) != 0 && !err[0])
    abort();
  pp_import_free(m);
}

static void as_frame(const uint8_t *data, size_t size)
{
  uint8_t *p = malloc(size ? size : 1);
  if (!p)
    return;
  memcpy(p, data, size);
  for (size_t i = 0; i < sizeof(link_types) / sizeof(link_types[0]); i++) {
    struct pp_ib_pkt k;
    char why[256] = "";
    uint32_t len = (uint32_t)size + (size & 1 ? 64 : 0); /* the snapshot cut it, or not */
    int d = pp_ib_decode(link_types[i], p, (uint32_t)size, len, &k, why, sizeof(why));
    if (d < -1 || d > 1 || (d == -1 && !why[0]) || (d == 1 && k.payload > len))
      abort();
    if (d == 1) {
      char a[64];
      pp_ib_addr_format(&k.src, a, sizeof(a));
      pp_ib_addr_format(&k.dst, a, sizeof(a));
      (void)pp_ib_opcode_name(k.opcode);
    }
  }
  free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  as_capture(data, size);
  as_frame(data, size);
  return 0;
}
