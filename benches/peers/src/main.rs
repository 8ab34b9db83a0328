//! Cost of one profiling scope (enter + exit) in tickscope and in its peers, measured the same
//! way on the same machine in one run.
//!
//! ```sh
//! cargo run --release --manifest-path benches/peers/Cargo.toml            # every case
//! cargo run --release --manifest-path benches/peers/Cargo.toml -- --reps 7 --scopes 1000000
//! cargo run --release --manifest-path benches/peers/Cargo.toml -- --case puffin --threads 2
//! cargo run --release --manifest-path benches/peers/Cargo.toml -- --reps 9 --scopes 10000000 \
//!     --case floor,tickscope,tickscope_long,tickscope_long_reserved   # long sessions
//! ```
//!
//! Each case runs in its own process (a child of this one), so one library's global state
//! (installed subscribers, allocator growth, background threads) never touches another's
//! figures. In the child, every repetition times `--scopes` scopes on each of `--threads`
//! threads started together; a repetition's figure is the mean time per scope over its
//! threads. Work a library does between batches (a new frame, a new root span, draining its
//! buffers) runs outside the timed part, which favours the peers, never tickscope.
//!
//! Memory per recorded scope is the growth of the process's resident set over the first
//! repetition, read while every thread still holds what it recorded, divided by the scopes
//! recorded. Post-processing (tickscope only) is the time `Profiler::stop` and
//! `Profiler::report` take to pair, convert and aggregate the events a repetition recorded.

use std::hint::black_box;
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

/// What each case does and what the table calls it.
const CASES: &[(&str, &str)] = &[
    ("floor", "floor: two raw TSC reads (quanta)"),
    ("tickscope", "tickscope scope!, recording"),
    (
        "tickscope_long",
        "tickscope scope!, one session never stopped (fresh memory)",
    ),
    (
        "tickscope_long_reserved",
        "tickscope scope!, one session never stopped, memory reserved for the run",
    ),
    (
        "tickscope_stream",
        "tickscope scope!, streamed to a file, SlowWriter::Block",
    ),
    (
        "tickscope_stream_drop",
        "tickscope scope!, streamed to a file, SlowWriter::Drop",
    ),
    ("tickscope_profile", "tickscope #[profile] fn, recording"),
    ("tickscope_disabled", "tickscope scope!, no session"),
    ("empty_loop", "empty loop turn (what no session is held to)"),
    ("puffin", "puffin profile_scope! in a frame"),
    ("fastrace_local", "fastrace LocalSpan, local parent"),
    ("fastrace_trace", "fastrace #[trace] fn, local parent"),
    ("tracing_registry", "tracing span, Registry"),
    (
        "tracing_registry_nop",
        "tracing span, Registry + a layer that does nothing",
    ),
    ("tracing_chrome", "tracing span, tracing-chrome"),
    (
        "tracing_tickscope",
        "tracing span, tickscope subscriber, recording",
    ),
    (
        "tracing_tickscope_layer",
        "tracing span, Registry + tickscope layer, recording",
    ),
    (
        "tracing_registry_scoped",
        "tracing span, Registry, per-thread subscriber (as the e2e cases)",
    ),
    (
        "tickscope_e2e",
        "tickscope scope!, recorded + Chrome file written",
    ),
    (
        "tracing_tickscope_e2e",
        "tracing span, tickscope subscriber per thread, recorded + Chrome file written",
    ),
    (
        "tracing_tickscope_e2e_global",
        "tracing span, tickscope subscriber global, recorded + Chrome file written",
    ),
    (
        "tracing_tickscope_layer_e2e",
        "tracing span, Registry + tickscope layer per thread, recorded + Chrome file written",
    ),
    (
        "tracing_chrome_e2e",
        "tracing span, tracing-chrome, recorded + file written",
    ),
    ("tracy", "tracy-client span!, no viewer"),
    ("firestorm", "firestorm profile_section!"),
    ("perfetto_recorder", "perfetto-recorder scope!"),
];

/// Times `n` runs of `body`.
#[inline(always)]
fn time(n: u64, mut body: impl FnMut()) -> Duration {
    let start = Instant::now();
    for _ in 0..n {
        body();
    }
    start.elapsed()
}

/// One library set up for measurement.
trait Case: Sync {
    /// Before each repetition, on the main thread, untimed.
    fn begin(&self) {}
    /// On each worker thread: times `n` scopes and returns the timed part. Calls `hold` once
    /// the timed loop is over and before letting go of anything the thread recorded.
    fn run(&self, n: u64, hold: &dyn Fn()) -> Duration;
    /// After each repetition, on the main thread, untimed: checks and drops what was
    /// recorded. Returns post-processing throughput in events per second where measured.
    fn end(&self, _expected_scopes: u64) -> Option<f64> {
        None
    }
    /// After each repetition, on the main thread, before [`Case::end`], timed: what an end to
    /// end case does to write its trace file (the time counts in the figure per scope).
    fn write(&self) -> Option<Duration> {
        None
    }
}

struct Floor(quanta::Clock);

impl Case for Floor {
    fn run(&self, n: u64, hold: &dyn Fn()) -> Duration {
        let clock = self.0.clone();
        let d = time(n, || {
            black_box((clock.raw(), clock.raw()));
        });
        hold();
        d
    }
}

/// A loop turn that does nothing but exist: its counter and branch take about one cycle, which
/// is also all a scope costs when no session records.
struct EmptyLoop;

impl Case for EmptyLoop {
    fn run(&self, n: u64, hold: &dyn Fn()) -> Duration {
        let d = time(n, || black_box(()));
        hold();
        d
    }
}

#[tickscope::profile]
#[inline(never)]
fn tickscope_profiled() {
    black_box(());
}

struct Tickscope {
    recording: bool,
    attribute: bool,

    session: Mutex<Option<tickscope::Profiler>>,
}

impl Case for Tickscope {
    fn begin(&self) {
        if self.recording {
            *self.session.lock().unwrap() = Some(tickscope::Profiler::start());
        }
    }

    fn run(&self, n: u64, hold: &dyn Fn()) -> Duration {
        let d = if self.attribute {
            time(n, tickscope_profiled)
        } else {
            time(n, || {
                let _g = tickscope::scope!("x");
            })
        };
        hold();
        d
    }

    fn end(&self, expected: u64) -> Option<f64> {
        let prof = self.session.lock().unwrap().take()?;
        let start = Instant::now();
        prof.stop();
        let report = prof.report();
        let elapsed = start.elapsed();
        let name = if self.attribute {
            "tickscope_profiled"
        } else {
            "x"
        };
        let calls = report.get(name).map_or(0, |s| s.calls);
        assert_eq!(calls, expected, "tickscope lost scopes");
        let events = prof.trace().event_count;
        Some(events as f64 / elapsed.as_secs_f64())
    }
}

/// One session for every repetition, never stopped: each chunk a thread fills is fresh
/// memory, as in any session longer than the recycled chunks or the first of a process. With
/// `reserved`, the session reserved its memory before it started, and every chunk comes from
/// there.
struct TickscopeLong {
    session: tickscope::Profiler,
    reserved: bool,
}

impl Case for TickscopeLong {
    fn run(&self, n: u64, hold: &dyn Fn()) -> Duration {
        let d = time(n, || {
            let _g = tickscope::scope!("x");
        });
        hold();
        d
    }

    fn end(&self, _expected: u64) -> Option<f64> {
        assert!(self.session.is_running(), "the long session stopped");
        assert!(
            !self.reserved || tickscope::__private::reserved_chunks() > 0,
            "the reservation ran out: chunks were taken from elsewhere"
        );
        None
    }
}

/// One session streaming to a file for every repetition, never stopped: the stream's writer
/// hands chunks back as it writes them, so the threads record into recycled memory at the
/// disk's pace (`Block`) or drop what finds no free chunk (`Drop`).
struct TickscopeStream {
    session: tickscope::Profiler,
    _dir: TempDir,
}

impl Case for TickscopeStream {
    fn run(&self, n: u64, hold: &dyn Fn()) -> Duration {
        let d = time(n, || {
            let _g = tickscope::scope!("x");
        });
        hold();
        d
    }

    fn end(&self, _expected: u64) -> Option<f64> {
        assert!(self.session.is_running(), "the streaming session stopped");
        if let Some(stats) = self.session.stream_stats() {
            assert!(stats.error.is_none(), "stream error: {:?}", stats.error);
        }
        None
    }
}

/// A folder removed when dropped.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("peers-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temporary folder");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Puffin;

impl Case for Puffin {
    fn run(&self, n: u64, hold: &dyn Fn()) -> Duration {
        // Scopes nested in one outer scope: puffin hands a thread's stream to the global
        // profiler (under a mutex) when its outermost scope ends, here outside the timing.
        puffin::profile_scope!("frame");
        let d = time(n, || {
            puffin::profile_scope!("x");
        });
        hold();
        d
    }

    fn end(&self, _: u64) -> Option<f64> {
        puffin::GlobalProfiler::lock().new_frame();
        None
    }
}

/// Counts what fastrace reports, to check that no span was dropped.
struct CountingReporter(Arc<AtomicU64>);

impl fastrace::collector::Reporter for CountingReporter {
    fn report(&mut self, spans: Vec<fastrace::collector::SpanRecord>) {
        self.0.fetch_add(spans.len() as u64, Ordering::Relaxed);
    }
}

#[fastrace::trace]
#[inline(never)]
fn fastrace_traced() {
    black_box(());
}

/// fastrace keeps at most 10 240 local spans per local parent and drops the rest, so spans are
/// recorded under a new root every `FASTRACE_BATCH` scopes (root creation and submission are
/// not timed).
const FASTRACE_BATCH: u64 = 8192;

struct Fastrace {
    attribute: bool,
    reported: Arc<AtomicU64>,
    roots: AtomicU64,
}

impl Case for Fastrace {
    fn run(&self, n: u64, hold: &dyn Fn()) -> Duration {
        let mut total = Duration::ZERO;
        let mut left = n;
        let mut roots = Vec::new();
        while left > 0 {
            let batch = left.min(FASTRACE_BATCH);
            let root = fastrace::Span::root("root", fastrace::prelude::SpanContext::random());
            let guard = root.set_local_parent();
            total += if self.attribute {
                time(batch, fastrace_traced)
            } else {
                time(batch, || {
                    let _s = fastrace::local::LocalSpan::enter_with_local_parent("x");
                })
            };
            drop(guard);
            roots.push(root);
            left -= batch;
        }
        self.roots.fetch_add(roots.len() as u64, Ordering::Relaxed);
        hold();
        drop(roots);
        total
    }

    fn end(&self, expected: u64) -> Option<f64> {
        fastrace::flush();
        let roots = self.roots.swap(0, Ordering::Relaxed);
        let reported = self.reported.swap(0, Ordering::Relaxed);
        assert_eq!(reported, expected + roots, "fastrace dropped spans");
        None
    }
}

struct Tracing;

impl Case for Tracing {
    fn run(&self, n: u64, hold: &dyn Fn()) -> Duration {
        let d = time(n, || {
            let _s = tracing::info_span!("x").entered();
        });
        hold();
        d
    }
}

/// A tracing span (`info_span!("x").entered()`) through the tickscope subscriber (or the
/// registry and the tickscope layer), recording: the subscriber is the process's global
/// default, as in `tracing_registry`.
struct TracingTickscope {
    session: Mutex<Option<tickscope::Profiler>>,
}

impl Case for TracingTickscope {
    fn begin(&self) {
        *self.session.lock().unwrap() = Some(tickscope::Profiler::start());
    }

    fn run(&self, n: u64, hold: &dyn Fn()) -> Duration {
        Tracing.run(n, hold)
    }

    fn end(&self, expected: u64) -> Option<f64> {
        let prof = self.session.lock().unwrap().take()?;
        prof.stop();
        let calls = prof.report().get("x").map_or(0, |s| s.calls);
        assert_eq!(calls, expected, "the tickscope layer lost spans");
        None
    }
}

/// The file an end to end case writes (removed after the check).
fn trace_file(case: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "tickscope-peers-{case}-{}.json",
        std::process::id()
    ))
}

/// What an end to end case records: `scope!`s, or tracing spans under one of the ways a
/// program sets its subscriber.
enum Spans {
    /// `tickscope::scope!`.
    Scopes,
    /// Tracing spans through the process's global default subscriber.
    Global,
    /// Tracing spans through the tickscope subscriber, each worker thread setting its own
    /// `Dispatch` of it (`tickscope::tracing::dispatch()`) as its default.
    PerThread,
    /// Tracing spans through this `Dispatch`, set as each worker thread's default (as
    /// `tracing_chrome_e2e` does).
    Shared(tracing::Dispatch),
}

/// End to end: scopes recorded, then the session stopped and its Chrome trace written to a
/// file, all timed.
struct TickscopeE2e {
    spans: Spans,
    session: Mutex<Option<tickscope::Profiler>>,
}

impl Case for TickscopeE2e {
    fn begin(&self) {
        *self.session.lock().unwrap() = Some(tickscope::Profiler::start());
    }

    fn run(&self, n: u64, hold: &dyn Fn()) -> Duration {
        match &self.spans {
            Spans::Shared(dispatch) => {
                let _d = tracing::dispatcher::set_default(dispatch);
                Tracing.run(n, hold)
            }
            Spans::PerThread => {
                let _d = tracing::dispatcher::set_default(&tickscope::tracing::dispatch());
                Tracing.run(n, hold)
            }
            Spans::Global => Tracing.run(n, hold),
            Spans::Scopes => {
                let d = time(n, || {
                    let _g = tickscope::scope!("x");
                });
                hold();
                d
            }
        }
    }

    fn write(&self) -> Option<Duration> {
        let session = self.session.lock().unwrap();
        let prof = session.as_ref()?;
        let start = Instant::now();
        prof.stop();
        // Written as tracing-chrome writes its file: buffered, not synced.
        // `Profiler::write_chrome_trace` also syncs the file before renaming it into place,
        // which on this VM's disk costs more than writing it (see the README).
        let file = std::fs::File::create(trace_file("tickscope")).expect("trace file");
        let mut out = std::io::BufWriter::with_capacity(1 << 16, file);
        tickscope::export::chrome::write(&prof.trace(), &mut out).expect("chrome trace written");
        out.into_inner().expect("chrome trace flushed");
        Some(start.elapsed())
    }

    fn end(&self, expected: u64) -> Option<f64> {
        let prof = self.session.lock().unwrap().take()?;
        let calls = prof.report().get("x").map_or(0, |s| s.calls);
        assert_eq!(calls, expected, "tickscope lost scopes");
        let _ = std::fs::remove_file(trace_file("tickscope"));
        None
    }
}

/// End to end: tracing spans recorded by tracing-chrome into a file, timed until its writer
/// thread has written the whole file (the guard's drop joins it). A new layer and file per
/// repetition, set as the default subscriber of each worker thread.
struct TracingChromeE2e {
    current: Mutex<Option<(tracing::Dispatch, tracing_chrome::FlushGuard)>>,
}

impl Case for TracingChromeE2e {
    fn begin(&self) {
        use tracing_subscriber::layer::SubscriberExt;
        let (layer, guard) = tracing_chrome::ChromeLayerBuilder::new()
            .file(trace_file("tracing-chrome"))
            .build();
        let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
        *self.current.lock().unwrap() = Some((dispatch, guard));
    }

    fn run(&self, n: u64, hold: &dyn Fn()) -> Duration {
        let dispatch = self.current.lock().unwrap().as_ref().unwrap().0.clone();
        let _d = tracing::dispatcher::set_default(&dispatch);
        Tracing.run(n, hold)
    }

    fn write(&self) -> Option<Duration> {
        let (dispatch, guard) = self.current.lock().unwrap().take()?;
        let start = Instant::now();
        drop(guard);
        drop(dispatch);
        Some(start.elapsed())
    }

    fn end(&self, expected: u64) -> Option<f64> {
        let path = trace_file("tracing-chrome");
        let text = std::fs::read_to_string(&path).expect("tracing-chrome wrote its file");
        // One begin and one end per span.
        let begins = text.matches(r#""ph":"B""#).count() as u64;
        assert_eq!(begins, expected, "tracing-chrome lost spans");
        let _ = std::fs::remove_file(path);
        None
    }
}

/// A tracing span with the registry alone set as each worker thread's default subscriber,
/// the way the end to end tracing cases set theirs: tracing's own cost there.
struct TracingScoped(tracing::Dispatch);

impl Case for TracingScoped {
    fn run(&self, n: u64, hold: &dyn Fn()) -> Duration {
        let _d = tracing::dispatcher::set_default(&self.0);
        Tracing.run(n, hold)
    }
}

struct Tracy;

impl Case for Tracy {
    fn run(&self, n: u64, hold: &dyn Fn()) -> Duration {
        let d = time(n, || {
            let _s = tracy_client::span!("x");
        });
        hold();
        d
    }
}

struct Firestorm;

impl Case for Firestorm {
    fn run(&self, n: u64, hold: &dyn Fn()) -> Duration {
        let d = time(n, || {
            firestorm::profile_section!(x);
        });
        hold();
        firestorm::clear();
        d
    }
}

struct PerfettoRecorder;

impl Case for PerfettoRecorder {
    fn run(&self, n: u64, hold: &dyn Fn()) -> Duration {
        // As the crate's own benchmark does: room for every event up front.
        perfetto_recorder::current_thread_reserve(n as usize * perfetto_recorder::EVENTS_PER_SPAN);
        let d = time(n, || {
            perfetto_recorder::scope!("x");
        });
        hold();
        drop(perfetto_recorder::ThreadTraceData::take_current_thread());
        d
    }
}

/// Sets up `name` for this process, which records `scopes` scopes in all. The returned guard
/// keeps background writers alive.
fn make_case(name: &str, scopes: u64) -> Option<(Box<dyn Case>, Box<dyn std::any::Any>)> {
    let none: Box<dyn std::any::Any> = Box::new(());
    let tickscope = |recording, attribute| Tickscope {
        recording,
        attribute,
        session: Mutex::new(None),
    };
    Some(match name {
        "floor" => (Box::new(Floor(quanta::Clock::new())), none),
        "empty_loop" => (Box::new(EmptyLoop), none),
        "tickscope" => (Box::new(tickscope(true, false)), none),
        "tickscope_profile" => (Box::new(tickscope(true, true)), none),
        "tickscope_long" => {
            let case = TickscopeLong {
                session: tickscope::Profiler::start(),
                reserved: false,
            };
            (Box::new(case), none)
        }
        "tickscope_long_reserved" => {
            // 16 bytes per scope (an 8-byte word for its entry and one for its exit), and
            // 4 MiB for the chunks the worker threads of each repetition leave partly filled.
            let bytes = usize::try_from(scopes.saturating_mul(16))
                .unwrap_or(usize::MAX)
                .saturating_add(64 << 16);
            let case = TickscopeLong {
                session: tickscope::Profiler::builder().reserve_memory(bytes).start(),
                reserved: true,
            };
            (Box::new(case), none)
        }
        "tickscope_stream" | "tickscope_stream_drop" => {
            let dir = TempDir::new(name);
            let policy = if name == "tickscope_stream" {
                tickscope::SlowWriter::Block
            } else {
                tickscope::SlowWriter::Drop
            };
            let session = tickscope::Profiler::builder()
                .stream_to(dir.0.join("stream.tscope"))
                .on_slow_disk(policy)
                .start();
            let case = TickscopeStream { session, _dir: dir };
            (Box::new(case), none)
        }
        "tickscope_disabled" => (Box::new(tickscope(false, false)), none),
        "puffin" => {
            puffin::set_scopes_on(true);
            (Box::new(Puffin), none)
        }
        "fastrace_local" | "fastrace_trace" => {
            let reported = Arc::new(AtomicU64::new(0));
            fastrace::set_reporter(
                CountingReporter(reported.clone()),
                fastrace::collector::Config::default(),
            );
            let case = Fastrace {
                attribute: name == "fastrace_trace",
                reported,
                roots: AtomicU64::new(0),
            };
            (Box::new(case), none)
        }
        "tracing_registry" => {
            tracing::subscriber::set_global_default(tracing_subscriber::registry())
                .expect("subscriber");
            (Box::new(Tracing), none)
        }
        "tracing_registry_nop" => {
            // The registry as every real configuration has it, under a layer: alone, it never
            // frees a closed span's slot (its `try_close` leaves that to `Layered`), so it
            // takes fresh memory for every span.
            use tracing_subscriber::layer::SubscriberExt;
            tracing::subscriber::set_global_default(
                tracing_subscriber::registry().with(tracing_subscriber::layer::Identity::new()),
            )
            .expect("subscriber");
            (Box::new(Tracing), none)
        }
        "tracing_chrome" => {
            use tracing_subscriber::layer::SubscriberExt;
            // Written to a sink: the cost measured is the layer's, not the disk's.
            let (layer, guard) = tracing_chrome::ChromeLayerBuilder::new()
                .writer(std::io::sink())
                .build();
            tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))
                .expect("subscriber");
            (Box::new(Tracing), Box::new(guard))
        }
        "tracing_tickscope" | "tracing_tickscope_layer" => {
            use tracing_subscriber::layer::SubscriberExt;
            if name == "tracing_tickscope" {
                tracing::subscriber::set_global_default(tickscope::tracing::subscriber())
            } else {
                tracing::subscriber::set_global_default(
                    tracing_subscriber::registry().with(tickscope::tracing::layer()),
                )
            }
            .expect("subscriber");
            let case = TracingTickscope {
                session: Mutex::new(None),
            };
            (Box::new(case), none)
        }
        "tickscope_e2e"
        | "tracing_tickscope_e2e"
        | "tracing_tickscope_e2e_global"
        | "tracing_tickscope_layer_e2e" => {
            use tracing_subscriber::layer::SubscriberExt;
            let spans = match name {
                // The global default's spans hold no count of the `Arc` that a `Dispatch`
                // set per thread is.
                "tracing_tickscope_e2e_global" => {
                    tracing::subscriber::set_global_default(tickscope::tracing::subscriber())
                        .expect("subscriber");
                    Spans::Global
                }
                // Each thread's own `Dispatch` of the one tickscope subscriber: each span
                // writes the count of its thread's.
                "tracing_tickscope_e2e" => Spans::PerThread,
                // One `Dispatch` of the registry and the layer set on every thread: every
                // span of every thread writes its count.
                "tracing_tickscope_layer_e2e" => Spans::Shared(tracing::Dispatch::new(
                    tracing_subscriber::registry().with(tickscope::tracing::layer()),
                )),
                _ => Spans::Scopes,
            };
            let case = TickscopeE2e {
                spans,
                session: Mutex::new(None),
            };
            (Box::new(case), none)
        }
        "tracing_registry_scoped" => {
            let dispatch = tracing::Dispatch::new(tracing_subscriber::registry());
            (Box::new(TracingScoped(dispatch)), none)
        }
        "tracing_chrome_e2e" => {
            let case = TracingChromeE2e {
                current: Mutex::new(None),
            };
            (Box::new(case), none)
        }
        "tracy" => {
            let client = tracy_client::Client::start();
            (Box::new(Tracy), Box::new(client))
        }
        "firestorm" => (Box::new(Firestorm), none),
        "perfetto_recorder" => {
            perfetto_recorder::start().expect("perfetto-recorder built without `enable`");
            (Box::new(PerfettoRecorder), none)
        }
        _ => return None,
    })
}

/// Resident set size of this process, in bytes.
fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// CPU time this process has used so far, every thread (exited ones included): user and
/// system, in nanoseconds; and the page faults it has taken (minor and major).
fn process_cpu_ns() -> (u64, u64) {
    // SAFETY: `getrusage` fills the zeroed `rusage` it is given and reads nothing else.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    (
        ns(usage.ru_utime) + ns(usage.ru_stime),
        (usage.ru_minflt + usage.ru_majflt) as u64,
    )
}

/// One repetition: `threads` workers each time `n` scopes together. Returns the mean ns per
/// scope over the threads, the resident growth while they held their data, and the CPU time
/// per scope the whole process used meanwhile (the workers, and any background thread of the
/// library: what other programs on the machine take is not in it), and the page faults per
/// scope the process took meanwhile.
fn repetition(case: &dyn Case, threads: usize, n: u64) -> (f64, u64, f64, f64) {
    case.begin();
    let cpu_before = process_cpu_ns();
    let start = Barrier::new(threads);
    let held = Barrier::new(threads + 1);
    let release = Barrier::new(threads + 1);
    let before = rss_bytes();
    let mut after = 0;
    let times: Vec<Duration> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    start.wait();
                    case.run(n, &|| {
                        held.wait();
                        release.wait();
                    })
                })
            })
            .collect();
        held.wait();
        after = rss_bytes();
        release.wait();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let (cpu_after, faults_after) = process_cpu_ns();
    let scopes = (n * threads as u64) as f64;
    let cpu = cpu_after.saturating_sub(cpu_before.0) as f64 / scopes;
    let faults = faults_after.saturating_sub(cpu_before.1) as f64 / scopes;
    let mean = times.iter().map(Duration::as_secs_f64).sum::<f64>() / threads as f64;
    (
        mean * 1e9 / n as f64,
        after.saturating_sub(before),
        cpu,
        faults,
    )
}

struct Opts {
    reps: usize,
    scopes: u64,
    threads: Option<usize>,
    case: Option<String>,
    /// Set by the parent on its children: run one case and print its raw figures.
    child: bool,
}

fn parse_args() -> Result<Opts, String> {
    let mut opts = Opts {
        reps: 7,
        scopes: 1_000_000,
        threads: None,
        case: None,
        child: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--reps" => opts.reps = value()?.parse().map_err(|e| format!("--reps: {e}"))?,
            "--scopes" => opts.scopes = value()?.parse().map_err(|e| format!("--scopes: {e}"))?,
            "--threads" => {
                opts.threads = Some(value()?.parse().map_err(|e| format!("--threads: {e}"))?)
            }
            "--case" => opts.case = Some(value()?),
            "--child" => opts.child = true,
            "-h" | "--help" => {
                return Err(format!(
                    "usage: peers [--reps N] [--scopes N] [--case NAME[,NAME...]] [--threads N]\ncases: {}",
                    CASES.iter().map(|c| c.0).collect::<Vec<_>>().join(", ")
                ));
            }
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    if opts.reps == 0 || opts.scopes == 0 {
        return Err("--reps and --scopes must be at least 1".into());
    }
    Ok(opts)
}

/// Child: runs one case and prints `ns=a,b,c mem=B post=E` on one line.
fn child(name: &str, threads: usize, opts: &Opts) -> Result<(), String> {
    let total = opts.scopes * opts.reps as u64 * threads as u64;
    let (case, _guard) = make_case(name, total).ok_or(format!("unknown case {name:?}"))?;
    let mut ns = Vec::new();
    let mut mem = 0;
    let mut post = Vec::new();
    let mut cpu = Vec::new();
    let mut faults = Vec::new();
    for rep in 0..opts.reps {
        let (mut per_scope, grown, cpu_per_scope, faults_per_scope) =
            repetition(case.as_ref(), threads, opts.scopes);
        cpu.push(cpu_per_scope);
        faults.push(faults_per_scope * 1000.0);
        if let Some(written) = case.write() {
            per_scope += written.as_secs_f64() * 1e9 / (opts.scopes * threads as u64) as f64;
        }
        if rep == 0 {
            mem = grown;
        }
        post.extend(case.end(opts.scopes * threads as u64));
        ns.push(per_scope);
    }
    let list = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.4}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let scopes = opts.scopes * threads as u64;
    println!(
        "ns={} mem={:.2} post={} cpu={} faults={}",
        list(&ns),
        mem as f64 / scopes as f64,
        if post.is_empty() {
            "-".into()
        } else {
            list(&post)
        },
        list(&cpu),
        list(&faults)
    );
    Ok(())
}

/// Figures for one case and thread count, parsed from its child's output.
struct Figures {
    median: f64,
    min: f64,
    mem: f64,
    post: Option<f64>,
    /// Median process CPU time per scope (every thread of the process).
    cpu: f64,
    /// Median page faults per thousand scopes (every thread of the process).
    faults: f64,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

fn run_child(name: &str, threads: usize, opts: &Opts) -> Result<Figures, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new(exe)
        .args(["--child", "--case", name, "--threads", &threads.to_string()])
        .args([
            "--reps",
            &opts.reps.to_string(),
            "--scopes",
            &opts.scopes.to_string(),
        ])
        .output()
        .map_err(|e| format!("{name}: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "{name} ({threads} threads) failed: {}{}",
            stdout,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let line = stdout.lines().last().unwrap_or_default();
    let field = |key: &str| {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(key))
            .ok_or(format!("{name}: no {key} in {line:?}"))
    };
    let floats = |s: &str| -> Vec<f64> { s.split(',').filter_map(|x| x.parse().ok()).collect() };
    let mut ns = floats(field("ns=")?);
    if ns.is_empty() {
        return Err(format!("{name}: no timings in {line:?}"));
    }
    let min = ns.iter().copied().fold(f64::INFINITY, f64::min);
    let mut post = floats(field("post=")?);
    Ok(Figures {
        median: median(&mut ns),
        min,
        mem: field("mem=")?.parse().unwrap_or(f64::NAN),
        cpu: {
            let mut cpu = floats(field("cpu=")?);
            if cpu.is_empty() {
                f64::NAN
            } else {
                median(&mut cpu)
            }
        },
        faults: {
            let mut faults = floats(field("faults=")?);
            if faults.is_empty() {
                f64::NAN
            } else {
                median(&mut faults)
            }
        },
        post: (!post.is_empty()).then(|| median(&mut post)),
    })
}

fn parent(opts: &Opts) -> Result<(), String> {
    let cases: Vec<&(&str, &str)> = match &opts.case {
        // A comma-separated list: those cases, in that order.
        Some(list) => list
            .split(',')
            .map(|c| {
                CASES
                    .iter()
                    .find(|(n, _)| *n == c)
                    .ok_or(format!("unknown case {c:?}"))
            })
            .collect::<Result<_, _>>()?,
        None => CASES.iter().collect(),
    };
    let thread_counts: Vec<usize> = opts.threads.map_or(vec![1, 2], |t| vec![t]);
    eprintln!(
        "{} repetitions of {} scopes per thread, threads {:?}, one process per case",
        opts.reps, opts.scopes, thread_counts
    );
    let mut rows = Vec::new();
    for (name, label) in &cases {
        let mut figs = Vec::new();
        for &t in &thread_counts {
            eprintln!("  {name}, {t} thread(s)");
            figs.push(run_child(name, t, opts)?);
        }
        rows.push((*name, *label, figs));
    }
    let base = |key: &str| {
        rows.iter()
            .find(|r| r.0 == key)
            .map(|r| r.2[0].median)
            .filter(|v| *v > 0.0)
    };
    let (floor, ours) = (base("floor"), base("tickscope"));
    let ratio = |v: f64, b: Option<f64>| b.map_or("-".into(), |b| format!("{:.2}", v / b));
    let t0 = thread_counts[0];
    let mut header =
        format!("| case | median ns ({t0}t) | min ns | × tickscope | × floor | bytes/scope |");
    let mut rule = String::from("|---|---:|---:|---:|---:|---:|");
    for t in &thread_counts[1..] {
        header.push_str(&format!(" median ns/thread ({t}t) | {t}t ÷ {t0}t |"));
        rule.push_str("---:|---:|");
    }
    println!("{header}\n{rule}");
    for (_, label, figs) in &rows {
        let f = &figs[0];
        let mut line = format!(
            "| {label} | {:.2} | {:.2} | {} | {} | {:.1} |",
            f.median,
            f.min,
            ratio(f.median, ours),
            ratio(f.median, floor),
            f.mem
        );
        for g in &figs[1..] {
            line.push_str(&format!(" {:.2} | {:.2} |", g.median, g.median / f.median));
        }
        println!("{line}");
    }
    let ratio_of = |a: &str, b: &str| Some(base(a)? / base(b)?);
    if let Some(r) = ratio_of("tracing_tickscope_layer", "tracing_registry") {
        println!("\ntracing bridge: Registry + tickscope layer = {r:.2} × Registry alone per span");
    }
    if let Some(r) = ratio_of("tracing_tickscope", "tracing_registry") {
        println!("tracing bridge: tickscope subscriber = {r:.2} × Registry alone per span");
    }
    if let Some(r) = ratio_of("tracing_chrome_e2e", "tracing_tickscope_e2e") {
        println!("end to end: tracing-chrome = {r:.2} × tracing through the tickscope subscriber");
    }
    if let Some(r) = ratio_of("tracing_chrome_e2e", "tickscope_e2e") {
        println!("end to end: tracing-chrome = {r:.2} × tickscope scope!");
    }
    if let Some(post) = rows
        .iter()
        .find(|r| r.0 == "tickscope")
        .and_then(|r| r.2[0].post)
    {
        println!(
            "\ntickscope post-processing (stop + report of {} scopes): {:.1} M events/s (median)",
            opts.scopes,
            post / 1e6
        );
    }
    // Time the other programs of a shared machine take is not in these: the figures to
    // compare on a loaded machine, where the wall-clock ones move with the load.
    println!(
        "\nprocess CPU time per scope (user + system, every thread of the process, median ns): {}",
        thread_counts
            .iter()
            .map(|t| format!("{t}t"))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    for (_, label, figs) in &rows {
        let cpu: Vec<String> = figs.iter().map(|f| format!("{:.2}", f.cpu)).collect();
        println!("| {label} | {} |", cpu.join(" | "));
    }
    println!(
        "\npage faults per 1,000 scopes (every thread of the process, median): {}",
        thread_counts
            .iter()
            .map(|t| format!("{t}t"))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    for (_, label, figs) in &rows {
        let faults: Vec<String> = figs.iter().map(|f| format!("{:.2}", f.faults)).collect();
        println!("| {label} | {} |", faults.join(" | "));
    }
    Ok(())
}

fn main() -> ExitCode {
    let opts = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let result = match (&opts.case, opts.threads) {
        (Some(case), Some(threads)) if opts.child => child(case, threads, &opts),
        _ => parent(&opts),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
