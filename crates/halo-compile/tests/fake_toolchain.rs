//! `compile` against stand-in tools (shell scripts), so its choices and errors are tested on
//! machines without IREE's compiler.

use halo_compile::{compile, CompileRequest, FlagSet, GraphRewrite, KernelUse, Target, Toolchain};
use halo_hal::StatusCode;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Held by each test for its whole run. A script being written while another test forks keeps a
/// writable descriptor open in that child until it execs, and executing the script then fails
/// with ETXTBSY ("Text file busy"); one test at a time avoids the race.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Writes an executable shell script `name` into `dir`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A stand-in `iree-compile` 3.13 that refuses `O3` and otherwise writes its input's name to
/// the file after `-o`.
const COMPILER_REFUSING_O3: &str = r#"
case "$1" in --version) echo "IREE (https://iree.dev):"; echo "  IREE compiler version 3.13.0 @ 0123"; exit 0;; esac
input="$1"; out=""
for arg in "$@"; do
  case "$arg" in --iree-opt-level=O3) echo "$input:12:10: error: 'vector.store' op restricted" >&2; echo "  dump line" >&2; exit 1;; esac
  if [ "$prev" = "-o" ]; then out="$arg"; fi; prev="$arg"
done
echo "compiled $(basename "$input")" > "$out"
"#;

/// A stand-in `iree-import-onnx` in `dir` that appends the name of each file it imports to the
/// returned log, and refuses the file named `refused`.
fn logging_importer(dir: &Path, refused: Option<&str>) -> PathBuf {
    let log = dir.join("imports.log");
    let refuse = refused.map_or(String::new(), |name| {
        format!(r#"case "$1" in */{name}) echo "bad node" >&2; exit 1;; esac; "#)
    });
    script(
        dir,
        "iree-import-onnx",
        &format!(
            r#"basename "$1" >> '{}'; {refuse}echo "module {{}}" > "$5""#,
            log.display()
        ),
    );
    log
}

/// A file of the repository's `fixtures/`.
fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures").join(path)
}

/// The O3-refusing stand-in compiler, written into `dir` and located.
fn refusing_o3(dir: &Path) -> Toolchain {
    let compiler = script(dir, "iree-compile", COMPILER_REFUSING_O3);
    Toolchain::locate_in(Some(&compiler), None, None).unwrap()
}

fn request(model: PathBuf, output: PathBuf, flag_set: FlagSet) -> CompileRequest {
    CompileRequest {
        model,
        output,
        target: Target::for_device("local-task", Some("x86-64-v2")).unwrap(),
        flag_set,
        extra_flags: vec!["--iree-extra".into()],
        graph_rewrite: None,
        kernels: KernelUse::Portable,
        batch_sizes: Vec::new(),
        stop: None,
    }
}

fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(".halo-compile-"))
        .collect()
}

#[test]
fn best_falls_back_past_a_refused_set_and_says_so() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let toolchain = refusing_o3(dir.path());
    assert_eq!(toolchain.version(), "3.13.0");
    let model = dir.path().join("m.mlir");
    std::fs::write(&model, "module {}").unwrap();
    let output = dir.path().join("m.vmfb");

    let report = compile(&toolchain, &request(model, output.clone(), FlagSet::Best)).unwrap();
    assert_eq!(report.flag_set, FlagSet::Fast);
    assert_eq!(report.rejected.len(), 1);
    assert_eq!(report.rejected[0].flag_set, FlagSet::FastO3);
    assert!(
        report.rejected[0]
            .first_error
            .ends_with("error: 'vector.store' op restricted"),
        "{:?}",
        report.rejected
    );
    assert!(report
        .flags
        .contains(&"--iree-llvmcpu-target-cpu=x86-64-v2".to_string()));
    assert_eq!(report.flags.last().unwrap(), "--iree-extra");
    assert!(report.import_time.is_none());
    assert_eq!(std::fs::read_to_string(&output).unwrap(), "compiled m.mlir\n");
    assert!(leftovers(dir.path()).is_empty(), "{:?}", leftovers(dir.path()));
}

#[test]
fn a_refused_compile_keeps_the_old_output_and_quotes_the_compiler() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let toolchain = refusing_o3(dir.path());
    let model = dir.path().join("m.mlir");
    std::fs::write(&model, "module {}").unwrap();
    let output = dir.path().join("m.vmfb");
    std::fs::write(&output, "previous").unwrap();

    let error = compile(&toolchain, &request(model, output.clone(), FlagSet::FastO3)).unwrap_err();
    assert_eq!(error.code(), StatusCode::InvalidArgument);
    let text = error.to_string();
    assert!(text.contains("rejected model"), "{text}");
    assert!(text.contains("flag set 'fast-o3'"), "{text}");
    assert!(text.contains("'vector.store' op restricted\n  dump line"), "{text}");
    assert_eq!(std::fs::read_to_string(&output).unwrap(), "previous");
    assert!(leftovers(dir.path()).is_empty());
}

#[test]
fn onnx_models_go_through_the_importer_next_to_the_compiler() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let toolchain = refusing_o3(dir.path());
    script(
        dir.path(),
        "iree-import-onnx",
        r#"[ "$2 $3 $4" = "--opset-version 17 -o" ] || exit 9; echo "module {}" > "$5""#,
    );
    let model = dir.path().join("net.onnx");
    std::fs::write(&model, b"\x08\x08").unwrap();
    let output = dir.path().join("net.vmfb");
    let report = compile(&toolchain, &request(model, output.clone(), FlagSet::Fast)).unwrap();
    assert!(report.import_time.is_some());
    assert!(report.rejected.is_empty());
    assert_eq!(std::fs::read_to_string(&output).unwrap(), "compiled imported.mlir\n");
}

#[test]
fn cpu_sets_import_a_rewritten_graph_once_and_irees_own_set_the_model_as_given() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let toolchain = refusing_o3(dir.path());
    let log = logging_importer(dir.path(), None);
    // The test-scale ShuffleNet: 19 depthwise convolutions, 13 of stride 1 and 6 of stride 2,
    // 37 others whose bias goes after them, and the max pool after its stem's Relu.
    let model = fixture("benchmark-models/shufflenet_v2.onnx");
    let output = dir.path().join("net.vmfb");
    // O3 is refused, so `fast` compiles: from the same rewritten import.
    let report = compile(&toolchain, &request(model.clone(), output.clone(), FlagSet::Best)).unwrap();
    assert_eq!(report.flag_set, FlagSet::Fast);
    assert_eq!(report.graph_rewrite, GraphRewrite::ConvolutionsAsShifts);
    assert_eq!(report.rewritten_nodes, 57);
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "rewritten.onnx\n");
    let report = compile(
        &toolchain,
        &request(model.clone(), output.clone(), FlagSet::IreeDefault),
    )
    .unwrap();
    assert_eq!((report.graph_rewrite, report.rewritten_nodes), (GraphRewrite::None, 0));
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "rewritten.onnx\nshufflenet_v2.onnx\n"
    );
    // A rewrite asked for by name overrides the set's.
    let mut asked = request(model, output, FlagSet::Fast);
    asked.graph_rewrite = Some(GraphRewrite::None);
    let report = compile(&toolchain, &asked).unwrap();
    assert_eq!(
        (report.flag_set, report.graph_rewrite),
        (FlagSet::Fast, GraphRewrite::None)
    );
    assert!(leftovers(dir.path()).is_empty());
}

#[test]
fn best_tries_fast_first_for_an_onnx_graph_without_convolutions() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let toolchain = refusing_o3(dir.path());
    script(dir.path(), "iree-import-onnx", r#"echo "module {}" > "$5""#);
    // An MLP: `fast` is tried first and accepted, so the O3-refusing compiler refuses nothing.
    let mlp = fixture("models/onnx_mlp.onnx");
    let report = compile(&toolchain, &request(mlp, dir.path().join("mlp.vmfb"), FlagSet::Best)).unwrap();
    assert_eq!(report.flag_set, FlagSet::Fast);
    assert!(report.rejected.is_empty(), "{:?}", report.rejected);
    // A CNN: O3 first, refused, then `fast`.
    let cnn = fixture("benchmark-models/squeezenet.onnx");
    let report = compile(&toolchain, &request(cnn, dir.path().join("cnn.vmfb"), FlagSet::Best)).unwrap();
    assert_eq!(report.flag_set, FlagSet::Fast);
    assert_eq!(report.rejected.len(), 1);
    assert_eq!(report.rejected[0].flag_set, FlagSet::FastO3);
}

#[test]
fn a_rewritten_graph_the_importer_refuses_falls_back_to_the_model_as_given() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let toolchain = refusing_o3(dir.path());
    let log = logging_importer(dir.path(), Some("rewritten.onnx"));
    let model = fixture("benchmark-models/shufflenet_v2.onnx");
    let report = compile(&toolchain, &request(model, dir.path().join("net.vmfb"), FlagSet::Fast)).unwrap();
    assert_eq!((report.graph_rewrite, report.rewritten_nodes), (GraphRewrite::None, 0));
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "rewritten.onnx\nshufflenet_v2.onnx\n"
    );
}

#[test]
fn an_importer_that_rejects_the_model_is_quoted_with_the_model_name() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let toolchain = refusing_o3(dir.path());
    script(
        dir.path(),
        "iree-import-onnx",
        "echo 'Traceback (most recent call last):' >&2; echo 'google.protobuf.message.DecodeError: Error parsing message' >&2; exit 1",
    );
    let model = dir.path().join("broken.onnx");
    std::fs::write(&model, b"not a protobuf").unwrap();
    let error = compile(&toolchain, &request(model, dir.path().join("o.vmfb"), FlagSet::Best)).unwrap_err();
    let text = error.to_string();
    assert!(text.contains("iree-import-onnx rejected model"), "{text}");
    assert!(text.contains("broken.onnx"), "{text}");
    assert!(text.ends_with("DecodeError: Error parsing message"), "{text}");
    assert!(!dir.path().join("o.vmfb").exists());
}

#[test]
fn another_compiler_release_is_refused_with_the_package_to_install() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let compiler = script(dir.path(), "iree-compile", "echo '  IREE compiler version 3.12.1 @ x'");
    let error = Toolchain::locate_in(Some(&compiler), None, None).unwrap_err();
    assert_eq!(error.code(), StatusCode::Incompatible);
    let text = error.to_string();
    assert!(
        text.contains("3.12.1") && text.contains("iree-base-compiler==3.13.0"),
        "{text}"
    );
    assert!(text.contains("--iree-compile"), "{text}");

    let not_iree = script(dir.path(), "cc", "echo 'gcc 14'");
    let error = Toolchain::locate_in(None, Some(not_iree.as_os_str()), None).unwrap_err();
    assert!(error.to_string().contains("is it iree-compile?"), "{error}");
}

#[test]
fn the_compiler_is_found_on_path() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    script(dir.path(), "iree-compile", COMPILER_REFUSING_O3);
    let path = std::env::join_paths(["/nonexistent", dir.path().to_str().unwrap()]).unwrap();
    let toolchain = Toolchain::locate_in(None, None, Some(&path)).unwrap();
    assert_eq!(toolchain.compiler(), dir.path().join("iree-compile"));
}

#[test]
fn compiler_errors_name_the_onnx_model_not_the_deleted_import() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let toolchain = refusing_o3(dir.path());
    script(dir.path(), "iree-import-onnx", r#"echo "module {}" > "$5""#);
    let model = dir.path().join("net.onnx");
    std::fs::write(&model, b"\x08\x08").unwrap();
    let error = compile(
        &toolchain,
        &request(model, dir.path().join("net.vmfb"), FlagSet::FastO3),
    )
    .unwrap_err();
    let text = error.to_string();
    assert!(text.contains("net.onnx (imported):12:10: error:"), "{text}");
    assert!(!text.contains("imported.mlir"), "{text}");
}

/// A stand-in `iree-compile` for tuning: it copies a real program (`tiny_add.vmfb`) for most
/// variants, hangs on one, refuses one and writes a file that is no program for another.
fn tuning_compiler(dir: &Path) -> Toolchain {
    let program = fixture("models/tiny_add.vmfb");
    let body = format!(
        r#"
case "$1" in --version) echo "IREE compiler version 3.13.0 @ 0123"; exit 0;; esac
out=""
for arg in "$@"; do
  case "$arg" in
    --iree-llvmcpu-distribution-size=128) exec sleep 30;;
    --iree-dispatch-creation-enable-aggressive-fusion) echo "error: fusion refused" >&2; exit 1;;
    --iree-preprocessing-transform-spec-filename=*)
      grep -q halo_conv2d_f32_v4 "${{arg#*=}}" || {{ echo "error: no kernels spec at ${{arg#*=}}" >&2; exit 1; }}
      echo "$*" >> "$(dirname "$0")/kernel-compiles.log";;
  esac
  if [ "$prev" = "-o" ]; then out="$arg"; fi; prev="$arg"
done
case "$*" in
  *--iree-llvmcpu-reassociate-fp-reductions*) echo "not a module" > "$out";;
  *) cp '{}' "$out";;
esac
"#,
        program.display()
    );
    let compiler = script(dir, "iree-compile", &body);
    Toolchain::locate_in(Some(&compiler), None, None).unwrap()
}

#[test]
fn tuning_reports_each_failure_keeps_a_measured_variant_and_caches_it() {
    use halo_compile::tune::cache::TuneCache;
    use halo_compile::tune::measure::Workload;
    use halo_compile::tune::report::VariantStatus;
    use halo_compile::tune::{tune, TuneRequest};
    use std::time::Duration;

    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let toolchain = tuning_compiler(dir.path());
    let model = dir.path().join("m.mlir");
    std::fs::write(&model, "module {}").unwrap();
    let request = TuneRequest {
        model,
        output: dir.path().join("m.vmfb"),
        report: dir.path().join("m.tune.json"),
        target: Target::for_device("local-sync", Some("x86-64-v2")).unwrap(),
        extra_flags: Vec::new(),
        kernels: KernelUse::HaloKernels,
        workload: Workload {
            device: "local-sync".into(),
            function: None,
            inputs: Vec::new(),
            min_time: Duration::from_millis(10),
        },
        inputs_origin: "generated from the declaration".into(),
        tolerance: 1e-4,
        compile_time_limit: Duration::from_secs(2),
        jobs: 2,
        cache: Some(TuneCache::new(dir.path().join("cache"))),
    };
    let events = Mutex::new(Vec::new());
    let outcome = tune(&toolchain, &request, &|event| {
        events.lock().unwrap().push(format!("{event:?}"))
    })
    .unwrap();
    assert!(!outcome.cache_hit);
    let report = outcome.report;
    let status = |name: &str| report.variants.iter().find(|v| v.name == name).unwrap().status;
    assert_eq!(status("o3-distribution-128"), VariantStatus::CompileTimedOut);
    assert_eq!(status("o3-aggressive-fusion"), VariantStatus::CompileFailed);
    assert_eq!(status("o3-reassociate"), VariantStatus::RunFailed);
    assert_eq!(status("iree-default"), VariantStatus::Measured);
    // The variants calling halo's kernels were given the spec, and say that they call them.
    for name in ["fast-kernels", "fast-o3-kernels"] {
        assert_eq!(status(name), VariantStatus::Measured, "{report:#?}");
    }
    assert!(report
        .variants
        .iter()
        .all(|v| v.kernels == v.name.ends_with("-kernels")));
    let kernel_compiles = std::fs::read_to_string(dir.path().join("kernel-compiles.log")).unwrap();
    assert_eq!(kernel_compiles.lines().count(), 2, "{kernel_compiles}");
    assert!(kernel_compiles.lines().any(|line| line.contains("--iree-opt-level=O3")));
    assert_eq!(report.chosen_kernels, report.chosen.ends_with("-kernels"));
    let refused = report
        .variants
        .iter()
        .find(|v| v.name == "o3-aggressive-fusion")
        .unwrap();
    assert!(
        refused.error.as_deref().unwrap().contains("fusion refused"),
        "{refused:?}"
    );
    assert_eq!(report.function, "tiny_add");
    assert_eq!(report.chosen_result().unwrap().status, VariantStatus::Measured);
    // Every variant is compiled once and timed (or skipped) in each of three rounds.
    assert_eq!(events.lock().unwrap().len(), 1 + 4 * report.variants.len());
    // Variants take turns call by call, so every measured one made the same number of calls.
    let calls: Vec<_> = report
        .variants
        .iter()
        .filter(|v| v.status == VariantStatus::Measured)
        .map(|v| v.calls.unwrap())
        .collect();
    assert!(
        calls.len() >= 2 && calls.iter().all(|&c| c == calls[0] && c >= 9),
        "{calls:?}"
    );
    let baseline = report.baseline_result().unwrap();
    assert_eq!(baseline.per_call_ms_rounds.len(), 3);
    let mut rounds = baseline.per_call_ms_rounds.clone();
    rounds.sort_by(f64::total_cmp);
    assert_eq!(baseline.per_call_ms, Some(rounds[1]));
    let written: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&request.report).unwrap()).unwrap();
    assert_eq!(written["chosen"], report.chosen.as_str());
    assert_eq!(
        std::fs::read(&request.output).unwrap(),
        std::fs::read(fixture("models/tiny_add.vmfb")).unwrap()
    );
    assert!(leftovers(dir.path()).is_empty(), "{:?}", leftovers(dir.path()));

    std::fs::remove_file(&request.output).unwrap();
    let again = tune(&toolchain, &request, &|_| panic!("a cache hit compiles nothing")).unwrap();
    assert!(again.cache_hit);
    assert_eq!(again.report.chosen, report.chosen);
    assert!(request.output.is_file());
}

/// A compiler ended by Ctrl-C (a terminal sends it to the whole process group, halo included
/// when it runs in Python) is a stop, not a rejected flag set: no other set is tried.
#[test]
fn a_compiler_ended_by_ctrl_c_stops_the_compile_instead_of_trying_the_next_set() {
    let _serial = serial();
    // The fake compiler ends itself with SIGINT, which does nothing where this test run started
    // with SIGINT ignored (a background job of a script, `nohup`, some CI runners): children
    // inherit the ignored disposition, and a shell cannot undo it. The default goes back first.
    // SAFETY: `signal` with `SIG_DFL` changes only the process's disposition, which no test relies
    // on being ignored.
    unsafe { libc::signal(libc::SIGINT, libc::SIG_DFL) };
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let body = format!(
        "case \"$1\" in --version) echo \"IREE compiler version 3.13.0 @ 0123\"; exit 0;; esac\n\
         echo run >> '{}'; kill -INT $$; sleep 5",
        log.display()
    );
    let compiler = script(dir.path(), "iree-compile", &body);
    let toolchain = Toolchain::locate_in(Some(&compiler), None, None).unwrap();
    let model = dir.path().join("m.mlir");
    std::fs::write(&model, "module {}").unwrap();
    let output = dir.path().join("m.vmfb");
    let error = compile(&toolchain, &request(model, output.clone(), FlagSet::Best)).unwrap_err();
    assert_eq!(error.code(), StatusCode::Cancelled, "{error}");
    assert!(
        error.to_string().contains("stopped by a signal while compiling model"),
        "{error}"
    );
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "run\n");
    assert!(!output.exists());
    assert!(leftovers(dir.path()).is_empty(), "{:?}", leftovers(dir.path()));
}

/// A request's own stop flag (a server shutting down while it loads a model) kills its compiler
/// as a signal would, and says who stopped it.
#[test]
fn a_requests_own_stop_flag_kills_its_compiler() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let started = dir.path().join("started");
    let body = format!(
        "case \"$1\" in --version) echo \"IREE compiler version 3.13.0 @ 0123\"; exit 0;; esac\n\
         touch '{}'; sleep 60",
        started.display()
    );
    let compiler = script(dir.path(), "iree-compile", &body);
    let toolchain = Toolchain::locate_in(Some(&compiler), None, None).unwrap();
    let model = dir.path().join("m.mlir");
    std::fs::write(&model, "module {}").unwrap();
    let output = dir.path().join("m.vmfb");
    let stop = Arc::new(AtomicBool::new(false));
    let stopper = {
        let (stop, started) = (stop.clone(), started.clone());
        std::thread::spawn(move || {
            while !started.exists() {
                std::thread::sleep(Duration::from_millis(10));
            }
            stop.store(true, Ordering::Relaxed);
        })
    };
    let begun = Instant::now();
    let error = compile(
        &toolchain,
        &CompileRequest {
            stop: Some(stop),
            ..request(model, output.clone(), FlagSet::Best)
        },
    )
    .unwrap_err();
    stopper.join().unwrap();
    assert!(
        begun.elapsed() < Duration::from_secs(30),
        "the compiler ran its whole minute"
    );
    assert_eq!(error.code(), StatusCode::Cancelled, "{error}");
    assert!(
        error
            .to_string()
            .contains("stopped by its caller while compiling model"),
        "{error}"
    );
    assert!(!output.exists());
    assert!(leftovers(dir.path()).is_empty(), "{:?}", leftovers(dir.path()));
}
