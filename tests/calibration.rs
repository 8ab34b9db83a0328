//! The probe-overhead calibration (run by the first session that compensates) is the
//! profiler's own work: a session of all threads that is already recording never sees its
//! scopes. Its own test binary, so that the calibration runs here and nowhere before.

use tickscope::{Profiler, scope};

#[test]
fn a_session_of_all_threads_does_not_see_the_calibration() {
    let all = Profiler::builder().compensate_overhead(false).start();
    let compensating = Profiler::builder().current_thread().start();
    {
        let _g = scope!("work");
    }
    compensating.stop();
    all.stop();
    let names: Vec<String> = all
        .report()
        .rows()
        .iter()
        .map(|row| row.name.to_string())
        .collect();
    assert_eq!(names, ["work"], "only the program's scopes");
    // The calibration ran: the compensating session subtracts what it measured.
    assert!(
        matches!(
            compensating.trace().compensation,
            Some(tickscope::trace::Compensation::Applied { .. })
        ),
        "{:?}",
        compensating.trace().compensation
    );
    assert_eq!(compensating.report().get("work").map(|w| w.calls), Some(1));
}
