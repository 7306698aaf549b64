//! Unit tests of the SASS lowering on hand-written listings (tiny, in the shapes the
//! disassemblers print).

use fencelint_ir::{
    AddrBase, AluOp, AsyncOp, Barrier, Fence, FenceKind, Function, InstId, InstKind, IntCompare,
    MbarrierOp, Module, Relation, Scope, Sem, Space, Tcgen05Op, ValueOp,
};
use fencelint_sass::SassFormat;
use fencelint_source::FileId;

use super::lower_text;

fn lower(text: &str, format: SassFormat) -> Vec<Module> {
    let lowered = lower_text(FileId(0), text, format, 0);
    assert!(lowered.diagnostics.is_empty(), "{:#?}", lowered.diagnostics);
    lowered.modules
}

fn only_function(modules: &[Module]) -> &Function {
    assert_eq!(modules.len(), 1);
    assert_eq!(modules[0].functions.len(), 1);
    &modules[0].functions[0]
}

fn names(func: &Function, regs: &[fencelint_ir::Reg]) -> Vec<String> {
    regs.iter().map(|r| func.reg_name(*r).to_owned()).collect()
}

/// The register of `func` named `name`.
fn reg_named(func: &Function, name: &str) -> fencelint_ir::Reg {
    let index = func.regs.iter().position(|r| r == name).unwrap_or_else(|| panic!("no {name}"));
    fencelint_ir::Reg(index as u32)
}

/// The value of each instruction of `func`, in order.
fn values_of(func: &Function) -> Vec<Option<ValueOp>> {
    func.insts.iter().map(|i| i.value.clone()).collect()
}

const SPIN: &str = "
	code for sm_90a
	.target	sm_90a

		Function : poll
	.headerflags	@\"EF_CUDA_ACCELERATORS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)\"
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   LDC.64 R2, c[0x0][0x210] ;
        /*0020*/                   ULDC.64 UR4, c[0x0][0x208] ;
        /*0030*/                   LDG.E.STRONG.GPU R0, desc[UR4][R2.64] ;
        /*0040*/                   ISETP.NE.AND P0, PT, R0, RZ, PT ;
        /*0050*/              @!P0 BRA 0x30 ;
        /*0060*/                   S2R R7, SR_TID.X ;
        /*0070*/                   LDC.64 R4, c[0x0][0x218] ;
        /*0080*/                   IMAD.WIDE.U32 R4, R7, 0x4, R4 ;
        /*0090*/                   LDG.E.128 R8, desc[UR4][R4.64+0x10] ;
        /*00a0*/                   STG.E.128 desc[UR4][R4.64], R8 ;
        /*00b0*/                   EXIT ;
        /*00c0*/                   BRA 0xc0;
		..........
";

#[test]
fn spin_poll_listing() {
    let modules = lower(SPIN, SassFormat::CuobjdumpText);
    assert_eq!(modules[0].target.as_deref(), Some("sm_90a"));
    assert_eq!(modules[0].dialect, Some(fencelint_source::Dialect::Sass));
    let f = only_function(&modules);
    assert_eq!(f.name, "poll");
    assert_eq!(f.insts.len(), 13);

    let ldc = &f.insts[1];
    assert_eq!(names(f, &ldc.defs), ["R2", "R3"]);
    assert_eq!(ldc.value, Some(ValueOp::Param("c[0x0][0x210]".into())));
    let InstKind::Load(mem) = &ldc.kind else { panic!("{:?}", ldc.kind) };
    assert_eq!(mem.space, Space::Const);

    let poll = &f.insts[3];
    assert_eq!(poll.opcode, "LDG.E.STRONG.GPU");
    assert_eq!(poll.sass_address, Some(0x30));
    let InstKind::Load(mem) = &poll.kind else { panic!() };
    assert_eq!((mem.space, mem.sem, mem.scope), (Space::Global, Sem::Relaxed, Some(Scope::Gpu)));
    assert_eq!(names(f, &poll.defs), ["R0"]);
    assert_eq!(names(f, &poll.uses), ["UR4", "R2", "R3"]);
    let address = poll.address.as_ref().unwrap();
    assert_eq!(
        address.base,
        AddrBase::Reg(
            f.regs.iter().position(|r| r == "R2").map(|i| fencelint_ir::Reg(i as u32)).unwrap()
        )
    );

    let setp = &f.insts[4];
    assert_eq!(setp.kind, InstKind::Compare);
    assert_eq!(names(f, &setp.defs), ["P0"]);
    assert_eq!(names(f, &setp.uses), ["R0"]);

    let branch = &f.insts[5];
    assert_eq!(branch.kind, InstKind::Branch);
    assert!(branch.guard.is_some_and(|g| g.negated));
    assert_eq!(branch.control.targets, [InstId(3)]);
    assert!(branch.control.falls_through);

    let wide = &f.insts[8];
    assert_eq!(names(f, &wide.defs), ["R4", "R5"]);
    let data = &f.insts[9];
    assert_eq!(names(f, &data.defs), ["R8", "R9", "R10", "R11"]);
    assert_eq!(data.address.as_ref().unwrap().offset, 0x10);
    let store = &f.insts[10];
    assert!(store.defs.is_empty());
    assert_eq!(names(f, &store.uses), ["UR4", "R4", "R5", "R8", "R9", "R10", "R11"]);

    let exit = &f.insts[11];
    assert!(exit.control.exits && !exit.control.falls_through);
    let self_loop = &f.insts[12];
    assert_eq!(self_loop.control.targets, [InstId(12)]);
    assert!(!self_loop.control.falls_through);
}

#[test]
fn never_guard_is_dropped_and_targets_move_on() {
    let text = "
		Function : k
        /*0000*/                   BRA 0x20 ;
        /*0010*/                   NOP ;
        /*0020*/               @!PT LDS RZ, [RZ] ;
        /*0030*/               @PT LDGSTS.E [R5], desc[UR4][R2.64] ;
        /*0040*/                   EXIT ;
		..........
";
    let modules = lower(text, SassFormat::CuobjdumpText);
    let f = only_function(&modules);
    let opcodes: Vec<&str> = f.insts.iter().map(|i| i.opcode.as_str()).collect();
    assert_eq!(opcodes, ["BRA", "NOP", "LDGSTS.E", "EXIT"]);
    assert_eq!(f.insts[0].control.targets, [InstId(2)]);
    assert!(!f.insts[0].control.falls_through);
    assert!(f.insts[2].guard.is_none());
    assert_eq!(f.insts[2].kind, InstKind::Async(AsyncOp::CpAsync));
}

#[test]
fn uniform_branch_condition_becomes_the_guard() {
    let text = "
		Function : k
        /*0000*/                   VOTEU.ALL UP0, P0 ;
        /*0010*/                   BRA.U !UP0, 0x30 ;
        /*0020*/                   SYNCS.EXCH.64 URZ, [UR6], UR4 ;
        /*0030*/                   BRA.CONV ~URZ, 0x50 ;
        /*0040*/                   UCGABAR_ARV ;
        /*0050*/                   EXIT ;
		..........
";
    let modules = lower(text, SassFormat::CuobjdumpText);
    let f = only_function(&modules);
    let vote = &f.insts[0];
    assert_eq!(names(f, &vote.defs), ["UP0"]);
    assert_eq!(names(f, &vote.uses), ["P0"]);
    let branch = &f.insts[1];
    let guard = branch.guard.unwrap();
    assert!(guard.negated);
    assert_eq!(f.reg_name(guard.reg), "UP0");
    assert!(branch.control.falls_through);
    assert_eq!(branch.control.targets, [InstId(3)]);
    assert_eq!(f.insts[2].kind, InstKind::Mbarrier(MbarrierOp::Init));
    assert!(f.insts[2].defs.is_empty());
    assert!(f.insts[3].control.falls_through, "BRA.CONV is conditional");
    assert_eq!(f.insts[4].kind, InstKind::Barrier(Barrier::ClusterArrive { release: false }));
}

#[test]
fn moves_and_adds_are_followed() {
    let text = "
		Function : k
        /*0000*/                   IMAD.MOV.U32 R2, RZ, RZ, c[0x0][0x160] ;
        /*0010*/                   MOV R3, c[0x0][0x164] ;
        /*0020*/                   IADD3 R4, P0, PT, R2, 0x10, RZ ;
        /*0030*/                   VIADD R6, R4, 0x8 ;
        /*0040*/                   R2UR UR4, R6 ;
        /*0050*/                   IMAD.MOV.U32 R7, RZ, RZ, -R2 ;
        /*0060*/                   UMOV UR5, 0x400 ;
        /*0070*/                   LDC R8, c[0x4][0x8] ;
        /*0080*/                   IADD3 R9, R2, R3, RZ ;
		..........
";
    let modules = lower(text, SassFormat::CuobjdumpText);
    let f = only_function(&modules);
    let reg = |name: &str| reg_named(f, name);
    assert_eq!(f.insts[0].value, Some(ValueOp::Param("c[0x0][0x160]".into())));
    assert_eq!(f.insts[1].value, Some(ValueOp::Param("c[0x0][0x164]".into())));
    assert_eq!(names(f, &f.insts[2].defs), ["R4", "P0"]);
    assert_eq!(f.insts[2].value, Some(ValueOp::AddImm(reg("R2"), 0x10)));
    assert_eq!(f.insts[3].value, Some(ValueOp::AddImm(reg("R4"), 8)));
    assert_eq!(f.insts[4].value, Some(ValueOp::Copy(reg("R6"))));
    assert_eq!(f.insts[5].value, None);
    assert_eq!(f.insts[6].value, Some(ValueOp::Imm(0x400)));
    assert_eq!(f.insts[7].value, Some(ValueOp::SymbolAddr("c[0x4][0x8]".into())));
    assert_eq!(f.insts[8].value, None);
}

/// A multiply by one plus zero holds its source (in the low register of a `.WIDE`); the high
/// word of a product, one with a carry in, and other multipliers do not.
#[test]
fn multiplies_by_one_hold_their_source() {
    let text = "
		Function : k
        /*0000*/                   UPOPC UR6, UR5 ;
        /*0010*/                   UIMAD.WIDE.U32 UR6, UR6, 0x1, URZ ;
        /*0020*/                   IMAD.U32 R8, RZ, RZ, UR6 ;
        /*0030*/                   IMAD R9, R3, 0x1, RZ ;
        /*0040*/                   IMAD.HI.U32 R10, R3, 0x1, RZ ;
        /*0050*/                   IMAD.X R11, R3, 0x1, RZ, P0 ;
        /*0060*/                   IMAD R12, R3, 0x2, RZ ;
        /*0070*/                   IMAD R13, R3, 0x1, R4 ;
        /*0080*/                   IMAD R14, R3, -0x1, RZ ;
		..........
";
    let modules = lower(text, SassFormat::CuobjdumpText);
    let f = only_function(&modules);
    let reg = |name: &str| reg_named(f, name);
    let values = values_of(f);
    assert_eq!(values[0], Some(ValueOp::PopCount(reg("UR5"))));
    assert_eq!(names(f, &f.insts[1].defs), ["UR6", "UR7"]);
    assert_eq!(values[1], Some(ValueOp::TimesOne(reg("UR6"))));
    assert_eq!(values[2], Some(ValueOp::TimesOne(reg("UR6"))));
    assert_eq!(values[3], Some(ValueOp::TimesOne(reg("R3"))));
    assert_eq!(values[4..], [None, None, None, None, None]);
}

#[test]
fn comparisons_with_a_constant_or_a_register() {
    let text = "
		Function : k
        /*0000*/                   ISETP.NE.AND P0, PT, R2, RZ, PT ;
        /*0010*/                   ISETP.GE.U32.AND P1, PT, R3, 0x4, PT ;
        /*0020*/                   ISETP.NE.AND P0, PT, RZ, UR4, PT ;
        /*0030*/                   UISETP.LT.AND UP0, UPT, UR5, -0x1, UPT ;
        /*0040*/                   ISETP.NE.AND P0, P1, R2, RZ, PT ;
        /*0050*/                   ISETP.NE.AND P0, PT, R2, RZ, P2 ;
        /*0060*/                   ISETP.NE.AND P0, PT, R2, RZ, !PT ;
        /*0070*/                   ISETP.NE.OR P0, PT, R2, RZ, PT ;
        /*0080*/                   ISETP.NE.AND.EX P0, PT, R3, RZ, PT, P0 ;
        /*0090*/                   ISETP.NE.AND P0, PT, R2, R3, PT ;
        /*00a0*/                   ISETP.NE.AND P0, PT, R2, c[0x0][0x160], PT ;
        /*00b0*/                   ISETP.NE.AND P0, PT, -R2, RZ, PT ;
        /*00c0*/                   ISETP.EQ.U32.OR P0, PT, R198, -0x800001, !P0 ;
        /*00d0*/                   ISETP.LT.U32.OR P0, PT, R9, UR6, !P0 ;
		..........
";
    let modules = lower(text, SassFormat::CuobjdumpText);
    let f = only_function(&modules);
    let reg = |name: &str| reg_named(f, name);
    let compare = |relation, signed| IntCompare { relation, signed, bits: 32 };
    assert_eq!(f.insts[0].value, Some(ValueOp::Compare(compare(Relation::Ne, true), reg("R2"), 0)));
    assert_eq!(
        f.insts[1].value,
        Some(ValueOp::Compare(compare(Relation::Ge, false), reg("R3"), 4))
    );
    // The constant first: the relation is swapped (`0 != UR4` is `UR4 != 0`).
    assert_eq!(
        f.insts[2].value,
        Some(ValueOp::Compare(compare(Relation::Ne, true), reg("UR4"), 0))
    );
    assert_eq!(
        f.insts[3].value,
        Some(ValueOp::Compare(compare(Relation::Lt, true), reg("UR5"), -1))
    );
    // `.EX`: the high half of a 64-bit comparison, with the low halves' predicate.
    assert_eq!(
        f.insts[8].value,
        Some(ValueOp::CompareHigh {
            compare: compare(Relation::Ne, true),
            high: reg("R3"),
            bound: 0,
            low: reg("P0"),
        })
    );
    // A combining predicate: the comparison joined to it.
    assert_eq!(
        f.insts[5].value,
        Some(ValueOp::CompareJoined {
            compare: compare(Relation::Ne, true),
            src: reg("R2"),
            bound: 0,
            other: reg("P2"),
            negated: false,
            or: false,
        })
    );
    assert_eq!(
        f.insts[12].value,
        Some(ValueOp::CompareJoined {
            compare: compare(Relation::Eq, false),
            src: reg("R198"),
            bound: -0x80_0001,
            other: reg("P0"),
            negated: true,
            or: true,
        })
    );
    // Two registers, alone and joined; a constant-bank slot stands as a register named as it.
    assert_eq!(
        f.insts[9].value,
        Some(ValueOp::CompareRegs(compare(Relation::Ne, true), reg("R2"), reg("R3")))
    );
    assert_eq!(
        f.insts[10].value,
        Some(ValueOp::CompareRegs(compare(Relation::Ne, true), reg("R2"), reg("c[0x0][0x160]")))
    );
    assert_eq!(
        f.insts[13].value,
        Some(ValueOp::CompareRegsJoined {
            compare: compare(Relation::Lt, false),
            a: reg("R9"),
            b: reg("UR6"),
            other: reg("P0"),
            negated: true,
            or: true,
        })
    );
    // A second destination, `!PT`, `OR` with `PT`, a negated source: no comparison.
    for (i, inst) in
        f.insts.iter().enumerate().skip(4).filter(|&(i, _)| ![5, 8, 9, 10, 12, 13].contains(&i))
    {
        assert_eq!(inst.value, None, "{i} {}", inst.opcode);
    }
}

/// `HFMA2.MMA Rd, -RZ, RZ, a, b` writes the constant whose halves are `a` and `b`.
#[test]
fn hfma2_writes_a_constant() {
    let text = "
		Function : k
        /*0000*/                   HFMA2.MMA R5, -RZ, RZ, 0, 5.9604644775390625e-08 ;
        /*0010*/                   HFMA2.MMA R6, -RZ, RZ, 0, 0 ;
        /*0020*/                   HFMA2 R7, -RZ, RZ, 1.875, -65504 ;
        /*0030*/                   HFMA2.MMA R8, -RZ, RZ, 0, 0.1 ;
        /*0040*/                   HFMA2 R9, R2, R3, 0, 1 ;
		..........
";
    let modules = lower(text, SassFormat::CuobjdumpText);
    let f = only_function(&modules);
    assert_eq!(f.insts[0].value, Some(ValueOp::Imm(1)));
    assert_eq!(f.insts[1].value, Some(ValueOp::Imm(0)));
    assert_eq!(f.insts[2].value, Some(ValueOp::Imm(0x3f80_fbff)));
    // 0.1 is no half; the operands are not zero.
    assert_eq!(f.insts[3].value, None);
    assert_eq!(f.insts[4].value, None);
}

/// `PLOP3.LUT` carries its table, with inverted and constant inputs folded in: `P1 && !P2 &&
/// PT` is a function of `P1` and `P2` alone, `PT && PT && PT` the constant true, and a second
/// destination that is a predicate gives no value.
#[test]
fn plop3_folds_inversions_and_constants_into_its_table() {
    let text = "
		Function : k
        /*0000*/                   PLOP3.LUT P0, PT, P1, !P2, PT, 0x80, 0x0 ;
        /*0010*/                   PLOP3.LUT P3, PT, PT, PT, PT, 0x80, 0x0 ;
        /*0020*/                   PLOP3.LUT P4, PT, P1, P2, !PT, 0xfe, 0x0 ;
        /*0030*/                   PLOP3.LUT P5, P6, P1, P2, PT, 0x80, 0x8 ;
		..........
";
    let modules = lower(text, SassFormat::CuobjdumpText);
    let f = only_function(&modules);
    let table = |i: usize| match f.insts[i].value {
        Some(ValueOp::PredTable { inputs, table }) => (names(f, &inputs), table),
        ref other => panic!("{i}: {other:?}"),
    };
    // Rows `4a + 2b + c`: true where `a` is set and `b` clear, whatever `c` (which repeats `a`).
    assert_eq!(table(0), (vec!["P1".to_owned(), "P2".to_owned(), "P1".to_owned()], 0x30));
    assert_eq!(table(1).1, 0xff);
    // `a || b || false`.
    assert_eq!(table(2), (vec!["P1".to_owned(), "P2".to_owned(), "P1".to_owned()], 0xfc));
    assert_eq!(f.insts[3].value, None);
}

/// `CS2R Rd, SRZ` zeroes a register pair; `CS2R.32` one register.
#[test]
fn cs2r_writes_a_pair() {
    let text = "
		Function : k
        /*0000*/                   CS2R R24, SRZ ;
        /*0010*/                   CS2R.32 R4, SR_CLOCKLO ;
		..........
";
    let modules = lower(text, SassFormat::CuobjdumpText);
    let f = only_function(&modules);
    assert_eq!(names(f, &f.insts[0].defs), ["R24", "R25"]);
    assert_eq!(names(f, &f.insts[1].defs), ["R4"]);
}

#[test]
fn masks_by_a_constant() {
    let text = "
		Function : k
        /*0000*/                   LOP3.LUT R7, R11, 0x3fffffff, RZ, 0xc0, !PT ;
        /*0010*/                   ULOP3.LUT UR4, UR5, 0xff, URZ, 0xc0, !UPT ;
        /*0020*/                   LOP3.LUT R7, R11.reuse, 0x3fffffff, RZ, 0x40, !PT ;
        /*0030*/                   LOP3.LUT R7, R11, 0x3fffffff, RZ, 0xfc, !PT ;
        /*0040*/                   LOP3.LUT R7, R11, R12, RZ, 0xc0, !PT ;
        /*0050*/                   LOP3.LUT R7, R11, 0x3fffffff, R12, 0xc0, !PT ;
        /*0060*/                   LOP3.LUT P0, RZ, R11, 0x3, RZ, 0xc0, !PT ;
        /*0070*/                   LOP3.LUT R7, ~R11, 0x3fffffff, RZ, 0xc0, !PT ;
        /*0080*/                   LOP3.LUT P0, R6, R0, 0xc0000000, RZ, 0xc0, !PT ;
		..........
";
    let modules = lower(text, SassFormat::CuobjdumpText);
    let f = only_function(&modules);
    let reg = |name: &str| reg_named(f, name);
    assert_eq!(f.insts[0].value, Some(ValueOp::AndImm(reg("R11"), 0x3fff_ffff)));
    assert_eq!(f.insts[1].value, Some(ValueOp::AndImm(reg("UR5"), 0xff)));
    // `0x40` is `a & b & !c`, the same function when the third input is zero.
    assert_eq!(f.insts[2].value, Some(ValueOp::AndImm(reg("R11"), 0x3fff_ffff)));
    // Two registers.
    assert_eq!(f.insts[4].value, Some(ValueOp::And(reg("R11"), reg("R12"))));
    // A predicate destination first: the predicate says whether the `and` is non-zero, and
    // both destinations are written.
    assert_eq!(f.insts[6].value, Some(ValueOp::AndImm(reg("R11"), 3)));
    assert_eq!(names(f, &f.insts[6].defs), ["P0"]);
    assert_eq!(f.insts[8].value, Some(ValueOp::AndImm(reg("R0"), 0xc000_0000)));
    assert_eq!(names(f, &f.insts[8].defs), ["P0", "R6"]);
    assert_eq!(names(f, &f.insts[8].uses), ["R0"]);
    // An `or`, a third input, an inverted source.
    for i in [3, 5, 7] {
        assert_eq!(f.insts[i].value, None, "{i} {}", f.insts[i].opcode);
    }
}

/// The facts that rules read instead of opcode text: counts and ballots of lanes, permutes,
/// values that vary, the parts of an emulated atomic, atomic adds, and the families of tests and
/// logic.
#[test]
fn value_and_alu_facts() {
    let text = "
		Function : k
        /*0000*/                   VOTEU.ANY UR6, UPT, PT ;
        /*0010*/                   VOTE.ANY R4, PT, P0 ;
        /*0020*/                   POPC R7, UR6 ;
        /*0030*/                   PRMT R0, RZ, 0x7610, R0 ;
        /*0040*/                   S2R R8, SR_TID.X ;
        /*0050*/                   CS2R R10, SR_CLOCKLO ;
        /*0060*/                   CS2R R12, SRZ ;
        /*0070*/                   SHFL.IDX PT, R14, R13, RZ, 0x1f ;
        /*0080*/                   QSPC.E.S P0, RZ, [R2.64] ;
        /*0090*/                   QSPC.E.D P1, RZ, [R2.64] ;
        /*00a0*/                   ATOMS.CAST.SPIN P2, [R5], R6, R7 ;
        /*00b0*/                   ATOMG.E.ADD.STRONG.GPU PT, R15, desc[UR4][R18.64], R22 ;
        /*00c0*/                   ATOMG.E.ADD.STRONG.GPU PT, R15, desc[UR4][R18.64], RZ ;
        /*00d0*/                   ATOMG.E.EXCH.STRONG.GPU PT, R15, desc[UR4][R18.64], R22 ;
        /*00e0*/                   ISETP.NE.AND P3, PT, R15, RZ, PT ;
        /*00f0*/                   FSETP.NEU.FTZ.AND P4, PT, R15, RZ, PT ;
        /*0100*/                   HSET2.BF.EQ.AND R16, R17.H0_H0, -65504, -65504, PT ;
        /*0110*/                   LOP3.LUT R18, R19, R20, RZ, 0xfc, !PT ;
        /*0120*/                   SEL R21, RZ, 0x1, !P4 ;
        /*0130*/                   IADD3 R23, R21, 0x1, RZ ;
        /*0140*/                   PRMT R24, R25, 0x9910, RZ ;
        /*0150*/                   PRMT R26, R25, 0x7632, R25 ;
        /*0160*/                   PRMT R27, R25, 0x5410, R28 ;
        /*0170*/                   PRMT R29, R25, R30, RZ ;
        /*0180*/                   SHF.R.U32.HI R31, RZ, 0x8, R30 ;
        /*0190*/                   SHF.R.U32.HI R31, R2, 0x8, R30 ;
        /*01a0*/                   EXIT ;
		..........
";
    let modules = lower(text, SassFormat::CuobjdumpText);
    let f = only_function(&modules);
    let reg = |name: &str| reg_named(f, name);
    let values = values_of(f);
    assert_eq!(values[0], Some(ValueOp::ActiveLanes));
    // The ballot of another predicate is not the active lanes.
    assert_eq!(values[1], None);
    assert_eq!(values[2], Some(ValueOp::PopCount(reg("UR6"))));
    // Bytes 2 and 3 of `R0` over constant zero bytes.
    assert_eq!(values[3], Some(ValueOp::BytePermute { src: Some(reg("R0")), bytes: 0b1100 }));
    // The low half (sign-extended), the high half of one register; two registers; a selector in
    // a register.
    assert_eq!(values[20], Some(ValueOp::BytePermute { src: Some(reg("R25")), bytes: 0b0011 }));
    assert_eq!(values[21], Some(ValueOp::BytePermute { src: Some(reg("R25")), bytes: 0b1100 }));
    assert_eq!(values[22], Some(ValueOp::BytePermute { src: None, bytes: 0 }));
    assert_eq!(values[23], Some(ValueOp::BytePermute { src: None, bytes: 0 }));
    // A shift right by a constant; a funnel shift of two registers is not one.
    assert_eq!(values[24], Some(ValueOp::ShrImm(reg("R30"), 8)));
    assert_eq!(values[25], None);
    assert_eq!(values[4], Some(ValueOp::Varying));
    assert_eq!(values[5], Some(ValueOp::Varying));
    assert_eq!(values[6], None, "CS2R of SRZ zeroes");
    // Another lane's `R13`; one of two constants.
    assert_eq!(values[7], Some(ValueOp::Shuffle(reg("R13"))));
    assert_eq!(values[18], Some(ValueOp::Either(0, 1)));
    assert_eq!(values[8], Some(ValueOp::InSpace(Space::SharedCta)));
    assert_eq!(values[9], Some(ValueOp::InSpace(Space::SharedCluster)));
    assert_eq!(values[10], Some(ValueOp::RetriedSwap));
    assert!(matches!(f.insts[10].kind, InstKind::Atomic { returns: false, .. }));
    assert_eq!(values[11], Some(ValueOp::FetchAddReg(reg("R22"))));
    assert_eq!(values[12], None, "an add of RZ");
    assert_eq!(values[13], None, "an exchange");
    let alu: Vec<Option<AluOp>> = f.insts.iter().map(|i| i.alu).collect();
    assert_eq!(
        alu[14..],
        [
            Some(AluOp::IntCompare),
            Some(AluOp::FloatCompare),
            Some(AluOp::FloatSet),
            Some(AluOp::BitLogic),
            Some(AluOp::Select),
            Some(AluOp::Add),
            None,
            None,
            None,
            None,
            None,
            None,
            None,
        ]
    );
}

#[test]
fn scoreboard_waits_and_fences() {
    let text = "
		Function : k
        /*0000*/                   DEPBAR.LE SB0, 0x1 ;
        /*0010*/                   DEPBAR.LE SB1, 0x36 ;
        /*0020*/                   DEPBAR {5,4,3,2,1,0} ;
        /*0030*/                   MEMBAR.ALL.GPU ;
        /*0040*/                   ERRBAR;
        /*0050*/                   CCTL.IVALL ;
        /*0060*/                   FENCE.VIEW.ASYNC.S ;
        /*0070*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR6+0x8], R2 ;
        /*0080*/                   ATOMG.E.ADD.STRONG.GPU PT, R5, desc[UR4][R4.64], R9 ;
        /*0090*/                   UNKNOWNOP.X R1, R2 ;
        /*00a0*/                   UTCBAR [UR4], URZ ;
        /*00b0*/                   UTCBAR.MULTICAST [UR6], URZ, UR5 ;
		..........
";
    let modules = lower(text, SassFormat::CuobjdumpText);
    let f = only_function(&modules);
    assert_eq!(
        f.insts[0].kind,
        InstKind::Async(AsyncOp::BulkWait { pending: Some(1), read_only: false })
    );
    assert_eq!(f.insts[1].kind, InstKind::Other);
    assert_eq!(f.insts[2].kind, InstKind::Other);
    assert_eq!(
        f.insts[3].kind,
        InstKind::Fence(Fence {
            kind: FenceKind::Plain,
            sem: Sem::AcqRel,
            scope: Some(Scope::Gpu)
        })
    );
    assert!(matches!(
        f.insts[4].kind,
        InstKind::Fence(Fence { kind: FenceKind::ErrorBarrier, .. })
    ));
    assert!(matches!(
        f.insts[5].kind,
        InstKind::Fence(Fence { kind: FenceKind::L1Invalidate, .. })
    ));
    assert!(matches!(
        f.insts[6].kind,
        InstKind::Fence(Fence { kind: FenceKind::ProxyAsync(Some(Space::SharedCta)), .. })
    ));
    let wait = &f.insts[7];
    assert!(matches!(wait.kind, InstKind::Mbarrier(MbarrierOp::Wait { try_wait: true, .. })));
    assert_eq!(names(f, &wait.defs), ["P1"]);
    assert_eq!(wait.address.as_ref().unwrap().offset, 8);
    let atom = &f.insts[8];
    assert!(matches!(atom.kind, InstKind::Atomic { returns: true, .. }));
    assert_eq!(names(f, &atom.defs), ["R5"]);
    assert_eq!(names(f, &atom.uses), ["UR4", "R4", "R5", "R9"]);
    let unknown = &f.insts[9];
    assert_eq!((unknown.kind.clone(), unknown.opcode.as_str()), (InstKind::Other, "UNKNOWNOP.X"));
    assert_eq!(names(f, &unknown.defs), ["R1"]);
    // A commit to the CTA's own barrier, and one multicast to the CTAs a mask names.
    assert_eq!(f.insts[10].kind, InstKind::Tcgen05(Tcgen05Op::Commit { multicast: false }));
    assert_eq!(f.insts[11].kind, InstKind::Tcgen05(Tcgen05Op::Commit { multicast: true }));
}

#[test]
fn nvdisasm_text_lines_labels_and_kernels() {
    let text = "
//--------------------- .text.poll              --------------------------
	.section	.text.poll,\"ax\",@progbits
	.align	128
        .global         poll
        .type           poll,@function
        .size           poll,(.L_x_2 - poll)
        .other          poll,@\"STO_CUDA_ENTRY STV_DEFAULT\"
poll:
.text.poll:
	//## File \".nv_debug_ptx_txt\", line 39
        /*0000*/                   LDC.64 R2, c[0x0][0x210] ;
.L_x_1:
	//## File \".nv_debug_ptx_txt\", line 40
        /*0010*/                   LD.E.STRONG.GPU R0, desc[UR4][R2.64] ;
        /*0020*/                   ISETP.NE.AND P0, PT, R0, RZ, PT ;
        /*0030*/              @!P0 BRA `(.L_x_1) ;
        /*0040*/                   EXIT ;
.L_x_2:
";
    let modules = lower(text, SassFormat::NvdisasmText);
    let f = only_function(&modules);
    assert!(f.is_kernel);
    assert_eq!(f.insts[0].ptx_line, Some(39));
    assert_eq!(f.insts[1].ptx_line, Some(40));
    assert_eq!(f.insts[3].control.targets, [InstId(1)]);
    let InstKind::Load(mem) = &f.insts[1].kind else { panic!() };
    assert_eq!(mem.space, Space::Generic);
}

#[test]
fn json_listing() {
    let text = r#"[{"ELF":{},"SM":{"version":{"major":9,"minor":0}},"Producer":"nvdisasm V13.5.37"},[{"function-name":"k","start":0,"length":64,"other-attributes":[],"sass-instructions":[{"opcode":"LDC.64","operands":"R2,c[0x0][0x210]"},{"opcode":"LDG.E.STRONG.SYS","operands":"R0,desc[UR4][R2.64]"},{"predicate":"@!P0","opcode":"BRA","operands":"0x10","other-attributes":{"control-flow":"True"}},{"opcode":"EXIT","other-attributes":{"control-flow":"True"}}]}]]"#;
    let modules = lower(text, SassFormat::NvdisasmJson);
    assert_eq!(modules[0].target.as_deref(), Some("sm_90"));
    assert_eq!(modules[0].producer.as_deref(), Some("nvdisasm V13.5.37"));
    let f = only_function(&modules);
    assert_eq!(f.insts[1].sass_address, Some(0x10));
    assert_eq!(f.insts[2].control.targets, [InstId(1)]);
    let InstKind::Load(mem) = &f.insts[1].kind else { panic!() };
    assert_eq!((mem.sem, mem.scope), (Sem::Relaxed, Some(Scope::Sys)));
}

#[test]
fn one_module_per_architecture_section() {
    let text = "
Fatbin elf code:
================
arch = sm_90a
code version = [1,8]
host = linux
compile_size = 64bit
identifier = demo.cu

	code for sm_90a
		Function : a
        /*0000*/                   EXIT ;
		..........

Fatbin elf code:
================
arch = sm_100a
code version = [1,8]
host = linux
compile_size = 64bit
identifier = demo.cu

	code for sm_100a
		Function : a
        /*0000*/                   EXIT ;
		..........
";
    let modules = lower(text, SassFormat::CuobjdumpText);
    let targets: Vec<_> = modules.iter().map(|m| m.target.clone().unwrap_or_default()).collect();
    assert_eq!(targets, ["sm_90a", "sm_100a"]);
    assert!(modules.iter().all(|m| m.functions.len() == 1));
}

#[test]
fn parse_errors_become_diagnostics() {
    let text = "
		Function : k
        /*0000*/                   LDG.E R0, desc[UR4][R2.64] ;
        this line is not an instruction
        /*0010*/                   EXIT ;
		..........
";
    let lowered = lower_text(FileId(3), text, SassFormat::CuobjdumpText, 100);
    assert!(!lowered.diagnostics.is_empty());
    let d = &lowered.diagnostics[0];
    assert_eq!(d.rule, "parse-error");
    assert!(d.primary.range.start >= 100);
    assert_eq!(lowered.modules[0].functions[0].insts.last().unwrap().opcode, "EXIT");
}

/// The per-thread opcode cache answers like the table, before and after it fills up and
/// starts again.
#[test]
fn the_opcode_cache_answers_like_the_table_past_its_size() {
    let table = super::table::table();
    let mut cache = super::OpcodeCache::default();
    let check = |cache: &mut super::OpcodeCache, opcode: &str| {
        let facts = cache.get(table, opcode);
        assert_eq!(facts.class, table.classify(opcode), "{opcode}");
        assert_eq!(facts.width, super::opcode_width(opcode), "{opcode}");
    };
    for opcode in ["LDG.E.128.STRONG.GPU", "MEMBAR.SC.GPU", "IADD3", "LDG.E.128.STRONG.GPU"] {
        check(&mut cache, opcode);
    }
    for n in 0..super::OPCODE_CACHE_MAX + 10 {
        cache.get(table, &format!("OP{n}.64"));
    }
    assert!(cache.facts.len() <= super::OPCODE_CACHE_MAX);
    for opcode in ["LDG.E.128.STRONG.GPU", "OP3.64", "SYNCS.ARRIVE.TRANS64.RED.A1T0"] {
        check(&mut cache, opcode);
    }
}

/// Opcodes that differ only between their first and last eight bytes hash apart, so damaged
/// input spelling thousands of them does not pile them into one bucket of the opcode cache.
#[test]
fn the_opcode_hash_reads_every_byte() {
    use std::hash::Hasher;
    let hash = |opcode: &str| {
        let mut hasher = super::OpcodeHasher::default();
        hasher.write(opcode.as_bytes());
        hasher.finish()
    };
    assert_ne!(hash("LDG.E.64.STRONG.GPU"), hash("LDG.E.64.STRONG.SYS"));
    let hashes: std::collections::HashSet<u64> =
        (0..4096).map(|n| hash(&format!("AAAAAAAA.{n:05}.BBBBBBBB"))).collect();
    assert_eq!(hashes.len(), 4096);
}

/// The hash mixes the bytes eight at a time, the last ones zero-extended to a word, at every
/// length (the tail is built in a register, from the last eight bytes or byte by byte).
#[test]
fn the_opcode_hash_mixes_zero_extended_words() {
    use std::hash::Hasher;
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let text: Vec<u8> = (0..40u8).map(|n| b'A' + n).collect();
    for len in 0..=text.len() {
        let bytes = &text[..len];
        let mut expected = 0u64;
        let mut mix = |word: u64| expected = (expected ^ word).wrapping_mul(K).rotate_left(29);
        mix(len as u64);
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            mix(u64::from_le_bytes(word));
        }
        let mut hasher = super::OpcodeHasher::default();
        hasher.write(bytes);
        assert_eq!(hasher.finish(), expected ^ (expected >> 32), "{len}");
    }
}

/// Two calls of one subroutine (the shape ptxas gives a `__noinline__` function, hand-written):
/// each call goes to a copy of its own, whose return comes back after that call only.
const TWO_CALLS: &str = "
	code for sm_90a
	.target	sm_90a

		Function : twice
	.headerflags	@\"EF_CUDA_ACCELERATORS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)\"
        /*0000*/                   MOV R2, 0x20 ;
        /*0010*/                   CALL.REL.NOINC 0x60 ;
        /*0020*/                   MOV R2, 0x40 ;
        /*0030*/                   CALL.REL.NOINC 0x60 ;
        /*0040*/                   EXIT ;
        /*0050*/                   BRA 0x50;
        /*0060*/                   LDG.E.STRONG.GPU R0, desc[UR4][R4.64] ;
        /*0070*/                   ISETP.NE.AND P0, PT, R0, RZ, PT ;
        /*0080*/              @!P0 BRA 0x60 ;
        /*0090*/                   RET.REL.NODEC R2 0x0 ;
        /*00a0*/                   BRA 0xa0;
		..........
";

#[test]
fn each_call_of_a_subroutine_returns_to_its_own_caller() {
    let modules = lower(TWO_CALLS, SassFormat::CuobjdumpText);
    let f = only_function(&modules);
    // Eleven own instructions, then two copies of the four of the subroutine.
    assert_eq!(f.inlined_from, Some(11));
    assert_eq!(f.insts.len(), 19);
    let (first, second) = (&f.insts[1], &f.insts[3]);
    assert_eq!(first.control.targets, vec![InstId(11)]);
    assert_eq!(second.control.targets, vec![InstId(15)]);
    assert!(!first.control.falls_through && !second.control.falls_through);
    for (copy, back) in [(11, 2), (15, 4)] {
        let loop_branch = &f.insts[copy + 2];
        assert_eq!(loop_branch.control.targets, vec![InstId(copy as u32)]);
        let ret = &f.insts[copy + 3];
        assert_eq!(ret.kind, InstKind::Return);
        assert_eq!(ret.control.targets, vec![InstId(back)]);
        assert!(!ret.control.exits);
        assert_eq!(ret.sass_address, Some(0x90));
    }
    // The subroutine as written is reached by no one; the function as written calls nothing.
    let own = f.own_code();
    assert_eq!(own.insts.len(), 11);
    assert!(own.insts[1].control.targets.is_empty() && own.insts[1].control.falls_through);
}

/// A call whose target holds no return (ptxas calls the next instruction to push a return
/// address) stays an instruction that falls through.
#[test]
fn a_call_of_the_next_instruction_falls_through() {
    let text = TWO_CALLS.replace(
        "CALL.REL.NOINC 0x60 ;\n        /*0020*/",
        "CALL.REL.NOINC 0x20 ;\n        /*0020*/",
    );
    let modules = lower(&text, SassFormat::CuobjdumpText);
    let f = only_function(&modules);
    assert!(f.insts[1].control.targets.is_empty() && f.insts[1].control.falls_through);
    assert_eq!(f.insts[3].control.targets, vec![InstId(11)]);
}

/// ptxas also uses a `CALL` into the kernel's own code, whose `RET` goes to an address set
/// before it, as a jump (hand-written, in the shape of NCCL's `sm_80` symmetric kernels): the
/// code it reaches is the kernel's own, so it is no subroutine and is not copied.
#[test]
fn a_call_into_the_kernels_own_code_is_no_subroutine() {
    let text = "
	code for sm_80
	.target	sm_80

		Function : jump
	.headerflags	@\"EF_CUDA_ACCELERATORS EF_CUDA_SM80 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM80)\"
        /*0000*/                   ISETP.NE.AND P0, PT, R0, RZ, PT ;
        /*0010*/               @P0 CALL.REL.NOINC 0x30 ;
        /*0020*/                   BRA 0x40 ;
        /*0030*/                   LDG.E R2, desc[UR4][R4.64] ;
        /*0040*/                   MOV R4, 0x60 ;
        /*0050*/                   RET.REL.NODEC R4 0x0 ;
        /*0060*/                   EXIT ;
        /*0070*/                   BRA 0x70;
		..........
";
    let modules = lower(text, SassFormat::CuobjdumpText);
    let f = only_function(&modules);
    assert_eq!(f.inlined_from, None);
    assert_eq!(f.insts.len(), 8);
    assert!(f.insts[1].control.targets.is_empty() && f.insts[1].control.falls_through);
}

/// The walks that find subroutines share one budget of steps: a walk that runs out of steps
/// finds no subroutine, however small it is.
#[test]
fn a_subroutine_walk_stops_at_its_steps() {
    let modules = lower(TWO_CALLS, SassFormat::CuobjdumpText);
    let own = only_function(&modules).own_code();
    let insts = &own.insts;
    let main = super::reached(insts, false);
    let mut seen = vec![u32::MAX; insts.len()];
    let mut walk = |steps: &mut usize, stamp| {
        let walk = super::Walk { max: 100, steps, seen: &mut seen, stamp, main: &main };
        super::subroutine(insts, InstId(6), walk)
    };
    let mut plenty = 100;
    assert_eq!(walk(&mut plenty, 0), Some((6..10).map(InstId).collect()));
    assert_eq!(plenty, 96);
    let mut few = 3;
    assert_eq!(walk(&mut few, 1), None);
    assert_eq!(few, 0);
}

/// nvdisasm JSON names a kernel's subroutine (`$k$wait`) but prints no label for it
/// (hand-written, in the shape of `fixtures/kernels/noinline_poll.cu`'s JSON): with one
/// subroutine, its code is what follows the kernel's own, and each call gets a copy.
fn json_with_calls(calls: [&str; 2], main: &str) -> String {
    let call = |target: &str| {
        format!(
            r#"{{"opcode":"CALL.REL.NOINC","operands":"{target}","other-attributes":{{"control-flow":"True","subroutine-call":"True"}}}}"#
        )
    };
    let body = [
        r#"{"opcode":"MOV","operands":"R4,0x20"}"#.to_owned(),
        call(calls[0]),
        r#"{"opcode":"MOV","operands":"R4,0x40"}"#.to_owned(),
        call(calls[1]),
        main.to_owned(),
        r#"{"opcode":"EXIT","other-attributes":{"control-flow":"True"}}"#.to_owned(),
        r#"{"opcode":"LDG.E.STRONG.GPU","operands":"R0,desc[UR4][R6.64]"}"#.to_owned(),
        r#"{"opcode":"ISETP.NE.AND","operands":"P0,PT,R0,RZ,PT"}"#.to_owned(),
        r#"{"predicate":"@!P0","opcode":"BRA","operands":"0x60","other-attributes":{"control-flow":"True"}}"#.to_owned(),
        r#"{"opcode":"RET.REL.NODEC","operands":"R4,k","other-attributes":{"control-flow":"True"}}"#.to_owned(),
        r#"{"opcode":"BRA","operands":"0xa0","other-attributes":{"control-flow":"True"}}"#.to_owned(),
    ];
    format!(
        r#"[{{"ELF":{{}},"SM":{{"version":{{"major":9,"minor":0}}}},"Producer":"nvdisasm V13.5.37"}},[{{"function-name":"k","start":0,"length":176,"other-attributes":[],"sass-instructions":[{}]}}]]"#,
        body.join(",")
    )
}

#[test]
fn a_json_kernels_one_subroutine_follows_its_own_code() {
    let plain = r#"{"opcode":"NOP"}"#;
    let modules = lower(&json_with_calls(["$k$wait", "$k$wait"], plain), SassFormat::NvdisasmJson);
    let f = only_function(&modules);
    // The eleven instructions as written (the kernel's six, `$k$wait` from the seventh), then a
    // copy of the four of `$k$wait` per call, each returning after its own call.
    assert_eq!(f.inlined_from, Some(11));
    assert_eq!(f.insts.len(), 19);
    assert_eq!(f.insts[1].control.targets, vec![InstId(11)]);
    assert_eq!(f.insts[3].control.targets, vec![InstId(15)]);
    assert_eq!(f.insts[14].control.targets, vec![InstId(2)]);
    assert_eq!(f.insts[18].control.targets, vec![InstId(4)]);

    // Two subroutines: which follows which is not known, and neither is guessed.
    let two = lower(&json_with_calls(["$k$wait", "$k$other"], plain), SassFormat::NvdisasmJson);
    let f = only_function(&two);
    assert_eq!(f.inlined_from, None);
    assert!(f.insts[1].control.targets.is_empty() && f.insts[1].control.falls_through);
    // Another function (`CALL.ABS`-style name) is no subroutine of `k`: still one guess.
    let other = lower(&json_with_calls(["$k$wait", "vprintf"], plain), SassFormat::NvdisasmJson);
    assert_eq!(only_function(&other).inlined_from, Some(11));
}

/// nvdisasm text of `-rdc` functions calling each other by name (hand-written, in the shape of
/// `fixtures/compiled/*/noinline_poll.rdc.nvdisasm.sass`): `k` calls `a` twice, `a` calls `b`,
/// `b` calls `a` back (recursion) and `__assertfail`, which the listing does not hold.
fn named_calls_listing() -> String {
    let function = |name: &str, kernel: bool, body: &str| {
        let other = if kernel {
            format!("        .other          {name},@\"STO_CUDA_ENTRY STV_DEFAULT\"\n")
        } else {
            String::new()
        };
        format!(
            "//--------------------- .text.{name} --------------------------\n\t.section\t.text.{name},\"ax\",@progbits\n        .type           {name},@function\n{other}{name}:\n.text.{name}:\n{body}.L_end_{name}:\n\n"
        )
    };
    let mut text = String::new();
    text += &function(
        "a",
        false,
        "        /*0000*/                   LDG.E.STRONG.GPU R7, desc[UR4][R8.64] ;
        /*0010*/                   CALL.ABS.NOINC `(b) ;
        /*0020*/                   RET.ABS.NODEC R20 0x0 ;
",
    );
    text += &function(
        "k",
        true,
        "        /*0000*/                   MOV R3, 0x1 ;
        /*0010*/                   CALL.ABS.NOINC `(a) ;
        /*0020*/                   CALL.ABS.NOINC `(a) ;
        /*0030*/                   EXIT ;
",
    );
    text += &function(
        "b",
        false,
        "        /*0000*/                   IADD3 R9, R7, 0x1, RZ ;
        /*0010*/                   CALL.ABS.NOINC `(a) ;
        /*0020*/                   CALL.ABS.NOINC `(__assertfail) ;
        /*0030*/                   RET.ABS.NODEC R20 0x0 ;
",
    );
    text
}

#[test]
fn calls_of_other_functions_of_the_listing_go_to_copies_of_them() {
    let text = named_calls_listing();
    let modules = lower(&text, SassFormat::NvdisasmText);
    assert_eq!(modules.len(), 1);
    let funcs = &modules[0].functions;
    let by_name = |name: &str| funcs.iter().find(|f| f.name == name).unwrap();
    let (a, k, b) = (by_name("a"), by_name("k"), by_name("b"));
    assert!(k.is_kernel && !a.is_kernel && !b.is_kernel);

    // `b` is linked first (depth first from `a`): its call back into `a` is not followed, and
    // `__assertfail` is not in the listing; both fall through.
    assert_eq!(b.inlined_from, None);
    assert!(b.insts[1].control.targets.is_empty() && b.insts[1].control.falls_through);
    assert!(b.insts[2].control.targets.is_empty() && b.insts[2].control.falls_through);

    // `a`: three own instructions (the last a return: no seal), then one copy of `b`'s four.
    assert_eq!(a.inlined_from, Some(3));
    assert_eq!(a.insts.len(), 7);
    assert_eq!(a.insts[1].control.targets, [InstId(3)]);
    assert!(!a.insts[1].control.falls_through);
    assert_eq!(a.insts[3].opcode, "IADD3");
    // The copy reads `a`'s own `R7`: registers are matched by name.
    assert_eq!(a.insts[3].uses, a.insts[0].defs);
    let ret = &a.insts[6];
    assert_eq!(ret.kind, InstKind::Return);
    assert_eq!(ret.control.targets, [InstId(2)]);
    assert!(!ret.control.exits);
    assert_eq!(ret.range, b.insts[3].range, "the copy keeps the callee's place in the text");

    // `k`: each call goes to a copy of linked `a` (seven instructions), whose returns come back
    // after that call, and whose copy of `b` returns into that copy of `a`.
    assert_eq!(k.inlined_from, Some(4));
    assert_eq!(k.insts.len(), 4 + 2 * 7);
    assert_eq!(k.insts[1].control.targets, [InstId(4)]);
    assert_eq!(k.insts[2].control.targets, [InstId(11)]);
    for (copy, back) in [(4u32, 2u32), (11, 3)] {
        let at = |k_: u32| &k.insts[(copy + k_) as usize];
        assert_eq!(at(1).control.targets, [InstId(copy + 3)], "a's call of b");
        assert_eq!(at(2).control.targets, [InstId(back)], "a's return");
        assert_eq!(at(6).control.targets, [InstId(copy + 2)], "b's return");
    }
}

#[test]
fn a_long_chain_of_named_calls_stays_within_the_budget() {
    // f0 calls f1 calls ... f1999, each call the copy of the rest of the chain: without the
    // module's budget the copies would hold about two million instructions.
    let mut text = String::new();
    let n = 2000;
    for i in 0..n {
        let call = if i + 1 < n {
            format!("        /*0010*/                   CALL.ABS.NOINC `(f{}) ;\n", i + 1)
        } else {
            "        /*0010*/                   NOP ;\n".to_owned()
        };
        std::fmt::Write::write_fmt(
            &mut text,
            format_args!("\t.section\t.text.f{i},\"ax\",@progbits\n.text.f{i}:\nf{i}:\n        /*0000*/                   IADD3 R1, R1, 0x1, RZ ;\n{call}        /*0020*/                   RET.ABS.NODEC R20 0x0 ;\n\n"),
        )
        .unwrap();
    }
    let modules = lower(&text, SassFormat::NvdisasmText);
    let total: usize = modules[0].functions.iter().map(|f| f.insts.len()).sum();
    let own = 3 * n;
    assert!(total <= own + super::LINK_BUDGET_MIN.max(own) + 2 * n, "{total}");
    // The deepest callees are linked: f1998 holds a copy of f1999.
    assert!(modules[0].functions[n - 2].inlined_from.is_some());
}

#[test]
fn many_calls_of_a_large_function_stay_within_the_budget() {
    // A kernel of 20,000 calls of one 2,000-instruction function: the caller's budget (its own
    // size, 20,001) takes nine copies of 2,001 instructions; the other calls fall through.
    use std::fmt::Write as _;
    let mut text = String::new();
    let mut body = String::new();
    for k in 0..2000 {
        let _ =
            writeln!(body, "        /*{:04x}*/                   IADD3 R1, R1, 0x1, RZ ;", k * 16);
    }
    let _ =
        writeln!(body, "        /*{:04x}*/                   RET.ABS.NODEC R20 0x0 ;", 2000 * 16);
    let mut calls = String::new();
    for k in 0..20_000 {
        let _ =
            writeln!(calls, "        /*{:04x}*/                   CALL.ABS.NOINC `(f) ;", k * 16);
    }
    let _ = writeln!(calls, "        /*{:04x}*/                   EXIT ;", 20_000 * 16);
    for (name, kernel, code) in [("f", false, &body), ("k", true, &calls)] {
        let other = if kernel {
            format!("        .other          {name},@\"STO_CUDA_ENTRY STV_DEFAULT\"\n")
        } else {
            String::new()
        };
        let _ = write!(
            text,
            "//--------------------- .text.{name} --------------------------\n\t.section\t.text.{name},\"ax\",@progbits\n{other}{name}:\n.text.{name}:\n{code}\n"
        );
    }
    let modules = lower(&text, SassFormat::NvdisasmText);
    let k = modules[0].functions.iter().find(|f| f.name == "k").unwrap();
    let copies = k.insts.iter().filter(|i| i.opcode == "RET.ABS.NODEC").count();
    assert_eq!(copies, 9, "{} instructions", k.insts.len());
    let followed = k.insts[..20_000].iter().filter(|i| !i.control.targets.is_empty()).count();
    assert_eq!(followed, 9);
}

/// Instructions of `pure` rows get a key for value numbering: the same opcode and the same
/// non-register operands give one key whatever the registers (`.reuse` aside); another
/// immediate, another constant slot, a negated operand, another opcode, or a predicate
/// destination instead of a register one give another; a guard, a second destination (the
/// carry of `IADD3`) or a row not marked `pure` give none, and so do forms that value numbering
/// reads from the instruction's value (a comparison, a copy).
#[test]
fn pure_rows_get_a_key_from_opcode_and_operands() {
    let text = "
		Function : k
        /*0000*/                   IMAD.SHL.U32 R0, R1, 0x4, RZ ;
        /*0010*/                   IMAD.SHL.U32 R2, R3.reuse, 0x4, RZ ;
        /*0020*/                   IMAD.SHL.U32 R4, R5, 0x8, RZ ;
        /*0030*/                   VIMNMX R6, PT, PT, R7, UR6, PT ;
        /*0040*/                   VIMNMX R8, PT, PT, R9, UR4, PT ;
        /*0050*/                   VIMNMX R10, PT, PT, R9, UR4, !PT ;
        /*0060*/                   IADD3 R12, PT, PT, R1, c[0x0][0x180], RZ ;
        /*0070*/                   IADD3 R13, PT, PT, R1, c[0x0][0x184], RZ ;
        /*0080*/                   IADD3 R14, PT, PT, -R1, c[0x0][0x180], RZ ;
        /*0090*/                   LOP3.LUT P0, RZ, R1, R2, RZ, 0xfc, !PT ;
        /*00a0*/                   LOP3.LUT R15, R1, R2, RZ, 0xfc, !PT ;
        /*00b0*/               @P1 IMAD.SHL.U32 R16, R1, 0x4, RZ ;
        /*00c0*/                   IADD3 R17, P2, PT, R1, R2, RZ ;
        /*00d0*/                   FADD R18, R1, R2 ;
        /*00e0*/                   ISETP.GE.AND P3, PT, R1, R2, PT ;
        /*00f0*/                   SHF.L.U32 R19, R1, 0x4, RZ ;
        /*0100*/                   IADD3 R20, PT, PT, R1, RZ, RZ ;
		..........
";
    let modules = lower(text, SassFormat::CuobjdumpText);
    let f = only_function(&modules);
    let key = |i: usize| f.insts[i].pure_key;
    assert!(key(0).is_some());
    assert_eq!(key(0), key(1));
    assert_ne!(key(0), key(2));
    assert_eq!(key(3), key(4));
    assert_ne!(key(4), key(5));
    assert!(key(6).is_some());
    assert_ne!(key(6), key(7));
    assert_ne!(key(6), key(8));
    assert!(key(9).is_some());
    assert_ne!(key(9), key(10));
    assert_eq!(key(11), None);
    assert_eq!(key(12), None);
    assert_eq!(key(13), None);
    assert_eq!(key(14), None);
    assert!(key(15).is_some());
    assert_ne!(key(15), key(0));
    // A copy is numbered as its source, from its value.
    assert_eq!(f.insts[16].value, Some(ValueOp::Copy(f.insts[16].uses[0])));
    assert_eq!(key(16), None);
}

/// A CTA-scope strong load that ptxas follows with its `NOP` (before or right after the first
/// reader of what it loaded) is an acquire; one whose `NOP` comes only after a branch, another
/// memory access or a second instruction past the reader stays relaxed.
#[test]
fn a_nop_after_a_cta_scope_load_is_its_acquire() {
    // Hand-written, in the shapes of the compiled `cta_acquire_poll.cu`.
    let listing = "
        /*0000*/                   LD.E.STRONG.SM R0, [R2.64] ;
        /*0010*/                   NOP ;
        /*0020*/                   ISETP.NE.AND P0, PT, R0, RZ, PT ;
        /*0030*/                   LDG.E.STRONG.SM R4, [R2.64+0x4] ;
        /*0040*/                   IADD3 R6, R6, 0x1, RZ ;
        /*0050*/                   ISETP.NE.AND P1, PT, R4, RZ, PT ;
        /*0060*/                   NOP ;
        /*0070*/                   LD.E.STRONG.SM R8, [R2.64+0x8] ;
        /*0080*/                   ISETP.NE.AND P2, PT, R8, RZ, PT ;
        /*0090*/              @!P2 BRA 0x70 ;
        /*00a0*/                   NOP ;
        /*00b0*/                   LD.E.STRONG.SM R9, [R2.64+0xc] ;
        /*00c0*/                   LDG.E R10, [R2.64+0x10] ;
        /*00d0*/                   NOP ;
        /*00e0*/                   LD.E.STRONG.SM R11, [R2.64+0x14] ;
        /*00f0*/                   ISETP.NE.AND P3, PT, R11, RZ, PT ;
        /*0100*/                   IADD3 R6, R6, 0x1, RZ ;
        /*0110*/                   NOP ;
        /*0120*/                   LD.E.STRONG.GPU R12, [R2.64+0x18] ;
        /*0130*/                   NOP ;
        /*0140*/                   LD.E.STRONG.SM R13, [R2.64+0x1c] ;
        /*0150*/               @P0 BRA 0x170 ;
        /*0160*/                   NOP ;
        /*0170*/                   EXIT ;
";
    let modules = lower(listing, SassFormat::CuobjdumpText);
    let f = only_function(&modules);
    let sems: Vec<(u32, Sem)> = f
        .insts
        .iter()
        .filter_map(|i| match &i.kind {
            InstKind::Load(mem) if mem.is_strong() => Some((i.sass_address?, mem.sem)),
            _ => None,
        })
        .collect();
    assert_eq!(
        sems,
        [
            (0x00, Sem::Acquire),
            (0x30, Sem::Acquire),
            (0x70, Sem::Relaxed),
            (0xb0, Sem::Relaxed),
            (0xe0, Sem::Relaxed),
            (0x120, Sem::Relaxed),
            (0x140, Sem::Relaxed),
        ]
    );
}

#[test]
fn scoreboards_come_from_the_encodings_high_word() {
    // Hand-written, with the encodings of the compiled `tcgen05.cu` (sm_100a): the second word,
    // on a line of its own, carries the control bits.
    let listing = "
	code for sm_100a
		Function : k
        /*0000*/                   LDTM R5, tmem[UR7] ;                 /* 0x00000007000579ee */
                                                                        /* 0x002e620008040000 */
        /*0010*/                   DEPBAR.LE SB1, 0x0 ;                 /* 0x000080000000791a */
                                                                        /* 0x000fe20000000000 */
        /*0020*/                   DEPBAR.LE SB1, 0x1 ;                 /* 0x000080400000791a */
                                                                        /* 0x000fe20000000000 */
        /*0030*/                   NOP ;                                /* 0x0000000000007918 */
                                                                        /* 0x000fe20000000000 */
        /*0040*/              @!PT LDS RZ, [RZ] ;                       /* 0x00000000ff00798c */
                                                                        /* 0x002fe20000000000 */
        /*0050*/                   NOP ;                                /* 0x0000000000007918 */
                                                                        /* 0x002fe20000000000 */
        /*0060*/                   EXIT ;
		..........
";
    let modules = lower(listing, SassFormat::CuobjdumpText);
    let f = only_function(&modules);
    let boards: Vec<(u32, Option<u8>, u8)> = f
        .insts
        .iter()
        .map(|i| {
            let s = i.scoreboards.unwrap_or_default();
            (i.sass_address.unwrap(), s.write, s.wait)
        })
        .collect();
    assert_eq!(
        boards,
        [
            (0x00, Some(1), 0b10),
            (0x10, None, 0b10),
            (0x20, None, 0),
            // The dropped `@!PT` instruction's words are not the `NOP`'s before it.
            (0x30, None, 0),
            (0x50, None, 0b10),
            (0x60, None, 0),
        ]
    );
    assert!(f.insts[0].scoreboards.is_some() && f.insts[5].scoreboards.is_none());

    // Before sm_70 the words beside an instruction are no 128-bit encoding.
    let old = listing.replace("sm_100a", "sm_61");
    let modules = lower(&old, SassFormat::CuobjdumpText);
    let f = only_function(&modules);
    assert!(f.insts.iter().all(|i| i.scoreboards.is_none()));
}
