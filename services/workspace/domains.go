package workspace

import (
	"fmt"
	"net"
	"regexp"
	"strings"

	"golang.org/x/net/idna"

	"github.com/collab/collab/internal/apierr"
)

// maxAllowedDomains bounds a key's allowed domains.
const maxAllowedDomains = 100

var schemePrefix = regexp.MustCompile(`^[a-z][a-z0-9+.-]*://`)

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

func normalizeDomain(raw string) (string, error) {
	d := strings.ToLower(strings.TrimSpace(raw))
	d = schemePrefix.ReplaceAllString(d, "")
	if i := strings.IndexAny(d, "/?#"); i >= 0 {
		d = d[:i]
	}
	if at := strings.LastIndex(d, "@"); at >= 0 { // user info
		d = d[at+1:]
	}
	if host, _, err := net.SplitHostPort(d); err == nil {
		d = host
	}
	d = strings.TrimSuffix(d, ".")
	d = strings.TrimPrefix(d, "www.")
	if d == "" {
		return "", fmt.Errorf("it is empty")
	}
	if ip := net.ParseIP(strings.Trim(d, "[]")); ip != nil {
		return ip.String(), nil
	}
	wildcard := strings.HasPrefix(d, "*.")
	name := strings.TrimPrefix(d, "*.")
	ascii, err := idna.Lookup.ToASCII(name)
	if err != nil {
		return "", fmt.Errorf("it is not a host name")
	}
	if len(ascii) > 253 {
		return "", fmt.Errorf("it is longer than 253 characters")
	}
	for _, label := range strings.Split(ascii, ".") {
		if !validLabel(label) {
			return "", fmt.Errorf("it is not a host name")
		}
	}
	if wildcard {
		if !strings.Contains(ascii, ".") {
			return "", fmt.Errorf("a wildcard needs a domain with a dot after it")
		}
		return "*." + ascii, nil
	}
	return ascii, nil
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
