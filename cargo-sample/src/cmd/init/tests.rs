use super::*;

#[test]
fn the_diff_shows_each_change_with_its_context_and_position() {
    let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
    let new = "a\nb\nc\nd\nX\ne\nf\ng\nh\n";
    assert_eq!(
        unified("f.rs", old, new),
        "--- f.rs\n+++ f.rs\n@@ -2,6 +2,7 @@\n b\n c\n d\n+X\n e\n f\n g\n"
    );
    assert_eq!(unified("f", old, old), "");
    let old: String = (0..30).map(|i| format!("l{i}\n")).collect();
    let new = old.replace("l2\n", "l2\nA\n").replace("l25\n", "B\n");
    let d = unified("f", &old, &new);
    assert_eq!(d.matches("@@ ").count(), 2, "{d}");
    assert!(d.contains("+A\n") && d.contains("-l25\n+B\n"), "{d}");
}

const MANIFEST: &str = "[package]\nname = \"app\" # keep me\nversion = \"0.1.0\"\n\n[dependencies]\ncortex-m-rt = \"0.7\"\n";

fn path_source() -> Source {
    Source::Path("../sampler-rt".into())
}

#[test]
fn manifest_gains_dependency_and_feature_and_keeps_comments() {
    let out = edit_manifest(MANIFEST, "sample", &path_source(), false).unwrap();
    assert!(out.contains("# keep me"));
    let doc: toml::Table = out.parse().unwrap();
    assert_eq!(
        doc["dependencies"]["sampler-rt"]["optional"].as_bool(),
        Some(true)
    );
    assert_eq!(
        doc["dependencies"]["sampler-rt"]["path"].as_str(),
        Some("../sampler-rt")
    );
    assert_eq!(
        doc["features"]["sample"][0].as_str(),
        Some("dep:sampler-rt")
    );
    assert_eq!(
        edit_manifest(&out, "sample", &path_source(), false).unwrap(),
        out,
        "not idempotent"
    );
    assert!(edit_manifest("[workspace]\n", "sample", &path_source(), false).is_err());
}

#[test]
fn an_explicit_source_replaces_an_unresolvable_one() {
    let set_up = "[package]\nname = \"a\"\nversion = \"0.1.0\"\n[dependencies]\nsampler-rt = { version = \"0.1\", optional = true, default-features = false }\n[features]\nsample = [\"dep:sampler-rt\"]\n";
    // Without a choice of source, a set-up crate stays as it is.
    assert_eq!(
        edit_manifest(set_up, "sample", &path_source(), false).unwrap(),
        set_up
    );
    let out = edit_manifest(set_up, "sample", &path_source(), true).unwrap();
    let doc: toml::Table = out.parse().unwrap();
    let dep = &doc["dependencies"]["sampler-rt"];
    assert_eq!(dep["path"].as_str(), Some("../sampler-rt"));
    assert!(dep.get("version").is_none());
    assert_eq!(
        dep["default-features"].as_bool(),
        Some(false),
        "other keys stay"
    );
    let git = Source::Git {
        url: "https://example.com/x.git".into(),
        rev: Some("abc".into()),
    };
    let out = edit_manifest(set_up, "sample", &git, true).unwrap();
    assert!(
        out.contains("git = \"https://example.com/x.git\", rev = \"abc\""),
        "{out}"
    );
}

#[test]
fn an_existing_feature_gains_the_dependency() {
    let m = "[package]\nname = \"a\"\nversion = \"0.1.0\"\n[features]\nsample = [\"defmt\"]\n";
    let out = edit_manifest(m, "sample", &path_source(), false).unwrap();
    assert!(
        out.contains("sample = [\"defmt\", \"dep:sampler-rt\"]"),
        "{out}"
    );
}

#[test]
fn the_ring_size_is_set_once_for_the_crate() {
    let out = set_ring_slots(MANIFEST, 2048).unwrap();
    let doc: toml::Table = out.parse().unwrap();
    assert_eq!(
        doc["package"]["metadata"]["sample"]["ring-slots"].as_integer(),
        Some(2048)
    );
    assert!(
        out.contains("[package.metadata.sample]\nring-slots = 2048"),
        "{out}"
    );
    assert_eq!(set_ring_slots(&out, 2048).unwrap(), out);
    assert!(set_ring_slots(MANIFEST, 8).is_err());
}

#[test]
fn relative_paths_between_directories() {
    assert_eq!(
        relative(
            Path::new("/w/repo/sampler-rt"),
            Path::new("/w/repo/examples/app")
        ),
        Some(PathBuf::from("../../sampler-rt"))
    );
    assert_eq!(relative(Path::new("/a/x"), Path::new("/b/y")), None);
    assert_eq!(
        normalize(Path::new("/w/repo/cargo-sample/../sampler-rt")),
        PathBuf::from("/w/repo/sampler-rt")
    );
}

#[test]
fn a_checkout_build_points_at_its_own_runtime() {
    let dir = checkout_runtime().expect("this test runs from a checkout");
    assert!(dir.join("src/lib.rs").is_file());
}

#[test]
fn an_embassy_application_gets_the_task_statistics_turned_on() {
    let m = "[package]\nname = \"app\"\nversion = \"0.1.0\"\n\n[dependencies]\nembassy-executor = { version = \"0.10\", features = [\"platform-cortex-m\"] }\n";
    let out = edit_manifest(m, "sample", &path_source(), false).unwrap();
    let doc: toml::Table = out.parse().unwrap();
    assert_eq!(
        doc["dependencies"]["sampler-rt"]["features"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v.as_str())
            .collect::<Vec<_>>(),
        ["embassy"]
    );
    assert_eq!(
        doc["features"]["sample"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v.as_str())
            .collect::<Vec<_>>(),
        ["dep:sampler-rt", "embassy-executor/trace"]
    );
    assert_eq!(
        edit_manifest(&out, "sample", &path_source(), false).unwrap(),
        out,
        "not idempotent"
    );
    // Without Embassy, neither.
    let plain = edit_manifest(MANIFEST, "sample", &path_source(), false).unwrap();
    assert!(!plain.contains("embassy"), "{plain}");
}
