//! The PTX syntax tree: nodes borrow the source text (`&'a str`) and carry byte ranges.
//!
//! Nothing is classified here: an opcode is its dotted text and its tokens, a declaration is
//! its dotted words. Meaning is given later, by the lowering into the IR.

use fencelint_source::TextRange;

/// A parse result: the value is always there, the errors say what could not be read.
#[derive(Clone, Debug, PartialEq)]
pub struct Parsed<T> {
    pub value: T,
    pub errors: Vec<ParseError>,
}

/// One problem found while parsing, with the range it covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub range: TextRange,
    /// Lowercase, no trailing period; says what was expected.
    pub message: String,
}

/// One PTX module: the top-level items in source order.
#[derive(Clone, Debug, PartialEq)]
pub struct Module<'a> {
    /// The text that was parsed.
    pub source: &'a str,
    /// The offset added to every range (0 unless the caller asked for another).
    pub base: u32,
    pub items: Vec<ModuleItem<'a>>,
}

impl<'a> Module<'a> {
    /// The source text that `range` (as stored in this module) covers; empty when out of range.
    pub fn text(&self, range: TextRange) -> &'a str {
        let start = range.start.saturating_sub(self.base) as usize;
        let end = range.end.saturating_sub(self.base) as usize;
        self.source.get(start..end).unwrap_or("")
    }

    /// The functions (`.entry` and `.func`, with and without body) in source order.
    pub fn functions(&self) -> impl Iterator<Item = &Function<'a>> + '_ {
        self.items.iter().filter_map(|item| match item {
            ModuleItem::Function(function) => Some(function),
            _ => None,
        })
    }

    /// The first function with this name that has a body, else the first declaration.
    pub fn function(&self, name: &str) -> Option<&Function<'a>> {
        let mut declaration = None;
        for function in self.functions().filter(|f| f.name == name) {
            if function.body.is_some() {
                return Some(function);
            }
            declaration.get_or_insert(function);
        }
        declaration
    }

    pub fn version(&self) -> Option<&Version<'a>> {
        self.items.iter().find_map(|item| match item {
            ModuleItem::Version(version) => Some(version),
            _ => None,
        })
    }

    pub fn target(&self) -> Option<&Target<'a>> {
        self.items.iter().find_map(|item| match item {
            ModuleItem::Target(target) => Some(target),
            _ => None,
        })
    }

    pub fn address_size(&self) -> Option<u32> {
        self.items.iter().find_map(|item| match item {
            ModuleItem::AddressSize { bits, .. } => Some(*bits),
            _ => None,
        })
    }

    /// The `.file` table entries in source order.
    pub fn files(&self) -> impl Iterator<Item = &FileEntry<'a>> + '_ {
        self.items.iter().filter_map(|item| match item {
            ModuleItem::File(file) => Some(file),
            _ => None,
        })
    }

    /// The name that `.file` gave to file id `id` (as written, without quotes).
    pub fn file_name(&self, id: u32) -> Option<&'a str> {
        self.files().find(|file| file.id == id).map(|file| file.name)
    }

    /// Module-scope variables (`.global`, `.const`, `.shared`, ...).
    pub fn variables(&self) -> impl Iterator<Item = &VarDecl<'a>> + '_ {
        self.items.iter().filter_map(|item| match item {
            ModuleItem::Variable(variable) => Some(variable),
            _ => None,
        })
    }
}

/// A top-level item.
#[derive(Clone, Debug, PartialEq)]
pub enum ModuleItem<'a> {
    Version(Version<'a>),
    Target(Target<'a>),
    AddressSize {
        bits: u32,
        range: TextRange,
    },
    File(FileEntry<'a>),
    Variable(VarDecl<'a>),
    Function(Function<'a>),
    Section(Section<'a>),
    /// Any other directive (`.pragma`, `.alias`, a module-scope `.loc`...).
    Directive(Directive<'a>),
    Unknown(Unknown<'a>),
}

impl ModuleItem<'_> {
    pub fn range(&self) -> TextRange {
        match self {
            Self::Version(version) => version.range,
            Self::Target(target) => target.range,
            Self::AddressSize { range, .. } => *range,
            Self::File(file) => file.range,
            Self::Variable(variable) => variable.range,
            Self::Function(function) => function.range,
            Self::Section(section) => section.range,
            Self::Directive(directive) => directive.range,
            Self::Unknown(unknown) => unknown.range,
        }
    }
}

/// `.version 9.4`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version<'a> {
    pub major: u32,
    pub minor: u32,
    /// As written, for example `9.4`.
    pub text: &'a str,
    pub range: TextRange,
}

/// `.target sm_90a, texmode_independent`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target<'a> {
    pub names: Vec<&'a str>,
    pub range: TextRange,
}

/// `.file 1 "/src/kernel.cu", 1700000000, 4242`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileEntry<'a> {
    pub id: u32,
    /// The name between the quotes, escapes left as written.
    pub name: &'a str,
    pub timestamp: Option<u64>,
    pub size: Option<u64>,
    pub range: TextRange,
}

/// `.section .debug_str { ... }`: data directives and labels, kept but not interpreted.
#[derive(Clone, Debug, PartialEq)]
pub struct Section<'a> {
    pub name: &'a str,
    pub statements: Vec<Statement<'a>>,
    pub range: TextRange,
}

/// Where a function is visible from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Linkage {
    Visible,
    Extern,
    Weak,
    Common,
}

impl Linkage {
    pub fn from_word(word: &str) -> Option<Self> {
        match word {
            "visible" => Some(Self::Visible),
            "extern" => Some(Self::Extern),
            "weak" => Some(Self::Weak),
            "common" => Some(Self::Common),
            _ => None,
        }
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Visible => "visible",
            Self::Extern => "extern",
            Self::Weak => "weak",
            Self::Common => "common",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FunctionKind {
    /// `.entry`: a kernel.
    Entry,
    /// `.func`: a device function.
    Func,
}

/// An `.entry` or `.func`, with or without a body.
#[derive(Clone, Debug, PartialEq)]
pub struct Function<'a> {
    pub kind: FunctionKind,
    pub linkage: Option<Linkage>,
    pub name: &'a str,
    pub name_range: TextRange,
    /// The return parameters of a `.func` (`(.param .b32 func_retval0)`).
    pub returns: Vec<VarDecl<'a>>,
    pub params: Vec<VarDecl<'a>>,
    /// Performance directives between the signature and the body (`.maxntid 128, 1, 1`,
    /// `.noreturn`, `.pragma "nounroll";`...).
    pub directives: Vec<Directive<'a>>,
    /// The statements of the body; `None` for a declaration without body.
    pub body: Option<Vec<Statement<'a>>>,
    pub range: TextRange,
}

impl<'a> Function<'a> {
    pub fn is_kernel(&self) -> bool {
        self.kind == FunctionKind::Entry
    }

    /// The body statements (empty for a declaration).
    pub fn statements(&self) -> &[Statement<'a>] {
        self.body.as_deref().unwrap_or(&[])
    }

    pub fn instructions(&self) -> impl Iterator<Item = &Instruction<'a>> + '_ {
        self.statements().iter().filter_map(|statement| match statement {
            Statement::Instruction(instruction) => Some(instruction),
            _ => None,
        })
    }

    /// The declarations in the body (`.reg`, `.shared`, `.local`, `.param`...), in order.
    pub fn declarations(&self) -> impl Iterator<Item = &VarDecl<'a>> + '_ {
        self.statements().iter().filter_map(|statement| match statement {
            Statement::Decl(decl) => Some(decl),
            _ => None,
        })
    }

    /// The labels in the body, in order.
    pub fn labels(&self) -> impl Iterator<Item = &Label<'a>> + '_ {
        self.statements().iter().filter_map(|statement| match statement {
            Statement::Label(label) => Some(label),
            _ => None,
        })
    }

    /// The parameter names in order.
    pub fn param_names(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.params.iter().filter_map(VarDecl::name)
    }

    /// The first performance directive with this name (without the dot).
    pub fn directive(&self, name: &str) -> Option<&Directive<'a>> {
        self.directives.iter().find(|directive| directive.name == name)
    }
}

/// A variable or parameter declaration: `.reg .b32 %r<21>;`, `.shared .align 16 .b8 tile[1024];`,
/// `.param .u64 .ptr .global .align 8 kern_param_0`, `.global .u32 tbl[2] = {1, 2};`.
#[derive(Clone, Debug, PartialEq)]
pub struct VarDecl<'a> {
    pub linkage: Option<Linkage>,
    /// The state space without its dot: `reg`, `shared`, `param`, `global`, `local`, `const`...
    pub space: &'a str,
    /// The other dotted words in order, without dots and without `.align N`: `["v4", "b32"]`,
    /// `["u64", "ptr", "global"]`.
    pub attrs: Vec<&'a str>,
    pub align: Option<u64>,
    pub names: Vec<DeclName<'a>>,
    pub init: Option<Initializer<'a>>,
    pub range: TextRange,
}

impl<'a> VarDecl<'a> {
    /// The first declared name.
    pub fn name(&self) -> Option<&'a str> {
        self.names.first().map(|name| name.name)
    }

    /// The element type: the last attribute that names a type (`b32`, `u64`, `pred`, `f16x2`...).
    pub fn ty(&self) -> Option<&'a str> {
        self.attrs.iter().rev().copied().find(|attr| is_type_word(attr))
    }

    /// The vector width from `.v2`/`.v4`/`.v8`, if any.
    pub fn vector_width(&self) -> Option<u32> {
        self.attrs.iter().find_map(|attr| attr.strip_prefix('v')?.parse().ok())
    }

    pub fn has_attr(&self, attr: &str) -> bool {
        self.attrs.contains(&attr)
    }
}

/// Whether a dotted word names a PTX data type: `b8`..`b128`, `u8`..`u64`, `s4`..`s64`,
/// `f16`/`f16x2`/`f32`/`f64`, `bf16`/`bf16x2`, `tf32`, the small floats (`e4m3`, `e5m2x2`,
/// `e2m1`, `ue8m0`...), `pred` and the opaque types. Shapes such as `m16n8k16` are not types.
pub fn is_type_word(word: &str) -> bool {
    let starts_with_digit = |rest: &str| rest.starts_with(|c: char| c.is_ascii_digit());
    matches!(word, "pred" | "texref" | "samplerref" | "surfref")
        || word.strip_prefix(['b', 'u', 's', 'f', 'e']).is_some_and(starts_with_digit)
        || word.strip_prefix("ue").is_some_and(starts_with_digit)
        || word.starts_with("bf16")
        || word.starts_with("tf32")
}

#[cfg(test)]
mod tests {
    use super::is_type_word;

    #[test]
    fn type_words() {
        // Hand-written.
        for word in [
            "b8", "b128", "u32", "s64", "f16x2", "bf16", "bf16x2", "tf32", "e4m3", "e5m2x2",
            "ue8m0", "pred",
        ] {
            assert!(is_type_word(word), "{word}");
        }
        for word in ["m16n8k16", "sync", "shared", "v4", "x4", "eq", "ftz", "sat", "global"] {
            assert!(!is_type_word(word), "{word}");
        }
    }
}

/// One declared name: `%r<21>` (21 registers `%r0..%r20`), `tile[1024]`, `tbl[2][4]`, `smem[]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeclName<'a> {
    pub name: &'a str,
    /// `N` of a parametrized register declaration `%r<N>`.
    pub count: Option<u32>,
    /// Array dimensions; `None` for an unsized `[]`.
    pub dims: Vec<Option<u64>>,
    pub range: TextRange,
}

/// `= {1, 2, {3, 4}}` or `= generic(sym)+8`: the leaf values, flattened in order.
#[derive(Clone, Debug, PartialEq)]
pub struct Initializer<'a> {
    pub values: Vec<Operand<'a>>,
    pub range: TextRange,
}

/// A statement inside a function body (or a section).
#[derive(Clone, Debug, PartialEq)]
pub enum Statement<'a> {
    Instruction(Instruction<'a>),
    Label(Label<'a>),
    /// `.reg`, `.shared`, `.local`, `.param`... declarations.
    Decl(VarDecl<'a>),
    /// `.loc file line column`: the source position of the following instructions.
    Loc(Loc<'a>),
    /// Other directives: `.pragma`, `.callprototype`, `.calltargets`, `.branchtargets`, data.
    Directive(Directive<'a>),
    /// `{`: a nested scope opens (names declared inside are local to it).
    ScopeOpen(TextRange),
    /// `}`: the innermost nested scope closes.
    ScopeClose(TextRange),
    /// The `// begin inline asm` comment nvcc writes before an inline asm block.
    InlineAsmBegin(TextRange),
    /// The `// end inline asm` comment after it.
    InlineAsmEnd(TextRange),
    Unknown(Unknown<'a>),
}

impl<'a> Statement<'a> {
    pub fn as_instruction(&self) -> Option<&Instruction<'a>> {
        match self {
            Self::Instruction(instruction) => Some(instruction),
            _ => None,
        }
    }

    pub fn range(&self) -> TextRange {
        match self {
            Self::Instruction(instruction) => instruction.range,
            Self::Label(label) => label.range,
            Self::Decl(decl) => decl.range,
            Self::Loc(loc) => loc.range,
            Self::Directive(directive) => directive.range,
            Self::ScopeOpen(range)
            | Self::ScopeClose(range)
            | Self::InlineAsmBegin(range)
            | Self::InlineAsmEnd(range) => *range,
            Self::Unknown(unknown) => unknown.range,
        }
    }
}

/// Text that could not be parsed; a [`ParseError`] says why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unknown<'a> {
    pub text: &'a str,
    pub range: TextRange,
}

/// `name:`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Label<'a> {
    pub name: &'a str,
    pub range: TextRange,
}

/// `.loc 1 42 7` with the optional `, function_name lbl+4, inlined_at 1 20 3`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loc<'a> {
    pub file: u32,
    pub line: u32,
    pub column: u32,
    /// The `function_name` label (a string in `.debug_str`), with its offset.
    pub function_name: Option<(&'a str, i64)>,
    pub inlined_at: Option<InlinedAt>,
    pub range: TextRange,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InlinedAt {
    pub file: u32,
    pub line: u32,
    pub column: u32,
}

/// A directive kept generically: its name, an optional label, arguments and raw text.
#[derive(Clone, Debug, PartialEq)]
pub struct Directive<'a> {
    /// The label in front of `.callprototype`/`.calltargets`/`.branchtargets`.
    pub label: Option<Label<'a>>,
    /// The name without its dot: `pragma`, `maxntid`, `branchtargets`, `b8`...
    pub name: &'a str,
    /// The comma-separated arguments, when they are operands (empty otherwise, for example for
    /// `.callprototype`, whose signature is in `text`).
    pub args: Vec<Operand<'a>>,
    /// Everything after the name, as written (comments included).
    pub text: &'a str,
    pub range: TextRange,
}

impl Directive<'_> {
    /// The integer arguments (`.maxntid 128, 1, 1` gives 128, 1, 1).
    pub fn integer_args(&self) -> impl Iterator<Item = i64> + '_ {
        self.args.iter().filter_map(Operand::as_integer)
    }
}

/// `@%p1` or `@!%p1`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Guard<'a> {
    pub register: &'a str,
    pub negated: bool,
    pub range: TextRange,
}

/// One instruction: `@!%p1 ld.relaxed.gpu.global.u32 %r1, [%rd2+8];`.
#[derive(Clone, Debug, PartialEq)]
pub struct Instruction<'a> {
    pub guard: Option<Guard<'a>>,
    /// The whole dotted opcode as written: `mbarrier.try_wait.parity.shared::cta.b64`.
    pub opcode: &'a str,
    pub opcode_range: TextRange,
    /// The opcode split at its dots, in order: `["mbarrier", "try_wait", "parity",
    /// "shared::cta", "b64"]`. `::`-qualified words stay one token.
    pub tokens: Vec<&'a str>,
    pub operands: Vec<Operand<'a>>,
    /// From the guard (or opcode) to the `;` included (when there is one).
    pub range: TextRange,
}

impl<'a> Instruction<'a> {
    /// The first opcode token (`ld`, `mbarrier`, `cp`, `tcgen05`...).
    pub fn mnemonic(&self) -> &'a str {
        self.tokens.first().copied().unwrap_or(self.opcode)
    }

    /// All tokens after the first, in order.
    pub fn modifiers(&self) -> &[&'a str] {
        self.tokens.get(1..).unwrap_or(&[])
    }

    /// Whether `.modifier` appears among the tokens after the first (`"relaxed"`,
    /// `"shared::cluster"`; a leading dot in `modifier` is ignored).
    pub fn has_modifier(&self, modifier: &str) -> bool {
        let modifier = modifier.strip_prefix('.').unwrap_or(modifier);
        self.modifiers().contains(&modifier)
    }

    /// Whether the opcode starts with these tokens, for compound opcodes:
    /// `starts_with(&["mbarrier", "try_wait"])`, `starts_with(&["tcgen05", "wait::ld"])`.
    pub fn starts_with(&self, tokens: &[&str]) -> bool {
        self.tokens.len() >= tokens.len() && self.tokens.iter().zip(tokens).all(|(a, b)| a == b)
    }

    /// The branch or call targets named by this instruction (`bra L`, `brx.idx %r, tbl`,
    /// `call (r), f, (p)`): the plain names among its operands that are not registers.
    pub fn target_names(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.operands.iter().filter_map(|operand| match operand.kind {
            OperandKind::Name(name) if !name.starts_with('%') => Some(name),
            _ => None,
        })
    }
}

/// One operand with its range.
#[derive(Clone, Debug, PartialEq)]
pub struct Operand<'a> {
    pub kind: OperandKind<'a>,
    pub range: TextRange,
}

impl<'a> Operand<'a> {
    pub fn as_name(&self) -> Option<&'a str> {
        match self.kind {
            OperandKind::Name(name) => Some(name),
            _ => None,
        }
    }

    pub fn as_integer(&self) -> Option<i64> {
        match self.kind {
            OperandKind::Integer(value) => Some(value),
            _ => None,
        }
    }

    pub fn as_address(&self) -> Option<&Address<'a>> {
        match &self.kind {
            OperandKind::Address(address) => Some(address),
            _ => None,
        }
    }

    /// Every register-like name this operand mentions (names starting with `%`), in order,
    /// looking inside vectors, addresses, lists, pipes and negations.
    pub fn registers(&self) -> Vec<&'a str> {
        let mut names = Vec::new();
        self.visit_names(&mut |name| {
            if name.starts_with('%') {
                names.push(name);
            }
        });
        names
    }

    /// Calls `f` with every name this operand mentions, in order.
    pub fn visit_names(&self, f: &mut impl FnMut(&'a str)) {
        match &self.kind {
            OperandKind::Name(name) | OperandKind::Negated(name) => f(name),
            OperandKind::ArrayElement { name, .. } => f(name),
            OperandKind::Address(address) => {
                if let Some(base) = address.base {
                    f(base);
                }
            }
            OperandKind::Pipe { first, second } => {
                f(first);
                f(second);
            }
            OperandKind::TensorAddress(items)
            | OperandKind::Vector(items)
            | OperandKind::List(items) => {
                for item in items {
                    // Nesting is at most a few levels deep (the parser caps it).
                    item.visit_names(f);
                }
            }
            OperandKind::Integer(_)
            | OperandKind::Float(_)
            | OperandKind::Sink
            | OperandKind::String(_)
            | OperandKind::Expr(_) => {}
        }
    }
}

/// The shapes an operand takes.
#[derive(Clone, Debug, PartialEq)]
pub enum OperandKind<'a> {
    /// A register (`%r1`, `%tid.x`, `%clock64`, an inline-asm local `P1`), variable, parameter,
    /// label or function name. Registers and symbols are told apart later, by declarations.
    Name(&'a str),
    /// An integer literal; 64-bit values above `i64::MAX` keep their two's-complement bits.
    Integer(i64),
    /// A float literal (`0f3F800000`, `0d3FF0000000000000`, `1.5e-3`).
    Float(f64),
    /// `_`.
    Sink,
    /// A string literal, without quotes (`.pragma "nounroll"`).
    String(&'a str),
    /// `[%rd1]`, `[%rd1+16]`, `[%rd1+-8]`, `[sym]`, `[sym+12]`, `[0x100]`.
    Address(Address<'a>),
    /// `[%rd9, {%r1, %r2}]`: a tensor map or texture and its coordinates.
    TensorAddress(Vec<Operand<'a>>),
    /// `tbl[12]`.
    ArrayElement { name: &'a str, index: i64 },
    /// `{%r1, _, %r2}`.
    Vector(Vec<Operand<'a>>),
    /// `%r0|%p0`.
    Pipe { first: &'a str, second: &'a str },
    /// `!%p1`.
    Negated(&'a str),
    /// `(retval0)`, `(param0, param1)` in a `call`.
    List(Vec<Operand<'a>>),
    /// A constant expression kept as text (`generic(sym)+8`, `(1<<4)`, `lbl+12`).
    Expr(&'a str),
}

/// The parts of a `[base+offset]` address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Address<'a> {
    /// The register or symbol; `None` for an absolute address such as `[0x100]`.
    pub base: Option<&'a str>,
    pub offset: i64,
}
