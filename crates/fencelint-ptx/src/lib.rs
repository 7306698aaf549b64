//! The PTX front end of fencelint: a zero-copy parser that never fails.
//!
//! [`parse`] reads a whole module into a [`Module`] whose nodes borrow the source text and
//! carry byte ranges. What cannot be read becomes an `Unknown` node plus a [`ParseError`], and
//! parsing resumes at the next statement, so the rest of the module is still there.
//!
//! Architecture invariants:
//! - Parsing never fails and never panics; errors are values with ranges.
//! - Time is linear in the input and recursion is bounded, whatever the input: a fast
//!   hand-written splitter finds statements (respecting comments and strings) and nom parses
//!   the pieces.
//! - Nothing is classified here: an opcode is its dotted text and tokens. Classification
//!   (state space, semantics, scope...) happens in the lowering.
//!
//! For parallel parsing, [`split_functions`] finds function boundaries cheaply and each
//! function can then be parsed on its own with [`parse_with_offset`].

mod ast;
mod grammar;
mod parser;
mod scan;

pub use ast::{
    Address, DeclName, Directive, FileEntry, Function, FunctionKind, Guard, Initializer, InlinedAt,
    Instruction, Label, Linkage, Loc, Module, ModuleItem, Operand, OperandKind, ParseError, Parsed,
    Section, Statement, Target, Unknown, VarDecl, Version, is_type_word,
};
pub use parser::FunctionSpan;

/// Parses a PTX module. Ranges are byte offsets from the start of `src`.
pub fn parse(src: &str) -> Parsed<Module<'_>> {
    parse_with_offset(src, 0)
}

/// Parses a PTX module whose text starts at byte `base` of a larger file: every range is
/// shifted by `base`.
pub fn parse_with_offset(src: &str, base: u32) -> Parsed<Module<'_>> {
    parser::Parser::new(src, base).parse_module().0
}

/// Finds the functions of a module without parsing their bodies, so that callers can parse
/// them in parallel (`parse_with_offset(&src[span.range.to_usize()], span.range.start)`).
/// The spans are the same as [`parse`] gives to the functions.
pub fn split_functions(src: &str) -> Vec<FunctionSpan<'_>> {
    parser::Parser::new(src, 0).skimming().parse_module().1
}

/// Counts of what a module holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Functions with a body.
    pub functions: usize,
    /// Functions declared without a body.
    pub declarations: usize,
    /// Statements in function bodies (instructions, labels, declarations, directives...).
    pub statements: usize,
    pub instructions: usize,
    /// `Unknown` nodes, in bodies and at module scope.
    pub unknown: usize,
}

impl std::ops::AddAssign for Stats {
    fn add_assign(&mut self, other: Self) {
        self.functions += other.functions;
        self.declarations += other.declarations;
        self.statements += other.statements;
        self.instructions += other.instructions;
        self.unknown += other.unknown;
    }
}

/// Counts the functions, statements, instructions and unknown nodes of a module.
pub fn stats(module: &Module<'_>) -> Stats {
    let mut stats = Stats::default();
    for item in &module.items {
        match item {
            ModuleItem::Function(function) => {
                let Some(body) = &function.body else {
                    stats.declarations += 1;
                    continue;
                };
                stats.functions += 1;
                stats.statements += body.len();
                for statement in body {
                    match statement {
                        Statement::Instruction(_) => stats.instructions += 1,
                        Statement::Unknown(_) => stats.unknown += 1,
                        _ => {}
                    }
                }
            }
            ModuleItem::Section(section) => {
                let unknown =
                    section.statements.iter().filter(|s| matches!(s, Statement::Unknown(_)));
                stats.unknown += unknown.count();
            }
            ModuleItem::Unknown(_) => stats.unknown += 1,
            _ => {}
        }
    }
    stats
}
