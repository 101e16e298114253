//! Unit and property tests of the planners.

use super::greedy::{tflite_order, tflm_order, Placer};
use super::problem::Problem;
use super::*;
use proptest::prelude::*;

fn b(size: usize, first: usize, last: usize) -> BufferRequirement {
    BufferRequirement::new(size, first, last)
}

#[test]
fn placement_rules_first_fit_vs_best_fit() {
    // Placed: b at [30,40), d at [60,70); gaps [0,30) and [40,60); e (20 bytes) to place.
    let bufs = vec![
        b(30, 0, 0),
        b(10, 0, 1),
        b(20, 0, 0),
        b(10, 0, 1),
        b(20, 1, 1),
    ];
    let p = Problem::new(&bufs, 1).unwrap();
    let mut placer = Placer::new(&p);
    placer.offsets[1] = 30;
    placer.offsets[3] = 60;
    assert_eq!(
        placer.first_fit(4),
        0,
        "TFLM takes the lowest gap that fits"
    );
    assert_eq!(
        placer.tflite_best_fit(4),
        40,
        "TFLite takes the tightest gap"
    );
    assert_eq!(placer.slack_best_fit(4), 40);
    // A 31-byte item fits no gap: on top.
    let bufs2 = vec![
        b(30, 0, 0),
        b(10, 0, 1),
        b(20, 0, 0),
        b(10, 0, 1),
        b(31, 1, 1),
    ];
    let p2 = Problem::new(&bufs2, 1).unwrap();
    let mut placer = Placer::new(&p2);
    placer.offsets[1] = 30;
    placer.offsets[3] = 60;
    assert_eq!(placer.first_fit(4), 70);
    assert_eq!(placer.tflite_best_fit(4), 70);
}

#[test]
fn orders_follow_tflm_and_tflite() {
    // Sizes 10, 30, 30, 20; buffer 3 lives the whole run [0, 4].
    let bufs = vec![b(10, 0, 1), b(30, 2, 3), b(30, 1, 2), b(20, 0, 4)];
    let p = Problem::new(&bufs, 1).unwrap();
    // TFLM: size descending, ties highest index first (its online buffers enter the stable
    // sort in reverse order).
    assert_eq!(tflm_order(&p), vec![2, 1, 3, 0]);
    // TFLite: whole-run first, then size desc, then earlier first use (2 before 1).
    assert_eq!(tflite_order(&p), vec![3, 2, 1, 0]);
}

#[test]
fn tflm_end_to_end() {
    let bufs = vec![b(10, 0, 1), b(20, 1, 2), b(30, 2, 3)];
    let plan = TflmPlanner.plan(&bufs).unwrap();
    assert_eq!(plan.offsets, vec![0, 30, 0]);
    assert_eq!(plan.arena_size, 50);
    assert_eq!(plan.lower_bound, 50);
    plan.validate(&bufs).unwrap();
    let lin = LinearPlanner.plan(&bufs).unwrap();
    assert_eq!(lin.offsets, vec![0, 10, 30]);
    assert_eq!(lin.arena_size, 60);
}

/// The expectations of TFLM's own greedy planner tests (TestGreedyBasics, TestGreedyMedium,
/// TestOverlapCase), reproduced exactly.
#[test]
fn tflm_matches_tflm_test_expectations() {
    let basics = vec![b(10, 0, 1), b(20, 2, 3)];
    let plan = TflmPlanner.plan(&basics).unwrap();
    assert_eq!((plan.offsets, plan.arena_size), (vec![0, 0], 20));
    let medium = vec![
        b(10, 0, 1),
        b(20, 1, 2),
        b(30, 2, 3),
        b(40, 3, 4),
        b(50, 0, 1),
    ];
    let plan = TflmPlanner.plan(&medium).unwrap();
    assert_eq!(plan.offsets, vec![50, 70, 40, 0, 0]);
    assert_eq!(plan.arena_size, 90);
    let overlap = vec![b(100, 0, 1), b(50, 2, 3), b(20, 1, 2)];
    assert_eq!(TflmPlanner.plan(&overlap).unwrap().arena_size, 120);
}

/// The expectation of TFLite's SimpleMemoryArena test (BasicArenaOperations): six allocations in
/// call order, alignment 32, best-fit among time-overlapping allocations.
#[test]
fn tflite_arena_matches_tflite_test_expectation() {
    let a = |size, first, last| b(size, first, last).with_alignment(32);
    let bufs = vec![
        a(2047, 1, 3),
        a(2047, 2, 5),
        a(2047, 3, 6),
        a(2047, 5, 6),
        a(1023, 4, 6),
        a(1023, 6, 6),
    ];
    let p = Problem::new(&bufs, 1).unwrap();
    let mut placer = Placer::new(&p);
    for i in 0..bufs.len() {
        let o = placer.tflite_best_fit(i);
        placer.offsets[i] = o;
    }
    assert_eq!(placer.offsets, vec![0, 2048, 4096, 0, 6144, 2048]);
}

#[test]
fn tflite_default_alignment_is_64() {
    let bufs = vec![b(10, 0, 1), b(10, 0, 1)];
    let plan = TfLitePlanner::new().plan(&bufs).unwrap();
    assert!(plan.offsets.iter().all(|o| o % 64 == 0));
    assert_eq!(plan.arena_size, 128);
    assert_eq!(plan.lower_bound, 20);
    plan.validate(&bufs).unwrap();
    assert!(TfLitePlanner::with_tensor_alignment(3).plan(&bufs).is_err());
}

#[test]
fn lower_bound_sweep() {
    let bufs = vec![b(10, 0, 1), b(20, 1, 2), b(30, 2, 3), b(5, 3, 3)];
    assert_eq!(lower_bound(&bufs).unwrap(), 50);
    assert_eq!(lower_bound(&[]).unwrap(), 0);
    // Alignment pads sizes.
    let bufs = vec![
        b(10, 0, 0).with_alignment(16),
        b(1, 0, 0).with_alignment(16),
    ];
    assert_eq!(lower_bound(&bufs).unwrap(), 32);
}

#[test]
fn aliases_are_planned_as_one() {
    // In-place op at step 1: output 1 aliases input 0, which dies there.
    let bufs = vec![b(100, 0, 1), b(100, 1, 2).with_alias_of(0), b(40, 0, 2)];
    assert_eq!(lower_bound_without_aliasing(&bufs).unwrap(), 240);
    assert_eq!(lower_bound(&bufs).unwrap(), 140);
    for planner in [
        &LinearPlanner as &dyn Planner,
        &TflmPlanner,
        &TfLitePlanner::new(),
        &BestPlanner::default(),
    ] {
        let plan = planner.plan(&bufs).unwrap();
        assert_eq!(plan.offsets[0], plan.offsets[1], "{}", planner.name());
        plan.validate(&bufs).unwrap();
    }
    assert_eq!(BestPlanner::default().plan(&bufs).unwrap().arena_size, 140);
    // Moving an alias away is caught.
    let bad = Plan {
        planner: "x".into(),
        offsets: vec![0, 100, 200],
        arena_size: 300,
        lower_bound: 140,
        proven_lower_bound: 140,
    };
    assert!(matches!(
        bad.validate(&bufs),
        Err(PlanError::AliasMoved { index: 1, .. })
    ));
}

#[test]
fn invalid_inputs_are_errors() {
    type Check = fn(&PlanError) -> bool;
    let cases: Vec<(Vec<BufferRequirement>, Check)> = vec![
        (vec![b(0, 0, 0)], |e| {
            matches!(e, PlanError::ZeroSize { index: 0 })
        }),
        (vec![b(1, 3, 2)], |e| {
            matches!(
                e,
                PlanError::InvertedLifetime {
                    first_use: 3,
                    last_use: 2,
                    ..
                }
            )
        }),
        (vec![b(1, 0, 0).with_alignment(12)], |e| {
            matches!(e, PlanError::BadAlignment { alignment: 12, .. })
        }),
        (vec![b(1, 0, 0).with_alignment(0)], |e| {
            matches!(e, PlanError::BadAlignment { alignment: 0, .. })
        }),
        (vec![b(1, 0, 0).with_alias_of(5)], |e| {
            matches!(
                e,
                PlanError::AliasOutOfRange {
                    alias_of: 5,
                    count: 1,
                    ..
                }
            )
        }),
        (vec![b(1, 0, 0).with_alias_of(0)], |e| {
            matches!(e, PlanError::AliasSelf { index: 0 })
        }),
        (
            vec![
                b(1, 0, 0),
                b(1, 0, 0).with_alias_of(0),
                b(1, 0, 0).with_alias_of(1),
            ],
            |e| {
                matches!(
                    e,
                    PlanError::AliasChain {
                        index: 2,
                        alias_of: 1,
                        target: 0
                    }
                )
            },
        ),
        (
            vec![b(8, 0, 0).with_alignment(8).with_offline_offset(4)],
            |e| {
                matches!(
                    e,
                    PlanError::OfflineMisaligned {
                        offset: 4,
                        alignment: 8,
                        ..
                    }
                )
            },
        ),
        (
            vec![
                b(8, 0, 3).with_offline_offset(0),
                b(8, 2, 4).with_offline_offset(4),
            ],
            |e| matches!(e, PlanError::OfflineOverlap { a: 0, b: 1, .. }),
        ),
        (
            vec![
                b(8, 0, 1).with_offline_offset(0),
                b(8, 1, 2).with_alias_of(0).with_offline_offset(16),
            ],
            |e| matches!(e, PlanError::AliasOfflineConflict { .. }),
        ),
        (vec![b(usize::MAX, 0, 0).with_alignment(2)], |e| {
            matches!(e, PlanError::SizeOverflow { .. })
        }),
        (
            vec![
                b(usize::MAX / 2, 0, 0),
                b(usize::MAX / 2, 0, 0),
                b(usize::MAX / 2, 0, 0),
            ],
            |e| matches!(e, PlanError::SizeOverflow { .. }),
        ),
    ];
    for (bufs, check) in cases {
        for planner in [
            &LinearPlanner as &dyn Planner,
            &TflmPlanner,
            &TfLitePlanner::new(),
            &BestPlanner::default(),
        ] {
            let err = planner.plan(&bufs).unwrap_err();
            assert!(check(&err), "{}: unexpected error {err}", planner.name());
            assert!(!err.to_string().is_empty());
        }
    }
    // Non-overlapping offline offsets with disjoint lifetimes are fine.
    let ok = vec![
        b(8, 0, 1).with_offline_offset(0),
        b(8, 2, 3).with_offline_offset(0),
    ];
    BestPlanner::default()
        .plan(&ok)
        .unwrap()
        .validate(&ok)
        .unwrap();
}

#[test]
fn validate_catches_bad_plans() {
    let bufs = vec![b(10, 0, 1), b(10, 1, 2).with_alignment(4)];
    let plan = |offsets: Vec<usize>, arena_size| Plan {
        planner: "t".into(),
        offsets,
        arena_size,
        lower_bound: 20,
        proven_lower_bound: 20,
    };
    plan(vec![0, 12], 24).validate(&bufs).unwrap();
    assert!(matches!(
        plan(vec![0, 4], 16).validate(&bufs),
        Err(PlanError::Overlap { a: 0, b: 1, .. })
    ));
    assert!(matches!(
        plan(vec![0, 10], 20).validate(&bufs),
        Err(PlanError::Misaligned { index: 1, .. })
    ));
    assert!(matches!(
        plan(vec![0, 12], 23).validate(&bufs),
        Err(PlanError::BeyondArena { index: 1, .. })
    ));
    assert!(matches!(
        plan(vec![0], 10).validate(&bufs),
        Err(PlanError::LengthMismatch { .. })
    ));
    let off = vec![b(10, 0, 1).with_offline_offset(10)];
    assert!(matches!(
        plan(vec![0], 20).validate(&off),
        Err(PlanError::OfflineMoved {
            expected: 10,
            actual: 0,
            ..
        })
    ));
    // Disjoint lifetimes may share bytes.
    let disjoint = vec![b(10, 0, 1), b(10, 2, 3)];
    plan(vec![0, 0], 10).validate(&disjoint).unwrap();
}

#[test]
fn offline_metadata_round_trip_and_fixed_offsets() {
    let meta = OfflinePlan {
        version: 1,
        subgraph: 0,
        offsets: vec![Some(0), None, Some(64), None],
    };
    let bytes = meta.to_bytes().unwrap();
    assert_eq!(bytes.len(), 4 * (3 + 4));
    assert_eq!(&bytes[12..16], &0i32.to_le_bytes());
    assert_eq!(&bytes[16..20], &(-1i32).to_le_bytes());
    assert_eq!(OfflinePlan::from_bytes(&bytes).unwrap(), meta);
    // Trailing padding is ignored, truncation and bad values are errors.
    let mut padded = bytes.clone();
    padded.extend_from_slice(&[0; 8]);
    assert_eq!(OfflinePlan::from_bytes(&padded).unwrap(), meta);
    assert!(OfflinePlan::from_bytes(&bytes[..bytes.len() - 1]).is_err());
    assert!(OfflinePlan::from_bytes(&bytes[..8]).is_err());
    let mut neg = bytes.clone();
    neg[16..20].copy_from_slice(&(-2i32).to_le_bytes());
    assert!(matches!(
        OfflinePlan::from_bytes(&neg),
        Err(PlanError::Metadata(_))
    ));
    let mut huge = bytes.clone();
    huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(OfflinePlan::from_bytes(&huge).is_err());
    // Applied to buffers, every planner keeps the offsets.
    let mut bufs = vec![b(64, 0, 2), b(32, 1, 3), b(16, 2, 3), b(100, 0, 1)];
    meta.apply(&mut bufs, &[0, 1, 2, 3]).unwrap();
    assert_eq!(bufs[0].offline_offset, Some(0));
    assert_eq!(bufs[2].offline_offset, Some(64));
    for planner in [
        &LinearPlanner as &dyn Planner,
        &TflmPlanner,
        &TfLitePlanner::new(),
        &BestPlanner::default(),
    ] {
        let plan = planner.plan(&bufs).unwrap();
        assert_eq!(plan.offsets[0], 0, "{}", planner.name());
        assert_eq!(plan.offsets[2], 64, "{}", planner.name());
        plan.validate(&bufs).unwrap();
    }
    // From a plan back to metadata.
    let plan = BestPlanner::default().plan(&bufs).unwrap();
    let back = OfflinePlan::from_plan(&plan, &[3, 2, 1, 0], 5).unwrap();
    assert_eq!(back.offsets[4], None);
    assert_eq!(back.offsets[3], Some(plan.offsets[0]));
    assert!(OfflinePlan::from_plan(&plan, &[9, 2, 1, 0], 5).is_err());
    assert!(meta.apply(&mut bufs, &[0, 1]).is_err());
}

#[test]
fn svg_has_rectangles_titles_and_bound() {
    let bufs = vec![b(10, 0, 1).with_name("a<b"), b(20, 1, 2), b(30, 2, 3)];
    let plan = BestPlanner::default().plan(&bufs).unwrap();
    let svg = plan.to_svg(&bufs);
    assert!(svg.starts_with("<svg"));
    assert!(svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("<title>").count(), 3);
    assert!(svg.contains("a&lt;b"));
    assert!(svg.contains("lower bound 50"));
}

#[test]
fn best_is_deterministic_and_report_is_consistent() {
    let bufs = random_layered_dag(7, 60);
    let a = BestPlanner::default().plan(&bufs).unwrap();
    let b2 = BestPlanner::default().plan(&bufs).unwrap();
    assert_eq!(a, b2);
    let report = plan_all(&bufs).unwrap();
    assert_eq!(report.get("best").unwrap().offsets, a.offsets);
    let json = report.to_json();
    assert_eq!(
        json["planners"]["tflm"]["offsets"]
            .as_array()
            .unwrap()
            .len(),
        bufs.len()
    );
    assert_eq!(json["lower_bound_bytes"], report.lower_bound_bytes);
    assert!(report.to_table().contains("best"));
}

/// Random requirement sets: sizes, alignments, lifetimes, aliases to roots, and offline offsets
/// taken from a valid linear plan (so they never conflict).
fn requirements() -> impl Strategy<Value = Vec<BufferRequirement>> {
    prop::collection::vec(
        (
            1usize..2000,
            0usize..6,
            0usize..20,
            0usize..6,
            0u8..10,
            any::<prop::sample::Index>(),
        ),
        1..40,
    )
    .prop_map(|raw| {
        let mut bufs: Vec<BufferRequirement> = raw
            .iter()
            .map(|&(size, a, first, len, _, _)| {
                b(size, first, first + len).with_alignment([1, 2, 4, 8, 16, 64][a])
            })
            .collect();
        for (i, &(_, _, _, _, kind, ref idx)) in raw.iter().enumerate() {
            if kind == 0 && i > 0 {
                let j = idx.index(i);
                if bufs[j].alias_of.is_none() && !bufs.iter().any(|x| x.alias_of == Some(i)) {
                    bufs[i].alias_of = Some(j);
                }
            }
        }
        if let Ok(lin) = LinearPlanner.plan(&bufs) {
            for (i, &(_, _, _, _, kind, _)) in raw.iter().enumerate() {
                if kind == 1 && bufs[i].alias_of.is_none() {
                    bufs[i].offline_offset = Some(lin.offsets[i]);
                }
            }
        }
        bufs
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_planner_produces_valid_plans(bufs in requirements()) {
        let lb = lower_bound(&bufs).unwrap();
        let mut sizes = Vec::new();
        for planner in [&LinearPlanner as &dyn Planner, &TflmPlanner, &TfLitePlanner::new(), &TfLitePlanner::with_tensor_alignment(1), &BestPlanner::default().with_budget(20_000).with_exact_budget(super::exact::SearchBudget::work(20_000))] {
            let plan = planner.plan(&bufs).unwrap();
            prop_assert!(plan.validate(&bufs).is_ok(), "{}: {:?}", planner.name(), plan.validate(&bufs));
            prop_assert!(plan.arena_size >= lb);
            prop_assert_eq!(plan.lower_bound, lb);
            sizes.push(plan.arena_size);
        }
        prop_assert!(sizes[4] <= sizes[1] && sizes[4] <= sizes[3], "best {:?}", sizes);
    }
}

#[test]
fn too_many_overlaps_is_an_error_not_an_abort() {
    // 11,600 buffers all live at once: 67 million pairs, beyond MAX_OVERLAP_PAIRS.
    let bufs: Vec<BufferRequirement> = (0..11_600).map(|i| b(16 + i % 7, 0, 3)).collect();
    let err = TflmPlanner.plan(&bufs).unwrap_err();
    assert!(
        matches!(
            err,
            PlanError::TooManyOverlaps {
                limit: MAX_OVERLAP_PAIRS,
                ..
            }
        ),
        "{err}"
    );
    // The linear planner needs no overlap graph.
    let plan = LinearPlanner.plan(&bufs).unwrap();
    assert_eq!(plan.arena_size, plan.lower_bound);
    // The report still answers, with the planners that could plan the input.
    let report = plan_all(&bufs).unwrap();
    assert_eq!(report.planners.len(), 1);
    assert_eq!(report.planners[0].name, "linear");
    let names: Vec<&str> = report.skipped.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["tflm", "tflite", "best"]);
    assert_eq!(report.chosen_plan().unwrap().planner, "linear");
    assert!(
        report.to_table().contains("best     skipped: "),
        "{}",
        report.to_table()
    );
    assert!(report.to_json()["skipped"]["tflm"].is_string());
    // Only planners that need the graph: an error when none can plan.
    let err = plan_all_with(&bufs, &[&TflmPlanner, &BestPlanner::default()]).unwrap_err();
    assert!(matches!(err, PlanError::TooManyOverlaps { .. }), "{err}");
}

#[test]
fn lifetimes_reaching_usize_max_plan_and_draw_without_overflow() {
    // A record may say "live until the end" with the largest step; nothing may overflow on it.
    let bufs = vec![
        b(100, 0, usize::MAX),
        b(60, 3, 9),
        b(60, 5, usize::MAX),
        b(40, usize::MAX, usize::MAX),
        b(80, 0, 4),
    ];
    for planner in [
        &LinearPlanner as &dyn Planner,
        &TflmPlanner,
        &TfLitePlanner::default(),
        &BestPlanner::default(),
    ] {
        let plan = planner.plan(&bufs).unwrap();
        plan.validate(&bufs).unwrap();
        let svg = plan.to_svg(&bufs);
        assert!(
            svg.contains("</svg>") && !svg.contains("NaN"),
            "{}",
            planner.name()
        );
    }
    // Random instances where the baselines miss the bound, so the best planner searches
    // orderings keyed by lifetime length (which must not overflow either).
    let mut rng = crate::test_support::Rng::new(5);
    let mut searched = 0;
    for _ in 0..200 {
        let mut bufs = vec![b(1 + rng.below(100) as usize, 0, usize::MAX)];
        for _ in 0..10 {
            let first = rng.below(8) as usize;
            let last = first + rng.below(4) as usize;
            bufs.push(b(1 + rng.below(100) as usize, first, last));
        }
        let tflm = TflmPlanner.plan(&bufs).unwrap();
        let best = BestPlanner::default().plan(&bufs).unwrap();
        best.validate(&bufs).unwrap();
        assert!(best.arena_size <= tflm.arena_size);
        searched += usize::from(tflm.arena_size > tflm.lower_bound);
    }
    assert!(searched > 0, "no instance made the best planner search");
}

#[test]
fn drawing_unvalidated_buffers_does_not_panic() {
    // `to_svg` is public and takes any buffers: an inverted lifetime draws, it does not panic.
    let plan = LinearPlanner.plan(&[b(10, 0, 1)]).unwrap();
    let svg = plan.to_svg(&[b(10, 5, 2)]);
    assert!(svg.contains("</svg>"));
}

/// The O(n log n) validation finds exactly the overlaps the pairwise definition finds
/// (random offsets, lifetimes and alias groups), and handles 200,000 simultaneously live
/// buffers without visiting 2·10¹⁰ pairs.
#[test]
fn validate_matches_pairwise_definition() {
    let mut rng = super::random::SplitMix(18);
    for _ in 0..2000 {
        let n = 1 + rng.below(11);
        let mut bufs: Vec<BufferRequirement> = Vec::new();
        let mut offsets = Vec::new();
        for i in 0..n {
            let first = rng.below(6);
            let mut r = b(1 + rng.below(8), first, first + rng.below(4));
            if i > 0 && rng.below(5) == 0 {
                let t = rng.below(i);
                let t = bufs[t].alias_of.unwrap_or(t);
                r = r.with_alias_of(t);
                offsets.push(offsets[t]);
            } else {
                offsets.push(rng.below(24));
            }
            bufs.push(r);
        }
        let plan = Plan {
            planner: "t".into(),
            offsets: offsets.clone(),
            arena_size: 64,
            lower_bound: 0,
            proven_lower_bound: 0,
        };
        let group = |i: usize| bufs[i].alias_of.unwrap_or(i);
        let pairwise = (0..n).any(|i| {
            (0..i).any(|j| {
                group(i) != group(j)
                    && bufs[i].overlaps_in_time(&bufs[j])
                    && offsets[i] < offsets[j] + bufs[j].size
                    && offsets[j] < offsets[i] + bufs[i].size
            })
        });
        let got = plan.validate(&bufs);
        assert_eq!(
            matches!(got, Err(PlanError::Overlap { .. })),
            pairwise,
            "{bufs:?} {offsets:?} {got:?}"
        );
        if !pairwise {
            got.unwrap();
        }
    }
    let wide = vec![b(16, 0, 1); 200_000];
    let plan = LinearPlanner.plan(&wide).unwrap();
    plan.validate(&wide).unwrap();
    let mut bad = plan.clone();
    bad.offsets[150_000] = bad.offsets[7] + 8;
    assert!(matches!(
        bad.validate(&wide),
        Err(PlanError::Overlap { .. })
    ));
}
