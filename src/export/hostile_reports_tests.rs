//! The HTML report and the diff of hostile sessions of async calls (those of
//! `hostile_async_tests`) read in pieces, their calls matched as the threads are read again:
//! the decoded trace's page and diff, or declined (decoded whole); never other numbers.

use super::hostile_async_tests::{Forge, forge, hostile};
use super::html;
use crate::capture::Capture;
use crate::decode::summary::Summary;
use crate::export::Format;
use crate::report::compare::{Diff, Options};
use crate::trace::Trace;

/// The page and the diff (of the captures with themselves) read in pieces are the decoded
/// trace's when made; the page is made exactly when the captures' calls are summed as read.
/// Returns whether each was made.
fn assert_as_decoded(captures: &[Capture]) -> (bool, bool) {
    let trace = Trace::from_captures(captures);
    let refs: Vec<&Capture> = captures.iter().collect();
    let mut page = Vec::new();
    let paged = match html::Options::new().write_captures(&refs, &mut page) {
        Some(written) => {
            written.unwrap();
            let mut whole = Vec::new();
            html::write(&trace, &mut whole, &html::Options::new()).unwrap();
            assert!(page == whole, "the decoded trace's page");
            true
        }
        None => false,
    };
    let summed = Summary::of(captures).is_some();
    assert_eq!(paged, summed);
    let options = Options {
        blocks: 7,
        ..Options::default()
    };
    let diff = Diff::of_captures(captures, captures, &options, false);
    if let Some(diff) = &diff {
        assert_eq!(diff, &Diff::new(&trace, &trace, &options));
    }
    (paged, diff.is_some())
}

#[test]
fn hostile_reports_and_diffs_are_the_decoded_ones_or_declined() {
    let mut made = (0, 0);
    let mut count = |(paged, diffed): (bool, bool)| {
        made.0 += u32::from(paged);
        made.1 += u32::from(diffed);
    };
    let cases = [
        Forge {
            far: true,
            threads: 3,
            ..forge(700)
        },
        Forge {
            flat: true,
            salvaged: true,
            ..forge(500)
        },
        Forge {
            narrow: true,
            cut_lead: true,
            ..forge(400)
        },
        Forge {
            salvaged: true,
            cut_lead: true,
            ..forge(100)
        },
        Forge {
            backwards: true,
            ..forge(200)
        },
        Forge {
            backwards: true,
            salvaged: true,
            ..forge(204)
        },
        forge(3),
        forge(4),
    ];
    for f in cases {
        count(assert_as_decoded(&[hostile(f)]));
    }
    // Several sessions of calls: their calls merged as read, as the trace merges them.
    let two = [hostile(forge(5)), hostile(forge(6))];
    assert_eq!(assert_as_decoded(&two), (true, true));
    assert!(made.0 >= 6 && made.1 >= 6, "{made:?} made");
}
