//! Unit tests for each grammar item, on hand-written PTX snippets.
//!
//! Every snippet in this file is hand-written (not compiler output); compiler output is tested
//! in `compiler_output.rs`.

use fencelint_ptx::{
    Address, FunctionKind, Instruction, Linkage, Module, ModuleItem, OperandKind, Parsed,
    Statement, parse, parse_with_offset, split_functions, stats,
};
use fencelint_source::TextRange;

/// Parses and asserts that there is no error.
fn clean(src: &str) -> Module<'_> {
    let Parsed { value, errors } = parse(src);
    assert!(errors.is_empty(), "unexpected errors: {errors:#?}\nin:\n{src}");
    value
}

/// Wraps body statements in a kernel and returns its statements.
fn body(statements: &str) -> Vec<Statement<'static>> {
    let src: &'static str =
        Box::leak(format!(".entry k()\n{{\n{statements}\n}}\n").into_boxed_str());
    let module = clean(src);
    module.functions().next().unwrap().body.clone().unwrap()
}

fn instructions(statements: &str) -> Vec<Instruction<'static>> {
    body(statements)
        .into_iter()
        .filter_map(|statement| match statement {
            Statement::Instruction(instruction) => Some(instruction),
            _ => None,
        })
        .collect()
}

fn one(statement: &str) -> Instruction<'static> {
    let mut all = instructions(statement);
    assert_eq!(all.len(), 1, "expected one instruction in {statement:?}");
    all.remove(0)
}

#[test]
fn empty_and_trivia_only_inputs() {
    // Hand-written.
    assert!(clean("").items.is_empty());
    assert!(
        clean("  \n\t// only a comment\n/* and a block */\n#include <nothing>\n").items.is_empty()
    );
}

#[test]
fn module_header_directives() {
    // Hand-written.
    let module = clean(
        ".version 9.4 // comment\n.target sm_90a, texmode_independent, debug\n.address_size 64\n",
    );
    let version = module.version().unwrap();
    assert_eq!((version.major, version.minor, version.text), (9, 4, "9.4"));
    assert_eq!(module.target().unwrap().names, ["sm_90a", "texmode_independent", "debug"]);
    assert_eq!(module.address_size(), Some(64));
}

#[test]
fn file_table() {
    // Hand-written.
    let module = clean(
        ".file 1 \"/src/kernel.cu\"\n.file\t2 \"/usr/include/x.h\", 1700000000, 4242\n.file 3 \"a;b.cu\"",
    );
    assert_eq!(module.file_name(1), Some("/src/kernel.cu"));
    assert_eq!(module.file_name(3), Some("a;b.cu"));
    assert_eq!(module.file_name(4), None);
    let second = module.files().nth(1).unwrap();
    assert_eq!((second.timestamp, second.size), (Some(1_700_000_000), Some(4242)));
}

#[test]
fn module_variables_with_initializers_and_linkage() {
    // Hand-written.
    let module = clean(
        r".global .align 8 .b8 table[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
.const .align 4 .f32 coeff[2] = {0f3F800000, 1.5};
.extern .global .align 16 .b8 ext[];
.visible .global .u64 fptr[2] = {generic(f1), generic(f2)+8};
.weak .global .u32 w = 7;
.common .global .u32 c;
.global .u32 grid[2][2] = {{1, 2}, {3, 4}};
.global .texref tex0;
.global .attribute(.managed) .u32 managed;
.shared .align 4 .b8 module_smem[64];
",
    );
    let variables: Vec<_> = module.variables().collect();
    assert_eq!(variables.len(), 10);
    let table = variables[0];
    assert_eq!((table.space, table.align, table.ty()), ("global", Some(8), Some("b8")));
    assert_eq!(table.names[0].dims, [Some(16)]);
    assert_eq!(table.init.as_ref().unwrap().values.len(), 16);
    let coeff = &variables[1].init.as_ref().unwrap().values;
    assert_eq!(coeff[0].kind, OperandKind::Float(1.0));
    assert_eq!(variables[2].linkage, Some(Linkage::Extern));
    assert_eq!(variables[2].names[0].dims, [None]);
    let fptr = &variables[3];
    assert_eq!(fptr.linkage, Some(Linkage::Visible));
    let values = &fptr.init.as_ref().unwrap().values;
    assert_eq!(values[0].kind, OperandKind::Expr("generic(f1)"));
    assert_eq!(values[1].kind, OperandKind::Expr("generic(f2)+8"));
    assert_eq!(variables[4].linkage, Some(Linkage::Weak));
    assert_eq!(variables[4].init.as_ref().unwrap().values[0].kind, OperandKind::Integer(7));
    assert_eq!(variables[5].linkage, Some(Linkage::Common));
    assert_eq!(variables[6].names[0].dims, [Some(2), Some(2)]);
    assert_eq!(variables[6].init.as_ref().unwrap().values.len(), 4);
    assert_eq!(variables[8].attrs, ["attribute(.managed)", "u32"]);
}

#[test]
fn sections_hold_data_and_labels() {
    // Hand-written.
    let module = clean(
        ".section .debug_str\n{\n$L__info_string0:\n.b8 95,90,0\n.b32 .debug_abbrev\n.b64 $L__func_begin0 // x\n}\n.section .nv.local\n",
    );
    let ModuleItem::Section(section) = &module.items[0] else { panic!("{:?}", module.items[0]) };
    assert_eq!(section.name, ".debug_str");
    assert_eq!(section.statements.len(), 4);
    assert!(
        matches!(&section.statements[0], Statement::Label(label) if label.name == "$L__info_string0")
    );
    let Statement::Directive(data) = &section.statements[1] else { panic!() };
    assert_eq!((data.name, data.args.len()), ("b8", 3));
    let Statement::Directive(abbrev) = &section.statements[2] else { panic!() };
    assert_eq!(abbrev.args[0].kind, OperandKind::Name(".debug_abbrev"));
    assert!(matches!(&module.items[1], ModuleItem::Directive(d) if d.name == "section"));

    // A `;` inside a data line's comment does not split the line (Triton writes these).
    let module =
        clean(".section .debug_str\n{\n.b8 115 // string offset=0 ; kernel_name\n.b8 0\n}\n");
    let ModuleItem::Section(section) = &module.items[0] else { panic!() };
    assert_eq!(section.statements.len(), 2);
}

#[test]
fn entry_and_func_signatures() {
    // Hand-written.
    let module = clean(
        r".visible .entry kern(
    .param .u64 .ptr .global .align 16 kern_param_0,
    .param .align 8 .b8 kern_param_1[24],
    .param .u32 kern_param_2
)
{
    ret;
}
.func (.param .b32 func_retval0) _Z5scalefi(.param .b32 a, .reg .b32 b)
{
    ret;
}
.extern .func (.param .b32 func_retval0) vprintf
(
    .param .b64 vprintf_param_0,
    .param .b64 vprintf_param_1
)
;
.weak .func no_params;
.entry empty
{
}
",
    );
    let functions: Vec<_> = module.functions().collect();
    assert_eq!(functions.len(), 5);
    let kern = functions[0];
    assert_eq!(
        (kern.kind, kern.linkage, kern.name),
        (FunctionKind::Entry, Some(Linkage::Visible), "kern")
    );
    assert_eq!(
        kern.param_names().collect::<Vec<_>>(),
        ["kern_param_0", "kern_param_1", "kern_param_2"]
    );
    assert_eq!(kern.params[0].attrs, ["u64", "ptr", "global"]);
    assert_eq!((kern.params[0].align, kern.params[0].ty()), (Some(16), Some("u64")));
    assert_eq!(kern.params[1].names[0].dims, [Some(24)]);
    let scale = functions[1];
    assert_eq!(scale.kind, FunctionKind::Func);
    assert_eq!(scale.returns[0].name(), Some("func_retval0"));
    assert_eq!(scale.params[1].space, "reg");
    let vprintf = functions[2];
    assert!(vprintf.body.is_none());
    assert_eq!(vprintf.linkage, Some(Linkage::Extern));
    assert_eq!(vprintf.params.len(), 2);
    assert!(functions[3].body.is_none() && functions[3].params.is_empty());
    assert_eq!(functions[4].statements().len(), 0);
    assert_eq!(module.function("vprintf").unwrap().name, "vprintf");
    assert_eq!(&module.source[kern.name_range.to_usize()], "kern");
    assert!(module.source[kern.range.to_usize()].ends_with("ret;\n}"));
}

#[test]
fn performance_directives_between_signature_and_body() {
    // Hand-written.
    let module = clean(
        r#".entry k()
.maxntid 128, 1, 1
.reqntid 256
.minnctapersm 2
.maxnreg 64
.explicitcluster
.reqnctapercluster 2, 1, 1
.maxclusterrank 8
.noreturn
.pragma "nounroll";
{
    ret;
}
"#,
    );
    let function = module.functions().next().unwrap();
    let names: Vec<_> = function.directives.iter().map(|d| d.name).collect();
    assert_eq!(
        names,
        [
            "maxntid",
            "reqntid",
            "minnctapersm",
            "maxnreg",
            "explicitcluster",
            "reqnctapercluster",
            "maxclusterrank",
            "noreturn",
            "pragma"
        ]
    );
    assert_eq!(
        function.directive("maxntid").unwrap().integer_args().collect::<Vec<_>>(),
        [128, 1, 1]
    );
    assert_eq!(function.directive("pragma").unwrap().args[0].kind, OperandKind::String("nounroll"));
    assert_eq!(function.instructions().count(), 1);
}

#[test]
fn register_and_variable_declarations_in_functions() {
    // Hand-written.
    let statements = body(
        r".reg .pred %p<7>;
.reg .b32 %r<21>, %q<2>;
.reg .b64 %rd1, %rd2;
.reg .v4 .f32 %v;
.shared .align 16 .b8 tile[1024];
.local .align 8 .b8 __local_depot0[64];
.param .b64 param0;
.extern .shared .align 16 .b8 dyn_smem[];",
    );
    let decls: Vec<_> = statements
        .iter()
        .map(|s| match s {
            Statement::Decl(decl) => decl,
            other => panic!("not a declaration: {other:?}"),
        })
        .collect();
    assert_eq!(
        (decls[0].space, decls[0].ty(), decls[0].names[0].count),
        ("reg", Some("pred"), Some(7))
    );
    assert_eq!(
        decls[1].names.iter().map(|n| (n.name, n.count)).collect::<Vec<_>>(),
        [("%r", Some(21)), ("%q", Some(2))]
    );
    assert_eq!(decls[2].names.len(), 2);
    assert_eq!((decls[3].vector_width(), decls[3].ty()), (Some(4), Some("f32")));
    assert_eq!(
        (decls[4].space, decls[4].align, decls[4].names[0].dims.clone()),
        ("shared", Some(16), vec![Some(1024)])
    );
    assert_eq!(decls[5].space, "local");
    assert_eq!(decls[6].space, "param");
    assert_eq!((decls[7].linkage, decls[7].space), (Some(Linkage::Extern), "shared"));
}

#[test]
fn nested_scopes_are_flat_markers() {
    // Hand-written.
    let statements =
        body("{ // callseq 0, 0\n.reg .b32 t;\n{\n{ mov.u32 t, 1; }\n}\n} // callseq 0");
    let shape: Vec<&str> = statements
        .iter()
        .map(|s| match s {
            Statement::ScopeOpen(_) => "{",
            Statement::ScopeClose(_) => "}",
            Statement::Decl(_) => "decl",
            Statement::Instruction(_) => "inst",
            _ => "?",
        })
        .collect();
    assert_eq!(shape, ["{", "decl", "{", "{", "inst", "}", "}", "}"]);
}

#[test]
fn labels_standalone_and_before_instructions() {
    // Hand-written.
    let statements = body("$L__BB0_1:\nWAIT_0: ret;\nL2 :\n  bra.uni $L__BB0_1;");
    let labels: Vec<_> = statements
        .iter()
        .filter_map(|s| match s {
            Statement::Label(label) => Some(label.name),
            _ => None,
        })
        .collect();
    assert_eq!(labels, ["$L__BB0_1", "WAIT_0", "L2"]);
    let module = clean(".entry k()\n{\n.reg .b32 %r<2>;\nL0: mov.u32 %r0, 1;\nL1: ret;\n}\n");
    let function = module.functions().next().unwrap();
    assert_eq!(function.labels().map(|l| l.name).collect::<Vec<_>>(), ["L0", "L1"]);
    assert_eq!(function.declarations().count(), 1);
    assert_eq!(function.statements().iter().filter_map(Statement::as_instruction).count(), 2);
    let bra = instructions("bra.uni $L__BB0_1;").remove(0);
    assert_eq!(bra.target_names().collect::<Vec<_>>(), ["$L__BB0_1"]);
}

#[test]
fn guards() {
    // Hand-written.
    let guarded = one("@%p1 bra $L1;");
    let guard = guarded.guard.unwrap();
    assert_eq!((guard.register, guard.negated), ("%p1", false));
    let negated = one("@!%p2 st.global.u32 [%rd4+8], %r3;");
    assert_eq!(negated.guard.as_ref().map(|g| (g.register, g.negated)), Some(("%p2", true)));
    let spaced = one("@ !P1 bra.uni WAIT;");
    assert_eq!(spaced.guard.as_ref().map(|g| (g.register, g.negated)), Some(("P1", true)));
    assert!(one("ret;").guard.is_none());
}

#[test]
fn opcodes_keep_modifiers_in_order() {
    // Hand-written.
    let ld = one("ld.global.u32.relaxed.gpu %r1, [%rd1];");
    assert_eq!(ld.opcode, "ld.global.u32.relaxed.gpu");
    assert_eq!(ld.tokens, ["ld", "global", "u32", "relaxed", "gpu"]);
    assert_eq!(ld.mnemonic(), "ld");
    assert_eq!(ld.modifiers(), ["global", "u32", "relaxed", "gpu"]);
    assert!(ld.has_modifier("relaxed") && ld.has_modifier(".gpu") && !ld.has_modifier("ld"));

    let wait = one("mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], %r2;");
    assert!(wait.starts_with(&["mbarrier", "try_wait", "parity"]));
    assert!(wait.has_modifier("shared::cta"));

    let tma = one(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r1], [%rd9, {%r2, %r3}], [%r4];",
    );
    assert!(tma.starts_with(&["cp", "async", "bulk", "tensor", "2d"]));
    assert!(tma.has_modifier("mbarrier::complete_tx::bytes"));

    assert_eq!(
        one("tcgen05.wait::ld.sync.aligned;").tokens,
        ["tcgen05", "wait::ld", "sync", "aligned"]
    );
    assert_eq!(one("bar.warp.sync -1;").tokens, ["bar", "warp", "sync"]);
    let fence = one("fence.proxy.tensormap::generic.release.gpu;");
    assert_eq!(fence.tokens, ["fence", "proxy", "tensormap::generic", "release", "gpu"]);
    assert!(
        one("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%rd1], 16, %rd2;")
            .has_modifier("L2::cache_hint")
    );
    assert_eq!(
        one("multimem.ld_reduce.relaxed.sys.global.add.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1];")
            .mnemonic(),
        "multimem"
    );
}

#[test]
fn vector_operands_on_the_lines_after_the_opcode() {
    // Hand-written, in the layout of cuBLASLt 13.10's sm_120 PTX: the opcode alone on a line,
    // each operand vector first on the next ones. Before, each `{` ended the instruction.
    let all = instructions(
        "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e4m3.f32 \n\
         {%f1, %f2, %f3, %f4}, \n\
         {%r1, %r2, %r3, %r4}, \n\
         {%r5, %r6}, \n\
         {%f5, %f6, %f7, %f8};\n\
         ret;",
    );
    assert_eq!(all.len(), 2);
    assert_eq!(all[0].opcode, "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e4m3.f32");
    let sizes: Vec<usize> = all[0]
        .operands
        .iter()
        .map(|operand| match &operand.kind {
            OperandKind::Vector(items) => items.len(),
            other => panic!("not a vector: {other:?}"),
        })
        .collect();
    assert_eq!(sizes, [4, 4, 2, 4]);
    assert_eq!(all[1].opcode, "ret");
}

#[test]
fn operand_shapes_in_instructions() {
    // Hand-written.
    let kinds =
        |statement: &str| one(statement).operands.into_iter().map(|o| o.kind).collect::<Vec<_>>();
    assert_eq!(
        kinds("mov.u32 %r1, %tid.x;"),
        [OperandKind::Name("%r1"), OperandKind::Name("%tid.x")]
    );
    assert_eq!(kinds("mov.u64 %rd1, %clock64;")[1], OperandKind::Name("%clock64"));
    assert_eq!(kinds("mov.b32 %r1, -8;")[1], OperandKind::Integer(-8));
    assert_eq!(kinds("mov.b32 %r1, 0x7fffffffU;")[1], OperandKind::Integer(0x7fff_ffff));
    assert_eq!(kinds("mov.b32 %r1, 0b1010;")[1], OperandKind::Integer(10));
    assert_eq!(kinds("mov.b32 %r1, 017;")[1], OperandKind::Integer(15));
    assert_eq!(kinds("mov.f32 %f1, 0f3F800000;")[1], OperandKind::Float(1.0));
    assert_eq!(kinds("mov.f64 %fd1, 0d4000000000000000;")[1], OperandKind::Float(2.0));
    assert_eq!(kinds("mov.f32 %f1, 1.5e2;")[1], OperandKind::Float(150.0));
    assert_eq!(kinds("mbarrier.arrive.shared::cta.b64 _, [%r1];")[0], OperandKind::Sink);
    let address = |base, offset| OperandKind::Address(Address { base, offset });
    assert_eq!(kinds("ld.u32 %r1, [%rd1];")[1], address(Some("%rd1"), 0));
    assert_eq!(kinds("ld.u32 %r1, [%rd1+16];")[1], address(Some("%rd1"), 16));
    assert_eq!(kinds("ld.u32 %r1, [%rd1+-8];")[1], address(Some("%rd1"), -8));
    assert_eq!(kinds("ld.u32 %r1, [sym];")[1], address(Some("sym"), 0));
    assert_eq!(kinds("ld.u32 %r1, [sym+12];")[1], address(Some("sym"), 12));
    assert_eq!(kinds("ld.u32 %r1, [0x100];")[1], address(None, 0x100));
    assert_eq!(
        kinds("mov.u32 %r1, tbl[12];")[1],
        OperandKind::ArrayElement { name: "tbl", index: 12 }
    );
    let OperandKind::Vector(items) = &kinds("ld.v4.u32 {%r1, _, %r2, %r3}, [%rd1];")[0] else {
        panic!()
    };
    assert_eq!(items[1].kind, OperandKind::Sink);
    let OperandKind::TensorAddress(items) =
        &kinds("cp.async.bulk.tensor.1d.global.shared::cta.bulk_group [%rd9, {%r1}], [%r2];")[0]
    else {
        panic!()
    };
    assert_eq!(items[0].kind, OperandKind::Name("%rd9"));
    assert_eq!(
        kinds("elect.sync %r0|%p0, -1;")[0],
        OperandKind::Pipe { first: "%r0", second: "%p0" }
    );
    assert_eq!(
        kinds("setp.lt.s32 %p1|%p2, %r1, %r2;")[0],
        OperandKind::Pipe { first: "%p1", second: "%p2" }
    );
    assert_eq!(kinds("bar.red.and.pred %p1, 0, !%p2;")[2], OperandKind::Negated("%p2"));
}

#[test]
fn operand_ranges_and_registers() {
    // Hand-written.
    let src = ".entry k()\n{\nst.global.v2.u32 [%rd4+8], {%r3, %r5};\n}\n";
    let module = clean(src);
    let inst = module.functions().next().unwrap().instructions().next().unwrap();
    assert_eq!(module.text(inst.range), "st.global.v2.u32 [%rd4+8], {%r3, %r5};");
    assert_eq!(module.text(inst.opcode_range), "st.global.v2.u32");
    assert_eq!(module.text(inst.operands[0].range), "[%rd4+8]");
    assert_eq!(module.text(inst.operands[1].range), "{%r3, %r5}");
    assert_eq!(inst.operands[1].registers(), ["%r3", "%r5"]);
    assert_eq!(inst.operands[0].as_address().unwrap().base, Some("%rd4"));
}

#[test]
fn split_call_with_comments_and_prototype_call() {
    // Hand-written.
    let statements = body(
        r"{ // callseq 0, 0
.param .b32 param0;
st.param.b32 [param0+0], %r1;
.param .b32 retval0;
call.uni (retval0),
_Z5scalefi, /* callee */
(
param0, // first
param1
);
ld.param.b32 %r2, [retval0+0];
} // callseq 0
prototype_1 : .callprototype (.param .b32 _) _ (.param .b32 _);
call (retval0), %rd5, (param0), prototype_1;
ftbl: .calltargets f1, f2;
call.uni f3;",
    );
    let calls: Vec<_> = statements
        .iter()
        .filter_map(|s| match s {
            Statement::Instruction(i) if i.mnemonic() == "call" => Some(i),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 3);
    let OperandKind::List(returns) = &calls[0].operands[0].kind else { panic!() };
    assert_eq!(returns[0].kind, OperandKind::Name("retval0"));
    assert_eq!(calls[0].operands[1].kind, OperandKind::Name("_Z5scalefi"));
    let OperandKind::List(params) = &calls[0].operands[2].kind else { panic!() };
    assert_eq!(params.len(), 2);
    assert_eq!(calls[1].operands[3].kind, OperandKind::Name("prototype_1"));
    assert_eq!(calls[2].target_names().collect::<Vec<_>>(), ["f3"]);
    let directives: Vec<_> = statements
        .iter()
        .filter_map(|s| match s {
            Statement::Directive(d) => Some(d),
            _ => None,
        })
        .collect();
    assert_eq!(directives[0].name, "callprototype");
    assert_eq!(directives[0].label.as_ref().unwrap().name, "prototype_1");
    assert_eq!(directives[0].text, "(.param .b32 _) _ (.param .b32 _)");
    assert_eq!(directives[1].name, "calltargets");
    assert_eq!(directives[1].args.len(), 2);
}

#[test]
fn branch_targets_and_indexed_branch() {
    // Hand-written.
    let statements =
        body("ts: .branchtargets L0, L1, L2;\nbrx.idx %r1, ts;\nL0: ret;\nL1: ret;\nL2: ret;");
    let Statement::Directive(targets) = &statements[0] else { panic!("{:?}", statements[0]) };
    assert_eq!(targets.label.as_ref().unwrap().name, "ts");
    let names: Vec<_> = targets.args.iter().filter_map(fencelint_ptx::Operand::as_name).collect();
    assert_eq!(names, ["L0", "L1", "L2"]);
    let Statement::Instruction(brx) = &statements[1] else { panic!() };
    assert_eq!(brx.target_names().collect::<Vec<_>>(), ["ts"]);
}

#[test]
fn loc_lines() {
    // Hand-written.
    let statements = body(
        ".loc 1 15 5\n.loc\t2 7 0, function_name $L__info_string0+12, inlined_at 1 20 3\n.loc 1 3 1 // x\nret;",
    );
    let locs: Vec<_> = statements
        .iter()
        .filter_map(|s| match s {
            Statement::Loc(loc) => Some(loc),
            _ => None,
        })
        .collect();
    assert_eq!((locs[0].file, locs[0].line, locs[0].column), (1, 15, 5));
    assert_eq!(locs[1].function_name, Some(("$L__info_string0", 12)));
    let inlined = locs[1].inlined_at.unwrap();
    assert_eq!((inlined.file, inlined.line, inlined.column), (1, 20, 3));
    assert_eq!(locs[2].line, 3);
}

#[test]
fn pragma_in_body() {
    // Hand-written.
    let statements = body(".pragma \"nounroll\";\nret;");
    let Statement::Directive(pragma) = &statements[0] else { panic!() };
    assert_eq!(pragma.name, "pragma");
    assert_eq!(pragma.args[0].kind, OperandKind::String("nounroll"));
}

#[test]
fn comments_anywhere() {
    // Hand-written.
    let inst = one("add.s32 /* b */ %r1, // c\n %r2, /* d */ %r3 /* e */;");
    assert_eq!(inst.operands.len(), 3);
    assert_eq!(inst.operands[2].kind, OperandKind::Name("%r3"));
}

#[test]
fn preprocessor_lines_and_inline_asm_markers() {
    // Hand-written.
    let statements =
        body("#line 12 \"x.cu\"\n// begin inline asm\nmov.u32 %r1, 1;\n// end inline asm\n");
    assert!(matches!(statements[0], Statement::InlineAsmBegin(_)));
    assert!(matches!(statements[1], Statement::Instruction(_)));
    assert!(matches!(statements[2], Statement::InlineAsmEnd(_)));
}

#[test]
fn hand_written_inline_asm_shapes() {
    // Hand-written, in the shape CUTLASS-style inline asm takes after nvcc.
    let statements = body(
        r"// begin inline asm
{
.reg .pred P1;
LAB_WAIT:
mbarrier.try_wait.parity.shared::cta.b64 P1, [%r5], %r6, 0x989680;
@P1 bra DONE;
bra.uni LAB_WAIT;
DONE:
}
// end inline asm
{ .reg .b32 %rx; .reg .pred %px; elect.sync %rx|%px, 0xFFFFFFFF; @%px mov.s32 %r1, 1; }",
    );
    assert_eq!(statements.iter().filter(|s| matches!(s, Statement::Instruction(_))).count(), 5);
}

#[test]
fn base_offset_shifts_every_range() {
    // Hand-written.
    let src = ".entry k()\n{\nret;\n}\n";
    let shifted = parse_with_offset(src, 1000).value;
    let function = shifted.functions().next().unwrap();
    assert_eq!(function.range.start, 1000);
    let ret = function.instructions().next().unwrap();
    assert_eq!(shifted.text(ret.range), "ret;");
    assert_eq!(ret.range, TextRange::new(1013, 1017));
}

#[test]
fn split_functions_matches_parse_and_parses_independently() {
    // Hand-written.
    let src = ".version 9.4\n.extern .func f(.param .b32 a);\n.entry a()\n{\n{ ret; }\n}\n.global .u32 x;\n.visible .func (.param .b32 r) b()\n{\n// }\nret;\n}\n";
    let spans = split_functions(src);
    let whole = clean(src);
    let ranges: Vec<_> = whole.functions().map(|f| (f.name, f.range)).collect();
    assert_eq!(spans.iter().map(|s| (s.name, s.range)).collect::<Vec<_>>(), ranges);
    assert_eq!(spans.iter().map(|s| s.has_body).collect::<Vec<_>>(), [false, true, true]);
    for (span, function) in spans.iter().zip(whole.functions()) {
        let part = parse_with_offset(&src[span.range.to_usize()], span.range.start);
        assert!(part.errors.is_empty());
        assert_eq!(part.value.functions().next().unwrap(), function);
    }
}

#[test]
fn stats_count_what_was_parsed() {
    // Hand-written.
    let parsed = parse(
        ".entry k()\n{\n.reg .b32 %r<2>;\nL: mov.u32 %r1, 1;\nbogus statement here;\nret;\n}\n.func g;\n",
    );
    let counts = stats(&parsed.value);
    assert_eq!((counts.functions, counts.declarations), (1, 1));
    assert_eq!((counts.statements, counts.instructions, counts.unknown), (5, 2, 1));
}
