use tickscope::profile;

#[profile]
struct Config {
    verbose: bool,
}

fn main() {}
