//! Placeholder replaced by the platform helper.
