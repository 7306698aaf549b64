//! Panic safety: a rule that panics on one kernel is caught (`catch_unwind` per rule and
//! function in `lint_module`), reported as an `internal-error` naming the rule and the kernel,
//! and does not stop the other rules or kernels.
//!
//! The panicking rule is not in the registry: it is enabled through the public
//! `Settings::set_severity`, which takes any `&'static dyn Rule`.

use fencelint_diagnostics::{Severity, codes};
use fencelint_linter::{InputKind, Settings, lint_text};
use fencelint_rules::{Category, Dialects, FunctionCx, Rule, RuleMeta, Status};
use fencelint_source::FileId;

struct PanicsOnBoom;

static META: RuleMeta = RuleMeta {
    name: "test-panics-on-boom",
    category: Category::Correctness,
    dialects: Dialects::BOTH,
    min_sm: None,
    status: Status::Nursery { since: "0.1.0" },
    summary: "panics on a kernel named `boom` (test only)",
    doc: "",
};

impl Rule for PanicsOnBoom {
    fn meta(&self) -> &'static RuleMeta {
        &META
    }

    fn check_function(&self, cx: &mut FunctionCx<'_>) {
        assert!(cx.func().name != "boom", "simulated rule failure");
    }
}

static PANICS: PanicsOnBoom = PanicsOnBoom;

const PTX: &str = "\
.version 8.5
.target sm_90a
.address_size 64
.visible .entry boom(.param .u64 p)
{
\t.reg .pred %p<2>;
\t.reg .b32 %r<4>;
\t.reg .b64 %rd<2>;
\tld.param.u64 %rd1, [p];
$SPIN:
\tld.relaxed.gpu.global.u32 %r1, [%rd1];
\tsetp.eq.u32 %p1, %r1, 0;
\t@%p1 bra $SPIN;
\tld.global.u32 %r2, [%rd1+4];
\tret;
}
.visible .entry calm(.param .u64 p)
{
\t.reg .pred %p<2>;
\t.reg .b32 %r<4>;
\t.reg .b64 %rd<2>;
\tld.param.u64 %rd1, [p];
$SPIN:
\tld.relaxed.gpu.global.u32 %r1, [%rd1];
\tsetp.eq.u32 %p1, %r1, 0;
\t@%p1 bra $SPIN;
\tld.global.u32 %r2, [%rd1+4];
\tret;
}
";

#[test]
fn a_panicking_rule_is_an_internal_error_and_the_rest_is_still_checked() {
    let mut settings = Settings::only(&["spin-poll-without-acquire"]).unwrap();
    settings.set_severity(&PANICS, Some(Severity::Error));
    // The panic message would otherwise be printed by the default hook; it is expected here.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let output = lint_text(FileId(0), PTX, InputKind::Ptx, &settings);
    std::panic::set_hook(hook);

    let internal: Vec<_> =
        output.diagnostics.iter().filter(|d| d.rule == codes::INTERNAL_ERROR).collect();
    assert_eq!(internal.len(), 1, "{:#?}", output.diagnostics);
    let error = internal[0];
    assert_eq!(error.severity, Severity::Error);
    assert_eq!(error.kernel.as_deref(), Some("boom"));
    assert!(error.message.contains("`test-panics-on-boom`"), "{}", error.message);
    assert!(error.message.contains("`boom`"), "{}", error.message);
    assert!(error.message.contains("simulated rule failure"), "{}", error.message);

    // The other rule still ran on both kernels, the panicking one included.
    let mut polled: Vec<_> = output
        .diagnostics
        .iter()
        .filter(|d| d.rule == "spin-poll-without-acquire")
        .map(|d| d.kernel.as_deref().unwrap_or(""))
        .collect();
    polled.sort_unstable();
    assert_eq!(polled, ["boom", "calm"], "{:#?}", output.diagnostics);
}
