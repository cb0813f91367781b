/*
 * What the tests that work with files share: a scratch directory per test (made in the suite's
 * .init, removed in its .fini) and reading a whole file back. Each helper asserts (Criterion) on
 * its own failures, so a caller never checks a result.
 */
#ifndef PP_TEST_SCRATCH_H
#define PP_TEST_SCRATCH_H

#include <stddef.h>

/* Makes /tmp/prepost-NAME-XXXXXX into dir (dir_size bytes), asserting that it fits and exists. */
void scratch_make(char *dir, size_t dir_size, const char *name);

/* Removes dir and everything in it (a failure is an expectation failed, not an abort). */
void scratch_remove(const char *dir);

/* Writes text to the file at path (created or truncated), asserting that it can. */
void scratch_write(const char *path, const char *text);

/* The whole file at path, NUL-terminated, in a malloc'd buffer the caller frees; its length in
 * *len when len is not NULL. Asserts that the file can be read. */
char *scratch_slurp(const char *path, size_t *len);

#endif
