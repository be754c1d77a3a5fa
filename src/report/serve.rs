//! `jprof report --serve`: the profile in speedscope, in the browser, offline. speedscope's
//! static build (vendor/speedscope, MIT, from its npm package) is compiled into jprof and
//! served with the profile (jprof's speedscope output) from 127.0.0.1 on a free port, under a
//! random token: only who was shown the URL (it is printed) can load it. Each request is read
//! with a size and time limit, answered and closed; only GET and HEAD of the files below, with
//! the server's own `Host`, are answered.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use crate::error::{Error, Result};

/// speedscope's files, as its npm package ships them (`dist/release`), by name.
const FILES: &[(&str, &str, &[u8])] = &[
    (
        "index.html",
        "text/html; charset=utf-8",
        include_bytes!("../../vendor/speedscope/index.html"),
    ),
    (
        "speedscope-Y2522XSH.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../vendor/speedscope/speedscope-Y2522XSH.js"),
    ),
    (
        "speedscope-GHPHNKXC.css",
        "text/css; charset=utf-8",
        include_bytes!("../../vendor/speedscope/speedscope-GHPHNKXC.css"),
    ),
    (
        "SourceCodePro-Regular.ttf-ILST5JV6.woff2",
        "font/woff2",
        include_bytes!("../../vendor/speedscope/SourceCodePro-Regular.ttf-ILST5JV6.woff2"),
    ),
    (
        "favicon-16x16-VSI62OPJ.png",
        "image/png",
        include_bytes!("../../vendor/speedscope/favicon-16x16-VSI62OPJ.png"),
    ),
    (
        "favicon-32x32-3EB2YCUY.png",
        "image/png",
        include_bytes!("../../vendor/speedscope/favicon-32x32-3EB2YCUY.png"),
    ),
    (
        "favicon-FOKUP5Y5.ico",
        "image/x-icon",
        include_bytes!("../../vendor/speedscope/favicon-FOKUP5Y5.ico"),
    ),
];

/// The name the profile is served under.
const PROFILE: &str = "profile.speedscope.json";

/// The longest request head read; anything longer is refused.
const MAX_REQUEST: usize = 16 * 1024;

/// How long a client may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// A token nobody can guess: 128 bits from the kernel's random source, in hex.
fn token() -> Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| Error::io(std::path::Path::new("/dev/urandom"), e))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// `text` for a URL's fragment (`%XX` for anything but unreserved characters).
fn percent_encoded(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A server ready to answer: where it listens and what it serves.
pub struct Server {
    listener: TcpListener,
    token: String,
    profile: Vec<u8>,
    host: String,
    /// The address to open.
    pub url: String,
}

impl Server {
    /// Listens on 127.0.0.1 on a free port for `profile` (speedscope JSON) titled `title`.
    pub fn bind(profile: Vec<u8>, title: &str) -> Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .map_err(|e| Error::Other(format!("cannot listen on 127.0.0.1: {e}")))?;
        let port = listener
            .local_addr()
            .map_err(|e| Error::Other(format!("cannot listen on 127.0.0.1: {e}")))?
            .port();
        let token = token()?;
        let host = format!("127.0.0.1:{port}");
        let url = format!(
            "http://{host}/{token}/#profileURL=/{token}/{PROFILE}&title={}",
            percent_encoded(title)
        );
        Ok(Self {
            listener,
            token,
            profile,
            host,
            url,
        })
    }

    /// Answers requests until the process is stopped (Ctrl-C).
    pub fn run(&self) -> Result<()> {
        // A client that misbehaves or goes away costs its own request only.
        for stream in self.listener.incoming().flatten() {
            let _ = self.answer(stream);
        }
        Ok(())
    }

    /// Reads one request and answers it.
    fn answer(&self, mut stream: TcpStream) -> io::Result<()> {
        stream.set_read_timeout(Some(READ_TIMEOUT))?;
        stream.set_write_timeout(Some(READ_TIMEOUT))?;
        let mut head = Vec::new();
        let mut buf = [0u8; 2048];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut buf)?;
            if n == 0 {
                return Ok(());
            }
            head.extend_from_slice(&buf[..n]);
            if head.len() > MAX_REQUEST {
                return respond(&mut stream, "431 Request Header Fields Too Large", "", b"");
            }
        }
        let head = String::from_utf8_lossy(&head);
        let mut lines = head.split("\r\n");
        let mut request = lines.next().unwrap_or_default().split(' ');
        let (method, target) = (request.next().unwrap_or(""), request.next().unwrap_or(""));
        let host_ok = lines.any(|l| {
            l.split_once(':').is_some_and(|(name, value)| {
                name.eq_ignore_ascii_case("host") && value.trim() == self.host
            })
        });
        if method != "GET" && method != "HEAD" {
            return respond(&mut stream, "405 Method Not Allowed", "", b"");
        }
        let found = host_ok.then(|| self.file(target)).flatten();
        match found {
            Some((content_type, body)) => {
                let body = if method == "HEAD" { &b""[..] } else { body };
                respond(&mut stream, "200 OK", content_type, body)
            }
            None => respond(&mut stream, "404 Not Found", "", b""),
        }
    }

    /// The file a request target names, under the token.
    fn file(&self, target: &str) -> Option<(&'static str, &[u8])> {
        let path = target.split(['?', '#']).next()?;
        let name = path.strip_prefix('/')?.strip_prefix(self.token.as_str())?;
        let name = name.strip_prefix('/')?;
        if name == PROFILE {
            return Some(("application/json", &self.profile));
        }
        let name = if name.is_empty() { "index.html" } else { name };
        FILES
            .iter()
            .find(|(file, _, _)| *file == name)
            .map(|(_, content_type, body)| (*content_type, *body))
    }
}

fn respond(
    stream: &mut TcpStream,
    status: &str,
    content_type: &str,
    body: &[u8],
) -> io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n\
         X-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\nConnection: close\r\n",
        body.len()
    );
    if !content_type.is_empty() {
        head.push_str(&format!("Content-Type: {content_type}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(server: &Server, target: &str, host: &str) -> String {
        let mut stream = TcpStream::connect(&server.host).unwrap();
        write!(stream, "GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n").unwrap();
        let mut reply = Vec::new();
        stream.read_to_end(&mut reply).unwrap();
        String::from_utf8_lossy(&reply).into_owned()
    }

    #[test]
    fn only_the_token_and_the_host_open_the_files() {
        let server = Server::bind(b"{\"profiles\":[]}".to_vec(), "jprof: ./app --fast").unwrap();
        assert!(server.url.starts_with("http://127.0.0.1:"));
        assert_eq!(server.token.len(), 32);
        assert!(
            server.url.ends_with("&title=jprof%3A%20.%2Fapp%20--fast"),
            "{}",
            server.url
        );
        let server = std::sync::Arc::new(server);
        let answering = {
            let server = server.clone();
            std::thread::spawn(move || {
                for _ in 0..5 {
                    let (stream, _) = server.listener.accept().unwrap();
                    server.answer(stream).unwrap();
                }
            })
        };
        let host = server.host.clone();
        let token = server.token.clone();
        let index = get(&server, &format!("/{token}/"), &host);
        assert!(index.starts_with("HTTP/1.1 200 OK\r\n"), "{index}");
        assert!(index.contains("speedscope-Y2522XSH.js"));
        let profile = get(&server, &format!("/{token}/{PROFILE}?x=1"), &host);
        assert!(profile.ends_with("{\"profiles\":[]}"), "{profile}");
        assert!(get(&server, "/index.html", &host).starts_with("HTTP/1.1 404"));
        assert!(get(&server, &format!("/{token}/../etc/passwd"), &host).starts_with("HTTP/1.1 404"));
        // Another Host (a rebound DNS name) gets nothing.
        assert!(get(&server, &format!("/{token}/"), "evil.example:80").starts_with("HTTP/1.1 404"));
        answering.join().unwrap();
    }
}
