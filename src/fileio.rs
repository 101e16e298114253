//! Opening input files safely: regular files only (a FIFO, `/dev/zero` or a terminal is refused
//! before anything is read, and opening does not block on a FIFO), with the length taken from
//! the opened file so callers can refuse a file that is too large before allocating for it.
//! Writing output files: [`write_file_atomic`] (a temporary file renamed into place; no link is
//! followed, no half-written file is ever visible).

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
        // The caller names the path; the message says what is wrong with it.
        let kind = if meta.is_dir() {
            "is a directory, expected a regular file"
        } else {
            "is not a regular file (a device, FIFO or socket)"
        };
        return Err(io::Error::new(io::ErrorKind::InvalidInput, kind));
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
            format!("is {len} bytes; a {what} may have at most {max_bytes} bytes"),
        ));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    // `take` bounds the read even if the file grows after it was measured.
    file.take(max_bytes).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Writes a file so that no reader ever sees it half-written and no symbolic link is followed:
/// `write` fills a new temporary file in `path`'s directory (created exclusively, so a planted
/// file or link of that name is never opened), which is then renamed onto `path`. A rename
/// replaces whatever `path` was (a link is replaced, its target untouched) in one step. On any
/// error the temporary file is removed and `path` is left as it was; a process killed while
/// writing leaves at most a hidden `.NAME.PID.N.tmp` beside it, never a partial `path`.
pub fn write_file_atomic(
    path: &Path,
    write: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} does not name a file", path.display()),
        )
    })?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    static COUNTER: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);
    let mut attempt = 0;
    let (tmp, mut file) = loop {
        let n = COUNTER.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".{}.{n}.tmp", std::process::id()));
        let tmp = dir.join(tmp_name);
        let mut options = std::fs::OpenOptions::new();
        // `create_new` is O_CREAT | O_EXCL: it fails on any existing name, a link included.
        options.write(true).create_new(true);
        match options.open(&tmp) {
            Ok(f) => break (tmp, f),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => attempt += 1,
            Err(e) => return Err(e),
        }
    };
    let result = write(&mut file).and_then(|()| std::fs::rename(&tmp, path));
    drop(file);
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(all(test, unix, not(miri), not(loom)))]
mod tests {
    use super::*;

    /// Issue 32: `run --output-dir D` overwrote the target of a symlink planted at
    /// `D/output_0.npy`. The link itself is replaced; its target keeps its bytes.
    #[test]
    fn atomic_write_replaces_a_symlink_without_following_it() {
        let dir = std::env::temp_dir().join(format!("ta-fileio-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let victim = dir.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let out = dir.join("out.bin");
        std::os::unix::fs::symlink(&victim, &out).unwrap();
        write_file_atomic(&out, |f| io::Write::write_all(f, b"new")).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert!(!std::fs::symlink_metadata(&out).unwrap().is_symlink());
        assert_eq!(std::fs::read(&out).unwrap(), b"new");
        // A failed write leaves the old file and no temporary file.
        let r = write_file_atomic(&out, |_| Err(io::Error::other("disk full")));
        assert!(r.is_err());
        assert_eq!(std::fs::read(&out).unwrap(), b"new");
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
