//! Operations a worker runs, dispatched by name.
//!
//! Adding an op: write `ops/<name>.rs` with a unit struct implementing [`Op`], then
//! add its `mod` line and one entry to [`OPS`]. The host decides which ops the MCP
//! surface can reach; `debug.*` ops exist for the supervisor's tests and are never
//! routed from client requests.

mod debug_alloc;
mod debug_crash;
mod debug_malformed;
mod debug_sleep;
mod demo;
pub mod drc;
mod engine_info;
pub mod evaluate;
pub mod observe;
pub mod optimize;
pub mod optimize_region;
pub mod simulate;
pub mod whole;

pub use crate::op::Op;

/// Every op this worker knows.
static OPS: &[&dyn Op] = &[
    &debug_sleep::DebugSleep,
    &debug_crash::DebugCrash,
    &debug_alloc::DebugAlloc,
    &debug_malformed::DebugMalformed,
    &engine_info::EngineInfo,
    &demo::DemoRender,
    &evaluate::Evaluate,
    &optimize::Optimize,
    &optimize_region::OptimizePlan,
    &optimize_region::OptimizeTile,
    &optimize_region::merge::OptimizeMerge,
    &optimize_region::merge::OptimizeCompare,
    &optimize_region::put_back::OptimizePutBack,
    &simulate::Simulate,
    &whole::evaluate::EvaluatePlan,
    &whole::evaluate::EvaluateTile,
    &whole::evaluate::EvaluateMerge,
    &whole::pages::PageOp,
    &whole::simulate::SimulatePlan,
    &whole::simulate::SimulateTile,
    &whole::simulate::SimulateMerge,
    observe::OPEN,
    observe::LIST_CELLS,
    observe::DESCRIBE_CELL,
    observe::LIST_LAYERS,
    observe::QUERY_REGION,
    observe::MEASURE,
    observe::ANALYZE_WAVEGUIDE,
    observe::SET_VIEW,
    observe::RENDER,
    &drc::DrcRun,
    &drc::DrcMarkers,
];

/// The op named `name`.
#[must_use]
pub fn find(name: &str) -> Option<&'static dyn Op> {
    OPS.iter().copied().find(|op| op.name() == name)
}

/// Names of all ops, sorted.
#[must_use]
pub fn names() -> Vec<&'static str> {
    let mut names: Vec<_> = OPS.iter().map(|op| op.name()).collect();
    names.sort_unstable();
    names
}
