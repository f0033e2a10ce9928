//! Checks, before rsmpi's own build script runs, that the system libraries it needs are there,
//! and stops the build with a message naming the packages to install when they are not.
//!
//! rsmpi (`mpi-sys`) compiles a C shim with the MPI compiler wrapper and generates its bindings
//! with bindgen, which loads libclang. Without MPI its build script ends in a bare `explicit
//! panic` after a list of the probes it tried; without libclang, in bindgen's search list. This
//! script runs the same probes first (rsmpi's: `$MPICC` or `mpicc`, then pkg-config's `mpich`
//! and `ompi`; clang-sys's directories for libclang) and fails with the Debian package names.
//! Where a variable points rsmpi or clang-sys somewhere on purpose (`MPI_PKG_CONFIG`,
//! `CRAY_MPICH_DIR`, `LIBCLANG_PATH`), this script trusts it and leaves the rest to them.
//!
//! Only on Linux and other Unix hosts: on Windows rsmpi finds MS-MPI through variables of its
//! own and reports what is missing itself.

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    for variable in [
        "MPICC",
        "MPI_PKG_CONFIG",
        "CRAY_MPICH_DIR",
        "PKG_CONFIG",
        "PKG_CONFIG_PATH",
        "LIBCLANG_PATH",
        "LLVM_CONFIG_PATH",
    ] {
        println!("cargo:rerun-if-env-changed={variable}");
    }
    if env::var("CARGO_CFG_TARGET_FAMILY").as_deref() != Ok("unix") || !cfg!(unix) {
        return;
    }

    let mut missing = Vec::new();
    if !mpi_found() {
        missing.push(
            "no MPI implementation: rsmpi compiles against MPI's headers and links libmpi, and \
             found neither a compiler wrapper (`mpicc`, or the one $MPICC names) nor a \
             pkg-config entry for `ompi` or `mpich`. Install Open MPI: on Debian and Ubuntu \
             `apt-get install libopenmpi-dev openmpi-bin` (Fedora: `dnf install openmpi-devel`, \
             then `module load mpi`); MPICH (Debian package `mpich`) works too. If MPI is \
             installed somewhere else, set MPICC to its `mpicc` or MPI_PKG_CONFIG to its `.pc` \
             file.",
        );
    }
    if cfg!(target_os = "linux") && !libclang_found() {
        missing.push(
            "no libclang: rsmpi generates its MPI bindings with bindgen, which loads libclang at \
             build time, and none was found (LIBCLANG_PATH unset; no libclang.so through \
             llvm-config, LD_LIBRARY_PATH, LIBRARY_PATH or under /usr/lib* and /usr/local/lib*). \
             Install it: on Debian and Ubuntu `apt-get install libclang-dev`; or set \
             LIBCLANG_PATH to the folder that holds libclang.so.",
        );
    }
    if missing.is_empty() {
        return;
    }
    for problem in &missing {
        println!("cargo:warning=causeway-distributed cannot be built: {problem}");
    }
    panic!(
        "causeway-distributed (the `mpi` feature of causeway) needs system libraries that are \
         missing:\n  - {}\n",
        missing.join("\n  - ")
    );
}

/// Whether rsmpi's probe would find an MPI implementation, tried as it tries them.
fn mpi_found() -> bool {
    if env::var_os("MPI_PKG_CONFIG").is_some() || env::var_os("CRAY_MPICH_DIR").is_some() {
        return true;
    }
    // rsmpi takes the wrapper when it starts at all, whatever `-show` then exits with.
    let wrapper = env::var_os("MPICC").unwrap_or_else(|| "mpicc".into());
    if quietly(Command::new(wrapper).arg("-show")).is_some() {
        return true;
    }
    let pkg_config = env::var_os("PKG_CONFIG").unwrap_or_else(|| "pkg-config".into());
    ["mpich", "ompi"]
        .iter()
        .any(|package| quietly(Command::new(&pkg_config).args(["--exists", package])) == Some(true))
}

/// Whether clang-sys would find a libclang shared library, searched where it searches on Linux.
fn libclang_found() -> bool {
    if env::var_os("LIBCLANG_PATH").is_some() {
        return true;
    }
    let mut folders = Vec::new();
    let llvm_config = env::var_os("LLVM_CONFIG_PATH").unwrap_or_else(|| "llvm-config".into());
    if let Ok(output) = Command::new(llvm_config).arg("--prefix").stderr(Stdio::null()).output() {
        if output.status.success() {
            let text = String::from_utf8_lossy(&output.stdout);
            if let Some(prefix) = text.lines().next() {
                let prefix = Path::new(prefix.trim());
                folders.extend(["bin", "lib", "lib64"].map(|folder| prefix.join(folder)));
            }
        }
    }
    for variable in ["LD_LIBRARY_PATH", "LIBRARY_PATH"] {
        if let Some(paths) = env::var_os(variable) {
            folders.extend(env::split_paths(&paths));
        }
    }
    for pattern in [
        "/usr/local/llvm*/lib*",
        "/usr/local/lib*/*/*",
        "/usr/local/lib*/*",
        "/usr/local/lib*",
        "/usr/lib*/*/*",
        "/usr/lib*/*",
        "/usr/lib*",
    ] {
        expand(Path::new("/"), pattern.trim_start_matches('/'), &mut folders);
    }
    folders.iter().any(|folder| holds_libclang(folder))
}

/// Adds to `out` the folders under `base` that `pattern` (path segments, each a name, `*`, or a
/// prefix followed by `*`) names.
fn expand(base: &Path, pattern: &str, out: &mut Vec<PathBuf>) {
    let (segment, rest) = pattern.split_once('/').unwrap_or((pattern, ""));
    let matches: Vec<PathBuf> = match segment.strip_suffix('*') {
        Some(prefix) => match base.read_dir() {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .filter(|entry| entry.file_name().to_string_lossy().starts_with(prefix))
                .map(|entry| entry.path())
                .filter(|path| path.is_dir())
                .collect(),
            Err(_) => Vec::new(),
        },
        None => vec![base.join(segment)].into_iter().filter(|path| path.is_dir()).collect(),
    };
    for path in matches {
        if rest.is_empty() {
            out.push(path);
        } else {
            expand(&path, rest, out);
        }
    }
}

/// Whether `folder` holds a file clang-sys would try as libclang: `libclang.so`,
/// `libclang.so.N`, `libclang-N.so` or `libclang-N.so.M` (not `libclang-cpp`).
fn holds_libclang(folder: &Path) -> bool {
    let Ok(entries) = folder.read_dir() else { return false };
    entries.filter_map(Result::ok).any(|entry| {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let Some(rest) = name.strip_prefix("libclang") else { return false };
        rest == ".so"
            || rest.starts_with(".so.")
            || (rest.starts_with('-')
                && rest[1..].starts_with(|c: char| c.is_ascii_digit())
                && rest.contains(".so"))
    })
}

/// Runs `command` with its output discarded: `None` when it could not be started, else whether
/// it succeeded.
fn quietly(command: &mut Command) -> Option<bool> {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()
        .map(|status| status.success())
}
