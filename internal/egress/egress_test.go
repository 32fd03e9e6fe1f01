package egress

import (
	"net/netip"
	"testing"
)

func TestBlockedAddresses(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1": true, "10.1.2.3": true, "172.16.0.1": true, "192.168.1.1": true, "169.254.169.254": true, "0.0.0.0": true,
		"0.1.2.3": true, "100.100.100.200": true, "198.18.0.1": true, "240.0.0.1": true, "255.255.255.255": true, "224.0.0.1": true,
		"::1": true, "::": true, "fe80::1": true, "fc00::1": true, "::ffff:127.0.0.1": true, "64:ff9b::a9fe:a9fe": true, "2002:7f00:1::": true,
		// IPv4-compatible and IPv4-translated forms of blocked IPv4 addresses, a network's own
		// NAT64 prefix, site-local, Teredo.
		"::127.0.0.1": true, "::a9fe:a9fe": true, "::ffff:0:a9fe:a9fe": true, "::ffff:0:a00:1": true,
		"64:ff9b:1::a9fe:a9fe": true, "64:ff9b:1:2::808:808": true, "fec0::1": true, "2001:0:4136:e378:8000:63bf:3fff:fdd2": true,
		"8.8.8.8": false, "1.1.1.1": false, "2606:4700:4700::1111": false, "64:ff9b::808:808": false, "2002:808:808::": false,
		"::ffff:0:808:808": false, "2001:4860:4860::8888": false,
	} {
		if got := Blocked(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Blocked(%s) = %v", addr, got)
		}
	}
}

// FuzzBlocked: an IPv6 address that carries a blocked IPv4 address in any of the forms a
// network may translate or tunnel (NAT64, 6to4, IPv4-mapped, -compatible and -translated) is
// blocked, whatever the IPv4 address and the other bits are; and Blocked never panics.
func FuzzBlocked(f *testing.F) {
	f.Add([]byte{127, 0, 0, 1}, []byte{0x20, 0x01, 0x48, 0x60})
	f.Add([]byte{169, 254, 169, 254}, []byte{0})
	f.Add([]byte{8, 8, 8, 8}, []byte{0xfe, 0xc0})
	f.Fuzz(func(t *testing.T, v4, v6 []byte) {
		var a4 [4]byte
		copy(a4[:], v4)
		var a16 [16]byte
		copy(a16[:], v6)
		Blocked(netip.AddrFrom16(a16))
		ip4 := netip.AddrFrom4(a4)
		if !Blocked(ip4) {
			return
		}
		forms := map[string][16]byte{
			"NAT64":           {0, 0x64, 0xff, 0x9b, 12: a4[0], 13: a4[1], 14: a4[2], 15: a4[3]},
			"6to4":            {0x20, 0x02, a4[0], a4[1], a4[2], a4[3], 6: a16[6], 7: a16[7], 8: a16[8], 15: a16[15]},
			"IPv4-mapped":     {10: 0xff, 11: 0xff, 12: a4[0], 13: a4[1], 14: a4[2], 15: a4[3]},
			"IPv4-compatible": {12: a4[0], 13: a4[1], 14: a4[2], 15: a4[3]},
			"IPv4-translated": {8: 0xff, 9: 0xff, 12: a4[0], 13: a4[1], 14: a4[2], 15: a4[3]},
			"local NAT64":     {0, 0x64, 0xff, 0x9b, 0, 1, 6: a16[6], 7: a16[7], 8: a16[8], 9: a16[9], 10: a16[10], 11: a16[11], 12: a4[0], 13: a4[1], 14: a4[2], 15: a4[3]},
		}
		for name, b := range forms {
			if ip := netip.AddrFrom16(b); !Blocked(ip) {
				t.Fatalf("%s form %s of the blocked %s is not blocked", name, ip, ip4)
			}
		}
	})
}
