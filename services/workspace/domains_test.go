package workspace

import (
	"slices"
	"strings"
	"testing"
)

func TestNormalizeDomains(t *testing.T) {
	got, err := normalizeDomains([]string{
		"https://www.Example.com/app?x=1", "example.com", "localhost:3000", "http://user@Sub.Example.org:8443/",
		"*.preview.example.net", "WWW.foo.io.", "münchen.de", "127.0.0.1:8080", "[::1]:3000",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"example.com", "localhost", "sub.example.org", "*.preview.example.net", "foo.io", "xn--mnchen-3ya.de", "127.0.0.1", "::1"}
	if !slices.Equal(got, want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
}

func TestNormalizeDomainsRefuses(t *testing.T) {
	for _, bad := range []string{"", "   ", "https://", "exa mple.com", "-bad.com", "bad-.com", "a..b", "*.com", strings.Repeat("a", 64) + ".com", "x_y.com"} {
		if _, err := normalizeDomains([]string{"ok.com", bad}); err == nil {
			t.Errorf("%q accepted", bad)
		} else if !strings.Contains(err.Error(), "allowedDomains[1]") {
			t.Errorf("%q: message %q does not name the entry", bad, err)
		}
	}
	many := make([]string, maxAllowedDomains+1)
	for i := range many {
		many[i] = "a.com"
	}
	if _, err := normalizeDomains(many); err == nil {
		t.Error("more than the maximum accepted")
	}
}
