//! `iopctl job run|get|cancel`: fleet-wide jobs (`/v1/jobs`), with a progress bar.

use std::io::Write as _;
use std::time::Duration;

use serde_json::{Value, json};

use super::commands::{Output, SendArgs, emit, emit_json, get, ok, segment};
use super::http::Admin;
use super::{CtlError, Exit};
use crate::table::Table;

/// How often a waiting `job run` reads the job.
const POLL: Duration = Duration::from_millis(250);

/// What `iopctl job run` starts.
#[derive(Debug, Clone, Default)]
pub struct JobArgs {
    /// The command (its `edge_id` is unused; `id` is the job's id).
    pub command: SendArgs,
    /// Which Edges: `*`, ids, `meta:K=V`, `version:V`.
    pub edges: String,
    /// Edges at once.
    pub max_concurrent: Option<u64>,
    /// Failed Edges tolerated.
    pub max_failures: Option<u64>,
    /// Wait this long for offline Edges (else they are skipped).
    pub offline_wait_ms: Option<u64>,
}

/// `progress` as one line: a bar of done Edges and the counts.
fn bar(job: &Value) -> String {
    let p = &job["progress"];
    let n = |k: &str| p[k].as_u64().unwrap_or(0);
    let total = n("total").max(1);
    let done = n("succeeded") + n("failed") + n("skipped");
    let width = 30u64;
    let filled = (done * width / total) as usize;
    format!(
        "[{}{}] {done}/{} running {} succeeded {} failed {} skipped {}{}",
        "#".repeat(filled),
        ".".repeat(width as usize - filled),
        n("total"),
        n("running"),
        n("succeeded"),
        n("failed"),
        n("skipped"),
        match job["stopped"].as_str() {
            Some(why) => format!(" (stopped: {why})"),
            None => String::new(),
        }
    )
}

/// 0 when every Edge succeeded, 1 otherwise.
fn job_code(job: &Value) -> u8 {
    // Done means every Edge succeeded: one failed, skipped, cancelled or never
    // launched (a job stopped early) is not.
    let p = &job["progress"];
    let all = p["total"]
        .as_u64()
        .is_some_and(|t| p["succeeded"].as_u64() == Some(t));
    if all { 0 } else { 1 }
}

/// `iopctl job run OPERATION --edges SEL ...`: starts the job; with `--wait`, a
/// progress bar (on stderr) until it ends, then its per-Edge outcomes.
pub async fn run_job(admin: &Admin, out: Output, args: &JobArgs) -> Exit {
    let c = &args.command;
    let mut body = c.body("jobId");
    body["edges"] = json!(args.edges);
    if let Some(n) = args.max_concurrent {
        body["maxConcurrent"] = json!(n);
    }
    if let Some(n) = args.max_failures {
        body["maxFailures"] = json!(n);
    }
    if let Some(ms) = args.offline_wait_ms {
        body["offline"] = json!("wait");
        body["offlineWaitMs"] = json!(ms);
    }
    let mut job = ok(admin.call("POST", "/v1/jobs", Some(&body)).await?)?;
    let job_id = job["jobId"].as_str().unwrap_or_default().to_owned();
    if out == Output::Table {
        emit(&format!("job {job_id} started\n"));
    }
    if !c.wait {
        if out == Output::Json {
            emit_json(&job);
        }
        return Ok(0);
    }
    let path = format!("/v1/jobs/{}", segment(&job_id));
    loop {
        if out == Output::Table {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r{}", bar(&job));
            let _ = err.flush();
        }
        if job["state"] == "done" {
            break;
        }
        tokio::time::sleep(POLL).await;
        job = get(admin, &path).await?;
    }
    if out == Output::Table {
        let _ = writeln!(std::io::stderr());
    }
    show(admin, out, &job_id, None, 1_000).await?;
    Ok(job_code(&job))
}

/// `iopctl job get ID`: the summary and the per-Edge runs.
pub async fn run_job_get(
    admin: &Admin,
    out: Output,
    job_id: &str,
    after: Option<&str>,
    limit: usize,
) -> Exit {
    show(admin, out, job_id, after, limit).await?;
    Ok(0)
}

async fn show(
    admin: &Admin,
    out: Output,
    job_id: &str,
    after: Option<&str>,
    limit: usize,
) -> Result<(), CtlError> {
    let mut path = format!("/v1/jobs/{}?limit={limit}", segment(job_id));
    if let Some(after) = after {
        path.push_str(&format!("&after={}", segment(after)));
    }
    let job = get(admin, &path).await?;
    match out {
        Output::Json => {
            emit_json(&job);
        }
        Output::Table => {
            let mut table = Table::new(["EDGE", "STATE", "COMMAND", "MESSAGE"]);
            for e in job["edges"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
                table.row([
                    e["edgeId"].as_str().unwrap_or("-"),
                    e["state"].as_str().unwrap_or("-"),
                    e["commandId"].as_str().unwrap_or("-"),
                    e["message"].as_str().unwrap_or(""),
                ]);
            }
            emit(&format!(
                "job {} {} ({}): {}\n{table}",
                job["jobId"].as_str().unwrap_or(job_id),
                job["operation"].as_str().unwrap_or(""),
                job["state"].as_str().unwrap_or(""),
                bar(&job)
            ));
            if let Some(next) = job["next"].as_str() {
                emit(&format!("more: iopctl job get {job_id} --after {next}\n"));
            }
        }
    }
    Ok(())
}

/// `iopctl job cancel ID`.
pub async fn run_job_cancel(admin: &Admin, out: Output, job_id: &str) -> Exit {
    let path = format!("/v1/jobs/{}/cancel", segment(job_id));
    let job = ok(admin.call("POST", &path, None).await?)?;
    match out {
        Output::Json => emit_json(&job),
        Output::Table => emit(&format!("job {job_id} cancelled: {}\n", bar(&job))),
    };
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_fills_with_the_edges_done() {
        let job = json!({"progress": {"total": 4, "running": 1, "succeeded": 2, "failed": 0,
            "skipped": 0}, "stopped": null});
        let line = bar(&job);
        assert!(
            line.starts_with(&format!("[{}{}] 2/4", "#".repeat(15), ".".repeat(15))),
            "{line}"
        );
        assert_eq!(job_code(&job), 1);
    }
}
