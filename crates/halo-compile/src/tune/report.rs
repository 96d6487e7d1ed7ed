//! The JSON report of a tuning: every variant's flags, compile time, per-call time and deviation.

use serde::{Deserialize, Serialize};

/// What a tuning did and chose; written as JSON next to the output and kept in the cache.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TuneReport {
    /// The model file as given.
    pub model: String,
    /// The SHA-256 of the model's bytes.
    pub model_sha256: String,
    /// The device URI the variants ran on.
    pub device: String,
    /// The flags that select the target (not tuned).
    pub target_flags: Vec<String>,
    /// Flags the user added to every variant.
    pub extra_flags: Vec<String>,
    /// The CPU the timings were taken on.
    pub cpu: String,
    /// `iree-compile --version`'s release.
    pub compiler_version: String,
    /// The version of the tuning space (see `tune::space`).
    pub space_version: u32,
    /// The function timed.
    pub function: String,
    /// Where the inputs came from: the files, or `generated from the declaration`.
    pub inputs: String,
    /// The largest deviation from the baseline a variant may have (relative to the largest
    /// magnitude of each output).
    pub tolerance: f64,
    /// The variant whose outputs the others are checked against.
    pub baseline: String,
    /// The fastest variant within tolerance, written to the output.
    pub chosen: String,
    /// Every `iree-compile` flag of the chosen variant.
    pub chosen_flags: Vec<String>,
    /// The change the chosen variant made to the ONNX graph before import (`none`,
    /// `depthwise-as-shifts`, `convolutions-as-shifts`).
    #[serde(default)]
    pub chosen_graph_rewrite: String,
    /// Whether the chosen variant calls halo's kernels (and so runs only on halo).
    #[serde(default)]
    pub chosen_kernels: bool,
    /// The SHA-256 of the chosen `.vmfb`.
    pub vmfb_sha256: String,
    /// Every variant, in the order of the space.
    pub variants: Vec<VariantResult>,
}

/// One variant's outcome.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VariantResult {
    /// The variant's name in the space.
    pub name: String,
    /// Its optimisation flags (without the target's).
    pub flags: Vec<String>,
    /// The change it made to the ONNX graph before import.
    #[serde(default)]
    pub graph_rewrite: String,
    /// Whether it calls halo's kernels.
    #[serde(default)]
    pub kernels: bool,
    /// What happened to it.
    pub status: VariantStatus,
    /// Seconds `iree-compile` took.
    pub compile_seconds: f64,
    /// Median milliseconds per call over the rounds, when it ran.
    pub per_call_ms: Option<f64>,
    /// Median milliseconds per call in each round it was timed in.
    #[serde(default)]
    pub per_call_ms_rounds: Vec<f64>,
    /// Calls timed.
    pub calls: Option<usize>,
    /// Deviation from the baseline's outputs (`null` when it could not be measured or is
    /// infinite: different shapes, types or NaNs).
    pub deviation: Option<f64>,
    /// The compiler's or the runtime's first error, for a variant that failed.
    pub error: Option<String>,
}

/// The outcome of one variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VariantStatus {
    /// Compiled, ran, and its outputs are within tolerance of the baseline's.
    Measured,
    /// Ran, but its outputs are further from the baseline's than the tolerance.
    Deviates,
    /// `iree-compile` rejected it.
    CompileFailed,
    /// `iree-compile` ran past the time limit and was stopped.
    CompileTimedOut,
    /// It compiled but failed to load or run.
    RunFailed,
}

impl VariantStatus {
    /// The status as the report spells it.
    pub fn name(self) -> &'static str {
        match self {
            VariantStatus::Measured => "measured",
            VariantStatus::Deviates => "deviates",
            VariantStatus::CompileFailed => "compile-failed",
            VariantStatus::CompileTimedOut => "compile-timed-out",
            VariantStatus::RunFailed => "run-failed",
        }
    }
}

impl TuneReport {
    /// The report as the file and the cache hold it (indented JSON).
    ///
    /// # Errors
    /// `Internal` when it cannot be encoded.
    pub fn to_json(&self) -> halo_hal::Result<String> {
        serde_json::to_string_pretty(self)
            .map_err(|e| halo_hal::Error::internal(format!("encoding a tuning report: {e}")))
    }

    /// The chosen variant's result.
    pub fn chosen_result(&self) -> Option<&VariantResult> {
        self.variants.iter().find(|v| v.name == self.chosen)
    }

    /// The baseline's result.
    pub fn baseline_result(&self) -> Option<&VariantResult> {
        self.variants.iter().find(|v| v.name == self.baseline)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sample_report() -> TuneReport {
        TuneReport {
            model: "m.onnx".into(),
            model_sha256: "00".into(),
            device: "local-task".into(),
            target_flags: vec!["--iree-hal-target-device=local".into()],
            extra_flags: vec![],
            cpu: "cpu".into(),
            compiler_version: "3.13.0".into(),
            space_version: 1,
            function: "f".into(),
            inputs: "generated from the declaration".into(),
            tolerance: 1e-4,
            baseline: "iree-default".into(),
            chosen: "fast".into(),
            chosen_flags: vec!["--iree-opt-data-tiling".into()],
            chosen_graph_rewrite: "depthwise-as-shifts".into(),
            chosen_kernels: false,
            vmfb_sha256: String::new(),
            variants: vec![VariantResult {
                name: "fast".into(),
                flags: vec!["--iree-opt-data-tiling".into()],
                graph_rewrite: "depthwise-as-shifts".into(),
                kernels: false,
                status: VariantStatus::Measured,
                compile_seconds: 1.5,
                per_call_ms: Some(2.0),
                per_call_ms_rounds: vec![2.0],
                calls: Some(10),
                deviation: None,
                error: None,
            }],
        }
    }

    #[test]
    fn reports_round_trip_through_json_with_statuses_spelled_as_documented() {
        let report = sample_report();
        let text = serde_json::to_string(&report).unwrap();
        assert!(text.contains("\"status\":\"measured\""), "{text}");
        let back: TuneReport = serde_json::from_str(&text).unwrap();
        assert_eq!(back.chosen_result().unwrap().per_call_ms, Some(2.0));
        assert!(back.baseline_result().is_none());
        for status in [
            VariantStatus::Deviates,
            VariantStatus::CompileTimedOut,
            VariantStatus::RunFailed,
        ] {
            let text = serde_json::to_string(&status).unwrap();
            assert_eq!(text, format!("\"{}\"", status.name()));
        }
    }
}
