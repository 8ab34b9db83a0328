//! `#[profile]` through real sessions: names, counts, nesting, early exits, panics, and async
//! calls on a multi-threaded tokio runtime. Sessions record the current thread (plus the
//! runtime's workers that join), so these tests run in parallel with exact counts.
#![cfg(feature = "enabled")]

use std::fmt;
use std::time::Duration;

use tickscope::trace::{SpanKind, Trace};
use tickscope::{Profiler, profile};

fn session() -> Profiler {
    Profiler::builder().current_thread().start()
}

fn span_names(trace: &Trace) -> Vec<(&'static str, u32)> {
    trace.spans().map(|(_, s)| (s.name(), s.depth)).collect()
}

#[profile]
fn outer(n: u32) -> u32 {
    (0..n).map(inner).sum()
}

#[profile]
fn inner(x: u32) -> u32 {
    x * 2
}

#[test]
fn free_functions_nest_and_count() {
    let prof = session();
    assert_eq!(outer(3), 6);
    assert_eq!(outer(2), 2);
    prof.stop();
    let report = prof.report();
    assert_eq!(report.get("outer").unwrap().calls, 2);
    assert_eq!(report.get("inner").unwrap().calls, 5);
    assert_eq!(report.len(), 2);
    let trace = prof.trace();
    assert_eq!(
        span_names(&trace),
        [
            ("outer", 0),
            ("inner", 1),
            ("inner", 1),
            ("inner", 1),
            ("outer", 0),
            ("inner", 1),
            ("inner", 1)
        ]
    );
    let spans = &trace.threads[0].spans;
    assert_eq!(spans[1].parent, Some(0));
    assert_eq!(spans[5].parent, Some(4));
    assert!(
        spans
            .iter()
            .all(|s| s.kind == SpanKind::Scope && !s.open_at_stop)
    );
}

struct Stack<T> {
    items: Vec<T>,
}

#[profile]
impl<T: Clone> Stack<T> {
    fn new() -> Self {
        Self { items: Vec::new() }
    }

    fn push(&mut self, item: T) {
        self.items.push(item);
    }

    #[profile(name = "Stack::peek (custom)")]
    fn peek(&self) -> Option<T> {
        self.items.last().cloned()
    }

    #[profile(skip)]
    fn len(&self) -> usize {
        self.items.len()
    }

    /// A `const fn` in an instrumented block is left alone: it still works in const context.
    const fn capacity_hint() -> usize {
        16
    }
}

const HINT: usize = Stack::<u8>::capacity_hint();

impl fmt::Display for Stack<u8> {
    #[profile]
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.items)
    }
}

trait Shape {
    fn area(&self) -> f64;
    fn describe(&self) -> String {
        format!("area {}", self.area())
    }
}

struct Square(f64);

#[profile]
impl Shape for Square {
    fn area(&self) -> f64 {
        self.0 * self.0
    }
}

#[test]
fn methods_are_named_after_their_type() {
    let prof = session();
    let mut stack = Stack::new();
    stack.push(1u8);
    stack.push(2);
    assert_eq!(stack.peek(), Some(2));
    assert_eq!(stack.len(), 2);
    assert_eq!(stack.to_string(), "[1, 2]");
    assert_eq!(Square(3.0).describe(), "area 9");
    assert_eq!(HINT, 16);
    prof.stop();
    let report = prof.report();
    let calls = |name: &str| report.get(name).map(|r| r.calls);
    assert_eq!(calls("Stack::new"), Some(1));
    assert_eq!(calls("Stack::push"), Some(2));
    assert_eq!(calls("Stack::peek (custom)"), Some(1));
    assert_eq!(calls("Stack::len"), None);
    assert_eq!(calls("Stack::capacity_hint"), None);
    // Outside a `#[profile]` impl block the type comes from `Self` at run time.
    assert_eq!(calls("Stack::fmt"), Some(1));
    assert_eq!(calls("Square::area"), Some(1));
    assert_eq!(report.len(), 5);
}

#[derive(Debug, PartialEq)]
struct Odd(u32);

#[profile]
fn halve(x: u32) -> Result<u32, Odd> {
    if x == 0 {
        return Ok(0);
    }
    let checked = check_even(x)?;
    Ok(checked / 2)
}

#[profile]
fn check_even(x: u32) -> Result<u32, Odd> {
    if x % 2 == 1 { Err(Odd(x)) } else { Ok(x) }
}

#[test]
fn early_return_and_question_mark_close_the_scope() {
    let prof = session();
    assert_eq!(halve(0), Ok(0)); // early return
    assert_eq!(halve(3), Err(Odd(3))); // `?` on an error
    assert_eq!(halve(8), Ok(4));
    prof.stop();
    let report = prof.report();
    assert_eq!(report.get("halve").unwrap().calls, 3);
    assert_eq!(report.get("check_even").unwrap().calls, 2);
    assert_eq!(report.get("halve").unwrap().open_at_stop, 0);
    let trace = prof.trace();
    assert_eq!(
        span_names(&trace),
        [
            ("halve", 0),
            ("halve", 0),
            ("check_even", 1),
            ("halve", 0),
            ("check_even", 1)
        ]
    );
}

#[profile]
fn explode(message: &str) -> ! {
    panic!("{message}")
}

#[profile]
fn guarded(fail: bool) -> u32 {
    if fail {
        explode("boom");
    }
    7
}

#[test]
fn panics_close_the_scope() {
    let prof = session();
    let result = std::panic::catch_unwind(|| guarded(true));
    assert!(result.is_err());
    assert_eq!(guarded(false), 7);
    prof.stop();
    let report = prof.report();
    assert_eq!(report.get("guarded").unwrap().calls, 2);
    assert_eq!(report.get("explode").unwrap().calls, 1);
    assert_eq!(report.get("guarded").unwrap().open_at_stop, 0);
    assert_eq!(report.get("explode").unwrap().open_at_stop, 0);
    let trace = prof.trace();
    assert_eq!(
        span_names(&trace),
        [("guarded", 0), ("explode", 1), ("guarded", 0)]
    );
}

/// Signatures the attribute must keep: lifetimes, generics with where clauses, `impl Trait`
/// in argument and return position, `unsafe`, an `extern` ABI, `mut` bindings and patterns.
mod signatures {
    use super::profile;

    /// Documented, and `#[must_use]`: both kept.
    #[profile]
    #[must_use]
    pub fn longest<'a>(a: &'a str, b: &'a str) -> &'a str {
        if a.len() >= b.len() { a } else { b }
    }

    #[profile]
    pub fn sum_all<I>(items: I) -> u64
    where
        I: IntoIterator,
        I::Item: Into<u64>,
    {
        items.into_iter().map(Into::into).sum()
    }

    #[profile]
    pub fn evens(limit: u32) -> impl Iterator<Item = u32> {
        (0..limit).filter(|x| x % 2 == 0)
    }

    #[profile]
    pub fn count(items: impl IntoIterator<Item = u8>) -> usize {
        items.into_iter().count()
    }

    /// # Safety
    /// `ptr` must be valid for reads.
    #[profile]
    pub unsafe fn read(ptr: *const u32) -> u32 {
        // SAFETY: the caller guarantees `ptr` is valid for reads.
        unsafe { *ptr }
    }

    #[profile]
    pub extern "C" fn add_c(a: i32, b: i32) -> i32 {
        a + b
    }

    #[profile]
    pub fn bump(mut x: u32, (a, b): (u32, u32)) -> u32 {
        x += a + b;
        x
    }

    #[profile(name = "raw ident")]
    pub fn r#type() -> &'static str {
        "type"
    }

    #[profile]
    pub fn r#match() -> u8 {
        1
    }
}

#[test]
fn signatures_are_kept() {
    let prof = session();
    assert_eq!(signatures::longest("ab", "c"), "ab");
    assert_eq!(signatures::sum_all([1u8, 2, 3]), 6);
    assert_eq!(signatures::evens(7).collect::<Vec<_>>(), [0, 2, 4, 6]);
    assert_eq!(signatures::count(vec![1, 2]), 2);
    let value = 9;
    // SAFETY: `&value` is a valid pointer.
    assert_eq!(unsafe { signatures::read(&value) }, 9);
    let f: extern "C" fn(i32, i32) -> i32 = signatures::add_c;
    assert_eq!(f(2, 3), 5);
    assert_eq!(signatures::bump(1, (2, 3)), 6);
    assert_eq!(signatures::r#type(), "type");
    assert_eq!(signatures::r#match(), 1);
    prof.stop();
    let report = prof.report();
    for name in [
        "longest",
        "sum_all",
        "evens",
        "count",
        "read",
        "add_c",
        "bump",
        "raw ident",
        "match",
    ] {
        assert_eq!(report.get(name).map(|r| r.calls), Some(1), "{name}");
    }
    assert_eq!(report.len(), 9);
}

#[profile]
async fn fetch(id: u32) -> Result<u32, String> {
    tokio::task::yield_now().await;
    let parsed = parse_reply(id)?;
    tokio::time::sleep(Duration::from_millis(2)).await;
    tokio::task::yield_now().await;
    Ok(parsed)
}

#[profile]
fn parse_reply(id: u32) -> Result<u32, String> {
    if id == u32::MAX {
        return Err("bad id".into());
    }
    Ok(id + 1)
}

#[profile]
async fn fan_out(tasks: u32) -> u32 {
    let handles: Vec<_> = (0..tasks).map(|i| tokio::spawn(fetch(i))).collect();
    let mut sum = 0;
    for handle in handles {
        sum += handle.await.expect("task ran").expect("good id");
    }
    sum
}

#[test]
fn async_calls_on_a_multi_thread_runtime() {
    const TASKS: u32 = 64;
    let prof = session();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_time()
        .on_thread_start({
            let prof = prof.clone();
            move || prof.join_current_thread()
        })
        .build()
        .unwrap();
    let sum = runtime.block_on(fan_out(TASKS));
    drop(runtime); // the workers exit: their events stay collectable
    prof.stop();
    assert_eq!(sum, (1..=TASKS).sum::<u32>());

    let report = prof.report();
    let fetch = report.get("fetch").unwrap();
    assert_eq!(fetch.calls, u64::from(TASKS));
    assert_eq!(fetch.open_at_stop, 0);
    // Each call lasts at least its 2 ms sleep, first poll to completion.
    assert!(fetch.min_ns >= 2_000_000, "min {} ns", fetch.min_ns);
    assert!(fetch.self_ns <= fetch.total_ns);
    assert_eq!(report.get("fan_out").unwrap().calls, 1);
    assert_eq!(report.get("parse_reply").unwrap().calls, u64::from(TASKS));

    let trace = prof.trace();
    let fetches: Vec<_> = trace
        .async_spans
        .iter()
        .filter(|a| a.name() == "fetch")
        .collect();
    assert_eq!(fetches.len(), TASKS as usize);
    assert_eq!(trace.async_spans.len(), TASKS as usize + 1);
    for call in &fetches {
        // First poll, yield, sleep (pending at least once), yield, last poll.
        assert!(call.polls >= 4, "{} polls", call.polls);
        assert!(call.end_thread.is_some() && !call.open_at_stop);
        assert!(call.self_ns <= call.busy_ns && call.busy_ns <= call.duration_ns());
    }
    // Every poll slice is attributed to its call, and the counts agree.
    let mut polls = vec![0u32; trace.async_spans.len()];
    let mut moved = 0;
    for (thread, span) in trace.spans() {
        if let SpanKind::Poll { async_span: task } = span.kind {
            let task = task.expect("poll matched to its call") as usize;
            assert_eq!(trace.async_spans[task].name(), span.name());
            polls[task] += 1;
            moved += usize::from(trace.async_spans[task].thread != thread.id);
        }
        if span.name() == "parse_reply" {
            let parent = &trace
                .threads
                .iter()
                .find(|t| t.id == thread.id)
                .unwrap()
                .spans[span.parent.expect("nested in a poll") as usize];
            assert_eq!(parent.name(), "fetch");
            assert!(matches!(
                parent.kind,
                SpanKind::Poll {
                    async_span: Some(_)
                }
            ));
        }
    }
    for (task, call) in trace.async_spans.iter().enumerate() {
        assert_eq!(polls[task], call.polls, "{}", call.name());
    }
    println!(
        "{} polls on a thread other than their call's first poll; {} threads",
        moved,
        trace.threads.len()
    );
}

struct WordCounter {
    words: usize,
}

impl WordCounter {
    #[profile]
    fn add_line(&mut self, line: &str) {
        self.words += line.split_whitespace().count();
    }

    #[profile]
    fn new() -> Self {
        Self { words: 0 }
    }

    #[profile]
    async fn add_later(&mut self, line: &str) {
        self.add_line(line);
    }
}

struct Wrapper<T>(T);

impl<T: Copy> Wrapper<T> {
    #[profile]
    fn get(&self) -> T {
        self.0
    }
}

trait Describe {
    #[profile]
    fn describe(&self) -> usize {
        1
    }
}

struct Cat;
struct Dog;
impl Describe for Cat {}
impl Describe for Dog {}

#[test]
fn a_method_profiled_alone_is_named_after_its_type() {
    let prof = session();
    let mut counter = WordCounter::new();
    counter.add_line("a b c");
    counter.add_line("d");
    futures_lite_block_on(counter.add_later("e f"));
    assert_eq!(counter.words, 6);
    assert_eq!(Wrapper(1u8).get() + Wrapper(2u8).get(), 3);
    assert_eq!(Wrapper("x").get(), "x");
    // A trait's provided method: one name per type that runs it.
    assert_eq!(Cat.describe() + Dog.describe() + Dog.describe(), 3);
    prof.stop();
    let report = prof.report();
    let mut rows: Vec<(&str, u64)> = report.rows().iter().map(|r| (r.name, r.calls)).collect();
    rows.sort();
    assert_eq!(
        rows,
        [
            ("Cat::describe", 1),
            ("Dog::describe", 2),
            ("WordCounter::add_later", 1),
            ("WordCounter::add_line", 3),
            ("WordCounter::new", 1),
            ("Wrapper::get", 3),
        ]
    );
}

/// Runs `fut` to completion on this thread (it never waits on anything).
fn futures_lite_block_on<F: std::future::Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
    }
}
