package richtext

import (
	"bufio"
	"bytes"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// The checker of "no active content" (docs/comments.md, "Content safety"), independent of the
// policy's code: it parses sanitised HTML as a browser would, with golang.org/x/net/html's
// tree builder (HTML5 parsing, foreign content, the adoption agency), both ways a front end
// places a comment: as the innerHTML of a div, and inside a page's served HTML. Everything it
// finds must be an allowed element with allowed attributes, and every URL-bearing attribute
// an http, https or mailto URL once decoded and stripped as browsers strip it.

// checkedElements are the elements sanitised output may hold (the policy's list plus a).
var checkedElements = append(slices.Clone(allowedElements), "a")

// checkedAttributes are the attributes sanitised output may hold, by element.
var checkedAttributes = map[string][]string{
	"a":    {"href", "rel", "target"},
	"span": {"dir", "data-user-id"},
	"p":    {"dir"}, "blockquote": {"dir"}, "pre": {"dir"}, "ul": {"dir"}, "ol": {"dir"}, "li": {"dir"},
}

// urlAttributes are the attributes a browser reads a URL from, on some element or other.
var urlAttributes = []string{
	"href", "src", "action", "formaction", "data", "background", "poster", "srcset", "cite",
	"ping", "codebase", "longdesc", "lowsrc", "dynsrc", "manifest", "icon", "profile", "usemap",
	"classid", "archive", "xlink:href", "xmlns:xlink", "itemtype",
}

// activeContent returns what in out is not allowed, in words; none for inert output.
func activeContent(out string) []string {
	var problems []string
	// As innerHTML of a div: the fragment parsing algorithm with a div context.
	ctx := &html.Node{Type: html.ElementNode, Data: "div", DataAtom: atom.Div}
	nodes, err := html.ParseFragment(strings.NewReader(out), ctx)
	if err != nil {
		return []string{"fragment does not parse: " + err.Error()}
	}
	for _, n := range nodes {
		problems = append(problems, checkTree("fragment", n, nil)...)
	}
	// Inside a served page: a payload can reach the body's attributes (<body onload>) or the
	// head, so the whole document is checked, with only our wrapper exempt.
	doc, err := html.Parse(strings.NewReader(
		"<!DOCTYPE html><html><head></head><body><div id=comment>" + out + "</div></body></html>"))
	if err != nil {
		return append(problems, "page does not parse: "+err.Error())
	}
	return append(problems, checkTree("page", doc, isWrapper)...)
}

// isWrapper reports whether n is a node of the page around the comment.
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
	var problems []string
	for n := range root.Descendants() {
		problems = append(problems, checkNode(where, n, wrapper)...)
	}
	return append(problems, checkNode(where, root, wrapper)...)
}

func checkNode(where string, n *html.Node, wrapper func(*html.Node) bool) []string {
	if n.Type != html.ElementNode {
		return nil
	}
	if wrapper != nil && n.Namespace == "" && wrapper(n) {
		return nil
	}
	var problems []string
	name := n.Data
	if n.Namespace != "" {
		name = n.Namespace + ":" + n.Data
	}
	if n.Namespace != "" || !slices.Contains(checkedElements, n.Data) {
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
		case !slices.Contains(checkedAttributes[n.Data], key):
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

// urlScheme returns the scheme a browser reads from an attribute's value (already decoded
// once by the parser; decoded again here, to be strict): white space and control characters
// removed wherever they are (browsers drop tabs and line breaks inside URLs and trim the
// rest), lower-cased; "" for a relative URL.
func urlScheme(v string) string {
	v = html.UnescapeString(v)
	v = strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return -1
		}
		return unicode.ToLower(r)
	}, v)
	scheme, _, ok := strings.Cut(v, ":")
	if !ok || scheme == "" || !isSchemeStart(scheme[0]) ||
		strings.IndexFunc(scheme, func(r rune) bool { return !isSchemeChar(r) }) >= 0 {
		return ""
	}
	return scheme
}

func isSchemeStart(c byte) bool { return c >= 'a' && c <= 'z' }

func isSchemeChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.'
}

// xssVector is a line of testdata/xss.txt.
type xssVector struct {
	line int
	html string
}

// readVectors reads testdata/xss.txt (its format is in its header).
func readVectors(t testing.TB) []xssVector {
	t.Helper()
	b, err := os.ReadFile("testdata/xss.txt")
	if err != nil {
		t.Fatal(err)
	}
	var vs []xssVector
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if q, ok := strings.CutPrefix(line, "go:"); ok {
			if line, err = strconv.Unquote(q); err != nil {
				t.Fatalf("testdata/xss.txt:%d: %v", n, err)
			}
		}
		vs = append(vs, xssVector{line: n, html: line})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return vs
}
