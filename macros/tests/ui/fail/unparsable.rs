use tickscope::profile;

// rustc's own error must show: the attribute re-emits what it cannot parse.
#[profile]
fn broken() -> u32 {
    let x = ;
    x
}

fn main() {}
