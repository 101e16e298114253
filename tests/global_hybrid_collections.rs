//! `GlobalAllocator` in its default hybrid mode under std collections: large buffers come from the
//! large-buffer heap, small ones from the system heap, contents survive growth across the
//! threshold, and the statistics return to their baseline once everything is freed.

use std::collections::{BTreeMap, HashMap, VecDeque};
use tensor_alloc::global::{GlobalMode, GlobalStats};
use tensor_alloc::GlobalAllocator;

#[global_allocator]
static GLOBAL: GlobalAllocator = GlobalAllocator::new();

fn large_live(s: &GlobalStats) -> (u64, u64) {
    (s.large.bytes_in_use, s.large_heap.chunk_bytes_in_use)
}

// One test function: the statistics are process-wide, so nothing else may run meanwhile.
#[test]
fn collections_use_both_heaps_and_stats_return_to_baseline() {
    assert_eq!(GlobalAllocator::mode(), GlobalMode::Hybrid);
    assert!(GlobalAllocator::config_errors().is_empty());
    let base = GLOBAL.stats();
    assert_eq!(base.threshold, 256 << 10);
    {
        // A Vec growing from small to large through realloc: every element survives each move
        // (system → large heap → in place or moved within the large heap).
        let mut v: Vec<u64> = Vec::new();
        for i in 0..2_000_000u64 {
            v.push(i * 3);
        }
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64 * 3));
        let s = GLOBAL.stats();
        assert!(s.large.bytes_in_use >= 16_000_000, "{s:?}");
        assert!(s.large_heap.allocs > base.large_heap.allocs);
        // Shrinking back below the threshold moves it to the system heap.
        v.truncate(100);
        v.shrink_to_fit();
        assert_eq!(v[99], 297);

        let mut maps: HashMap<u32, Vec<u8>> = HashMap::new();
        let mut tree: BTreeMap<String, Box<[u8]>> = BTreeMap::new();
        let mut q: VecDeque<Vec<f32>> = VecDeque::new();
        for i in 0..200u32 {
            let big = (i as usize % 7 + 1) * (300 << 10);
            maps.insert(i, vec![i as u8; big]);
            tree.insert(
                format!("key-{i}"),
                vec![1u8; 64 + i as usize].into_boxed_slice(),
            );
            q.push_back(vec![i as f32; 1000 + (i as usize) * 1000]);
            if q.len() > 20 {
                q.pop_front();
            }
            if i % 3 == 0 {
                maps.remove(&(i / 2));
            }
        }
        for (k, v) in &maps {
            assert!(v.iter().all(|&b| b == *k as u8));
        }
        assert_eq!(tree["key-7"].len(), 71);
        let zeroed = vec![0u8; 8 << 20];
        assert!(zeroed.iter().all(|&b| b == 0));
        let s = GLOBAL.stats();
        assert!(
            s.large.bytes_in_use > 0 && s.system.bytes_in_use > 0,
            "{s:?}"
        );
        assert!(s.large.peak_bytes_in_use >= s.large.bytes_in_use);
        assert!(s.peak_bytes_in_use >= s.bytes_in_use);
    }
    let end = GLOBAL.stats();
    assert_eq!(large_live(&end), large_live(&base), "{base:?}\n{end:?}");
    assert_eq!(
        end.large_heap.allocs - base.large_heap.allocs,
        end.large_heap.frees - base.large_heap.frees
    );
    // Small blocks of the test harness may come and go meanwhile; the large heap is exact.
    assert!(
        end.bytes_in_use <= base.bytes_in_use + (64 << 10),
        "{base:?}\n{end:?}"
    );
}
