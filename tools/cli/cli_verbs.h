/* The verbs side of the prepost command line: `run --backend verbs`, `doctor`, `bench`,
 * `calibrate`. */
#ifndef PP_CLI_VERBS_H
#define PP_CLI_VERBS_H

/* Exit code when the backend cannot start: no device, port down, bootstrap failure. */
#define PP_EXIT_BACKEND 4

extern const char *const pp_cli_verbs_run_usage;
extern const char *const pp_cli_doctor_usage;
extern const char *const pp_cli_bench_usage;
extern const char *const pp_cli_calibrate_usage;

/* argv: the arguments after "run" (they contain --backend verbs). */
int pp_cli_run_verbs(int argc, char **argv);
/* argv: the arguments after "doctor" / "bench". */
int pp_cli_doctor(int argc, char **argv);
int pp_cli_bench(int argc, char **argv);
/* tools/bench/bench_verbs.c */
int pp_verbs_bench_main(int argc, char **argv);
/* tools/calibrate/calibrate.c: the arguments after "calibrate" */
int pp_cli_calibrate(int argc, char **argv);

#endif
