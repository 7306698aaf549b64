//! `fencelint audit-reorder PTX SASS`: the PTX-versus-SASS reorder audit on a PTX file and the
//! `nvdisasm -c -gp` listing of the cubin assembled from it (see docs/reorder.md).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use fencelint_diagnostics::{Diagnostic, Label, Severity, codes};
use fencelint_linter::{InputKind, Settings, detect, lint_pair, reorder};
use fencelint_source::{FileId, SourceDb, TextRange};

use crate::check::{ColorChoice, Format};
use crate::render;

#[derive(Args, Debug)]
pub(crate) struct AuditArgs {
    /// The PTX file.
    pub ptx: PathBuf,
    /// The SASS of the same kernels with PTX line markers (`nvdisasm -c -gp` of a cubin built
    /// with `-lineinfo`).
    pub sass: PathBuf,
    /// The cubin the SASS was disassembled from, to name the ptxas version in findings
    /// [default: `<stem>.cubin` beside `<stem>.nvdisasm-gp.sass`, when it exists].
    #[arg(long, value_name = "FILE")]
    pub cubin: Option<PathBuf>,
    /// Also run the rules of `fencelint check` on both files.
    #[arg(long)]
    pub all_rules: bool,
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    #[arg(long, value_enum, default_value = "auto")]
    pub color: ColorChoice,
}

pub(crate) fn run(args: &AuditArgs) -> ExitCode {
    let mut db = SourceDb::new();
    let mut errors = Vec::new();
    let mut texts = Vec::new();
    for path in [&args.ptx, &args.sass] {
        match std::fs::read_to_string(path) {
            Ok(text) => texts.push(db.add(path.display().to_string(), text)),
            Err(err) => {
                let file = db.add(path.display().to_string(), String::new());
                errors.push(input_error(file, &format!("cannot read: {err}")));
                texts.push(file);
            }
        }
    }
    let (ptx, sass) = (texts[0], texts[1]);
    let producer = cubin_path(args)
        .and_then(|p| std::fs::read(p).ok())
        .and_then(|bytes| reorder::ptxas_version(&bytes));
    let settings = if args.all_rules {
        Settings::default()
    } else {
        Settings::only(&[reorder::RULE]).unwrap_or_default()
    };
    let mut diagnostics = errors;
    if diagnostics.is_empty() {
        let sass_text = db.file(sass).text();
        let kind = detect(sass_text).unwrap_or(InputKind::Ptx);
        let output = lint_pair(
            ptx,
            db.file(ptx).text(),
            sass,
            sass_text,
            kind,
            &settings,
            producer.as_deref(),
        );
        diagnostics = output.diagnostics;
    }
    fencelint_diagnostics::sort(&mut diagnostics);

    let stdout_is_terminal = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let format =
        args.format.unwrap_or(if stdout_is_terminal { Format::Rich } else { Format::Short });
    let color = match args.color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => stdout_is_terminal && std::env::var_os("NO_COLOR").is_none(),
    };
    let options = render::Options {
        color,
        locations: render::Locations::Input,
        base_dir: std::env::current_dir().ok(),
    };
    let rendered = render::render(format, &db, &diagnostics, &options);
    let mut stdout = std::io::stdout().lock();
    if let Err(err) = stdout.write_all(rendered.as_bytes()).and_then(|()| stdout.flush())
        && err.kind() != std::io::ErrorKind::BrokenPipe
    {
        eprintln!("error: cannot write output: {err}");
        return ExitCode::from(2);
    }
    if diagnostics.iter().any(|d| d.rule == codes::INPUT_ERROR) {
        ExitCode::from(2)
    } else if diagnostics.iter().any(|d| d.severity >= Severity::Warning) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn cubin_path(args: &AuditArgs) -> Option<PathBuf> {
    args.cubin.clone().or_else(|| crate::check::pairs::cubin_beside(&args.sass))
}

fn input_error(file: FileId, message: &str) -> Diagnostic {
    Diagnostic::new(
        codes::INPUT_ERROR,
        Severity::Error,
        message.to_owned(),
        Label::new(file, TextRange::new(0, 0), "this input"),
    )
}
