//! Async framing over the worker socket, same frames as `reticle_protocol::wire`.

use std::time::Duration;

use reticle_protocol::wire::{
    HostMessage, WireError, WorkerMessage, decode_payload, encode_frame, frame_len,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// What the reader task saw.
#[derive(Debug)]
pub enum ConnEvent {
    /// One message.
    Message(WorkerMessage),
    /// Clean EOF at a frame boundary.
    Closed,
    /// A broken frame or an I/O error; the reader stopped.
    Broken(String),
}

/// Reads one frame; `Closed` on EOF at a frame boundary.
async fn read_frame(reader: &mut OwnedReadHalf) -> Result<WorkerMessage, WireError> {
    let mut header = [0u8; 4];
    match reader.read_exact(&mut header).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(WireError::Closed),
        Err(e) => return Err(e.into()),
    }
    let len = frame_len(header)?;
    let mut payload = vec![0u8; len];
    reader.read_exact(&mut payload).await?;
    decode_payload(&payload)
}

/// Spawns a task that turns the socket into a stream of events. A dedicated task
/// keeps reads cancel-safe: the slot's `select!` only ever waits on the channel.
pub fn spawn_reader(mut reader: OwnedReadHalf) -> (mpsc::Receiver<ConnEvent>, JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(64);
    let task = tokio::spawn(async move {
        loop {
            let event = match read_frame(&mut reader).await {
                Ok(message) => ConnEvent::Message(message),
                Err(WireError::Closed) => ConnEvent::Closed,
                Err(e) => ConnEvent::Broken(e.to_string()),
            };
            let last = !matches!(event, ConnEvent::Message(_));
            if tx.send(event).await.is_err() || last {
                return;
            }
        }
    });
    (rx, task)
}

/// Writes one message, giving up after `timeout` (a worker that stops reading is dead).
pub async fn write_message(
    writer: &mut OwnedWriteHalf,
    message: &HostMessage,
    timeout: Duration,
) -> Result<(), String> {
    let frame = encode_frame(message).map_err(|e| e.to_string())?;
    match tokio::time::timeout(timeout, writer.write_all(&frame)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("write blocked for {timeout:?}")),
    }
}
