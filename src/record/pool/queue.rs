//! The recycling pool's queue in a build without `enabled`.

use std::sync::Mutex;

use crate::record::sync::lock;

/// Without `enabled` (nothing is recorded, so the pool is never on a hot path): a bounded
/// first-in first-out queue under a mutex, with the methods of crossbeam-queue's, which the
/// build then does without.
pub(super) struct ArrayQueue<T> {
    items: Mutex<std::collections::VecDeque<T>>,
    capacity: usize,
}

impl<T> ArrayQueue<T> {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            items: Mutex::new(std::collections::VecDeque::new()),
            capacity,
        }
    }

    /// Adds `item` at the back, or hands it back when the queue is full.
    pub(super) fn push(&self, item: T) -> Result<(), T> {
        let mut items = lock(&self.items);
        if items.len() >= self.capacity {
            return Err(item);
        }
        items.push_back(item);
        Ok(())
    }

    pub(super) fn pop(&self) -> Option<T> {
        lock(&self.items).pop_front()
    }

    pub(super) fn len(&self) -> usize {
        lock(&self.items).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The queue of a build without `enabled`: bounded, first in first out, full hands back.
    #[test]
    fn the_queue_without_crossbeam_is_bounded_and_in_order() {
        let queue = ArrayQueue::new(2);
        assert_eq!(queue.push(1), Ok(()));
        assert_eq!(queue.push(2), Ok(()));
        assert_eq!(queue.push(3), Err(3));
        assert_eq!(queue.len(), 2);
        assert_eq!(queue.pop(), Some(1));
        assert_eq!(queue.push(4), Ok(()));
        assert_eq!(
            (queue.pop(), queue.pop(), queue.pop()),
            (Some(2), Some(4), None)
        );
        assert_eq!(queue.len(), 0);
    }
}
