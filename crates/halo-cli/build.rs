//! Links the `halo` binary with the functions a model run executes side by side
//! (`hot-symbols.txt`, written by `scripts/hot-symbols`): the kernel maps code pages around each
//! one a process touches, so grouping them keeps about 2.5 MB less code resident per run.
//!
//! Only where the linker is Rust's LLD, which takes a symbol ordering file: the default for
//! `x86_64-unknown-linux-gnu` since Rust 1.90 where the toolchain ships it (rustup's do), unless
//! the build names its own linker.

use std::process::Command;

fn main() {
    let order = format!("{}/hot-symbols.txt", env!("CARGO_MANIFEST_DIR"));
    println!("cargo:rerun-if-changed={order}");
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    if links_with_rust_lld() {
        println!("cargo:rustc-link-arg-bin=halo=-Wl,--symbol-ordering-file={order}");
        // Names of functions changed since the list was written are simply not found.
        println!("cargo:rustc-link-arg-bin=halo=-Wl,--no-warn-symbol-ordering");
    }
}

fn links_with_rust_lld() -> bool {
    let target = std::env::var("TARGET").unwrap_or_default();
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let linker_named = flags.contains("linker") || std::env::var_os("RUSTC_LINKER").is_some();
    target == "x86_64-unknown-linux-gnu"
        && !linker_named
        && rustc(&["-V"])
            .and_then(|version| minor_version(&version))
            .is_some_and(|minor| minor >= 90)
        && rustc(&["--print", "sysroot"]).is_some_and(|sysroot| {
            std::path::Path::new(sysroot.trim())
                .join("lib/rustlib/x86_64-unknown-linux-gnu/bin/gcc-ld/ld.lld")
                .exists()
        })
}

/// What the compiler prints for `args`.
fn rustc(args: &[&str]) -> Option<String> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let output = Command::new(rustc).args(args).output().ok()?;
    String::from_utf8(output.stdout).ok()
}

/// The `N` of `rustc 1.N.x`.
fn minor_version(version: &str) -> Option<u32> {
    version.split_whitespace().nth(1)?.split('.').nth(1)?.parse().ok()
}
