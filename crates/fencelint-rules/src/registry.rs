//! The single list of rules, kept alphabetical.

use crate::Rule;
use crate::rules;

static RULES: &[&dyn Rule] = &[
    &rules::acquire_in_poll_loop::AcquireInPollLoop,
    &rules::async_proxy_read_without_fence::AsyncProxyReadWithoutFence,
    &rules::costly_fence::CostlyFence,
    &rules::cp_async_not_waited::CpAsyncNotWaited,
    &rules::elected_lane_release::ElectedLaneRelease,
    &rules::mbarrier_init_not_fenced::MbarrierInitNotFenced,
    &rules::mbarrier_phase_skip::MbarrierPhaseSkip,
    &rules::mbarrier_wait_scope_too_narrow::MbarrierWaitScopeTooNarrow,
    &rules::ptxas_reordered_across_wait::PtxasReorderedAcrossWait,
    &rules::spin_poll_without_acquire::SpinPollWithoutAcquire,
    &rules::tcgen05_access_not_waited::Tcgen05AccessNotWaited,
    &rules::tensormap_modified_in_flight::TensormapModifiedInFlight,
];

/// Every registered rule, in alphabetical order of name.
pub fn all_rules() -> &'static [&'static dyn Rule] {
    RULES
}

/// The rule called `name`.
pub fn find_rule(name: &str) -> Option<&'static dyn Rule> {
    RULES.iter().copied().find(|rule| rule.meta().name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_is_alphabetical_and_unique() {
        let names: Vec<_> = all_rules().iter().map(|r| r.meta().name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted);
    }
}
