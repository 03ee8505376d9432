//! The stdin pump: a thread that reads frames from fd 0 into the server's channel and
//! that can be stopped between two reads without losing a byte.
//!
//! A host self-reexec must hand the client's stream to the next process image intact:
//! bytes already read from the pipe but not yet framed (the buffer, a partial line, an
//! oversize line being skipped) travel in the snapshot as [`PumpState`], frames already
//! framed but not yet dispatched are drained from the channel by the server. The thread
//! waits in `poll(2)` on stdin and a private stop pipe, so a stop request never has to
//! interrupt a blocking `read`.

use std::io::{self, BufReader, Cursor, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::thread::JoinHandle;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use super::frame::{Frame, FrameReader, PartialLine};

/// Read buffer of the pump.
const READ_BUFFER: usize = 64 * 1024;

/// What a stopped pump had read but not yet turned into frames.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PumpState {
    /// Bytes read from stdin and not yet framed, oldest first.
    pub unread: Vec<u8>,
    /// The line the framer was in the middle of.
    pub partial: PartialLine,
}

/// How the pump ended.
#[derive(Debug)]
pub enum PumpEnd {
    /// stdin reached end of file (or failed): nothing more will come.
    Eof,
    /// Stopped on request; the state continues the stream.
    Stopped(PumpState),
}

/// stdin, readable until the stop pipe says otherwise.
struct StoppableStdin {
    stop: OwnedFd,
}

#[derive(Debug)]
struct StopRequested;

impl std::fmt::Display for StopRequested {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stdin pump stop requested")
    }
}

impl std::error::Error for StopRequested {}

impl Read for StoppableStdin {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let stdin = io::stdin();
        loop {
            let mut fds = [
                PollFd::new(stdin.as_fd(), PollFlags::POLLIN),
                PollFd::new(self.stop.as_fd(), PollFlags::POLLIN),
            ];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(io::Error::from(e)),
            }
            // The stop pipe wins: once asked to stop, read nothing more from stdin.
            if fds[1].any().unwrap_or(false) {
                return Err(io::Error::other(StopRequested));
            }
            if fds[0].any().unwrap_or(false) {
                // POLLIN or POLLHUP: read returns data or 0 (EOF).
                return nix::unistd::read(stdin.as_fd(), buf).map_err(io::Error::from);
            }
        }
    }
}

/// The running pump.
#[derive(Debug)]
pub struct StdinPump {
    stop: Option<OwnedFd>,
    thread: JoinHandle<PumpEnd>,
}

impl StdinPump {
    /// Starts the pump: first the `carried` frames (a previous image's undispatched
    /// frames), then frames read from `state.unread` followed by stdin.
    ///
    /// # Errors
    /// When the stop pipe or the thread cannot be created.
    pub fn spawn(
        frames: mpsc::Sender<Frame>,
        carried: Vec<Frame>,
        state: PumpState,
    ) -> io::Result<Self> {
        let (stop_read, stop_write) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io::Error::from)?;
        let thread = std::thread::Builder::new()
            .name("stdin-reader".into())
            .spawn(move || pump(&frames, carried, state, stop_read))?;
        Ok(Self {
            stop: Some(stop_write),
            thread,
        })
    }

    /// Asks the pump to stop at its next read and waits for it. Returns what it had
    /// read but not framed ([`PumpEnd::Eof`] when stdin had already ended).
    pub fn stop(mut self) -> PumpEnd {
        if let Some(stop) = self.stop.take() {
            let _ = nix::unistd::write(&stop, b"x");
        }
        self.thread.join().unwrap_or_else(|_| {
            tracing::error!("stdin reader panicked");
            PumpEnd::Eof
        })
    }
}

fn pump(
    frames: &mpsc::Sender<Frame>,
    carried: Vec<Frame>,
    state: PumpState,
    stop: OwnedFd,
) -> PumpEnd {
    for frame in carried {
        if frames.blocking_send(frame).is_err() {
            return PumpEnd::Eof;
        }
    }
    let source = Cursor::new(state.unread).chain(StoppableStdin { stop });
    let mut reader =
        FrameReader::resume(BufReader::with_capacity(READ_BUFFER, source), state.partial);
    loop {
        match reader.next_frame() {
            Ok(Some(frame)) => {
                if frames.blocking_send(frame).is_err() {
                    return PumpEnd::Eof;
                }
            }
            Ok(None) => return PumpEnd::Eof,
            Err(e) if e.get_ref().is_some_and(|inner| inner.is::<StopRequested>()) => {
                let (buffered, partial) = reader.into_parts();
                let mut unread = buffered.buffer().to_vec();
                let (cursor, _stdin) = buffered.into_inner().into_inner();
                let position = usize::try_from(cursor.position()).unwrap_or(usize::MAX);
                unread.extend_from_slice(cursor.get_ref().get(position..).unwrap_or_default());
                return PumpEnd::Stopped(PumpState { unread, partial });
            }
            Err(e) => {
                tracing::error!(error = %e, "stdin read failed; treating as end of input");
                return PumpEnd::Eof;
            }
        }
    }
}
