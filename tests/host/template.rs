//! The GitHub Actions workflow users copy (`templates/github/performance-gate.yml`): it parses
//! as YAML, and every `cargo sample` command in it parses as this cargo-sample's command line
//! (placeholders `${{ ... }}` and `$VAR` stand for a path and a name).

use crate::support::repo;

#[test]
fn the_workflow_templates_commands_are_this_tools() {
    let path = repo().join("templates/github/performance-gate.yml");
    let text = std::fs::read_to_string(&path).unwrap();
    let doc: serde_json::Value = yaml_serde::from_str(&text).unwrap();
    let steps = doc["jobs"]["gate"]["steps"].as_array().unwrap();
    let mut commands = Vec::new();
    for step in steps {
        if let Some(run) = step["run"].as_str() {
            for line in run.lines() {
                if let Some(rest) = line.trim().strip_prefix("cargo sample ") {
                    commands.push(rest.to_owned());
                }
            }
        }
    }
    assert_eq!(commands.len(), 2, "{commands:?}");
    for c in &commands {
        // `${{ expression }}`: a path here.
        let mut line = c.clone();
        while let Some(i) = line.find("${{") {
            let j = line[i..]
                .find("}}")
                .map(|k| i + k + 2)
                .unwrap_or(line.len());
            line.replace_range(i..j, "/tmp");
        }
        let words: Vec<String> = line
            .split_whitespace()
            .map(|w| {
                if w.starts_with('$') {
                    "app".to_owned()
                } else {
                    w.to_owned()
                }
            })
            .collect();
        let argv = std::iter::once("cargo-sample".to_owned()).chain(words);
        let parsed = <cargo_sample::cli::Cli as clap::Parser>::try_parse_from(argv);
        assert!(parsed.is_ok(), "`cargo sample {c}`: {:?}", parsed.err());
        let cli = parsed.unwrap();
        assert!(cli.run.exact, "{c}");
        assert!(
            cli.run.save_baseline.is_some() || cli.run.baseline.is_some(),
            "{c}"
        );
    }
    // The comment step reads the file the gate writes.
    assert!(text.contains("-o gate.md") && text.contains("path: gate.md"));
}
