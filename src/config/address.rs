//! The addresses gitward never connects to unless the operator lists them: one classification
//! ([`restricted_host`] for what a URL names, [`restricted_ip`] for an address) and one rule
//! for an address a name resolved to ([`refused_resolution`]), used by every client gitward
//! itself opens (chart repositories, registries and their token services, redirects) and by
//! the CONNECT proxy of a render.
//!
//! Two families ([`Restricted::is_private_network`]):
//! - **The host itself and what sits beside it**: loopback, unspecified, link-local, cloud
//!   metadata. Reached only when the allow-list names that very host and port, and through a
//!   name only when the name says what it is (`localhost`, `metadata.google.internal`): a
//!   listed public name that resolves to `127.0.0.1` (DNS rebinding) is refused.
//! - **Private networks**: RFC 1918 (`10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16`), shared
//!   address space (CGNAT, `100.64.0.0/10`, RFC 6598), IPv6 unique local (`fc00::/7`, RFC 4193)
//!   and the deprecated site-local `fec0::/10`, and cluster-internal names (a name of one label,
//!   which a pod's resolver completes with its search domains; `*.svc`, `*.cluster.local`;
//!   the private-use names `*.internal`, `*.local`, `*.home.arpa`). Reached only when the
//!   allow-list names that host (and port, for a URL): a redirect, a registry's token realm or
//!   a name chosen by a server never leads gitward into the cluster's or the company's network
//!   on its own.
//!
//! An IPv4-mapped (`::ffff:10.0.0.1`) or NAT64 (`64:ff9b::10.0.0.1`, RFC 6052) IPv6 address is
//! judged as the IPv4 address it carries.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What kind of address gitward does not reach unless it is listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restricted {
    /// `127.0.0.0/8`, `::1`, `localhost` and `*.localhost` (RFC 6761).
    Loopback,
    /// `0.0.0.0` and `::`, which Linux connects to the host itself.
    Unspecified,
    /// `169.254.0.0/16` and `fe80::/10` (RFC 3927, RFC 4291).
    LinkLocal,
    /// A cloud provider's instance metadata service: `169.254.169.254` (AWS, GCP, Azure…),
    /// `fd00:ec2::254` (AWS IPv6), `100.100.100.200` (Alibaba), `metadata.google.internal`.
    Metadata,
    /// `10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16` (RFC 1918).
    Private,
    /// `100.64.0.0/10`, the shared address space of carrier-grade NAT (RFC 6598), which some
    /// clusters use for pods and Services.
    SharedAddress,
    /// `fc00::/7` (RFC 4193) and the deprecated site-local `fec0::/10` (RFC 3879).
    UniqueLocal,
    /// A name only a private resolver answers: one label (`redis`, completed by the search
    /// domains of a pod's `resolv.conf`), `*.svc`, `*.cluster.local` (Kubernetes Services),
    /// `*.internal`, `*.local` (RFC 6762), `*.home.arpa` (RFC 8375).
    ClusterInternal,
}

impl Restricted {
    /// True for the addresses of a private network ([`Restricted::Private`],
    /// [`Restricted::SharedAddress`], [`Restricted::UniqueLocal`],
    /// [`Restricted::ClusterInternal`]): a listed host name may resolve to one. False for the
    /// host's own addresses (loopback, unspecified, link-local, metadata), which only a name
    /// that says it is one may resolve to ([`refused_resolution`]).
    pub fn is_private_network(self) -> bool {
        matches!(
            self,
            Restricted::Private | Restricted::SharedAddress | Restricted::UniqueLocal | Restricted::ClusterInternal
        )
    }
}

impl std::fmt::Display for Restricted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Restricted::Loopback => "loopback",
            Restricted::Unspecified => "unspecified (0.0.0.0/::)",
            Restricted::LinkLocal => "link-local",
            Restricted::Metadata => "cloud metadata",
            Restricted::Private => "private (RFC 1918)",
            Restricted::SharedAddress => "shared (CGNAT, 100.64.0.0/10)",
            Restricted::UniqueLocal => "unique local IPv6 (fc00::/7)",
            Restricted::ClusterInternal => "cluster-internal",
        })
    }
}

/// The kind of `host` (a name or an address as [`super::Location::host`] reads it; brackets
/// and a trailing dot are ignored), `None` for an ordinary host. A name is judged by what it
/// says only; what it resolves to is judged at connect time ([`refused_resolution`]).
pub fn restricted_host(host: &str) -> Option<Restricted> {
    let host = host.trim_end_matches('.').trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
    if let Ok(ip) = host.parse::<IpAddr>() {
        return restricted_ip(ip);
    }
    let under = |suffix: &str| host.strip_suffix(suffix).is_some_and(|rest| rest.ends_with('.'));
    match host.as_str() {
        "localhost" => Some(Restricted::Loopback),
        _ if under("localhost") => Some(Restricted::Loopback),
        "metadata.google.internal" | "metadata" => Some(Restricted::Metadata),
        "" => None,
        _ if !host.contains('.') => Some(Restricted::ClusterInternal),
        _ if ["svc", "cluster.local", "internal", "local", "home.arpa"].iter().any(|s| under(s)) => {
            Some(Restricted::ClusterInternal)
        }
        _ => None,
    }
}

/// The kind of `ip`, `None` for an ordinary address. An IPv4-mapped (`::ffff:127.0.0.1`) or
/// NAT64 (`64:ff9b::/96`) IPv6 address is judged as the IPv4 address it carries.
pub fn restricted_ip(ip: IpAddr) -> Option<Restricted> {
    match ip {
        IpAddr::V4(v4) => restricted_v4(v4),
        IpAddr::V6(v6) => restricted_v6(v6),
    }
}

/// [`restricted_ip`] of an IPv4 address.
fn restricted_v4(v4: Ipv4Addr) -> Option<Restricted> {
    match v4.octets() {
        [169, 254, 169, 254] | [100, 100, 100, 200] => Some(Restricted::Metadata),
        _ if v4.is_loopback() => Some(Restricted::Loopback),
        _ if v4.is_unspecified() => Some(Restricted::Unspecified),
        _ if v4.is_link_local() => Some(Restricted::LinkLocal),
        _ if v4.is_private() => Some(Restricted::Private),
        [100, second, ..] if second & 0xc0 == 64 => Some(Restricted::SharedAddress),
        _ => None,
    }
}

/// [`restricted_ip`] of an IPv6 address.
fn restricted_v6(v6: Ipv6Addr) -> Option<Restricted> {
    if let Some(v4) = v6.to_ipv4_mapped() {
        return restricted_v4(v4);
    }
    match v6.segments() {
        [0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254] => Some(Restricted::Metadata),
        [0x64, 0xff9b, 0, 0, 0, 0, high, low] => {
            restricted_v4(Ipv4Addr::from((u32::from(high) << 16) | u32::from(low)))
        }
        [first, ..] if first & 0xffc0 == 0xfe80 => Some(Restricted::LinkLocal),
        [first, ..] if first & 0xfe00 == 0xfc00 => Some(Restricted::UniqueLocal),
        [first, ..] if first & 0xffc0 == 0xfec0 => Some(Restricted::UniqueLocal),
        _ if v6.is_loopback() => Some(Restricted::Loopback),
        _ if v6.is_unspecified() => Some(Restricted::Unspecified),
        _ => None,
    }
}

/// Why gitward must not connect to `ip`, an address the name `host` resolved to, `None` when
/// it may. `listed`: whether the operator's allow-list names `host` itself (for gitward's
/// fetches, [`super::ChartRepositories::lists_host`]; for the render proxy, its allowed
/// targets). An ordinary address is always allowed; a private network's address
/// ([`Restricted::is_private_network`]) when `host` is listed; the host's own addresses
/// (loopback, link-local, metadata…) only when `host` is listed and itself says it is one
/// (`localhost`), so that a listed public name that resolves there (DNS rebinding, a poisoned
/// resolver) is refused.
///
/// Callers check every address a name resolved to, and connect only to addresses checked —
/// the check is on what the connection uses, not on a separate lookup.
pub fn refused_resolution(host: &str, ip: IpAddr, listed: bool) -> Option<Restricted> {
    let kind = restricted_ip(ip)?;
    let says_so = restricted_host(host).is_some_and(|named| !named.is_private_network());
    let vouched = listed && (kind.is_private_network() || says_so);
    (!vouched).then_some(kind)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn each_range_is_classified() {
        let rows = [
            ("127.0.0.1", Some(Restricted::Loopback)),
            ("::1", Some(Restricted::Loopback)),
            ("0.0.0.0", Some(Restricted::Unspecified)),
            ("169.254.1.1", Some(Restricted::LinkLocal)),
            ("fe80::1", Some(Restricted::LinkLocal)),
            ("169.254.169.254", Some(Restricted::Metadata)),
            ("100.100.100.200", Some(Restricted::Metadata)),
            ("fd00:ec2::254", Some(Restricted::Metadata)),
            ("10.0.0.1", Some(Restricted::Private)),
            ("10.255.255.255", Some(Restricted::Private)),
            ("172.16.0.1", Some(Restricted::Private)),
            ("172.31.255.254", Some(Restricted::Private)),
            ("192.168.1.1", Some(Restricted::Private)),
            ("100.64.0.1", Some(Restricted::SharedAddress)),
            ("100.127.255.254", Some(Restricted::SharedAddress)),
            ("fc00::1", Some(Restricted::UniqueLocal)),
            ("fd12:3456::1", Some(Restricted::UniqueLocal)),
            ("fec0::1", Some(Restricted::UniqueLocal)),
            ("::ffff:10.1.2.3", Some(Restricted::Private)),
            ("::ffff:100.64.1.1", Some(Restricted::SharedAddress)),
            ("64:ff9b::10.1.2.3", Some(Restricted::Private)),
            ("64:ff9b::127.0.0.1", Some(Restricted::Loopback)),
            ("172.15.255.255", None),
            ("172.32.0.0", None),
            ("100.63.255.255", None),
            ("100.128.0.0", None),
            ("11.0.0.1", None),
            ("192.169.0.1", None),
            ("8.8.8.8", None),
            ("2001:db8::1", None),
            ("64:ff9b::8.8.8.8", None),
            ("fbff::1", None),
        ];
        for (ip, want) in rows {
            assert_eq!(restricted_ip(ip.parse().unwrap()), want, "{ip}");
            assert_eq!(restricted_host(ip), want, "{ip} as a host");
        }
    }

    #[test]
    fn names_are_judged_by_what_they_say() {
        let rows = [
            ("localhost", Some(Restricted::Loopback)),
            ("a.localhost.", Some(Restricted::Loopback)),
            ("metadata.google.internal", Some(Restricted::Metadata)),
            ("redis", Some(Restricted::ClusterInternal)),
            ("registry.", Some(Restricted::ClusterInternal)),
            ("charts.tools.svc", Some(Restricted::ClusterInternal)),
            ("charts.tools.svc.cluster.local", Some(Restricted::ClusterInternal)),
            ("Charts.Tools.SVC.Cluster.Local.", Some(Restricted::ClusterInternal)),
            ("vault.internal", Some(Restricted::ClusterInternal)),
            ("printer.local", Some(Restricted::ClusterInternal)),
            ("nas.home.arpa", Some(Restricted::ClusterInternal)),
            ("[fd00::1]", Some(Restricted::UniqueLocal)),
            ("charts.example.com", None),
            ("svc.example.com", None),
            ("notsvc", Some(Restricted::ClusterInternal)),
            ("evilsvc.com", None),
            ("mylocal.com", None),
            ("[2001:db8::1]", None),
        ];
        for (host, want) in rows {
            assert_eq!(restricted_host(host), want, "{host}");
        }
    }

    #[test]
    fn a_resolved_address_is_vouched_for_only_by_a_listed_name_that_may_lead_there() {
        let (private, loopback, public) =
            ("10.1.2.3".parse().unwrap(), "127.0.0.1".parse().unwrap(), "93.184.216.34".parse().unwrap());
        assert_eq!(refused_resolution("charts.example.com", public, false), None);
        assert_eq!(refused_resolution("charts.example.com", private, false), Some(Restricted::Private));
        assert_eq!(refused_resolution("charts.corp.example", private, true), None, "a listed internal name");
        assert_eq!(refused_resolution("charts.tools.svc", private, true), None);
        assert_eq!(refused_resolution("charts.example.com", loopback, true), Some(Restricted::Loopback), "rebinding");
        assert_eq!(refused_resolution("localhost", loopback, true), None);
        assert_eq!(refused_resolution("localhost", loopback, false), Some(Restricted::Loopback));
        assert_eq!(refused_resolution("charts.tools.svc", loopback, true), Some(Restricted::Loopback));
    }

    /// An IPv4 address inside `network/prefix`.
    fn inside(network: [u8; 4], prefix: u32) -> impl Strategy<Value = Ipv4Addr> {
        let base = u32::from(Ipv4Addr::from(network));
        (0..(1u64 << (32 - prefix))).prop_map(move |offset| Ipv4Addr::from(base + offset as u32))
    }

    proptest! {
        #[test]
        fn every_private_v4_address_is_restricted_however_written(
            ip in prop_oneof![
                inside([10, 0, 0, 0], 8),
                inside([172, 16, 0, 0], 12),
                inside([192, 168, 0, 0], 16),
                inside([100, 64, 0, 0], 10),
            ]
        ) {
            let kind = restricted_ip(IpAddr::V4(ip)).expect("restricted");
            prop_assert!(kind.is_private_network() || kind == Restricted::Metadata, "{ip}: {kind}");
            prop_assert_eq!(restricted_ip(IpAddr::V6(ip.to_ipv6_mapped())), Some(kind));
            let nat64 = Ipv6Addr::from((0x64_ff9b_u128 << 96) | u128::from(u32::from(ip)));
            prop_assert_eq!(restricted_ip(IpAddr::V6(nat64)), Some(kind));
            // Any spelling the URL parser accepts is the same address.
            let decimal = format!("http://{}/", u32::from(ip));
            let host = super::super::Location::parse(&decimal).unwrap().host;
            prop_assert_eq!(restricted_host(&host), Some(kind));
            prop_assert_eq!(refused_resolution("any.example.com", IpAddr::V4(ip), false), Some(kind));
        }

        #[test]
        fn every_unique_local_v6_address_is_restricted(bits in any::<u128>()) {
            let ip = Ipv6Addr::from((0xfc00_u128 << 112) | (bits >> 7));
            let kind = restricted_ip(IpAddr::V6(ip));
            prop_assert!(matches!(kind, Some(Restricted::UniqueLocal | Restricted::Metadata)), "{ip}: {kind:?}");
        }

        #[test]
        fn a_public_v4_address_is_not_restricted(raw in any::<u32>()) {
            let ip = Ipv4Addr::from(raw);
            let special = ip.is_private() || ip.is_loopback() || ip.is_link_local() || ip.is_unspecified()
                || (ip.octets()[0] == 100 && ip.octets()[1] & 0xc0 == 64);
            prop_assert_eq!(restricted_ip(IpAddr::V4(ip)).is_some(), special, "{}", ip);
        }
    }
}
