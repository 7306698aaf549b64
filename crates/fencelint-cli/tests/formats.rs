//! Every output format on one small set of inputs: snapshots of what each format prints,
//! validation of the JSON and SARIF output against their schemas, and where `--locations`
//! points findings.
//!
//! Snapshots live in `tests/snapshots/`; regenerate them with `cargo insta review` (or
//! `INSTA_UPDATE=always cargo test -p fencelint-cli --test formats`) and read the diff.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// A PTX file without line info, compiler PTX with `.loc` lines, and `nvdisasm -g` SASS with
/// addresses and source lines; and a missing file, for an `input-error`.
const INPUTS: &[&str] = &[
    "fixtures/ptx/acquire-in-poll-loop/acquire_poll.ptx",
    "fixtures/compiled/sm_90a/spin_poll.ptx",
    "fixtures/compiled/sm_90a/spin_poll.nvdisasm.sass",
    "fixtures/missing/does-not-exist.ptx",
];

/// Only one rule, so that the snapshots stay small and change only when it does.
const RULE: &str = "acquire-in-poll-loop";

/// The SARIF schema, relative to the repository root.
const SARIF_SCHEMA: &str = "../shared/schemas/sarif-schema-2.1.0.json";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fencelint(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fencelint"))
        .args(args)
        .current_dir(repo())
        .env_remove("NO_COLOR")
        .output()
        .expect("run fencelint")
}

/// Runs `check` on [`INPUTS`] with [`RULE`] in `format`, plus `extra` arguments; returns stdout.
fn check(format: &str, extra: &[&str]) -> String {
    let mut args = vec!["check", "--quiet", "--format", format, "--select", RULE];
    args.extend_from_slice(extra);
    args.extend_from_slice(INPUTS);
    let out = fencelint(&args);
    // The missing file makes it an input error.
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|err| panic!("invalid JSON ({err}):\n{text}"))
}

#[test]
fn rich_snapshot() {
    insta::assert_snapshot!("rich", check("rich", &["--color", "never"]));
}

#[test]
fn short_snapshot() {
    insta::assert_snapshot!("short", check("short", &[]));
}

#[test]
fn json_snapshot() {
    insta::assert_snapshot!("json", check("json", &[]));
}

#[test]
fn jsonl_snapshot() {
    insta::assert_snapshot!("jsonl", check("jsonl", &[]));
}

#[test]
fn github_snapshot() {
    insta::assert_snapshot!("github", check("github", &[]));
}

#[test]
fn sarif_snapshot() {
    let mut log = json(&check("sarif", &[]));
    insta::assert_snapshot!("sarif", pretty(stable_sarif(&mut log)));
}

/// The SARIF log without what changes with every rule added or documented: the tool version,
/// the descriptors of rules that no result uses, the rule documents, and rule indexes (checked
/// here instead).
fn stable_sarif(log: &mut Value) -> &Value {
    let run = &mut log["runs"][0];
    let rules = run["tool"]["driver"]["rules"].as_array().expect("rules").clone();
    let mut used = Vec::new();
    for result in run["results"].as_array_mut().expect("results") {
        let index = result["ruleIndex"].as_u64().expect("ruleIndex") as usize;
        assert_eq!(rules[index]["id"], result["ruleId"], "ruleIndex points at the rule");
        result["ruleIndex"] = Value::from("[index]");
        used.push(result["ruleId"].as_str().unwrap().to_owned());
    }
    let driver = &mut run["tool"]["driver"];
    assert_eq!(driver["version"], env!("CARGO_PKG_VERSION"));
    for key in ["version", "semanticVersion", "fullName"] {
        driver[key] = Value::from("[version]");
    }
    let mut kept = Vec::new();
    for mut rule in rules {
        let id = rule["id"].as_str().unwrap().to_owned();
        if !used.contains(&id) {
            continue;
        }
        if rule.get("help").is_some() {
            let doc = &rule["help"]["markdown"];
            assert!(doc.as_str().unwrap().starts_with(&format!("# {id}\n")), "{id}");
            let what = rule["fullDescription"]["markdown"].as_str().unwrap();
            assert!(!what.is_empty() && !what.contains('\n'), "{id}: {what}");
            rule["help"] = Value::from(format!("[rules/{id}.md]"));
            rule["fullDescription"] = Value::from(format!("[What it does, rules/{id}.md]"));
            rule["shortDescription"] = Value::from("[summary]");
        }
        kept.push(rule);
    }
    driver["rules"] = Value::from(kept);
    log
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap() + "\n"
}

#[test]
fn sarif_declares_every_rule_and_tool_code() {
    let log = json(&check("sarif", &[]));
    let driver = &log["runs"][0]["tool"]["driver"];
    assert_eq!(driver["name"], "fencelint");
    assert!(driver["informationUri"].as_str().unwrap().starts_with("https://"));
    let ids: Vec<&str> =
        driver["rules"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    for code in ["parse-error", "input-error", "analysis-incomplete", "internal-error"] {
        assert!(ids.contains(&code), "{code} missing from {ids:?}");
    }
    let rules = fencelint(&["rules"]);
    let listing = String::from_utf8_lossy(&rules.stdout);
    for line in listing.lines().skip(1) {
        let mut fields = line.split_whitespace();
        let name = fields.next().unwrap();
        let default = fields.nth(1).unwrap();
        let rule = driver["rules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == name)
            .unwrap_or_else(|| panic!("{name} missing from the SARIF rules"));
        let level = if default == "off" { "none" } else { default };
        assert_eq!(rule["defaultConfiguration"]["level"], level, "{name}");
        assert!(rule["properties"]["category"].is_string(), "{name}");
    }
}

/// Reads the official SARIF schema (`FENCELINT_SARIF_SCHEMA`, else `../shared/schemas/` beside
/// the repository), or says where it looked. The schema is not part of the repository: where it
/// is missing the test says NOT RUN on stderr and skips, so that `cargo test --workspace` works
/// on a fresh clone; `.ci/run` sets `FENCELINT_SARIF_SCHEMA_REQUIRED=1` when it finds the
/// schema, and then a missing schema fails the test.
fn sarif_schema() -> Option<Value> {
    let path = std::env::var_os("FENCELINT_SARIF_SCHEMA")
        .map_or_else(|| repo().join(SARIF_SCHEMA), std::path::PathBuf::from);
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(json(&text)),
        Err(err)
            if std::env::var_os("FENCELINT_SARIF_SCHEMA_REQUIRED").is_none_or(|v| v != "1") =>
        {
            #[allow(clippy::print_stderr)]
            {
                eprintln!(
                    "NOT RUN: SARIF schema validation: the SARIF 2.1.0 schema is not at {} \
                     ({err}); set FENCELINT_SARIF_SCHEMA to its path",
                    path.display()
                );
            }
            None
        }
        Err(err) => panic!(
            "the SARIF 2.1.0 schema is not at {} ({err}): put the official \
             sarif-schema-2.1.0.json there (FENCELINT_SARIF_SCHEMA_REQUIRED=1 is set)",
            path.display()
        ),
    }
}

fn assert_valid(schema: &Value, instance: &Value, what: &str) {
    let validator = jsonschema::validator_for(schema).expect("a valid schema");
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|err| format!("{} at {}", err, err.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{what} does not match its schema:\n{}", errors.join("\n"));
}

#[test]
fn sarif_output_matches_the_official_schema() {
    let Some(schema) = sarif_schema() else { return };
    for locations in ["source", "input"] {
        let log = json(&check("sarif", &["--locations", locations]));
        assert_valid(&schema, &log, &format!("SARIF with --locations {locations}"));
    }
    // A clean run still has a run with the tool and an empty list of results.
    let clean = fencelint(&[
        "check",
        "--quiet",
        "--format",
        "sarif",
        "--select",
        "spin-poll-without-acquire",
        "fixtures/ptx/spin-poll-without-acquire/clean_acquire_poll.ptx",
    ]);
    assert_eq!(clean.status.code(), Some(0), "{}", String::from_utf8_lossy(&clean.stdout));
    let log = json(&String::from_utf8_lossy(&clean.stdout));
    assert_eq!(log["runs"][0]["results"], Value::Array(Vec::new()));
    assert_valid(&schema, &log, "SARIF of a clean run");
}

/// The published output schema, made strict: an object may hold only the properties that the
/// schema documents, so that a field added to the output without documentation fails here.
fn strict_output_schema() -> Value {
    fn close(value: &mut Value) {
        match value {
            Value::Object(map) => {
                if map.contains_key("properties") {
                    map.insert("additionalProperties".to_owned(), Value::Bool(false));
                }
                map.values_mut().for_each(close);
            }
            Value::Array(items) => items.iter_mut().for_each(close),
            _ => {}
        }
    }
    let text = std::fs::read_to_string(repo().join("docs/fencelint-output.schema.json"))
        .expect("docs/fencelint-output.schema.json");
    let mut schema = json(&text);
    close(&mut schema);
    schema
}

#[test]
fn json_output_matches_its_published_schema() {
    let schema = strict_output_schema();
    let document = json(&check("json", &[]));
    assert!(!document["diagnostics"].as_array().unwrap().is_empty());
    assert_valid(&schema, &document, "--format json");

    // Every JSON Lines line is a `#/$defs/line`: the same object as in the document, plus
    // `version`.
    let mut line_schema = schema.clone();
    let defs = line_schema["$defs"].clone();
    line_schema = serde_json::json!({
        "$schema": schema["$schema"],
        "$ref": "#/$defs/line",
        "$defs": defs,
    });
    let lines = check("jsonl", &[]);
    let items = document["diagnostics"].as_array().unwrap();
    assert_eq!(lines.lines().count(), items.len());
    for (line, item) in lines.lines().zip(items) {
        let mut value = json(line);
        assert_valid(&line_schema, &value, "a --format jsonl line");
        assert_eq!(value["version"], document["version"]);
        value.as_object_mut().unwrap().remove("version");
        assert_eq!(&value, item, "a jsonl line is the json diagnostic");
    }
}

/// The lines of `text` that mention `needle`.
fn lines_with<'a>(text: &'a str, needle: &str) -> Vec<&'a str> {
    text.lines().filter(|line| line.contains(needle)).collect()
}

#[test]
fn locations_source_points_at_the_cu_line_and_input_at_the_ptx() {
    // Short: the compiled PTX finding moves from its `.loc` line to the PTX line; the finding
    // in PTX without line info stays where it is.
    let source = check("short", &[]);
    let input = check("short", &["--locations", "input"]);
    assert_eq!(source, check("short", &["--locations", "source"]), "source is the default");
    // Five kernels poll through the inlined helper at line 28 of the source.
    let ptx = "`ld.acquire.gpu.global.u32` acquires";
    let at_source = "fixtures/kernels/spin_poll.cu:28:5: warning[acquire-in-poll-loop]: \
         `ld.acquire.gpu.global.u32` acquires on every iteration of a spin loop";
    assert_eq!(lines_with(&source, ptx), [at_source; 5]);
    // With `input`, each points at its `ld.acquire` line of the PTX.
    let ptx_text =
        std::fs::read_to_string(repo().join("fixtures/compiled/sm_90a/spin_poll.ptx")).unwrap();
    let ptx_lines: Vec<&str> = ptx_text.lines().collect();
    let prefix = "fixtures/compiled/sm_90a/spin_poll.ptx:";
    let suffix = ":2: warning[acquire-in-poll-loop]: \
                  `ld.acquire.gpu.global.u32` acquires on every iteration of a spin loop";
    let at_input = lines_with(&input, ptx);
    assert_eq!(at_input.len(), 5, "{input}");
    let first_line = at_input
        .iter()
        .map(|finding| {
            let line: usize = finding
                .strip_prefix(prefix)
                .and_then(|rest| rest.strip_suffix(suffix))
                .and_then(|line| line.parse().ok())
                .unwrap_or_else(|| panic!("{finding}"));
            assert!(ptx_lines[line - 1].trim_start().starts_with("ld.acquire.gpu.global.u32"));
            line
        })
        .min()
        .unwrap();
    let plain = "acquire_poll.ptx";
    assert_eq!(lines_with(&source, plain), lines_with(&input, plain));
    assert_eq!(lines_with(&source, plain).len(), 2);
    assert!(!input.contains(".cu:"), "{input}");

    // GitHub: the same places; with input, every annotation has an end.
    let github = check("github", &["--locations", "input"]);
    assert!(!github.contains(".cu,"), "{github}");
    assert!(github.lines().all(|line| line.contains("endLine=")), "{github}");
    let github = check("github", &[]);
    assert!(github.contains("file=fixtures/kernels/spin_poll.cu,line=28,col=5,title="), "{github}");

    // Rich keeps the PTX/SASS snippet either way, with a `source:` note only for `source`.
    let rich_source = check("rich", &["--color", "never"]);
    let rich_input = check("rich", &["--color", "never", "--locations", "input"]);
    assert!(rich_source.contains("= source: fixtures/kernels/spin_poll.cu:28:5"), "{rich_source}");
    assert!(rich_source.contains(&format!("{prefix}{first_line}:2")));
    assert!(!rich_input.contains("source:"), "{rich_input}");
    assert!(rich_input.contains(&format!("{prefix}{first_line}:2")));

    // JSON carries both locations and does not depend on `--locations`.
    assert_eq!(check("json", &[]), check("json", &["--locations", "input"]));
}

/// The 1-based line of the instruction at `address` (`/*0040*/`) of `kernel` in the `sm_90a`
/// `nvdisasm -g` listing of `spin_poll.cu`.
fn sass_line(kernel: &str, address: &str) -> usize {
    let text =
        std::fs::read_to_string(repo().join("fixtures/compiled/sm_90a/spin_poll.nvdisasm.sass"))
            .unwrap();
    let label = format!(".text.{kernel}:");
    let start = text.lines().position(|line| line.starts_with(&label)).unwrap();
    start + 1 + text.lines().skip(start).position(|line| line.contains(address)).unwrap()
}

#[test]
fn sarif_locations_source_and_input() {
    let find = |log: &Value, kernel: &str| -> Value {
        log["runs"][0]["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["locations"][0]["logicalLocations"][0]["name"] == kernel)
            .unwrap_or_else(|| panic!("no result in `{kernel}`"))
            .clone()
    };
    let source = json(&check("sarif", &[]));
    let input = json(&check("sarif", &["--locations", "input"]));

    // SASS with `nvdisasm -g` line info: the primary location is the `.cu` line, and the SASS
    // instruction (with its address) is the first related location.
    let mapped = find(&source, "poll_acquire");
    let primary = &mapped["locations"][0]["physicalLocation"];
    assert_eq!(primary["artifactLocation"]["uri"], "fixtures/kernels/spin_poll.cu");
    assert_eq!(primary["region"]["startLine"], 28);
    assert!(primary.get("address").is_none());
    let sass = &mapped["relatedLocations"][0]["physicalLocation"];
    assert_eq!(sass["artifactLocation"]["uri"], "fixtures/compiled/sm_90a/spin_poll.nvdisasm.sass");
    assert_eq!(sass["address"]["absoluteAddress"], 0x40);
    assert_eq!(sass["region"]["startLine"], sass_line("poll_acquire", "/*0040*/"));

    // With input, the SASS instruction is the primary location, with every region field.
    let unmapped = find(&input, "poll_acquire");
    let primary = &unmapped["locations"][0]["physicalLocation"];
    assert_eq!(
        primary["artifactLocation"]["uri"],
        "fixtures/compiled/sm_90a/spin_poll.nvdisasm.sass"
    );
    assert_eq!(primary["address"]["absoluteAddress"], 0x40);
    for key in ["startLine", "startColumn", "endLine", "endColumn", "byteOffset", "byteLength"] {
        assert!(primary["region"][key].is_u64(), "{key} in {primary}");
    }
    let related = unmapped["relatedLocations"].as_array().unwrap();
    assert!(related.iter().all(|r| {
        r["physicalLocation"]["artifactLocation"]["uri"]
            == "fixtures/compiled/sm_90a/spin_poll.nvdisasm.sass"
    }));
    assert_eq!(mapped["partialFingerprints"], unmapped["partialFingerprints"]);
    assert!(mapped["partialFingerprints"]["fencelintFingerprint/v1"].is_string());
}

/// Every `formats__*.snap` file belongs to a test above (no cargo-insta needed to find orphans).
#[test]
fn no_orphan_snapshots() {
    const SNAPSHOTS: &[&str] = &["rich", "short", "json", "jsonl", "github", "sarif"];
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots");
    let mut orphans = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("tests/snapshots") {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        let Some(snapshot) = name.strip_prefix("formats__").and_then(|n| n.strip_suffix(".snap"))
        else {
            continue;
        };
        if !SNAPSHOTS.contains(&snapshot) {
            orphans.push(name);
        }
    }
    assert!(orphans.is_empty(), "snapshots without a test in formats.rs: {orphans:?}");
}

/// Runs `check --quiet --select all` on [`INPUTS`] and two more compiled fixtures (several
/// rules, all three severities, an input error), plus `extra`; returns the exit code and stdout.
fn check_all(extra: &[&str]) -> (Option<i32>, String) {
    let mut args = vec!["check", "--quiet", "--select", "all"];
    args.extend_from_slice(extra);
    args.extend_from_slice(INPUTS);
    args.extend([
        "fixtures/compiled/sm_100a/tcgen05.ptx",
        "fixtures/compiled/sm_90a/tma.nvdisasm.sass",
    ]);
    let out = fencelint(&args);
    (out.status.code(), String::from_utf8(out.stdout).expect("UTF-8 output"))
}

/// A rule's findings in [`statistics_count_the_findings_of_each_rule`]: how many, the
/// (file, kernel) functions and the files they are in.
type Counts = (u64, BTreeSet<(String, String)>, BTreeSet<String>);

/// `--statistics` counts what the same run reports, rule by rule and worst first, in each of
/// the formats that take it; the JSON matches its published schema.
#[test]
fn statistics_count_the_findings_of_each_rule() {
    let (code, findings) = check_all(&["--format", "json"]);
    assert_eq!(code, Some(2), "the missing file is an input error");
    let findings = json(&findings);
    // (rule, severity) -> (count, {(file, kernel)}, {file}), from the findings themselves.
    let mut groups: BTreeMap<(String, String), Counts> = BTreeMap::new();
    for d in findings["diagnostics"].as_array().unwrap() {
        let text = |field: &str| d[field].as_str().unwrap().to_owned();
        let (count, functions, files) = groups.entry((text("rule"), text("severity"))).or_default();
        *count += 1;
        if let Some(kernel) = d["kernel"].as_str() {
            functions.insert((text("file"), kernel.to_owned()));
        }
        files.insert(text("file"));
    }
    let mut expected: Vec<_> = groups.into_iter().collect();
    let rank = |severity: &str| ["error", "warning", "note"].iter().position(|s| *s == severity);
    expected.sort_by(|(a, x), (b, y)| {
        rank(&a.1).cmp(&rank(&b.1)).then(y.0.cmp(&x.0)).then(a.0.cmp(&b.0))
    });
    let expected: Vec<Value> = expected
        .into_iter()
        .map(|((rule, severity), (count, functions, files))| {
            serde_json::json!({
                "rule": rule,
                "severity": severity,
                "count": count,
                "functions": functions.len(),
                "files": files.len(),
            })
        })
        .collect();
    let severities: Vec<&str> = expected.iter().map(|r| r["severity"].as_str().unwrap()).collect();
    for severity in ["error", "warning", "note"] {
        assert!(severities.contains(&severity), "no {severity} among {expected:?}");
    }

    let schema = strict_output_schema();
    let defs = schema["$defs"].clone();
    let schema_of = |def: &str| serde_json::json!({ "$schema": schema["$schema"], "$ref": format!("#/$defs/{def}"), "$defs": defs });
    let (code, document) = check_all(&["--statistics", "--format", "json"]);
    assert_eq!(code, Some(2), "the exit code is that of the findings");
    let document = json(&document);
    assert_valid(&schema_of("statistics_document"), &document, "--statistics --format json");
    assert_eq!(document["version"], 1);
    assert_eq!(document["statistics"].as_array().unwrap(), &expected);

    let (_, lines) = check_all(&["--statistics", "--format", "jsonl"]);
    assert_eq!(lines.lines().count(), expected.len());
    for (line, row) in lines.lines().zip(&expected) {
        let mut value = json(line);
        assert_valid(&schema_of("statistics_line"), &value, "a --statistics --format jsonl line");
        assert_eq!(value.as_object_mut().unwrap().remove("version"), Some(Value::from(1)));
        assert_eq!(&value, row);
    }

    // The table: a header, then one row of numbers, severity and rule per rule, in that order.
    for format in ["short", "rich"] {
        let (code, table) = check_all(&["--statistics", "--format", format]);
        assert_eq!(code, Some(2));
        let mut rows = table.lines();
        let header: Vec<&str> = rows.next().unwrap().split_whitespace().collect();
        assert_eq!(header, ["count", "functions", "files", "severity", "rule"]);
        let got: Vec<Value> = rows
            .map(|row| {
                let cells: Vec<&str> = row.split_whitespace().collect();
                let number = |i: usize| cells[i].parse::<u64>().unwrap();
                serde_json::json!({
                    "rule": cells[4],
                    "severity": cells[3],
                    "count": number(0),
                    "functions": number(1),
                    "files": number(2),
                })
            })
            .collect();
        assert_eq!(got, expected, "{format}:\n{table}");
    }

    // SARIF and GitHub annotations carry findings only.
    for format in ["sarif", "github"] {
        let out = fencelint(&["check", "--statistics", "--format", format, INPUTS[0]]);
        assert_eq!(out.status.code(), Some(2));
        assert!(out.stdout.is_empty());
        assert!(String::from_utf8_lossy(&out.stderr).contains("`--statistics` prints counts"));
    }
}
