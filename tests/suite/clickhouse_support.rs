//! A real ClickHouse server (Debian's `clickhouse-server`, installed by .ci/run) for the fleet
//! tests: its own directory and HTTP port on 127.0.0.1, no TCP port, no system service. It is
//! ready when `/ping` answers; it is killed when the guard drops. `kill` and `start` again on
//! the same directory and port are the outage the tests need.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian's package puts the server.
pub const SERVER: &str = "/usr/sbin/clickhouse-server";

/// A running (or killed, to be started again) server.
pub struct ClickHouse {
    dir: tempfile::TempDir,
    /// The HTTP port on 127.0.0.1.
    pub port: u16,
    child: Option<Child>,
}

impl ClickHouse {
    /// Starts a server in a new directory, on a free port; waits until it answers.
    pub fn start() -> Self {
        assert!(
            Path::new(SERVER).exists(),
            "{SERVER} is missing: install Debian's clickhouse-server (.ci/run does)"
        );
        let dir = tempfile::Builder::new()
            .prefix("jprof-clickhouse")
            .tempdir()
            .expect("temp dir");
        let port = free_port();
        let mut server = Self {
            dir,
            port,
            child: None,
        };
        server.write_config();
        server.restart();
        server
    }

    fn write_config(&self) {
        let d = self.dir.path().display();
        let config = format!(
            "<yandex>
  <logger><level>warning</level><log>{d}/server.log</log><errorlog>{d}/server.err.log</errorlog></logger>
  <http_port>{port}</http_port>
  <listen_host>127.0.0.1</listen_host>
  <path>{d}/data/</path>
  <tmp_path>{d}/tmp/</tmp_path>
  <user_files_path>{d}/user_files/</user_files_path>
  <format_schema_path>{d}/format_schemas/</format_schema_path>
  <mark_cache_size>268435456</mark_cache_size>
  <users_config>{d}/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
</yandex>
",
            port = self.port
        );
        let users = "<yandex>
  <profiles><default></default></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip></networks>
    <profile>default</profile><quota>default</quota></default></users>
  <quotas><default></default></quotas>
</yandex>
";
        std::fs::write(self.dir.path().join("config.xml"), config).unwrap();
        std::fs::write(self.dir.path().join("users.xml"), users).unwrap();
    }

    /// Starts the server (again, on the same data) and waits until `/ping` answers.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "the server is running");
        let stdout = std::fs::File::create(self.dir.path().join("stdout")).unwrap();
        let child = Command::new(SERVER)
            .arg(format!(
                "--config-file={}",
                self.dir.path().join("config.xml").display()
            ))
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(stdout.try_clone().unwrap())
            .stderr(stdout)
            .spawn()
            .expect("start clickhouse-server");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if self.ping() {
                return;
            }
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                self.child = None;
                panic!("clickhouse-server exited ({status}): {}", self.logs());
            }
            assert!(
                Instant::now() < deadline,
                "clickhouse-server did not answer /ping within 2 minutes: {}",
                self.logs()
            );
            // Polling the port, not a fixed sleep: a short pause between tries.
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills the server at once (SIGKILL: a crash, not a clean shutdown).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn ping(&self) -> bool {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(2)))
            .build()
            .into();
        agent
            .get(format!("http://127.0.0.1:{}/ping", self.port))
            .call()
            .ok()
            .and_then(|mut r| r.body_mut().read_to_string().ok())
            .is_some_and(|body| body.starts_with("Ok."))
    }

    /// `clickhouse://127.0.0.1:PORT/DB`.
    pub fn url(&self, database: &str) -> String {
        format!("clickhouse://127.0.0.1:{}/{database}", self.port)
    }

    /// Runs `sql`; its reply, which must be a success.
    pub fn query(&self, sql: &str) -> String {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut reply = agent
            .post(format!("http://127.0.0.1:{}/", self.port))
            .send(sql)
            .expect("query clickhouse");
        let status = reply.status();
        let body = reply.body_mut().read_to_string().unwrap();
        assert!(status.is_success(), "{sql}: {status} {body}");
        body
    }

    /// The server's directory.
    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    fn logs(&self) -> String {
        let read =
            |name: &str| std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
        format!(
            "stdout/stderr: {}\nerror log: {}",
            read("stdout"),
            read("server.err.log")
        )
    }
}

impl Drop for ClickHouse {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A port nothing listens on now (the kernel's pick for a socket bound to port 0).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}
