//! The content blocks a result gets for the files it made (issue 30, D201): one
//! mechanism in the call pipeline, for every tool.
//!
//! The payload is searched for artifact descriptors (an object whose `path` is a file
//! in one of the client's artifact directories: `{path, sha256, bytes}` of a job,
//! `render_view`'s PNG, a DRC run's files). Each becomes a `resource_link` block (the
//! payload keeps its `path` for local users), and PNGs become `image` blocks sized for a
//! chat: `detail=concise` the first PNG at most [`CONCISE_SIDE`] pixels on its longer
//! side, `detail=full` up to [`FULL_IMAGES`] of them at most [`FULL_SIDE`]. The full
//! resolution file is the linked resource. A PNG that cannot be decoded within
//! [`DECODE_MAX_BYTES`], or whose thumbnail is over [`IMAGE_MAX_BYTES`], gets its link
//! only. The host decodes only PNGs its own workers wrote, never layout bytes.

use std::path::Path;

use serde_json::{Value, json};

use crate::render::Detail;
use crate::resources::{Artifact, Owned, base64};
use crate::scope::ClientScope;

/// Longest side of the one image of `detail=concise`, in pixels.
pub const CONCISE_SIDE: u32 = 384;
/// Longest side of each image of `detail=full`, in pixels.
pub const FULL_SIDE: u32 = 1024;
/// Most images of `detail=full`.
pub const FULL_IMAGES: usize = 4;
/// Most `resource_link` blocks of one result.
pub const MAX_LINKS: usize = 32;
/// Most bytes of one image block's PNG (before base64).
pub const IMAGE_MAX_BYTES: usize = 512 * 1024;
/// Most bytes a PNG may decode to (RGBA), and most bytes of the file read to decode it.
pub const DECODE_MAX_BYTES: usize = 128 << 20;

/// The `image` and `resource_link` blocks of `payload` (images first), for the client
/// of `scope`; nothing when the payload names no artifact of its.
#[must_use]
pub fn blocks(payload: &Value, scope: &ClientScope, detail: Detail) -> Vec<Value> {
    let Some(owned) = Owned::of(scope) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    collect(payload, &owned, &mut found);
    let (images, side) = match detail {
        Detail::Concise => (1, CONCISE_SIDE),
        Detail::Full => (FULL_IMAGES, FULL_SIDE),
    };
    let mut blocks: Vec<Value> = found
        .iter()
        .filter(|a| a.mime == "image/png")
        .filter_map(|a| image_block(a, side))
        .take(images)
        .collect();
    blocks.extend(found.iter().take(MAX_LINKS).map(|a| {
        let mut link = a.resource();
        link["type"] = json!("resource_link");
        link
    }));
    blocks
}

/// The artifacts a payload names, in payload order, each once.
fn collect(value: &Value, owned: &Owned<'_>, found: &mut Vec<Artifact>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(path)) = map.get("path")
                && Path::new(path).is_absolute()
                && !found.iter().any(|f| f.path.as_os_str() == path.as_str())
                && let Some(artifact) = owned.artifact(Path::new(path))
            {
                found.push(artifact);
            }
            for child in map.values() {
                collect(child, owned, found);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect(v, owned, found)),
        _ => {}
    }
}

/// An `image` block of `artifact` (a PNG) at most `side` pixels on its longer side.
fn image_block(artifact: &Artifact, side: u32) -> Option<Value> {
    if artifact.bytes > DECODE_MAX_BYTES as u64 {
        return None;
    }
    let bytes = std::fs::read(&artifact.path).ok()?;
    let png = match thumbnail(&bytes, side) {
        Ok(png) => png,
        Err(reason) => {
            tracing::warn!(file = %artifact.path.display(), reason, "no image block");
            return None;
        }
    };
    (png.len() <= IMAGE_MAX_BYTES).then(|| {
        json!({
            "type": "image",
            "data": base64(&png),
            "mimeType": "image/png",
            "annotations": {"audience": ["user", "assistant"]},
            "_meta": {"reticle/image": {"uri": artifact.uri, "max_side_px": side}},
        })
    })
}

/// `png` as a PNG at most `side` pixels on its longer side: the file itself when it
/// fits, else an RGBA8 box-filtered reduction.
///
/// # Errors
/// Why it cannot be decoded (within [`DECODE_MAX_BYTES`]) or encoded.
pub fn thumbnail(png: &[u8], side: u32) -> Result<Vec<u8>, String> {
    let mut decoder = png::Decoder::new_with_limits(
        std::io::Cursor::new(png),
        png::Limits {
            bytes: DECODE_MAX_BYTES,
        },
    );
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder.read_info().map_err(|e| e.to_string())?;
    let (width, height) = reader.info().size();
    if width.max(height) <= side && png.len() <= IMAGE_MAX_BYTES {
        return Ok(png.to_vec());
    }
    let size = reader
        .output_buffer_size()
        .ok_or("image too large to decode")?;
    let mut buf = vec![0; size];
    let frame = reader.next_frame(&mut buf).map_err(|e| e.to_string())?;
    let channels = frame.color_type.samples();
    let pixels = &buf[..frame.buffer_size()];
    // One source pixel as RGBA, read in place (no copy of the decoded image).
    let pixel = |x: u32, y: u32| -> [u8; 4] {
        let at = y as usize * frame.line_size + x as usize * channels;
        match &pixels[at..at + channels] {
            [g] => [*g, *g, *g, 255],
            [g, a] => [*g, *g, *g, *a],
            [r, g, b] => [*r, *g, *b, 255],
            [r, g, b, a] => [*r, *g, *b, *a],
            _ => [0, 0, 0, 255],
        }
    };
    let scale = f64::from(width.max(height)) / f64::from(side);
    let (w, h) = if scale > 1.0 {
        (
            ((f64::from(width) / scale).round() as u32).max(1),
            ((f64::from(height) / scale).round() as u32).max(1),
        )
    } else {
        (width, height)
    };
    let mut out = Vec::with_capacity(w as usize * h as usize * 4);
    for y in 0..h {
        let (y0, y1) = span(y, h, height);
        for x in 0..w {
            let (x0, x1) = span(x, w, width);
            let mut sum = [0u64; 4];
            for row in y0..y1 {
                for col in x0..x1 {
                    for (s, c) in sum.iter_mut().zip(pixel(col, row)) {
                        *s += u64::from(c);
                    }
                }
            }
            let n = u64::from((y1 - y0) * (x1 - x0));
            out.extend(sum.iter().map(|s| ((s + n / 2) / n) as u8));
        }
    }
    encode(w, h, &out)
}

/// The source pixels `[a, b)` output pixel `i` of `n` covers on an axis of `len`.
fn span(i: u32, n: u32, len: u32) -> (u32, u32) {
    let a = (u64::from(i) * u64::from(len) / u64::from(n)) as u32;
    let b = (u64::from(i + 1) * u64::from(len) / u64::from(n)) as u32;
    (a, b.max(a + 1).min(len))
}

fn encode(width: u32, height: u32, rgba: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, width, height);
    encoder.set_color(png::ColorType::Rgba);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(|e| e.to_string())?;
    writer.write_image_data(rgba).map_err(|e| e.to_string())?;
    writer.finish().map_err(|e| e.to_string())?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(png: &[u8]) -> (u32, u32) {
        let reader = png::Decoder::new(std::io::Cursor::new(png))
            .read_info()
            .unwrap();
        reader.info().size()
    }

    #[test]
    fn a_large_png_is_reduced_to_the_side_and_a_small_one_kept_as_is() {
        let (w, h) = (1000u32, 500u32);
        let rgba: Vec<u8> = (0..w * h)
            .flat_map(|i| [(i % w) as u8, (i / w) as u8, 7, 255])
            .collect();
        let big = encode(w, h, &rgba).unwrap();
        let small = thumbnail(&big, 100).unwrap();
        assert_eq!(decode(&small), (100, 50));
        let kept = thumbnail(&small, 384).unwrap();
        assert_eq!(kept, small, "a PNG within the side is its own thumbnail");
        // A uniform image stays uniform (the box filter averages, it does not shift).
        let grey = encode(64, 64, &[90u8; 64 * 64 * 4]).unwrap();
        let reduced = thumbnail(&grey, 10).unwrap();
        let mut reader = png::Decoder::new(std::io::Cursor::new(&reduced))
            .read_info()
            .unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        reader.next_frame(&mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 90), "{:?}", &buf[..8]);
        assert!(thumbnail(b"not a png", 10).is_err());
        // A grey (one-channel) PNG, as simulate writes, comes out RGBA with its grey level.
        let mut grey_png = Vec::new();
        {
            let mut encoder = png::Encoder::new(&mut grey_png, 600, 300);
            encoder.set_color(png::ColorType::Grayscale);
            encoder.set_depth(png::BitDepth::Eight);
            let mut writer = encoder.write_header().unwrap();
            writer.write_image_data(&[200u8; 600 * 300]).unwrap();
        }
        let small = thumbnail(&grey_png, 60).unwrap();
        let mut reader = png::Decoder::new(std::io::Cursor::new(&small))
            .read_info()
            .unwrap();
        assert_eq!(reader.info().size(), (60, 30));
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        reader.next_frame(&mut buf).unwrap();
        assert!(buf.chunks(4).all(|px| px == [200, 200, 200, 255]));
    }
}
