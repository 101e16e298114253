//! Reading a `.tflite` file (`std`: a `no_std` build gets its model as bytes, [`super::read_model`]).

use super::{oom, read_model, FILE_IDENTIFIER, MAX_MODEL_FILE_BYTES};
use crate::model::{Model, ModelBytes, ModelError};
use std::path::Path;

/// Reads and decodes a `.tflite` file of at most [`MAX_MODEL_FILE_BYTES`].
pub fn load(path: impl AsRef<Path>) -> Result<Model, ModelError> {
    load_with_limit(path, MAX_MODEL_FILE_BYTES)
}

/// Reads and decodes a `.tflite` file of at most `max_bytes` bytes. Only regular files are read;
/// the size and the file identifier are checked before the file is read (a device, a FIFO, a
/// huge or a foreign file costs nothing), and the bytes are read once, into the model's buffer.
pub fn load_with_limit(path: impl AsRef<Path>, max_bytes: u64) -> Result<Model, ModelError> {
    use std::io::Read;
    let path = path.as_ref();
    let (mut file, head, len) = open_checked(path, max_bytes)?;
    // Read straight into the model's shared buffer (one copy of the file in memory, not two),
    // allocated fallibly: a file too large for the memory left is an error, not an abort.
    let mut bytes = ModelBytes::try_zeroed(len).map_err(|_| oom("the model file", len))?;
    let Some(data) = bytes.get_mut() else {
        unreachable!("freshly allocated model bytes have one handle");
    };
    data[..8].copy_from_slice(&head);
    // Exactly the measured length: a file that shrank meanwhile is an I/O error, one that grew
    // is read up to the measured length only.
    file.read_exact(&mut data[8..]).map_err(io_error(path))?;
    read_model(bytes)
}

/// [`load`], with the file mapped instead of read ([`ModelBytes::map`]): the same checks first
/// (a regular file of at most [`MAX_MODEL_FILE_BYTES`] with TFLite's identifier), then the
/// model decoded over the mapping.
///
/// # Safety
/// As [`ModelBytes::map`]: the file is neither modified nor truncated while the model, its
/// bytes or anything built from them live.
#[cfg(unix)]
pub unsafe fn load_mapped(path: impl AsRef<Path>) -> Result<Model, ModelError> {
    let path = path.as_ref();
    let (file, _, len) = open_checked(path, MAX_MODEL_FILE_BYTES)?;
    // SAFETY: the caller's promise.
    let bytes = unsafe { ModelBytes::map(&file, len) }.map_err(io_error(path))?;
    read_model(bytes)
}

/// Opens `path` as a regular file of at least 8 and at most `max_bytes` bytes whose first 8
/// (returned) carry TFLite's file identifier, and returns it with its length.
fn open_checked(
    path: &Path,
    max_bytes: u64,
) -> Result<(std::fs::File, [u8; 8], usize), ModelError> {
    use std::io::Read;
    let io = io_error(path);
    if std::fs::metadata(path).map_err(&io)?.is_dir() {
        return Err(io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "is a directory, expected a .tflite file",
        )));
    }
    let (mut file, len) = crate::fileio::open_regular(path).map_err(&io)?;
    if len < 8 {
        return Err(ModelError::NotTflite(format!(
            "{len} bytes, a TFLite flatbuffer has at least 8 (root offset and file identifier)"
        )));
    }
    let mut head = [0u8; 8];
    file.read_exact(&mut head).map_err(&io)?;
    if &head[4..8] != FILE_IDENTIFIER {
        return Err(ModelError::NotTflite(format!(
            "file identifier {:?}, expected \"TFL3\"",
            String::from_utf8_lossy(&head[4..8])
        )));
    }
    if len > max_bytes {
        return Err(ModelError::NotTflite(format!(
            "the file is {len} bytes; at most {max_bytes} are read (a flatbuffer cannot exceed 2 GiB)"
        )));
    }
    let len = usize::try_from(len).map_err(|_| {
        ModelError::NotTflite(format!("{len} bytes do not fit in this address space"))
    })?;
    Ok((file, head, len))
}

/// The [`ModelError::Io`] of an I/O error on `path`.
fn io_error(path: &Path) -> impl Fn(std::io::Error) -> ModelError + '_ {
    move |source| ModelError::Io {
        path: path.display().to_string(),
        source,
    }
}
