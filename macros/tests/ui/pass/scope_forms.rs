use tickscope::{Profiler, scope};

fn main() {
    let prof = Profiler::builder().current_thread().start();
    for i in 0..2u32 {
        let _named = scope!(name = format!("doc {i}"), bytes = i, label = %"x", items = ?[i]);
        let link = tickscope::link();
        let _followed = scope!(name = format!("follow {i}"), follows = link);
        let _followed_args = scope!(name = "follow args", follows = link, n = 1u8,);
    }
    prof.stop();
}
