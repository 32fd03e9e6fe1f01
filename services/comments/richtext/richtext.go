// Package richtext checks a comment's text and sanitises its HTML on write, so that what the
// comments service stores and serves to product front ends, which render commentHtml in
// browsers, never holds active content: an allow-list of inline formatting, simple blocks and
// http(s)/mailto links, built on bluemonday; everything else is removed
// (docs/comments.md, "Content safety").
package richtext

import (
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/microcosm-cc/bluemonday"
)

// MaxHTMLBytes bounds commentHtml as sent, before sanitising: 64 KiB holds a long formatted
// comment many times over, and with MaxHTMLTags and MaxHTMLLinks bounds the sanitiser's work
// per comment to a few milliseconds (docs/comments.md, "Content safety").
const MaxHTMLBytes = 64 << 10

// MaxHTMLTags bounds the tags of a commentHtml, counted as its '<' characters (every tag,
// comment and doctype starts with one; a front end sends a text's own '<' as &lt;, so a stray
// one costs a tag): the sanitiser's work and memory grow with the tags, and a comment needs
// far fewer (a 2,000-line list is 4,000 tags).
const MaxHTMLTags = 4096

// MaxHTMLLinks bounds the links (<a> tags) of a commentHtml: each costs the sanitiser about
// 3 µs and 2 KB (two URL parses, rel and target), so 64 KiB of short links took 12 ms and 7.7
// MB before this bound (docs/comments.md, "Content safety").
const MaxHTMLLinks = 256

// MaxTextBytes bounds commentText: 16 KiB is several pages of plain text.
const MaxTextBytes = 16 << 10

// MaxStoredHTMLFactor bounds the sanitised HTML against its input: escaping turns one byte
// into at most five (a quote becomes &#34;) and a link gains rel and target (17 bytes become
// 69 at most), so what is stored is at most this many times the input, and so at most this
// many times MaxHTMLBytes (FuzzSanitize holds the sanitiser to it).
const MaxStoredHTMLFactor = 5

// Error is a refusal of a caller's text or HTML. Its message is the predicate the API puts
// after the field's name ("must be valid UTF-8."), so the caller words the INVALID_ARGUMENT
// itself: apierr.InvalidArgument("%s %v", "commentHtml", err).
type Error struct{ problem string }

func (e *Error) Error() string { return e.problem }

var (
	errUTF8        = &Error{"must be valid UTF-8."}
	errControl     = &Error{"must not contain control characters other than tab, line feed and carriage return."}
	errTextTooLong = &Error{"must be at most " + strconv.Itoa(MaxTextBytes) + " bytes."}
	errHTMLTooLong = &Error{"must be at most " + strconv.Itoa(MaxHTMLBytes) + " bytes."}
	errHTMLTags    = &Error{"must have at most " + strconv.Itoa(MaxHTMLTags) + " tags."}
	errHTMLLinks   = &Error{"must have at most " + strconv.Itoa(MaxHTMLLinks) + " links."}
)

// CheckText checks a commentText: valid UTF-8, at most MaxTextBytes bytes, and no control
// characters but tab, line feed and carriage return (no NUL, DEL or C1 controls). Format
// characters (bidi marks and isolates, zero-width joiners) are allowed: comments are written
// in every script. The empty text is valid; whether a comment needs one is the caller's rule.
func CheckText(s string) error {
	if len(s) > MaxTextBytes {
		return errTextTooLong
	}
	return checkChars(s)
}

// checkChars is the character rule shared by text and HTML.
func checkChars(s string) error {
	if !utf8.ValidString(s) {
		return errUTF8
	}
	if strings.IndexFunc(s, refusedControl) >= 0 {
		return errControl
	}
	return nil
}

// refusedControl reports whether r is a control character a comment may not hold: the C0
// controls but tab, line feed and carriage return (line breaks from any platform), DEL and
// the C1 controls.
func refusedControl(r rune) bool {
	switch {
	case r == '\t', r == '\n', r == '\r':
		return false
	case r < 0x20, r == 0x7f:
		return true
	case r >= 0x80 && r <= 0x9f:
		return true
	}
	return false
}

// Sanitize checks a commentHtml (valid UTF-8, at most MaxHTMLBytes bytes, the character rule
// of CheckText, at most MaxHTMLTags tags and MaxHTMLLinks links) and returns it sanitised:
// only the allowed elements and attributes are kept, text is escaped, links keep an http,
// https or mailto href and get rel="nofollow noreferrer" (http and https links also
// target="_blank" and rel noopener). A refusal is an *Error. Sanitize is safe for concurrent
// use.
func Sanitize(html string) (string, error) {
	if len(html) > MaxHTMLBytes {
		return "", errHTMLTooLong
	}
	if err := checkChars(html); err != nil {
		return "", err
	}
	if err := checkTags(html); err != nil {
		return "", err
	}
	return sanitize(html), nil
}

// checkTags refuses HTML with more than MaxHTMLTags tags or MaxHTMLLinks links.
func checkTags(html string) error {
	tags, links := countTags(html)
	if tags > MaxHTMLTags {
		return errHTMLTags
	}
	if links > MaxHTMLLinks {
		return errHTMLLinks
	}
	return nil
}

// countTags counts tags and links before parsing, without allocating: a tag is a '<', a link
// a '<' followed by 'a' or 'A' and then a space, '/', '>' or the end (what the tokenizer reads
// as an <a> tag, and a little more: over-counting only refuses).
func countTags(html string) (tags, links int) {
	for i := strings.IndexByte(html, '<'); i >= 0; {
		tags++
		if rest := html[i+1:]; len(rest) > 0 && rest[0]|0x20 == 'a' && (len(rest) == 1 || endsTagName(rest[1])) {
			links++
		}
		next := strings.IndexByte(html[i+1:], '<')
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return tags, links
}

// endsTagName reports whether c ends a tag's name for the HTML tokenizer.
func endsTagName(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '\f', '/', '>':
		return true
	}
	return false
}

// sanitize runs the policy. Character references can still spell control characters (&#1;,
// &#x81;) that the tokenizer decodes and the output would carry raw; they are dropped, so that
// the output passes the rule its input did and sanitising it again changes nothing. They can
// only be in text or in a link's query, which net/url keeps as written (it refuses ASCII
// controls anywhere and escapes the rest of a URL): the other kept attributes are patterns
// without them and the rel and target the policy writes.
func sanitize(html string) string {
	out := policy.Sanitize(html)
	if strings.IndexFunc(out, refusedControl) >= 0 {
		out = strings.Map(func(r rune) rune {
			if refusedControl(r) {
				return -1
			}
			return r
		}, out)
	}
	return out
}

// policy is made once: a bluemonday policy is safe for concurrent use once built (its
// Sanitize only reads the policy; bluemonday's README says so too), never changed after.
var policy = newPolicy()

// Allowed elements: inline formatting and simple blocks, what a comment box's toolbar makes
// (docs/comments.md, "Content safety"). No headings, tables, images, media, forms, frames,
// svg or math: none belongs in a comment, and each is a way to load remote content, draw over
// the page or reach foreign-content parsing.
var allowedElements = []string{
	"b", "strong", "i", "em", "u", "s", "del", "ins", "mark", "sub", "sup", "code", "br", "span",
	"p", "blockquote", "pre", "ul", "ol", "li",
}

var (
	// userIDPattern is what data-user-id may hold on a mention's span: an id's usual characters.
	userIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.@+:-]{1,256}$`)
	// dirPattern is the text direction of a block or span, for right-to-left comments.
	dirPattern = regexp.MustCompile(`^(?:ltr|rtl|auto)$`)
)

func newPolicy() *bluemonday.Policy {
	p := bluemonday.NewPolicy()
	p.AllowElements(allowedElements...)
	p.AllowAttrs("dir").Matching(dirPattern).OnElements("p", "span", "blockquote", "pre", "ul", "ol", "li")
	// A mention: <span data-user-id="u1">@Ann</span>, the only data- attribute kept.
	p.AllowAttrs("data-user-id").Matching(userIDPattern).OnElements("span")
	// Links: an absolute http or https URL with a host, or mailto; no relative URL (a comment
	// is shown by several front ends, each its own base).
	p.AllowAttrs("href").OnElements("a")
	p.RequireParseableURLs(true)
	p.AllowRelativeURLs(false)
	p.AllowURLSchemeWithCustomPolicy("http", hasHost)
	p.AllowURLSchemeWithCustomPolicy("https", hasHost)
	p.AllowURLSchemes("mailto")
	p.RequireNoFollowOnLinks(true)
	p.RequireNoReferrerOnLinks(true)
	p.AddTargetBlankToFullyQualifiedLinks(true) // and rel noopener with it
	return p
}

func hasHost(u *url.URL) bool { return u.Host != "" }
