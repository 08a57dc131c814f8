//! The notebooks run top to bottom without a cell error on a seeded demo home, in the Python
//! `duckdb` with the `mess_yaml` extension (both provided by `.ci/test`).

use std::path::Path;
use std::process::Command;

use tempfile::TempDir;

#[test]
#[ignore = "drives jupyter and the mess_yaml extension; .ci/test runs it"]
fn every_notebook_runs_without_a_cell_error() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let jupyter = repo.join(".venv/bin/jupyter");
    let ext = repo.join("extensions/mess_yaml/mess_yaml.duckdb_extension");
    assert!(
        jupyter.exists() && ext.exists(),
        "jupyter ({}) and the extension ({}) are missing: run .ci/test, which installs and builds them",
        jupyter.display(),
        ext.display()
    );
    let dir = TempDir::new().unwrap();
    let home = dir.path().join("home");
    let seeded = Command::new(env!("CARGO_BIN_EXE_mess"))
        .args(["demo", "seed", "--threads", "600", "--days", "10"])
        .env("MESS_HOME", &home)
        .output()
        .unwrap();
    assert!(
        seeded.status.success(),
        "{}",
        String::from_utf8_lossy(&seeded.stderr)
    );
    let mut notebooks: Vec<_> = std::fs::read_dir(repo.join("notebooks"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "ipynb"))
        .collect();
    notebooks.sort();
    assert!(notebooks.len() >= 2, "{notebooks:?}");
    let out_dir = dir.path().join("executed");
    for nb in &notebooks {
        let out = Command::new(&jupyter)
            .args([
                "nbconvert",
                "--to",
                "notebook",
                "--execute",
                "--ExecutePreprocessor.timeout=300",
                "--output-dir",
            ])
            .arg(&out_dir)
            .arg(nb)
            .current_dir(repo.join("notebooks"))
            .env("MESS_HOME", &home)
            .env("MESS_EXTENSION", &ext)
            .env("MESS_BIN", env!("CARGO_BIN_EXE_mess"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{} failed:\n{}",
            nb.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let executed = std::fs::read_to_string(out_dir.join(nb.file_name().unwrap())).unwrap();
        assert!(
            executed.contains("image/png"),
            "{} drew no plot",
            nb.display()
        );
    }
}
