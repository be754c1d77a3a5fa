//! The fleet store: symbolized samples of many hosts in ClickHouse, over its HTTP interface.
//! `jprof push` writes any input `report -i` reads into it (`push`); `jprof report --from` and
//! `jprof diff --from` read a selection of it back as the same [`Loaded`](crate::input::Loaded)
//! profile every writer takes (`load`). The tables, keys and the exactly-once protocol are in
//! docs/fleet.md; `schema` creates them on first use.
//!
//! ```text
//!  FILE ─► input::load ─► push: stacks (once, by hash) ─► samples (batches) ─► pushes (done)
//!  --from URL?labels ─► load: pushes ⋈ samples (aggregated in ClickHouse) ⋈ stacks ─► Loaded
//! ```

mod client;
mod load;
mod push;
mod schema;

use std::collections::BTreeMap;
use std::fmt;

use crate::error::Error;

pub use load::load;
pub use push::{run as push, PushConfig, DEFAULT_BATCH_ROWS};

/// Where the store is: `clickhouse://HOST:PORT/DB` (the port of ClickHouse's HTTP interface).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Store {
    /// Host name or address.
    pub host: String,
    /// The HTTP interface's port (ClickHouse's default is 8123).
    pub port: u16,
    /// The database holding jprof's tables (created on first push).
    pub database: String,
}

/// A part of the store: the samples of the pushes whose labels match (every push when none).
/// Labels with the same key are alternatives (`host=a host=b`: either host); different keys
/// must all match.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    /// The store read.
    pub store: Store,
    /// Wanted values by label key.
    pub labels: BTreeMap<String, Vec<String>>,
}

impl Store {
    /// Parses `clickhouse://HOST:PORT/DB`; `?KEY=VALUE&…` after it are labels, returned apart.
    pub fn parse_with_labels(text: &str) -> std::result::Result<(Self, Vec<Label>), String> {
        let usage = |why: &str| {
            format!(
                "{text:?}: {why}; expected clickhouse://HOST:PORT/DB (the HTTP port, e.g. 8123)"
            )
        };
        let rest = text
            .strip_prefix("clickhouse://")
            .ok_or_else(|| usage("not a clickhouse:// address"))?;
        let (rest, query) = match rest.split_once('?') {
            Some((rest, query)) => (rest, Some(query)),
            None => (rest, None),
        };
        let (authority, database) = rest
            .split_once('/')
            .ok_or_else(|| usage("no database after the port"))?;
        let (host, port) = authority.rsplit_once(':').ok_or_else(|| usage("no port"))?;
        let port: u16 = port
            .parse()
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| usage("the port is not a number from 1 to 65535"))?;
        let host_ok = !host.is_empty()
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._[]:".contains(c));
        if !host_ok {
            return Err(usage("the host is not a name or an address"));
        }
        // The name goes into SQL unquoted: ClickHouse's plain identifiers only.
        let database_ok = database
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && database
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !database_ok {
            return Err(usage(
                "the database name must be letters, digits and _ (not starting with a digit)",
            ));
        }
        let labels = match query {
            Some(q) => q
                .split('&')
                .filter(|p| !p.is_empty())
                .map(Label::parse)
                .collect::<std::result::Result<Vec<_>, _>>()?,
            None => Vec::new(),
        };
        let store = Self {
            host: host.to_string(),
            port,
            database: database.to_string(),
        };
        Ok((store, labels))
    }
}

impl fmt::Display for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "clickhouse://{}:{}/{}",
            self.host, self.port, self.database
        )
    }
}

impl Selection {
    /// The selection `text` names (`clickhouse://HOST:PORT/DB?KEY=VALUE&…`) narrowed by
    /// `labels` too.
    pub fn parse(text: &str, labels: &[Label]) -> std::result::Result<Self, String> {
        let (store, mut all) = Store::parse_with_labels(text)?;
        all.extend(labels.iter().cloned());
        let mut wanted: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for label in all {
            let values = wanted.entry(label.key).or_default();
            if !values.contains(&label.value) {
                values.push(label.value);
            }
        }
        Ok(Self {
            store,
            labels: wanted,
        })
    }
}

impl fmt::Display for Selection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.store)?;
        for (i, (key, values)) in self.labels.iter().enumerate() {
            let sep = if i == 0 { '?' } else { '&' };
            write!(f, "{sep}{key}={}", values.join("|"))?;
        }
        Ok(())
    }
}

/// A `KEY=VALUE` label of a push (`host=web-12`, `service=checkout`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Label {
    /// Letters, digits, `_`, `-` and `.`.
    pub key: String,
    /// Any text without control characters.
    pub value: String,
}

impl Label {
    /// Parses `KEY=VALUE`.
    pub fn parse(text: &str) -> std::result::Result<Self, String> {
        let (key, value) = text
            .split_once('=')
            .ok_or_else(|| format!("label {text:?}: expected KEY=VALUE, e.g. host=web-12"))?;
        if key.is_empty()
            || !key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
        {
            return Err(format!(
                "label {text:?}: the key must be letters, digits, _, - or ."
            ));
        }
        if value.chars().any(char::is_control) {
            return Err(format!("label {text:?}: the value has a control character"));
        }
        Ok(Self {
            key: key.to_string(),
            value: value.to_string(),
        })
    }
}

/// `text` as a ClickHouse string literal.
fn sql_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('\'');
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// The error for a reply ClickHouse sent that jprof cannot read.
fn bad_reply(store: &Store, what: &str, line: &str) -> Error {
    let shown: String = line.chars().take(120).collect();
    Error::Other(format!(
        "{store}: unexpected reply to the {what} query: {shown:?} (is it a ClickHouse server \
         with jprof's tables, see docs/fleet.md?)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_labels_parse_or_say_what_is_wrong() {
        let s = Selection::parse(
            "clickhouse://db.example:8123/prof?host=a&service=x",
            &[Label::parse("host=b").unwrap()],
        )
        .unwrap();
        assert_eq!(s.store.host, "db.example");
        assert_eq!(s.store.port, 8123);
        assert_eq!(s.store.database, "prof");
        assert_eq!(s.labels["host"], ["a", "b"]);
        assert_eq!(s.labels["service"], ["x"]);
        assert_eq!(
            s.to_string(),
            "clickhouse://db.example:8123/prof?host=a|b&service=x"
        );
        for (bad, why) in [
            ("http://h:1/db", "not a clickhouse://"),
            ("clickhouse://h/db", "no port"),
            ("clickhouse://h:0/db", "port"),
            ("clickhouse://h:8123", "no database"),
            ("clickhouse://h:8123/a-b", "database name"),
            ("clickhouse://h;x:8123/db", "host"),
            ("clickhouse://h:8123/db?nolabel", "KEY=VALUE"),
        ] {
            let e = Selection::parse(bad, &[]).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        assert!(Label::parse("a b=c").is_err());
        assert!(Label::parse("k=v\n").is_err());
    }

    #[test]
    fn string_literals_escape_quotes_and_backslashes() {
        assert_eq!(sql_string(r"it's a\b"), r"'it\'s a\\b'");
    }
}
