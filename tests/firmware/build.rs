//! Picks the board for the target being built: its memory layout, its linker scripts and the
//! `board` cfg the sources switch on. One target, one qemu machine.

use std::env;
use std::fs;
use std::path::PathBuf;

fn main() {
    let target = env::var("TARGET").expect("cargo sets TARGET");
    let (board, memory, link_args): (&str, &str, &[&str]) = match target.as_str() {
        "thumbv7em-none-eabihf" => ("mps2_an386", "memory/mps2-an386.x", &["--nmagic", "-Tlink.x"]),
        "thumbv6m-none-eabi" => ("microbit", "memory/microbit.x", &["--nmagic", "-Tlink.x"]),
        "riscv32imac-unknown-none-elf" => {
            ("riscv_virt", "memory/riscv-virt.x", &["-Tmemory.x", "-Tlink.x"])
        }
        other => panic!(
            "causeway-firmware-tests has no board for target {other}; build for \
             thumbv7em-none-eabihf, thumbv6m-none-eabi or riscv32imac-unknown-none-elf"
        ),
    };
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    fs::copy(memory, out.join("memory.x")).expect("copy the board's memory.x");
    println!("cargo:rustc-link-search={}", out.display());
    for arg in link_args {
        println!("cargo:rustc-link-arg-bins={arg}");
    }
    println!("cargo:rustc-cfg=board=\"{board}\"");
    println!("cargo:rerun-if-changed={memory}");
    println!("cargo:rerun-if-changed=build.rs");
}
