use std::collections::BTreeMap;

use super::samples::Calls;
use super::stats::{hodges_lehmann, kth_difference, normal_quantile};
use super::*;

/// `n` calls of `ns` each, plus the deterministic jitter `(i * 7919) % spread`.
fn calls(n: u64, ns: u64, spread: u64) -> Vec<(u64, u64)> {
    (0..n)
        .map(|i| {
            let d = ns + (i * 7919) % spread.max(1);
            (d, d)
        })
        .collect()
}

fn diff(
    base: &[(&'static str, Vec<(u64, u64)>)],
    new: &[(&'static str, Vec<(u64, u64)>)],
    options: &Options,
) -> Diff {
    Diff::from_samples(
        base.iter().cloned().collect(),
        new.iter().cloned().collect(),
        options,
    )
}

#[test]
fn normal_quantiles() {
    assert!((normal_quantile(0.975) - 1.959_963_985).abs() < 1e-8);
    assert!((normal_quantile(0.5)).abs() < 1e-12);
    assert!((normal_quantile(0.005) + 2.575_829_304).abs() < 1e-8);
    assert!((normal_quantile(0.999_5) - 3.290_526_731).abs() < 1e-7);
}

#[test]
fn kth_differences_match_brute_force() {
    let x = [1, 4, 4, 9, 20];
    let y = [2, 3, 3, 10];
    let mut all: Vec<i128> = x
        .iter()
        .flat_map(|&a| y.iter().map(move |&b| b as i128 - a as i128))
        .collect();
    all.sort_unstable();
    for k in 1..=all.len() {
        assert_eq!(kth_difference(&x, &y, k as u128), all[k - 1], "k = {k}");
    }
}

#[test]
fn hodges_lehmann_of_a_pure_shift_is_the_shift() {
    let x: Vec<u64> = (0..101).map(|i| 1_000 + i * 10).collect();
    let y: Vec<u64> = x.iter().map(|v| v + 37).collect();
    let (estimate, interval) = hodges_lehmann(&x, &y, 1.96);
    assert_eq!(estimate, 37.0);
    let (low, high) = interval.unwrap();
    assert!(low < 37.0 && high > 37.0, "{low} {high}");
    // Too few calls for a 95 % interval: 2 and 2 (C = ⌊2 − 1.96·1.29⌋ < 1).
    assert_eq!(hodges_lehmann(&[1, 2], &[3, 4], 1.96).1, None);
}

#[test]
fn hodges_lehmann_interval_small_samples_exact() {
    // m = n = 10: C = ⌊50 − 1.96·√(100·21/12)⌋ = ⌊50 − 25.93⌋ = 24: the 24th and 77th of
    // the 100 differences. y − x = (j − i)·10 + 5 for i, j in 0..10.
    let x: Vec<u64> = (0..10).map(|i| 100 + i * 10).collect();
    let y: Vec<u64> = (0..10).map(|i| 105 + i * 10).collect();
    let (estimate, interval) = hodges_lehmann(&x, &y, 1.96);
    assert_eq!(estimate, 5.0);
    // Differences −85 (1), −75 (2), −65 (3), −55 (4), −45 (5), −35 (6), −25 (7), ...
    // cumulative 1, 3, 6, 10, 15, 21, 28: the 24th is −25; symmetric: the 77th is +35.
    assert_eq!(interval, Some((-25.0, 35.0)));
}

#[test]
fn verdicts_on_known_distributions() {
    let options = Options::default();
    let base = [
        ("same", calls(10_000, 2_000, 200)),
        ("slower", calls(10_000, 2_000, 200)),
        ("faster", calls(10_000, 50_000, 2_000)),
        ("tiny", calls(10_000, 200, 20)),
        ("few", calls(10, 2_000, 200)),
        ("gone", calls(100, 1_000, 10)),
        ("noisy", calls(40, 2_000, 1_000)),
    ];
    let new = [
        // 1 % slower: inside the margin.
        ("same", calls(10_000, 2_020, 200)),
        // 10 % slower: past 5 % and past 50 ns.
        ("slower", calls(10_000, 2_200, 200)),
        // 10 % faster.
        ("faster", calls(10_000, 45_000, 2_000)),
        // +20 % but 40 ns per call: under --min-change.
        ("tiny", calls(10_000, 240, 20)),
        // +50 % on 10 calls: fewer than min_calls.
        ("few", calls(10, 3_000, 200)),
        ("new", calls(100, 1_000, 10)),
        // +6 % on 40 calls spread over 1 µs: the interval crosses the margin.
        ("noisy", calls(40, 2_120, 1_000)),
    ];
    let d = diff(&base, &new, &options);
    let verdict = |name| d.row(name).unwrap().verdict;
    assert_eq!(verdict("same"), Verdict::Unchanged);
    assert_eq!(verdict("slower"), Verdict::Regressed);
    assert_eq!(verdict("faster"), Verdict::Improved);
    assert_eq!(verdict("tiny"), Verdict::Unchanged);
    assert_eq!(verdict("few"), Verdict::Inconclusive);
    assert_eq!(verdict("noisy"), Verdict::Inconclusive);
    assert_eq!(verdict("gone"), Verdict::Removed);
    assert_eq!(verdict("new"), Verdict::Added);
    // same, slower, faster, tiny, noisy; not few (10 calls), gone, new.
    assert_eq!(d.judged, 5);
    assert!((d.row_confidence - (1.0 - 0.05 / 5.0)).abs() < 1e-12);
    assert_eq!(d.row("slower").unwrap().change_ns, Some(200.0));
    assert_eq!(d.row("few").unwrap().change_ns, Some(1_000.0));
    assert_eq!(d.row("few").unwrap().interval_ns, None);
    let names: Vec<_> = d.rows.iter().map(|r| r.name).collect();
    assert_eq!(
        names,
        [
            "slower", "faster", "few", "noisy", "tiny", "same", "new", "gone"
        ]
    );
    assert_eq!(d.count(Verdict::Regressed), 1);
    // Without the minimum change, the +40 ns of "tiny" (20 %) regresses.
    let strict = Options {
        min_change_ns: 0.0,
        ..options
    };
    let d = diff(&base, &new, &strict);
    assert_eq!(d.row("tiny").unwrap().verdict, Verdict::Regressed);
}

#[test]
fn a_two_percent_change_is_never_a_regression_at_five() {
    for n in [100, 1_000, 100_000] {
        let d = diff(
            &[("f", calls(n, 50_000, 500))],
            &[("f", calls(n, 51_000, 500))],
            &Options::default(),
        );
        let verdict = d.row("f").unwrap().verdict;
        assert_ne!(verdict, Verdict::Regressed, "{n} calls");
    }
}

#[test]
fn per_call_ignores_more_calls_total_does_not() {
    let base = [("step", calls(1_000, 2_000, 100))];
    let new = [("step", calls(2_000, 2_000, 100))];
    let d = diff(&base, &new, &Options::default());
    assert_eq!(d.row("step").unwrap().verdict, Verdict::Unchanged);
    let total = Options {
        metric: Metric::Total,
        ..Options::default()
    };
    let d = diff(&base, &new, &total);
    assert_eq!(d.row("step").unwrap().verdict, Verdict::Regressed);
}

#[test]
fn self_time_compares_self_times() {
    // Durations the same, self times 30 % longer (a child got faster).
    let base: Vec<(u64, u64)> = (0..500).map(|i| (3_000 + i % 50, 1_000 + i % 50)).collect();
    let new: Vec<(u64, u64)> = (0..500).map(|i| (3_000 + i % 50, 1_300 + i % 50)).collect();
    let b = [("parent", base)];
    let n = [("parent", new)];
    let d = diff(&b, &n, &Options::default());
    assert_eq!(d.row("parent").unwrap().verdict, Verdict::Unchanged);
    let self_time = Options {
        metric: Metric::SelfTime,
        ..Options::default()
    };
    let d = diff(&b, &n, &self_time);
    assert_eq!(d.row("parent").unwrap().verdict, Verdict::Regressed);
    assert_eq!(d.row("parent").unwrap().change_ns, Some(300.0));
}

/// `blocks` blocks of `per_block` calls each, every call of block `j` lasting
/// `ns + step·j`: a run whose machine slows down step by step (block medians known exactly).
fn ramp(blocks: u64, per_block: u64, ns: u64, step: u64) -> Vec<(u64, u64)> {
    (0..blocks * per_block)
        .map(|i| {
            let d = ns + step * (i / per_block);
            (d, d)
        })
        .collect()
}

#[test]
fn more_names_widen_each_interval() {
    // 20 blocks a side, block medians 2,000 + 20·j (base) and 2,200 + 20·j (new): the
    // differences are 200 + 20·k, k = j' − j, 20 − |k| times each. Base median 2,180 (block
    // 9): margin 109 ns.
    let base = ramp(20, 10, 2_000, 20);
    let new = ramp(20, 10, 2_200, 20);
    // One name, 95 %: C = ⌊200 − 1.96·√(400·41/12)⌋ = 127, the 127th difference is at
    // k = −4 (1 + 2 + … + 15 = 120 < 127 ≤ 136): 120 .. 280, past the margin.
    let one = diff(&[("f", base.clone())], &[("f", new.clone())], &quiet());
    let row = one.row("f").unwrap();
    assert_eq!(row.verdict, Verdict::Regressed, "{one:?}");
    assert_eq!(row.interval_ns, Some((120.0, 280.0)));
    assert_eq!(row.margin_ns, Some(109.0));
    assert_eq!(row.change_ns, Some(200.0));
    let others: Vec<&'static str> = (1..100)
        .map(|i| &*Box::leak(format!("other{i}").into_boxed_str()))
        .collect();
    let mut b = vec![("f", base)];
    let mut n = vec![("f", new)];
    for name in &others {
        b.push((name, ramp(20, 10, 2_000, 20)));
        n.push((name, ramp(20, 10, 2_000, 20)));
    }
    // 100 names, each at 99.95 %: z = 3.481, C = ⌊200 − 128.68⌋ = 71, at k = −8
    // (66 < 71 ≤ 78): 40 .. 360, across the margin.
    let many = diff(&b, &n, &quiet());
    assert_eq!(many.judged, 100);
    let row = many.row("f").unwrap();
    assert_eq!(row.verdict, Verdict::Inconclusive, "{row:?}");
    assert_eq!(row.interval_ns, Some((40.0, 360.0)));
}

/// The default options without run noise: intervals of the samples alone.
fn quiet() -> Options {
    Options {
        run_noise: 0.0,
        ..Options::default()
    }
}

#[test]
fn run_noise_widens_the_interval() {
    // 10,000 calls a side, every block alike (jitter 0..20 ns, block medians 2,009 and
    // 2,039): +30 ns (1.5 %) with an interval of 30 .. 30 from the blocks. At --threshold
    // 1 % and no minimum change (margin 20.09 ns) that regresses without run noise.
    let base = [("f", calls(10_000, 2_000, 20))];
    let new = [("f", calls(10_000, 2_030, 20))];
    let strict = Options {
        threshold: 0.01,
        min_change_ns: 0.0,
        ..quiet()
    };
    let d = diff(&base, &new, &strict);
    let row = d.row("f").unwrap();
    assert_eq!(
        (row.verdict, row.interval_ns, row.reference_ns),
        (Verdict::Regressed, Some((30.0, 30.0)), Some(2_009))
    );
    // With the default 0.7 % of noise between runs, each half widens to
    // √(0² + (1.96·0.007·2,009)²) = 27.56 ns: 2.44 .. 57.56 crosses the margin.
    let d = diff(
        &base,
        &new,
        &Options {
            run_noise: Options::RUN_NOISE,
            ..strict
        },
    );
    let row = d.row("f").unwrap();
    assert_eq!(row.verdict, Verdict::Inconclusive);
    let (low, high) = row.interval_ns.unwrap();
    let floor = normal_quantile(0.975) * 0.007 * 2_009.0;
    assert!((floor - 27.563).abs() < 1e-3, "{floor}");
    assert!((low - (30.0 - floor)).abs() < 1e-9 && (high - (30.0 + floor)).abs() < 1e-9);
    // Repetitions measure the noise between runs: none is added. Six sessions a side of
    // the same calls: the session medians 2,009 and 2,039 give 30 .. 30, regressed.
    let sessions = |calls: &[(&'static str, Vec<(u64, u64)>)]| -> Vec<BTreeMap<_, _>> {
        (0..6).map(|_| calls.iter().cloned().collect()).collect()
    };
    let d = Diff::from_session_samples(
        sessions(&base),
        sessions(&new),
        &Options {
            run_noise: Options::RUN_NOISE,
            ..strict
        },
    );
    let row = d.row("f").unwrap();
    assert_eq!(
        (row.verdict, row.interval_ns),
        (Verdict::Regressed, Some((30.0, 30.0)))
    );
}

#[test]
fn calls_are_cut_into_time_blocks() {
    // 10 calls in 4 blocks: [1, 2], [3, 4, 5], [6, 7], [8, 9, 10] (calls j·10/4 ..
    // (j+1)·10/4), lower medians 1, 4, 6, 9; means 1.5, 4, 6.5, 9 (variance 31.25/3), so
    // the total's variance is 10²·(31.25/3)/4.
    let calls: Vec<(u64, u64)> = (1..=10).map(|v| (v, v)).collect();
    let c = Calls::new(calls.clone(), Metric::PerCall, 4);
    assert_eq!(c.values, [1, 4, 6, 9]);
    assert_eq!((c.median_ns, c.total_ns, c.calls), (5, 55, 10));
    assert!((c.total_var - 100.0 * 31.25 / 3.0 / 4.0).abs() < 1e-9);
    // The blocks follow the order of the calls, not their sizes.
    let reversed: Vec<(u64, u64)> = calls.iter().rev().copied().collect();
    assert_eq!(
        Calls::new(reversed, Metric::PerCall, 4).values,
        [2, 4, 7, 9]
    );
    // At most one block per call; 0 blocks: every call a sample, the total's variance
    // that of 10 independent calls (10 · 55/6).
    for blocks in [0, 10, 20] {
        let c = Calls::new(calls.clone(), Metric::PerCall, blocks);
        assert_eq!(c.values, (1..=10).collect::<Vec<u64>>(), "{blocks}");
        assert!((c.total_var - 10.0 * 55.0 / 6.0).abs() < 1e-9, "{blocks}");
    }
    // Self times are cut the same way.
    let with_self: Vec<(u64, u64)> = (1..=10).map(|v| (100 + v, v)).collect();
    assert_eq!(
        Calls::new(with_self, Metric::SelfTime, 4).values,
        [1, 4, 6, 9]
    );
}

#[test]
fn a_drifting_run_is_not_a_regression() {
    // A/A on a machine that slows down through each run (a frequency or a neighbour that
    // changes): 10,000 calls in 20 stretches of 500, the k-th at 2,000 + 30·k ns. The base
    // run goes through stretches 0..20, the new run (the same build) through 5..25,
    // in the other order: +150 ns (6.6 %) between the runs, with 570 ns of drift within
    // each.
    let base = ramp(20, 500, 2_000, 30);
    let mut new = ramp(20, 500, 2_150, 30);
    new.reverse();
    // Taking the calls as independent samples: the 10⁸ differences 150 + 30·k, k = j' − j,
    // (20 − |k|)·500² times each; C = 5·10⁷ − 1.96·√(10⁸·20,001/12) = 49,199,814 falls at
    // k = 0 (190 < 196.8 ≤ 210 in units of 500²): 150 .. 150, past the margin (5 % of the
    // base median 2,270 = 113.5 ns): regressed, with certainty it does not have.
    let calls = Options {
        blocks: 0,
        ..quiet()
    };
    let d = diff(&[("f", base.clone())], &[("f", new.clone())], &calls);
    let row = d.row("f").unwrap();
    assert_eq!(row.verdict, Verdict::Regressed);
    assert_eq!(row.interval_ns, Some((150.0, 150.0)));
    assert_eq!(row.margin_ns, Some(113.5));
    // 20 blocks a side (the default): the block medians carry the drift; C = 127 at
    // k = −4: 30 .. 270, across the margin: inconclusive, exit 0.
    let d = diff(&[("f", base)], &[("f", new)], &quiet());
    let row = d.row("f").unwrap();
    assert_eq!(row.verdict, Verdict::Inconclusive);
    assert_eq!(row.interval_ns, Some((30.0, 270.0)));
    assert_eq!(row.change_ns, Some(150.0));
    assert_eq!(row.base.unwrap().samples, 20);
    assert_eq!(d.count(Verdict::Regressed), 0);
}

#[test]
fn a_shift_over_a_steady_run_is_found() {
    // Without run noise first (exact intervals), then with the default.
    // Calls with a jitter that does not drift (every block alike): +100 ns on `medium`,
    // +2,500 ns on `large`, +40 ns on `two`, over base medians of 2,099 and 51,013 ns (the
    // jitter included): 4.8 %, 4.9 % and 1.9 %. At --threshold 2 % the first two regress
    // (medium's interval is 100 .. 100, large's 2,483 .. 2,517, past 50 and 1,020 ns) and
    // `two` stays within --min-change (50 ns); at the default 5 % (margins 105 and
    // 2,551 ns) all are unchanged.
    let options = quiet();
    let at_2 = Options {
        threshold: 0.02,
        ..options
    };
    let base = [
        ("medium", calls(10_000, 2_000, 200)),
        ("large", calls(1_000, 50_000, 2_000)),
        ("two", calls(10_000, 2_000, 200)),
        ("same", calls(10_000, 2_000, 200)),
    ];
    let new = [
        ("medium", calls(10_000, 2_100, 200)),
        ("large", calls(1_000, 52_500, 2_000)),
        ("two", calls(10_000, 2_040, 200)),
        ("same", calls(10_000, 2_000, 200)),
    ];
    let verdicts = |d: &Diff| -> Vec<(&str, Verdict)> {
        let mut v: Vec<_> = d.rows.iter().map(|r| (r.name, r.verdict)).collect();
        v.sort();
        v
    };
    let d = diff(&base, &new, &at_2);
    assert_eq!(d.row("medium").unwrap().interval_ns, Some((100.0, 100.0)));
    assert_eq!(
        d.row("large").unwrap().interval_ns,
        Some((2_483.0, 2_517.0))
    );
    assert_eq!(
        verdicts(&d),
        [
            ("large", Verdict::Regressed),
            ("medium", Verdict::Regressed),
            ("same", Verdict::Unchanged),
            ("two", Verdict::Unchanged),
        ]
    );
    assert_eq!(
        verdicts(&diff(&base, &new, &options)),
        [
            ("large", Verdict::Unchanged),
            ("medium", Verdict::Unchanged),
            ("same", Verdict::Unchanged),
            ("two", Verdict::Unchanged),
        ]
    );
    // With the default run noise (0.7 %; 4 names, z = 2.498): medium's interval widens by
    // 2.498·0.007·2,099 = 36.7 ns to 63.3 .. 136.7, large's to about 1,608 .. 3,392 ns:
    // still past the margins at 2 %, no longer within them at 5 % (inconclusive); `two`
    // (3.3 .. 76.7) crosses the 50 ns margin at 2 % (inconclusive) and lies within it at
    // 5 %; `same` (−36.7 .. 36.7) is unchanged.
    let noisy = Options::default();
    assert_eq!(
        verdicts(&diff(
            &base,
            &new,
            &Options {
                threshold: 0.02,
                ..noisy
            }
        )),
        [
            ("large", Verdict::Regressed),
            ("medium", Verdict::Regressed),
            ("same", Verdict::Unchanged),
            ("two", Verdict::Inconclusive),
        ]
    );
    let d = diff(&base, &new, &noisy);
    let (low, high) = d.row("medium").unwrap().interval_ns.unwrap();
    assert!(
        (low - 63.3).abs() < 0.1 && (high - 136.7).abs() < 0.1,
        "{low} {high}"
    );
    assert_eq!(
        verdicts(&d),
        [
            ("large", Verdict::Inconclusive),
            ("medium", Verdict::Inconclusive),
            ("same", Verdict::Unchanged),
            ("two", Verdict::Unchanged),
        ]
    );
}

#[test]
fn repetitions_judge_the_per_session_medians() {
    // Six sessions a side; within each session the calls agree (spread 10 ns), but the
    // sessions differ by up to 100 ns: an offset the calls of one session share.
    let sessions = |offsets: [u64; 6], extra: u64| -> Vec<BTreeMap<_, _>> {
        offsets
            .iter()
            .map(|&o| {
                [("step", calls(500, 2_000 + o + extra, 10))]
                    .into_iter()
                    .collect()
            })
            .collect()
    };
    let base = sessions([0, 20, 40, 60, 80, 100], 0);
    // The same session offsets in another order.
    let same = sessions([100, 0, 80, 20, 60, 40], 0);
    let d = Diff::from_session_samples(base.clone(), same, &Options::default());
    let row = d.row("step").unwrap();
    assert_eq!(d.repetitions, Some((6, 6)));
    assert_eq!(row.verdict, Verdict::Unchanged);
    assert_eq!(row.base.unwrap().calls, 3_000);
    assert_eq!(row.change_ns, Some(0.0));
    // Medians 2,004 + offset: C = ⌊18 − 1.96·√(36·13/12)⌋ = ⌊5.76⌋ = 5: the 5th smallest
    // and 5th largest of the 36 differences of offsets (multiples of 20 from −100: one of
    // −100, two of −80, three of −60), within the margin (5 % of 2,044 ns).
    assert_eq!(row.interval_ns, Some((-60.0, 60.0)));
    assert_eq!(row.reference_ns, Some(2_044));
    // Every session 400 ns (20 %) slower: regressed, on 6 samples a side.
    let slower = sessions([0, 20, 40, 60, 80, 100], 400);
    let d = Diff::from_session_samples(base.clone(), slower, &Options::default());
    assert_eq!(d.row("step").unwrap().verdict, Verdict::Regressed);
    assert_eq!(d.row("step").unwrap().change_ns, Some(400.0));
    // Two sessions a side are too few for a 95 % interval: inconclusive.
    let d = Diff::from_session_samples(
        base[..2].to_vec(),
        sessions([0, 20, 40, 60, 80, 100], 400)[..2].to_vec(),
        &Options::default(),
    );
    assert_eq!(d.row("step").unwrap().verdict, Verdict::Inconclusive);
    assert_eq!(d.row("step").unwrap().interval_ns, None);
}
