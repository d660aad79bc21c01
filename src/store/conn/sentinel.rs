//! Redis behind Sentinel: the `redis+sentinel://` target form, and the
//! `redis` crate's Sentinel client built from it.
//!
//! The form lists the sentinels, not the master, because the master moves:
//! `redis+sentinel://[user[:password]@]host[:port][,host[:port]…]/<master>[/<db>]`
//! (port 26379 when omitted). `rediss+sentinel://` speaks TLS to the
//! sentinels and to the master. The user and password are the data nodes'
//! (the ACL user the operator runs as); the sentinels' own credentials, if
//! they require any, are separate (`--redis-sentinel-username`/`-password`).

use super::{Credentials, RedisSecurity};
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{ConnectionAddr, RedisResult, TlsMode};
use std::fmt;

pub(super) const SCHEME: &str = "redis+sentinel://";
pub(super) const TLS_SCHEME: &str = "rediss+sentinel://";
const DEFAULT_PORT: u16 = 26379;

/// A parsed `redis+sentinel://` target.
#[derive(Clone, PartialEq, Eq)]
pub struct SentinelTarget {
    tls: bool,
    sentinels: Vec<(String, u16)>,
    master: String,
    db: i64,
    credentials: Credentials,
}

impl SentinelTarget {
    /// Parses the part after the scheme; `Err` says what is wrong, without
    /// quoting the input (it may hold a password).
    pub(super) fn parse(tls: bool, rest: &str) -> Result<SentinelTarget, &'static str> {
        let (userinfo, rest) = match rest.rsplit_once('@') {
            Some((userinfo, rest)) => (Some(userinfo), rest),
            None => (None, rest),
        };
        let (hosts, path) = rest
            .split_once('/')
            .ok_or("no master name: expected …/<master>[/<db>] after the sentinels")?;
        let sentinels = hosts
            .split(',')
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .map(parse_host)
            .collect::<Result<Vec<_>, _>>()?;
        if sentinels.is_empty() {
            return Err("no sentinel address");
        }
        let (master, db) = match path.split_once('/') {
            Some((master, "")) => (master, 0),
            Some((master, db)) => (
                master,
                db.parse()
                    .map_err(|_| "the database after the master name is not a number")?,
            ),
            None => (path, 0),
        };
        if master.is_empty() {
            return Err("empty master name");
        }
        let credentials = match userinfo {
            None => Credentials::default(),
            Some(info) => {
                let (user, password) = match info.split_once(':') {
                    Some((user, password)) => (user, Some(password)),
                    None => (info, None),
                };
                Credentials {
                    username: Some(percent_decode(user)?).filter(|u| !u.is_empty()),
                    password: password.map(percent_decode).transpose()?,
                }
            }
        };
        Ok(SentinelTarget {
            tls,
            sentinels,
            master: master.to_owned(),
            db,
            credentials,
        })
    }

    /// `rediss+sentinel://`: TLS to the sentinels and the master.
    pub(super) fn is_tls(&self) -> bool {
        self.tls
    }

    /// A password in the URL (for the master, unless the flags give one).
    pub(super) fn has_password(&self) -> bool {
        self.credentials.password.is_some()
    }

    pub(super) fn db(&self) -> i64 {
        self.db
    }

    /// The Sentinel client that finds the current master, with the
    /// credentials and TLS settings of both kinds of node.
    pub(super) fn client(&self, security: &RedisSecurity) -> RedisResult<SentinelClient> {
        let addrs = self.sentinels.iter().map(|(host, port)| {
            if self.tls {
                ConnectionAddr::TcpTls {
                    host: host.clone(),
                    port: *port,
                    insecure: false,
                    tls_params: None,
                }
            } else {
                ConnectionAddr::Tcp(host.clone(), *port)
            }
        });
        let mut builder =
            SentinelClientBuilder::new(addrs, &self.master, SentinelServerType::Master)?
                .set_client_to_redis_db(self.db);
        if self.tls {
            builder = builder
                .set_client_to_redis_tls_mode(TlsMode::Secure)
                .set_client_to_sentinel_tls_mode(TlsMode::Secure);
        }
        if let Some(certs) = &security.tls {
            builder = builder
                .set_client_to_redis_certificates(certs.clone())
                .set_client_to_sentinel_certificates(certs.clone());
        }
        let data = security.credentials.over(&self.credentials);
        if let Some(username) = &data.username {
            builder = builder.set_client_to_redis_username(username);
        }
        if let Some(password) = &data.password {
            builder = builder.set_client_to_redis_password(password);
        }
        if let Some(username) = &security.sentinel_credentials.username {
            builder = builder.set_client_to_sentinel_username(username);
        }
        if let Some(password) = &security.sentinel_credentials.password {
            builder = builder.set_client_to_sentinel_password(password);
        }
        builder.build()
    }
}

/// The target as written, with any password replaced, for logs.
impl fmt::Display for SentinelTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.tls { TLS_SCHEME } else { SCHEME })?;
        if let Some(username) = &self.credentials.username {
            f.write_str(username)?;
            f.write_str(if self.credentials.password.is_some() {
                ":***@"
            } else {
                "@"
            })?;
        } else if self.credentials.password.is_some() {
            f.write_str(":***@")?;
        }
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|(host, port)| {
                if host.contains(':') {
                    format!("[{host}]:{port}")
                } else {
                    format!("{host}:{port}")
                }
            })
            .collect();
        write!(f, "{}/{}", hosts.join(","), self.master)?;
        if self.db != 0 {
            write!(f, "/{}", self.db)?;
        }
        Ok(())
    }
}

impl fmt::Debug for SentinelTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SentinelTarget({self})")
    }
}

/// `host`, `host:port` or `[v6]:port`.
fn parse_host(text: &str) -> Result<(String, u16), &'static str> {
    let bad_port = "a sentinel port is not a number from 1 to 65535";
    let port = |p: &str| p.parse::<u16>().ok().filter(|p| *p != 0).ok_or(bad_port);
    if let Some(v6) = text.strip_prefix('[') {
        let (host, rest) = v6
            .split_once(']')
            .ok_or("unclosed '[' in a sentinel address")?;
        return match rest.strip_prefix(':') {
            Some(p) => Ok((host.to_owned(), port(p)?)),
            None if rest.is_empty() => Ok((host.to_owned(), DEFAULT_PORT)),
            None => Err("unexpected text after ']' in a sentinel address"),
        };
    }
    match text.rsplit_once(':') {
        Some((host, p)) if !host.is_empty() => Ok((host.to_owned(), port(p)?)),
        Some(_) => Err("a sentinel address has no host"),
        None => Ok((text.to_owned(), DEFAULT_PORT)),
    }
}

/// Decodes `%XX` escapes, so that user names and passwords may hold `@`,
/// `:` or `/` (as in `redis://` URLs).
fn percent_decode(text: &str) -> Result<String, &'static str> {
    let invalid = "invalid %-escape in the user name or password";
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3).ok_or(invalid)?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| invalid)?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "the user name or password is not UTF-8")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sentinels_master_db_and_credentials() {
        let t =
            SentinelTarget::parse(false, "app:p%40ss@s1:26380, s2 ,[::1]:5/mymaster/2").unwrap();
        assert_eq!(
            t.sentinels,
            vec![
                ("s1".to_owned(), 26380),
                ("s2".to_owned(), 26379),
                ("::1".to_owned(), 5)
            ]
        );
        assert_eq!((t.master.as_str(), t.db), ("mymaster", 2));
        assert_eq!(t.credentials.username.as_deref(), Some("app"));
        assert_eq!(t.credentials.password.as_deref(), Some("p@ss"));
        let shown = t.to_string();
        assert_eq!(
            shown,
            "redis+sentinel://app:***@s1:26380,s2:26379,[::1]:5/mymaster/2"
        );
        assert!(!format!("{t:?}").contains("p@ss"));

        let t = SentinelTarget::parse(true, "s1/m").unwrap();
        assert_eq!((t.tls, t.db), (true, 0));
        assert_eq!(t.to_string(), "rediss+sentinel://s1:26379/m");
    }

    #[test]
    fn malformed_targets_are_named_without_quoting_them() {
        for (bad, why) in [
            ("s1:26379", "no master name"),
            ("/m", "no sentinel address"),
            ("s1/", "empty master name"),
            ("s1/m/x", "not a number"),
            ("s1:0/m", "port"),
            ("s1:http/m", "port"),
            ("u:%zz@s1/m", "%-escape"),
            ("[::1/m", "unclosed"),
        ] {
            let err = SentinelTarget::parse(false, bad).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}
