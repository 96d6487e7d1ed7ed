//! Sets `guarded_calls` where native code runs behind halo's fault guard: Linux on x86-64 and
//! AArch64 (a trampoline and a signal handler per architecture). Elsewhere calls are direct.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(guarded_calls)");
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" && matches!(arch.as_str(), "x86_64" | "aarch64") {
        println!("cargo::rustc-cfg=guarded_calls");
    }
}
