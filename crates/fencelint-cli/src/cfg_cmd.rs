//! `fencelint cfg`: draw one kernel's control-flow graph with its findings.
//!
//! The picture is Graphviz DOT: one node per basic block listing its instructions, edges named
//! by kind (branch or fallthrough), loop back edges dashed. The instructions of each finding are
//! highlighted (primary label in red, secondary labels in orange, each with the rule name), and
//! the blocks and edges of one path from a finding's secondary label to its primary label are
//! drawn in bold red. `--format svg` hands the DOT text to the `dot` program, found on `PATH`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use fencelint_cfg::{BlockId, EdgeKind, FunctionAnalysis};
use fencelint_diagnostics::{Diagnostic, Label};
use fencelint_ir::{Function, InstId, Module};
use fencelint_linter::Settings;
use fencelint_source::{FileId, TextRange};

use crate::inputs;

/// Colours of the picture.
const PRIMARY_FILL: &str = "#f8b4b4";
const PRIMARY_INK: &str = "#b00000";
const SECONDARY_FILL: &str = "#fdd8a8";
const SECONDARY_INK: &str = "#c05000";
const PATH_INK: &str = "#b00000";
const PATH_FILL: &str = "#fff4ec";
const HEADER_FILL: &str = "#e8e8e8";

/// The longest instruction text shown on one line; longer ones end in an ellipsis.
const MAX_INST_CHARS: usize = 72;
/// The longest label message shown next to a highlighted instruction.
const MAX_NOTE_CHARS: usize = 60;

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum PictureFormat {
    /// Graphviz DOT text.
    Dot,
    /// SVG, rendered by the Graphviz `dot` program (which must be on PATH).
    Svg,
}

#[derive(Args, Debug)]
pub(crate) struct CfgArgs {
    /// The PTX or SASS text file (`cuobjdump -sass`, `nvdisasm` text or `nvdisasm -json`).
    pub file: PathBuf,
    /// The kernel or device function to draw (may be left out when the file has only one).
    #[arg(long, short = 'k')]
    pub kernel: Option<String>,
    /// The output format.
    #[arg(long, value_enum, default_value = "dot")]
    pub format: PictureFormat,
    /// Write the picture to this file instead of standard output.
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
    /// The most instructions listed in one block; the rest is elided with an ellipsis line
    /// (highlighted instructions are always listed).
    #[arg(long, default_value_t = 24, value_parser = clap::value_parser!(u32).range(2..))]
    pub max_block_insts: u32,
    /// Seconds the `dot` program may run for `--format svg`.
    #[arg(long, default_value_t = 60)]
    pub dot_timeout: u64,
}

pub(crate) fn run(args: &CfgArgs) -> ExitCode {
    match draw(args) {
        Ok(picture) => {
            let written = match &args.output {
                Some(path) => std::fs::write(path, picture.as_bytes())
                    .map_err(|err| format!("cannot write `{}`: {err}", path.display())),
                None => std::io::stdout()
                    .write_all(picture.as_bytes())
                    .map_err(|err| format!("cannot write to standard output: {err}")),
            };
            match written {
                Ok(()) => ExitCode::SUCCESS,
                Err(message) => {
                    eprintln!("error: {message}");
                    ExitCode::from(2)
                }
            }
        }
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

fn draw(args: &CfgArgs) -> Result<String, String> {
    let bytes = std::fs::read(&args.file)
        .map_err(|err| format!("cannot read `{}`: {err}", args.file.display()))?;
    let is_binary = crate::check::binary::is_binary_magic(&bytes);
    let read = inputs::classify(&args.file, bytes, true);
    if let Some((_, message)) = read.fatal {
        let hint = if is_binary {
            "; disassemble it first (`nvdisasm -c -gp FILE > FILE.sass` or `cuobjdump -sass`) \
             and draw the text"
        } else {
            ""
        };
        return Err(format!("{}: {message}{hint}", args.file.display()));
    }
    let kind = read
        .kind
        .ok_or_else(|| format!("{}: not recognised as PTX or SASS text", args.file.display()))?;
    let text = read.text;
    let file = FileId(0);
    let lowered = fencelint_lower::lower(file, &text, kind, 0);
    let (module, func) = find_function(&lowered.modules, args.kernel.as_deref(), &args.file)?;

    let mut diagnostics: Vec<Diagnostic> =
        fencelint_linter::lint_module(module, &Settings::default())
            .into_iter()
            .filter(|d| d.kernel.as_deref() == Some(func.name.as_str()))
            .collect();
    fencelint_diagnostics::sort(&mut diagnostics);

    let analysis = FunctionAnalysis::new(func);
    let title = format!("{} in {}", func.name, args.file.display());
    let dot = render_dot(
        &Picture { text: &text, func, analysis: &analysis, diagnostics: &diagnostics },
        &title,
        args.max_block_insts as usize,
    );
    match args.format {
        PictureFormat::Dot => Ok(dot),
        PictureFormat::Svg => render_svg(&dot, Duration::from_secs(args.dot_timeout.max(1))),
    }
}

/// The function named `name`, or the only function when no name is given; otherwise an error
/// that lists the functions of the file.
fn find_function<'m>(
    modules: &'m [Module],
    name: Option<&str>,
    path: &Path,
) -> Result<(&'m Module, &'m Function), String> {
    let all: Vec<(&Module, &Function)> =
        modules.iter().flat_map(|m| m.functions.iter().map(move |f| (m, f))).collect();
    let found: Vec<_> = match name {
        Some(name) => all.iter().filter(|(_, f)| f.name == name).copied().collect(),
        None if all.len() == 1 => all.clone(),
        None => Vec::new(),
    };
    if let Some(&first) = found.first() {
        if found.len() > 1 {
            eprintln!(
                "note: `{}` appears in {} modules of the file; drawing the first ({})",
                first.1.name,
                found.len(),
                first.0.target.as_deref().unwrap_or("no target")
            );
        }
        return Ok(first);
    }
    let mut names: Vec<String> = all
        .iter()
        .map(
            |(_, f)| {
                if f.is_kernel { f.name.clone() } else { format!("{} (device function)", f.name) }
            },
        )
        .collect();
    names.dedup();
    let list = if names.is_empty() {
        "the file has no kernels".to_owned()
    } else {
        format!("kernels in the file:\n  {}", names.join("\n  "))
    };
    Err(match name {
        Some(name) => format!("no kernel `{name}` in `{}`; {list}", path.display()),
        None => {
            format!("`{}` has several kernels; choose one with --kernel; {list}", path.display())
        }
    })
}

/// What one picture is drawn from.
pub(crate) struct Picture<'a> {
    pub text: &'a str,
    pub func: &'a Function,
    pub analysis: &'a FunctionAnalysis<'a>,
    /// The findings of this function, sorted.
    pub diagnostics: &'a [Diagnostic],
}

/// How one instruction is marked.
#[derive(Clone, Debug, Default)]
struct Marks {
    /// `(rule, label message)` of primary labels on this instruction.
    primary: Vec<(String, String)>,
    /// `(rule, label message)` of secondary labels on this instruction.
    secondary: Vec<(String, String)>,
}

/// The instructions a label points at: those whose text overlaps the label's range, or the SASS
/// instruction at the label's address.
fn label_insts(func: &Function, label: &Label) -> Vec<InstId> {
    if let Some(address) = label.address {
        let at: Vec<InstId> = func
            .ids()
            .filter(|&id| func.inst(id).sass_address.map(u64::from) == Some(address))
            .collect();
        if !at.is_empty() {
            return at;
        }
    }
    let overlaps = |r: TextRange| {
        if label.range.start == label.range.end {
            r.start <= label.range.start && label.range.start < r.end
        } else {
            r.start < label.range.end && label.range.start < r.end
        }
    };
    func.ids().filter(|&id| overlaps(func.inst(id).range)).collect()
}

/// Renders the picture as Graphviz DOT text. Deterministic for a given input.
pub(crate) fn render_dot(picture: &Picture<'_>, title: &str, max_block_insts: usize) -> String {
    let Picture { text, func, analysis, diagnostics } = *picture;
    let cfg = &analysis.cfg;

    // Marks per instruction, and the hazard paths.
    let mut marks: BTreeMap<InstId, Marks> = BTreeMap::new();
    let mut path_blocks: BTreeSet<BlockId> = BTreeSet::new();
    let mut path_edges: BTreeSet<(BlockId, BlockId)> = BTreeSet::new();
    for diagnostic in diagnostics {
        let primary = label_insts(func, &diagnostic.primary);
        for &id in &primary {
            marks
                .entry(id)
                .or_default()
                .primary
                .push((diagnostic.rule.clone(), diagnostic.primary.message.clone()));
        }
        for label in &diagnostic.secondary {
            let secondary = label_insts(func, label);
            for &id in &secondary {
                marks
                    .entry(id)
                    .or_default()
                    .secondary
                    .push((diagnostic.rule.clone(), label.message.clone()));
            }
            let (Some(&from), Some(&to)) = (secondary.first(), primary.first()) else {
                continue;
            };
            let (from, to) = (cfg.block_of(from), cfg.block_of(to));
            if let Some(path) = analysis.path_blocks(from, to) {
                path_blocks.extend(path.iter().copied());
                path_edges.extend(path.windows(2).map(|w| (w[0], w[1])));
            }
        }
    }

    let mut back_edges: BTreeSet<(BlockId, BlockId)> = BTreeSet::new();
    let mut headers: BTreeSet<BlockId> = BTreeSet::new();
    for l in analysis.loops() {
        headers.insert(l.header);
        back_edges.extend(l.latches.iter().map(|&latch| (latch, l.header)));
    }

    let mut out = String::new();
    let _ = writeln!(out, "digraph {} {{", dot_string(&format!("cfg {}", func.name)));
    let _ = writeln!(
        out,
        "  graph [label={}, labelloc=t, fontname=\"Helvetica\", rankdir=TB];",
        dot_string(title)
    );
    let _ = writeln!(out, "  node [shape=plain, fontname=\"Courier\", fontsize=10];");
    let _ = writeln!(out, "  edge [fontname=\"Helvetica\", fontsize=9];");

    for block in cfg.block_ids() {
        let on_path = path_blocks.contains(&block);
        let (border, color, fill) =
            if on_path { (3, PATH_INK, PATH_FILL) } else { (1, "#000000", "#ffffff") };
        let mut label = format!(
            "<TABLE BORDER=\"{border}\" COLOR=\"{color}\" BGCOLOR=\"{fill}\" CELLBORDER=\"0\" \
             CELLSPACING=\"0\" CELLPADDING=\"2\">"
        );
        let mut heading = format!("B{}", block.0);
        if block.0 == 0 {
            heading.push_str(" (entry)");
        }
        if headers.contains(&block) {
            heading.push_str(" (loop header)");
        }
        if on_path {
            heading.push_str(" (hazard path)");
        }
        let _ = write!(
            label,
            "<TR><TD ALIGN=\"LEFT\" BGCOLOR=\"{HEADER_FILL}\"><B>{}</B></TD></TR>",
            html(&heading)
        );
        let ids: Vec<InstId> = cfg.block(block).ids().collect();
        let shown = shown_rows(&ids, &marks, max_block_insts);
        let mut hidden = 0usize;
        for (i, &id) in ids.iter().enumerate() {
            if !shown[i] {
                hidden += 1;
                continue;
            }
            if hidden > 0 {
                push_ellipsis(&mut label, hidden);
                hidden = 0;
            }
            push_inst(&mut label, text, func, id, marks.get(&id));
        }
        if hidden > 0 {
            push_ellipsis(&mut label, hidden);
        }
        if ids.is_empty() {
            label.push_str("<TR><TD ALIGN=\"LEFT\"><I>(empty)</I></TD></TR>");
        }
        label.push_str("</TABLE>");
        let _ = writeln!(out, "  b{} [label=<{label}>];", block.0);
    }

    for (from, to, kind) in cfg.edges() {
        let mut attrs = vec![format!(
            "label={}",
            dot_string(match kind {
                EdgeKind::Branch => "branch",
                EdgeKind::Fallthrough => "fallthrough",
            })
        )];
        if back_edges.contains(&(from, to)) {
            attrs.push("style=dashed".to_owned());
            attrs.push("constraint=false".to_owned());
        }
        if path_edges.contains(&(from, to)) {
            attrs.push(format!("color=\"{PATH_INK}\""));
            attrs.push(format!("fontcolor=\"{PATH_INK}\""));
            attrs.push("penwidth=2.5".to_owned());
        }
        let _ = writeln!(out, "  b{} -> b{} [{}];", from.0, to.0, attrs.join(", "));
    }

    // The findings, listed once in a note beside the graph.
    let mut legend =
        String::from("<TABLE BORDER=\"1\" CELLBORDER=\"0\" CELLSPACING=\"0\" CELLPADDING=\"2\">");
    let _ = write!(
        legend,
        "<TR><TD ALIGN=\"LEFT\" BGCOLOR=\"{HEADER_FILL}\"><B>{}</B></TD></TR>",
        html(&match diagnostics.len() {
            0 => "no findings".to_owned(),
            1 => "1 finding".to_owned(),
            n => format!("{n} findings"),
        })
    );
    for diagnostic in diagnostics {
        let _ = write!(
            legend,
            "<TR><TD ALIGN=\"LEFT\"><FONT COLOR=\"{PRIMARY_INK}\">{}[{}]</FONT> {}</TD></TR>",
            html(diagnostic.severity.as_str()),
            html(&diagnostic.rule),
            html(&truncate(&diagnostic.message, 100))
        );
    }
    if !diagnostics.is_empty() {
        let _ = write!(
            legend,
            "<TR><TD ALIGN=\"LEFT\"><FONT COLOR=\"{PRIMARY_INK}\">red</FONT>: primary, \
             <FONT COLOR=\"{SECONDARY_INK}\">orange</FONT>: secondary, bold red: hazard path, \
             dashed: loop back edge</TD></TR>"
        );
    }
    legend.push_str("</TABLE>");
    let _ = writeln!(out, "  findings [label=<{legend}>, fontname=\"Helvetica\"];");
    out.push_str("}\n");
    out
}

/// Which rows of a block are listed: the first and last instructions up to the limit, and every
/// marked instruction.
fn shown_rows(ids: &[InstId], marks: &BTreeMap<InstId, Marks>, max: usize) -> Vec<bool> {
    let n = ids.len();
    if n <= max {
        return vec![true; n];
    }
    let head = max.div_ceil(2);
    let tail = max - head;
    ids.iter()
        .enumerate()
        .map(|(i, id)| i < head || i >= n - tail || marks.contains_key(id))
        .collect()
}

fn push_ellipsis(label: &mut String, hidden: usize) {
    let noun = if hidden == 1 { "instruction" } else { "instructions" };
    let _ = write!(label, "<TR><TD ALIGN=\"LEFT\"><I>… {hidden} more {noun}</I></TD></TR>");
}

fn push_inst(label: &mut String, text: &str, func: &Function, id: InstId, marks: Option<&Marks>) {
    let inst = func.inst(id);
    let mut line = String::new();
    if let Some(address) = inst.sass_address {
        let _ = write!(line, "/*{address:04x}*/ ");
    }
    line.push_str(&truncate(&inst_text(text, inst.range, &inst.opcode), MAX_INST_CHARS));
    let Some(marks) = marks else {
        let _ = write!(label, "<TR><TD ALIGN=\"LEFT\">{}</TD></TR>", html(&line));
        return;
    };
    let fill = if marks.primary.is_empty() { SECONDARY_FILL } else { PRIMARY_FILL };
    let _ = write!(label, "<TR><TD ALIGN=\"LEFT\" BGCOLOR=\"{fill}\"><B>{}</B>", html(&line));
    for (rule, message, ink) in marks
        .primary
        .iter()
        .map(|(r, m)| (r, m, PRIMARY_INK))
        .chain(marks.secondary.iter().map(|(r, m)| (r, m, SECONDARY_INK)))
    {
        let _ = write!(
            label,
            "<BR ALIGN=\"LEFT\"/><FONT COLOR=\"{ink}\">  ◀ [{}] {}</FONT>",
            html(rule),
            html(&truncate(message, MAX_NOTE_CHARS))
        );
    }
    label.push_str("<BR ALIGN=\"LEFT\"/></TD></TR>");
}

/// The instruction's text without comments, SASS address prefixes and encodings, with runs of
/// white space collapsed; the opcode when the range holds nothing else.
fn inst_text(text: &str, range: TextRange, opcode: &str) -> String {
    let raw = text.get(range.to_usize()).unwrap_or("");
    let mut cleaned = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(open) = rest.find("/*") {
        cleaned.push_str(&rest[..open]);
        rest = rest[open + 2..].find("*/").map_or("", |close| &rest[open + 2 + close + 2..]);
    }
    cleaned.push_str(rest);
    let cleaned = cleaned.split("//").next().unwrap_or("");
    let collapsed = cleaned.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.is_empty() { opcode.to_owned() } else { collapsed }
}

/// At most `max` characters; longer text ends in an ellipsis.
fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// Escapes text for a Graphviz HTML-like label.
fn html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\r' | '\t' => out.push(' '),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// A quoted DOT string.
fn dot_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' | '\r' | '\t' => out.push(' '),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The `dot` program on `PATH`, by absolute path.
fn find_dot() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).filter(|dir| dir.is_absolute()).find_map(|dir| {
        let candidate = dir.join("dot");
        is_executable(&candidate).then_some(candidate)
    })
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}

/// Renders DOT text to SVG with `dot -Tsvg`: by absolute path, an argument vector, no shell,
/// and a deadline after which the program is killed.
fn render_svg(dot: &str, timeout: Duration) -> Result<String, String> {
    let Some(program) = find_dot() else {
        return Err(
            "`--format svg` needs the Graphviz `dot` program, which is not on PATH; install the \
             `graphviz` package (for example `apt-get install graphviz` or `brew install \
             graphviz`), or use `--format dot` and render the text elsewhere"
                .to_owned(),
        );
    };
    let mut child = Command::new(&program)
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|err| format!("cannot run `{}`: {err}", program.display()))?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let input = dot.as_bytes().to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf);
        buf
    });
    let errors = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf);
        buf.truncate(16 * 1024);
        buf
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "`{}` did not finish within {}s (raise --dot-timeout)",
                    program.display(),
                    timeout.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(err) => return Err(format!("waiting for `{}`: {err}", program.display())),
        }
    };
    let _ = writer.join();
    let svg = reader.join().unwrap_or_default();
    let errors = errors.join().unwrap_or_default();
    if !status.success() {
        return Err(format!(
            "`{} -Tsvg` failed ({status}): {}",
            program.display(),
            String::from_utf8_lossy(&errors).trim()
        ));
    }
    String::from_utf8(svg).map_err(|_| format!("`{}` wrote invalid UTF-8", program.display()))
}

#[cfg(test)]
mod tests {
    use super::{dot_string, html, inst_text, truncate};
    use fencelint_source::TextRange;

    #[test]
    fn labels_are_escaped() {
        assert_eq!(html("a<b>&\"c'\n"), "a&lt;b&gt;&amp;&quot;c&#39; ");
        assert_eq!(dot_string("k \"x\" \\ y\n"), "\"k \\\"x\\\" \\\\ y \"");
    }

    #[test]
    fn instruction_text_drops_comments_and_encodings() {
        let text = "/*0040*/  LDG.E R0, desc[UR4][R2.64] ;   /* 0x0000000402007981 */";
        let range = TextRange::from_usize(0, text.len());
        assert_eq!(inst_text(text, range, "LDG"), "LDG.E R0, desc[UR4][R2.64] ;");
        let ptx = "ld.global.u32 %r2, [%rd2]; // expect: x";
        assert_eq!(
            inst_text(ptx, TextRange::from_usize(0, ptx.len()), "ld"),
            "ld.global.u32 %r2, [%rd2];"
        );
        assert_eq!(inst_text("", TextRange::from_usize(0, 0), "ret"), "ret");
    }

    #[test]
    fn truncation_is_by_characters() {
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("◀◀◀", 3), "◀◀◀");
    }
}
