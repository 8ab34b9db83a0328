/*
 * tickscope_plugin.h: the C ABI of tickscope profiler plug-ins, version 1.1.0.
 *
 * A plug-in is a shared library that exports one function, `TSP_InitProfiler`
 * (TSP_INIT_SYMBOL). tickscope loads it (Profiler::builder().plugin(path), or the
 * TICKSCOPE_PLUGINS variable, paths separated by ':'), calls the init function once with
 * zeroed structs whose `struct_size` says how much of each tickscope knows, and then
 * drives the session through the function table:
 *
 *   start(profiler, status)                 the session starts (again): record from now on;
 *   stop(profiler, status)                  the session stops: stop recording;
 *   collect(profiler, NULL, &size, status)  how many bytes the next collect gives;
 *   collect(profiler, buf, &size, status)   write at most `size` bytes into `buf` (tickscope
 *                                           allocated exactly the size the first call gave),
 *                                           and set `size` to the bytes written;
 *   destroy(profiler)                       the last call: free everything.
 *
 * start, stop and collect repeat, in that order, once per session window: a plug-in must be
 * restartable. Calls come from any thread, one at a time for one loaded plug-in.
 *
 * The bytes are capture chunks, as tickscope's capture files hold them (docs/FORMAT.md):
 * one or more whole sessions (header, clock, strings, callsites, threads, event chunks,
 * footer). A session's clock chunk gives the pairs (tick, Unix ns) of the plug-in's own
 * clock domain, so its events line up with the host's; its session header names a process
 * of its own (say "gpu0"), its thread table the tracks ("stream 1").
 *
 * Versions: every struct begins with `struct_size` and `ext` (reserved, NULL). tickscope
 * sets `struct_size` of the structs it hands over to the size it knows; the plug-in writes
 * the fields that both know (never past tickscope's `struct_size`) and sets `struct_size` of
 * TSP_Profiler and TSP_ProfilerFns to its own sizeof. A plug-in built against an older
 * header is used with the fields it knows, a newer one with the fields tickscope knows; a
 * size smaller than version 1.0's (the *_STRUCT_SIZE_1_0 constants) is an error.
 *
 * A plug-in that tickscope rejects after its init ran (a struct too small, a NULL function)
 * gets its destroy called when its function table is usable (a 1.0 struct_size at least,
 * destroy not NULL), else nothing: such a plug-in should hold nothing.
 *
 * Status: a function that fails sets `code` to a non-zero value and writes a NUL-terminated
 * message into `message`; tickscope reports it, names the plug-in, and the session goes on.
 */
#ifndef TICKSCOPE_PLUGIN_H
#define TICKSCOPE_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TSP_VERSION_MAJOR 1
#define TSP_VERSION_MINOR 1
#define TSP_VERSION_PATCH 0

/* The name of the init function every plug-in exports. */
#define TSP_INIT_SYMBOL "TSP_InitProfiler"

/* Status codes. */
#define TSP_OK 0
#define TSP_ERROR 1

/* The size of `message`, its NUL included. */
#define TSP_MESSAGE_SIZE 256

/* The outcome of a call: tickscope zeroes it (code TSP_OK) before each call. */
typedef struct TSP_Status {
    size_t struct_size;
    void* ext;
    int32_t code;
    char message[TSP_MESSAGE_SIZE];
} TSP_Status;

/* The plug-in's instance. */
typedef struct TSP_Profiler {
    size_t struct_size;
    void* ext;
    /* The plug-in's own state, handed back to every call. */
    void* data;
    /* Since 1.1: the plug-in's name in errors and reports (NUL-terminated, valid until
     * destroy); NULL: the file's name. */
    const char* name;
} TSP_Profiler;

/* The functions tickscope calls; none may be NULL. */
typedef struct TSP_ProfilerFns {
    size_t struct_size;
    void* ext;
    void (*start)(const TSP_Profiler* profiler, TSP_Status* status);
    void (*stop)(const TSP_Profiler* profiler, TSP_Status* status);
    void (*collect)(const TSP_Profiler* profiler, uint8_t* buffer, size_t* size,
                    TSP_Status* status);
    void (*destroy)(const TSP_Profiler* profiler);
} TSP_ProfilerFns;

/* What the init function gets: tickscope's header version and the structs to fill. */
typedef struct TSP_RegistrationParams {
    size_t struct_size;
    void* ext;
    uint32_t major_version;
    uint32_t minor_version;
    uint32_t patch_version;
    TSP_Profiler* profiler;
    TSP_ProfilerFns* fns;
} TSP_RegistrationParams;

/* The init function's type: fill params->profiler and params->fns, or fail in status. */
typedef void (*TSP_InitProfilerFn)(TSP_RegistrationParams* params, TSP_Status* status);

/* Sizes of the first version (1.0) of each struct: smaller is an error. */
#define TSP_PROFILER_STRUCT_SIZE_1_0 offsetof(TSP_Profiler, name)
#define TSP_PROFILER_FNS_STRUCT_SIZE_1_0 sizeof(TSP_ProfilerFns)
#define TSP_STATUS_STRUCT_SIZE_1_0 sizeof(TSP_Status)
#define TSP_REGISTRATION_PARAMS_STRUCT_SIZE_1_0 sizeof(TSP_RegistrationParams)

#ifdef __cplusplus
}
#endif

#endif /* TICKSCOPE_PLUGIN_H */
