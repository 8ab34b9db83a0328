//! Rank statistics: the Hodges–Lehmann shift, its interval, and the normal quantile.

/// The Hodges–Lehmann shift of `y` from `x` (both sorted ascending, not empty) and its
/// rank-based interval at the normal quantile `z` (`None` when the samples are too small for
/// that level).
pub(crate) fn hodges_lehmann(x: &[u64], y: &[u64], z: f64) -> (f64, Option<(f64, f64)>) {
    let (m, n) = (x.len() as u128, y.len() as u128);
    let pairs = m * n;
    let estimate = if pairs % 2 == 1 {
        kth_difference(x, y, pairs.div_ceil(2)) as f64
    } else {
        let low = kth_difference(x, y, pairs / 2);
        let high = kth_difference(x, y, pairs / 2 + 1);
        (low + high) as f64 / 2.0
    };
    let (mf, nf) = (m as f64, n as f64);
    let c = (mf * nf / 2.0 - z * (mf * nf * (mf + nf + 1.0) / 12.0).sqrt()).floor();
    let interval = (c >= 1.0).then(|| {
        let c = c as u128;
        (
            kth_difference(x, y, c) as f64,
            kth_difference(x, y, pairs - c + 1) as f64,
        )
    });
    (estimate, interval)
}

/// The `k`-th smallest (1 is the smallest) of the differences `y[j] − x[i]`, both sorted
/// ascending: a binary search on the difference, counting the pairs at or below it in
/// `O(len x + len y)`.
pub(crate) fn kth_difference(x: &[u64], y: &[u64], k: u128) -> i128 {
    let (first, last) = (x[0] as i128, x[x.len() - 1] as i128);
    let (mut lo, mut hi) = (y[0] as i128 - last, y[y.len() - 1] as i128 - first);
    // The smallest d with at least k differences <= d.
    while lo < hi {
        let mid = lo + (hi - lo).div_euclid(2);
        if pairs_at_most(x, y, mid) >= k {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

/// How many differences `y[j] − x[i]` are at most `d`.
fn pairs_at_most(x: &[u64], y: &[u64], d: i128) -> u128 {
    // y[j] − x[i] <= d  ⇔  x[i] >= y[j] − d; the first such i only moves right as j grows.
    let mut i = 0;
    let mut count = 0u128;
    for &yj in y {
        let bound = yj as i128 - d;
        while i < x.len() && (x[i] as i128) < bound {
            i += 1;
        }
        count += (x.len() - i) as u128;
    }
    count
}

/// The quantile of the standard normal distribution at `p` (0 < p < 1), by Acklam's rational
/// approximation (relative error below 1.2e-9).
pub(crate) fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let p = p.clamp(1e-300, 1.0 - 1e-16);
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}
