//! The checked-in header is what cbindgen generates from the sources: this test fails when it is
//! out of date, with the command that regenerates it.

use std::path::Path;

#[test]
fn the_checked_in_header_is_generated_from_the_sources() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .expect("capi/cbindgen.toml is readable");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(crate_dir.join("src/lib.rs"))
        .generate()
        .expect("cbindgen reads the C API's sources");
    let mut generated = Vec::new();
    bindings.write(&mut generated);
    let generated = String::from_utf8(generated).expect("the header is UTF-8");
    let path = crate_dir.join("include/causeway.h");
    if std::env::var_os("CAUSEWAY_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("include/causeway.h is writable");
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "capi/include/causeway.h is out of date with capi/src: regenerate it with\n  \
         CAUSEWAY_BLESS=1 cargo test -p causeway-capi --test header\nand commit the result"
    );
}
