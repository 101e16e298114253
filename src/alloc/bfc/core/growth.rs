//! Growth (TF's `Extend`): new regions from the sub-allocator within the limit, and giving
//! fully free regions back (TF's `DeallocateFreeRegions`). Parameters: [`Growth`](super::Growth).

use super::*;

impl Core {
    pub(super) fn extend(
        &mut self,
        sub: &dyn SubAllocator,
        rounded: usize,
        align: usize,
    ) -> Result<(), Failure> {
        let available = self.growth.limit.saturating_sub(self.st.reserved);
        if rounded as u64 > available {
            return Err(Failure::Limit { rounded });
        }
        let g = self.fit.granule;
        let mut bytes = match self.growth.policy {
            BfcGrowth::Double => {
                let mut b = self.growth.curr_region;
                while b < rounded {
                    b = b.checked_mul(2).unwrap_or(rounded);
                }
                b
            }
            BfcGrowth::Exact => {
                if self.growth.regions_created == 0 {
                    self.growth.initial_region.max(rounded)
                } else {
                    rounded
                }
            }
        };
        if bytes as u64 > available {
            // `available ≥ rounded`, and `rounded` is a granule multiple, so this stays ≥ rounded.
            bytes = round_down(available.min(usize::MAX as u64) as usize, g);
        }
        let mut cause = None;
        for _ in 0..MAX_GROWTH_TRIES {
            // Regions that will be advised to use huge pages start on a huge-page boundary so
            // every whole 2 MiB of them can be mapped as one.
            let region_align = if bytes >= self.growth.huge_min {
                align.max(g).max(HUGE_PAGE)
            } else {
                align.max(g)
            };
            match sub.alloc(region_align, bytes) {
                Ok((p, got)) => match self.add_region(sub, p, got, bytes) {
                    Ok(()) => {
                        if self.growth.policy == BfcGrowth::Double
                            && bytes >= self.growth.curr_region
                        {
                            self.growth.curr_region = bytes.saturating_mul(2);
                        }
                        return Ok(());
                    }
                    Err(e) => {
                        if matches!(e, Failure::Limit { .. }) {
                            return Err(Failure::Limit { rounded });
                        }
                        cause = Some("region bookkeeping could not be allocated".to_string());
                    }
                },
                Err(e) => cause = Some(e.to_string()),
            }
            if bytes <= rounded {
                break;
            }
            // Back off ×0.9, by at least one granule (TF could loop forever below 2,560 bytes
            // because rounding undid the 10 %), never below the request itself.
            let mut next = round_down(bytes - bytes / 10, g);
            if next >= bytes {
                next = bytes - g;
            }
            bytes = next.max(rounded);
        }
        Err(Failure::Oom { rounded, cause })
    }

    pub(super) fn add_region(
        &mut self,
        sub: &dyn SubAllocator,
        p: NonNull<u8>,
        got: usize,
        asked: usize,
    ) -> Result<(), Failure> {
        let give_back = |sub: &dyn SubAllocator| {
            // SAFETY: `p`/`got` are exactly what `sub.alloc` just returned and nothing uses them.
            unsafe { sub.free(p, got) }
        };
        if got < asked || got as u64 > self.growth.limit.saturating_sub(self.st.reserved) {
            give_back(sub);
            return Err(if got < asked {
                Failure::Oom {
                    rounded: asked,
                    cause: Some("sub-allocator returned fewer bytes than asked".into()),
                }
            } else {
                Failure::Limit { rounded: asked }
            });
        }
        let base = p.as_ptr().expose_provenance();
        if got >= self.growth.huge_min {
            advise_huge_pages(p, got);
        }
        let usable = round_down(got, self.fit.granule);
        let room = self.regions.try_reserve_one();
        let Some(mut region) = Region::new(base, usable, got, self.fit.shift).filter(|_| room)
        else {
            give_back(sub);
            return Err(Failure::Oom {
                rounded: asked,
                cause: None,
            });
        };
        let Some(h) = self.slab.create() else {
            give_back(sub);
            return Err(Failure::Oom {
                rounded: asked,
                cause: None,
            });
        };
        {
            let c = &mut self.slab[h];
            c.addr = base;
            c.size = usable;
        }
        region.set_handle(base, self.fit.shift, h);
        self.regions.insert(region);
        let b = self.bin_for(usable);
        self.bin_insert(b, h);
        self.st.reserved += got as u64;
        self.st.peak_reserved = self.st.peak_reserved.max(self.st.reserved);
        self.growth.regions_created += 1;
        tracing::debug!(
            allocator = "bfc",
            base,
            bytes = got,
            regions = self.regions.list.len(),
            reserved = self.st.reserved,
            "new region"
        );
        Ok(())
    }

    /// Returns every region that is one free chunk to the sub-allocator. Returns the bytes freed.
    pub fn deallocate_free_regions(&mut self, sub: &dyn SubAllocator) -> usize {
        self.flush_recent();
        let mut freed = 0;
        let mut i = self.regions.list.len();
        while i > 0 {
            i -= 1;
            let r = &self.regions.list[i];
            let Some(h) = r.handle_at(r.base, self.fit.shift) else {
                continue;
            };
            let c = &self.slab[h];
            if !c.is_free() || c.size != r.size {
                continue;
            }
            self.bin_remove(h);
            self.slab.retire(h);
            let r = self.regions.list.remove(i);
            self.st.reserved -= r.received as u64;
            freed += r.received;
            match NonNull::new(core::ptr::with_exposed_provenance_mut::<u8>(r.base)) {
                // SAFETY: `r.base`/`r.received` are what the sub-allocator returned for this region
                // (the address was exposed when it was received); no chunk of it is in use.
                Some(p) => unsafe { sub.free(p, r.received) },
                None => tracing::error!(allocator = "bfc", "internal error: null region base"),
            }
        }
        freed
    }
}

/// Asks the kernel to back the whole 2 MiB pieces of `[p, p+len)` with transparent huge pages
/// (`MADV_HUGEPAGE`). First touch then faults 2 MiB at once instead of 512 × 4 KiB, which is most of
/// the cost of filling fresh memory. Only advice: failure (e.g. THP disabled) changes nothing.
fn advise_huge_pages(p: NonNull<u8>, len: usize) {
    let start = p.as_ptr().addr();
    let Some(end) = start.checked_add(len) else {
        return;
    };
    let a = start.next_multiple_of(HUGE_PAGE);
    let b = round_down(end, HUGE_PAGE);
    if b <= a {
        return;
    }
    // SAFETY: [a, b) lies inside the region the sub-allocator just handed over; madvise with
    // MADV_HUGEPAGE does not change the contents or validity of the memory, only how it is backed.
    let rc = unsafe { libc::madvise(p.as_ptr().add(a - start).cast(), b - a, libc::MADV_HUGEPAGE) };
    if rc != 0 {
        tracing::debug!(
            allocator = "bfc",
            len = b - a,
            "MADV_HUGEPAGE refused; using small pages"
        );
    }
}
