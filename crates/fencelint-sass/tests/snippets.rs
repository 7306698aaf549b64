//! Hand-written SASS snippets (not compiler output): one test per listing feature, error
//! recovery, and the splitter on small inputs.

use fencelint_sass::{
    Arch, ConstBank, FunctionSplitter, MemPrefix, OperandKind, Parsed, RegFile, Register,
    SassFormat, SassInst, SassModule, SrcLine, detect, parse, parse_json, parse_text,
};

fn clean(text: &str) -> SassModule<'_> {
    let parsed = parse(text);
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    parsed.value
}

fn slice(text: &str, range: fencelint_source::TextRange) -> &str {
    &text[range.to_usize()]
}

fn opcodes<'a>(insts: &[SassInst<'a>]) -> Vec<&'a str> {
    insts.iter().map(|inst| inst.opcode).collect()
}

// Hand-written: a cuobjdump listing of a fat binary with two entries.
const CUOBJDUMP: &str = "
Fatbin elf code:
================
arch = sm_90a
code version = [1,8]
host = linux
compile_size = 64bit
identifier = demo.cu

\tcode for sm_90a
\t.target\tsm_90a

\t\tFunction : demo
\t.headerflags\t@\"EF_CUDA_ACCELERATORS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)\"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                              /* 0x00000a00ff017b82 */
                                                                                       /* 0x000fe20000000800 */
// expect: [some-rule] \"a message; with a semicolon\"
        /*0010*/              @!UP0 SYNCS.EXCH.64 URZ, [UR6], UR4 ;                   /* 0x00000004ff0075a7 */
                                                                                       /* 0x000fe2000802017f */
        /*0020*/              @!PT LDS RZ, [RZ] ;  // expect: [other-rule]
        /*0030*/              @!P0 BRA 0x10 ;                                          /* 0x0000000000c08947 */
                                                                                       /* 0x000fea0003800000 */
        /*0040*/                   EXIT ;
\t\t..........


Fatbin elf code:
================
arch = sm_80
code version = [1,7]
identifier = other.cu

\tcode for sm_80

\t\tFunction : second
        /*0000*/                   BSSY B0, 0x20 ;
        /*0010*/                   BSYNC B0 ;
        /*0020*/                   RET.REL.NODEC R2 0x0 ;
\t\t..........
";

#[test]
fn cuobjdump_listing() {
    assert_eq!(detect(CUOBJDUMP), Some(SassFormat::CuobjdumpText));
    let module = clean(CUOBJDUMP);
    assert_eq!(module.format, SassFormat::CuobjdumpText);
    let [demo, second] = &module.functions[..] else { panic!("two functions") };
    assert_eq!((demo.name, second.name), ("demo", "second"));
    assert_eq!(demo.arch.map(|a| a.to_string()).as_deref(), Some("sm_90a"));
    assert_eq!(second.arch, Some(Arch { number: 80, suffix: None }));
    assert_eq!((demo.binary, second.binary), (Some("demo.cu"), Some("other.cu")));
    assert!(slice(CUOBJDUMP, demo.range).starts_with("\t\tFunction : demo"));
    assert!(slice(CUOBJDUMP, demo.range).ends_with(".........."));
    assert_eq!(opcodes(&demo.instructions), ["LDC", "SYNCS.EXCH.64", "LDS", "BRA", "EXIT"]);
    let exch = &demo.instructions[1];
    let guard = exch.guard.unwrap();
    assert!(guard.negated && guard.uniform && guard.reg == Register::new(RegFile::UP, 0));
    assert_eq!(guard.to_string(), "@!UP0");
    assert_eq!(
        slice(CUOBJDUMP, exch.range),
        "/*0010*/              @!UP0 SYNCS.EXCH.64 URZ, [UR6], UR4 ;"
    );
    let words: Vec<u64> = exch.encoding_words(CUOBJDUMP).collect();
    assert_eq!(words, [0x0000_0004_ff00_75a7, 0x000f_e200_0802_017f]);
    let filler = &demo.instructions[2];
    assert!(filler.guard.unwrap().is_never());
    assert_eq!(filler.encoding, None);
    assert_eq!(filler.operands.len(), 2);
    assert_eq!(demo.instructions[3].branch_target, Some(0x10));
    assert_eq!(second.instructions[0].branch_target, Some(0x20));
    assert_eq!(second.instructions[2].branch_target, None, "RET has no target");
}

// Hand-written: an nvdisasm -c -gp listing with data sections around the code.
const NVDISASM: &str = "\t.target\tsm_100a

\t.elftype\t@\"ET_EXEC\"


//--------------------- .nv.info                  --------------------------
\t.section\t.nv.info,\"\",@\"SHT_CUDA_INFO\"
\t.align\t4
\t//----- nvinfo : EIATTR_REGCOUNT
.L_0:
        /*0004*/ \t.word\tindex@(k)
        /*0008*/ \t.byte\t0x04, 0x2f


//--------------------- .text.k                   --------------------------
\t.section\t.text.k,\"ax\",@progbits
\t.sectioninfo\t@\"SHI_REGISTERS=10\"
\t.align\t128
        .global         k
        .type           k,@function
        .size           k,(.L_x_3 - k)
        .other          k,@\"STO_CUDA_ENTRY STV_DEFAULT\"
k:
.text.k:
\t//## File \".nv_debug_ptx_txt\", line 40
        /*0000*/                   BSSY.RECONVERGENT B0, `(.L_x_1) ;
\t//## File \".nv_debug_ptx_txt\", line 41
        /*0010*/                   CALL.REL.NOINC `($k$helper$1) ;
.L_x_0:
        /*0020*/              @!P0 BRA `(.L_x_0) ;
.L_x_1:
        /*0030*/                   BSYNC.RECONVERGENT B0 ;
\t//## File \".nv_debug_ptx_txt\", line 50
        /*0040*/                   EXIT ;
        .type           $k$helper$1,@function
        .size           $k$helper$1,(.L_x_3 - $k$helper$1)
$k$helper$1:
        /*0050*/                   RET.REL.NODEC R4 `(k) ;
.L_x_2:
        /*0060*/                   BRA `(.L_x_2);
.L_x_3:


//--------------------- .nv.shared.k              --------------------------
\t.section\t.nv.shared.k,\"aw\",@nobits
\t.align\t4
.nv.shared.k:
\t.zero\t\t4


//--------------------- SYMBOLS --------------------------

\t.type\t\t.nv.reservedSmem.offset0,@object
\t.size\t\t.nv.reservedSmem.offset0,0x4
";

#[test]
fn nvdisasm_listing() {
    assert_eq!(detect(NVDISASM), Some(SassFormat::NvdisasmText));
    let module = clean(NVDISASM);
    let [k] = &module.functions[..] else { panic!("one function") };
    assert_eq!(k.name, "k");
    assert_eq!(k.arch, Some(Arch { number: 100, suffix: Some('a') }));
    assert!(slice(NVDISASM, k.range).starts_with("//--------------------- .text.k"));
    assert!(slice(NVDISASM, k.range).ends_with(".L_x_3:"));
    assert_eq!(
        opcodes(&k.instructions),
        [
            "BSSY.RECONVERGENT",
            "CALL.REL.NOINC",
            "BRA",
            "BSYNC.RECONVERGENT",
            "EXIT",
            "RET.REL.NODEC",
            "BRA"
        ]
    );
    let labels: Vec<(&str, u64)> = k.labels.iter().map(|l| (l.name, l.address)).collect();
    assert_eq!(
        labels,
        [
            ("k", 0),
            (".text.k", 0),
            (".L_x_0", 0x20),
            (".L_x_1", 0x30),
            ("$k$helper$1", 0x50),
            (".L_x_2", 0x60),
            (".L_x_3", 0x70)
        ]
    );
    let targets: Vec<Option<u64>> = k.instructions.iter().map(|inst| inst.branch_target).collect();
    assert_eq!(targets, [Some(0x30), Some(0x50), Some(0x20), None, None, None, Some(0x60)]);
    let ptx: Vec<Option<u32>> = k.instructions.iter().map(|inst| inst.ptx_line).collect();
    assert_eq!(ptx, [Some(40), Some(41), Some(41), Some(41), Some(50), Some(50), Some(50)]);
    assert!(k.instructions.iter().all(|inst| inst.src_line.is_none()));
    let label_operand = k.instructions[0].operands[1];
    assert_eq!(slice(NVDISASM, label_operand.range), "`(.L_x_1)");
}

// Hand-written: a fixture-style snippet with no headers, `//` comments everywhere, and
// instructions with and without the address column.
const SNIPPET: &str = "// fencelint: rules=spin-poll-without-acquire, target=sm_90
// A relaxed poll, then a plain load of the data.

/*0000*/  LDG.E.STRONG.GPU R0, desc[UR4][R2.64] ;   // expect: [spin-poll-without-acquire]
/*0010*/  ISETP.NE.AND P0, PT, R0, RZ, PT ;
/*0020*/  @!P0 BRA 0x0 ;
// expect: [other] \"substring\"
          LDG.E R4, desc[UR4][R2.64+0x4] ;
          MEMBAR.ALL.GPU ;
";

#[test]
fn headerless_snippet() {
    assert_eq!(detect(SNIPPET), Some(SassFormat::NvdisasmText));
    let module = clean(SNIPPET);
    let [f] = &module.functions[..] else { panic!("one function") };
    assert_eq!(f.name, "");
    let addresses: Vec<u64> = f.instructions.iter().map(|inst| inst.address).collect();
    assert_eq!(addresses, [0, 0x10, 0x20, 0x30, 0x40]);
    assert_eq!(f.instructions[2].branch_target, Some(0));
    assert_eq!(
        slice(SNIPPET, f.instructions[0].range),
        "/*0000*/  LDG.E.STRONG.GPU R0, desc[UR4][R2.64] ;"
    );
    assert_eq!(slice(SNIPPET, f.instructions[3].range), "LDG.E R4, desc[UR4][R2.64+0x4] ;");
    let load = f.instructions[3].operands[1].mem().unwrap();
    assert_eq!((load.prefix, load.addr.offset), (MemPrefix::Desc, 4));
    assert!(
        load.addr.same_registers(&f.instructions[0].operands[1].mem().unwrap().addr),
        "the data load and the poll share a base register"
    );
    let line = SNIPPET.lines().nth(3).unwrap();
    assert!(!slice(SNIPPET, f.instructions[0].range).contains("expect"), "{line}");
}

#[test]
fn crlf_line_endings() {
    let text = SNIPPET.replace('\n', "\r\n");
    let module = clean(&text);
    let f = &module.functions[0];
    assert_eq!(f.instructions.len(), 5);
    assert!(f.instructions.iter().all(|inst| !slice(&text, inst.range).contains('\r')));
}

fn errors_of(parsed: &Parsed<SassModule<'_>>) -> Vec<String> {
    parsed.errors.iter().map(|error| error.message.clone()).collect()
}

#[test]
fn bad_lines_are_reported_and_skipped() {
    // Hand-written: each bad line is followed by a good one.
    let text = "\t\tFunction : k
        /*0000*/                   NOP ;
        this line is not SASS
        /*0010*/                   NOP ;
        /*0020*/              @Q0 NOP ;
        /*0030*/                   IADD3 R0, R1, R2
        /*0040*/                   ;
        /*00zz*/                   NOP ;
        /*0050*/                   NOP ; garbage
        /*0040*/                   NOP ;
        /*0060*/                   WEIRD.NEW.OPCODE.2027 R0, ?odd?, [R1+R2+R3] ;
\t\t..........
";
    let parsed = parse_text(text);
    let f = &parsed.value.functions[0];
    assert_eq!(
        opcodes(&f.instructions),
        ["NOP", "NOP", "NOP", "IADD3", "", "NOP", "NOP", "WEIRD.NEW.OPCODE.2027"]
    );
    let malformed: Vec<bool> = f.instructions.iter().map(|inst| inst.malformed).collect();
    assert_eq!(malformed, [false, false, true, false, true, false, false, false]);
    assert_eq!(
        errors_of(&parsed),
        [
            "unrecognised line",
            "unrecognised predicate `@Q0`",
            "instruction is not terminated by `;`",
            "missing opcode",
            "malformed address column",
            "unexpected text after the instruction",
            "address 0x0040 does not follow the previous instruction",
        ]
    );
    let weird = f.instructions.last().unwrap();
    assert_eq!(weird.operands[1].kind, OperandKind::Other("?odd?"));
    assert_eq!(weird.operands[2].kind, OperandKind::Other("[R1+R2+R3]"));
    assert_eq!(slice(text, parsed.errors[0].range), "this line is not SASS");
}

#[test]
fn truncated_text_keeps_what_is_there() {
    let cut = &CUOBJDUMP[..CUOBJDUMP.find("@!P0 BR").unwrap() + 7];
    let parsed = parse(cut);
    let demo = &parsed.value.functions[0];
    assert_eq!(opcodes(&demo.instructions), ["LDC", "SYNCS.EXCH.64", "LDS", "BR"]);
    let cut_short = "the listing ends inside `demo`: no `..........` line closes its code (the \
                     text looks truncated)";
    assert_eq!(errors_of(&parsed), ["instruction is not terminated by `;`", cut_short]);
    // Cut at the end of a line: every line read is well formed, and only the missing `..........`
    // tells that the function goes on. Its last instruction is where the error points.
    let cut = &CUOBJDUMP[..CUOBJDUMP.find("\t\t..........").unwrap()];
    let parsed = parse(cut);
    assert_eq!(errors_of(&parsed), [cut_short]);
    assert_eq!(slice(cut, parsed.errors[0].range), "/*0040*/                   EXIT ;");
    // nvdisasm prints no such line; ptxas ends a function's code with a branch to itself.
    let cut = &NVDISASM[..NVDISASM.find(".L_x_1:").unwrap()];
    let parsed = parse(cut);
    assert_eq!(
        errors_of(&parsed),
        ["the listing ends inside `k`: its last instruction `BRA` can fall through, and a \
          function's code ends with a branch or an exit (the text looks truncated)"]
    );
    assert_eq!(slice(cut, parsed.errors[0].range), "/*0020*/              @!P0 BRA `(.L_x_0) ;");
    let cut = &NVDISASM[..NVDISASM.find("        .type           $k$helper").unwrap()];
    assert_eq!(errors_of(&parse(cut)), [] as [&str; 0], "ends with `EXIT`");
    let cut = &NVDISASM[..NVDISASM.find(".L_x_2:").unwrap()];
    assert_eq!(errors_of(&parse(cut)), [] as [&str; 0], "ends with `RET`");
    for end in 0..CUOBJDUMP.len() {
        let _ = parse(&CUOBJDUMP[..end]);
    }
    for end in 0..NVDISASM.len() {
        let _ = parse(&NVDISASM[..end]);
    }
}

// Hand-written: nvdisasm -json with an unknown field, a predicate, a prefix-less two-bracket
// operand and an instruction without operands.
const JSON: &str = r#"[{"SM":{"version":{"major":9,"minor":0}},"Producer":"nvdisasm test","future-field":[1,{"a":"]"}]},
 [{"function-name":"k","start":256,"length":64,"new-key":{"x":[]},
   "sass-instructions":[
     {"opcode":"LDGSTS.E.BYPASS.128","operands":"[R6+0x800][R10.64]"},
     {"predicate":"@!UP0","opcode":"SYNCS.EXCH.64","operands":"URZ,[UR6],UR4","other-attributes":{"inter-warp-barrier":"True"}},
     {"predicate":"@P1","opcode":"BRA","operands":"0x100","other-attributes":{"control-flow":"True"}},
     {"opcode":"MEMBAR.ALL.CTA"}
 ]}]]"#;

#[test]
fn json_listing() {
    assert_eq!(detect(JSON), Some(SassFormat::NvdisasmJson));
    let parsed = parse(JSON);
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    let module = parsed.value;
    assert_eq!(module.producer, Some("nvdisasm test"));
    let k = &module.functions[0];
    assert_eq!(k.arch, Some(Arch { number: 90, suffix: None }));
    let addresses: Vec<u64> = k.instructions.iter().map(|inst| inst.address).collect();
    assert_eq!(addresses, [256, 272, 288, 304]);
    let copy = &k.instructions[0];
    assert_eq!(copy.operands.len(), 2);
    assert_eq!(slice(JSON, copy.operands[0].range), "[R6+0x800]");
    assert_eq!(slice(JSON, copy.operands[1].range), "[R10.64]");
    assert_eq!(k.instructions[1].guard.unwrap().to_string(), "@!UP0");
    assert_eq!(k.instructions[2].branch_target, Some(0x100));
    assert!(k.instructions[3].operands.is_empty());
    assert!(slice(JSON, k.range).starts_with("{\"function-name\""));
}

/// Hand-written, in the shape nvdisasm 13.5 writes for `P2R R0, PR, RZ, 0x4` (689 times in
/// NCCL's `sm_90` cubin): the `PR` operand under "predicate".
#[test]
fn json_p2r_keeps_pr_as_its_operand() {
    let json = r#"[{"SM":{"version":{"major":9,"minor":0}}},[{"function-name":"k","start":0,"length":32,
        "sass-instructions":[{"predicate":"PR","opcode":"P2R","operands":"R0,RZ,0x4"},
        {"predicate":"@P0","opcode":"EXIT"}]}]]"#;
    let parsed = parse_json(json);
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    let p2r = &parsed.value.functions[0].instructions[0];
    assert!(p2r.guard.is_none() && !p2r.malformed);
    let shown: Vec<&str> = p2r.operands.iter().map(|o| slice(json, o.range)).collect();
    assert_eq!(shown, ["R0", "PR", "RZ", "0x4"]);
    assert_eq!(parsed.value.functions[0].instructions[1].guard.unwrap().to_string(), "@P0");
}

#[test]
fn truncated_json_keeps_complete_instructions() {
    let cut = &JSON[..JSON.find("{\"opcode\":\"MEMBAR").unwrap() + 5];
    let parsed = parse_json(cut);
    assert_eq!(errors_of(&parsed), ["the JSON document is truncated here"]);
    assert_eq!(
        opcodes(&parsed.value.functions[0].instructions),
        ["LDGSTS.E.BYPASS.128", "SYNCS.EXCH.64", "BRA"]
    );
    for end in 0..JSON.len() {
        let _ = parse_json(&JSON[..end]);
    }
    let bad = parse_json("{\"not\":\"an array\"}");
    assert!(bad.value.functions.is_empty());
    assert_eq!(errors_of(&bad), ["expected `[` at the start of nvdisasm JSON"]);
    let escaped =
        parse_json(r#"[{},[{"function-name":"k","sass-instructions":[{"opcode":"N\u004fP"}]}]]"#);
    assert_eq!(escaped.value.functions[0].instructions.len(), 1);
    assert!(escaped.value.functions[0].instructions[0].malformed);
    assert_eq!(escaped.errors.len(), 1);
}

#[test]
fn splitter_handles_snippets_and_json() {
    let chunks: Vec<_> = FunctionSplitter::new(SNIPPET.as_bytes()).map(Result::unwrap).collect();
    assert_eq!(chunks.len(), 1);
    assert_eq!(chunks[0].function, "");
    assert_eq!(chunks[0].parse().value.functions[0].instructions.len(), 5);
    let chunks: Vec<_> = FunctionSplitter::new(CUOBJDUMP.as_bytes()).map(Result::unwrap).collect();
    let names: Vec<&str> = chunks.iter().map(|chunk| chunk.function.as_str()).collect();
    assert_eq!(names, ["demo", "second"]);
    assert_eq!(chunks[1].binary.as_deref(), Some("other.cu"));
    assert_eq!(chunks[1].arch, Some(Arch { number: 80, suffix: None }));
    let spaced = format!("\n\n  {JSON}\n");
    let chunks: Vec<_> = FunctionSplitter::new(spaced.as_bytes()).map(Result::unwrap).collect();
    assert_eq!(chunks.len(), 1);
    assert_eq!(chunks[0].format, SassFormat::NvdisasmJson);
    assert_eq!(chunks[0].function, "k");
    assert_eq!(chunks[0].arch, Some(Arch { number: 90, suffix: None }));
    assert_eq!(&spaced[chunks[0].offset as usize..][..chunks[0].text.len()], chunks[0].text);
    let parsed = chunks[0].parse();
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    assert_eq!(parsed.value.functions[0].instructions.len(), 4);
    assert_eq!(FunctionSplitter::new(&b""[..]).count(), 0);
    assert_eq!(FunctionSplitter::new(&b"\n\n   \n"[..]).count(), 0);
}

#[test]
fn splitter_keeps_invalid_utf8() {
    let mut bytes = b"\t\tFunction : k\n        /*0000*/ NOP ; // \xff\xfe\n".to_vec();
    bytes.extend_from_slice(b"\t\t..........\n");
    let chunks: Vec<_> = FunctionSplitter::new(&bytes[..]).map(Result::unwrap).collect();
    assert_eq!(chunks.len(), 1);
    assert!(chunks[0].text.contains('\u{fffd}'));
    assert_eq!(chunks[0].parse().value.functions[0].instructions.len(), 1);
}

/// The call sites of an instruction's inlined code, as a list.
fn sites<'a>(inst: &fencelint_sass::SassInst<'a>) -> Option<Vec<SrcLine<'a>>> {
    inst.inlined_at.as_deref().map(<[_]>::to_vec)
}

#[test]
fn inlined_locations() {
    // Hand-written: the `-gi` chain of markers (two levels of inlining), then a plain marker.
    let text = "//--- .text.k ---
\t//## File \"inner.h\", line 7 inlined at \"outer.h\", line 12
\t//## File \"outer.h\", line 12 inlined at \"k.cu\", line 20
\t//## File \"k.cu\", line 20
        /*0000*/ NOP ;
        /*0010*/ NOP ;
\t//## File \"k.cu\", line 21
        /*0020*/ NOP ;
\t//## File \"inner.h\", line 8 inlined at \"k.cu\", line 22
        /*0030*/ NOP ;
";
    let module = clean(text);
    let insts = &module.functions[0].instructions;
    assert_eq!(insts[0].src_line, Some(SrcLine { file: "inner.h", line: 7 }));
    assert_eq!(
        sites(&insts[0]),
        Some(vec![SrcLine { file: "outer.h", line: 12 }, SrcLine { file: "k.cu", line: 20 }])
    );
    assert_eq!(insts[1].src_line, insts[0].src_line);
    assert!(std::sync::Arc::ptr_eq(
        insts[0].inlined_at.as_ref().unwrap(),
        insts[1].inlined_at.as_ref().unwrap()
    ));
    assert_eq!(insts[2].src_line, Some(SrcLine { file: "k.cu", line: 21 }));
    assert_eq!(insts[2].inlined_at, None);
    // A marker that does not continue the chain starts a new one.
    assert_eq!(insts[3].src_line, Some(SrcLine { file: "inner.h", line: 8 }));
    assert_eq!(sites(&insts[3]), Some(vec![SrcLine { file: "k.cu", line: 22 }]));
}

#[test]
fn constant_and_descriptor_operands_in_context() {
    let text = "/*0000*/ UTCHMMA gdesc[UR8], gdesc[UR10], tmem[UR7], tmem[UR4], idesc[UR5], UP0 ;
/*0010*/ LDC R0, cx[UR4][R0] ;
/*0020*/ DEPBAR {5,4,3,2,1,0} ;
/*0030*/ S2UR UR5, SR_CgaCtaId ;
";
    let module = clean(text);
    let insts = &module.functions[0].instructions;
    let prefixes: Vec<MemPrefix> =
        insts[0].operands.iter().filter_map(|op| op.mem().map(|mem| mem.prefix)).collect();
    assert_eq!(
        prefixes,
        [MemPrefix::Gdesc, MemPrefix::Gdesc, MemPrefix::Tmem, MemPrefix::Tmem, MemPrefix::Idesc]
    );
    let OperandKind::Const(bank) = insts[1].operands[1].kind else { panic!("constant") };
    assert!(matches!(bank.bank, ConstBank::Reg(reg) if reg.reg == Register::new(RegFile::UR, 4)));
    assert_eq!(insts[2].operands[0].kind, OperandKind::Set(0x3f));
    assert_eq!(insts[3].operands[1].kind, OperandKind::Special("SR_CgaCtaId"));
}

#[test]
fn arch_names() {
    assert_eq!(Arch::parse("sm_90a"), Some(Arch { number: 90, suffix: Some('a') }));
    assert_eq!(Arch::parse("compute_100f"), Some(Arch { number: 100, suffix: Some('f') }));
    assert_eq!(Arch::parse("SM90"), Some(Arch { number: 90, suffix: None }));
    assert_eq!(Arch::parse("sm_120").unwrap().to_string(), "sm_120");
    assert_eq!(Arch::parse("sm_"), None);
    assert_eq!(Arch::parse("sm_90ab"), None);
}

/// A sink that records what the parser hands it, to compare with the syntax tree.
#[derive(Default)]
struct Recorder<'a> {
    formats: Vec<SassFormat>,
    expected: Vec<usize>,
    /// Each instruction with its operands put back, per function.
    functions: Vec<(fencelint_sass::SassFunction<'a>, Vec<SassInst<'a>>)>,
    open: Vec<SassInst<'a>>,
    encodings: usize,
}

impl<'a> fencelint_sass::ListingSink<'a> for Recorder<'a> {
    fn listing(&mut self, format: SassFormat) {
        self.formats.push(format);
    }

    fn open_function(&mut self, expected: usize) {
        self.expected.push(expected);
    }

    fn instruction(&mut self, mut inst: SassInst<'a>, operands: &[fencelint_sass::Operand<'a>]) {
        assert!(inst.operands.is_empty(), "operands come beside the instruction");
        inst.operands = operands.to_vec();
        self.open.push(inst);
    }

    fn extend_encoding(&mut self, range: fencelint_source::TextRange) {
        self.encodings += 1;
        if let Some(inst) = self.open.last_mut() {
            inst.encoding = Some(inst.encoding.map_or(range, |old| old.cover(range)));
        }
    }

    fn close_function(&mut self, function: fencelint_sass::SassFunction<'a>) {
        assert!(function.instructions.is_empty(), "instructions went to the sink");
        self.functions.push((function, std::mem::take(&mut self.open)));
    }
}

#[test]
fn a_sink_receives_what_the_tree_holds() {
    // Hand-written: a cuobjdump listing (two-line encodings) and an nvdisasm one (labels).
    let nvdisasm = "\t.target\tsm_90a\n\t.section\t.text.k,\"ax\",@progbits\nk:\n        /*0000*/                   BRA `(.L_x_1) ;\n.L_x_0:\n        /*0010*/                   LDG.E.STRONG.GPU R0, desc[UR4][R2.64] ;\n.L_x_1:\n        /*0020*/               @P0 BRA `(.L_x_0) ;\n        /*0030*/                   EXIT ;\n.L_x_2:\n";
    for text in [CUOBJDUMP, nvdisasm] {
        let tree = parse_text(text);
        let mut sink = Recorder::default();
        let errors = fencelint_sass::parse_text_into(text, &mut sink);
        assert_eq!(errors, tree.errors);
        assert_eq!(sink.formats, vec![tree.value.format], "told the format once, first");
        assert_eq!(sink.functions.len(), tree.value.functions.len());
        assert_eq!(
            sink.expected,
            vec![0; tree.value.functions.len()],
            "a listing, not one function"
        );
        for ((header, insts), func) in sink.functions.iter().zip(&tree.value.functions) {
            assert_eq!(
                (header.name, header.arch, header.range),
                (func.name, func.arch, func.range)
            );
            assert_eq!(header.labels, func.labels, "labels have their addresses");
            // The tree resolves label targets; the sink is left the labels to do it.
            let unresolved: Vec<_> = func
                .instructions
                .iter()
                .map(|inst| SassInst { branch_target: None, ..inst.clone() })
                .collect();
            let given: Vec<_> =
                insts.iter().map(|inst| SassInst { branch_target: None, ..inst.clone() }).collect();
            assert_eq!(given, unresolved);
            for (inst, tree_inst) in insts.iter().zip(&func.instructions) {
                if inst.branch_target.is_some() {
                    assert_eq!(inst.branch_target, tree_inst.branch_target, "numeric targets");
                }
            }
        }
        let two_lines = text == CUOBJDUMP;
        assert_eq!(sink.encodings > 0, two_lines, "cuobjdump's second encoding lines");
    }
    let one = fencelint_sass::split_functions(CUOBJDUMP);
    let chunk = &one[0];
    let mut sink = Recorder::default();
    fencelint_sass::parse_function_text_into(chunk.text(), chunk.arch, &mut sink);
    assert!(sink.expected[0] > 0, "one function: its size is expected");
}

/// The control bits of a 128-bit encoding's high word (measured: `fixtures/compiled/sm_100a/
/// tcgen05.cuobjdump.sass`, `tmem_ld_wait_then_arrive`): `LDTM R5, tmem[UR7]` releases
/// scoreboard 1 when its registers are written (and waits on scoreboard 1 itself, for the
/// `LDS` that loaded the tensor-memory base), the `NOP` that `tcgen05.wait::ld` became waits
/// on scoreboard 1, and the `NOP` before it waits on nothing.
#[test]
fn control_bits_name_the_scoreboards() {
    use fencelint_sass::control_bits;
    let ldtm = control_bits("/* 0x002e620008040000 */").unwrap();
    assert_eq!((ldtm >> 5) & 7, 1, "write scoreboard");
    assert_eq!((ldtm >> 8) & 7, 7, "no read scoreboard");
    assert_eq!((ldtm >> 11) & 0x3f, 0b10, "waits on SB1");
    let wait = control_bits("/* 0x002fe20000000000 */").unwrap();
    assert_eq!((wait >> 5) & 7, 7, "no write scoreboard");
    assert_eq!((wait >> 11) & 0x3f, 0b10, "waits on SB1");
    let plain = control_bits("/* 0x000fe20000000000 */").unwrap();
    assert_eq!((plain >> 11) & 0x3f, 0, "waits on nothing");
    // Not a full 64-bit word, or more digits than one: no control bits.
    assert_eq!(control_bits("/* 0x2fe20000000000 */"), None);
    assert_eq!(control_bits("/* 0x002fe200000000001 */"), None);
    assert_eq!(control_bits("no word"), None);
}
