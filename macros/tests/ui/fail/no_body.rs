use tickscope::profile;

trait Parse {
    #[profile]
    fn parse(&self) -> u32;
}

fn main() {}
