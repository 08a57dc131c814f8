//! Which addresses a notice may reach when the one who named it is not the operator: public
//! unicast addresses, and no name that means this machine. Pure (no I/O), so the native
//! exchange's webhook guard and the Worker build apply the one rule.

// `core::net`: the address types alone; sockets (`std::net`) stay out of the protocol.
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Whether `ip` is a public unicast address: not loopback, private (RFC 1918, ULA), link-local,
/// unspecified, multicast, shared (CGNAT), documentation, benchmarking or reserved, and not an
/// IPv6 form that carries such an IPv4 address (mapped, compatible, NAT64, 6to4).
pub fn is_public(ip: IpAddr) -> bool {
    match ip.to_canonical() {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(a == 0                                  // "this network", 0.0.0.0
        || a == 10                            // private
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || a == 127                           // loopback
        || (a == 169 && b == 254)             // link-local (cloud metadata)
        || (a == 172 && (16..32).contains(&b)) // private
        || (a == 192 && b == 0 && c == 0)     // IETF protocol assignments
        || (a == 192 && b == 0 && c == 2)     // documentation
        || (a == 192 && b == 88 && c == 99)   // 6to4 relay anycast
        || (a == 192 && b == 168)             // private
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || (a == 198 && b == 51 && c == 100)  // documentation
        || (a == 203 && b == 0 && c == 113)   // documentation
        || a >= 224) // multicast, reserved, broadcast
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    let embedded = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        // NAT64: reaches the IPv4 address it carries.
        return is_public_v4(embedded(s[6], s[7]));
    }
    if s[0] == 0x2002 {
        // 6to4: reaches the IPv4 address it carries.
        return is_public_v4(embedded(s[1], s[2]));
    }
    // Only 2000::/3 is global unicast; within it, these are not public.
    (s[0] & 0xe000) == 0x2000
        && !(s[0] == 0x2001 && s[1] < 0x0200) // IETF assignments: Teredo, benchmarking, ORCHID
        && !(s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        && !(s[0] == 0x3fff && s[1] < 0x1000) // documentation (3fff::/20)
}

/// Names that mean this machine whatever DNS says (RFC 6761 and common hosts-file names).
pub fn is_local_name(name: &str) -> bool {
    matches!(
        name,
        "localhost" | "localhost.localdomain" | "ip6-localhost" | "ip6-loopback"
    ) || name.ends_with(".localhost")
}
