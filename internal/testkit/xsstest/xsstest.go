// Package xsstest holds HTML that reached a reader to "no active content", the rule of
// commentHtml (docs/comments.md, "Content safety"), for tests that see it from outside the
// sanitiser: what Get Comments and the live stream give back. It parses the HTML as a browser
// would, with golang.org/x/net/html's HTML5 tree builder, both ways a front end places a
// comment (a div's innerHTML, and inside a served page), and allows only the elements and
// attributes of the documented allow-list, and URLs whose scheme is http, https or mailto. It
// is the same check as the richtext package's own tests make, written against the documented
// list rather than the policy's code. Vectors reads the XSS vectors those tests use
// (services/comments/richtext/testdata/xss.txt).
package xsstest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// VectorsFile is the vector list, relative to the repository's root.
var VectorsFile = filepath.Join("services", "comments", "richtext", "testdata", "xss.txt")

// Allowed are the elements sanitised HTML may hold and their attributes (docs/comments.md,
// "What is kept"), written from the documentation, not from the policy's code. Tests read it;
// nothing may change it.
var Allowed = map[string][]string{
	"b": nil, "strong": nil, "i": nil, "em": nil, "u": nil, "s": nil, "del": nil, "ins": nil, "mark": nil,
	"sub": nil, "sup": nil, "code": nil, "br": nil,
	"span": {"data-user-id", "dir"},
	"p":    {"dir"}, "blockquote": {"dir"}, "pre": {"dir"}, "ul": {"dir"}, "ol": {"dir"}, "li": {"dir"},
	"a": {"href", "rel", "target"},
}

// urlAttributes are the attributes a browser reads a URL from, on some element or other.
var urlAttributes = []string{
	"href", "src", "action", "formaction", "data", "background", "poster", "srcset", "cite",
	"ping", "codebase", "longdesc", "lowsrc", "dynsrc", "manifest", "icon", "profile", "usemap",
	"classid", "archive", "xlink:href", "xmlns:xlink", "itemtype",
}

// ActiveContent returns what in out is not allowed, in words; none for inert HTML.
func ActiveContent(out string) []string {
	var problems []string
	ctx := &html.Node{Type: html.ElementNode, Data: "div", DataAtom: atom.Div}
	nodes, err := html.ParseFragment(strings.NewReader(out), ctx)
	if err != nil {
		return []string{"fragment does not parse: " + err.Error()}
	}
	for _, n := range nodes {
		problems = append(problems, checkTree("fragment", n, nil)...)
	}
	// Inside a served page a payload can reach the body's attributes or the head: the whole
	// document is checked, with only the wrapper exempt.
	doc, err := html.Parse(strings.NewReader(
		"<!DOCTYPE html><html><head></head><body><div id=comment>" + out + "</div></body></html>"))
	if err != nil {
		return append(problems, "page does not parse: "+err.Error())
	}
	return append(problems, checkTree("page", doc, isWrapper)...)
}

func isWrapper(n *html.Node) bool {
	switch n.Data {
	case "html", "head", "body":
		return len(n.Attr) == 0
	case "div":
		return len(n.Attr) == 1 && n.Attr[0] == html.Attribute{Key: "id", Val: "comment"}
	}
	return false
}

func checkTree(where string, root *html.Node, wrapper func(*html.Node) bool) []string {
	problems := checkNode(where, root, wrapper)
	for n := range root.Descendants() {
		problems = append(problems, checkNode(where, n, wrapper)...)
	}
	return problems
}

func checkNode(where string, n *html.Node, wrapper func(*html.Node) bool) []string {
	if n.Type != html.ElementNode || wrapper != nil && n.Namespace == "" && wrapper(n) {
		return nil
	}
	var problems []string
	name := n.Data
	if n.Namespace != "" {
		name = n.Namespace + ":" + n.Data
	}
	attrs, ok := Allowed[n.Data]
	if n.Namespace != "" || !ok {
		problems = append(problems, where+": element <"+name+">")
	}
	for _, a := range n.Attr {
		key := strings.ToLower(a.Key)
		if a.Namespace != "" {
			key = a.Namespace + ":" + key
		}
		switch {
		case strings.HasPrefix(key, "on"):
			problems = append(problems, where+": event attribute "+key+" on <"+name+">")
		case key == "style":
			problems = append(problems, where+": style attribute on <"+name+">")
		case !slices.Contains(attrs, key):
			problems = append(problems, where+": attribute "+key+" on <"+name+">")
		}
		if slices.Contains(urlAttributes, key) {
			if scheme := urlScheme(a.Val); scheme != "http" && scheme != "https" && scheme != "mailto" {
				problems = append(problems, where+": "+key+" with scheme "+strconv.Quote(scheme)+" on <"+name+">: "+strconv.Quote(a.Val))
			}
		}
	}
	return problems
}

// urlScheme returns the scheme a browser reads from an attribute's value (decoded once by the
// parser, and again here, to be strict): white space and control characters removed wherever
// they are, lower-cased; "" for a relative URL.
func urlScheme(v string) string {
	v = strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return -1
		}
		return unicode.ToLower(r)
	}, html.UnescapeString(v))
	scheme, _, ok := strings.Cut(v, ":")
	if !ok || scheme == "" || scheme[0] < 'a' || scheme[0] > 'z' ||
		strings.IndexFunc(scheme, func(r rune) bool {
			return (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '+' && r != '-' && r != '.'
		}) >= 0 {
		return ""
	}
	return scheme
}

// Vector is one XSS vector of the list: its line in the file and its HTML.
type Vector struct {
	Line int
	HTML string
}

// Vectors reads the vector list (its format is in its header: "#" comments, blank lines, and
// "go:" lines holding a Go string literal for vectors with control characters).
func Vectors() ([]Vector, error) {
	path, err := vectorsPath()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("xsstest: %w", err)
	}
	var vs []Vector
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if q, ok := strings.CutPrefix(line, "go:"); ok {
			if line, err = strconv.Unquote(q); err != nil {
				return nil, fmt.Errorf("xsstest: %s:%d: %w", path, n, err)
			}
		}
		vs = append(vs, Vector{Line: n, HTML: line})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("xsstest: %w", err)
	}
	return vs, nil
}

// vectorsPath finds the list beside this source file's repository, or under the working
// directory or one of its parents (a binary built with -trimpath).
func vectorsPath() (string, error) {
	var tried []string
	if _, file, _, ok := runtime.Caller(0); ok {
		p := filepath.Join(filepath.Dir(file), "..", "..", "..", VectorsFile)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		tried = append(tried, p)
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			p := filepath.Join(d, VectorsFile)
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
		tried = append(tried, filepath.Join(wd, VectorsFile)+" and the same under every parent")
	}
	return "", fmt.Errorf("xsstest: cannot find %s; tried %s", VectorsFile, strings.Join(tried, ", "))
}
