// Package egress is how the services call URLs their tenants give them (webhook endpoints, a
// Slack incoming webhook): an HTTP client that follows no redirects and, unless the operator
// allows it, connects to no loopback, private, link-local or otherwise reserved address,
// checked on the address actually dialled, so a name that resolves there is refused too.
package egress

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// ErrBlocked is the refusal of a connection to a blocked address.
var ErrBlocked = errors.New("the target resolves to a loopback, private or link-local address")

// reserved are the ranges beyond loopback, private, link-local and multicast that no public
// receiver is in: "this network", shared address space (carrier-grade NAT, and some clouds'
// metadata services), IETF protocol assignments, documentation, benchmarking, reserved and
// broadcast.
var reserved = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"), netip.MustParsePrefix("100.64.0.0/10"), netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("198.18.0.0/15"), netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("240.0.0.0/4"), netip.MustParsePrefix("2001:db8::/32"),
	// IPv6: the local-use NAT64 prefix (a network's own translator, whose IPv4 side may be
	// private, at any prefix length under it), site-local (deprecated, still routed by some
	// stacks), Teredo (an IPv4 address inside, obfuscated), ORCHID and the discard prefix.
	netip.MustParsePrefix("64:ff9b:1::/48"), netip.MustParsePrefix("fec0::/10"), netip.MustParsePrefix("2001::/32"),
	netip.MustParsePrefix("2001:10::/28"), netip.MustParsePrefix("2001:20::/28"), netip.MustParsePrefix("100::/64"),
}

// Prefixes that carry an IPv4 address inside an IPv6 one: NAT64 (the last 32 bits), 6to4 (bits
// 16 to 48), and the last 32 bits of IPv4-compatible (::a.b.c.d, deprecated) and IPv4-translated
// (::ffff:0:a.b.c.d, SIIT) addresses.
var (
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	sixTo4     = netip.MustParsePrefix("2002::/16")
	compatible = netip.MustParsePrefix("::/96")
	translated = netip.MustParsePrefix("::ffff:0:0:0/96")
)

// Blocked reports whether an address is one that tenant-given URLs must not reach unless the
// operator allows it: loopback, private, link-local, unspecified, multicast, the reserved
// ranges, and IPv6 addresses that carry such an IPv4 address (docs/webhooks.md, "Delivery").
func Blocked(ip netip.Addr) bool {
	ip = ip.Unmap()
	if ip.Is6() {
		b := ip.As16()
		switch {
		case nat64.Contains(ip), translated.Contains(ip), compatible.Contains(ip) && !ip.IsLoopback() && !ip.IsUnspecified():
			return Blocked(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
		case sixTo4.Contains(ip):
			return Blocked(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
		}
	}
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast() {
		return true
	}
	for _, p := range reserved {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Client returns the client: timeout bounds a whole request; perHost the idle connections kept
// to one host.
func Client(allowPrivate bool, timeout time.Duration, perHost int) *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		dialer.Control = func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			ip, err := netip.ParseAddr(host)
			if err != nil || Blocked(ip) {
				return ErrBlocked
			}
			return nil
		}
	}
	transport := &http.Transport{DialContext: dialer.DialContext, MaxIdleConnsPerHost: perHost, IdleConnTimeout: 90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: timeout}
	return &http.Client{Transport: transport, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
