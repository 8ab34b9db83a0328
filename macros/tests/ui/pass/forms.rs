//! Every form `#[profile]` accepts compiles, keeps its signature, and can be called.
#![deny(warnings)]

use tickscope::profile;

/// Docs are kept.
#[profile]
#[inline(never)]
pub fn free(x: u32) -> u32 {
    x + 1
}

#[profile(name = "renamed")]
fn renamed<'a, T: AsRef<str> + ?Sized>(s: &'a T) -> &'a str
where
    T: 'a,
{
    s.as_ref()
}

#[profile]
fn never() -> ! {
    std::process::exit(0)
}

#[profile]
fn opaque() -> impl Iterator<Item = u8> {
    [1u8, 2].into_iter()
}

#[profile]
unsafe extern "C" fn ffi(x: i32) -> i32 {
    x
}

#[profile]
async fn fetch(x: u32) -> Result<u32, std::num::TryFromIntError> {
    let y: u8 = u8::try_from(x)?;
    if y == 0 {
        return Ok(0);
    }
    Ok(u32::from(y))
}

#[profile]
async fn opaque_async() -> impl std::fmt::Debug {
    3
}

#[profile]
async fn unit_async(v: &mut Vec<u8>) {
    v.push(1);
}

struct Thing<T>(T);

#[profile]
impl<T: Clone + Send> Thing<T> {
    pub fn get(&self) -> T {
        self.0.clone()
    }

    async fn get_later(&self) -> T {
        self.0.clone()
    }

    fn consume(self) -> T {
        self.0
    }

    #[profile(skip)]
    fn untouched(&self) {}

    #[profile(name = "Thing::custom")]
    fn custom(&mut self, value: T) {
        self.0 = value;
    }

    const fn constant() -> u8 {
        1
    }
}

trait Greet {
    #[profile]
    fn hello(&self) -> String {
        "hello".to_owned()
    }

    fn name(&self) -> String;
}

#[profile]
impl Greet for Thing<u8> {
    fn name(&self) -> String {
        self.0.to_string()
    }
}

mod reexport {
    pub use tickscope as inner;
}

#[profile(crate = crate::reexport::inner)]
fn through_reexport() {}

fn assert_send<F: std::future::Future + Send>(f: F) -> F {
    f
}

fn main() {
    let _ = free(1);
    let _ = renamed("x");
    let _ = opaque().count();
    // SAFETY: `ffi` has no preconditions.
    let _ = unsafe { ffi(1) };
    let _ = assert_send(fetch(1));
    let _ = opaque_async();
    let mut v = Vec::new();
    let _ = unit_async(&mut v);
    let mut thing = Thing(1u8);
    let _ = thing.get();
    let _ = assert_send(thing.get_later());
    thing.untouched();
    thing.custom(2);
    let _ = Thing::<u8>::constant();
    const C: u8 = Thing::<u8>::constant();
    let _ = C;
    let _ = thing.hello();
    let _ = thing.name();
    let _ = thing.consume();
    through_reexport();
    if std::env::args().count() > 100 {
        never();
    }
}
