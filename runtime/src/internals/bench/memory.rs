//! The process's peak resident memory, as a benchmark reports it beside its throughput:
//! Linux's high-water mark (`VmHWM`), reset before each run so that a run's peak is its own.

/// Resets the high-water mark to what is resident now (nothing on systems without it).
pub fn reset_peak() {
    // "5" resets the peak resident set size (Linux 4.0 and later).
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The memory resident now, in bytes, where the system says.
pub fn resident() -> Option<u64> {
    status_kib("VmRSS:")?.checked_mul(1024)
}

/// The most memory resident since the last [`reset_peak`] (or the start), in bytes, where the
/// system says.
pub fn peak() -> Option<u64> {
    status_kib("VmHWM:")?.checked_mul(1024)
}

/// A figure of `/proc/self/status`, in KiB.
fn status_kib(name: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    figure_kib(&status, name)
}

/// A figure of one reading of `/proc/self/status`, in KiB.
fn figure_kib(status: &str, name: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(name))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peak_covers_what_was_resident_since_the_reset() {
        reset_peak();
        let Some(before) = peak() else {
            return; // Not Linux: nothing to read.
        };
        let touched = vec![1u8; 64 << 20];
        // Resident and peak from one reading: other test threads allocate between two.
        let status = std::fs::read_to_string("/proc/self/status").expect("read before");
        let after = figure_kib(&status, "VmHWM:").expect("a peak") * 1024;
        let resident = figure_kib(&status, "VmRSS:").expect("a resident set") * 1024;
        assert!(after >= before + (60 << 20), "{before} then {after}");
        assert!(
            resident <= after,
            "resident {resident} above the peak {after}"
        );
        drop(std::hint::black_box(touched));
    }
}
