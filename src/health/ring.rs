//! A bounded ring of samples (the oldest is dropped when full) and the
//! percentile maths the health sampler applies to commit latencies.

use std::collections::VecDeque;

/// At most `capacity` items, oldest first.
pub struct Ring<T> {
    items: VecDeque<T>,
    capacity: usize,
}

impl<T> Ring<T> {
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Ring {
            items: VecDeque::with_capacity(capacity),
            capacity,
        }
    }

    /// Adds `item`, dropping the oldest when the ring is full.
    pub fn push(&mut self, item: T) {
        if self.items.len() == self.capacity {
            self.items.pop_front();
        }
        self.items.push_back(item);
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.items.len()
    }

    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn latest(&self) -> Option<&T> {
        self.items.back()
    }

    /// The newest `n` items, oldest first.
    pub fn last(&self, n: usize) -> impl Iterator<Item = &T> {
        self.items.iter().skip(self.items.len().saturating_sub(n))
    }
}

/// The `q`-th percentile (0 < q <= 100) of `sorted` (ascending) by the
/// nearest-rank method: the smallest value with at least q% of the values
/// at or below it. `None` for no values.
pub fn percentile(sorted: &[u32], q: f64) -> Option<u32> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_ring_drops_its_oldest_and_never_grows() {
        let mut r = Ring::new(3);
        for n in 1..=5 {
            r.push(n);
        }
        assert_eq!(r.len(), 3);
        assert_eq!(r.capacity(), 3);
        assert_eq!(r.last(10).copied().collect::<Vec<_>>(), vec![3, 4, 5]);
        assert_eq!(r.last(2).copied().collect::<Vec<_>>(), vec![4, 5]);
        assert_eq!(r.latest(), Some(&5));
        assert_eq!(Ring::<u8>::new(0).capacity(), 1);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<u32> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), Some(50));
        assert_eq!(percentile(&v, 90.0), Some(90));
        assert_eq!(percentile(&v, 99.0), Some(99));
        assert_eq!(percentile(&v, 100.0), Some(100));
        assert_eq!(percentile(&[7], 50.0), Some(7));
        assert_eq!(percentile(&[7], 99.0), Some(7));
        // Four values: p50 is the 2nd, p75 the 3rd, p76 the 4th.
        let four = [10, 20, 30, 40];
        assert_eq!(percentile(&four, 50.0), Some(20));
        assert_eq!(percentile(&four, 75.0), Some(30));
        assert_eq!(percentile(&four, 76.0), Some(40));
        assert_eq!(percentile(&[], 50.0), None);
    }
}
