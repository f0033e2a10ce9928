//! The compute kernels' PTX and launches, checked on every machine (no GPU needed): the
//! shipped `compute.ptx` is exactly what LLVM's NVPTX backend makes of its source
//! `compute.ll` (`scripts/cuda.sh --setup-only` installs `llc`), each entry point declares the
//! parameters a launch passes, in that order, and a recorded region becomes the launches the
//! work asks for.

use std::path::Path;
use std::process::Command;

use causeway_driver_cuda::memory::{compute_launches, ComputeKernel, COMPUTE_PTX};

fn kernels() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/kernels"))
}

#[test]
fn the_shipped_ptx_is_what_llc_makes_of_its_source() {
    let output = Command::new("llc")
        .args(["-march=nvptx64", "-mcpu=sm_70", "-O2", "-o", "-"])
        .arg(kernels().join("compute.ll"))
        .output()
        .expect("llc runs (scripts/cuda.sh --setup-only installs it)");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let regenerated = String::from_utf8(output.stdout).expect("PTX is text");
    assert_eq!(regenerated, COMPUTE_PTX, "regenerate kernels/compute.ptx from compute.ll");
}

/// The `.param` types of `entry` in `ptx`, in order.
fn parameter_types(ptx: &str, entry: &str) -> Vec<String> {
    let start = ptx.find(&format!(".entry {entry}(")).unwrap_or_else(|| panic!("no {entry}"));
    let list = &ptx[start..ptx[start..].find(')').map(|end| start + end).unwrap()];
    list.lines()
        .filter_map(|line| line.trim().strip_prefix(".param "))
        .map(|param| param.split_whitespace().next().unwrap().to_string())
        .collect()
}

#[test]
fn each_entry_takes_what_a_launch_passes() {
    assert_eq!(
        parameter_types(COMPUTE_PTX, ComputeKernel::Add.entry()),
        [".u64", ".u64", ".u64", ".u32"]
    );
    assert_eq!(
        parameter_types(COMPUTE_PTX, ComputeKernel::Saxpy.entry()),
        [".f32", ".u64", ".u64", ".u32"]
    );
    for kernel in [ComputeKernel::Add, ComputeKernel::Saxpy] {
        let launch = compute_launches(kernel, (0x1000, 0x2000, 0x3000), 64, 2, 1, 2.0)[0];
        let mut parameters = launch.parameters();
        let pointers = parameters.pointers(kernel);
        assert_eq!(pointers.len(), parameter_types(COMPUTE_PTX, kernel.entry()).len());
        // SAFETY: each pointer points into `parameters`, alive here, at a value of the type
        // the kernel's parameter list names (checked above): the last is the u32 count.
        let elements = unsafe { *pointers[3].cast::<u32>() };
        assert_eq!(elements, 64);
        match kernel {
            ComputeKernel::Add => {
                // SAFETY: as above; add's first three parameters are addresses.
                let addresses = unsafe {
                    (
                        *pointers[0].cast::<u64>(),
                        *pointers[1].cast::<u64>(),
                        *pointers[2].cast::<u64>(),
                    )
                };
                assert_eq!(addresses, (0x1000, 0x2000, 0x3000));
            }
            _ => {
                // SAFETY: as above; saxpy's first parameter is the f32 scale, then x and out.
                let (scale, x, out) = unsafe {
                    (
                        *pointers[0].cast::<f32>(),
                        *pointers[1].cast::<u64>(),
                        *pointers[2].cast::<u64>(),
                    )
                };
                assert_eq!((scale, x, out), (2.0, 0x1000, 0x3000));
            }
        }
    }
}

#[test]
fn a_region_is_one_launch_of_tiles_blocks() {
    let launches = compute_launches(ComputeKernel::Saxpy, (1, 2, 3), 4096, 8, 3, 2.0);
    assert_eq!(launches.len(), 3, "one launch per region, in order");
    assert!(launches.iter().all(|launch| launch.blocks == 8 && launch.elements == 4096));
    // Saxpy accumulates into the copy of y: it names x and out, nothing else.
    assert_eq!(launches[0].buffers, [1, 3, 0]);
    let add = compute_launches(ComputeKernel::Add, (1, 2, 3), 10, 1, 2, 0.0);
    assert_eq!((add.len(), add[0].buffers), (2, [1, 2, 3]));
}
