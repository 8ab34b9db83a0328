use tickscope::profile;

#[profile]
const fn answer() -> u32 {
    42
}

struct S;

#[profile]
impl S {
    #[profile(name = "S::limit")]
    const fn limit() -> u32 {
        1
    }
}

fn main() {}
