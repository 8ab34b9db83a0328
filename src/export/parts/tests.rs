//! The scheduling of [`threads`](super::threads) and its parts' memory.

use super::*;

/// Thread `index`'s bytes: `len` of them, from its number.
fn bytes(index: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (index * 31 + i) as u8).collect()
}

/// The bytes of threads of `lens` written with up to `workers` apart at once and `memory`
/// bytes of parts;
/// threads whose index is in `fail` fail apart; how many were written apart.
fn run(workers: usize, memory: usize, lens: &[usize], fail: &[usize]) -> (Vec<u8>, usize) {
    run_waiting(workers, memory, lens, fail, false)
}

/// [`run`]; with `wait`, the turns write no thread themselves before a helper has begun
/// one that does not fail (however busy the machine: so that one is written apart).
fn run_waiting(
    workers: usize,
    memory: usize,
    lens: &[usize],
    fail: &[usize],
    wait: bool,
) -> (Vec<u8>, usize) {
    let weights: Vec<usize> = lens.iter().map(|&l| l.max(APART_FROM)).collect();
    let begun = (std::sync::Mutex::new(false), std::sync::Condvar::new());
    let apart = |index: usize, part: &mut Part<'_>| -> io::Result<usize> {
        if !fail.contains(&index) {
            *begun.0.lock().unwrap() = true;
            begun.1.notify_all();
        }
        if fail.contains(&index) {
            part.write_all(&bytes(index, lens[index] / 2))?;
            return Err(io::Error::other("an extra track"));
        }
        // In blocks, as the writers flush.
        for block in bytes(index, lens[index]).chunks(1000) {
            part.write_all(block)?;
        }
        Ok(index)
    };
    let mut out = Vec::new();
    let mut parts = 0;
    threads_on(
        workers,
        workers,
        memory,
        &weights,
        &apart,
        &mut |index, part| match part {
            Some((part, value)) => {
                assert_eq!(value, index);
                parts += 1;
                part.copy_to(&mut out)
            }
            None => {
                if wait {
                    let timeout = std::time::Duration::from_secs(60);
                    let guard = begun.0.lock().unwrap();
                    let waited = begun.1.wait_timeout_while(guard, timeout, |b| !*b);
                    assert!(*waited.unwrap().0, "no helper began a thread in 60 s");
                }
                out.extend_from_slice(&bytes(index, lens[index]));
                Ok(())
            }
        },
    )
    .unwrap();
    (out, parts)
}

#[test]
fn threads_come_out_in_order_whatever_writes_them() {
    let lens: Vec<usize> = (0..23).map(|i| (i * 7919) % 50_000 + 1).collect();
    let expected: Vec<u8> = (0..lens.len()).flat_map(|i| bytes(i, lens[i])).collect();
    let fail = [3, 4, 17];
    for workers in [0, 1, 2, 3, 8] {
        // In memory, in memory and temporary files, and in temporary files alone.
        for memory in [MEMORY, 3 * BLOCK, 0] {
            let (out, parts) = run(workers, memory, &lens, &fail);
            assert!(out == expected, "{workers} cores, {memory} bytes");
            if workers == 0 {
                assert_eq!(parts, 0);
            }
        }
    }
    // Two helpers write a thread apart while the turn writes one itself (and it comes out
    // in its place), and never the ones that fail.
    let (out, apart) = run_waiting(2, BLOCK, &lens, &fail, true);
    assert!(
        out == expected && apart > 0,
        "{apart} threads written apart"
    );
    assert_eq!(run(1, MEMORY, &[], &[]), (Vec::new(), 0));
}

// Where temporary files can be made (`decode::temporary`).
#[cfg(all(target_os = "linux", feature = "enabled", feature = "gzip"))]
#[test]
fn parts_keep_to_their_memory_and_the_rest_goes_to_a_file() {
    let pool = Pool::new(3 * BLOCK);
    let stop = AtomicBool::new(false);
    let (one, two) = (bytes(1, 2 * BLOCK + 5), bytes(2, 2 * BLOCK));
    let (mut a, mut b) = (Part::new(&pool, &stop), Part::new(&pool, &stop));
    a.write_all(&one).unwrap();
    b.write_all(&two[..10]).unwrap();
    b.write_all(&two[10..]).unwrap();
    // `a` took the three blocks; `b` none, its bytes are in a file.
    assert_eq!((a.blocks.len(), b.blocks.len()), (3, 0));
    assert_eq!(b.spill.as_ref().map(|s| s.written), Some(2 * BLOCK as u64));
    assert_eq!(pool.used.load(Ordering::Relaxed), 3 * BLOCK);
    let mut out = Vec::new();
    a.copy_to(&mut out).unwrap();
    assert!(out == one);
    // Given back, and taken again by the next part.
    assert_eq!(pool.used.load(Ordering::Relaxed), 0);
    let mut c = Part::new(&pool, &stop);
    c.write_all(&[7; 10]).unwrap();
    assert_eq!(pool.free.lock().unwrap().len(), 2);
    out.clear();
    b.copy_to(&mut out).unwrap();
    assert!(out == two);
    // Once the writer stopped, a part takes nothing more.
    stop.store(true, Ordering::Relaxed);
    assert!(c.write_all(&[7]).is_err());
    drop(c);
    assert_eq!(pool.used.load(Ordering::Relaxed), 0);
}

#[test]
fn an_error_of_a_turn_stops_every_core() {
    let weights = vec![APART_FROM; 64];
    let apart = |index: usize, part: &mut Part<'_>| -> io::Result<()> {
        part.write_all(&[0; 1000])?;
        // The threads after the failing turn write until its error stops them.
        if index > 2 {
            loop {
                part.write_all(&[0; 1000])?;
            }
        }
        Ok(())
    };
    let mut turns = 0;
    let error = threads_on(3, 4, 4000, &weights, &apart, &mut |index, _| {
        turns += 1;
        match index {
            2 => Err(io::Error::other("disk full")),
            _ => Ok(()),
        }
    })
    .unwrap_err();
    assert_eq!(error.to_string(), "disk full");
    assert_eq!(turns, 3);
}

#[test]
fn a_panic_apart_is_raised_by_the_turns() {
    // Thread 5 alone is written apart (in reach from the first turn: three cores take up to
    // six threads ahead); its turn would write it without a panic.
    let weights: Vec<usize> = (0..8)
        .map(|i| if i == 5 { APART_FROM } else { 0 })
        .collect();
    let taken = AtomicBool::new(false);
    let apart = |index: usize, _: &mut Part<'_>| -> io::Result<()> {
        taken.store(true, Ordering::Relaxed);
        panic!("thread {index}");
    };
    let panic = catch_unwind(AssertUnwindSafe(|| {
        threads_on(3, 2, MEMORY, &weights, &apart, &mut |index, _| {
            // The first turn waits until the core took thread 5 (ten seconds at most).
            let start = std::time::Instant::now();
            while index == 0 && !taken.load(Ordering::Relaxed) {
                assert!(start.elapsed().as_secs() < 10, "no core took thread 5");
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            Ok(())
        })
    }))
    .unwrap_err();
    let message = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .unwrap_or_default();
    assert_eq!(message, "thread 5");
}
