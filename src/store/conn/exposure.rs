//! Whether the operator reaches Redis without a password or without TLS.
//! Whoever can write to that Redis can hold every asset's lock or rebuild a
//! signed notification from a stored ticket, so the operator says so at
//! start (a warning and `assetscan_redis_insecure`) rather than run quietly.

use super::{RedisSecurity, RedisTarget};
use redis::{ConnectionAddr, IntoConnectionInfo};

/// What protects the data nodes' connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RedisExposure {
    /// A password is sent (from `--redis-password` or the URL).
    pub authenticated: bool,
    /// The connection is TLS (`rediss://`, `rediss+sentinel://`) or a
    /// local Unix socket.
    pub encrypted: bool,
}

impl RedisTarget {
    /// How the data nodes are reached with `security`. A URL that does not
    /// parse counts as unprotected: connecting reports it.
    pub fn exposure(&self, security: &RedisSecurity) -> RedisExposure {
        let flag_password = security.credentials.password.is_some();
        match self {
            RedisTarget::Standalone(url) => url_exposure(url, flag_password),
            RedisTarget::Cluster(seeds) => {
                let each: Vec<RedisExposure> = seeds
                    .iter()
                    .map(|seed| url_exposure(seed, flag_password))
                    .collect();
                RedisExposure {
                    authenticated: !each.is_empty() && each.iter().all(|e| e.authenticated),
                    encrypted: !each.is_empty() && each.iter().all(|e| e.encrypted),
                }
            }
            RedisTarget::Sentinel(target) => RedisExposure {
                authenticated: flag_password || target.has_password(),
                encrypted: target.is_tls(),
            },
        }
    }
}

fn url_exposure(url: &str, flag_password: bool) -> RedisExposure {
    let Ok(info) = url.into_connection_info() else {
        return RedisExposure {
            authenticated: flag_password,
            encrypted: false,
        };
    };
    RedisExposure {
        authenticated: flag_password || info.redis_settings().password().is_some(),
        encrypted: matches!(
            info.addr(),
            ConnectionAddr::TcpTls { .. } | ConnectionAddr::Unix(_)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Credentials;

    fn exposure(target: &str, password_flag: bool) -> (bool, bool) {
        let security = RedisSecurity {
            credentials: Credentials {
                username: None,
                password: password_flag.then(|| "p".to_owned()),
            },
            ..RedisSecurity::default()
        };
        let e = RedisTarget::parse(target).unwrap().exposure(&security);
        (e.authenticated, e.encrypted)
    }

    #[test]
    fn passwords_and_tls_are_seen_wherever_they_are_given() {
        assert_eq!(exposure("redis://redis:6379", false), (false, false));
        assert_eq!(exposure("redis://redis:6379", true), (true, false));
        assert_eq!(exposure("redis://app:pw@redis:6379", false), (true, false));
        assert_eq!(exposure("rediss://redis:6380", false), (false, true));
        assert_eq!(exposure("rediss://:pw@redis:6380/0", false), (true, true));
        assert_eq!(
            exposure("redis+unix:///run/redis.sock", false),
            (false, true)
        );
        assert_eq!(
            exposure("cluster:rediss://:a@r1:6380,redis://:b@r2:6379", false),
            (true, false)
        );
        assert_eq!(
            exposure("redis+sentinel://s1:26379/m", false),
            (false, false)
        );
        assert_eq!(
            exposure("rediss+sentinel://u:pw@s1:26379/m", false),
            (true, true)
        );
        assert_eq!(exposure("rediss+sentinel://s1:26379/m", true), (true, true));
    }
}
