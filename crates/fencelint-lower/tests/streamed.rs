//! A text listing is lowered as it is parsed, one instruction at a time (`LowerSink`), without
//! the syntax tree; the tree is still built for nvdisasm JSON, for the PTX-versus-SASS audit and
//! for callers of `lower_parsed`. Both must give the same IR and the same diagnostics: checked
//! here on every SASS text listing among the fixtures (whole, and cut into functions as the
//! streaming linter cuts them) and on hand-written listings of the shapes that the one-pass
//! lowering resolves at the end of a function (forward labels, jump tables, a label named like
//! the function, labels that name nothing, `@!PT` filler, addresses out of order, several
//! architectures and fat-binary entries in one listing).

use std::path::{Path, PathBuf};

use fencelint_lower::Lowered;
use fencelint_lower::sass::{lower_function_text, lower_parsed, lower_text};
use fencelint_sass::{parse_function_text, parse_text, split_functions};
use fencelint_source::FileId;

fn render(lowered: &Lowered) -> String {
    format!("{:#?}\n{:#?}", lowered.modules, lowered.diagnostics)
}

/// Lowers `text` both ways, whole and function by function, and compares; returns the number
/// of instructions lowered.
fn check(name: &str, text: &str) -> usize {
    let format = fencelint_sass::text_format(text);
    let streamed = lower_text(FileId(1), text, format, 7);
    let tree = lower_parsed(FileId(1), text, &parse_text(text), 7);
    assert_eq!(render(&streamed), render(&tree), "{name}: whole listing");
    for chunk in split_functions(text) {
        let piece = chunk.text();
        let streamed = lower_function_text(FileId(2), piece, chunk.format, chunk.arch, 3);
        let tree = lower_parsed(FileId(2), piece, &parse_function_text(piece, chunk.arch), 3);
        assert_eq!(render(&streamed), render(&tree), "{name}: function `{}`", chunk.function);
    }
    streamed.modules.iter().flat_map(|m| &m.functions).map(|f| f.insts.len()).sum()
}

fn listings(root: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(root).expect("readable folder") {
        let path = entry.expect("readable entry").path();
        if path.is_dir() {
            listings(&path, out);
        } else if path.extension().is_some_and(|e| e == "sass") {
            out.push(path);
        }
    }
}

#[test]
fn every_fixture_listing_lowers_the_same_in_one_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut files = Vec::new();
    listings(&root, &mut files);
    files.sort();
    assert!(files.len() >= 100, "only {} listings under fixtures/", files.len());
    let mut insts = 0;
    for path in &files {
        let text = std::fs::read_to_string(path).expect("readable fixture");
        insts += check(&path.display().to_string(), &text);
    }
    assert!(insts > 10_000, "only {insts} instructions lowered");
}

#[test]
fn end_of_function_resolutions_match_the_tree() {
    let cases = [
        // nvdisasm: a forward and a backward label, a label named like the function, a label
        // that names nothing, a jump table with and without its list, a label after the last
        // instruction.
        r#"
	.target	sm_90a

//--------------------- .text.k --------------------------
	.section	.text.k,"ax",@progbits
        .type           k,@function
        .other          k,@"STO_CUDA_ENTRY STV_DEFAULT"
k:
.text.k:
        /*0000*/                   BRA `(.L_x_2) ;
.L_x_1:
        /*0010*/                   LDG.E.STRONG.GPU R0, desc[UR4][R2.64] ;
        /*0020*/                   ISETP.NE.AND P0, PT, R0, RZ, PT ;
        /*0030*/              @!P0 BRA `(.L_x_1) ;
.L_x_2:
        /*0040*/                   BRX R4 -0x50                     (*"BRANCH_TARGETS .L_x_1,.L_x_2"*) ;
        /*0050*/                   BRX R4 -0x60 ;
        /*0060*/                   BRA `(k) ;
        /*0070*/                   BRA `(.L_x_9) ;
        /*0080*/              @!PT LDS RZ, [RZ] ;
        /*0090*/                   BRA `(.L_x_4) ;
        /*00a0*/                   EXIT ;
.L_x_4:

//--------------------- .text.helper --------------------------
	.section	.text.helper,"ax",@progbits
        .type           helper,@function
helper:
.text.helper:
        /*0000*/                   BRA `(.L_x_5) ;
.L_x_5:
        /*0010*/                   RET.REL.NODEC R20 `(k) ;

//--------------------- .text.lone --------------------------
	.section	.text.lone,"ax",@progbits
        /*0000*/                   NOP ;
        /*0010*/                   BRA `(lone) ;
"#,
        // cuobjdump: numeric targets (one past the end), `@!PT` filler as a target, an address
        // out of order, two architectures and two fat-binary entries.
        "
Fatbin elf code:
================
arch = sm_90
code version = [1,8]
host = linux
compile_size = 64bit
identifier = a.cu

	code for sm_90
		Function : first
        /*0000*/                   BRA 0x20 ;
        /*0010*/                   BRA 0x100 ;
        /*0020*/              @!PT LDS RZ, [RZ] ;
        /*0030*/                   EXIT ;
        /*0020*/                   NOP ;
		..........

Fatbin elf code:
================
arch = sm_80
code version = [1,7]
host = linux
compile_size = 64bit
identifier = b.cu

	code for sm_80
		Function : second
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   EXIT ;
		Function : third
		..........
",
    ];
    for (i, text) in cases.iter().enumerate() {
        check(&format!("case {i}"), text);
    }
}

/// The scoreboards come from the encoding as the syntax tree holds it once every line of it is
/// read (hand-written, in the shapes a fuzzer found): an instruction whose own word is missing
/// (text after the `;`), a second line with two comments, a word too short to be read.
#[test]
fn encodings_read_line_by_line_give_the_trees_scoreboards() {
    let text = "
	code for sm_100a
		Function : k
        /*0000*/                   LDTM R5, tmem[UR7] ;     junk                           /* 0x00000007000579ee */
                                                                                           /* 0x002e620008040000 */
        /*0010*/                   NOP ;                                                   /* 0x0000000000007918 */
                                                                                           /* 0x002fe20000000000 */ /* 0x000fe20000000000 */
        /*0020*/                   NOP ;                                                   /* 0x0000000000007918 */
                                                                                           /* 0x2fe2 */
        /*0030*/                   DEPBAR.LE SB1, 0x0 ;                                    /* 0x000080000000791a */
        /*0040*/                   EXIT ;                                                  /* 0x000000000000794d */
                                                                                           /* 0x000fea0003800000 */
		..........
";
    assert_eq!(check("encodings", text), 5);
    let format = fencelint_sass::text_format(text);
    let lowered = lower_text(FileId(1), text, format, 0);
    let boards: Vec<_> =
        lowered.modules[0].functions[0].insts.iter().map(|i| i.scoreboards).collect();
    // The `LDTM` line's own word is lost to the text after the `;`: its second line alone is no
    // encoding. The second `NOP`'s word is too short; the `DEPBAR` has no second line but waits.
    assert_eq!(boards[0], None);
    assert_eq!(boards[1].map(|s| s.wait), Some(0));
    assert_eq!(boards[2], None);
    assert_eq!(boards[3].map(|s| (s.write, s.wait)), Some((None, 0b10)));
    assert!(boards[4].is_some());
}
