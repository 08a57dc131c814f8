//! The Debian package: `packaging/build-deb` makes it with cargo-deb, `dpkg -i` installs it on
//! this machine (the `mess` user, /var/lib/mess, the systemd unit, manual pages, completions),
//! the service starts as its unit says, as the `mess` user (by hand where systemd is not
//! running, as in CI's container), answers `/healthz` with the build's commit, and `dpkg
//! --purge` removes the program and keeps the exchange's data.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use crate::support::free_port;

/// Runs `program args` as root (directly, or through `sudo -n`); its output.
fn as_root(program: &str, args: &[&str]) -> std::process::Output {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let mut command = if root {
        Command::new(program)
    } else {
        let mut c = Command::new("sudo");
        c.args(["-n", program]);
        c
    };
    command.args(args).output().unwrap_or_else(|e| {
        panic!("cannot run {program} as root ({e}): the package test needs root or sudo -n")
    })
}

fn ok(program: &str, args: &[&str]) -> String {
    let out = as_root(program, args);
    assert!(
        out.status.success(),
        "{program} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The value of `key=` in the unit's `[Service]` lines (the first one).
fn unit_value<'a>(unit: &'a str, key: &str) -> &'a str {
    unit.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("the unit has no {key}=:\n{unit}"))
}

#[test]
#[ignore = "drives cargo-deb and dpkg (as root); .ci/test runs it"]
fn the_deb_installs_a_service_that_runs_as_its_own_user_with_its_home_in_var_lib() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let built = Command::new(repo.join("packaging/build-deb"))
        .arg("--no-build")
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "build-deb: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    let deb = String::from_utf8_lossy(&built.stdout).trim().to_owned();
    assert!(deb.ends_with(".deb"), "{deb}");
    let info = Command::new("dpkg-deb")
        .args(["--info", &deb])
        .output()
        .unwrap();
    let info = String::from_utf8_lossy(&info.stdout);
    assert!(
        info.contains("Package: mess") && info.contains("adduser"),
        "{info}"
    );

    ok("dpkg", &["-i", &deb]);
    // Stopped, purged and removed however the test ends.
    let mut installed = Installed(None);
    let status = ok("dpkg", &["-s", "mess"]);
    assert!(status.contains("Status: install ok installed"), "{status}");
    let files = ok("dpkg", &["-L", "mess"]);
    for f in [
        "/usr/bin/mess",
        "/etc/default/mess",
        "/usr/share/man/man1/mess.1",
        "/usr/share/man/man1/mess-serve.1",
        "/usr/share/bash-completion/completions/mess",
    ] {
        assert!(
            files.lines().any(|l| l.starts_with(f)),
            "{f} not installed:\n{files}"
        );
    }
    let unit_path = files
        .lines()
        .find(|l| l.ends_with("/systemd/system/mess.service"))
        .unwrap_or_else(|| panic!("no unit installed:\n{files}"));
    let unit = std::fs::read_to_string(unit_path).unwrap();
    let version = ok("/usr/bin/mess", &["--version"]);
    assert!(
        version.contains(env!("CARGO_PKG_VERSION")) && version.contains("commit"),
        "{version}"
    );
    let user = ok("getent", &["passwd", "mess"]);
    assert!(user.contains(":/var/lib/mess:"), "{user}");
    let owner = ok("stat", &["-c", "%U:%G %a", "/var/lib/mess"]);
    assert_eq!(owner.trim(), "mess:mess 750");

    // Start it as its unit does: its user, its environment, its command (with the address
    // from the environment file's variable, on a free port).
    assert_eq!(unit_value(&unit, "User"), "mess");
    let home = unit_value(&unit, "Environment");
    assert_eq!(home, "MESS_HOME=/var/lib/mess");
    let exec = unit_value(&unit, "ExecStart");
    let port = free_port();
    let addr = format!("MESS_ADDR=127.0.0.1:{port}");
    let mut args = vec!["-u", "mess", "--", "env", home, &addr];
    args.extend(exec.split_whitespace());
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let mut service = if root {
        Command::new("runuser")
    } else {
        let mut c = Command::new("sudo");
        c.args(["-n", "runuser"]);
        c
    };
    let child = service
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = installed.0.insert(child).stdout.take().unwrap();
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), format!("listening on http://127.0.0.1:{port}"));
    let health = {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(
            s,
            "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    };
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    let commit = version
        .split("commit ")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap();
    assert!(health.contains(commit), "{health}");
    // The home it made belongs to the service's user.
    let made = ok("stat", &["-c", "%U", "/var/lib/mess/state=received"]);
    assert_eq!(made.trim(), "mess");
    stop_service();
    if let Some(mut child) = installed.0.take() {
        let _ = child.wait();
    }

    // Purged: the program goes, the exchange's data stays.
    ok("dpkg", &["--purge", "mess"]);
    assert!(!Path::new("/usr/bin/mess").exists());
    assert!(Path::new("/var/lib/mess/state=received").exists());
}

/// The service's process while the test runs; dropping it stops the service, purges the
/// package and removes its data, so a failed run leaves this machine as it was.
struct Installed(Option<std::process::Child>);

impl Drop for Installed {
    fn drop(&mut self) {
        stop_service();
        if let Some(mut child) = self.0.take() {
            let _ = child.wait();
        }
        let _ = as_root("dpkg", &["--purge", "mess"]);
        let _ = as_root("rm", &["-rf", "/var/lib/mess"]);
    }
}

fn stop_service() {
    let _ = as_root("pkill", &["-TERM", "-u", "mess", "-f", "mess serve"]);
}
