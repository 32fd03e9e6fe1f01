package workspace

import (
	"errors"
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

// Every accepted form, and what is stored for it.
func TestNormalizeDomainAccepts(t *testing.T) {
	for in, want := range map[string]string{
		"example.com":                             "example.com",
		"  Example.COM  ":                         "example.com",
		"example.com.":                            "example.com",
		"www.example.com":                         "example.com",
		"http://example.com":                      "example.com",
		"https://example.com:8443/path?q#f":       "example.com",
		"HTTPS://user:pw@example.com/":            "example.com",
		"https://example.com\\path":               "example.com",
		"https://example.com:":                    "example.com",
		"example.com:443":                         "example.com",
		"localhost":                               "localhost",
		"localhost:3000":                          "localhost",
		"a-b.c-d.example":                         "a-b.c-d.example",
		"3com.example":                            "3com.example",
		"123.example.com":                         "123.example.com",
		"*.example.com":                           "*.example.com",
		"https://*.example.com":                   "*.example.com",
		"münchen.de":                              "xn--mnchen-3ya.de",
		"https://www.MÜNCHEN.de/":                 "xn--mnchen-3ya.de",
		"xn--mnchen-3ya.de":                       "xn--mnchen-3ya.de",
		"faß.de":                                  "xn--fa-hia.de", // non-transitional: ß is kept
		"例え.テスト":                                  "xn--r8jz45g.xn--zckzah",
		"ｅｘａｍｐｌｅ．ｃｏｍ":                             "example.com", // full-width forms are mapped
		"*.bücher.example":                        "*.xn--bcher-kva.example",
		"1.2.3.4":                                 "1.2.3.4",
		"http://1.2.3.4:8080/x":                   "1.2.3.4",
		"255.255.255.255":                         "255.255.255.255",
		"::1":                                     "::1",
		"[::1]":                                   "::1",
		"https://[2001:DB8::1]:8443/":             "2001:db8::1",
		"2001:0db8:0000:0000:0000:0000:0000:0001": "2001:db8::1",
		"[::ffff:1.2.3.4]":                        "::ffff:1.2.3.4",
		"fe80::1":                                 "fe80::1",
		"http://[fe80::1]/":                       "fe80::1",
	} {
		got, err := normalizeDomain(in)
		if err != nil || got != want {
			t.Errorf("normalizeDomain(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// Every refused form, and the reason given.
func TestNormalizeDomainRefuses(t *testing.T) {
	for in, want := range map[string]error{
		"":                               errEmpty,
		"   ":                            errEmpty,
		"https://":                       errEmpty,
		"https:///path":                  errEmpty,
		"javascript:alert(1)":            errScheme,
		"JavaScript:alert(1)":            errScheme,
		"javascript://example.com":       errScheme,
		"ftp://example.com":              errScheme,
		"file:///etc/passwd":             errScheme,
		"mailto:a@example.com":           errScheme,
		"data:text/html,x":               errScheme,
		"example.com:http":               errScheme,
		"example.com:0":                  errPort,
		"example.com:65536":              errPort,
		"example.com:80x":                errPort,
		"example.com:+80":                errScheme,
		"example.com:-80":                errScheme,
		"http://example.com:+80/":        errPort,
		"[::1]:99999":                    errPort,
		"[::1]x":                         errHost,
		"999.1.1.1":                      errIPv4,
		"256.0.0.1":                      errIPv4,
		"1.2.3":                          errIPv4,
		"127.1":                          errIPv4,
		"1.2.3.4.5":                      errIPv4,
		"01.2.3.4":                       errIPv4,
		"0x7f.0.0.1":                     errIPv4,
		"12345":                          errIPv4,
		"*.1.2.3.4":                      errIPv4,
		"example.123":                    errNumericTLD,
		"example.0x1f":                   errNumericTLD,
		"[1.2.3.4]":                      errIPv6,
		"[::1":                           errIPv6,
		"fe80::1%eth0":                   errIPv6,
		"1:2:3:4:5:6:7:8:9":              errIPv6,
		"exa mple.com":                   errHost,
		"-bad.com":                       errHost,
		"bad-.com":                       errHost,
		"a..b":                           errHost,
		"x_y.com":                        errHost,
		"exa\nmple.com":                  errHost,
		"exa%6dple.com":                  errHost,
		"<script>.com":                   errHost,
		"a.*.example.com":                errHost,
		"*example.com":                   errHost,
		"*":                              errHost,
		"ab--c.example":                  errHost, // hyphens in the third and fourth place are reserved
		"xn--a.example":                  errHost, // not valid punycode
		strings.Repeat("a", 64) + ".com": errHost,
		strings.Repeat(strings.Repeat("a", 60)+".", 5) + "com": errHost, // over 253
		"*.com":       errWildcard,
		"*.localhost": errWildcard,
	} {
		got, err := normalizeDomain(in)
		if !errors.Is(err, want) {
			t.Errorf("normalizeDomain(%q) = %q, %v; want %v", in, got, err, want)
		}
	}
}

func TestNormalizeDomainsRefuses(t *testing.T) {
	for _, bad := range []string{"", "   ", "https://", "exa mple.com", "javascript:alert(1)", "999.1.1.1", "*.com", "x_y.com"} {
		_, err := normalizeDomains([]string{"ok.com", bad})
		if err == nil {
			t.Errorf("%q accepted", bad)
			continue
		}
		st := asStatus(err)
		if st.Code().String() != "InvalidArgument" || !strings.HasPrefix(st.Message(), "allowedDomains[1] ") || !strings.HasSuffix(st.Message(), ".") {
			t.Errorf("%q: %v", bad, st)
		}
	}
	if got := asStatus(mustFail(normalizeDomains([]string{"javascript:alert(1)"}))).Message(); got != `allowedDomains[0] "javascript:alert(1)" is not a valid domain: only http and https URLs are accepted.` {
		t.Errorf("message %q", got)
	}
	many := make([]string, maxAllowedDomains+1)
	for i := range many {
		many[i] = "a.com"
	}
	if _, err := normalizeDomains(many); err == nil {
		t.Error("more than the maximum accepted")
	}
}

func mustFail(_ []string, err error) error { return err }
