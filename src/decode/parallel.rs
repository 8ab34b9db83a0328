//! Work spread over the machine's cores: decoding threads apart, and summing their rows.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Below this much work (in records) in all, one core does it: starting threads would cost
/// more than they save.
pub(crate) const PARALLEL_FROM: usize = 1 << 18;

/// `f(index, item)` for every item, in order, spread over the available cores when the
/// items' `weight`s add up to `parallel_from` or more; the largest items are started first, so that one
/// large item does not end the run alone.
pub(crate) fn map<T: Sync, R: Send>(
    items: &[T],
    parallel_from: usize,
    weight: impl Fn(&T) -> usize,
    f: impl Fn(usize, &T) -> R + Sync,
) -> Vec<R> {
    let weights: Vec<usize> = items.iter().map(&weight).collect();
    let total: usize = weights.iter().sum();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = cores.min(items.len());
    if workers < 2 || total < parallel_from {
        return items
            .iter()
            .enumerate()
            .map(|(i, item)| f(i, item))
            .collect();
    }
    // Heaviest first.
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(weights[i]));
    let results: Vec<Mutex<Option<R>>> = items.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let work = || {
        while let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
            let result = f(i, &items[i]);
            // A worker that panicked poisons nothing here: each slot is written once.
            *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
        }
    };
    std::thread::scope(|s| {
        for _ in 1..workers {
            s.spawn(work);
        }
        work();
    });
    results
        .into_iter()
        .map(|slot| {
            slot.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .expect("every item is done once the workers are joined")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_in_item_order_whatever_runs_them() {
        // Enough weight to take the parallel path, items of very different sizes.
        let items: Vec<usize> = (0..37).map(|i| (i * 7919) % 101).collect();
        let out = map(&items, 0, |_| 1, |i, &x| (i, x * 2));
        assert_eq!(
            out,
            items
                .iter()
                .enumerate()
                .map(|(i, &x)| (i, x * 2))
                .collect::<Vec<_>>()
        );
        let small = map(&items, usize::MAX, |_| 1, |i, &x| (i, x * 2));
        assert_eq!(small, out);
        assert!(map(&[] as &[u8], 0, |_| 0, |_, _| 0).is_empty());
    }
}
