package workspace

import (
	"errors"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/net/idna"

	"github.com/collab/collab/internal/apierr"
)

// maxAllowedDomains bounds a key's allowed domains.
const maxAllowedDomains = 100

// schemePrefix matches what may be a URL scheme ("https:", "javascript:") or a host followed by
// a port ("localhost:"); what comes after the colon tells them apart.
var schemePrefix = regexp.MustCompile(`^([a-z][a-z0-9+.-]*):`)

// hostProfile is IDNA's lookup profile made strict: labels are validated (hyphens, joiners,
// and STD3 rules: letters, digits and hyphens only once mapped), the Bidi rule applies, and so
// do the DNS lengths (labels of 1 to 63 octets, names of at most 253). Non-transitional, as
// browsers resolve names today ("faß.de" stays itself rather than becoming "fass.de").
var hostProfile = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.Transitional(false), idna.VerifyDNSLength(true))

// Why an entry is not a domain; they end the message "allowedDomains[i] "x" is not a valid
// domain: <reason>."
var (
	errEmpty      = errors.New("it is empty")
	errScheme     = errors.New("only http and https URLs are accepted")
	errPort       = errors.New("its port must be a number from 1 to 65535")
	errHost       = errors.New("it is not a host name")
	errIPv4       = errors.New("it is not a valid IPv4 address")
	errIPv6       = errors.New("it is not a valid IPv6 address")
	errWildcard   = errors.New("a wildcard needs a domain with a dot after it")
	errNumericTLD = errors.New("a host name must not end in a number (that is how an IPv4 address is written)")
)

// normalizeDomains turns what callers send ("https://www.Example.com/app", "localhost:3000")
// into bare, lower-case, de-duplicated domains ("example.com", "localhost"), in first-seen
// order. A leading "*." wildcard is kept. Anything that is not a domain is refused.
func normalizeDomains(in []string) ([]string, error) {
	if len(in) > maxAllowedDomains {
		return nil, apierr.InvalidArgument("allowedDomains has %d entries; at most %d are allowed.", len(in), maxAllowedDomains)
	}
	out := make([]string, 0, len(in))
	seen := map[string]bool{}
	for i, raw := range in {
		d, err := normalizeDomain(raw)
		if err != nil {
			return nil, apierr.InvalidArgument("allowedDomains[%d] %q is not a valid domain: %v.", i, truncate(raw, 100), err)
		}
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out, nil
}

// normalizeDomain returns the host of one entry: an http(s) URL or a bare host, with an
// optional port, and user info and path when it is a URL. The host must be a host name (LDH
// labels, or Unicode labels stored as their A-labels), a "*." wildcard over one, an IPv4 dotted
// quad or an IPv6 address; anything else is refused rather than cut down to something that
// looks like a host ("javascript:alert(1)" is not "javascript").
func normalizeDomain(raw string) (string, error) {
	d, err := hostPart(strings.ToLower(strings.TrimSpace(raw)))
	if err != nil {
		return "", err
	}
	if strings.HasPrefix(d, "[") { // "[v6]" or "[v6]:port"
		end := strings.Index(d, "]")
		if end < 0 {
			return "", errIPv6
		}
		if err := checkPort(d[end+1:]); err != nil {
			return "", err
		}
		return ipv6(d[1:end])
	}
	if strings.Count(d, ":") > 1 { // a bare IPv6 address has no room for a port
		return ipv6(d)
	}
	if host, port, ok := strings.Cut(d, ":"); ok {
		if err := checkPort(":" + port); err != nil {
			return "", err
		}
		d = host
	}
	d = strings.TrimSuffix(d, ".")
	if d == "" {
		return "", errEmpty
	}
	if addr, err := netip.ParseAddr(d); err == nil && addr.Is4() {
		return addr.String(), nil
	}
	return hostName(strings.TrimPrefix(d, "www."))
}

// hostPart returns what of an entry names the host and its port: past an http(s) scheme's
// "//", before a path, query or fragment (a backslash ends it too, as browsers read a URL),
// after user info. A scheme other than http(s) is refused.
func hostPart(d string) (string, error) {
	if m := schemePrefix.FindStringSubmatch(d); m != nil {
		rest := d[len(m[0]):]
		switch {
		case strings.HasPrefix(rest, "//"):
			if m[1] != "http" && m[1] != "https" {
				return "", errScheme
			}
			d = rest[2:]
		case rest == "" || (rest[0] < '0' || rest[0] > '9') && rest[0] != ':':
			// Neither "host:port" nor an IPv6 address ("fe80::1") but a scheme without "//":
			// "javascript:alert(1)", "mailto:a@b.example".
			return "", errScheme
		}
	}
	if i := strings.IndexAny(d, "/?#\\"); i >= 0 {
		d = d[:i]
	}
	if at := strings.LastIndex(d, "@"); at >= 0 { // user info
		d = d[at+1:]
	}
	if d == "" {
		return "", errEmpty
	}
	return d, nil
}

// hostName returns a host name (or a "*." wildcard over one) as its A-labels, each label
// checked; a name that browsers would read as an IPv4 address is refused.
func hostName(d string) (string, error) {
	wildcard := strings.HasPrefix(d, "*.")
	ascii, err := hostProfile.ToASCII(strings.TrimPrefix(d, "*."))
	if err != nil {
		return "", errHost
	}
	labels := strings.Split(ascii, ".")
	for _, label := range labels {
		if !validLabel(label) {
			return "", errHost
		}
	}
	// Browsers read a name whose last label is a number as an IPv4 address ("999.1.1.1",
	// "127.1", "0x7f.1"); one that is not a valid dotted quad is no host we accept.
	if isNumber(labels[len(labels)-1]) {
		for _, l := range labels {
			if !isNumber(l) {
				return "", errNumericTLD
			}
		}
		return "", errIPv4
	}
	if wildcard {
		if len(labels) < 2 {
			return "", errWildcard
		}
		return "*." + ascii, nil
	}
	return ascii, nil
}

// checkPort accepts "" (no port), ":" (an empty port, as URLs allow) or ":<1-65535>".
func checkPort(p string) error {
	if p == "" || p == ":" {
		return nil
	}
	if p[0] != ':' {
		return errHost
	}
	n, err := strconv.Atoi(p[1:])
	if err != nil || n < 1 || n > 65535 || p[1] == '+' || p[1] == '-' {
		return errPort
	}
	return nil
}

// ipv6 returns the canonical form of an IPv6 address. Zones ("fe80::1%eth0") name an interface
// of one machine, which is no origin a browser sends.
func ipv6(s string) (string, error) {
	addr, err := netip.ParseAddr(s)
	if err != nil || !addr.Is6() || addr.Zone() != "" {
		return "", errIPv6
	}
	return addr.String(), nil
}

// isNumber reports whether a label is a number as the URL standard reads IPv4 parts: decimal
// digits, or 0x followed by hex digits.
func isNumber(l string) bool {
	if hex, ok := strings.CutPrefix(l, "0x"); ok {
		return strings.Trim(hex, "0123456789abcdef") == ""
	}
	return l != "" && strings.Trim(l, "0123456789") == ""
}

func validLabel(l string) bool {
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for _, r := range l {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
