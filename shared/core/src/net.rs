//! Which network destinations a webhook may reach (SSRF protection).
//!
//! After DNS resolution every address is checked; loopback, private, link-local (which holds
//! the cloud metadata endpoints), CGNAT, unique-local, unspecified, multicast and other
//! special-purpose ranges are refused unless an operator allowlist of CIDRs covers them.

use crate::Invalid;

use ipnet::IpNet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowlist(Vec<IpNet>);

impl Allowlist {
    pub fn new(nets: Vec<IpNet>) -> Self {
        Self(nets)
    }

    /// Parses a comma-separated list of CIDRs (`127.0.0.0/8,::1/128`).
    pub fn parse(s: &str) -> Result<Self, Invalid> {
        s.split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| {
                IpNet::from_str(p)
                    .or_else(|_| IpAddr::from_str(p).map(IpNet::from))
                    .map_err(|_| Invalid(format!("`{p}` is not a CIDR")))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }

    /// Loopback only: what the local runner allows by default.
    pub fn loopback() -> Self {
        Self(vec![
            IpNet::from(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 0))).supernet_of_len(8),
            IpNet::from(IpAddr::V6(Ipv6Addr::LOCALHOST)),
        ])
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|n| n.contains(&ip))
    }
}

trait SupernetOfLen {
    fn supernet_of_len(self, len: u8) -> IpNet;
}

impl SupernetOfLen for IpNet {
    fn supernet_of_len(self, len: u8) -> IpNet {
        IpNet::new(self.addr(), len)
            .map(|n| n.trunc())
            .unwrap_or(self)
    }
}

fn special_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_private() {
        Some("private")
    } else if ip.is_link_local() {
        Some("link-local/metadata")
    } else if o[0] == 100 && (o[1] & 0xC0) == 64 {
        Some("carrier-grade NAT")
    } else if o[0] == 0 || ip.is_unspecified() {
        Some("unspecified")
    } else if ip.is_broadcast() || ip.is_multicast() || o[0] >= 240 {
        Some("multicast/reserved")
    } else if o[0] == 192 && o[1] == 0 && o[2] == 0 {
        Some("IETF protocol assignments")
    } else if o[0] == 198 && (o[1] & 0xFE) == 18 {
        Some("benchmarking")
    } else {
        None
    }
}

/// Why an address may not be reached by default, or `None` for a public address.
pub fn special_purpose(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => special_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return special_v4(v4);
            }
            let seg = v6.segments();
            // NAT64 (64:ff9b::/96) embeds an IPv4 address.
            if seg[0] == 0x64 && seg[1] == 0xff9b && seg[2..6] == [0, 0, 0, 0] {
                let o = v6.octets();
                return special_v4(Ipv4Addr::new(o[12], o[13], o[14], o[15]));
            }
            if v6.is_loopback() {
                Some("loopback")
            } else if v6.is_unspecified() {
                Some("unspecified")
            } else if seg[0..6] == [0, 0, 0, 0, 0, 0] {
                // `::a.b.c.d`, deprecated: hosts may still route it to the IPv4 address.
                Some("IPv4-compatible")
            } else if seg[0] == 0x2002 {
                // 6to4 and Teredo embed an IPv4 address and reach it through a relay.
                Some("6to4")
            } else if seg[0] == 0x2001 && seg[1] == 0 {
                Some("Teredo")
            } else if seg[0] == 0x64 && seg[1] == 0xff9b && seg[2] == 1 {
                // Local-use NAT64 (RFC 8215): translated by the network's own gateway.
                Some("local-use NAT64")
            } else if (seg[0] & 0xffc0) == 0xfec0 {
                Some("site-local")
            } else if (seg[0] & 0xfe00) == 0xfc00 {
                Some("unique-local")
            } else if (seg[0] & 0xffc0) == 0xfe80 {
                Some("link-local")
            } else if v6.is_multicast() {
                Some("multicast")
            } else {
                None
            }
        }
    }
}

/// `Err(reason)` when `ip` may not be reached under `allow`.
pub fn check_destination(ip: IpAddr, allow: &Allowlist) -> Result<(), &'static str> {
    match special_purpose(ip) {
        Some(reason) if !allow.contains(ip) => Err(reason),
        _ => Ok(()),
    }
}

/// The source a request is counted against (sign-in attempts, refused API requests): an IPv4 address itself, an IPv6 address by its
/// /64 (one host holds a whole /64, so counting single addresses would count nothing), an
/// IPv4-mapped IPv6 address as the IPv4 one. `None` (no address known) counts as one source.
pub fn client_source(ip: Option<IpAddr>) -> String {
    match ip.map(|ip| ip.to_canonical()) {
        Some(IpAddr::V4(v4)) => v4.to_string(),
        Some(IpAddr::V6(v6)) => {
            let s = v6.segments();
            let net = Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0);
            format!("{net}/64")
        }
        None => "unknown".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_are_counted_by_ipv4_address_and_ipv6_64() {
        let ip = |s: &str| Some(s.parse().unwrap());
        assert_eq!(client_source(ip("203.0.113.9")), "203.0.113.9");
        assert_eq!(client_source(ip("::ffff:203.0.113.9")), "203.0.113.9");
        assert_eq!(
            client_source(ip("2001:db8:1:2:aaaa::1")),
            client_source(ip("2001:db8:1:2:bbbb::2"))
        );
        assert_eq!(client_source(ip("2001:db8:1:2::1")), "2001:db8:1:2::/64");
        assert_ne!(
            client_source(ip("2001:db8:1:2::1")),
            client_source(ip("2001:db8:1:3::1"))
        );
        assert_eq!(client_source(None), "unknown");
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn special_ranges_are_refused() {
        let none = Allowlist::default();
        for a in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "::",
            "fd00:ec2::254",
            "fe80::1",
            "::ffff:127.0.0.1",
            "64:ff9b::a00:1",
            // Forms that embed or translate to an IPv4 address, and the old site-local range.
            "::127.0.0.1",
            "::10.0.0.1",
            "::8.8.8.8",
            "2002:7f00:1::1",
            "2002:0808:0808::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "64:ff9b:1::a00:1",
            "64:ff9b:1:ffff::1",
            "fec0::1",
            "feff::1",
            "224.0.0.1",
            "255.255.255.255",
        ] {
            assert!(check_destination(ip(a), &none).is_err(), "{a}");
        }
        for a in [
            "93.184.216.34",
            "2606:4700::1111",
            // Neighbours of the refused ranges stay reachable.
            "2001:db8::1",
            "2001:4860:4860::8888",
            "2003::1",
            "64:ff9b::808:808",
            "64:ff9b:2::1",
            "100.128.0.1",
            "172.32.0.1",
        ] {
            assert!(check_destination(ip(a), &none).is_ok(), "{a}");
        }
    }

    #[test]
    fn allowlist_opens_ranges() {
        let lo = Allowlist::loopback();
        assert!(check_destination(ip("127.0.0.1"), &lo).is_ok());
        assert!(check_destination(ip("127.9.9.9"), &lo).is_ok());
        assert!(check_destination(ip("::1"), &lo).is_ok());
        assert!(check_destination(ip("10.0.0.1"), &lo).is_err());
        let custom = Allowlist::parse("10.0.0.0/8, 192.168.1.7").unwrap();
        assert!(check_destination(ip("10.2.3.4"), &custom).is_ok());
        assert!(check_destination(ip("192.168.1.7"), &custom).is_ok());
        assert!(check_destination(ip("192.168.1.8"), &custom).is_err());
        assert!(Allowlist::parse("not-a-net").is_err());
    }
}
