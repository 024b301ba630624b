//! The fleet dashboard in a real browser: `iop-control-plane` with an admin token and
//! two `iop-edge --simulate`, and a headless Chromium that asks for the token, shows
//! the fleet's load (its totals as the API gives them, charts of its last samples) and
//! both Edges and their nodes, sends `node.drain` from the form and follows it to
//! SUCCEEDED, sees a node drop (its providers zeroed, when they were last online) and
//! come back, and cancels a drain waiting for a lease from its Cancel button. It saves
//! screenshots (`IOP_BLESS=1` also writes them to `docs/dashboard.png` and
//! `docs/dashboard-fleet.png`, the README's).

mod cli_support;

use std::path::PathBuf;

use cli_support::webdriver::Browser;
use cli_support::{control_plane, edge, secret_file};
use serde_json::json;

const TOKEN: &str = "dashboard-test-token-7c1f0e9a";

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/edge.toml")
}

/// Picks `operation` and types `selector` in the command form, then sends it.
fn send(browser: &Browser, operation: &str, selector: &str) {
    browser.click(&browser.find(&format!("#operation option[value=\"{operation}\"]")));
    let input = browser.find("#selector");
    browser.clear(&input);
    browser.type_text(&input, selector);
    browser.click(&browser.find("#send"));
}

/// A script that is true once the timeline of the newest `operation` command is in
/// `phase`, with every phase before it shown.
fn timeline_reached(operation: &str, phase: &str) -> String {
    format!(
        "const t = [...document.querySelectorAll('li.timeline')]
            .find(li => li.querySelector('.timeline-head strong').textContent === '{operation}');
         if (!t || t.dataset.phase !== '{phase}') return false;
         return [...t.querySelectorAll('.phases li')].map(li => li.dataset.phase).join(',');"
    )
}

#[test]
#[ignore = "needs Chromium and chromedriver: scripts/test.sh runs it"]
fn an_operator_sees_the_fleet_runs_a_command_and_watches_a_node_drop_and_return() {
    let browser = Browser::start(1280, 800);
    let tokens = secret_file("admin-tokens", &format!("{TOKEN} operate\n"));
    // The load refreshed and sampled every second, so that the charts fill quickly.
    let cp = control_plane(&[
        "--admin-token-file",
        tokens.to_str().unwrap(),
        "--status-refresh-ms",
        "1000",
        "--fleet-history-interval-ms",
        "1000",
        "--edge-history-interval-ms",
        "1000",
        "--load-history-ms",
        "60000",
    ]);
    let sim = ["--simulate", "--simulate-interval-ms", "100"];
    let _a = edge(
        cp.edges,
        "edge-a",
        &examples(),
        &[&sim[..], &["--seed", "1"]].concat(),
    );
    let _b = edge(
        cp.edges,
        "edge-b",
        &examples(),
        &[&sim[..], &["--seed", "2"]].concat(),
    );

    // The page asks for the token, and keeps it out of the URL.
    browser.goto(&format!("http://{}/", cp.admin));
    browser.wait(
        "the token form",
        "return !document.getElementById('login-view').hidden",
    );
    browser.type_text(&browser.find("#token"), TOKEN);
    browser.click(&browser.find("#login-form button[type=submit]"));

    // The fleet: both Edges connected, with their nodes counted.
    for id in ["edge-a", "edge-b"] {
        let nodes = browser.wait(
            &format!("{id} connected in the fleet table"),
            &format!(
                "const r = document.querySelector('#fleet tr[data-edge=\"{id}\"]');
                 return r && r.dataset.reachability === 'CONNECTED'
                     && r.querySelector('[data-field=nodes]').textContent.endsWith('/ 2')
                     && r.querySelector('[data-field=nodes]').textContent"
            ),
        );
        assert!(nodes.as_str().unwrap().ends_with("/ 2"), "{nodes}");
    }
    assert!(
        !browser
            .js("return location.href", json!([]))
            .to_string()
            .contains(TOKEN)
    );
    // The fleet's load: the capacity the page shows is the API's, and each chart drew a
    // point for each sample the page was given (a few seconds of them).
    let shown = browser.wait(
        "the fleet's capacity as the API gives it",
        "const t = sessionStorage.getItem('iop-admin-token');
         const shown = document.querySelector('#load-totals [data-field=capacity]');
         if (!shown) return false;
         const x = new XMLHttpRequest();
         x.open('GET', '/v1/fleet/load', false);
         x.setRequestHeader('Authorization', 'Bearer ' + t);
         x.send();
         const api = JSON.parse(x.responseText).total.capacity;
         return api > 0 && shown.textContent === api.toLocaleString('en-US') && api;",
    );
    assert!(shown.as_u64().unwrap() > 0, "{shown}");
    let drawn = browser.wait(
        "charts of at least three samples",
        "const box = document.getElementById('load-charts');
         const n = Number(box.dataset.samples || 0);
         const charts = [...box.querySelectorAll('svg.chart')];
         if (n < 3 || charts.length !== 4) return false;
         const counts = charts.map(c => c.querySelector('polyline').getAttribute('points').trim().split(/\\s+/).length);
         return counts.every(c => c === n) && charts.every(c => Number(c.dataset.points) === n) && n;",
    );
    assert!(drawn.as_u64().unwrap() >= 3, "{drawn}");
    // The load panel follows the load watch: the simulated Edges' pushed changes
    // arrive, and the panel is read again within a second or so of them — not at the
    // 10 s pace it keeps while the load is idle.
    let changes = browser.wait(
        "load changes from the watch",
        "const n = Number(document.body.dataset.watchChanges || 0); return n >= 3 && n;",
    );
    assert!(changes.as_u64().unwrap() >= 3, "{changes}");
    let t0 = browser.js("return Number(document.body.dataset.loadAt)", json!([]));
    let redrawn = browser.wait(
        "the load panel redrawn as the load changes",
        &format!("const t = Number(document.body.dataset.loadAt); return t > {t0} && t - {t0}"),
    );
    assert!(
        redrawn.as_f64().unwrap() < 5_000.0,
        "redrawn {redrawn} ms apart: polled, not following the watch"
    );
    let categories = browser.js(
        "return [...document.querySelectorAll('#load-categories tbody tr')].map(r => r.dataset.group)",
        json!([]),
    );
    assert!(
        categories
            .as_array()
            .unwrap()
            .contains(&json!("local_inference")),
        "{categories}"
    );
    let bar = browser.js(
        "const b = document.querySelector('#load-totals svg.loadbar');
         return b && b.getAttribute('aria-label')",
        json!([]),
    );
    assert!(
        bar.as_str().unwrap().contains("capacity"),
        "the whole fleet's bar says what it shows: {bar}"
    );
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let fleet_shot = shots.join("dashboard-fleet.png");
    // Tall enough for the totals, the charts and the Edges.
    browser.resize(1280, 1160);
    browser.screenshot(&fleet_shot);
    browser.resize(1280, 800);
    let live = browser.wait(
        "the event stream",
        "return document.getElementById('live').textContent === 'live'",
    );
    assert_eq!(live, json!(true));

    // One Edge, opened from the keyboard: its nodes and providers, from a status
    // round trip.
    // (The fleet page redraws its table as the load changes: the link is found again
    // when it was replaced meanwhile.)
    browser.focus_and_type("a[href=\"#/edge/edge-a\"]", "\u{E007}"); // Enter
    browser.wait(
        "the Edge view, focused on its title",
        "return document.activeElement && document.activeElement.id === 'edge-title'",
    );
    for node in ["gpu-1", "cpu-1"] {
        browser.wait(
            &format!("node {node} of edge-a with its providers"),
            &format!(
                "const r = document.querySelector('#nodes tr[data-node=\"{node}\"]');
                 return r && r.querySelectorAll('li.provider').length === 2"
            ),
        );
    }
    let ops = browser.js(
        "return [...document.querySelectorAll('#operation option')].map(o => o.value)",
        json!([]),
    );
    for op in ["edge.ping", "node.drain", "sim.disconnect", "sim.connect"] {
        assert!(
            ops.as_array().unwrap().contains(&json!(op)),
            "{op} not offered: {ops}"
        );
    }
    let choices = browser.js(
        "return [...document.querySelectorAll('#selectors option')].map(o => o.value)",
        json!([]),
    );
    for selector in ["node:gpu-1", "provider:gpu-1/llama", "label:zone=a"] {
        assert!(
            choices.as_array().unwrap().contains(&json!(selector)),
            "{selector}: {choices}"
        );
    }

    // A drain from the form, followed phase by phase to SUCCEEDED.
    send(&browser, "node.drain", "node:gpu-1");
    let phases = browser.wait(
        "node.drain SUCCEEDED",
        &timeline_reached("node.drain", "SUCCEEDED"),
    );
    let phases = phases.as_str().unwrap();
    assert!(phases.starts_with("ACCEPTED,RUNNING"), "{phases}");
    assert!(phases.ends_with("SUCCEEDED"), "{phases}");

    // An error of the admin API is shown as such.
    send(&browser, "node.drain", "node:no-such-node");
    let rejected = browser.wait(
        "the rejection of an unknown node",
        "const t = document.querySelector('li.timeline');
         return t && t.querySelector('p').textContent.includes('NO_MATCHING_TARGET') && t.querySelector('p').textContent",
    );
    assert!(
        rejected.as_str().unwrap().contains("no-such-node"),
        "{rejected}"
    );

    // A node drops: its row turns disconnected, its providers' numbers go to zero.
    browser.wait(
        "cpu-1 ready",
        "const r = document.querySelector('#nodes tr[data-node=\"cpu-1\"]');
         return r && r.dataset.state === 'READY'",
    );
    send(&browser, "sim.disconnect", "node:cpu-1");
    let zeroed = browser.wait(
        "cpu-1 disconnected with zeroed providers",
        "const r = document.querySelector('#nodes tr[data-node=\"cpu-1\"]');
         if (!r || r.dataset.state !== 'DISCONNECTED' || r.dataset.connected !== 'false') return false;
         const p = [...r.querySelectorAll('li.provider')];
         return p.length === 2 && p.every(x => x.dataset.capacity === '0' && x.dataset.inFlight === '0'
             && x.dataset.queued === '0' && x.dataset.eligible === 'false')
             && p.map(x => x.dataset.status + '/' + x.dataset.health).join(',');",
    );
    assert_eq!(zeroed, json!("UNAVAILABLE/OFFLINE,UNAVAILABLE/OFFLINE"));
    // ... and says when each was last online, with what; the others have a sparkline of
    // their last samples.
    browser.wait(
        "cpu-1's providers last seen online",
        "const r = document.querySelector('#nodes tr[data-node=\"cpu-1\"]');
         return r && r.querySelectorAll('.last-online').length === 2
             && [...r.querySelectorAll('.last-online')].every(p => /last seen online .* with capacity [1-9]/.test(p.textContent))",
    );
    browser.wait(
        "gpu-1's providers with sparklines",
        "const r = document.querySelector('#nodes tr[data-node=\"gpu-1\"]');
         return r && r.querySelectorAll('svg.sparkline').length === 2",
    );
    let screenshot = shots.join("dashboard.png");
    browser.js("window.scrollTo(0, 0)", json!([]));
    browser.screenshot(&screenshot);

    // ... and comes back.
    send(&browser, "sim.connect", "node:cpu-1");
    browser.wait(
        "cpu-1 ready again",
        "const r = document.querySelector('#nodes tr[data-node=\"cpu-1\"]');
         return r && r.dataset.state === 'READY' && r.dataset.connected === 'true'",
    );

    // A drain that waits for a lease, stopped from its Cancel button: the drain ends
    // CANCELLED saying so, the cancellation SUCCEEDED, and the button goes.
    send(&browser, "sim.lease", "node:cpu-1");
    browser.wait(
        "sim.lease SUCCEEDED",
        &timeline_reached("sim.lease", "SUCCEEDED"),
    );
    send(&browser, "node.drain", "node:cpu-1");
    browser.wait(
        "node.drain RUNNING, waiting for the lease",
        &timeline_reached("node.drain", "RUNNING"),
    );
    browser.click(&browser.find("li.timeline[data-phase=\"RUNNING\"] button.cancel"));
    let phases = browser.wait(
        "node.drain CANCELLED",
        &timeline_reached("node.drain", "CANCELLED"),
    );
    assert!(
        phases.as_str().unwrap().ends_with("RUNNING,CANCELLED"),
        "{phases}"
    );
    browser.wait(
        "command.cancel SUCCEEDED",
        &timeline_reached("command.cancel", "SUCCEEDED"),
    );
    let said = browser.js(
        "const t = [...document.querySelectorAll('li.timeline')]
            .find(li => li.querySelector('.timeline-head strong').textContent === 'node.drain');
         return [t.querySelectorAll('button.cancel').length, t.textContent]",
        json!([]),
    );
    assert_eq!(said[0], json!(0), "a finished drain keeps no Cancel button");
    assert!(
        said[1].as_str().unwrap().contains("stopped waiting"),
        "{said}"
    );

    // Every control is labelled (keyboard and screen-reader users reach it by name).
    let unlabelled = browser.js(
        "return [...document.querySelectorAll('input, select, button')]
            .filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label') && !e.textContent.trim())
            .map(e => e.id || e.outerHTML)",
        json!([]),
    );
    assert_eq!(unlabelled, json!([]), "controls without a label");

    // The events view lists the drop, and filters.
    browser.click(&browser.find("a[data-nav=events]"));
    browser.type_text(&browser.find("#events-text"), "cpu-1 node_disconnected");
    let shown = browser.wait(
        "the disconnect in the events view",
        "const rows = [...document.querySelectorAll('#events tbody tr')];
         return rows.length > 0 && rows.every(r => r.textContent.includes('cpu-1 node_disconnected')) && rows.length",
    );
    assert!(shown.as_u64().unwrap() >= 1);

    // Nothing went wrong on the page itself (its own faults are shown in the notice).
    let faults = browser.js("return document.body.dataset.faults || null", json!([]));
    assert_eq!(faults, json!(null), "the page's own code failed");
    // (and the count works: a fault thrown on purpose is counted and shown)
    browser.js(
        "window.dispatchEvent(new ErrorEvent('error', { message: 'probe' }))",
        json!([]),
    );
    browser.wait(
        "the probe fault shown",
        "return document.body.dataset.faults === '1'
            && document.getElementById('notice').textContent.includes('probe')",
    );

    // On a phone: nothing wider than the screen but the tables, which scroll.
    browser.resize(390, 844);
    for view in ["#/", "#/edge/edge-a", "#/events"] {
        browser.js(&format!("location.hash = '{view}'"), json!([]));
        browser.wait(
            &format!("{view} fits a phone's width"),
            "return document.documentElement.scrollWidth <= window.innerWidth",
        );
    }
    browser.screenshot(&shots.join("dashboard-phone-events.png"));

    if std::env::var_os("IOP_BLESS").is_some() {
        let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs");
        std::fs::copy(&screenshot, docs.join("dashboard.png")).expect("write docs/dashboard.png");
        std::fs::copy(&fleet_shot, docs.join("dashboard-fleet.png"))
            .expect("write docs/dashboard-fleet.png");
    }
}

#[test]
#[ignore = "needs Chromium and chromedriver: scripts/test.sh runs it"]
fn the_dashboard_works_over_https_and_the_admin_port_speaks_nothing_else() {
    let browser = Browser::start_with(1280, 800, true);
    let pki = cli_support::test_pki("admin-pki");
    let file = |name: &str| pki.join(name).display().to_string();
    let tokens = secret_file("admin-tokens", &format!("{TOKEN} operate\n"));
    let cp = control_plane(&[
        "--admin-token-file",
        tokens.to_str().unwrap(),
        "--admin-tls-cert",
        &file("server.pem"),
        "--admin-tls-key",
        &file("server.key"),
    ]);
    let _a = edge(cp.edges, "edge-a", &examples(), &["--simulate"]);

    browser.goto(&format!("https://{}/", cp.admin));
    browser.wait(
        "the token form over https",
        "return !document.getElementById('login-view').hidden",
    );
    browser.type_text(&browser.find("#token"), TOKEN);
    browser.click(&browser.find("#login-form button[type=submit]"));
    browser.wait(
        "edge-a connected in the fleet table",
        "const r = document.querySelector('#fleet tr[data-edge=\"edge-a\"]');
         return r && r.dataset.reachability === 'CONNECTED'",
    );
    browser.wait(
        "the event stream over https",
        "return document.getElementById('live').textContent === 'live'",
    );
    let scheme = browser.js("return location.protocol", json!([]));
    assert_eq!(scheme, json!("https:"));

    // Plain HTTP to the same port gets no HTTP answer.
    use std::io::{Read as _, Write as _};
    let mut plain = std::net::TcpStream::connect(cp.admin).unwrap();
    plain
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    // The port may close on the first bytes before they are all written.
    let _ = write!(plain, "GET /healthz HTTP/1.1\r\nHost: {}\r\n\r\n", cp.admin);
    let mut answer = Vec::new();
    let _ = plain.read_to_end(&mut answer);
    assert!(
        !answer.starts_with(b"HTTP/1.1"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    let _ = std::fs::remove_dir_all(&pki);
}
