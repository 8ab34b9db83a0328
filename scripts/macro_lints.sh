#!/usr/bin/env bash
# Checks that `#[profile]` makes no warning in its users' code: writes a scratch crate with every
# form the attribute supports under `#![deny(warnings)]`, `clippy::pedantic` and several
# allow-by-default rustc lints, depending on this checkout of tickscope by path, and runs
# `cargo clippy -- -D warnings -W clippy::pedantic` on it. Exits non-zero on any warning.
#
# The same code with every `#[profile]` attribute removed is checked first, so that the scratch
# code itself is known to be clean: whatever the second run reports, the attribute introduced.
# Both runs are made for editions 2024 and 2021.
#
#   scripts/macro_lints.sh        (from the repository root; offline once the workspace is built)
#
# Builds go to $CARGO_TARGET_DIR/macro-lints (default target/macro-lints), kept between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
target="${CARGO_TARGET_DIR:-target}/macro-lints"
[[ $target == /* ]] || target="$root/$target"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Offline when the registry already holds what the lock file names (it does once the workspace
# has been built), so that the check runs without network.
offline=()
if cargo metadata --offline --format-version 1 --manifest-path "$root/Cargo.toml" \
    >/dev/null 2>&1; then
    offline=(--offline)
fi

make_crate() { # DIR EDITION: a crate depending on this checkout of tickscope
    mkdir -p "$1/src"
    cat > "$1/Cargo.toml" <<EOF
[package]
name = "tickscope-macro-lints"
version = "0.0.0"
edition = "$2"
publish = false

[dependencies]
tickscope = { path = "$root" }

[workspace]
EOF
    # The workspace's lock file pins the versions the registry already has.
    cp "$root/Cargo.lock" "$1/Cargo.lock"
}

cat > "$work/lib.rs" <<'RS'
//! Every form `#[profile]` accepts, written so that clippy (pedantic included) has nothing to
//! say about it without the attribute.
#![deny(warnings)]
#![warn(clippy::pedantic)]
#![warn(
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
    unsafe_op_in_unsafe_fn,
    missing_docs
)]

use std::fmt;
use std::num::ParseIntError;

use tickscope::profile;

/// One expression.
#[tickscope::profile]
#[must_use]
pub fn sum(n: u64) -> u64 {
    (0..n).sum()
}

/// The same through the imported name.
#[profile]
#[must_use]
pub fn double(n: u64) -> u64 {
    n * 2
}

/// Statements, no value.
#[tickscope::profile]
pub fn push(v: &mut Vec<u8>) {
    v.push(1);
}

/// Empty.
#[tickscope::profile]
pub fn nothing() {}

/// A statement and a value.
#[tickscope::profile]
#[must_use]
pub fn statements(x: u32) -> u32 {
    let y = x.wrapping_mul(3);
    y.rotate_left(2)
}

/// Renamed.
#[tickscope::profile(name = "custom name")]
#[must_use]
pub fn renamed(x: u8) -> u8 {
    x.wrapping_add(1)
}

/// Early returns.
#[tickscope::profile]
#[must_use]
pub fn early(x: u32) -> u32 {
    if x == 0 {
        return 1;
    }
    x / 2
}

/// `return` in a loop, unit result.
#[tickscope::profile]
pub fn find(v: &[u8], out: &mut usize) {
    for (i, b) in v.iter().enumerate() {
        if *b == 0 {
            *out = i;
            return;
        }
    }
    *out = v.len();
}

/// `?`.
///
/// # Errors
/// When `s` is not a number.
#[tickscope::profile]
pub fn parse(s: &str) -> Result<u32, ParseIntError> {
    let n: u32 = s.trim().parse()?;
    Ok(n + 1)
}

/// A reference with a named lifetime.
#[tickscope::profile]
#[must_use]
pub fn longest<'a>(a: &'a str, b: &'a str) -> &'a str {
    if a.len() >= b.len() { a } else { b }
}

/// A reference with an elided lifetime.
#[tickscope::profile]
#[must_use]
pub fn first_word(s: &str) -> &str {
    s.split(' ').next().unwrap_or_default()
}

/// Generic with a where clause.
#[tickscope::profile]
pub fn total<I>(items: I) -> u64
where
    I: IntoIterator,
    I::Item: Into<u64>,
{
    items.into_iter().map(Into::into).sum()
}

/// `impl Trait` out.
#[tickscope::profile]
pub fn evens(limit: u32) -> impl Iterator<Item = u32> {
    (0..limit).filter(|x| x % 2 == 0)
}

/// `impl Trait` in and out.
#[tickscope::profile]
pub fn adder(step: impl Into<u32>) -> impl Fn(u32) -> u32 {
    let step = step.into();
    move |x| x + step
}

/// Const generic.
#[tickscope::profile]
#[must_use]
pub fn zeros<const N: usize>() -> [u8; N] {
    [0; N]
}

/// Unsafe.
///
/// # Safety
/// `ptr` must be valid for reads.
#[tickscope::profile]
#[must_use]
pub unsafe fn read(ptr: *const u32) -> u32 {
    // SAFETY: the caller guarantees `ptr` is valid for reads.
    unsafe { *ptr }
}

/// An ABI.
#[tickscope::profile]
#[must_use]
pub extern "C" fn add_c(a: i32, b: i32) -> i32 {
    a.wrapping_add(b)
}

/// Unsafe with an ABI.
///
/// # Safety
/// None needed.
#[tickscope::profile]
#[must_use]
pub unsafe extern "C" fn ffi(x: i32) -> i32 {
    x
}

/// Never returns.
#[tickscope::profile]
pub fn leave(code: i32) -> ! {
    std::process::exit(code)
}

/// `mut` bindings and patterns.
#[tickscope::profile]
#[must_use]
pub fn bump(mut x: u32, (a, b): (u32, u32)) -> u32 {
    x += a + b;
    x
}

/// A raw identifier.
#[tickscope::profile]
#[must_use]
pub fn r#match() -> u8 {
    1
}

/// Items before the statements.
#[tickscope::profile]
#[must_use]
pub fn with_items(x: u32) -> u32 {
    const K: u32 = 3;
    fn helper(y: u32) -> u32 {
        y + K
    }
    helper(x) * K
}

/// An inner attribute.
#[tickscope::profile]
#[must_use]
pub fn inner_attribute(x: u32) -> u32 {
    #![allow(clippy::identity_op)]
    x + 0
}

/// A block-like body.
#[tickscope::profile]
#[must_use]
pub fn classify(x: i32) -> &'static str {
    match x.signum() {
        -1 => "negative",
        0 => "zero",
        _ => "positive",
    }
}

/// A labelled block.
#[tickscope::profile]
#[must_use]
pub fn labelled(v: &[u8]) -> usize {
    'found: {
        for (i, b) in v.iter().enumerate() {
            if *b == 0 {
                break 'found i;
            }
        }
        v.len()
    }
}

/// A macro call.
#[tickscope::profile]
#[must_use]
pub fn describe(x: u32) -> String {
    format!("x = {x}")
}

/// A re-exported tickscope.
pub mod reexport {
    pub use tickscope as inner;
}

/// Through the re-export.
#[tickscope::profile(crate = crate::reexport::inner)]
#[must_use]
pub fn through_reexport(x: u8) -> u8 {
    x
}

/// A type with methods.
#[derive(Debug, Default, Clone)]
pub struct Stack<T> {
    items: Vec<T>,
}

#[tickscope::profile]
impl<T: Clone + Send + Sync> Stack<T> {
    /// An associated constant.
    pub const CAPACITY: usize = 16;

    /// `Self` out.
    #[must_use]
    pub fn new() -> Self {
        Self {
            items: Vec::with_capacity(Self::CAPACITY),
        }
    }

    /// `&mut self`.
    pub fn push(&mut self, item: T) {
        self.items.push(item);
    }

    /// `&self`, a value.
    #[must_use]
    pub fn peek(&self) -> Option<T> {
        self.items.last().cloned()
    }

    /// `&self`, a reference.
    #[must_use]
    pub fn items(&self) -> &[T] {
        &self.items
    }

    /// `self`.
    #[must_use]
    pub fn into_items(self) -> Vec<T> {
        self.items
    }

    /// `Self` in and out, an early return.
    #[must_use]
    pub fn merged(mut self, other: Self) -> Self {
        if other.items.is_empty() {
            return self;
        }
        self.items.extend(other.items);
        self
    }

    /// Renamed.
    #[profile(name = "Stack::size")]
    #[must_use]
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Left out.
    #[profile(skip)]
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// A `const fn`, left out.
    #[must_use]
    pub const fn capacity() -> usize {
        Self::CAPACITY
    }

    /// Async, a value.
    pub async fn peek_later(&self) -> Option<T> {
        std::future::ready(()).await;
        self.items.last().cloned()
    }

    /// Async, `Self` out.
    pub async fn cloned_later(&self) -> Self {
        std::future::ready(()).await;
        Self {
            items: self.items.clone(),
        }
    }

    /// Async, unit.
    pub async fn push_later(&mut self, item: T) {
        std::future::ready(()).await;
        self.items.push(item);
    }

    /// `Rc<Self>`.
    #[must_use]
    pub fn shared_len(self: std::rc::Rc<Self>) -> usize {
        self.items.len()
    }
}

/// Area.
pub trait Shape {
    /// The area.
    fn area(&self) -> f64;

    /// A default method.
    #[tickscope::profile]
    fn describe(&self) -> String {
        format!("area {}", self.area())
    }

    /// A default method that needs `Self: Sized`.
    #[tickscope::profile]
    fn doubled(self) -> f64
    where
        Self: Sized,
    {
        self.area() * 2.0
    }
}

/// A square.
#[derive(Debug, Clone, Copy)]
pub struct Square(pub f64);

#[tickscope::profile]
impl Shape for Square {
    fn area(&self) -> f64 {
        self.0 * self.0
    }
}

impl fmt::Display for Square {
    #[tickscope::profile]
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "square {}", self.0)
    }
}

impl Square {
    /// A single method.
    #[tickscope::profile]
    #[must_use]
    pub fn side(&self) -> f64 {
        self.0
    }

    /// A single async method.
    #[tickscope::profile(name = "Square::grown")]
    pub async fn grown(self, by: f64) -> Self {
        std::future::ready(()).await;
        Self(self.0 + by)
    }
}

/// Async, a value.
#[tickscope::profile]
pub async fn fetch(x: u32) -> u32 {
    std::future::ready(x).await + 1
}

/// Async, unit.
#[tickscope::profile]
pub async fn record(v: &mut Vec<u8>) {
    std::future::ready(()).await;
    v.push(1);
}

/// Async, `?` and `return`.
///
/// # Errors
/// When `x` does not fit a byte.
#[tickscope::profile]
pub async fn narrow(x: u32) -> Result<u8, std::num::TryFromIntError> {
    let y = u8::try_from(std::future::ready(x).await)?;
    if y == 0 {
        return Ok(0);
    }
    Ok(y - 1)
}

/// Async, `impl Trait` out.
#[tickscope::profile]
pub async fn opaque(x: u32) -> impl fmt::Debug {
    std::future::ready(x).await
}

/// Async, a reference.
#[tickscope::profile]
pub async fn first_async(s: &str) -> &str {
    std::future::ready(()).await;
    s.split(' ').next().unwrap_or_default()
}

/// Async, generic.
#[tickscope::profile]
pub async fn total_async<I>(items: I) -> u64
where
    I: IntoIterator,
    I::Item: Into<u64>,
{
    std::future::ready(()).await;
    items.into_iter().map(Into::into).sum()
}

/// Async, const generic.
#[tickscope::profile]
pub async fn zeros_async<const N: usize>() -> [u8; N] {
    std::future::ready([0; N]).await
}

/// Async and unsafe.
///
/// # Safety
/// `ptr` must be valid for reads.
#[tickscope::profile]
pub async unsafe fn read_async(ptr: *const u32) -> u32 {
    std::future::ready(()).await;
    // SAFETY: the caller guarantees `ptr` is valid for reads.
    unsafe { *ptr }
}

/// Async, never returns.
#[tickscope::profile]
pub async fn serve(x: u32) -> ! {
    loop {
        if std::future::ready(x).await == 0 {
            std::process::exit(0);
        }
    }
}

/// Async, renamed, items first.
#[tickscope::profile(name = "async items")]
pub async fn async_items(x: u32) -> u32 {
    const K: u32 = 2;
    std::future::ready(x).await * K
}

/// Bodies on one line, as rustfmt leaves short ones: rustc's `unused_braces` looks at those.
pub mod one_line {
    use std::fmt;
    use std::num::ParseIntError;

    /// One expression.
    #[tickscope::profile] #[must_use] pub fn work(n: u64) -> u64 { (0..n).sum() }

    /// Renamed.
    #[tickscope::profile(name = "one line")] #[must_use] pub fn renamed(x: u8) -> u8 { x.wrapping_add(1) }

    /// A statement.
    #[tickscope::profile] pub fn push(v: &mut Vec<u8>) { v.push(1); }

    /// Empty.
    #[tickscope::profile] pub fn nothing() {}

    /// A unit call as the value.
    #[tickscope::profile] pub fn clear(v: &mut Vec<u8>) { v.clear(); }

    /// A reference.
    #[tickscope::profile] #[must_use] pub fn first(s: &str) -> &str { s.split(' ').next().unwrap_or_default() }

    /// A reference with a named lifetime.
    #[tickscope::profile] #[must_use] pub fn pick<'a>(a: &'a str, b: &'a str) -> &'a str { if a < b { a } else { b } }

    /// `?`.
    ///
    /// # Errors
    /// When `s` is not a number.
    #[tickscope::profile] pub fn parse(s: &str) -> Result<u32, ParseIntError> { s.parse() }

    /// An early return.
    #[tickscope::profile] #[must_use] pub fn early(x: u32) -> u32 { if x == 0 { return 1; } x / 2 }

    /// Generic.
    #[tickscope::profile] #[must_use] pub fn id<T: Copy>(x: T) -> T { x }

    /// Const generic.
    #[tickscope::profile] #[must_use] pub fn zeros<const N: usize>() -> [u8; N] { [0; N] }

    /// `impl Trait` out.
    #[tickscope::profile] pub fn evens(limit: u32) -> impl Iterator<Item = u32> { (0..limit).filter(|x| x % 2 == 0) }

    /// Unsafe.
    ///
    /// # Safety
    /// `ptr` must be valid for reads.
    #[tickscope::profile] #[must_use] pub unsafe fn read(ptr: *const u32) -> u32 { unsafe { *ptr } }

    /// An ABI.
    #[tickscope::profile] #[must_use] pub extern "C" fn add_c(a: i32, b: i32) -> i32 { a.wrapping_add(b) }

    /// Never returns.
    #[tickscope::profile] pub fn leave(code: i32) -> ! { std::process::exit(code) }

    /// A block-like body.
    #[tickscope::profile] #[must_use] pub fn sign(x: i32) -> i32 { match x { 0 => 0, _ => 1 } }

    /// A macro call.
    #[tickscope::profile] #[must_use] pub fn describe(x: u32) -> String { format!("{x}") }

    /// Through a re-export.
    #[tickscope::profile(crate = crate::reexport::inner)] #[must_use] pub fn reexported(x: u8) -> u8 { x }

    /// Async, a value.
    #[tickscope::profile] pub async fn fetch(x: u32) -> u32 { std::future::ready(x).await }

    /// Async, unit.
    #[tickscope::profile] pub async fn wait() { std::future::ready(()).await; }

    /// Async, unit without a semicolon.
    #[tickscope::profile] pub async fn wait_unit() { std::future::ready(()).await }

    /// Async, `?`.
    ///
    /// # Errors
    /// When `x` does not fit a byte.
    #[tickscope::profile] pub async fn narrow(x: u32) -> Result<u8, std::num::TryFromIntError> { let y = u8::try_from(std::future::ready(x).await)?; Ok(y) }

    /// Async, never returns.
    #[tickscope::profile] pub async fn leave_async(code: i32) -> ! { std::future::ready(()).await; std::process::exit(code) }

    /// Async, `impl Trait` out.
    #[tickscope::profile] pub async fn opaque(x: u32) -> impl fmt::Debug { std::future::ready(x).await }

    /// Async, a reference.
    #[tickscope::profile] pub async fn first_async(s: &str) -> &str { std::future::ready(s).await }

    /// Async, generic.
    #[tickscope::profile] pub async fn id_async<T: Send>(x: T) -> T { std::future::ready(x).await }

    /// A type.
    #[derive(Debug, Default, Clone, Copy)]
    pub struct Meter(pub u32);

    #[tickscope::profile]
    impl Meter {
        /// `Self` out.
        #[must_use] pub fn new() -> Self { Self(0) }
        /// `&self`.
        #[must_use] pub fn get(&self) -> u32 { self.0 }
        /// A reference.
        #[must_use] pub fn get_ref(&self) -> &u32 { &self.0 }
        /// `&mut self`.
        pub fn set(&mut self, v: u32) { self.0 = v; }
        /// `self`.
        #[must_use] pub fn twice(self) -> Self { Self(self.0 * 2) }
        /// Renamed.
        #[profile(name = "Meter::value")] #[must_use] pub fn value(self) -> u32 { self.0 }
        /// Left out.
        #[profile(skip)] #[must_use] pub fn raw(self) -> u32 { self.0 }
        /// A `const fn`, left out.
        #[must_use] pub const fn zero() -> Self { Self(0) }
        /// Async.
        pub async fn later(self) -> Self { std::future::ready(self).await }
    }

    /// A trait.
    pub trait Named {
        /// A default method.
        #[tickscope::profile] fn name(&self) -> String { String::from("named") }
        /// Required.
        fn id(&self) -> u32;
    }

    #[tickscope::profile]
    impl Named for Meter {
        fn id(&self) -> u32 { self.0 }
    }

    impl fmt::Display for Meter {
        #[tickscope::profile] fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { write!(f, "{}", self.0) }
    }
}
RS

clippy_on() { # DIR LABEL
    echo "macro_lints: clippy on the scratch crate, $2" >&2
    (cd "$1" && CARGO_TARGET_DIR="$target" cargo clippy "${offline[@]}" --quiet \
        -- -D warnings -W clippy::pedantic)
}

# The scratch code with every `#[profile]` attribute removed (and its import).
attr='#\[(tickscope::)?profile(\([^)]*\))?\]'
sed -E -e "/^[[:space:]]*$attr[[:space:]]*\$/d" -e "/^[[:space:]]*\/\//!s/$attr[[:space:]]+//g" \
    -e '/^use tickscope::profile;$/d' "$work/lib.rs" > "$work/plain.rs"

failed=()
for edition in 2024 2021; do
    make_crate "$work/plain-$edition" "$edition"
    cp "$work/plain.rs" "$work/plain-$edition/src/lib.rs"
    if ! clippy_on "$work/plain-$edition" "edition $edition, without #[profile]"; then
        echo "macro_lints: the scratch code warns without the attribute: fix $0" >&2
        exit 2
    fi
    make_crate "$work/profiled-$edition" "$edition"
    cp "$work/lib.rs" "$work/profiled-$edition/src/lib.rs"
    if ! clippy_on "$work/profiled-$edition" "edition $edition, with #[profile]"; then
        failed+=("$edition")
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "macro_lints: #[profile] makes its users' code warn (edition ${failed[*]}; see above)" >&2
    exit 1
fi
echo "macro_lints: ok"
