//! Whole-layout jobs on a real Slurm cluster (issue 19, docs/DECISIONS.md D60–D63).
//!
//! Every test brings the one-host dev cluster up with `deploy/slurm/dev-cluster.sh up`
//! (Debian's slurm-wlm: munged, slurmctld, slurmd; installed by the script when
//! missing) and FAILS, saying why, when it cannot: nothing here is mocked and nothing
//! is skipped. The tests run one at a time (the cluster has this host's cores).
//!
//! - `reticle eval --executor slurm` on the whole of gcd_45nm prints the same bytes as
//!   the local executor (the issue's acceptance command at 2 nm, release binaries);
//! - an array element cancelled in the middle of a run has its tiles run again, and the
//!   report and `violations.jsonl` are byte-identical to a local run's;
//! - cancelling the MCP job leaves no element of its array in `squeue` and no
//!   `reticle-worker` of it within 2 s;
//! - an element Slurm stops over its time limit (`TIMEOUT`) is not resubmitted: the job
//!   fails with the limit's `RESOURCE_LIMIT` error, as a pool job over its time limit
//!   does. Its one element has a 4 × 4 array of gcd_45nm at 1 nm to image (about a
//!   quarter of an hour of work) under a one-minute limit, so Slurm always ends it; the
//!   dev cluster enforces no memory limit, so `OUT_OF_MEMORY`, which takes the same path
//!   (`dispatch::replay::after_loss`), is covered by the host's unit tests only;
//! - `reticle optimize --executor slurm` of a 2 × 2-tile box runs its four waves as job
//!   arrays and writes the same layout and prints the same bytes as the local executor
//!   ([`optimize`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use reticle_tests::{Host, data_dir, fixtures_dir, release_binary, repo_root};
use serde_json::{Value, json};

mod optimize;

/// The cluster has this host's cores: one test at a time.
static CLUSTER: Mutex<()> = Mutex::new(());

/// How long a test waits for one job to end.
const POLL_LIMIT: Duration = Duration::from_secs(300);

/// gcd_45nm; the test fails when the reference data is absent.
fn gcd() -> PathBuf {
    let path = data_dir().join("gds/gcd_45nm.gds");
    assert!(
        path.exists(),
        "{} not found (set RETICLE_DATA_DIR): the Slurm tests evaluate gcd_45nm",
        path.display()
    );
    path.canonicalize().unwrap()
}

/// Brings the dev cluster up, or fails with the script's own words.
fn cluster_up() -> std::sync::MutexGuard<'static, ()> {
    let guard = CLUSTER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let script = repo_root().join("deploy/slurm/dev-cluster.sh");
    let out = Command::new(&script)
        .arg("up")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "the Slurm dev cluster did not start ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // A host an earlier failed test killed (SIGKILL: no cleanup) may have left its array
    // queued; it would hold the cores this test needs.
    let _ = Command::new("scancel")
        .args(["--name=reticle-tiles", "--signal=KILL", "--full"])
        .output();
    let _ = Command::new("scancel").arg("--name=reticle-tiles").output();
    guard
}

/// `(element id, state)` of array `job` that `squeue` lists; `all` adds ended ones.
fn squeue(job: &str, all: bool) -> Vec<(String, String)> {
    let mut cmd = Command::new("squeue");
    cmd.args(["--noheader", "--array", "--format=%i %T", "--jobs", job]);
    if all {
        cmd.arg("--states=all");
    }
    let out = cmd.output().expect("squeue runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((w.next()?.to_owned(), w.next()?.to_owned()))
        })
        .collect()
}

/// Array job ids of reticle tile arrays Slurm knows now, newest last.
fn tile_arrays() -> Vec<String> {
    let out = Command::new("squeue")
        .args([
            "--noheader",
            "--states=all",
            "--name=reticle-tiles",
            "--format=%F",
        ])
        .output()
        .expect("squeue runs");
    let mut ids: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids.into_iter().map(|i| i.to_string()).collect()
}

/// Pids of `reticle-worker batch` processes whose manifest lies under `dir`.
fn batch_workers_under(dir: &Path) -> Vec<u32> {
    let needle = dir.to_string_lossy().into_owned();
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|&b| b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let worker = args.first().is_some_and(|a| a.ends_with("reticle-worker"));
        if worker && args.iter().any(|a| a.contains(&needle)) {
            out.push(pid);
        }
    }
    out
}

/// A host whose tiles run on the dev cluster (or on its own pool, `executor=local`).
fn start(executor: &str, tmp: &Path, tiles_per_task: &str) -> Host {
    start_with_time_limit(executor, tmp, tiles_per_task, "10")
}

/// [`start`] with each element's Slurm time limit (`--time`, minutes).
fn start_with_time_limit(
    executor: &str,
    tmp: &Path,
    tiles_per_task: &str,
    time_limit: &str,
) -> Host {
    let runtime = tmp.join("runtime");
    std::fs::create_dir_all(&runtime).unwrap();
    let roots = std::env::join_paths([fixtures_dir(), data_dir(), tmp.to_path_buf()])
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let artifacts = tmp.join(format!("artifacts-{executor}"));
    let shared = tmp.join("shared");
    Host::start_initialized(&[
        ("RETICLE_ALLOWED_ROOTS", roots.as_str()),
        ("RETICLE_BACKEND", "cpu"),
        ("RETICLE_WORKERS", "2"),
        ("RETICLE_EXECUTOR", executor),
        ("RETICLE_SLURM_TILES_PER_TASK", tiles_per_task),
        ("RETICLE_SLURM_SHARED_DIR", shared.to_str().unwrap()),
        ("RETICLE_SLURM_TIME_LIMIT", time_limit),
        ("KLAYOUT_MCP_ARTIFACT_ROOT", artifacts.to_str().unwrap()),
        ("XDG_RUNTIME_DIR", runtime.to_str().unwrap()),
        // A secret of the host's: array elements must not see it (D33, as pool workers).
        (HOST_SECRET, "not-for-workers"),
    ])
}

/// The job array submitted since `before` (the arrays listed then), once at least
/// `running` of its elements run and a `reticle-worker batch` of it under `tmp` is up.
fn running_array(before: &[String], tmp: &Path, running: usize) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(array) = tile_arrays().into_iter().find(|id| !before.contains(id)) {
            let elements = squeue(&array, false)
                .iter()
                .filter(|(_, s)| s == "RUNNING")
                .count();
            if elements >= running && !batch_workers_under(tmp).is_empty() {
                return array;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no element of the job's array ran within 60 s (arrays {:?})",
            tile_arrays()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until `squeue` lists no element of `array` and no `reticle-worker` of it runs
/// under `tmp`; fails when that takes 2 s (the G2 bound) from `since` (`after` names it).
fn assert_gone_within_2_s(array: &str, tmp: &Path, since: Instant, after: &str) {
    loop {
        let listed = squeue(array, false);
        let workers = batch_workers_under(tmp);
        if listed.is_empty() && workers.is_empty() {
            return;
        }
        assert!(
            since.elapsed() < Duration::from_secs(2),
            "2 s after {after}: squeue lists {listed:?}, reticle-worker pids {workers:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A host variable that no worker, local or on the cluster, may inherit.
const HOST_SECRET: &str = "RETICLE_TEST_HOST_SECRET";

/// The environment of process `pid`, `NAME=value` entries.
fn environ_of(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|e| !e.is_empty())
                .map(|e| String::from_utf8_lossy(e).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// `reticle ctl reexec` against `host` (its control socket is under `tmp/runtime`).
fn reexec(host: &Host, tmp: &Path) {
    let out = Command::new(reticle_tests::binary("reticle"))
        .args(["ctl", "reexec"])
        .env("MCP_READY_FILE", host.ready_file())
        .env("XDG_RUNTIME_DIR", tmp.join("runtime"))
        .output()
        .expect("reticle ctl runs");
    assert!(out.status.success(), "reticle ctl reexec: {out:?}");
}

fn job_of(started: &Value) -> String {
    started["structuredContent"]["job_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no job id: {started}"))
        .to_owned()
}

/// The report without its job fields and file paths; the files are compared apart.
fn report_bytes(report: &Value) -> String {
    let mut report = report.clone();
    let m = report.as_object_mut().unwrap();
    m.remove("job_id");
    m.remove("status");
    m.remove("artifacts");
    report.to_string()
}

fn violations_file(report: &Value) -> Vec<u8> {
    let path = report["artifacts"]["violations"]["path"]
        .as_str()
        .unwrap_or_else(|| panic!("a tiled report names violations.jsonl: {report}"));
    std::fs::read(path).unwrap()
}

fn events(host: &Host) -> Vec<Value> {
    let file = host
        .ready_file()
        .parent()
        .unwrap()
        .join("logs/events.jsonl");
    std::fs::read_to_string(&file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// How many of `tiles` have no outcome file (`results/<n>.json`) or marker (`done/<n>`) in
/// any job directory under `shared`.
fn tiles_without_outcome(shared: &Path, tiles: std::ops::Range<u64>) -> usize {
    let dirs: Vec<PathBuf> = std::fs::read_dir(shared)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    tiles
        .filter(|t| {
            !dirs.iter().any(|d| {
                d.join("results").join(format!("{t}.json")).exists()
                    || d.join("done").join(t.to_string()).exists()
            })
        })
        .count()
}

#[test]
fn reticle_eval_on_slurm_prints_the_same_bytes_as_the_local_executor() {
    let _cluster = cluster_up();
    let gcd = gcd();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("eval");
    let roots = std::env::join_paths([data_dir(), tmp.path().to_path_buf()]).unwrap();
    // The issue's acceptance command on the whole gcd_45nm, at 2 nm pixels: the same 675
    // tiles, halos, array elements and merge as at the default 1 nm, a quarter of the
    // imaging (D130: the suite's time goes to what it checks).
    let eval = |executor: &str| {
        let started = Instant::now();
        let output = Command::new(release_binary("reticle"))
            .args(["eval", "--executor", executor, "--deck", "nangate45_m1v1"])
            .args(["--layer", "11/0", "--pixel-nm", "2", "--out"])
            .arg(&out)
            .arg(&gcd)
            .env("RETICLE_ALLOWED_ROOTS", &roots)
            .env("RETICLE_BACKEND", "cpu")
            .env("RETICLE_SLURM_SHARED_DIR", tmp.path().join("shared"))
            // 675 tiles in 20 elements: ten rounds on the dev cluster's two cores.
            .env("RETICLE_SLURM_TILES_PER_TASK", "34")
            .output()
            .expect("reticle eval runs");
        eprintln!(
            "reticle eval --executor {executor}: {:?}",
            started.elapsed()
        );
        assert!(
            output.status.success(),
            "reticle eval --executor {executor} failed: {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        // --out holds the results only: the tiles' intermediates went with the job (D190).
        let mut names: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["heatmap.png", "report.json", "violations.jsonl"],
            "--out after reticle eval --executor {executor}"
        );
        (
            output.stdout,
            std::fs::read(out.join("violations.jsonl")).unwrap(),
        )
    };
    let (local, local_violations) = eval("local");
    let before = tile_arrays();
    let (slurm, slurm_violations) = eval("slurm");
    let after = tile_arrays();
    assert!(
        after.iter().any(|id| !before.contains(id)),
        "the slurm run submitted a job array (squeue before {before:?}, after {after:?})"
    );
    let report: Value = serde_json::from_slice(&local).unwrap();
    assert!(
        report["imaging"]["tiles"].as_u64().unwrap() > 100,
        "{}",
        report["imaging"]
    );
    assert!(
        local == slurm,
        "the reports differ:\nlocal {}\nslurm {}",
        String::from_utf8_lossy(&local),
        String::from_utf8_lossy(&slurm)
    );
    assert!(
        local_violations == slurm_violations,
        "violations.jsonl differs"
    );
    let leftovers: Vec<_> = std::fs::read_dir(tmp.path().join("shared"))
        .unwrap()
        .flatten()
        .collect();
    assert!(leftovers.is_empty(), "job directories left: {leftovers:?}");
}

#[test]
fn a_cancelled_array_element_changes_no_byte_of_the_report() {
    let _cluster = cluster_up();
    let gcd = gcd();
    let tmp = tempfile::tempdir().unwrap();
    let args = json!({"layout": gcd, "deck": "nangate45_m1v1", "layer": "11/0", "pixel_nm": 2,
                      "box_um": [10, 10, 18, 18], "report_level": "detailed"});
    let args_again = args.clone();

    let mut local = start("local", tmp.path(), "4");
    let local_job = job_of(&local.call_tool("l", "evaluate", args.clone()));
    let first = local.poll_until_done(&local_job, POLL_LIMIT, |_| {});
    assert_eq!(first["status"], "completed", "{first}");
    let local_report = first["result"].clone();
    drop(local);

    let mut host = start("slurm", tmp.path(), "4");
    let health = host.call_tool("h", "health", json!({"render": "json"}));
    assert_eq!(
        health["structuredContent"]["executor"]["name"], "slurm",
        "{health}"
    );
    // The cancel races the element's last tiles (well under a second each at 2 nm): when
    // it lands after the element finished them, nothing was lost and the run tested
    // nothing, so it is run again (at most three times), saying so.
    for attempt in 1..=3 {
        let before = tile_arrays();
        let job = job_of(&host.call_tool("s", "evaluate", args.clone()));
        let shared = tmp.path().join("shared");
        let mut cancelled: Option<String> = None;
        let second = host.poll_until_done(&job, POLL_LIMIT, |_| {
            if cancelled.is_some() {
                return;
            }
            let Some(array) = tile_arrays().into_iter().find(|id| !before.contains(id)) else {
                return;
            };
            // An element in the middle of its run: running, with at least two of its four
            // tiles (the first array's element e runs tiles 4e..4e+4) still without an
            // outcome.
            let mid_run = squeue(&array, false).into_iter().find(|(element, state)| {
                let Some(e) = element
                    .split_once('_')
                    .and_then(|(_, e)| e.parse::<u64>().ok())
                else {
                    return false;
                };
                state == "RUNNING" && tiles_without_outcome(&shared, 4 * e..4 * e + 4) >= 2
            });
            if let Some((element, _)) = mid_run {
                let out = Command::new("scancel").arg(&element).output().unwrap();
                assert!(out.status.success(), "scancel {element}: {out:?}");
                eprintln!("cancelled array element {element}");
                cancelled = Some(element);
            }
        });
        let element = cancelled.expect("an element of the array was seen running and cancelled");
        assert_eq!(second["status"], "completed", "{second}");
        let report = second["result"].clone();
        assert_eq!(report_bytes(&local_report), report_bytes(&report));
        assert!(
            violations_file(&local_report) == violations_file(&report),
            "violations.jsonl differs"
        );

        let telemetry = host.call_tool("t", "telemetry", json!({"render": "json"}));
        let state = &telemetry["structuredContent"]["dispatch"]["executor_state"];
        let lost = state["tasks_lost"].as_u64().unwrap_or(0);
        let resubmitted = state["resubmitted"].as_u64().unwrap_or(0);
        if lost >= 1 && resubmitted >= 1 {
            break;
        }
        assert!(
            lost == 0 && resubmitted == 0 && attempt < 3,
            "the cancelled element {element} counts as lost and its tiles as resubmitted \
             (attempt {attempt}): {state}"
        );
        eprintln!(
            "attempt {attempt}: {element} finished its tiles before the cancel landed \
             (nothing lost: {state}); running again"
        );
    }
    let names: Vec<String> = events(&host)
        .iter()
        .filter_map(|e| e["event"].as_str().map(str::to_owned))
        .filter(|n| n.starts_with("slurm."))
        .collect();
    for wanted in ["slurm.submitted", "slurm.task_failed", "slurm.resubmitted"] {
        assert!(
            names.iter().any(|n| n == wanted),
            "the event log records {wanted}: {names:?}"
        );
    }

    // A reexec in the middle of a job: the next image follows the same array on
    // (no second submission) and the report is unchanged.
    let before = tile_arrays();
    let job = job_of(&host.call_tool("r", "evaluate", args_again.clone()));
    let deadline = Instant::now() + Duration::from_secs(60);
    let array = loop {
        if let Some(array) = tile_arrays().into_iter().find(|id| !before.contains(id))
            && squeue(&array, false).iter().any(|(_, s)| s == "RUNNING")
        {
            break array;
        }
        assert!(Instant::now() < deadline, "the array did not start");
        std::thread::sleep(Duration::from_millis(50));
    };
    reexec(&host, tmp.path());
    let third = host.poll_until_done(&job, POLL_LIMIT, |_| {});
    assert_eq!(third["status"], "completed", "{third}");
    assert_eq!(report_bytes(&local_report), report_bytes(&third["result"]));
    let log = events(&host);
    let of_job: Vec<&Value> = log.iter().filter(|e| e["scope"] == job.as_str()).collect();
    assert!(
        of_job
            .iter()
            .any(|e| e["event"] == "slurm.adopted" && e["slurm_jobs"][0] == array.as_str()),
        "the next image adopted array {array}: {of_job:?}"
    );
    assert_eq!(
        of_job
            .iter()
            .filter(|e| e["event"] == "slurm.submitted")
            .count(),
        1,
        "the array was not submitted again after the reexec: {of_job:?}"
    );

    // Finished arrays leave health's list.
    let health = host.call_tool("h2", "health", json!({"render": "json"}));
    let summary = health["structuredContent"]["executor"]["summary"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(summary.starts_with("0 array(s)"), "{summary}");
}

#[test]
fn cancelling_the_mcp_job_cancels_its_whole_array_within_2_s() {
    let _cluster = cluster_up();
    let gcd = gcd();
    let tmp = tempfile::tempdir().unwrap();
    let mut host = start("slurm", tmp.path(), "4");
    let before = tile_arrays();
    // Whole gcd at 2 nm: minutes of tiles, so the cancel lands mid-run.
    let job = job_of(&host.call_tool(
        "s",
        "evaluate",
        json!({"layout": gcd, "deck": "nangate45_m1v1", "layer": "11/0", "pixel_nm": 2}),
    ));
    let array = running_array(&before, tmp.path(), 2);
    // An element runs with a pool worker's environment, not the host's.
    for pid in batch_workers_under(tmp.path()) {
        let env = environ_of(pid);
        if env.is_empty() {
            continue; // ended between the listing and the read
        }
        assert!(
            !env.iter().any(|e| e.starts_with(HOST_SECRET)),
            "element worker {pid} inherited the host's secret: {env:?}"
        );
        assert!(
            env.iter().any(|e| e == "MALLOC_TRIM_THRESHOLD_=268435456"),
            "element worker {pid} lacks the pool's allocator settings: {env:?}"
        );
    }
    let telemetry = host.call_tool("t", "telemetry", json!({"render": "json"}));
    let arrays = &telemetry["structuredContent"]["dispatch"]["executor_state"]["arrays"];
    assert!(
        arrays[&array]["running"].as_u64().unwrap_or(0) >= 1
            || arrays[&array]["pending"].as_u64().unwrap_or(0) >= 1,
        "telemetry shows array {array}: {arrays}"
    );
    // The executor polls every 250 ms: health catches up within a few polls.
    let shown = Instant::now();
    loop {
        let health = host.call_tool("h", "health", json!({"render": "json"}));
        let summary = health["structuredContent"]["executor"]["summary"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        // `N array(s): P pending, R running, …; local: …`
        let arrays = summary.split(';').next().unwrap_or_default();
        if arrays.starts_with("1 array(s)") && !arrays.contains(" 0 running") {
            break;
        }
        assert!(
            shown.elapsed() < Duration::from_secs(3),
            "health shows the running array: {summary}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let pending_before = squeue(&array, false).len();
    let cancelled = host.call_tool("c", "cancel", json!({"job_id": job}));
    let at = Instant::now();
    assert_eq!(
        cancelled["structuredContent"]["status"], "cancelled",
        "{cancelled}"
    );
    assert_gone_within_2_s(&array, tmp.path(), at, "the cancel");
    eprintln!(
        "array {array} ({pending_before} elements listed) gone {:?} after the cancel",
        at.elapsed()
    );
}

/// Writes `manifest` into a fresh directory of `mode` under `tmp`; returns its path.
fn manifest_in(tmp: &Path, name: &str, mode: u32, manifest: &Value) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = tmp.join(name);
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
    let path = dir.join("manifest-1.json");
    std::fs::write(&path, manifest.to_string()).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

#[test]
fn the_batch_worker_refuses_a_manifest_naming_anything_outside_its_roots() {
    let tmp = tempfile::tempdir().unwrap();
    let tmp = tmp.path().canonicalize().unwrap();
    let root = tmp.join("root");
    std::fs::create_dir(&root).unwrap();
    let layout = fixtures_dir().join("layouts/lines_and_pad.glp");
    let manifest = |dir: &str, layout: &Path| {
        json!({
            "version": 1, "batch_id": "j.s1", "op": "evaluate.tile",
            "args_json": json!({"layout": layout, "deck": "iccad13_m1"}).to_string(),
            "context": {"artifact_dir": tmp.join(dir), "allowed_roots": [root, fixtures_dir()],
                        "limits": {"max_layout_bytes": 1_000_000, "max_shapes": 1_000_000,
                                   "max_raster_pixels": 100_000_000}},
            "tiles": [[0, 1]], "tiles_per_task": 1
        })
    };
    let run = |path: &Path| {
        Command::new(reticle_tests::binary("reticle-worker"))
            .arg("batch")
            .arg(path)
            .args(["--element", "0"])
            .env("RETICLE_BACKEND", "cpu")
            .output()
            .expect("reticle-worker runs")
    };
    let cases = [
        (
            "outside",
            0o700,
            manifest("outside", Path::new("/etc/passwd")),
            "not inside its allowed roots",
        ),
        ("open", 0o755, manifest("open", &layout), "must be private"),
        (
            "elsewhere",
            0o700,
            manifest("open", &layout),
            "is not the manifest's directory",
        ),
    ];
    for (name, mode, m, why) in cases {
        let path = manifest_in(&tmp, name, mode, &m);
        let out = run(&path);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(stderr.contains(why), "{name}: expected {why:?} in {stderr}");
        assert!(
            !path.parent().unwrap().join("results").exists(),
            "{name}: nothing ran"
        );
        assert!(out.stdout.is_empty(), "the worker writes nothing to stdout");
    }
}

#[test]
fn a_tiled_simulate_on_slurm_writes_the_same_images_as_the_local_executor() {
    let _cluster = cluster_up();
    let tmp = tempfile::tempdir().unwrap();
    let layout = fixtures_dir().join("layouts/lines_and_pad.glp");
    let args = json!({"layout": layout, "pixel_nm": 4, "images": true, "tiling": "tiles",
                      "box_um": [-0.512, -0.512, 1.536, 1.536], "wait": true});
    let run = |executor: &str| {
        let mut host = start(executor, tmp.path(), "2");
        let answer = host.call_tool("s", "simulate", args.clone());
        let result = answer["structuredContent"].clone();
        assert_eq!(result["status"], "completed", "{executor}: {answer}");
        assert_eq!(result["imaging"]["mode"], "tiled", "{result}");
        let image = |name: &str| {
            let path = result["images"][name]["npy"]["path"]
                .as_str()
                .unwrap_or_else(|| panic!("{executor}: no {name} image: {result}"));
            std::fs::read(path).unwrap()
        };
        (
            result["imaging"]["tiles"].as_u64().unwrap(),
            image("aerial"),
            image("printed"),
            events(&host),
        )
    };
    let (tiles, aerial, printed, _) = run("local");
    assert!(tiles >= 4, "{tiles} tiles");
    let (tiles_s, aerial_s, printed_s, log) = run("slurm");
    assert_eq!(tiles, tiles_s);
    assert!(aerial == aerial_s, "the aerial images differ");
    assert!(printed == printed_s, "the printed images differ");
    assert!(
        log.iter().any(|e| e["event"] == "slurm.submitted"),
        "the tiles ran on Slurm"
    );
}

/// The client goes away (stdin closed) while a whole-layout job runs on the cluster: the
/// host cancels the job when its EOF grace ends (D70), which cancels the job's array, and
/// exits; within 2 s of the close neither the array nor a worker of it is left.
#[test]
fn a_client_that_disconnects_leaves_no_array_and_no_worker_within_2_s() {
    let _cluster = cluster_up();
    let gcd = gcd();
    let tmp = tempfile::tempdir().unwrap();
    let mut host = start("slurm", tmp.path(), "4");
    let before = tile_arrays();
    // Whole gcd at 2 nm: minutes of tiles, so the disconnect lands mid-run.
    job_of(&host.call_tool(
        "s",
        "evaluate",
        json!({"layout": gcd, "deck": "nangate45_m1v1", "layer": "11/0", "pixel_nm": 2}),
    ));
    let array = running_array(&before, tmp.path(), 1);
    let closed = Instant::now();
    let (status, _) = host.close_and_wait();
    assert!(status.success(), "the host exits 0 after EOF: {status:?}");
    assert_gone_within_2_s(&array, tmp.path(), closed, "the disconnect");
    eprintln!(
        "array {array} gone {:?} after the client closed stdin",
        closed.elapsed()
    );
}

/// An `n` × `n` array of gcd_45nm's top cell (a GDSII AREF, 100 nm between copies' boxes,
/// more than the deck's space rule) written to `dir`.
fn gcd_array(dir: &Path, n: u32) -> PathBuf {
    let bytes = std::fs::read(gcd()).unwrap();
    let mut lib = reticle_layout::read_gds(&bytes, &reticle_layout::Limits::default()).unwrap();
    let top = lib.top_cells()[0];
    let boxes = reticle_layout::cell_bboxes(&lib, None).unwrap();
    let b = boxes[top].expect("gcd's top cell has shapes");
    let mut array = reticle_layout::Cell::new(format!("ARRAY{n}"));
    array.instances.push(reticle_layout::Instance {
        cell: top,
        transform: reticle_layout::Transform::default(),
        repetition: Some(reticle_layout::Repetition::Array {
            cols: n,
            rows: n,
            col_step: reticle_layout::Point::new(b.right - b.left + 100, 0),
            row_step: reticle_layout::Point::new(0, b.top - b.bottom + 100),
        }),
    });
    lib.cells.push(array);
    let path = dir.join(format!("gcd_array{n}.gds"));
    std::fs::write(&path, reticle_layout::write_gds(&lib).unwrap()).unwrap();
    path
}

#[test]
fn an_element_stopped_over_its_time_limit_is_not_resubmitted() {
    let _cluster = cluster_up();
    let tmp = tempfile::tempdir().unwrap();
    // One element has every tile of a 4 × 4 array of gcd_45nm at 1 nm (16 times the
    // whole block, which takes about a minute on two cores) under a one-minute limit:
    // Slurm ends it `TIMEOUT` with most tiles not done, however fast the machine is.
    let layout = gcd_array(tmp.path(), 4);
    let mut host = start_with_time_limit("slurm", tmp.path(), "100000", "1");
    let before = tile_arrays();
    let args = json!({"layout": layout, "deck": "nangate45_m1v1", "layer": "11/0", "pixel_nm": 1});
    let job = job_of(&host.call_tool("s", "evaluate", args));
    let ended = host.poll_until_done(&job, POLL_LIMIT, |_| {});
    assert_eq!(ended["status"], "failed", "{ended}");
    let error = &ended["error"];
    assert_eq!(error["code"], "RESOURCE_LIMIT", "{error}");
    assert_eq!(error["fault_class"], "resource", "{error}");
    let cause = &error["details"]["cause"];
    assert_eq!(cause["kind"], "scheduler_ended", "{error}");
    assert_eq!(cause["state"], "TIMEOUT", "{error}");
    assert_eq!(cause["limit"], "wall_time", "{error}");
    assert!(
        error["details"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("RETICLE_SLURM_TIME_LIMIT")),
        "the hint names the setting: {error}"
    );

    let arrays: Vec<String> = tile_arrays()
        .into_iter()
        .filter(|id| !before.contains(id))
        .collect();
    assert_eq!(arrays.len(), 1, "one array, never a second: {arrays:?}");
    let telemetry = host.call_tool("t", "telemetry", json!({"render": "json"}));
    let dispatch = &telemetry["structuredContent"]["dispatch"];
    assert_eq!(
        dispatch["executor_state"]["resubmitted"], 0,
        "nothing was resubmitted: {dispatch}"
    );
    assert!(
        dispatch["stopped_over_limit"].as_u64().unwrap_or(0) >= 1,
        "the stop over the limit is counted: {dispatch}"
    );
    let of_job: Vec<Value> = events(&host)
        .into_iter()
        .filter(|e| e["scope"] == job.as_str())
        .collect();
    assert!(
        of_job
            .iter()
            .any(|e| e["event"] == "slurm.task_failed" && e["state"] == "TIMEOUT"),
        "the element's end is in the event log: {of_job:?}"
    );
    assert!(
        of_job.iter().any(|e| e["event"] == "slurm.over_limit"),
        "the over-limit decision is in the event log: {of_job:?}"
    );
    assert!(
        !of_job.iter().any(|e| e["event"] == "slurm.resubmitted"),
        "no resubmission: {of_job:?}"
    );
}
