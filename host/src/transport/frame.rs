//! Bounded NDJSON frame reader.
//!
//! Reads one line at a time from a byte stream without ever holding more than
//! [`MAX_FRAME_BYTES`] of a line in memory: a longer line is skipped chunk by
//! chunk as it streams past and reported as [`Frame::TooLarge`], so a hostile
//! client cannot grow the host's memory by sending a line without a newline.

use std::io::{self, BufRead};

/// The largest accepted line, in bytes, excluding the `\n` (seed 001 §3: 1 MiB).
pub const MAX_FRAME_BYTES: usize = 1024 * 1024;

/// One unit read from the stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A line of at most the limit (the `\n` and one trailing `\r` removed).
    Line(Vec<u8>),
    /// A line longer than the limit; its bytes were discarded unread.
    TooLarge {
        /// Length of the discarded line in bytes.
        bytes: u64,
    },
}

/// Splits a byte stream into bounded lines.
#[derive(Debug)]
pub struct FrameReader<R> {
    inner: R,
    max_bytes: usize,
    line: Vec<u8>,
}

impl<R: BufRead> FrameReader<R> {
    /// A reader with the default 1 MiB limit.
    pub fn new(inner: R) -> Self {
        Self::with_limit(inner, MAX_FRAME_BYTES)
    }

    /// A reader that rejects lines longer than `max_bytes`.
    pub fn with_limit(inner: R, max_bytes: usize) -> Self {
        Self {
            inner,
            max_bytes,
            line: Vec::new(),
        }
    }

    /// Bytes currently buffered for a partial line (never more than the limit).
    pub fn buffered_bytes(&self) -> usize {
        self.line.len()
    }

    /// The next frame, or `None` at end of stream. Empty lines are skipped.
    ///
    /// A final line without a trailing newline is still returned.
    pub fn next_frame(&mut self) -> io::Result<Option<Frame>> {
        loop {
            match self.read_one()? {
                Some(Frame::Line(line)) if line.iter().all(u8::is_ascii_whitespace) => continue,
                other => return Ok(other),
            }
        }
    }

    fn read_one(&mut self) -> io::Result<Option<Frame>> {
        self.line.clear();
        let mut total: u64 = 0;
        let mut oversize = false;
        loop {
            let chunk = match self.inner.fill_buf() {
                Ok(chunk) => chunk,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if chunk.is_empty() {
                // End of stream: whatever was pending is the last line.
                if oversize {
                    return Ok(Some(Frame::TooLarge { bytes: total }));
                }
                if total == 0 {
                    return Ok(None);
                }
                return Ok(Some(self.take_line()));
            }
            let (part, consumed, complete) = match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => (&chunk[..i], i + 1, true),
                None => (chunk, chunk.len(), false),
            };
            total += part.len() as u64;
            if !oversize {
                if self.line.len() + part.len() > self.max_bytes {
                    oversize = true;
                    // Give the memory back: the rest of this line is discarded.
                    self.line = Vec::new();
                } else {
                    self.line.extend_from_slice(part);
                }
            }
            self.inner.consume(consumed);
            if complete {
                if oversize {
                    return Ok(Some(Frame::TooLarge { bytes: total }));
                }
                return Ok(Some(self.take_line()));
            }
        }
    }

    fn take_line(&mut self) -> Frame {
        let mut line = std::mem::take(&mut self.line);
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        Frame::Line(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::io::{BufReader, Read};

    fn frames(input: &[u8], limit: usize, chunk: usize) -> Vec<Frame> {
        let reader = BufReader::with_capacity(chunk.max(1), input);
        let mut frames = FrameReader::with_limit(reader, limit);
        let mut out = Vec::new();
        while let Some(frame) = frames.next_frame().unwrap() {
            assert!(frames.buffered_bytes() <= limit);
            out.push(frame);
        }
        out
    }

    #[test]
    fn splits_lines_and_strips_cr() {
        let got = frames(b"{\"a\":1}\r\n\n  \n{\"b\":2}", 64, 3);
        assert_eq!(
            got,
            vec![
                Frame::Line(b"{\"a\":1}".to_vec()),
                Frame::Line(b"{\"b\":2}".to_vec())
            ]
        );
    }

    #[test]
    fn rejects_long_line_and_recovers() {
        let mut input = vec![b'x'; 100];
        input.extend_from_slice(b"\nok\n");
        let got = frames(&input, 10, 7);
        assert_eq!(
            got,
            vec![Frame::TooLarge { bytes: 100 }, Frame::Line(b"ok".to_vec())]
        );
    }

    #[test]
    fn line_of_exactly_the_limit_is_accepted() {
        let mut input = vec![b'y'; 10];
        input.push(b'\n');
        input.extend(vec![b'z'; 11]);
        let got = frames(&input, 10, 4);
        assert_eq!(
            got,
            vec![Frame::Line(vec![b'y'; 10]), Frame::TooLarge { bytes: 11 }]
        );
    }

    /// A reader that yields an endless line without a newline, counting bytes.
    struct Endless {
        remaining: u64,
    }
    impl Read for Endless {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = (buf.len() as u64).min(self.remaining) as usize;
            buf[..n].fill(b'a');
            self.remaining -= n as u64;
            Ok(n)
        }
    }

    #[test]
    fn huge_line_is_skipped_with_bounded_memory() {
        // 64 MiB without a newline; the buffer never exceeds the 1 MiB limit.
        let reader = BufReader::with_capacity(
            64 * 1024,
            Endless {
                remaining: 64 << 20,
            },
        );
        let mut frames = FrameReader::new(reader);
        let frame = frames.next_frame().unwrap();
        assert_eq!(frame, Some(Frame::TooLarge { bytes: 64 << 20 }));
        assert_eq!(frames.buffered_bytes(), 0);
        assert!(frames.line.capacity() <= MAX_FRAME_BYTES + 64 * 1024);
        assert_eq!(frames.next_frame().unwrap(), None);
    }

    proptest! {
        /// Random bytes, random chunk sizes: never panics, never buffers past the
        /// limit, and the frames equal a straightforward split of the input.
        #[test]
        fn matches_naive_split(input in proptest::collection::vec(
            prop_oneof![Just(b'\n'), Just(b'\r'), Just(b' '), any::<u8>()], 0..600),
            limit in 1usize..40, chunk in 1usize..50)
        {
            let got = frames(&input, limit, chunk);
            let mut expected = Vec::new();
            let mut pieces: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
            if input.last() == Some(&b'\n') || input.is_empty() {
                pieces.pop();
            }
            for piece in pieces {
                if piece.len() > limit {
                    expected.push(Frame::TooLarge { bytes: piece.len() as u64 });
                    continue;
                }
                let mut line = piece.to_vec();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                expected.push(Frame::Line(line));
            }
            prop_assert_eq!(got, expected);
        }
    }
}
