//! One module per rule; the file name is the rule name in snake case.

pub(crate) mod acquire_in_poll_loop;
pub(crate) mod async_proxy_read_without_fence;
pub(crate) mod costly_fence;
pub(crate) mod cp_async_not_waited;
pub(crate) mod elected_lane_release;
pub(crate) mod mbarrier_init_not_fenced;
pub(crate) mod mbarrier_phase_skip;
pub(crate) mod mbarrier_wait_scope_too_narrow;
pub(crate) mod ptxas_reordered_across_wait;
/// Shared by the poll rules.
mod retry;
pub(crate) mod spin_poll_without_acquire;
pub(crate) mod tcgen05_access_not_waited;
pub(crate) mod tensormap_modified_in_flight;
