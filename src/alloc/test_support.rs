//! Helpers shared by the allocator unit tests.

use std::sync::{Arc, Mutex};

/// Runs `f` with a `tracing` subscriber of this thread that keeps every event at `WARN` level
/// and above, and returns them as text (one line per event).
pub(crate) fn capture_logs(f: impl FnOnce()) -> String {
    capture_logs_at(tracing::Level::WARN, f)
}

/// [`capture_logs`] for events at `level` and above.
pub(crate) fn capture_logs_at(level: tracing::Level, f: impl FnOnce()) -> String {
    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buf = Buf::default();
    let b2 = buf.clone();
    let sub = tracing_subscriber::fmt()
        .with_writer(move || b2.clone())
        .with_ansi(false)
        // No timestamps: no test reads them, and Miri's isolation has no wall clock.
        .without_time()
        .with_max_level(level)
        .finish();
    tracing::subscriber::with_default(sub, f);
    let v = buf.0.lock().unwrap().clone();
    String::from_utf8(v).unwrap()
}
