/* prepost calibrate's NIC profile from measurements (tools/calibrate/calib.h): what each
 * measurement sets, and that the written profile loads back as the same profile. The
 * measurements themselves run on a device: tests/verbs/suite.sh (step calibrate). */
#define _POSIX_C_SOURCE 200809L
#include "tools/calibrate/calib.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/scenario/scenario.h"

/* measurements shaped like rxe's under emulation: RNR delays of whole 4 ms ticks plus noise */
static void rxe_like(struct pp_calib *c)
{
  memset(c, 0, sizeof *c);
  snprintf(c->name, sizeof c->name, "rxe-test");
  snprintf(c->device, sizeof c->device, "rxe0");
  c->mtu = 1024;
  c->max_qp = 1u << 17, c->max_qp_wr = 1u << 20, c->max_srq = 1u << 17;
  c->max_mr = 1u << 18, c->cq_depth = 1u << 25, c->max_rd_atomic = 128;
  c->sizes[0] = (struct pp_calib_size){.size = 64, .lat_ns = 90000, .bw_bytes_s = 2e6};
  c->sizes[1] = (struct pp_calib_size){.size = 65536, .lat_ns = 900000, .bw_bytes_s = 150e6};
  c->nsizes = 2;
  c->wqe_rate = 40000, c->wqe_size = 64;
  c->ack_msgs = 1600, c->ack_packets = 1600;
  static const uint8_t codes[] = {1, 12, 14, 20};
  static const uint64_t delays[] = {8600000, 9100000, 12300000, 18600000};
  for (uint32_t i = 0; i < 4; i++)
    c->rnr[c->nrnr++] = (struct pp_calib_rnr){.code = codes[i], .retries = 2, .reps = 3,
                                              .delay_ns = delays[i], .delay_min_ns = delays[i],
                                              .delay_max_ns = delays[i] + 1000};
  c->tmo[c->ntmo++] = (struct pp_calib_timeout){.code = 10, .t0_ns = 8e6, .t1_ns = 16e6};
}

Test(calibrate, rnr_delay_of_a_measurement)
{
  cr_assert_eq(pp_calib_rnr_delay(1000, 21000, 2), 10000u);
  cr_assert_eq(pp_calib_rnr_delay(1000, 1000, 2), 0u, "no longer: no delay");
  cr_assert_eq(pp_calib_rnr_delay(5000, 1000, 2), 0u, "noise that went backwards: none");
  cr_assert_eq(pp_calib_rnr_delay(0, 1000, 0), 0u);
}

Test(calibrate, the_measurements_set_the_profile)
{
  struct pp_calib c;
  rxe_like(&c);
  struct pp_nic_profile p, def;
  pp_calib_profile(&c, &p);
  pp_nic_profile_default(&def);
  cr_assert_str_eq(p.name, "rxe-test");
  cr_assert_eq(p.mtu, 1024);
  cr_assert_eq(p.wqe_ns, 25000, "1 / 40,000 per second");
  cr_assert_eq(p.ack_every, 1, "an ACK per WRITE");
  cr_assert_eq(p.ack_delay_ns, 0);
  cr_assert_eq(p.line_rate_bps, 150e6 * 8, "the best bandwidth measured");
  cr_assert_eq(p.max_qp, 1u << 17);
  cr_assert_eq(p.cq_depth, 1u << 24, "clamped to what a profile allows");
  cr_assert_eq(p.max_rd_atomic, 128);
  cr_assert_eq(p.header_bytes, def.header_bytes, "not measured: the default's");
  cr_assert_eq(p.rnr_delay_ns[1], 8600000u);
  cr_assert_eq(p.rnr_delay_ns[20], 18600000u);
  cr_assert_eq(p.rnr_delay_ns[13], 0u, "not measured: not in the table");
  cr_assert_eq(p.rnr_min_ns, 8600000u, "code 1 waited 860 times its 10 us: a floor");
  c.rnr[0].delay_ns = 30000000; /* a noisy code 1: the floor is the least any code waited */
  pp_calib_profile(&c, &p);
  cr_assert_eq(p.rnr_min_ns, 9100000u);
  cr_assert_eq(simnic_rnr_delay_ns(&p, 12), 9100000u, "no measured code raised by the floor");
  cr_assert_eq(simnic_rnr_delay_ns(&p, 1), 30000000u);
  rxe_like(&c);
  pp_calib_profile(&c, &p);
  cr_assert_eq(simnic_rnr_delay_ns(&p, 5), 8600000u, "an unmeasured short code: the floor");
  cr_assert_eq(simnic_rnr_delay_ns(&p, 0), pp_rnr_timer_ns(0), "a long one: the spec's");
  char err[256];
  cr_assert_eq(pp_nic_profile_check(&p, err, sizeof err), PP_OK, "%s", err);
}

Test(calibrate, a_device_that_keeps_the_spec_gets_no_floor)
{
  struct pp_calib c;
  memset(&c, 0, sizeof c);
  c.rnr[0] = (struct pp_calib_rnr){.code = 12, .delay_ns = 650000};  /* 640 us */
  c.rnr[1] = (struct pp_calib_rnr){.code = 14, .delay_ns = 1300000}; /* 1.28 ms */
  c.rnr[2] = (struct pp_calib_rnr){.code = 3, .delay_ns = 0};        /* not measured */
  c.nrnr = 3;
  struct pp_nic_profile p, def;
  pp_calib_profile(&c, &p);
  pp_nic_profile_default(&def);
  cr_assert_eq(p.rnr_min_ns, 0u);
  cr_assert_eq(p.rnr_delay_ns[12], 650000u);
  cr_assert_eq(p.rnr_delay_ns[3], 0u);
  cr_assert_str_eq(p.name, "calibrated");
  cr_assert_eq(p.wqe_ns, def.wqe_ns, "nothing measured: the default's");
  cr_assert_eq(p.ack_every, def.ack_every);
  cr_assert_eq(p.line_rate_bps, def.line_rate_bps);
  cr_assert_eq(p.max_qp, def.max_qp);
}

/* The written file loads (pp_nic_profile_load) as the profile pp_calib_profile gives, field by
 * field, and says every measurement in a comment. */
Test(calibrate, the_written_profile_loads_back)
{
  struct pp_calib c;
  rxe_like(&c);
  char path[] = "/tmp/prepost-test-calib-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  FILE *f = fdopen(fd, "w+");
  cr_assert_not_null(f);
  cr_assert_eq(pp_calib_write(f, &c), 0);
  cr_assert_eq(fflush(f), 0);
  rewind(f);
  static char text[16384];
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = '\0';
  fclose(f);
  cr_assert(strstr(text, "code  1: IBTA     0.010 ms, measured     8.600 ms"), "%s", text);
  cr_assert(strstr(text, "ACK timeout code 10"), "%s", text);
  cr_assert(strstr(text, "65536 B  latency      900.0 us"), "%s", text);
  struct pp_nic_profile want, got;
  pp_calib_profile(&c, &want);
  char err[512];
  cr_assert_eq(pp_nic_profile_load(path, &got, err, sizeof err), PP_OK, "%s\n%s", err, text);
  unlink(path);
  cr_assert_str_eq(got.name, want.name);
  cr_assert_eq(got.mtu, want.mtu);
  cr_assert_eq(got.header_bytes, want.header_bytes);
  cr_assert_eq(got.wqe_ns, want.wqe_ns);
  cr_assert_eq(got.ack_every, want.ack_every);
  cr_assert_eq(got.ack_delay_ns, want.ack_delay_ns);
  cr_assert_eq(got.max_qp, want.max_qp);
  cr_assert_eq(got.max_qp_wr, want.max_qp_wr);
  cr_assert_eq(got.max_srq, want.max_srq);
  cr_assert_eq(got.max_mr, want.max_mr);
  cr_assert_eq(got.cq_depth, want.cq_depth);
  cr_assert_eq(got.max_rd_atomic, want.max_rd_atomic);
  cr_assert_eq(got.train_max, want.train_max);
  cr_assert_eq(got.line_rate_bps, want.line_rate_bps);
  cr_assert_eq(got.rnr_tick_ns, want.rnr_tick_ns);
  cr_assert_eq(got.rnr_min_ns, want.rnr_min_ns);
  for (unsigned k = 0; k < 32; k++)
    cr_assert_eq(got.rnr_delay_ns[k], want.rnr_delay_ns[k], "code %u", k);
  cr_assert_eq(got.rc_model, want.rc_model);
}

/* Writes c's profile to a temporary file and loads it back into *got; the text into text. */
static void write_and_load(const struct pp_calib *c, struct pp_nic_profile *got, char *text,
                           size_t size)
{
  char path[] = "/tmp/prepost-test-calib-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  FILE *f = fdopen(fd, "w+");
  cr_assert_not_null(f);
  cr_assert_eq(pp_calib_write(f, c), 0);
  cr_assert_eq(fflush(f), 0);
  rewind(f);
  size_t n = fread(text, 1, size - 1, f);
  text[n] = '\0';
  fclose(f);
  char err[512];
  cr_assert_eq(pp_nic_profile_load(path, got, err, sizeof err), PP_OK, "%s\n%s", err, text);
  unlink(path);
}

/* c's profile has the retry rules want (why), both as pp_calib_profile gives it and as written
 * and loaded again; the written text (in text) says `says`. */
static void expect_rc_model(const struct pp_calib *c, enum pp_rc_model want, const char *why,
                            const char *says, char *text, size_t size)
{
  struct pp_nic_profile p;
  pp_calib_profile(c, &p);
  cr_assert_eq(p.rc_model, want, "%s", why);
  write_and_load(c, &p, text, size);
  cr_assert_eq(p.rc_model, want, "%s (as loaded)", why);
  cr_assert(strstr(text, says), "%s", text);
}

/* retry_cnt 7 against a dead peer: still retrying at the bound is rxe's rules (rc_model rxe),
 * RETRY_EXC_ERR within it the IBTA's, not measured the IBTA's too; the profile says which. */
Test(calibrate, retry_cnt_7_sets_the_retry_rules)
{
  static char text[16384];
  struct pp_calib c;
  rxe_like(&c);
  expect_rc_model(&c, PP_RC_IBTA, "not measured: the IBTA's",
                  "retry_cnt 7 against a dead peer: not measured", text, sizeof text);
  c.retry7 = (struct pp_calib_retry7){.measured = true, .code = 10, .bound_ns = 136000000};
  expect_rc_model(&c, PP_RC_RXE, "never gave up: rxe's", "still retrying after\n#   136.000 ms",
                  text, sizeof text);
  cr_assert(strstr(text, "\nrc_model: rxe\n"), "%s", text);
  c.retry7.failed = true;
  c.retry7.t_ns = 64000000;
  expect_rc_model(&c, PP_RC_IBTA, "gave up: the IBTA's", "RETRY_EXC_ERR after\n#   64.000 ms",
                  text, sizeof text);
  cr_assert(strstr(text, "\nrc_model: ibta\n"), "%s", text);
}
