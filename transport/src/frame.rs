//! Bounded NDJSON frame reader.
//!
//! Reads one line at a time from a byte stream without ever holding more than
//! [`MAX_FRAME_BYTES`] of a line in memory: a longer line is skipped chunk by
//! chunk as it streams past and reported as [`Frame::TooLarge`], so a hostile
//! client cannot grow the host's memory by sending a line without a newline.

use std::io::{self, BufRead};

use serde::{Deserialize, Serialize};

/// The largest accepted line, in bytes, excluding the `\n` (seed 001 §3: 1 MiB).
pub const MAX_FRAME_BYTES: usize = 1024 * 1024;

/// One unit read from the stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Frame {
    /// A line of at most the limit (the `\n` and one trailing `\r` removed).
    Line(Vec<u8>),
    /// A line longer than the limit; its bytes were discarded unread.
    TooLarge {
        /// Length of the discarded line in bytes.
        bytes: u64,
    },
}

/// Where a reader was inside a line when it stopped (a host reexec carries it over, so
/// a line split across the handover is neither lost nor doubled).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartialLine {
    /// Bytes of the current line read so far (empty when skipping an oversize line).
    pub bytes: Vec<u8>,
    /// Length of the current line so far.
    pub total: u64,
    /// The current line is over the limit and is being skipped.
    pub oversize: bool,
}

/// Splits a byte stream into bounded lines.
///
/// The position inside the current line lives in the reader, not on the stack, so a
/// read error (e.g. a stop request from the stdin pump) loses nothing: reading again,
/// or [`FrameReader::into_parts`] + [`FrameReader::resume`], continues the same line.
#[derive(Debug)]
pub struct FrameReader<R> {
    inner: R,
    max_bytes: usize,
    line: Vec<u8>,
    total: u64,
    oversize: bool,
}

impl<R: BufRead> FrameReader<R> {
    /// A reader with the default 1 MiB limit.
    pub fn new(inner: R) -> Self {
        Self::with_limit(inner, MAX_FRAME_BYTES)
    }

    /// A reader that rejects lines longer than `max_bytes`.
    pub fn with_limit(inner: R, max_bytes: usize) -> Self {
        Self {
            max_bytes,
            ..Self::resume(inner, PartialLine::default())
        }
    }

    /// A reader (1 MiB limit) that continues a line begun by another reader.
    pub fn resume(inner: R, partial: PartialLine) -> Self {
        Self {
            inner,
            max_bytes: MAX_FRAME_BYTES,
            line: partial.bytes,
            total: partial.total,
            oversize: partial.oversize,
        }
    }

    /// The underlying reader and where the current line stands.
    pub fn into_parts(self) -> (R, PartialLine) {
        (
            self.inner,
            PartialLine {
                bytes: self.line,
                total: self.total,
                oversize: self.oversize,
            },
        )
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
        loop {
            let chunk = match self.inner.fill_buf() {
                Ok(chunk) => chunk,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if chunk.is_empty() {
                // End of stream: whatever was pending is the last line.
                if self.total == 0 && !self.oversize {
                    return Ok(None);
                }
                return Ok(Some(self.take_frame()));
            }
            let (part, consumed, complete) = match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => (&chunk[..i], i + 1, true),
                None => (chunk, chunk.len(), false),
            };
            self.total += part.len() as u64;
            if !self.oversize {
                if self.line.len() + part.len() > self.max_bytes {
                    self.oversize = true;
                    // Give the memory back: the rest of this line is discarded.
                    self.line = Vec::new();
                } else {
                    self.line.extend_from_slice(part);
                }
            }
            self.inner.consume(consumed);
            if complete {
                return Ok(Some(self.take_frame()));
            }
        }
    }

    /// The finished line (or its oversize report); resets the line state.
    fn take_frame(&mut self) -> Frame {
        let total = std::mem::take(&mut self.total);
        if std::mem::take(&mut self.oversize) {
            self.line = Vec::new();
            return Frame::TooLarge { bytes: total };
        }
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

    /// Fails every other read, as a stop request does.
    struct Interrupting<'a> {
        data: &'a [u8],
        fail_next: bool,
    }
    impl Read for Interrupting<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.fail_next = !self.fail_next;
            if !self.fail_next {
                return Err(io::Error::other("stop"));
            }
            let n = buf.len().min(self.data.len()).min(3);
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    #[test]
    fn errors_mid_line_lose_nothing_and_parts_resume_elsewhere() {
        let input = b"{\"a\":1}\nxxxxxxxxxxxxxxxx\n{\"b\":22}\n";
        let mut reader = FrameReader::with_limit(
            BufReader::with_capacity(
                4,
                Interrupting {
                    data: input,
                    fail_next: false,
                },
            ),
            10,
        );
        let mut got = Vec::new();
        let mut errors = 0;
        while got.len() < 2 {
            match reader.next_frame() {
                Ok(Some(frame)) => got.push(frame),
                Ok(None) => break,
                Err(_) => errors += 1,
            }
        }
        assert!(errors > 0);
        // Hand over mid-stream: the rest goes to a new reader through the parts.
        let (inner, partial) = reader.into_parts();
        let buffered = inner.buffer().to_vec();
        let rest = inner.into_inner().data.to_vec();
        let mut tail = buffered;
        tail.extend(rest);
        let mut second = FrameReader::resume(BufReader::new(&tail[..]), partial);
        while let Some(frame) = second.next_frame().unwrap() {
            got.push(frame);
        }
        assert_eq!(
            got,
            vec![
                Frame::Line(b"{\"a\":1}".to_vec()),
                Frame::TooLarge { bytes: 16 },
                Frame::Line(b"{\"b\":22}".to_vec()),
            ]
        );
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
