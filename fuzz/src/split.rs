//! Read splits chosen by the fuzzer, in the style of h2's `fuzz_e2e`: a short header
//! at the front of the input says how to cut the rest into reads, so one corpus entry
//! exercises one split of the stream and the fuzzer can search for a bad one.
//!
//! Header: one byte `n`, then `n % 8` size bytes used in turn, cyclically. A size of
//! 0 is an empty read (the next read then takes at least one byte), 255 takes all
//! that is left, any other value takes that many bytes. `n % 8 == 0` means one read of
//! everything, so a header of `[0]` in front of a frame replays it unsplit.

/// The read sizes taken from an input's header.
#[derive(Debug, Clone)]
pub struct Splits<'a> {
    sizes: &'a [u8],
}

impl<'a> Splits<'a> {
    /// Splits `data` into its header and the payload that follows it.
    pub fn parse(data: &'a [u8]) -> (Self, &'a [u8]) {
        let Some((&n, rest)) = data.split_first() else {
            return (Self { sizes: &[] }, data);
        };
        let (sizes, payload) = rest.split_at(usize::from(n % 8).min(rest.len()));
        (Self { sizes }, payload)
    }

    /// The reads `payload` is cut into, in order; their concatenation is `payload`.
    pub fn chunks<'b>(&self, payload: &'b [u8]) -> Chunks<'a, 'b> {
        Chunks {
            sizes: self.sizes,
            next: 0,
            rest: payload,
            last_empty: false,
        }
    }
}

/// Iterator over the reads of a payload; see [`Splits`].
#[derive(Debug)]
pub struct Chunks<'a, 'b> {
    sizes: &'a [u8],
    next: usize,
    rest: &'b [u8],
    last_empty: bool,
}

impl<'b> Iterator for Chunks<'_, 'b> {
    type Item = &'b [u8];

    fn next(&mut self) -> Option<&'b [u8]> {
        if self.rest.is_empty() {
            return None;
        }
        let size = self.sizes.get(self.next % self.sizes.len().max(1));
        self.next += 1;
        let mut len = match size {
            None | Some(255) => self.rest.len(),
            Some(&n) => usize::from(n),
        };
        if self.last_empty {
            len = len.max(1);
        }
        let (chunk, rest) = self.rest.split_at(len.min(self.rest.len()));
        self.rest = rest;
        self.last_empty = chunk.is_empty();
        Some(chunk)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut(data: &[u8]) -> Vec<Vec<u8>> {
        let (splits, payload) = Splits::parse(data);
        splits.chunks(payload).map(<[u8]>::to_vec).collect()
    }

    #[test]
    fn no_sizes_is_one_read() {
        assert_eq!(cut(&[0, 1, 2, 3]), vec![vec![1, 2, 3]]);
        assert_eq!(cut(&[8, 1, 2]), vec![vec![1, 2]]);
    }

    #[test]
    fn sizes_cycle_and_reassemble() {
        assert_eq!(
            cut(&[2, 1, 2, 10, 11, 12, 13, 14]),
            vec![vec![10], vec![11, 12], vec![13], vec![14]]
        );
    }

    #[test]
    fn empty_reads_always_make_progress() {
        let chunks = cut(&[1, 0, 7, 8, 9]);
        assert_eq!(
            chunks,
            vec![vec![], vec![7], vec![], vec![8], vec![], vec![9]]
        );
        assert_eq!(cut(&[1, 255, 7, 8]), vec![vec![7, 8]]);
    }
}
