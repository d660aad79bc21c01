//! Talking to a fixture's server: one raw RESP command on a fresh
//! connection (for simple replies, without a client), a query through the
//! `redis` client (for arrays and maps), and reading `INFO` fields.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use super::error::FixtureError;

/// Sends one RESP command on a fresh connection and reads until the reply is
/// complete enough for these checks (a simple line, or one bulk string).
pub fn command(port: u16, args: &[&str]) -> Result<String, FixtureError> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut req = format!("*{}\r\n", args.len());
    for arg in args {
        req.push_str(&format!("${}\r\n{}\r\n", arg.len(), arg));
    }
    stream.write_all(req.as_bytes())?;
    let mut reply = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        reply.extend_from_slice(&buf[..n]);
        if reply_complete(&reply) {
            break;
        }
    }
    let text = String::from_utf8_lossy(&reply).into_owned();
    if let Some(err) = text.strip_prefix('-') {
        return Err(FixtureError::Command {
            what: args.join(" "),
            detail: err.trim().to_owned(),
        });
    }
    Ok(text)
}

fn reply_complete(reply: &[u8]) -> bool {
    let Some(line_end) = reply.windows(2).position(|w| w == b"\r\n") else {
        return false;
    };
    match reply.first() {
        Some(b'$') => {
            let len: i64 = String::from_utf8_lossy(&reply[1..line_end])
                .parse()
                .unwrap_or(0);
            len < 0 || reply.len() >= line_end + 2 + len as usize + 2
        }
        _ => true,
    }
}

pub fn parse_info_number(info: &str, field: &str) -> u64 {
    let prefix = format!("{field}:");
    info.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

pub fn parse_calls(info: &str, name: &str) -> u64 {
    let prefix = format!("cmdstat_{name}:calls=");
    info.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// [`RedisServer::query`] against any loopback port (a sentinel, too).
pub fn query<T: redis::FromRedisValue>(port: u16, cmd: &redis::Cmd) -> Result<T, FixtureError> {
    let failed = |e: redis::RedisError| FixtureError::Command {
        what: format!("query port {port}"),
        detail: e.to_string(),
    };
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).map_err(failed)?;
    let mut conn = client
        .get_connection_with_timeout(Duration::from_secs(5))
        .map_err(failed)?;
    cmd.query(&mut conn).map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::{parse_calls, parse_info_number};

    #[test]
    fn parses_commandstats() {
        let info = "# Commandstats\r\ncmdstat_evalsha:calls=12,usec=3,usec_per_call=0.25\r\ncmdstat_get:calls=4,usec=1\r\n";
        assert_eq!(parse_calls(info, "evalsha"), 12);
        assert_eq!(parse_calls(info, "get"), 4);
        assert_eq!(parse_calls(info, "set"), 0);
    }

    #[test]
    fn parses_info_numbers() {
        let info = "# Stats\r\ntotal_connections_received:17\r\nrejected_connections:0\r\n";
        assert_eq!(parse_info_number(info, "total_connections_received"), 17);
        assert_eq!(parse_info_number(info, "missing"), 0);
    }
}
