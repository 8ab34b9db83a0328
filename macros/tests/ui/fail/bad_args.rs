use tickscope::profile;

#[profile(nmae = "typo")]
fn unknown() {}

#[profile(name = 5)]
fn not_a_string() {}

#[profile(name)]
fn no_value() {}

#[profile(name = "a", name = "b")]
fn twice() {}

#[profile(name = "")]
fn empty() {}

#[profile(skip, name = "x")]
fn skip_and_name() {}

#[profile(skip = true)]
fn skip_value() {}

struct S;

#[profile(name = "S")]
impl S {
    fn f(&self) {}
}

#[profile]
impl S {
    #[profile(verbose)]
    fn g(&self) {}
}

fn main() {}
