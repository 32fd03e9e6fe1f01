// Package validate checks the request fields every service shares (ids, id lists, names, access
// types and roles) and words its refusals the same way everywhere.
package validate

import (
	"net/mail"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/collab/collab/internal/apierr"
)

// MaxIDLength bounds every id a caller chooses.
const MaxIDLength = 256

// ID checks a required id: present, at most MaxIDLength characters, valid UTF-8, no control
// characters, no leading or trailing space. The MongoDB stores rely on the absence of control
// characters to build compound keys.
func ID(field, v string) error {
	if v == "" {
		return apierr.InvalidArgument("%s is required.", field)
	}
	return idForm(field, v)
}

// OptionalID checks an id that may be empty.
func OptionalID(field, v string) error {
	if v == "" {
		return nil
	}
	return idForm(field, v)
}

func idForm(field, v string) error {
	if problem := idProblem(v); problem != "" {
		return apierr.InvalidArgument("%s %s", field, problem)
	}
	return nil
}

// idProblem says what is wrong with a non-empty id ("must be valid UTF-8."), or "" when
// nothing is. Lists name the element only once one is wrong: naming each ("userIds[3]") cost an
// allocation per id on every request.
func idProblem(v string) string {
	switch {
	case !utf8.ValidString(v):
		return "must be valid UTF-8."
	case utf8.RuneCountInString(v) > MaxIDLength:
		return idTooLong
	case strings.TrimSpace(v) != v:
		return "must not start or end with white space."
	case strings.IndexFunc(v, unicode.IsControl) >= 0:
		return "must not contain control characters."
	}
	return ""
}

var idTooLong = "must be at most " + strconv.Itoa(MaxIDLength) + " characters."

// IDs checks a list of ids and returns it without duplicates, in first-seen order. required
// refuses an empty list; max > 0 bounds its length (counted before duplicates are dropped).
func IDs(field string, vs []string, required bool, max int) ([]string, error) {
	if required && len(vs) == 0 {
		return nil, apierr.InvalidArgument("%s must contain at least one id.", field)
	}
	if max > 0 && len(vs) > max {
		return nil, apierr.InvalidArgument("%s must contain at most %d ids.", field, max)
	}
	out := make([]string, 0, len(vs))
	// Short lists are searched; long ones (the internal operations take thousands) keep a set.
	var seen map[string]struct{}
	if len(vs) > 64 {
		seen = make(map[string]struct{}, len(vs))
	}
	for i, v := range vs {
		if v == "" {
			return nil, apierr.InvalidArgument("%s[%d] must not be empty.", field, i)
		}
		if problem := idProblem(v); problem != "" {
			return nil, apierr.InvalidArgument("%s[%d] %s", field, i, problem)
		}
		if seen != nil {
			if _, dup := seen[v]; dup {
				continue
			}
			seen[v] = struct{}{}
		} else if slices.Contains(out, v) {
			continue
		}
		out = append(out, v)
	}
	return out, nil
}

// Access types and roles (docs/api.md, "Access").
const (
	AccessPublic              = "public"
	AccessOrganizationPrivate = "organizationPrivate"
	AccessRestricted          = "restricted"
	RoleEditor                = "editor"
	RoleViewer                = "viewer"
)

// AccessType checks a required access type.
func AccessType(field, v string) error {
	switch v {
	case AccessPublic, AccessOrganizationPrivate, AccessRestricted:
		return nil
	case "":
		return apierr.InvalidArgument("%s is required.", field)
	}
	return apierr.InvalidArgument("%s must be one of organizationPrivate, restricted, public.", field)
}

// AccessRole checks a role; empty is allowed when optional.
func AccessRole(field, v string, optional bool) error {
	switch v {
	case RoleEditor, RoleViewer:
		return nil
	case "":
		if optional {
			return nil
		}
		return apierr.InvalidArgument("%s is required.", field)
	}
	return apierr.InvalidArgument("%s must be one of viewer, editor.", field)
}

// MaxLength checks a free-text field's length in characters.
func MaxLength(field, v string, max int) error {
	if utf8.RuneCountInString(v) > max {
		return apierr.InvalidArgument("%s must be at most %d characters.", field, max)
	}
	return nil
}

// Name checks a human-readable name (of a workspace, owner, API key, organization, folder,
// document, user, group or location) that callers send already trimmed: valid UTF-8, at most max
// characters, and no control characters. Names travel into mail headers, logs and other
// people's screens, where a line break can inject a header or a forged log line and a bidi
// override can disguise what a name says; see NameControl for exactly what is refused.
func Name(field, v string, max int) error {
	switch {
	case !utf8.ValidString(v):
		return apierr.InvalidArgument("%s must be valid UTF-8.", field)
	case utf8.RuneCountInString(v) > max:
		return apierr.InvalidArgument("%s must be at most %d characters.", field, max)
	case strings.IndexFunc(v, NameControl) >= 0:
		return apierr.InvalidArgument("%s must not contain control characters.", field)
	}
	return nil
}

// NameControl reports whether r is refused in names: the C0 and C1 controls and DEL (tab and
// line breaks among them), the Unicode line and paragraph separators (U+2028, U+2029), and the
// bidirectional embedding, override and isolate controls (U+202A to U+202E, U+2066 to U+2069),
// which reorder how the rest of a name is displayed. Other format characters are allowed: the
// zero-width joiner and non-joiner, the left-to-right and right-to-left marks, variation
// selectors and the soft hyphen are needed to write emoji sequences and several scripts, and
// change no meaning.
func NameControl(r rune) bool {
	switch {
	case unicode.IsControl(r): // C0, DEL, C1
		return true
	case r == '\u2028', r == '\u2029':
		return true
	case r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069':
		return true
	}
	return false
}

// Longest email address and URL accepted anywhere.
const (
	MaxEmailLength = 254
	MaxURLLength   = 2048
)

// IsEmail reports whether v is a bare address (no display name, no surrounding text) whose
// domain has a dot, or is localhost for local runs.
func IsEmail(v string) bool {
	addr, err := mail.ParseAddress(v)
	if err != nil || addr.Address != v || len(v) > MaxEmailLength {
		return false
	}
	domain := v[strings.LastIndex(v, "@")+1:]
	return strings.Contains(domain, ".") || strings.EqualFold(domain, "localhost")
}

// IsHTTPURL reports whether v is an absolute http(s) URL with a host.
func IsHTTPURL(v string) bool {
	u, err := url.Parse(v)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && len(v) <= MaxURLLength
}

// MaxEventTypeLength bounds an event type.
const MaxEventTypeLength = 100

// EventType checks a required `<feature>.<action>` type: lowercase words of letters, digits and
// "_", each starting with a letter, joined by dots (at least one dot).
func EventType(field, v string) error {
	if v == "" {
		return apierr.InvalidArgument("%s is required.", field)
	}
	if len(v) > MaxEventTypeLength {
		return apierr.InvalidArgument("%s must be at most %d characters.", field, MaxEventTypeLength)
	}
	words := strings.Split(v, ".")
	ok := len(words) >= 2
	for _, w := range words {
		ok = ok && w != "" && w[0] >= 'a' && w[0] <= 'z' &&
			strings.IndexFunc(w, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') }) < 0
	}
	if !ok {
		return apierr.InvalidArgument("%s must have the form <feature>.<action>: lowercase letters, digits and _, joined by dots (e.g. comment.add).", field)
	}
	return nil
}

// MaxTokenIDLength bounds ids of the restricted form TokenID checks.
const MaxTokenIDLength = 128

// TokenID checks an optional id a caller may choose for a record we would otherwise name
// (an event, an activity): letters, digits, "_" and "-" only.
func TokenID(field, v string) error {
	if v == "" {
		return nil
	}
	if len(v) > MaxTokenIDLength {
		return apierr.InvalidArgument("%s must be at most %d characters.", field, MaxTokenIDLength)
	}
	if strings.IndexFunc(v, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
	}) >= 0 {
		return apierr.InvalidArgument("%s may contain only letters, digits, _ and -.", field)
	}
	return nil
}
