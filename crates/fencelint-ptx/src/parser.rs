//! The statement splitter and module driver: finds where items and statements start and end,
//! hands each to the grammar, and turns failures into `Unknown` nodes and errors.
//!
//! The driver is one loop per level (module, function body, section) with no recursion, and
//! every step consumes input, so time is linear in the input and no input can overflow the
//! stack.

use fencelint_source::TextRange;

use crate::ast::{
    Directive, Function, FunctionKind, Label, Linkage, Module, ModuleItem, ParseError, Parsed,
    Section, Statement, Unknown,
};
use crate::grammar::{self, Cx, Expected};
use crate::scan::{
    self, LineChecks, balanced_block_end, ident_end, is_ident_start, label_end, line_end,
    next_char, recovery_end, skip_trivia, statement_end,
};

/// At most this many errors are kept; one more says that the rest were dropped.
pub(crate) const MAX_ERRORS: usize = 10_000;
/// Scopes nested deeper than this inside a function are reported (and still parsed).
pub(crate) const MAX_SCOPE_DEPTH: u32 = 1_000;

/// A function found by [`crate::split_functions`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionSpan<'a> {
    pub name: &'a str,
    pub kind: FunctionKind,
    /// From the first header word to the closing `}` (or `;`) included.
    pub range: TextRange,
    pub has_body: bool,
}

impl FunctionSpan<'_> {
    /// Whether the function is a kernel (`.entry`).
    pub fn is_kernel(&self) -> bool {
        self.kind == FunctionKind::Entry
    }
}

pub(crate) struct Parser<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
    cx: Cx,
    base: u32,
    errors: Vec<ParseError>,
    /// Only find function boundaries; build no statements.
    skim: bool,
    spans: Vec<FunctionSpan<'a>>,
}

/// Words that start a module-scope item and so cannot appear inside a function body.
fn starts_module_item(word: &str) -> bool {
    matches!(
        word,
        "entry"
            | "func"
            | "visible"
            | "weak"
            | "common"
            | "version"
            | "target"
            | "address_size"
            | "section"
            | "file"
    )
}

/// The words of a module-scope variable declaration.
fn is_module_space(word: &str) -> bool {
    matches!(
        word,
        "global"
            | "const"
            | "shared"
            | "local"
            | "tex"
            | "texref"
            | "samplerref"
            | "surfref"
            | "param"
            | "reg"
    )
}

/// A short, printable description of what starts at `text`, for messages.
fn found(text: &str) -> String {
    let text = text.trim_start();
    if text.is_empty() {
        return "the end of the statement".to_owned();
    }
    let token: String = text
        .chars()
        .take_while(|c| !c.is_whitespace())
        .take(24)
        .flat_map(char::escape_default)
        .collect();
    if token.is_empty() { "whitespace".to_owned() } else { format!("`{token}`") }
}

impl<'a> Parser<'a> {
    pub(crate) fn new(src: &'a str, base: u32) -> Self {
        Self {
            src,
            bytes: src.as_bytes(),
            pos: 0,
            cx: Cx::new(src, base),
            base,
            errors: Vec::new(),
            skim: false,
            spans: Vec::new(),
        }
    }

    pub(crate) fn skimming(mut self) -> Self {
        self.skim = true;
        self
    }

    fn range(&self, start: usize, end: usize) -> TextRange {
        self.cx.span(start, end)
    }

    fn error(&mut self, start: usize, end: usize, message: impl Into<String>) {
        if self.skim {
            return;
        }
        if self.errors.len() < MAX_ERRORS {
            let range = self.range(start, end.max(start));
            self.errors.push(ParseError { range, message: message.into() });
        } else if self.errors.len() == MAX_ERRORS {
            let range = self.range(start, start);
            let message = format!("more than {MAX_ERRORS} parse errors; the rest are not reported");
            self.errors.push(ParseError { range, message });
        }
    }

    /// Reports a grammar failure inside the statement `start..end`.
    fn expected_error(&mut self, expected: &Expected<'a>, start: usize, end: usize, item: &str) {
        let at = if expected.at.is_empty() && !self.src.is_empty() {
            end
        } else {
            self.cx.offset(expected.at).clamp(start, end.max(start))
        };
        let what = if expected.what.is_empty() { "valid syntax" } else { expected.what };
        let found_text = self.src.get(at..end).unwrap_or("");
        // The offending token, at most 64 bytes, ending on a character boundary.
        let token_len = found_text
            .char_indices()
            .take_while(|&(offset, c)| !c.is_whitespace() && offset < 64)
            .last()
            .map_or(0, |(offset, c)| offset + c.len_utf8());
        let message = format!("expected {what} in {item}, found {}", found(found_text));
        self.error(at, at + token_len, message);
    }

    fn unterminated_comment(&mut self, start: Option<usize>) {
        if let Some(start) = start {
            self.error(start, self.bytes.len(), "unterminated block comment: expected `*/`");
        }
    }

    /// Skips trivia at module scope.
    fn skip_trivia(&mut self) {
        let (pos, trivia) = skip_trivia(self.bytes, self.pos, |_, _| {});
        self.pos = pos;
        self.unterminated_comment(trivia.unterminated_comment);
    }

    /// The dotted word at `pos` (which holds a `.`).
    fn word_at(&self, pos: usize) -> &'a str {
        let end = ident_end(self.bytes, pos + 1).max(pos + 1);
        let end = if self.bytes.get(pos + 1).is_some_and(|&b| b.is_ascii_digit()) {
            // `.5` is not a directive word.
            pos + 1
        } else {
            end
        };
        &self.src[pos + 1..end]
    }

    /// Whether the directive words starting at `pos` are linkage words then `.entry`/`.func`.
    fn leads_to_function(&self, mut pos: usize) -> bool {
        loop {
            pos = skip_trivia(self.bytes, pos, |_, _| {}).0;
            if self.bytes.get(pos) != Some(&b'.') {
                return false;
            }
            let word = self.word_at(pos);
            if word == "entry" || word == "func" {
                return true;
            }
            if Linkage::from_word(word).is_none() {
                return false;
            }
            pos += 1 + word.len();
        }
    }

    pub(crate) fn parse_module(mut self) -> (Parsed<Module<'a>>, Vec<FunctionSpan<'a>>) {
        let mut items = Vec::new();
        loop {
            self.skip_trivia();
            if self.pos >= self.bytes.len() {
                break;
            }
            let start = self.pos;
            match self.bytes[start] {
                b'.' => self.module_directive(&mut items),
                b';' => self.pos += 1,
                b'}' => {
                    self.pos += 1;
                    self.module_unknown(&mut items, start, start + 1, || {
                        "unmatched `}` at module scope".to_owned()
                    });
                }
                b'{' => {
                    let end = balanced_block_end(self.bytes, start);
                    self.pos = end;
                    self.module_unknown(&mut items, start, end, || {
                        "expected a directive or a function at module scope, found a `{` block"
                            .to_owned()
                    });
                }
                _ => {
                    let end = recovery_end(self.src, start);
                    self.pos = end;
                    let src = self.src;
                    self.module_unknown(&mut items, start, end, || {
                        format!(
                            "expected a directive (`.version`, `.target`, a variable or a function) at module scope, found {}",
                            found(&src[start..end])
                        )
                    });
                }
            }
        }
        let module = Module { source: self.src, base: self.base, items };
        (Parsed { value: module, errors: self.errors }, self.spans)
    }

    /// Records an unparsable stretch at module scope, merging it into a directly preceding one.
    fn module_unknown(
        &mut self,
        items: &mut Vec<ModuleItem<'a>>,
        start: usize,
        end: usize,
        message: impl FnOnce() -> String,
    ) {
        if self.skim {
            return;
        }
        if let Some(ModuleItem::Unknown(previous)) = items.last_mut() {
            let previous_start = (previous.range.start - self.base) as usize;
            previous.range = self.range(previous_start, end);
            previous.text = &self.src[previous_start..end];
            return;
        }
        self.error(start, end, message());
        items.push(ModuleItem::Unknown(Unknown {
            text: &self.src[start..end],
            range: self.range(start, end),
        }));
    }

    fn module_directive(&mut self, items: &mut Vec<ModuleItem<'a>>) {
        let start = self.pos;
        let word = self.word_at(start);
        match word {
            "version" | "target" | "address_size" | "file" | "loc" => {
                self.line_directive(items, word);
            }
            "section" => self.section(items),
            "entry" | "func" => self.function(items),
            _ if Linkage::from_word(word).is_some() && self.leads_to_function(start) => {
                self.function(items);
            }
            _ if Linkage::from_word(word).is_some() || is_module_space(word) => {
                let end = statement_end(self.bytes, start, LineChecks::Statements);
                self.pos = past(self.src, end.next, start);
                self.unterminated_comment(end.unterminated_comment);
                if self.skim {
                    return;
                }
                let text = &self.src[start..end.end];
                match grammar::var_decl(self.cx, text, false) {
                    Ok((rest, decl)) if rest.trim_start().is_empty() || only_comments(rest) => {
                        if !end.terminated {
                            self.error(end.end, end.end, "expected `;` after the declaration");
                        }
                        items.push(ModuleItem::Variable(decl));
                    }
                    Ok((rest, _)) => {
                        let expected =
                            Expected { at: rest, what: "`,`, `=` or `;` in the declaration" };
                        self.module_item_failed(items, &expected, start, end.end, end.next);
                    }
                    Err(err) => {
                        let expected = grammar::into_expected(err);
                        self.module_item_failed(items, &expected, start, end.end, end.next);
                    }
                }
            }
            _ => {
                let end = statement_end(self.bytes, start, LineChecks::Statements);
                self.pos = past(self.src, end.next, start);
                self.unterminated_comment(end.unterminated_comment);
                if self.skim {
                    return;
                }
                match self.generic_directive(start, end.end, None) {
                    Ok(directive) => items.push(ModuleItem::Directive(directive)),
                    Err(expected) => {
                        self.module_item_failed(items, &expected, start, end.end, end.next);
                    }
                }
            }
        }
    }

    fn module_item_failed(
        &mut self,
        items: &mut Vec<ModuleItem<'a>>,
        expected: &Expected<'a>,
        start: usize,
        end: usize,
        next: usize,
    ) {
        self.expected_error(expected, start, end, "a module-scope declaration");
        items.push(ModuleItem::Unknown(Unknown {
            text: &self.src[start..next],
            range: self.range(start, next),
        }));
    }

    /// A directive kept generically; its arguments are operands when they parse as such.
    fn generic_directive(
        &self,
        start: usize,
        end: usize,
        label: Option<Label<'a>>,
    ) -> Result<Directive<'a>, Expected<'a>> {
        let text = &self.src[start..end];
        let word = self.word_at(start);
        if word.is_empty() {
            return Err(Expected { at: &text[1..], what: "a directive name after `.`" });
        }
        let known_args = matches!(
            word,
            "pragma"
                | "branchtargets"
                | "calltargets"
                | "maxntid"
                | "reqntid"
                | "minnctapersm"
                | "maxnctapersm"
                | "maxnreg"
                | "reqnctapercluster"
                | "maxclusterrank"
                | "alias"
        );
        let range_start =
            label.as_ref().map_or(start, |label| (label.range.start - self.base) as usize);
        match grammar::directive(self.cx, text, label.clone(), true) {
            Ok((rest, mut directive)) if rest.trim_start().is_empty() || only_comments(rest) => {
                directive.range = self.range(range_start, end);
                Ok(directive)
            }
            Ok((rest, _)) if known_args => {
                Err(Expected { at: rest, what: "`,` between arguments" })
            }
            Err(err) if known_args => Err(grammar::into_expected(err)),
            _ => {
                // A directive whose arguments are not operands (`.callprototype`): keep the text.
                let name_end = start + 1 + word.len();
                let directive = Directive {
                    label,
                    name: word,
                    args: Vec::new(),
                    text: self.src[name_end..end].trim(),
                    range: self.range(range_start, end),
                };
                Ok(directive)
            }
        }
    }

    /// `.version`, `.target`, `.address_size`, `.file`, `.loc`: they end at the line end.
    fn line_directive(&mut self, items: &mut Vec<ModuleItem<'a>>, word: &str) {
        let start = self.pos;
        let end = line_end(self.bytes, start);
        self.pos = end.max(start + 1);
        if self.skim {
            return;
        }
        let text = &self.src[start..end];
        let cx = self.cx;
        let result = match word {
            "version" => grammar::version(cx, text).map(|(rest, v)| (rest, ModuleItem::Version(v))),
            "target" => grammar::target(cx, text).map(|(rest, t)| (rest, ModuleItem::Target(t))),
            "address_size" => grammar::address_size(text).map(|(rest, bits)| {
                (rest, ModuleItem::AddressSize { bits, range: self.cx.range(text, rest) })
            }),
            "file" => grammar::file(cx, text).map(|(rest, f)| (rest, ModuleItem::File(f))),
            _ => grammar::loc(cx, text).map(|(rest, loc)| {
                let directive = Directive {
                    label: None,
                    name: "loc",
                    args: Vec::new(),
                    text: text[4..].trim(),
                    range: loc.range,
                };
                (rest, ModuleItem::Directive(directive))
            }),
        };
        match result {
            Ok((rest, item)) if is_line_rest(rest) => items.push(item),
            Ok((rest, _)) => {
                let expected = Expected { at: rest, what: "the end of the line" };
                self.module_item_failed(items, &expected, start, end, end);
            }
            Err(err) => {
                let expected = grammar::into_expected(err);
                self.module_item_failed(items, &expected, start, end, end);
            }
        }
    }

    /// `.section name { label: .b8 1, 2 ... }`: data lines, each ended by a line break or `;`.
    fn section(&mut self, items: &mut Vec<ModuleItem<'a>>) {
        let start = self.pos;
        let header_end = line_end(self.bytes, start);
        let mut name_start = start + ".section".len();
        while name_start < header_end && matches!(self.bytes[name_start], b' ' | b'\t') {
            name_start += 1;
        }
        let mut name_end = name_start;
        while name_end < header_end
            && !scan::is_space(self.bytes[name_end])
            && self.bytes[name_end] != b'{'
        {
            name_end += 1;
        }
        let name = &self.src[name_start..name_end];
        let open = skip_trivia(self.bytes, name_end, |_, _| {}).0;
        if self.bytes.get(open) != Some(&b'{') {
            // A section switch without a block: keep it as a directive.
            self.pos = header_end.max(start + 1);
            if !self.skim {
                let directive = Directive {
                    label: None,
                    name: "section",
                    args: Vec::new(),
                    text: name,
                    range: self.range(start, header_end),
                };
                items.push(ModuleItem::Directive(directive));
            }
            return;
        }
        let mut statements = Vec::new();
        let mut pos = open + 1;
        let close = loop {
            let (next, trivia) = skip_trivia(self.bytes, pos, |_, _| {});
            self.unterminated_comment(trivia.unterminated_comment);
            pos = next;
            let Some(&b) = self.bytes.get(pos) else {
                self.error(open, open + 1, format!("expected `}}` closing section `{name}`"));
                break pos;
            };
            match b {
                b'}' => break pos + 1,
                b';' => pos += 1,
                _ if is_ident_start(b) && label_end(self.bytes, pos).is_some() => {
                    let end = label_end(self.bytes, pos).unwrap_or(pos + 1);
                    let label_name = &self.src[pos..ident_end(self.bytes, pos)];
                    statements.push(Statement::Label(Label {
                        name: label_name,
                        range: self.range(pos, end),
                    }));
                    pos = end;
                }
                _ => {
                    // One data line (or up to a `;` or `}` on it).
                    let stop = scan::data_line_end(self.bytes, pos);
                    let end = past(self.src, stop, pos);
                    if !self.skim {
                        self.section_line(&mut statements, pos, end);
                    }
                    pos = end;
                }
            }
        };
        self.pos = close;
        if !self.skim {
            items.push(ModuleItem::Section(Section {
                name,
                statements,
                range: self.range(start, close),
            }));
        }
    }

    fn section_line(&mut self, statements: &mut Vec<Statement<'a>>, start: usize, end: usize) {
        let text = &self.src[start..end];
        if text.starts_with('.')
            && let Ok(directive) = self.generic_directive(start, end, None)
        {
            statements.push(Statement::Directive(directive));
            return;
        }
        self.error(
            start,
            end,
            format!("expected a data directive or a label in the section, found {}", found(text)),
        );
        statements.push(Statement::Unknown(Unknown { text, range: self.range(start, end) }));
    }

    /// `[linkage] .entry|.func ...` with its directives and body (or `;`).
    fn function(&mut self, items: &mut Vec<ModuleItem<'a>>) {
        let start = self.pos;
        let header = match grammar::function_header(self.cx, &self.src[start..]) {
            Ok((rest, header)) => {
                self.pos = self.cx.offset(rest);
                header
            }
            Err(err) => {
                let expected = grammar::into_expected(err);
                // Skip the header up to its body (or `;`), and the body with it.
                let mut end = statement_end(self.bytes, start, LineChecks::None);
                let open = self.src[start..end.end].find('{').map(|offset| start + offset);
                let stop = if let Some(open) = open {
                    balanced_block_end(self.bytes, open)
                } else {
                    if !end.terminated {
                        end.next = past(self.src, end.end, start);
                    }
                    end.next
                };
                self.pos = past(self.src, stop, start);
                if !self.skim {
                    let error_end = open.unwrap_or(end.end);
                    self.expected_error(&expected, start, error_end, "a function header");
                    let stop = self.pos;
                    items.push(ModuleItem::Unknown(Unknown {
                        text: &self.src[start..stop],
                        range: self.range(start, stop),
                    }));
                }
                return;
            }
        };
        let name_range = self.cx.range_of(header.name);
        let mut directives = Vec::new();
        let mut body = None;
        let mut end_pos;
        loop {
            self.skip_trivia();
            end_pos = self.pos;
            let Some(&b) = self.bytes.get(self.pos) else {
                let message =
                    format!("expected `{{` or `;` after the signature of `{}`", header.name);
                self.error(self.pos, self.pos, message);
                break;
            };
            match b {
                b'{' => {
                    let open = self.pos;
                    let statements = self.body(header.name, open);
                    end_pos = self.pos;
                    body = Some(statements);
                    break;
                }
                b';' => {
                    self.pos += 1;
                    end_pos = self.pos;
                    break;
                }
                b'.' if !starts_module_item(self.word_at(self.pos))
                    && !is_module_space(self.word_at(self.pos))
                    && self.word_at(self.pos) != "extern" =>
                {
                    let directive_start = self.pos;
                    match grammar::directive(self.cx, &self.src[directive_start..], None, false) {
                        Ok((rest, directive)) => {
                            self.pos = self.cx.offset(rest);
                            // `.pragma "nounroll";` ends with `;`.
                            let after = skip_trivia(self.bytes, self.pos, |_, _| {}).0;
                            if self.bytes.get(after) == Some(&b';') && directive.name == "pragma" {
                                self.pos = after + 1;
                            }
                            directives.push(directive);
                        }
                        Err(err) => {
                            let expected = grammar::into_expected(err);
                            let end = line_end(self.bytes, directive_start);
                            self.expected_error(
                                &expected,
                                directive_start,
                                end,
                                "a performance directive",
                            );
                            self.pos = end.max(directive_start + 1);
                        }
                    }
                }
                _ => {
                    let message = format!(
                        "expected `{{` or `;` after the signature of `{}`, found {}",
                        header.name,
                        found(&self.src[self.pos..line_end(self.bytes, self.pos)])
                    );
                    self.error(self.pos, self.pos, message);
                    break;
                }
            }
        }
        let range = self.range(start, end_pos);
        if self.skim {
            self.spans.push(FunctionSpan {
                name: header.name,
                kind: header.kind,
                range,
                has_body: body.is_some(),
            });
            return;
        }
        items.push(ModuleItem::Function(Function {
            kind: header.kind,
            linkage: header.linkage,
            name: header.name,
            name_range,
            returns: header.returns,
            params: header.params,
            directives,
            body,
            range,
        }));
    }

    /// Pushes an unparsable statement, merging it into a directly preceding one.
    fn push_unknown(
        &mut self,
        statements: &mut Vec<Statement<'a>>,
        start: usize,
        end: usize,
        report: impl FnOnce(&mut Self),
    ) {
        if let Some(Statement::Unknown(previous)) = statements.last_mut() {
            let previous_start = (previous.range.start - self.base) as usize;
            previous.range = self.range(previous_start, end);
            previous.text = &self.src[previous_start..end];
            return;
        }
        report(self);
        statements.push(Statement::Unknown(Unknown {
            text: &self.src[start..end],
            range: self.range(start, end),
        }));
    }

    /// The statements of a body whose `{` is at `open`; leaves `pos` past the closing `}`.
    fn body(&mut self, function_name: &str, open: usize) -> Vec<Statement<'a>> {
        let mut statements = Vec::new();
        self.body_into(&mut statements, function_name, open);
        statements
    }

    fn body_into(&mut self, statements: &mut Vec<Statement<'a>>, function_name: &str, open: usize) {
        let src = self.src;
        let bytes = self.bytes;
        let cx = self.cx;
        let mut depth = 0u32;
        let mut depth_reported = false;
        self.pos = open + 1;
        loop {
            let skim = self.skim;
            let (pos, trivia) = skip_trivia(bytes, self.pos, |start, end| {
                if skim {
                    return;
                }
                let comment = src[start + 2..end].trim_start();
                if comment.starts_with("begin inline asm") {
                    statements.push(Statement::InlineAsmBegin(cx.span(start, end)));
                } else if comment.starts_with("end inline asm") {
                    statements.push(Statement::InlineAsmEnd(cx.span(start, end)));
                }
            });
            self.pos = pos;
            self.unterminated_comment(trivia.unterminated_comment);
            let Some(&b) = bytes.get(pos) else {
                let message = format!("expected `}}` closing the body of `{function_name}`");
                self.error(open, open + 1, message);
                return;
            };
            match b {
                b'{' => {
                    depth += 1;
                    if depth > MAX_SCOPE_DEPTH && !depth_reported {
                        depth_reported = true;
                        self.error(
                            pos,
                            pos + 1,
                            format!("scopes nested deeper than {MAX_SCOPE_DEPTH} levels"),
                        );
                    }
                    if !self.skim {
                        statements.push(Statement::ScopeOpen(self.range(pos, pos + 1)));
                    }
                    self.pos += 1;
                }
                b'}' => {
                    self.pos += 1;
                    if depth == 0 {
                        return;
                    }
                    depth -= 1;
                    if !self.skim {
                        statements.push(Statement::ScopeClose(self.range(pos, pos + 1)));
                    }
                }
                b';' => self.pos += 1,
                b'.' => {
                    let word = self.word_at(pos);
                    let leaves = starts_module_item(word)
                        || (word == "extern" && self.leads_to_function(pos));
                    if leaves {
                        let message = format!(
                            "expected `}}` closing the body of `{function_name}` before this directive"
                        );
                        self.error(pos, pos + 1 + word.len(), message);
                        return;
                    }
                    self.body_directive(statements, word);
                }
                b'@' => self.instruction(statements),
                _ if is_ident_start(b) => match label_end(bytes, pos) {
                    Some(end) => self.label(statements, end),
                    None => self.instruction(statements),
                },
                _ => {
                    let end = statement_end(bytes, pos, LineChecks::StatementsAndBraces);
                    let next = past(src, end.next, pos);
                    self.pos = next;
                    if !self.skim {
                        self.push_unknown(statements, pos, next, |parser| {
                            let text = &src[pos..end.end.max(next)];
                            let message = format!(
                                "expected an instruction, a label or a directive, found {}",
                                found(text)
                            );
                            parser.error(pos, next, message);
                        });
                    }
                }
            }
        }
    }

    /// A label at `pos` whose `:` ends at `colon_end`; labels `.callprototype`,
    /// `.calltargets` and `.branchtargets` directives when one follows.
    fn label(&mut self, statements: &mut Vec<Statement<'a>>, colon_end: usize) {
        let start = self.pos;
        let name = &self.src[start..ident_end(self.bytes, start)];
        let label = Label { name, range: self.range(start, colon_end) };
        let after = skip_trivia(self.bytes, colon_end, |_, _| {}).0;
        if self.bytes.get(after) == Some(&b'.')
            && matches!(self.word_at(after), "callprototype" | "calltargets" | "branchtargets")
        {
            let end = statement_end(self.bytes, after, LineChecks::Statements);
            self.pos = end.next.max(after + 1);
            if self.skim {
                return;
            }
            if !end.terminated {
                self.error(end.end, end.end, "expected `;` after the directive");
            }
            match self.generic_directive(after, end.end, Some(label)) {
                Ok(directive) => statements.push(Statement::Directive(directive)),
                Err(expected) => {
                    let next = end.next;
                    self.push_unknown(statements, start, next, |parser| {
                        parser.expected_error(&expected, after, end.end, "a directive");
                    });
                }
            }
            return;
        }
        self.pos = colon_end;
        if !self.skim {
            statements.push(Statement::Label(label));
        }
    }

    fn instruction(&mut self, statements: &mut Vec<Statement<'a>>) {
        let start = self.pos;
        let end = statement_end(self.bytes, start, LineChecks::StatementsAndBraces);
        let next = past(self.src, end.next, start);
        self.pos = next;
        self.unterminated_comment(end.unterminated_comment);
        if self.skim {
            return;
        }
        let text = &self.src[start..end.end];
        match grammar::instruction(self.cx, text) {
            Ok(mut instruction) => {
                if end.terminated {
                    instruction.range = self.range(start, next);
                } else {
                    let trimmed = start + text.trim_end().len();
                    instruction.range = self.range(start, trimmed);
                    self.error(
                        trimmed,
                        trimmed,
                        format!("expected `;` after `{}`", instruction.opcode),
                    );
                }
                statements.push(Statement::Instruction(instruction));
            }
            Err(expected) => {
                let stop = end.end;
                self.push_unknown(statements, start, next, |parser| {
                    parser.expected_error(&expected, start, stop, "an instruction");
                });
            }
        }
    }

    fn body_directive(&mut self, statements: &mut Vec<Statement<'a>>, word: &str) {
        let start = self.pos;
        if word == "loc" {
            let end = line_end(self.bytes, start);
            self.pos = end.max(start + 1);
            if self.skim {
                return;
            }
            let text = &self.src[start..end];
            match grammar::loc(self.cx, text) {
                Ok((rest, loc)) if is_line_rest(rest) => statements.push(Statement::Loc(loc)),
                Ok((rest, _)) => {
                    let expected = Expected { at: rest, what: "the end of the line" };
                    self.push_unknown(statements, start, end, |parser| {
                        parser.expected_error(&expected, start, end, "`.loc`");
                    });
                }
                Err(err) => {
                    let expected = grammar::into_expected(err);
                    self.push_unknown(statements, start, end, |parser| {
                        parser.expected_error(&expected, start, end, "`.loc`");
                    });
                }
            }
            return;
        }
        let end = statement_end(self.bytes, start, LineChecks::Statements);
        let next = past(self.src, end.next, start);
        self.pos = next;
        self.unterminated_comment(end.unterminated_comment);
        if self.skim {
            return;
        }
        let text = &self.src[start..end.end];
        let is_decl = matches!(
            word,
            "reg" | "sreg" | "shared" | "local" | "param" | "const" | "global" | "extern" | "tex"
        );
        if !end.terminated {
            self.error(end.end, end.end, format!("expected `;` after `.{word}`"));
        }
        if is_decl {
            match grammar::var_decl(self.cx, text, false) {
                Ok((rest, decl)) if rest.trim_start().is_empty() || only_comments(rest) => {
                    statements.push(Statement::Decl(decl));
                }
                Ok((rest, _)) => {
                    let expected =
                        Expected { at: rest, what: "`,`, `=` or `;` in the declaration" };
                    self.push_unknown(statements, start, next, |parser| {
                        parser.expected_error(&expected, start, end.end, "a declaration");
                    });
                }
                Err(err) => {
                    let expected = grammar::into_expected(err);
                    self.push_unknown(statements, start, next, |parser| {
                        parser.expected_error(&expected, start, end.end, "a declaration");
                    });
                }
            }
            return;
        }
        match self.generic_directive(start, end.end, None) {
            Ok(directive) => statements.push(Statement::Directive(directive)),
            Err(expected) => {
                self.push_unknown(statements, start, next, |parser| {
                    parser.expected_error(&expected, start, end.end, "a directive");
                });
            }
        }
    }
}

/// `next` when it is past `start`, else the end of the character at `start`: every step of
/// the parser consumes input.
fn past(src: &str, next: usize, start: usize) -> usize {
    if next > start { next } else { next_char(src, start) }
}

/// Whether `rest` holds only whitespace and comments.
fn only_comments(rest: &str) -> bool {
    grammar::ws(rest).is_ok_and(|(rest, ())| rest.is_empty())
}

/// What may follow a line directive on its line: nothing, comments, or a stray `;`.
fn is_line_rest(rest: &str) -> bool {
    let rest = grammar::ws(rest).map_or(rest, |(rest, ())| rest);
    let rest = rest.strip_prefix(';').unwrap_or(rest);
    only_comments(rest)
}
