//! The "pool" of a `no_std` build: the invoking thread alone. Asking for more threads is an
//! error (there is no way to start one without `std`).

/// The invoking thread, the only one a `no_std` build has.
#[derive(Debug)]
pub struct ThreadPool(());

impl ThreadPool {
    /// A pool of one thread; more than one is an error naming the missing feature.
    pub fn new(threads: usize) -> Result<Self, &'static str> {
        if threads > 1 {
            return Err("kernel threads need the `std` feature");
        }
        Ok(ThreadPool(()))
    }

    /// Threads that run a round's tasks: the caller.
    pub fn threads(&self) -> usize {
        1
    }

    /// Rounds split over several threads: none.
    pub fn counts(&self) -> super::RoundCounts {
        super::RoundCounts::default()
    }

    /// Runs `f(i)` for every `i` in `0..tasks`, in order, on the caller.
    pub fn run(&mut self, tasks: usize, f: &(dyn Fn(usize) + Sync)) {
        (0..tasks).for_each(f);
    }
}
