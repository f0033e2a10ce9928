//! Callgrind's client requests (valgrind's `callgrind.h`), for the programs that count
//! instructions of a bracketed path: `examples/hot_path_instructions.rs` and
//! `distributed/examples/hop_instructions.rs` include this file as a module of their own.
//! Natively each request is an instruction sequence that does nothing; off x86-64 there are
//! none, so callgrind collects nothing, which the scripts that read the counts report as a
//! failure.

/// `CALLGRIND_TOGGLE_COLLECT`: toggles collection on the calling thread.
#[allow(dead_code)] // Each including program uses the requests it needs.
pub fn toggle_collect() {
    // `VG_USERREQ_TOOL_BASE('C', 'T') + 2`: callgrind's third request.
    request(u64::from(b'C') << 24 | u64::from(b'T') << 16 | 2, 0);
}

/// `CALLGRIND_DUMP_STATS_AT(name)`: writes what was collected so far to a dump of its own,
/// described as `name`, and zeroes the counts.
#[allow(dead_code)] // Each including program uses the requests it needs.
pub fn dump_stats_at(name: &std::ffi::CStr) {
    // `VG_USERREQ_TOOL_BASE('C', 'T') + 3`.
    request(u64::from(b'C') << 24 | u64::from(b'T') << 16 | 3, name.as_ptr() as u64);
}

/// Valgrind's client request `code` with one argument.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn request(code: u64, argument: u64) {
    let request: [u64; 6] = [code, argument, 0, 0, 0, 0];
    // SAFETY: valgrind's client-request sequence for amd64 (`valgrind.h`). Natively it rotates
    // `rdi` by 128 bits in all (back to its value, declared clobbered anyway), exchanges `rbx`
    // with itself and leaves `rdx` as the default result (clobbered); flags are clobbered, as
    // `asm!` assumes unless told otherwise. Under valgrind the sequence reads the six words of
    // `request`, which live on this frame until the block ends (and the string an argument may
    // point to, which the caller keeps alive for the call), and writes only `rdx`.
    unsafe {
        std::arch::asm!(
            "rol rdi, 3",
            "rol rdi, 13",
            "rol rdi, 61",
            "rol rdi, 51",
            "xchg rbx, rbx",
            in("rax") request.as_ptr(),
            inout("rdx") 0u64 => _,
            inout("rdi") 0u64 => _,
        );
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn request(_code: u64, _argument: u64) {}
