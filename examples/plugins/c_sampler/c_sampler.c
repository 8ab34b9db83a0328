/*
 * c_sampler: a tickscope plug-in written in C (include/tickscope_plugin.h).
 *
 * Between start and stop, a thread of its own reads /proc/self/stat and /proc/self/status
 * every millisecond (and once more at stop) and records each interval between two readings
 * as a "sample" span on the track "procstat" of a process "procstat", with what the process
 * did in it as arguments: CPU time (cpu_ns), minor and major page faults, context switches
 * (those of the main thread: /proc/self/status counts its own). Its clock is
 * CLOCK_MONOTONIC, calibrated against CLOCK_REALTIME at start and stop.
 *
 * Build: cc -std=c99 -O2 -shared -fPIC -pthread -Iinclude -o libc_sampler.so \
 *            examples/plugins/c_sampler/c_sampler.c
 * Use:   TICKSCOPE_PLUGINS=./libc_sampler.so your-program
 *        (or Profiler::builder().plugin("./libc_sampler.so")).
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tickscope_plugin.h"

/* One reading of the process's counters. */
typedef struct {
    uint64_t tick;
    uint64_t cpu_ns;
    uint64_t minflt;
    uint64_t majflt;
    uint64_t ctxsw;
} Reading;

typedef struct {
    pthread_t thread;
    pthread_mutex_t lock;
    int running;
    Reading* readings;
    size_t len, cap;
    uint64_t start_tick, start_unix, stop_tick, stop_unix;
} Sampler;

static uint64_t clock_ns(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Reads the counters; 0 on failure. */
static int read_counters(Reading* r) {
    static long hz = 0;
    char buf[1024];
    FILE* f = fopen("/proc/self/stat", "r");
    size_t n;
    unsigned long minflt, majflt, utime, stime;
    unsigned long vol = 0, invol = 0;
    const char* p;
    if (hz == 0) {
        hz = sysconf(_SC_CLK_TCK);
    }
    if (f == NULL) {
        return 0;
    }
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    /* The command name may hold spaces: fields start after its closing parenthesis. */
    p = strrchr(buf, ')');
    if (p == NULL || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %lu %*u %lu %*u %lu %lu",
                            &minflt, &majflt, &utime, &stime) != 4) {
        return 0;
    }
    f = fopen("/proc/self/status", "r");
    if (f != NULL) {
        while (fgets(buf, sizeof buf, f) != NULL) {
            sscanf(buf, "voluntary_ctxt_switches: %lu", &vol);
            sscanf(buf, "nonvoluntary_ctxt_switches: %lu", &invol);
        }
        fclose(f);
    }
    r->tick = clock_ns(CLOCK_MONOTONIC);
    r->cpu_ns = (uint64_t)(utime + stime) * (1000000000u / (uint64_t)hz);
    r->minflt = minflt;
    r->majflt = majflt;
    r->ctxsw = vol + invol;
    return 1;
}

static void push(Sampler* s, const Reading* r) {
    if (s->len == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        Reading* grown = realloc(s->readings, cap * sizeof *grown);
        if (grown == NULL) {
            return; /* Out of memory: this reading is lost, the others kept. */
        }
        s->readings = grown;
        s->cap = cap;
    }
    s->readings[s->len++] = *r;
}

static void* run(void* arg) {
    Sampler* s = arg;
    struct timespec ms = {0, 1000000};
    for (;;) {
        Reading r;
        int running;
        pthread_mutex_lock(&s->lock);
        running = s->running;
        if (running && read_counters(&r)) {
            push(s, &r);
        }
        pthread_mutex_unlock(&s->lock);
        if (!running) {
            return NULL;
        }
        nanosleep(&ms, NULL);
    }
}

static void fail(TSP_Status* status, const char* message) {
    status->code = TSP_ERROR;
    snprintf(status->message, TSP_MESSAGE_SIZE, "%s", message);
}

static void start(const TSP_Profiler* profiler, TSP_Status* status) {
    Sampler* s = profiler->data;
    Reading first;
    s->len = 0;
    s->start_tick = clock_ns(CLOCK_MONOTONIC);
    s->start_unix = clock_ns(CLOCK_REALTIME);
    s->stop_tick = s->start_tick;
    s->stop_unix = s->start_unix;
    if (read_counters(&first)) {
        push(s, &first);
    }
    s->running = 1;
    if (pthread_create(&s->thread, NULL, run, s) != 0) {
        s->running = 0;
        fail(status, "cannot start the sampling thread");
    }
}

static void stop(const TSP_Profiler* profiler, TSP_Status* status) {
    Sampler* s = profiler->data;
    (void)status;
    pthread_mutex_lock(&s->lock);
    if (!s->running) {
        pthread_mutex_unlock(&s->lock);
        return;
    }
    s->running = 0;
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    {
        /* A last reading: the window's last interval, and at least one. */
        Reading last;
        if (read_counters(&last)) {
            push(s, &last);
        }
    }
    s->stop_tick = clock_ns(CLOCK_MONOTONIC);
    s->stop_unix = clock_ns(CLOCK_REALTIME);
}

/* ---- The capture bytes (docs/FORMAT.md): one session. ---- */

typedef struct {
    uint8_t* out; /* NULL: only count */
    size_t len;
} Writer;

static void put(Writer* w, const void* bytes, size_t n) {
    if (w->out != NULL) {
        memcpy(w->out + w->len, bytes, n);
    }
    w->len += n;
}

static void put_u16(Writer* w, uint16_t v) {
    uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    put(w, b, 2);
}

static void put_u32(Writer* w, uint32_t v) {
    uint8_t b[4];
    int i;
    for (i = 0; i < 4; i++) {
        b[i] = (uint8_t)(v >> (8 * i));
    }
    put(w, b, 4);
}

static void put_u64(Writer* w, uint64_t v) {
    put_u32(w, (uint32_t)v);
    put_u32(w, (uint32_t)(v >> 32));
}

/* A chunk header for `length` bytes of content. */
static void header(Writer* w, uint16_t type, uint64_t length) {
    put(w, "TSCP", 4);
    put_u16(w, type);
    put_u16(w, 1);
    put_u64(w, length);
}

static void pad(Writer* w) {
    static const uint8_t zeros[16] = {0};
    put(w, zeros, (16 - w->len % 16) % 16);
}

static void record(Writer* w, uint64_t tick, uint32_t id, uint32_t kind) {
    put_u64(w, tick);
    put_u32(w, id);
    put_u32(w, kind);
}

/* The key an End record carries for the entry of callsite `id` at `tick` (RawKind::End). */
static uint32_t end_key(uint32_t id, uint64_t tick) {
    uint64_t x = ((uint64_t)id * 0x9E3779B97F4A7C15ull) ^ tick;
    return (uint32_t)((x * 0xD6E8FEB86659FD93ull) >> 32);
}

enum { BEGIN = 1, END = 2, ARG_U64 = 13 };
/* Strings: 0 "", 1 "<c_sampler>", 2 "procstat", 3.. the callsites' names. */
static const char* const STRINGS[] = {"",       "<c_sampler>", "procstat",     "sample",
                                      "cpu_ns", "minor_faults", "major_faults", "ctx_switches"};
#define STRING_COUNT (sizeof STRINGS / sizeof STRINGS[0])
#define CALLSITES 5 /* sample and the four keys: callsite i + 1 is string i + 3 */

static void write_session(const Sampler* s, Writer* w) {
    static const char producer[] = "c_sampler 1.0";
    size_t i, strings_len = 0;
    size_t spans = s->len > 1 ? s->len - 1 : 0;
    /* Session header: version, reserved, pid, start, producer, process, host. */
    header(w, 1, 16 + sizeof producer + 9 + 1);
    put_u16(w, 1);
    put_u16(w, 0);
    put_u32(w, (uint32_t)getpid());
    put_u64(w, s->start_unix);
    put(w, producer, sizeof producer);
    put(w, "procstat", 9);
    put(w, "", 1);
    pad(w);
    /* Clock: one start and one stop pair, 1 ns a tick. */
    header(w, 2, 32 + 32);
    put_u32(w, 0);
    put_u32(w, 1);
    put_u32(w, 1);
    put_u32(w, 0);
    {
        double rate = 1.0;
        uint64_t bits;
        memcpy(&bits, &rate, sizeof bits);
        put_u64(w, bits);
    }
    put_u64(w, 0);
    put_u64(w, s->start_tick);
    put_u64(w, s->start_unix);
    put_u64(w, s->stop_tick);
    put_u64(w, s->stop_unix);
    /* Strings. */
    for (i = 0; i < STRING_COUNT; i++) {
        strings_len += strlen(STRINGS[i]) + 1;
    }
    header(w, 3, strings_len);
    for (i = 0; i < STRING_COUNT; i++) {
        put(w, STRINGS[i], strlen(STRINGS[i]) + 1);
    }
    pad(w);
    /* Callsites: id, name, file, line, module, reserved. */
    header(w, 4, 24 * CALLSITES);
    for (i = 0; i < CALLSITES; i++) {
        put_u32(w, (uint32_t)i + 1);
        put_u32(w, (uint32_t)i + 3);
        put_u32(w, 1);
        put_u32(w, 0);
        put_u32(w, 0);
        put_u32(w, 0);
    }
    pad(w);
    /* Threads: the track "procstat". */
    header(w, 6, 24);
    put_u64(w, 1);
    put_u64(w, 0);
    put_u32(w, 2);
    put_u32(w, 0);
    pad(w);
    /* Events: a span and its four arguments per interval between readings. */
    header(w, 5, 16 + 16 * 6 * (uint64_t)spans);
    put_u64(w, 1);
    put_u64(w, 0);
    for (i = 0; i < spans; i++) {
        const Reading* a = &s->readings[i];
        const Reading* b = &s->readings[i + 1];
        record(w, a->tick, 1, BEGIN);
        record(w, b->cpu_ns - a->cpu_ns, 2, ARG_U64);
        record(w, b->minflt - a->minflt, 3, ARG_U64);
        record(w, b->majflt - a->majflt, 4, ARG_U64);
        record(w, b->ctxsw - a->ctxsw, 5, ARG_U64);
        record(w, b->tick, end_key(1, a->tick), END);
    }
    /* Footer: window, records, dropped, flags, reserved. */
    header(w, 7, 40);
    put_u64(w, s->start_tick);
    put_u64(w, s->stop_tick);
    put_u64(w, 6 * (uint64_t)spans);
    put_u64(w, 0);
    put_u32(w, 0);
    put_u32(w, 0);
    pad(w);
}

static void collect(const TSP_Profiler* profiler, uint8_t* buffer, size_t* size,
                    TSP_Status* status) {
    const Sampler* s = profiler->data;
    Writer w = {NULL, 0};
    write_session(s, &w);
    if (buffer == NULL) {
        *size = w.len;
        return;
    }
    if (w.len > *size) {
        fail(status, "collect: the buffer is smaller than the size query gave");
        *size = 0;
        return;
    }
    w.out = buffer;
    w.len = 0;
    write_session(s, &w);
    *size = w.len;
}

static void destroy(const TSP_Profiler* profiler) {
    Sampler* s = profiler->data;
    TSP_Status ignored;
    stop(profiler, &ignored);
    pthread_mutex_destroy(&s->lock);
    free(s->readings);
    free(s);
}

void TSP_InitProfiler(TSP_RegistrationParams* params, TSP_Status* status);

void TSP_InitProfiler(TSP_RegistrationParams* params, TSP_Status* status) {
    Sampler* s;
    if (params->major_version != TSP_VERSION_MAJOR) {
        fail(status, "c_sampler is built for tickscope_plugin.h version 1");
        return;
    }
    s = calloc(1, sizeof *s);
    if (s == NULL) {
        fail(status, "out of memory");
        return;
    }
    pthread_mutex_init(&s->lock, NULL);
    params->profiler->struct_size = sizeof(TSP_Profiler);
    params->profiler->data = s;
    /* `name` is a 1.1 field: only when tickscope's struct has it. */
    if (params->profiler->struct_size >= offsetof(TSP_Profiler, name) + sizeof(const char*)) {
        params->profiler->name = "c_sampler";
    }
    params->fns->struct_size = sizeof(TSP_ProfilerFns);
    params->fns->start = start;
    params->fns->stop = stop;
    params->fns->collect = collect;
    params->fns->destroy = destroy;
}
