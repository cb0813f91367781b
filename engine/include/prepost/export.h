/*
 * What every public header of prepost wraps its declarations in.
 *
 * The libraries are built with -fvisibility=hidden: a function is exported from libprepost.so
 * (libprepost-sim.so, libprepost-verbs.so) when, and only when, a public header under
 * include/prepost/ declares it between PP_API_BEGIN and PP_API_END (a declaration's visibility
 * carries over to its definition). Functions of the internal headers stay inside the libraries.
 * PP_API does the same for one declaration.
 *
 * Each public header also puts its declarations in an `extern "C"` block, so a C++ program links
 * against the C libraries.
 */
#ifndef PP_EXPORT_H
#define PP_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define PP_API __attribute__((visibility("default")))
#define PP_API_BEGIN _Pragma("GCC visibility push(default)")
#define PP_API_END _Pragma("GCC visibility pop")
#else
#define PP_API
#define PP_API_BEGIN
#define PP_API_END
#endif

#endif
