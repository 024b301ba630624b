//! User-space instructions per status round trip, ours against the raw TCP echo (and,
//! with 0 nodes, the codec and cores floors of `codec_floor`), per thread: `rt_instructions [N1 [N2 [NODES]]]` (default 2 000, 4 000, 0 nodes) runs
//! the `rt_profile` binary next to it under `valgrind --tool=callgrind
//! --separate-threads=yes` for both systems and both Ns, and divides the difference of
//! each thread's totals by N2 − N1, so set-up and tear-down cancel out. It then groups
//! each thread's self cost by the crate of the function it runs in (inlined code
//! counted in the function it was inlined into), with `callgrind_annotate`: both
//! threads share one CPU in the round trip, so the Edge's instructions count as much
//! as the Control Plane's. Needs valgrind; prints Markdown. See BENCHMARKS.md §4.
#![forbid(unsafe_code)]
#![allow(clippy::print_stdout)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use iop_bench::callgrind::parse_totals;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Instruction totals of one run, by thread number (1 = the main thread, where the
/// Control Plane's runtime runs; 2 = the Edge's runtime thread).
type Totals = BTreeMap<u32, u64>;

fn main() -> Result<(), BoxError> {
    let n1: u64 = iop_bench_socket::arg(1, 2_000);
    let n2: u64 = iop_bench_socket::arg(2, 4_000);
    let nodes: u64 = iop_bench_socket::arg(3, 0);
    if n2 <= n1 {
        return Err("N2 must be larger than N1".into());
    }
    let profile = std::env::current_exe()?.with_file_name("rt_profile");
    if !profile.exists() {
        return Err(format!(
            "{} is missing: build the bins first (cargo build --release --manifest-path \
             bench-socket/Cargo.toml --bins)",
            profile.display()
        )
        .into());
    }
    let dir = std::env::current_exe()?.with_file_name("callgrind-rt");
    std::fs::create_dir_all(&dir)?;
    let span = (n2 - n1) as f64;
    let mut per_rt: BTreeMap<&str, BTreeMap<u32, f64>> = BTreeMap::new();
    // Per thread, per system: self cost per round trip by crate.
    let mut groups: BTreeMap<u32, BTreeMap<&str, BTreeMap<String, f64>>> = BTreeMap::new();
    // The codec and cores floors answer with an empty status only.
    let systems: &[&str] = if nodes == 0 {
        &["ours", "echo", "floor", "cores"]
    } else {
        &["ours", "echo"]
    };
    for &system in systems {
        let (small, small_files) = run(&profile, &dir, system, n1, nodes)?;
        let (large, large_files) = run(&profile, &dir, system, n2, nodes)?;
        let threads = per_rt.entry(system).or_default();
        for (thread, total) in &large {
            let before = small.get(thread).copied().unwrap_or(0);
            threads.insert(*thread, (*total as f64 - before as f64) / span);
        }
        for thread in [1, 2] {
            if let (Some(a), Some(b)) = (small_files.get(&thread), large_files.get(&thread)) {
                let (a, b) = (by_crate(a)?, by_crate(b)?);
                let g = groups.entry(thread).or_default().entry(system).or_default();
                for (name, cost) in &b {
                    let before = a.get(name).copied().unwrap_or(0);
                    g.insert(name.clone(), (*cost as f64 - before as f64) / span);
                }
            }
        }
    }

    println!(
        "### User-space instructions per status round trip ({nodes} nodes; N = {n1} and {n2})\n"
    );
    println!("| thread | ours | cores floor | codec floor | raw TCP echo | ours − echo |");
    println!("|---|---:|---:|---:|---:|---:|");
    let no_floor = BTreeMap::new();
    let (ours, echo) = (&per_rt["ours"], &per_rt["echo"]);
    let floor = per_rt.get("floor").unwrap_or(&no_floor);
    let cores = per_rt.get("cores").unwrap_or(&no_floor);
    let cell = |v: Option<f64>| v.map_or("—".to_owned(), |v| format!("{v:.0}"));
    let name = |t: u32| match t {
        1 => "Control Plane (main thread)".to_owned(),
        2 => "Edge".to_owned(),
        t => format!("thread {t}"),
    };
    let threads: std::collections::BTreeSet<u32> =
        ours.keys().chain(echo.keys()).copied().collect();
    for t in threads {
        let (o, e) = (
            ours.get(&t).copied().unwrap_or(0.0),
            echo.get(&t).copied().unwrap_or(0.0),
        );
        println!(
            "| {} | {o:.0} | {} | {} | {e:.0} | {:.0} |",
            name(t),
            cell(cores.get(&t).copied()),
            cell(floor.get(&t).copied()),
            o - e
        );
    }
    let (o, e): (f64, f64) = (ours.values().sum(), echo.values().sum());
    let f = (!floor.is_empty()).then(|| floor.values().sum::<f64>());
    let c = (!cores.is_empty()).then(|| cores.values().sum::<f64>());
    println!(
        "| all | {o:.0} | {} | {} | {e:.0} | {:.0} |\n",
        cell(c),
        cell(f),
        o - e
    );

    let empty = BTreeMap::new();
    for (thread, by_system) in &groups {
        println!(
            "### {} thread, self cost per round trip by the function's crate\n",
            if *thread == 1 {
                "Control Plane"
            } else {
                "Edge"
            }
        );
        println!("| crate | ours | cores floor | codec floor | raw TCP echo |");
        println!("|---|---:|---:|---:|---:|");
        let go = by_system.get("ours").unwrap_or(&empty);
        let ge = by_system.get("echo").unwrap_or(&empty);
        let gf = by_system.get("floor");
        let gc = by_system.get("cores");
        let names: std::collections::BTreeSet<&String> = go
            .keys()
            .chain(ge.keys())
            .chain(gf.into_iter().flat_map(|g| g.keys()))
            .chain(gc.into_iter().flat_map(|g| g.keys()))
            .collect();
        let mut names: Vec<&String> = names.into_iter().collect();
        names.sort_by(|a, b| {
            let cost = |n: &String| go.get(n).copied().unwrap_or(0.0);
            cost(b).total_cmp(&cost(a))
        });
        for n in names {
            let (o, e) = (
                go.get(n).copied().unwrap_or(0.0),
                ge.get(n).copied().unwrap_or(0.0),
            );
            let f = gf.map(|g| g.get(n).copied().unwrap_or(0.0));
            let c = gc.map(|g| g.get(n).copied().unwrap_or(0.0));
            let big = |v: Option<f64>| v.is_some_and(|v| v.abs() >= 5.0);
            if o.abs() >= 5.0 || e.abs() >= 5.0 || big(f) || big(c) {
                println!("| `{n}` | {o:.0} | {} | {} | {e:.0} |", cell(c), cell(f));
            }
        }
        println!();
    }
    println!("Profiles: {}", dir.display());
    Ok(())
}

/// Runs `rt_profile system n nodes` under callgrind, one output file per thread.
fn run(
    profile: &Path,
    dir: &Path,
    system: &str,
    n: u64,
    nodes: u64,
) -> Result<(Totals, BTreeMap<u32, PathBuf>), BoxError> {
    let prefix = format!("{system}-{n}");
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path
            .file_name()
            .and_then(|f| f.to_str())
            .is_some_and(|f| f.starts_with(&format!("{prefix}.")))
        {
            std::fs::remove_file(path)?;
        }
    }
    let status = Command::new("valgrind")
        .args(["--tool=callgrind", "--separate-threads=yes"])
        .arg(format!(
            "--callgrind-out-file={}/{prefix}.%p",
            dir.display()
        ))
        .arg(profile)
        .args([system.to_owned(), n.to_string(), nodes.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("valgrind: {e}; is it installed? (apt-get install valgrind)"))?;
    if !status.success() {
        return Err(format!("valgrind on rt_profile {system} {n} failed: {status}").into());
    }
    let mut totals = Totals::new();
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let Some(file) = path.file_name().and_then(|f| f.to_str()) else {
            continue;
        };
        // `<prefix>.<pid>-<thread>`
        let Some(rest) = file.strip_prefix(&format!("{prefix}.")) else {
            continue;
        };
        let Some(thread) = rest
            .rsplit_once('-')
            .and_then(|(_, t)| t.parse::<u32>().ok())
        else {
            continue;
        };
        let total = parse_totals(&std::fs::read_to_string(&path)?)
            .ok_or_else(|| format!("no totals in {}", path.display()))?;
        totals.insert(thread, total);
        files.insert(thread, path);
    }
    if totals.is_empty() {
        return Err(format!("no callgrind output for {prefix}").into());
    }
    Ok((totals, files))
}

/// Self cost by the crate of the function it was counted in, from `callgrind_annotate`.
fn by_crate(profile: &Path) -> Result<BTreeMap<String, u64>, BoxError> {
    let out = Command::new("callgrind_annotate")
        .args(["--inclusive=no", "--threshold=100", "--auto=no"])
        .arg(profile)
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut groups = BTreeMap::new();
    for line in text.lines() {
        // "  12,345 ( 1.23%)  file:function [object]"
        let line = line.trim_start();
        let Some((count, rest)) = line.split_once(' ') else {
            continue;
        };
        let Ok(count) = count.replace(',', "").parse::<u64>() else {
            continue;
        };
        let Some((_, rest)) = rest.split_once(')') else {
            continue;
        };
        let place = rest.trim();
        if place.contains("PROGRAM TOTALS") {
            continue;
        }
        let place = place.split(" [").next().unwrap_or(place);
        let (file, function) = place.split_once(':').unwrap_or(("", place));
        let key =
            if file.starts_with("./") || function.starts_with("__") && !function.contains("::") {
                "glibc".to_owned()
            } else {
                let f = function.trim_start_matches(['<', '&']);
                f.split("::")
                    .next()
                    .unwrap_or(f)
                    .split(' ')
                    .next()
                    .unwrap_or(f)
                    .to_owned()
            };
        *groups.entry(key).or_insert(0) += count;
    }
    Ok(groups)
}
