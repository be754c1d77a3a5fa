//! The fleet store's scale (`cargo xtask bench --fleet-only`, docs/fleet.md): a private
//! ClickHouse server (Debian's `clickhouse-server`), jprof's schema made by a real `jprof push`,
//! then a synthetic fleet in jprof's row format: HOSTS hosts × PUSHES_PER_HOST one-minute
//! pushes, their stacks drawn (skewed, as real profiles are) from one pool shared by the fleet.
//! Measured: the insert rate of those pushes over HTTP (one client), the bytes per sample on
//! disk once merged, and `jprof report --from … -f collapsed` over the whole fleet, one host and
//! one service.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::workspace::{root, target_dir};

const SERVER: &str = "/usr/sbin/clickhouse-server";
const HOSTS: u64 = 100;
const PUSHES_PER_HOST: u64 = 10;
/// Distinct stacks in the fleet, and distinct functions they are made of.
const STACKS: u64 = 20_000;
const FUNCTIONS: u64 = 5_000;
const HZ: u64 = 99;
const DATABASE: &str = "bench";

/// A server of the bench's own, killed when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start(dir: &Path) -> Result<Self> {
        if !Path::new(SERVER).exists() {
            bail!("the fleet bench needs ClickHouse: apt-get install clickhouse-server");
        }
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir)?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let d = dir.display();
        std::fs::write(
            dir.join("config.xml"),
            format!(
                "<yandex><logger><level>warning</level><log>{d}/server.log</log>\
                 <errorlog>{d}/server.err.log</errorlog></logger>\
                 <http_port>{port}</http_port><listen_host>127.0.0.1</listen_host>\
                 <path>{d}/data/</path><tmp_path>{d}/tmp/</tmp_path>\
                 <user_files_path>{d}/user_files/</user_files_path>\
                 <format_schema_path>{d}/format_schemas/</format_schema_path>\
                 <mark_cache_size>268435456</mark_cache_size><users_config>{d}/users.xml</users_config>\
                 <default_profile>default</default_profile><default_database>default</default_database>\
                 </yandex>"
            ),
        )?;
        std::fs::write(
            dir.join("users.xml"),
            "<yandex><profiles><default></default></profiles><users><default><password></password>\
             <networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota>\
             </default></users><quotas><default></default></quotas></yandex>",
        )?;
        let child = Command::new(SERVER)
            .arg(format!("--config-file={}/config.xml", d))
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("start clickhouse-server")?;
        let mut server = Self { child, port };
        let deadline = Instant::now() + Duration::from_secs(120);
        while !http(port, "/ping", b"").is_ok_and(|(s, _)| s == 200) {
            if let Some(status) = server.child.try_wait()? {
                bail!("clickhouse-server exited ({status}); see {d}/server.err.log");
            }
            if Instant::now() > deadline {
                bail!("clickhouse-server did not answer /ping in 2 minutes");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(server)
    }

    fn query(&self, sql: &str) -> Result<String> {
        let (status, body) = http(self.port, "/", sql.as_bytes())?;
        if status != 200 {
            bail!("{sql}: HTTP {status}: {body}");
        }
        Ok(body)
    }

    fn insert(&self, table: &str, format: &str, rows: &[u8]) -> Result<()> {
        let sql = format!("INSERT INTO {DATABASE}.{table} FORMAT {format}");
        let (status, body) = http(
            self.port,
            &format!("/?query={}", sql.replace(' ', "%20")),
            rows,
        )?;
        if status != 200 {
            bail!("{sql}: HTTP {status}: {body}");
        }
        Ok(())
    }
}

/// One HTTP/1.0 request to 127.0.0.1:port (GET for `/ping`, which 18.16 answers to GET only,
/// else POST); the status and the body.
fn http(port: u16, target: &str, body: &[u8]) -> Result<(u16, String)> {
    let method = if target == "/ping" { "GET" } else { "POST" };
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    write!(
        stream,
        "{method} {target} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    stream.write_all(body)?;
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply)?;
    let reply = String::from_utf8_lossy(&reply).into_owned();
    let (head, body) = reply.split_once("\r\n\r\n").context("an HTTP reply")?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("an HTTP status")?;
    Ok((status, body.to_string()))
}

/// A function's name, as long as real ones.
fn function(i: u64) -> String {
    format!(
        "com.example.service{}.Handler{}.process{}",
        i % 37,
        i % 211,
        i
    )
}

/// Stack `i`: 8 to 40 frames of the function pool, a process root first.
fn stack_json(i: u64) -> String {
    let mut rng = fastrand::Rng::with_seed(i);
    let depth = rng.u64(8..40);
    let mut names = vec![format!("\"app{}\"", i % 7)];
    let mut kinds = vec!["0".to_string()];
    for _ in 0..depth {
        names.push(format!("\"{}\"", function(rng.u64(0..FUNCTIONS))));
        kinds.push(["1", "3", "3", "4"][rng.usize(0..4)].to_string());
    }
    let n = names.len();
    let empty = vec!["\"\""; n].join(",");
    let zeros = vec!["0"; n].join(",");
    format!(
        "{{\"stack_hash\":{},\"names\":[{}],\"kinds\":[{}],\"modules\":[{empty}],\"files\":[{empty}],\
         \"lines\":[{zeros}],\"tiers\":[{empty}],\"tier_classes\":[{zeros}]}}\n",
        stack_hash(i),
        names.join(","),
        kinds.join(",")
    )
}

fn stack_hash(i: u64) -> u64 {
    // Any spread-out 64-bit value stands for the XXH3 of the frames.
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1
}

/// The scale measurements, as a markdown section. `samples_millions`: the fleet's size.
pub fn measure(jprof: &Path, samples_millions: f64) -> Result<String> {
    let dir = target_dir().join("bench/fleet-clickhouse");
    let server = Server::start(&dir)?;
    let url = format!("clickhouse://127.0.0.1:{}/{DATABASE}", server.port);
    let fixture = root().join("tests/fixtures/shared/node/perf.data");

    // The schema, by a real push; and that push's end-to-end time.
    let started = Instant::now();
    let status = Command::new(jprof)
        .args(["push", "--to", &url, "--label", "host=real"])
        .arg(&fixture)
        .stdout(Stdio::null())
        .status()?;
    if !status.success() {
        bail!("jprof push failed");
    }
    let real_push = started.elapsed();
    // Only the synthetic fleet is measured below.
    server.query(&format!("TRUNCATE TABLE {DATABASE}.samples"))?;
    server.query(&format!("TRUNCATE TABLE {DATABASE}.pushes"))?;
    server.query(&format!("TRUNCATE TABLE {DATABASE}.stacks"))?;

    let total = (samples_millions * 1e6) as u64;
    let pushes = HOSTS * PUSHES_PER_HOST;
    let per_push = (total / pushes).max(1);
    let mut stacks = String::new();
    for i in 0..STACKS {
        stacks.push_str(&stack_json(i));
    }
    server.insert("stacks", "JSONEachRow", stacks.as_bytes())?;

    let day_start: u64 = 1_767_225_600 * 1_000_000_000; // 2026-01-01 UTC
    let mut rng = fastrand::Rng::with_seed(32);
    let mut rows = Vec::with_capacity(per_push as usize * 80);
    let mut insert_time = Duration::ZERO;
    for host in 0..HOSTS {
        for minute in 0..PUSHES_PER_HOST {
            let push_id = host * 1000 + minute + 1;
            rows.clear();
            let start = day_start + (host * 7 + minute * 60) * 1_000_000_000;
            for i in 0..per_push {
                // Skewed: a few stacks are most of the samples, as in real profiles.
                let u = rng.f64();
                let stack = ((u * u * u) * STACKS as f64) as u64;
                let tid = 100 + host * 10 + i % 4;
                let time = start + i * 1_000_000_000 / HZ / 4;
                writeln!(
                    rows,
                    "2026-01-01\t{time}\t{push_id}\t0\t{}\t{}\t{tid}\t{}\tworker-{}\t{}",
                    stack_hash(stack),
                    1000 + host,
                    i % 8,
                    i % 4,
                    10_000_000 + rng.u64(0..100_000)
                )?;
            }
            let push_row = format!(
                "{{\"push_id\":{push_id},\"pushed\":1767225600,\"label_keys\":[\"host\",\"service\"],\
                 \"label_values\":[\"h{host:03}\",\"svc{}\"],\"source\":\"synthetic\",\"title\":\"bench\",\
                 \"event\":\"cycles\",\"unit\":\"events\",\"frequency_hz\":{HZ},\"samples\":{per_push},\
                 \"stacks\":0,\"batches\":1,\"first_ns\":{start},\"last_ns\":{}}}\n",
                host % 5,
                start + per_push * 1_000_000_000 / HZ / 4
            );
            let t = Instant::now();
            server.insert("samples", "TabSeparated", &rows)?;
            server.insert("pushes", "JSONEachRow", push_row.as_bytes())?;
            insert_time += t.elapsed();
        }
    }
    let stored = per_push * pushes;
    server.query(&format!("OPTIMIZE TABLE {DATABASE}.samples FINAL"))?;
    let parts = server.query(&format!(
        "SELECT table, sum(rows), sum(bytes_on_disk) FROM system.parts WHERE database = '{DATABASE}' \
         AND active GROUP BY table ORDER BY table FORMAT TabSeparated"
    ))?;
    let mut bytes = std::collections::BTreeMap::new();
    for line in parts.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        if let [table, rows, size] = f[..] {
            bytes.insert(
                table.to_string(),
                (rows.parse::<u64>()?, size.parse::<u64>()?),
            );
        }
    }
    let columns = server.query(&format!(
        "SELECT name, data_compressed_bytes FROM system.columns WHERE database = '{DATABASE}' \
         AND table = 'samples' ORDER BY data_compressed_bytes DESC FORMAT TabSeparated"
    ))?;

    let mut query_times = Vec::new();
    for (what, labels) in [
        ("the whole fleet", vec![]),
        ("one service (a fifth)", vec!["--label", "service=svc1"]),
        ("one host", vec!["--label", "host=h042"]),
    ] {
        let mut times = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            let out = Command::new(jprof)
                .args([
                    "report",
                    "--from",
                    &url,
                    "-f",
                    "collapsed",
                    "-o",
                    "/dev/null",
                ])
                .args(&labels)
                .output()?;
            if !out.status.success() {
                bail!(
                    "report --from failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            times.push(t.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        query_times.push((what, times[2]));
    }

    let (sample_rows, sample_bytes) = bytes.get("samples").copied().unwrap_or((0, 0));
    let (stack_rows, stack_bytes) = bytes.get("stacks").copied().unwrap_or((0, 0));
    let mut out = String::new();
    writeln!(out, "### Fleet store (`cargo xtask bench --fleet-only`)\n")?;
    writeln!(
        out,
        "ClickHouse {} (private server), {HOSTS} hosts × {PUSHES_PER_HOST} pushes of {per_push} samples = {stored} samples, \
         {STACKS} distinct stacks (8–40 frames) shared by the fleet.\n",
        server.query("SELECT version()")?.trim()
    )?;
    writeln!(out, "| measure | value |\n|---|---|")?;
    writeln!(
        out,
        "| insert rate (one client, {per_push}-row inserts over HTTP, pushes rows included) | {:.0} samples/s |",
        stored as f64 / insert_time.as_secs_f64()
    )?;
    writeln!(
        out,
        "| samples on disk (merged) | {sample_rows} rows, {:.1} MiB, **{:.2} bytes/sample** |",
        sample_bytes as f64 / 1048576.0,
        sample_bytes as f64 / sample_rows.max(1) as f64
    )?;
    writeln!(
        out,
        "| stacks on disk | {stack_rows} stacks, {:.1} MiB ({:.0} bytes/stack) |",
        stack_bytes as f64 / 1048576.0,
        stack_bytes as f64 / stack_rows.max(1) as f64
    )?;
    for (what, secs) in &query_times {
        writeln!(
            out,
            "| `report --from … -f collapsed`, {what} (median of 5, end to end) | {secs:.2} s |"
        )?;
    }
    writeln!(
        out,
        "| one real `jprof push` (node perf.data fixture: 1 501 samples, symbolized) | {:.2} s |",
        real_push.as_secs_f64()
    )?;
    writeln!(out, "\nCompressed bytes by column of `samples`:\n")?;
    for line in columns.lines() {
        if let Some((name, size)) = line.split_once('\t') {
            let size: f64 = size.parse().unwrap_or(0.0);
            write!(
                out,
                "`{name}` {:.2} B/sample; ",
                size / sample_rows.max(1) as f64
            )?;
        }
    }
    writeln!(out)?;
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(out)
}
