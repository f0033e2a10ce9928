//! The compute kernels and copies produce exactly the right numbers, in tiles and regions, with
//! synchronization validation finding no hazard; the shipped SPIR-V is what its GLSL compiles to.

mod common;

use std::path::PathBuf;
use std::process::Command;

use causeway_driver_vulkan::{submit, Buffer, CommandBuffer, Kernel, Step, Timeline};

const ELEMENTS: usize = 1 << 16;

/// Inputs whose sums and products are exact in `f32` (multiples of 0.5 below 2^18), so the
/// device's results must equal the host's bit for bit, whatever it fuses.
fn inputs() -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let a = (0..ELEMENTS).map(|i| i as f32 * 0.5).collect();
    let b = (0..ELEMENTS).map(|i| (ELEMENTS - i) as f32).collect();
    let y = (0..ELEMENTS).map(|i| (i % 7) as f32).collect();
    (a, b, y)
}

#[test]
fn add_then_saxpy_in_two_regions_of_several_tiles() {
    let gpu = common::open();
    let bytes = ELEMENTS as u64 * 4;
    let (a_values, b_values, y_values) = inputs();
    let [a, b, c, y] = [(); 4].map(|()| Buffer::new(&gpu, bytes).expect("buffer"));
    a.write_f32(0, &a_values).expect("upload");
    b.write_f32(0, &b_values).expect("upload");
    y.write_f32(0, &y_values).expect("upload");
    // Leave the last few elements out, so the last tile is shorter than the others and what
    // lies past the launch must stay untouched.
    let launched = ELEMENTS - 5;
    let add = Kernel::add(&gpu).expect("add kernel");
    let saxpy = Kernel::saxpy(&gpu).expect("saxpy kernel");
    let add_launch = add.launch(&[&a, &b, &c], launched as u32, 4, 0.0).expect("launch");
    let saxpy_launch = saxpy.launch(&[&c, &y], launched as u32, 3, 2.0).expect("launch");
    assert_eq!((add_launch.tiles(), saxpy_launch.tiles()), (4, 3));
    let commands = CommandBuffer::record(
        &gpu,
        vec![vec![Step::Dispatch(add_launch)], vec![Step::Dispatch(saxpy_launch)]],
    )
    .expect("record");
    let timeline = Timeline::new(&gpu, 0).expect("timeline");
    submit(&gpu, 0, Some(&commands), &[], (&timeline, 1)).expect("submit");
    assert!(timeline.wait_host(1, common::HANG_GUARD).expect("wait"), "the kernels hung");

    let c_values = c.read_f32(0, ELEMENTS).expect("readback");
    let y_result = y.read_f32(0, ELEMENTS).expect("readback");
    for i in 0..ELEMENTS {
        let (sum, saxpy) = if i < launched {
            let sum = a_values[i] + b_values[i];
            (sum, 2.0 * sum + y_values[i])
        } else {
            (0.0, y_values[i])
        };
        assert_eq!(c_values[i].to_bits(), sum.to_bits(), "c[{i}]");
        assert_eq!(y_result[i].to_bits(), saxpy.to_bits(), "y[{i}]");
    }
    drop((commands, timeline));
    common::assert_validation_clean(&gpu);
}

#[test]
fn a_tile_per_element_group_and_a_single_tile_agree() {
    let gpu = common::open();
    let elements = 1000_u32;
    let bytes = u64::from(elements) * 4;
    let a = Buffer::new(&gpu, bytes).expect("buffer");
    let b = Buffer::new(&gpu, bytes).expect("buffer");
    let [one_tile, many_tiles] = [(); 2].map(|()| Buffer::new(&gpu, bytes).expect("buffer"));
    let values: Vec<f32> = (0..elements).map(|i| i as f32).collect();
    a.write_f32(0, &values).expect("upload");
    b.write_f32(0, &values).expect("upload");
    let add = Kernel::add(&gpu).expect("add kernel");
    let commands = CommandBuffer::record(
        &gpu,
        vec![vec![
            Step::Dispatch(add.launch(&[&a, &b, &one_tile], elements, 1, 0.0).expect("launch")),
            Step::Dispatch(add.launch(&[&a, &b, &many_tiles], elements, 7, 0.0).expect("launch")),
        ]],
    )
    .expect("record");
    let timeline = Timeline::new(&gpu, 0).expect("timeline");
    submit(&gpu, 0, Some(&commands), &[], (&timeline, 1)).expect("submit");
    assert!(timeline.wait_host(1, common::HANG_GUARD).expect("wait"), "the kernels hung");
    let expected: Vec<f32> = values.iter().map(|value| value * 2.0).collect();
    assert_eq!(one_tile.read_f32(0, elements as usize).expect("readback"), expected);
    assert_eq!(many_tiles.read_f32(0, elements as usize).expect("readback"), expected);
    drop((commands, timeline));
    common::assert_validation_clean(&gpu);
}

#[test]
fn buffer_copies_after_a_kernel_in_a_later_region() {
    let gpu = common::open();
    let bytes = ELEMENTS as u64 * 4;
    let (a_values, b_values, _) = inputs();
    let [a, b, c, copy] = [(); 4].map(|()| Buffer::new(&gpu, bytes).expect("buffer"));
    a.write_f32(0, &a_values).expect("upload");
    b.write_f32(0, &b_values).expect("upload");
    let add = Kernel::add(&gpu).expect("add kernel");
    let launch = add.launch(&[&a, &b, &c], ELEMENTS as u32, 2, 0.0).expect("launch");
    let commands = CommandBuffer::record(
        &gpu,
        vec![
            vec![Step::Dispatch(launch)],
            // Half of `c`: the copy reads only what the kernel wrote before the barrier.
            vec![Step::Copy { source: c.clone(), destination: copy.clone(), bytes: bytes / 2 }],
        ],
    )
    .expect("record");
    let timeline = Timeline::new(&gpu, 0).expect("timeline");
    submit(&gpu, 0, Some(&commands), &[], (&timeline, 1)).expect("submit");
    assert!(timeline.wait_host(1, common::HANG_GUARD).expect("wait"), "the copy hung");
    let copied = copy.read_f32(0, ELEMENTS).expect("readback");
    for (i, value) in copied.iter().enumerate() {
        let expected = if i < ELEMENTS / 2 { a_values[i] + b_values[i] } else { 0.0 };
        assert_eq!(value.to_bits(), expected.to_bits(), "copy[{i}]");
    }
    drop((commands, timeline));
    common::assert_validation_clean(&gpu);
}

/// Each shipped `.spv` is byte for byte what `glslangValidator -V --target-env vulkan1.2`
/// makes of its `.comp` (so the embedded binaries never drift from their source). A missing
/// glslangValidator fails the test: it never skips.
#[test]
fn shipped_spirv_matches_its_glsl() {
    let shaders = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("shaders");
    let out = std::env::temp_dir().join(format!("causeway-spirv-check-{}", std::process::id()));
    std::fs::create_dir_all(&out).expect("temp dir");
    for name in ["add", "saxpy"] {
        let source = shaders.join(format!("{name}.comp"));
        let compiled = out.join(format!("{name}.spv"));
        let status = Command::new("glslangValidator")
            .args(["-V", "--target-env", "vulkan1.2"])
            .arg(&source)
            .arg("-o")
            .arg(&compiled)
            .output()
            .unwrap_or_else(|error| {
                panic!(
                    "cannot run glslangValidator ({error}): install the Debian package \
                     glslang-tools (scripts/vulkan.sh does)"
                )
            });
        assert!(
            status.status.success(),
            "glslangValidator failed on {}:\n{}",
            source.display(),
            String::from_utf8_lossy(&status.stdout)
        );
        let shipped = std::fs::read(shaders.join(format!("{name}.spv"))).expect("shipped spv");
        let fresh = std::fs::read(&compiled).expect("compiled spv");
        assert!(
            shipped == fresh,
            "shaders/{name}.spv is stale: recompile it with \
             `glslangValidator -V --target-env vulkan1.2 {name}.comp -o {name}.spv`"
        );
    }
    std::fs::remove_dir_all(&out).expect("remove temp dir");
}

/// The validation layer is live, with synchronization validation: a copy that reads what a
/// kernel of the same region writes (no barrier between them) is reported as a hazard.
///
/// (Validation layer 1.3.239 reports no write-after-write between two dispatches of one region
/// writing the same range; a dispatch's write followed by a copy's read it does report.)
#[test]
fn synchronization_validation_reports_a_copy_reading_an_unordered_kernel_write() {
    let gpu = common::open();
    let bytes = 256 * 4;
    let [a, b, c, copy] = [(); 4].map(|()| Buffer::new(&gpu, bytes).expect("buffer"));
    let add = Kernel::add(&gpu).expect("add kernel");
    let launch = add.launch(&[&a, &b, &c], 256, 1, 0.0).expect("launch");
    let commands = CommandBuffer::record(
        &gpu,
        vec![vec![Step::Dispatch(launch), Step::Copy { source: c, destination: copy, bytes }]],
    )
    .expect("record");
    drop(commands);
    let messages = gpu.validation_messages();
    assert!(
        messages.iter().any(|message| message.contains("SYNC-HAZARD-READ-AFTER-WRITE")),
        "expected a read-after-write hazard, got {messages:?}"
    );
}
