//! `causeway-api-lister JSON`: prints the public API of the crate whose rustdoc JSON is at
//! `JSON`, one item a line, sorted, the way `cargo public-api -s` prints it: blanket impls
//! (`impl<T> From<T> for T` and the like) left out, auto-trait impls (`Send`, `Sync`, `Unpin`,
//! the unwind-safety traits) kept, since a type losing one of them breaks its users.

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut arguments = std::env::args_os().skip(1);
    let (Some(json), None) = (arguments.next(), arguments.next()) else {
        eprintln!("usage: causeway-api-lister RUSTDOC_JSON");
        return ExitCode::from(2);
    };
    let api = match public_api::Builder::from_rustdoc_json(&json).omit_blanket_impls(true).build() {
        Ok(api) => api,
        Err(error) => {
            eprintln!("causeway-api-lister: {}: {error}", json.to_string_lossy());
            return ExitCode::FAILURE;
        }
    };
    for item in api.items() {
        println!("{item}");
    }
    ExitCode::SUCCESS
}
