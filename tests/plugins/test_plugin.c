/*
 * The plug-in of tests/plugins.rs, built by the tests into shared objects, one per variant
 * (-D flags). It hands back the capture bytes of payload.h (PAYLOAD, written by the test),
 * and misbehaves as its variant says:
 *
 *   OLD_PROFILER     a 1.0 plug-in: TSP_Profiler without `name`;
 *   NEW_PROFILER     a newer plug-in: a TSP_Profiler with a field tickscope does not know;
 *   PROFILER_SIZE=n  claims n as TSP_Profiler's struct_size;
 *   FNS_SIZE=n       claims n as TSP_ProfilerFns's struct_size;
 *   NULL_COLLECT     leaves `collect` NULL;
 *   NO_INIT          exports no init function;
 *   INIT_FAILS       the init function fails;
 *   FAIL_STOP        stop fails (collect still works);
 *   BIGGER_SECOND    the fill call fills the buffer and reports 4096 bytes more;
 *   MALFORMED        a malformed chunk after the payload;
 *   COLLECT_ERROR    the fill call writes the payload, then fails.
 */
#include <stdlib.h>
#include <string.h>

#include "tickscope_plugin.h"
#include "payload.h"

#ifdef NEW_PROFILER
typedef struct {
    TSP_Profiler known;
    uint64_t from_the_future;
} NewProfiler;
#endif

typedef struct {
    int running;
    unsigned starts;
} State;

#ifdef MALFORMED
/* A chunk header without the TSCP magic. */
static const unsigned char GARBAGE[32] = "TSCX\x05\x00\x01\x00\x10";
#endif

static void fail(TSP_Status* status, const char* message) {
    status->code = TSP_ERROR;
    strncpy(status->message, message, TSP_MESSAGE_SIZE - 1);
}

static void start(const TSP_Profiler* profiler, TSP_Status* status) {
    State* state = profiler->data;
    (void)status;
    state->running = 1;
    state->starts += 1;
}

static void stop(const TSP_Profiler* profiler, TSP_Status* status) {
    State* state = profiler->data;
    state->running = 0;
#ifdef FAIL_STOP
    fail(status, "stop refused");
#else
    (void)status;
#endif
}

static size_t total(void) {
#ifdef MALFORMED
    return sizeof PAYLOAD + sizeof GARBAGE;
#else
    return sizeof PAYLOAD;
#endif
}

static void collect(const TSP_Profiler* profiler, uint8_t* buffer, size_t* size,
                    TSP_Status* status) {
    size_t n = total();
    (void)profiler;
    if (buffer == NULL) {
        *size = n;
        return;
    }
    if (n > *size) {
        n = *size;
    }
    memcpy(buffer, PAYLOAD, n < sizeof PAYLOAD ? n : sizeof PAYLOAD);
#ifdef MALFORMED
    memcpy(buffer + sizeof PAYLOAD, GARBAGE, n - sizeof PAYLOAD);
#endif
    *size = n;
#ifdef BIGGER_SECOND
    *size = n + 4096;
#endif
#ifdef COLLECT_ERROR
    fail(status, "device reset");
#else
    (void)status;
#endif
}

static void destroy(const TSP_Profiler* profiler) {
    free(profiler->data);
}

#ifdef NO_INIT
void TSP_InitProfilerTypo(TSP_RegistrationParams* params, TSP_Status* status);
void TSP_InitProfilerTypo(TSP_RegistrationParams* params, TSP_Status* status)
#else
void TSP_InitProfiler(TSP_RegistrationParams* params, TSP_Status* status);
void TSP_InitProfiler(TSP_RegistrationParams* params, TSP_Status* status)
#endif
{
    TSP_Profiler* profiler = params->profiler;
    TSP_ProfilerFns* fns = params->fns;
    size_t known = profiler->struct_size;
#ifdef INIT_FAILS
    fail(status, "no device found");
    return;
#else
    (void)status;
#endif
    if (params->major_version != TSP_VERSION_MAJOR) {
        fail(status, "built for another major version");
        return;
    }
#ifndef FNS_SIZE
    /* A function table tickscope rejects as too small cannot be destroyed: nothing to free. */
    profiler->data = calloc(1, sizeof(State));
#endif
#if defined(OLD_PROFILER)
    (void)known;
    profiler->struct_size = TSP_PROFILER_STRUCT_SIZE_1_0;
#elif defined(NEW_PROFILER)
    profiler->struct_size = sizeof(NewProfiler);
    profiler->name = "newer";
    /* Only the fields tickscope has room for. */
    if (known >= sizeof(NewProfiler)) {
        ((NewProfiler*)profiler)->from_the_future = 42;
    }
#else
    (void)known;
    profiler->struct_size = sizeof(TSP_Profiler);
    profiler->name = "test-plugin";
#endif
#ifdef PROFILER_SIZE
    profiler->struct_size = PROFILER_SIZE;
#endif
    fns->struct_size = sizeof(TSP_ProfilerFns);
#ifdef FNS_SIZE
    fns->struct_size = FNS_SIZE;
#endif
    fns->start = start;
    fns->stop = stop;
    fns->collect = collect;
#ifdef NULL_COLLECT
    fns->collect = NULL;
#endif
    fns->destroy = destroy;
}
