//! Unit tests of the exact search: answers checked against an exhaustive oracle, planted
//! optima found, proofs of infeasibility, determinism, fixed offsets and alignment.

use super::*;
use crate::planner::random::SplitMix;
use crate::planner::{planted_tiling, random_branchy_dag, BestPlanner};

/// The optimum by brute force: the smallest arena over every order of first-fit placement
/// (placing the buffers of an optimal plan by offset, each at its lowest feasible offset,
/// never raises one, so some order reaches the optimum). Alignment and fixed offsets honoured.
fn brute_force_optimum(buffers: &[BufferRequirement]) -> usize {
    let n = buffers.len();
    let mut order: Vec<usize> = (0..n).collect();
    let mut best = usize::MAX;
    permute(&mut order, 0, &mut |ord| {
        let mut offs = vec![usize::MAX; n];
        for (i, b) in buffers.iter().enumerate() {
            if let Some(f) = b.offline_offset {
                offs[i] = f;
            }
        }
        for &i in ord {
            if buffers[i].offline_offset.is_some() {
                continue;
            }
            let b = &buffers[i];
            let size = b.padded_size().unwrap();
            let mut busy: Vec<(usize, usize)> = (0..n)
                .filter(|&j| offs[j] != usize::MAX && b.overlaps_in_time(&buffers[j]))
                .map(|j| (offs[j], offs[j] + buffers[j].padded_size().unwrap()))
                .collect();
            busy.sort_unstable();
            let mut at = 0usize;
            for &(s, e) in &busy {
                let a = at.div_ceil(b.alignment) * b.alignment;
                if s >= a + size {
                    break;
                }
                at = at.max(e);
            }
            offs[i] = at.div_ceil(b.alignment) * b.alignment;
        }
        let arena = (0..n)
            .map(|i| offs[i] + buffers[i].padded_size().unwrap())
            .max()
            .unwrap_or(0);
        best = best.min(arena);
    });
    best
}

fn permute(v: &mut Vec<usize>, k: usize, f: &mut impl FnMut(&[usize])) {
    if k == v.len() {
        f(v);
        return;
    }
    for i in k..v.len() {
        v.swap(k, i);
        permute(v, k + 1, f);
        v.swap(k, i);
    }
}

fn random_small(rng: &mut SplitMix, n: usize, steps: usize) -> Vec<BufferRequirement> {
    (0..n)
        .map(|_| {
            let a = rng.below(steps);
            let b = a + rng.below(steps - a);
            let size = 1 + rng.below(12);
            let align = [1, 1, 1, 2, 4][rng.below(5)];
            BufferRequirement::new(size, a, b).with_alignment(align)
        })
        .collect()
}

const BIG: SearchBudget = SearchBudget::work(10_000_000);

/// Minimising from a deliberately bad plan (linear) proves the brute-force optimum; returns it.
fn minimises_to_brute_force_optimum(bufs: &[BufferRequirement], case: usize) -> usize {
    let opt = brute_force_optimum(bufs);
    let start = crate::planner::LinearPlanner.plan(bufs).unwrap();
    let m = minimise(bufs, &start, BIG).unwrap();
    m.plan.validate(bufs).unwrap();
    assert!(m.proven_optimal, "case {case}: {bufs:?} {m:?}");
    assert_eq!(m.plan.arena_size, opt, "case {case}: {bufs:?}");
    assert_eq!(m.proven_lower_bound, opt, "case {case}");
    opt
}

/// On small random instances, minimising from a deliberately bad plan (linear) proves the
/// brute-force optimum, and `decide` answers yes at the optimum and a proven no just below.
#[test]
fn small_instances_match_exhaustive_search() {
    let mut rng = SplitMix(29);
    for case in 0..60 {
        let n = 2 + rng.below(5);
        let bufs = random_small(&mut rng, n, 6);
        let opt = minimises_to_brute_force_optimum(&bufs, case);
        match decide(&bufs, opt, BIG).unwrap() {
            Decision::Fits(plan) => {
                plan.validate(&bufs).unwrap();
                assert!(plan.arena_size <= opt);
            }
            other => panic!("case {case}: {other:?} at the optimum {opt}"),
        }
        assert_eq!(
            decide(&bufs, opt - 1, BIG).unwrap(),
            Decision::DoesNotFit,
            "case {case}: {bufs:?} below the optimum {opt}"
        );
    }
}

/// A lower bound that cannot be reached: three buffers pairwise overlapping in a cycle of
/// lifetimes where the bound counts at most two at a time.
#[test]
fn proves_the_lower_bound_unreachable() {
    // a: 0..=1, b: 1..=2, c: 2..=3, d: 0..=3 — with sizes making the sweep bound too low.
    let bufs = vec![
        BufferRequirement::new(4, 0, 1),
        BufferRequirement::new(4, 1, 2),
        BufferRequirement::new(4, 2, 3),
        BufferRequirement::new(2, 3, 4),
        BufferRequirement::new(4, 4, 5),
        BufferRequirement::new(2, 0, 5),
    ];
    let lb = crate::planner::lower_bound(&bufs).unwrap();
    let opt = brute_force_optimum(&bufs);
    let start = crate::planner::LinearPlanner.plan(&bufs).unwrap();
    let m = minimise(&bufs, &start, BIG).unwrap();
    assert!(m.proven_optimal);
    assert_eq!(m.plan.arena_size, opt);
    assert!(opt >= lb);
}

/// Tilings of a rectangle (optimum = its height, every step full): the search finds it.
#[test]
fn planted_tilings_reach_their_height() {
    for seed in 0..6 {
        let height = 1000 + 37 * seed as usize;
        let bufs = planted_tiling(seed, 40, 30, height);
        let best = BestPlanner::default()
            .with_exact_budget(SearchBudget::work(0))
            .plan(&bufs)
            .unwrap();
        assert_eq!(best.lower_bound, height);
        let m = minimise(&bufs, &best, BIG).unwrap();
        m.plan.validate(&bufs).unwrap();
        assert_eq!(m.plan.arena_size, height, "seed {seed}");
        assert!(m.proven_optimal);
    }
}

/// Same input and work budget → same plan, same proof, same work.
#[test]
fn deterministic_under_a_node_budget() {
    let bufs = random_branchy_dag(3, 6, 6);
    let start = crate::planner::LinearPlanner.plan(&bufs).unwrap();
    let budget = SearchBudget::work(20_000);
    let a = minimise(&bufs, &start, budget).unwrap();
    let b = minimise(&bufs, &start, budget).unwrap();
    assert_eq!(a, b);
    a.plan.validate(&bufs).unwrap();
}

/// Offline offsets stay where they are; aligned buffers stay aligned.
#[test]
fn fixed_offsets_and_alignment_are_kept() {
    let bufs = vec![
        BufferRequirement::new(8, 0, 3).with_offline_offset(8),
        BufferRequirement::new(8, 0, 1),
        BufferRequirement::new(5, 2, 3).with_alignment(4),
        BufferRequirement::new(3, 1, 2),
        BufferRequirement::new(6, 3, 4).with_alignment(2),
    ];
    let opt = brute_force_optimum(&bufs);
    let start = crate::planner::LinearPlanner.plan(&bufs).unwrap();
    let m = minimise(&bufs, &start, BIG).unwrap();
    m.plan.validate(&bufs).unwrap();
    assert_eq!(m.plan.offsets[0], 8);
    assert_eq!(m.plan.arena_size, opt);
    assert!(m.proven_optimal);
}

/// A capacity below the lower bound is a proven no without search; a tiny budget on a hard
/// question is unknown, never a wrong answer.
#[test]
fn decide_answers_no_and_unknown() {
    let bufs = planted_tiling(11, 60, 40, 5000);
    assert_eq!(
        decide(&bufs, 4999, SearchBudget::work(1)).unwrap(),
        Decision::DoesNotFit
    );
    match decide(&bufs, 5000, SearchBudget::work(1)).unwrap() {
        Decision::Unknown(StopReason::Work) | Decision::Fits(_) => {}
        other => panic!("{other:?}"),
    }
}

/// Aliased buffers are planned as one block and share their offset.
#[test]
fn aliases_share_offsets() {
    let bufs = vec![
        BufferRequirement::new(4, 0, 1),
        BufferRequirement::new(4, 1, 2).with_alias_of(0),
        BufferRequirement::new(3, 2, 3),
        BufferRequirement::new(5, 0, 3),
    ];
    let start = crate::planner::LinearPlanner.plan(&bufs).unwrap();
    let m = minimise(&bufs, &start, BIG).unwrap();
    m.plan.validate(&bufs).unwrap();
    assert_eq!(m.plan.offsets[0], m.plan.offsets[1]);
    assert!(m.proven_optimal);
}

/// Sizes sharing a factor (12) with alignments that divide it or not: minimisation probes
/// over multiples of the granularity and still proves the brute-force optimum.
#[test]
fn coarse_sizes_match_exhaustive_search() {
    let mut rng = SplitMix(1229);
    for case in 0..40 {
        let n = 2 + rng.below(5);
        let bufs: Vec<BufferRequirement> = random_small(&mut rng, n, 6)
            .into_iter()
            .map(|b| {
                let align = [1, 4, 8, 16][case % 4];
                BufferRequirement::new(b.size * 12, b.first_use, b.last_use).with_alignment(align)
            })
            .collect();
        minimises_to_brute_force_optimum(&bufs, case);
    }
}

/// The granularity: gcd of sizes and fixed offsets, cut down by alignments that do not divide it.
#[test]
fn granularity_of_sizes_offsets_and_alignments() {
    let g = |bufs: &[BufferRequirement]| granularity(&Problem::new(bufs, 1).unwrap());
    let b = |size, align| BufferRequirement::new(size, 0, 1).with_alignment(align);
    assert_eq!(g(&[b(12, 1), b(18, 1)]), 6);
    assert_eq!(g(&[b(12, 4), b(24, 2)]), 12);
    assert_eq!(g(&[b(12, 1), b(24, 8)]), 4);
    assert_eq!(g(&[b(7, 1), b(1024, 1)]), 1);
    let fixed = BufferRequirement::new(64, 0, 1).with_offline_offset(96);
    assert_eq!(g(&[fixed, b(128, 1)]), 32);
}
