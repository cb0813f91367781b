// The engine library from C++, without any backend: names and values of the NIC interface (equal
// to ibverbs'), the configuration check of a rank, latency percentiles, and a trace written
// through a sink into memory and read back. Exit 0 when every check holds.
#include <prepost/engine.h>
#include <prepost/hist.h>
#include <prepost/nic.h>
#include <prepost/status.h>
#include <prepost/trace.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

int failures = 0;

void check(bool ok, const std::string &what)
{
  std::printf("%-56s %s\n", what.c_str(), ok ? "ok" : "FAILED");
  failures += ok ? 0 : 1;
}

pp_engine_cfg rank_cfg()
{
  pp_engine_cfg c{};
  c.nranks = 2;
  c.protocol = PP_PROTO_EAGER;
  c.qp = pp_qp_params{12, 0, 14, 7, 16, 4096, 128, 64};
  c.workload.kind = PP_WORKLOAD_STREAM;
  c.workload.pattern = PP_PATTERN_PAIR;
  c.workload.messages = 100;
  c.workload.size = 4096;
  pp_p2p_params_default(pp_p2p_params_of(&c));
  c.seed = 1;
  return c;
}

void names()
{
  for (int p = 0; p < PP_PROTO_COUNT; p++) {
    const char *name = pp_protocol_name(static_cast<pp_protocol>(p));
    check(pp_protocol_from_name(name) == p, std::string("protocol ") + name + " by name");
  }
  check(pp_protocol_from_name("no-such-protocol") == -1, "an unknown protocol is -1");
  check(std::strcmp(pp_status_name(PP_AGAIN), "AGAIN") == 0, "status name AGAIN");
  check(pp_wc_status_from_name("RNR_RETRY_EXC_ERR") == 13, "RNR_RETRY_EXC_ERR is ibverbs' 13");
  check(std::strcmp(pp_wc_status_name(PP_WC_WR_FLUSH_ERR), "WR_FLUSH_ERR") == 0,
        "wc status 5 is WR_FLUSH_ERR");
  check(pp_mtu_bytes(PP_MTU_4096) == 4096 && pp_mtu_from_bytes(1024) == PP_MTU_1024,
        "MTU enum and bytes");
  check(pp_rnr_timer_ns(1) == 10000 && pp_rnr_timer_ns(0) == 655360000,
        "min_rnr_timer codes 1 and 0");
  check(pp_qp_transition_ok(PP_QPS_INIT, PP_QPS_RTR) && !pp_qp_transition_ok(PP_QPS_RESET, PP_QPS_RTS),
        "QP transitions INIT->RTR yes, RESET->RTS no");
}

void configuration()
{
  char err[256] = "";
  pp_engine_cfg c = rank_cfg();
  check(pp_engine_cfg_check(&c, err, sizeof err) == PP_OK, "a valid configuration passes");
  c.qp.mtu = 3000;
  err[0] = '\0';
  check(pp_engine_cfg_check(&c, err, sizeof err) == PP_INVALID && err[0] != '\0',
        "MTU 3000 is refused with a sentence");
  std::printf("  (%s)\n", err);
}

void latency()
{
  std::vector<uint64_t> ns;
  for (uint64_t i = 100; i >= 1; i--)
    ns.push_back(i * 1000);
  // the engine keeps latencies in a bounded log-linear histogram (prepost/hist.h): 58 KiB,
  // nearest-rank percentiles within 1/256 of the exact value, count/min/max exact
  auto h = std::make_unique<pp_hist>();
  pp_hist_reset(h.get());
  for (uint64_t v : ns)
    pp_hist_record(h.get(), v);
  pp_hist_summary l{};
  pp_hist_summarize(h.get(), &l);
  auto near = [](uint64_t got, uint64_t want) {
    return got * 256 >= want * 255 && got * 256 <= want * 257;
  };
  check(l.count == 100 && l.min == 1000 && l.max == 100000 && near(l.p50, 50000) &&
            near(l.p99, 99000),
        "a histogram of 1..100 us: count, min, max exact, p50/p99 within 1/256");
}

int to_vector(void *ctx, const void *buf, size_t len)
{
  auto *out = static_cast<std::vector<uint8_t> *>(ctx);
  const auto *b = static_cast<const uint8_t *>(buf);
  out->insert(out->end(), b, b + len);
  return 0;
}

void trace()
{
  std::vector<uint8_t> file;
  pp_trace_info info{};
  info.version = "example";
  info.backend = "none";
  info.scenario = "engine-cxx";
  info.seed = 42;
  info.nranks = 2;
  pp_trace_writer *w = nullptr;
  check(pp_trace_writer_create(to_vector, &file, &info, &w) == PP_OK, "trace writer created");
  if (!w)
    return;
  pp_engine_cfg c = rank_cfg();
  check(pp_trace_kv_engine_cfg(w, &c) == PP_OK && pp_trace_kv_str(w, "example.note", "hi") == PP_OK &&
            pp_trace_begin(w) == PP_OK && pp_trace_finish(w) == PP_OK,
        "configuration written, trace finished");
  pp_trace_writer_destroy(w);

  pp_trace t{};
  char err[256] = "";
  enum pp_status st = pp_trace_open(file.data(), file.size(), 0, &t, err, sizeof err);
  check(st == PP_OK, std::string("trace read back: ") + pp_status_name(st) + " " + err);
  if (st != PP_OK)
    return;
  const pp_trace_kv *seed = pp_trace_kv_find(&t, "seed");
  const pp_trace_kv *note = pp_trace_kv_find(&t, "example.note");
  check(seed && seed->u == 42, "key seed is 42");
  check(note && std::strcmp(note->s, "hi") == 0, "key example.note is \"hi\"");
  pp_engine_cfg back{};
  char note_text[256] = "";
  check(pp_trace_engine_cfg(&t, &back, note_text, sizeof note_text) == PP_OK &&
            back.protocol == PP_PROTO_EAGER && back.qp.mtu == 4096 && back.workload.messages == 100,
        "engine configuration read back");
  check(t.complete, "trace complete (END chunk, totals match)");
  pp_trace_close(&t);
}

} // namespace

int main()
{
  names();
  configuration();
  latency();
  trace();
  std::printf("%s\n", failures ? "engine-cxx: FAILED" : "engine-cxx: every check passed");
  return failures ? 1 : 0;
}
