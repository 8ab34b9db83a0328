//! With the `enabled` feature off, `scope!` records nothing and does not evaluate dynamic names.
//!
//! `cargo test --no-default-features --test disabled`
#![cfg(not(feature = "enabled"))]

use tickscope::{Profiler, scope};

#[test]
fn nothing_is_recorded() {
    let prof = Profiler::builder().current_thread().start();
    let evaluated = std::cell::Cell::new(false);
    {
        let _g = scope!("compiled out");
        let _d = scope!(
            name = {
                evaluated.set(true);
                "dynamic"
            }
        );
        assert!(!_g.is_recording());
        assert_eq!(std::mem::size_of_val(&_g), std::mem::size_of::<u32>());
    }
    prof.stop();
    assert!(prof.report().is_empty());
    assert!(!evaluated.get());
}
