/*
 * tickscope.h: record scopes from C or C++ code linked into a Rust program that uses
 * tickscope with its `native` feature (src/native.rs). The scopes go to the sessions that
 * record the calling thread, nested with the Rust scopes around them.
 *
 *     static uint32_t site = 0;
 *     if (site == 0) site = tickscope_callsite("solve", __FILE__, __LINE__);
 *     tickscope_scope_begin(site);
 *     ... the work ...
 *     tickscope_scope_end();
 */
#ifndef TICKSCOPE_H
#define TICKSCOPE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The id of the callsite `name` at `file`:`line` (registered once; keep the id). 0 for a
 * NULL name; a NULL file is "<native>". */
uint32_t tickscope_callsite(const char* name, const char* file, uint32_t line);

/* Opens a scope of `callsite` on this thread (an unknown id records nothing). */
void tickscope_scope_begin(uint32_t callsite);

/* Closes the innermost scope this thread opened with tickscope_scope_begin. */
void tickscope_scope_end(void);

#ifdef __cplusplus
}
#endif

#endif /* TICKSCOPE_H */
