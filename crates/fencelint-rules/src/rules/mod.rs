//! One module per rule; the file name is the rule name in snake case.

pub(crate) mod acquire_in_poll_loop;
pub(crate) mod async_proxy_read_without_fence;
pub(crate) mod cp_async_not_waited;
pub(crate) mod spin_poll_without_acquire;
pub(crate) mod tensormap_modified_in_flight;
