//! ClickHouse's HTTP interface: a statement in, its reply out. Only what 18.16 and current
//! releases both take: POST to `/`, the statement in the body (or, for an INSERT, in the
//! `query` parameter with the rows in the body), errors as a non-200 status with the
//! server's message.

use std::time::Duration;

use super::Store;
use crate::error::{Error, Result};

/// One store's HTTP endpoint, with a kept-alive connection.
pub(crate) struct Client {
    agent: ureq::Agent,
    url: String,
    store: Store,
}

/// How long connecting may take before the server counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one statement may take, reply included (a big fleet query, a large batch).
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(600);

impl Client {
    pub(crate) fn new(store: &Store) -> Self {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .timeout_global(Some(STATEMENT_TIMEOUT))
            .build()
            .into();
        Self {
            agent,
            url: format!("http://{}:{}/", store.host, store.port),
            store: store.clone(),
        }
    }

    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// Runs `sql`; returns the reply's body.
    pub(crate) fn query(&self, sql: &str) -> Result<String> {
        let reply = self.agent.post(&self.url).send(sql.as_bytes());
        self.reply(reply, sql)
    }

    /// `INSERT INTO table FORMAT format` with `rows` (in that format) as the data.
    pub(crate) fn insert(&self, table: &str, format: &str, rows: &[u8]) -> Result<()> {
        let sql = format!(
            "INSERT INTO {}.{table} FORMAT {format}",
            self.store.database
        );
        let reply = self.agent.post(&self.url).query("query", &sql).send(rows);
        self.reply(reply, &sql).map(drop)
    }

    fn reply(
        &self,
        reply: std::result::Result<ureq::http::Response<ureq::Body>, ureq::Error>,
        sql: &str,
    ) -> Result<String> {
        let mut reply = reply.map_err(|e| {
            Error::Other(format!(
                "cannot reach ClickHouse at {} (http://{}:{}): {e}",
                self.store, self.store.host, self.store.port
            ))
        })?;
        let status = reply.status();
        let body = reply
            .body_mut()
            .with_config()
            .limit(u64::MAX)
            .read_to_string()
            .map_err(|e| {
                Error::Other(format!(
                    "ClickHouse at {}: the reply was cut off: {e}",
                    self.store
                ))
            })?;
        if !status.is_success() {
            let statement: String = sql.chars().take(200).collect();
            return Err(Error::Other(format!(
                "ClickHouse at {} refused `{statement}`: {} (HTTP {status})",
                self.store,
                body.trim()
            )));
        }
        Ok(body)
    }
}
