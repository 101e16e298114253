//! [`Biased`]: lets the one thread that has used an object so far update it with plain loads and
//! stores where other threads would need a read-modify-write (a locked instruction on x86-64,
//! which waits for every earlier store and load of the thread to complete).
//!
//! # Protocol (an asymmetric Dekker handshake)
//! The first thread to ask becomes the object's *owner*. While no other thread has asked, the
//! owner marks itself *busy* (a plain store), orders that store before its next load only
//! against the compiler, reads the owner word, and if it still names itself runs the plain
//! update and clears *busy* (release). Any other thread first *revokes* the bias: it sets the
//! owner word to "shared", then makes every running thread of the process execute a full memory
//! barrier (`membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`), then waits until *busy* is clear.
//! After the barrier, either the owner's *busy* store is visible to the revoker (which waits for
//! the plain update to finish: its effects are then visible, through the release/acquire pair),
//! or the owner's later read of the owner word sees "shared" (it takes the atomic update). So a
//! plain update never overlaps another thread's update, and from the revocation on every thread
//! uses the atomic one. The expensive side (a system call and an inter-processor interrupt per
//! running CPU) is paid once per object, by the second thread that uses it.
//!
//! Only on Linux, where the barrier exists; the process registers for it once, when the first
//! object is adopted, and without it (an old kernel, a seccomp filter) nothing is ever adopted.
//! Under Miri, which cannot run the barrier, and on other systems, every update is the atomic
//! one. Under loom both halves of the barrier are `SeqCst` fences, so the loom models explore
//! the handshake.
//!
//! Owner identity is the address of a thread-local: unique among running threads. A thread
//! that starts after the owner exited may get the same address and act as the owner; that is
//! harmless (the old owner runs no more updates).

/// The two halves of the asymmetric barrier, the waiting loop's pause and the thread identity
/// on Linux: `membarrier` and a thread-local's address.
#[cfg(all(target_os = "linux", not(loom), not(miri)))]
mod barrier {
    use core::sync::atomic::{compiler_fence, AtomicU8, Ordering};

    /// `membarrier` commands (`linux/membarrier.h`).
    const CMD_GLOBAL: libc::c_int = 1;
    const CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
    const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

    /// 0: not asked yet, 1: registered, 2: unavailable.
    static REGISTERED: AtomicU8 = AtomicU8::new(0);

    fn membarrier(cmd: libc::c_int) -> bool {
        // SAFETY: `membarrier` reads no memory of the caller; the arguments are a command and
        // two zero flags.
        unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                cmd,
                0 as libc::c_uint,
                0 as libc::c_int,
            ) == 0
        }
    }

    /// Whether the process can run the heavy barrier (registers for it on the first call).
    pub(super) fn available() -> bool {
        match REGISTERED.load(Ordering::Acquire) {
            1 => true,
            2 => false,
            _ => {
                let ok = membarrier(CMD_REGISTER_PRIVATE_EXPEDITED);
                REGISTERED.store(if ok { 1 } else { 2 }, Ordering::Release);
                ok
            }
        }
    }

    /// The owner's side: orders its earlier stores before its later loads only against the
    /// compiler; the revoker's [`heavy`] does the rest.
    #[inline(always)]
    pub(super) fn light() {
        compiler_fence(Ordering::SeqCst);
    }

    /// A full memory barrier on every running thread of the process before it returns.
    pub(super) fn heavy() {
        // Registered before any object was adopted (`adopt`), so the expedited command is
        // accepted; the global one (no registration, slower) is the kernel's fallback.
        if !membarrier(CMD_PRIVATE_EXPEDITED) && !membarrier(CMD_GLOBAL) {
            // Without the barrier an owner could be mid-update unseen: nothing safe is left.
            crate::sync::abort();
        }
    }

    /// One turn of the revoker's wait for the owner's update to end.
    pub(super) fn pause(spins: u32) {
        if spins < 64 {
            core::hint::spin_loop();
        } else {
            // The owner may be descheduled mid-update (`sched_yield`: no allocation).
            std::thread::yield_now();
        }
    }

    std::thread_local! {
        static TOKEN: u8 = const { 0 };
    }

    /// This thread's identity: the address of its thread-local (never `UNOWNED` or `SHARED`).
    #[inline(always)]
    pub(super) fn token() -> usize {
        TOKEN.with(|t| t as *const u8 as usize)
    }
}

/// The same under loom: both halves of the barrier are `SeqCst` fences (the usual model of an
/// asymmetric fence: `membarrier` puts a full barrier into the owner between any two of its
/// instructions, which is what a fence at the light side's place gives), so the models in
/// `tests/loom_tracking.rs` explore the handshake itself; the identity is a loom thread-local's
/// address (`std` thread-locals are not per loom thread).
#[cfg(loom)]
mod barrier {
    use loom::sync::atomic::{fence, Ordering};

    pub(super) fn available() -> bool {
        true
    }

    pub(super) fn light() {
        fence(Ordering::SeqCst);
    }

    pub(super) fn heavy() {
        fence(Ordering::SeqCst);
    }

    pub(super) fn pause(_spins: u32) {
        loom::thread::yield_now();
    }

    loom::thread_local! {
        static TOKEN: u8 = 0;
    }

    pub(super) fn token() -> usize {
        TOKEN.with(|t| t as *const u8 as usize)
    }
}

#[cfg(any(loom, all(target_os = "linux", not(miri))))]
mod imp {
    use super::barrier;
    use crate::sync::{AtomicBool, AtomicUsize, Ordering};

    /// The owner word before any thread asked.
    const UNOWNED: usize = 0;
    /// The owner word once a second thread asked (or the barrier is unavailable).
    const SHARED: usize = usize::MAX;

    /// See the module documentation.
    pub(crate) struct Biased {
        owner: AtomicUsize,
        busy: AtomicBool,
    }

    impl Biased {
        /// An object no thread has used yet.
        #[cfg(not(loom))]
        pub(crate) const fn new() -> Self {
            Self {
                owner: AtomicUsize::new(UNOWNED),
                busy: AtomicBool::new(false),
            }
        }

        /// An object no thread has used yet (loom's atomics have no `const` constructor).
        #[cfg(loom)]
        pub(crate) fn new() -> Self {
            Self {
                owner: AtomicUsize::new(UNOWNED),
                busy: AtomicBool::new(false),
            }
        }

        /// Runs `plain` when the calling thread is the owner and no other thread has asked,
        /// else `atomic`. `plain` must make no call that could reach `run` on the same object
        /// (the revoking thread waits for it to return).
        #[inline(always)]
        pub(crate) fn run<R>(&self, plain: impl FnOnce() -> R, atomic: impl FnOnce() -> R) -> R {
            let me = barrier::token();
            if self.owner.load(Ordering::Relaxed) != me && !self.adopt(me) {
                return atomic();
            }
            self.busy.store(true, Ordering::Relaxed);
            // The light side: the store above is ordered before the load below by the revoker's
            // barrier, not by a fence of ours.
            barrier::light();
            let still = self.owner.load(Ordering::Relaxed) == me;
            let r = if still { Some(plain()) } else { None };
            self.busy.store(false, Ordering::Release);
            match r {
                Some(r) => r,
                None => atomic(),
            }
        }

        /// The caller is not the owner: becomes it when nobody is, else revokes the bias;
        /// whether the caller is now the owner.
        #[cold]
        #[inline(never)]
        fn adopt(&self, me: usize) -> bool {
            let owner = self.owner.load(Ordering::Relaxed);
            if owner == SHARED {
                return false;
            }
            if owner == UNOWNED
                && barrier::available()
                && self
                    .owner
                    .compare_exchange(UNOWNED, me, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                return true;
            }
            self.revoke();
            false
        }

        /// Ends the bias for good: after it returns no plain update is running or will run.
        #[cold]
        #[inline(never)]
        fn revoke(&self) {
            let prev = self.owner.swap(SHARED, Ordering::SeqCst);
            if prev == UNOWNED || prev == SHARED {
                // Nobody was adopted (an adoption after the swap fails its compare-and-swap).
                return;
            }
            barrier::heavy();
            let mut spins = 0u32;
            while self.busy.load(Ordering::Acquire) {
                spins += 1;
                barrier::pause(spins);
            }
        }

        /// Whether the calling thread would take the plain update now (for tests).
        #[cfg(test)]
        pub(crate) fn is_owned_by_caller(&self) -> bool {
            self.owner.load(Ordering::Relaxed) == barrier::token()
        }
    }
}

#[cfg(not(any(loom, all(target_os = "linux", not(miri)))))]
mod imp {
    /// See the module documentation: without the barrier every update is the atomic one.
    pub(crate) struct Biased;

    impl Biased {
        /// An object no thread has used yet.
        pub(crate) const fn new() -> Self {
            Self
        }

        /// Runs `atomic` (no thread is ever the owner here).
        #[inline(always)]
        pub(crate) fn run<R>(&self, _plain: impl FnOnce() -> R, atomic: impl FnOnce() -> R) -> R {
            atomic()
        }

        /// Never (for tests).
        #[cfg(test)]
        pub(crate) fn is_owned_by_caller(&self) -> bool {
            false
        }
    }
}

pub(crate) use imp::Biased;

#[cfg(all(test, not(loom)))]
mod tests {
    use super::Biased;
    use core::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    /// A counter incremented by `run`: plainly (load, a pause, store) by the owner, by
    /// `fetch_add` otherwise. Lost increments would show a plain update overlapping another
    /// thread's; the pause widens the window a revocation must wait out.
    fn bump(b: &Biased, n: &AtomicUsize) -> bool {
        b.run(
            || {
                let v = n.load(SeqCst);
                for _ in 0..50 {
                    core::hint::spin_loop();
                }
                n.store(v + 1, SeqCst);
                true
            },
            || {
                n.fetch_add(1, SeqCst);
                false
            },
        )
    }

    #[test]
    fn the_first_thread_updates_plainly_until_a_second_one_asks() {
        let b = Biased::new();
        let n = AtomicUsize::new(0);
        let plain_first = bump(&b, &n);
        // On Linux (with the barrier) the first thread becomes the owner; elsewhere nobody does.
        assert_eq!(plain_first, b.is_owned_by_caller());
        std::thread::scope(|s| {
            s.spawn(|| assert!(!bump(&b, &n), "a second thread updated plainly"));
        });
        assert!(
            !bump(&b, &n),
            "the owner updated plainly after a second thread asked"
        );
        assert!(!b.is_owned_by_caller());
        assert_eq!(n.load(SeqCst), 3);
    }

    #[test]
    fn no_update_is_lost_while_the_bias_is_revoked() {
        // Round after round a fresh object: the owner updates in a loop while a second thread
        // revokes the bias and updates too; every increment must arrive.
        let rounds = if cfg!(miri) { 4 } else { 300 };
        for _ in 0..rounds {
            let b = Biased::new();
            let n = AtomicUsize::new(0);
            let per_thread = 200;
            bump(&b, &n);
            std::thread::scope(|s| {
                s.spawn(|| {
                    for _ in 0..per_thread {
                        bump(&b, &n);
                    }
                });
                for _ in 0..per_thread {
                    bump(&b, &n);
                }
            });
            assert_eq!(n.load(SeqCst), 2 * per_thread + 1);
        }
    }
}
