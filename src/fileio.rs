//! Opening input files safely: regular files only (a FIFO, `/dev/zero` or a terminal is refused
//! before anything is read, and opening does not block on a FIFO), with the length taken from
//! the opened file so callers can refuse a file that is too large before allocating for it.

use std::fs::File;
use std::io;
use std::path::Path;

/// Opens `path` for reading and returns it with its length, or an error when it is not a
/// regular file (after following symbolic links).
pub(crate) fn open_regular(path: &Path) -> io::Result<(File, u64)> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    // Not under Miri, whose `open` does not model O_NONBLOCK (its tests open no FIFOs).
    #[cfg(all(unix, not(miri)))]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // A FIFO opened for reading would block until a writer appears; O_NONBLOCK makes the
        // open return at once (and has no effect on reads from regular files).
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        let kind = if meta.is_dir() {
            "a directory"
        } else {
            "not a regular file (a device, FIFO or socket)"
        };
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is {kind}", path.display()),
        ));
    }
    Ok((file, meta.len()))
}

/// Reads a whole regular file of at most `max_bytes` bytes; `what` names the file kind in the
/// error ("records file").
pub fn read_regular_file(path: &Path, max_bytes: u64, what: &str) -> io::Result<Vec<u8>> {
    use io::Read;
    let (file, len) = open_regular(path)?;
    if len > max_bytes {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is {len} bytes; a {what} may have at most {max_bytes} bytes",
                path.display()
            ),
        ));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    // `take` bounds the read even if the file grows after it was measured.
    file.take(max_bytes).read_to_end(&mut bytes)?;
    Ok(bytes)
}
