//! What `#[profile]` expands to makes no warning in the user's crate, for every form it accepts:
//! free functions, methods, `impl` blocks, `name`, `skip`, `crate`, async functions, values,
//! unit, `!`, references, generics, `return`, `?`, `impl Trait`, `unsafe`, ABIs, const generics,
//! `Self`, items and inner attributes in the body. Short bodies are on one line on purpose (this
//! file is no cargo target, so rustfmt leaves it alone): rustc's `unused_braces` only looks at
//! one-line blocks. `scripts/macro_lints.sh` checks the same forms with clippy.
#![deny(warnings)]
#![deny(
    unused_qualifications,
    unused_results,
    unused_lifetimes,
    single_use_lifetimes,
    redundant_lifetimes,
    elided_lifetimes_in_paths,
    trivial_casts,
    trivial_numeric_casts,
    let_underscore_drop,
    unit_bindings,
    unsafe_op_in_unsafe_fn
)]

use std::fmt;
use std::future::Future;
use std::num::ParseIntError;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use tickscope::profile;

#[profile] fn work(n: u64) -> u64 { (0..n).sum() }

#[tickscope::profile] fn qualified(n: u64) -> u64 { n * 2 }

#[profile(name = "renamed")] fn renamed(x: u8) -> u8 { x.wrapping_add(1) }

#[profile] fn push(v: &mut Vec<u8>) { v.push(1); }

#[profile] fn nothing() {}

#[profile] fn first(s: &str) -> &str { s.split(' ').next().unwrap_or_default() }

#[profile] fn pick<'a>(a: &'a str, b: &'a str) -> &'a str { if a < b { a } else { b } }

#[profile] fn parse(s: &str) -> Result<u32, ParseIntError> { s.parse() }

#[profile] fn early(x: u32) -> u32 { if x == 0 { return 1; } x / 2 }

#[profile] fn id<T: Copy>(x: T) -> T { x }

#[profile] fn zeros<const N: usize>() -> [u8; N] { [0; N] }

#[profile] fn evens(limit: u32) -> impl Iterator<Item = u32> { (0..limit).filter(|x| x % 2 == 0) }

/// # Safety
/// `ptr` must be valid for reads.
#[profile] unsafe fn read(ptr: *const u32) -> u32 { unsafe { *ptr } }

#[profile] extern "C" fn add_c(a: i32, b: i32) -> i32 { a.wrapping_add(b) }

#[profile] unsafe extern "C" fn ffi(x: i32) -> i32 { x }

#[profile] fn leave(code: i32) -> ! { std::process::exit(code) }

#[profile] fn sign(x: i32) -> i32 { match x { 0 => 0, _ => 1 } }

#[profile] fn describe(x: u32) -> String { format!("{x}") }

#[profile]
fn statements(x: u32) -> u32 {
    let y = x.wrapping_mul(3);
    y.rotate_left(2)
}

#[profile]
fn find(v: &[u8], out: &mut usize) {
    for (i, b) in v.iter().enumerate() {
        if *b == 0 {
            *out = i;
            return;
        }
    }
    *out = v.len();
}

#[profile]
fn question_mark(s: &str) -> Result<u32, ParseIntError> {
    let n: u32 = s.trim().parse()?;
    Ok(n + 1)
}

#[profile]
fn total<I>(items: I) -> u64
where
    I: IntoIterator,
    I::Item: Into<u64>,
{
    items.into_iter().map(Into::into).sum()
}

#[profile]
fn adder(step: impl Into<u32>) -> impl Fn(u32) -> u32 {
    let step = step.into();
    move |x| x + step
}

#[profile]
fn bump(mut x: u32, (a, b): (u32, u32)) -> u32 {
    x += a + b;
    x
}

#[profile] fn r#match() -> u8 { 1 }

#[profile]
fn with_items(x: u32) -> u32 {
    const K: u32 = 3;
    fn helper(y: u32) -> u32 {
        y + K
    }
    helper(x) * K
}

#[profile]
fn inner_attribute(x: u32) -> u32 {
    #![allow(unused_parens)]
    (x + 1)
}

#[profile]
fn labelled(v: &[u8]) -> usize {
    'found: {
        for (i, b) in v.iter().enumerate() {
            if *b == 0 {
                break 'found i;
            }
        }
        v.len()
    }
}

mod reexport {
    pub use tickscope as inner;
}

#[profile(crate = crate::reexport::inner)] fn reexported(x: u8) -> u8 { x }

#[profile] async fn fetch(x: u32) -> u32 { std::future::ready(x).await }

#[profile] async fn wait() { std::future::ready(()).await; }

#[profile] async fn wait_unit() { std::future::ready(()).await }

#[profile] async fn narrow(x: u32) -> Result<u8, std::num::TryFromIntError> { let y = u8::try_from(x)?; Ok(y) }

#[profile] async fn leave_async(code: i32) -> ! { std::future::ready(()).await; std::process::exit(code) }

#[profile] async fn opaque(x: u32) -> impl fmt::Debug { std::future::ready(x).await }

#[profile] async fn first_async(s: &str) -> &str { std::future::ready(s).await }

#[profile] async fn id_async<T: Send>(x: T) -> T { std::future::ready(x).await }

#[profile] async fn zeros_async<const N: usize>() -> [u8; N] { [0; N] }

/// # Safety
/// `ptr` must be valid for reads.
#[profile] async unsafe fn read_async(ptr: *const u32) -> u32 { unsafe { *ptr } }

#[profile]
async fn early_async(x: u32) -> Result<u32, String> {
    if x == 0 {
        return Err("zero".into());
    }
    let y = std::future::ready(x).await;
    Ok(y + 1)
}

#[profile(name = "async items")]
async fn async_items(x: u32) -> u32 {
    const K: u32 = 2;
    std::future::ready(x).await * K
}

#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Meter(u32);

#[profile]
impl Meter {
    const START: u32 = 0;

    fn new() -> Self { Self(Self::START) }

    fn get(&self) -> u32 { self.0 }

    fn get_ref(&self) -> &u32 { &self.0 }

    fn set(&mut self, v: u32) { self.0 = v; }

    fn twice(self) -> Self { Self(self.0 * 2) }

    fn merged(mut self, other: Self) -> Self {
        if other.0 == 0 {
            return self;
        }
        self.0 += other.0;
        self
    }

    #[profile(name = "Meter::value")] fn value(self) -> u32 { self.0 }

    #[profile(skip)] fn raw(self) -> u32 { self.0 }

    const fn zero() -> Self { Self(0) }

    async fn later(self) -> Self { std::future::ready(self).await }

    async fn add_later(&mut self, by: u32) { self.0 += std::future::ready(by).await; }

    fn shared(self: std::rc::Rc<Self>) -> u32 { self.0 }
}

struct Stack<T> {
    items: Vec<T>,
}

#[profile]
impl<T: Clone + Send + Sync> Stack<T> {
    fn new() -> Self { Self { items: Vec::new() } }

    fn push(&mut self, item: T) { self.items.push(item); }

    fn peek(&self) -> Option<T> { self.items.last().cloned() }

    fn items(&self) -> &[T] { &self.items }

    async fn peek_later(&self) -> Option<T> { std::future::ready(self.items.last().cloned()).await }
}

trait Named {
    #[profile] fn name(&self) -> String { String::from("named") }

    #[profile]
    fn doubled(self) -> u32
    where
        Self: Sized,
    {
        self.id() * 2
    }

    fn id(&self) -> u32;
}

#[profile]
impl Named for Meter {
    fn id(&self) -> u32 { self.0 }
}

impl fmt::Display for Meter {
    #[profile] fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { write!(f, "{}", self.0) }
}

impl Meter {
    #[profile] fn side(&self) -> u32 { self.0 }

    #[profile(name = "Meter::grown")] async fn grown(self, by: u32) -> Self { Self(std::future::ready(self.0 + by).await) }
}

/// Runs a future that never waits.
fn ready<F: Future>(fut: F) -> F::Output {
    match pin!(fut).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => unreachable!("nothing here waits"),
    }
}

fn main() {
    let prof = tickscope::Profiler::builder().current_thread().start();
    let value = 7;
    let mut v = Vec::new();
    let mut at = 0;
    assert_eq!(work(3), 3);
    assert_eq!(qualified(2), 4);
    assert_eq!(renamed(1), 2);
    push(&mut v);
    nothing();
    assert_eq!(first("a b"), "a");
    assert_eq!(pick("a", "b"), "a");
    assert_eq!(parse("4"), Ok(4));
    assert_eq!(early(0) + early(4), 3);
    assert_eq!(id(5), 5);
    assert_eq!(zeros::<2>(), [0, 0]);
    assert_eq!(evens(5).count(), 3);
    // SAFETY: `&value` is valid for reads.
    assert_eq!(unsafe { read(&value) }, 7);
    assert_eq!(add_c(1, 2), 3);
    // SAFETY: `ffi` has no preconditions.
    assert_eq!(unsafe { ffi(1) }, 1);
    assert_eq!(sign(3), 1);
    assert_eq!(describe(3), "3");
    assert_eq!(statements(1), 12);
    find(&[1, 0], &mut at);
    assert_eq!(at, 1);
    assert_eq!(question_mark(" 1 "), Ok(2));
    assert_eq!(total([1u8, 2]), 3);
    assert_eq!(adder(2u8)(1), 3);
    assert_eq!(bump(1, (2, 3)), 6);
    assert_eq!(r#match(), 1);
    assert_eq!(with_items(1), 12);
    assert_eq!(inner_attribute(1), 2);
    assert_eq!(labelled(&[1, 0]), 1);
    assert_eq!(reexported(1), 1);
    assert_eq!(ready(fetch(1)), 1);
    ready(wait());
    ready(wait_unit());
    assert!(ready(narrow(300)).is_err());
    assert_eq!(format!("{:?}", ready(opaque(2))), "2");
    assert_eq!(ready(first_async("x")), "x");
    assert_eq!(ready(id_async(4)), 4);
    assert_eq!(ready(zeros_async::<1>()), [0]);
    // SAFETY: `&value` is valid for reads.
    assert_eq!(ready(unsafe { read_async(&value) }), 7);
    assert_eq!(ready(early_async(0)), Err("zero".to_owned()));
    assert_eq!(ready(early_async(1)), Ok(2));
    assert_eq!(ready(async_items(2)), 4);

    let mut meter = Meter::new();
    meter.set(2);
    assert_eq!(meter.get() + *meter.get_ref(), 4);
    assert_eq!(meter.twice().merged(Meter(1)).value(), 5);
    assert_eq!(meter.merged(Meter::zero()).raw(), 2);
    assert_eq!(ready(meter.later()), meter);
    ready(meter.add_later(1));
    assert_eq!(std::rc::Rc::new(meter).shared(), 3);
    assert_eq!(meter.name(), "named");
    assert_eq!(meter.doubled(), 6);
    assert_eq!(meter.to_string(), "3");
    assert_eq!(meter.side(), 3);
    assert_eq!(ready(meter.grown(1)), Meter(4));
    let mut stack = Stack::new();
    stack.push(1u8);
    assert_eq!(stack.peek(), Some(1));
    assert_eq!(stack.items(), [1]);
    assert_eq!(ready(stack.peek_later()), Some(1));
    prof.stop();
    assert_eq!(prof.report().get("work").map(|r| r.calls), Some(1));
    assert_eq!(prof.report().get("Meter::grown").map(|r| r.calls), Some(1));
    assert_eq!(prof.report().get("Stack::peek_later").map(|r| r.calls), Some(1));
    if std::env::args().count() > 100 {
        leave(0);
    }
    if std::env::args().count() > 200 {
        ready(leave_async(0));
    }
}
