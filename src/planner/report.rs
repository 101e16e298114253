//! Run every planner on one input and report sizes, ratios and times (`tensor-alloc plan`).

use super::{
    lower_bound_without_aliasing, BestPlanner, BufferRequirement, LinearPlanner, Plan, PlanError,
    Planner, TfLitePlanner, TflmPlanner,
};
use crate::time::Instant;
use core::fmt::Write;
use rust_alloc::{borrow::Cow, string::String, string::ToString, vec::Vec};
use serde::{Deserialize, Serialize};

/// One planner's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct PlannerResult {
    /// Planner name.
    #[serde(skip)]
    pub name: String,
    /// Arena bytes the plan needs.
    pub arena_bytes: usize,
    /// Wall time of the planning call in milliseconds.
    pub millis: f64,
    /// One offset per buffer, in input order.
    pub offsets: Vec<usize>,
    /// The largest arena size the planner proved necessary ([`Plan::proven_lower_bound`]).
    pub proven_lower_bound: usize,
}

impl PlannerResult {
    /// Whether the planner proved that no smaller arena exists.
    pub fn proven_optimal(&self) -> bool {
        self.arena_bytes <= self.proven_lower_bound
    }
}

/// Every planner on one input (see [`plan_all`]).
#[derive(Debug, Clone)]
pub struct PlanReport {
    /// Number of buffers.
    pub buffers: usize,
    /// Lower bound with aliasing (what the planners aim at).
    pub lower_bound_bytes: usize,
    /// Lower bound counting every buffer on its own.
    pub lower_bound_without_aliasing_bytes: usize,
    /// Results in the order linear, tflm, tflite, best.
    pub planners: Vec<PlannerResult>,
    /// The plans themselves, same order (for drawing).
    pub plans: Vec<Plan>,
    /// Planners that could not plan this input, with the reason (today only
    /// [`PlanError::TooManyOverlaps`]: the overlap graph would be too large, which the linear
    /// planner does not need).
    pub skipped: Vec<(String, String)>,
}

/// Runs linear, tflm, tflite (with tensor alignment 1, so every planner sees the same alignment
/// constraints: the buffers' own) and best on `buffers`; every plan is validated.
pub fn plan_all(buffers: &[BufferRequirement]) -> Result<PlanReport, PlanError> {
    plan_all_with_best(buffers, BestPlanner::default())
}

/// Like [`plan_all`] with `best` configured (e.g. its exact-search budget).
pub fn plan_all_with_best(
    buffers: &[BufferRequirement],
    best: BestPlanner,
) -> Result<PlanReport, PlanError> {
    let planners: [&dyn Planner; 4] = [
        &LinearPlanner,
        &TflmPlanner,
        &TfLitePlanner::with_tensor_alignment(1),
        &best,
    ];
    plan_all_with(buffers, &planners)
}

/// Like [`plan_all`] with the given planners.
pub fn plan_all_with(
    buffers: &[BufferRequirement],
    planners: &[&dyn Planner],
) -> Result<PlanReport, PlanError> {
    let lb_plain = lower_bound_without_aliasing(buffers)?;
    let mut results = Vec::with_capacity(planners.len());
    let mut plans = Vec::with_capacity(planners.len());
    let mut lb = lb_plain;
    let mut skipped = Vec::new();
    let mut too_many = None;
    for planner in planners {
        let start = Instant::now();
        let plan = match planner.plan(buffers) {
            Ok(plan) => plan,
            // The input is fine; this planner's overlap graph would be too big. Report the
            // planners that can plan it (the linear one always can).
            Err(e @ PlanError::TooManyOverlaps { .. }) => {
                skipped.push((planner.name().to_string(), e.to_string()));
                too_many = Some(e);
                continue;
            }
            Err(e) => return Err(e),
        };
        let millis = start.elapsed().as_secs_f64() * 1e3;
        plan.validate(buffers)?;
        lb = plan.lower_bound;
        results.push(PlannerResult {
            name: planner.name().to_string(),
            arena_bytes: plan.arena_size,
            millis,
            offsets: plan.offsets.clone(),
            proven_lower_bound: plan.proven_lower_bound.max(plan.lower_bound),
        });
        plans.push(plan);
    }
    if results.is_empty() {
        if let Some(e) = too_many {
            return Err(e);
        }
        lb = super::lower_bound(buffers)?;
    }
    Ok(PlanReport {
        buffers: buffers.len(),
        lower_bound_bytes: lb,
        lower_bound_without_aliasing_bytes: lb_plain,
        planners: results,
        plans,
        skipped,
    })
}

impl PlanReport {
    /// The result of the planner called `name`.
    pub fn get(&self, name: &str) -> Option<&PlannerResult> {
        self.planners.iter().find(|r| r.name == name)
    }

    /// The plan to use: `best`'s, or the smallest of the others when `best` was skipped.
    pub fn chosen_plan(&self) -> Option<&Plan> {
        self.plans
            .iter()
            .find(|p| p.planner == "best")
            .or_else(|| self.plans.iter().min_by_key(|p| p.arena_size))
    }

    /// `{"lower_bound_bytes":…, "lower_bound_without_aliasing_bytes":…, "buffers":…,
    /// "planners":{"linear":{"arena_bytes":…,"millis":…,"offsets":[…]}, "tflm":…, "tflite":…, "best":…},
    /// "skipped":{"<planner>":"<reason>"}}`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut planners = serde_json::Map::new();
        for r in &self.planners {
            planners.insert(
                r.name.clone(),
                serde_json::json!({
                    "arena_bytes": r.arena_bytes,
                    "ratio": self.ratio(r.arena_bytes),
                    "millis": r.millis,
                    "offsets": r.offsets,
                    "proven_optimal": r.proven_optimal(),
                    "proven_lower_bound_bytes": r.proven_lower_bound,
                }),
            );
        }
        let skipped: serde_json::Map<String, serde_json::Value> = self
            .skipped
            .iter()
            .map(|(n, why)| (n.clone(), serde_json::Value::from(why.clone())))
            .collect();
        serde_json::json!({
            "buffers": self.buffers,
            "lower_bound_bytes": self.lower_bound_bytes,
            "lower_bound_without_aliasing_bytes": self.lower_bound_without_aliasing_bytes,
            "planners": planners,
            "skipped": skipped,
        })
    }

    fn ratio(&self, arena: usize) -> f64 {
        if self.lower_bound_bytes == 0 {
            1.0
        } else {
            arena as f64 / self.lower_bound_bytes as f64
        }
    }

    /// A text table: one row per planner with arena bytes, ratio to the lower bound, time and
    /// whether the plan is proven optimal (else the proven lower bound, when a planner raised
    /// it above the sweep bound).
    pub fn to_table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "buffers: {}", self.buffers);
        let _ = writeln!(s, "lower bound: {} bytes", self.lower_bound_bytes);
        if self.lower_bound_without_aliasing_bytes != self.lower_bound_bytes {
            let _ = writeln!(
                s,
                "lower bound without aliasing: {} bytes",
                self.lower_bound_without_aliasing_bytes
            );
        }
        let _ = writeln!(
            s,
            "{:<8} {:>14} {:>9} {:>11}  optimality",
            "planner", "arena bytes", "÷ bound", "millis"
        );
        for r in &self.planners {
            let proof = if r.proven_optimal() {
                "proven optimal".to_string()
            } else if r.proven_lower_bound > self.lower_bound_bytes {
                format!("not proven (optimum >= {} bytes)", r.proven_lower_bound)
            } else {
                "not proven".to_string()
            };
            let _ = writeln!(
                s,
                "{:<8} {:>14} {:>9.4} {:>11.3}  {proof}",
                r.name,
                r.arena_bytes,
                self.ratio(r.arena_bytes),
                r.millis
            );
        }
        for (name, why) in &self.skipped {
            let _ = writeln!(s, "{name:<8} skipped: {why}");
        }
        s
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordSet {
    buffers: Vec<Record>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Record {
    size: usize,
    first: usize,
    last: usize,
    #[serde(default)]
    alignment: Option<usize>,
    #[serde(default)]
    offline_offset: Option<usize>,
    #[serde(default)]
    alias_of: Option<usize>,
    #[serde(default)]
    name: Option<String>,
}

/// Parses a record set: `{"buffers":[{"size":N,"first":A,"last":B}, ...]}` with optional
/// `alignment` (default 1), `offline_offset`, `alias_of` and `name` per buffer. Unknown fields
/// are errors (they are usually typos). The buffers are not validated here; planning does that.
pub fn records_from_json(text: &str) -> Result<Vec<BufferRequirement>, PlanError> {
    let set: RecordSet =
        serde_json::from_str(text).map_err(|e| PlanError::Records(e.to_string()))?;
    Ok(set
        .buffers
        .into_iter()
        .map(|r| BufferRequirement {
            size: r.size,
            alignment: r.alignment.unwrap_or(1),
            first_use: r.first,
            last_use: r.last,
            offline_offset: r.offline_offset,
            alias_of: r.alias_of,
            name: r.name.map(Cow::Owned),
        })
        .collect())
}
