package service

import (
	"net/http"
	"strings"
	"testing"
)

func TestEventPatterns(t *testing.T) {
	for _, c := range []struct {
		patterns []string
		typ      string
		want     bool
	}{
		{[]string{"document.deleted"}, "document.deleted", true},
		{[]string{"document.deleted"}, "document.migrated", false},
		{[]string{"comment.*"}, "comment.add", true},
		{[]string{"comment.*"}, "comment_annotation.add", false},
		{[]string{"comment.*"}, "comment", false},
		{[]string{"*"}, "anything.at_all", true},
		{[]string{"*"}, "document.deleted", false}, // lifecycle types are named exactly
		{[]string{"*"}, "notification.add", true},
		{[]string{"reaction.*", "organization.deleted"}, "organization.deleted", true},
		{nil, "comment.add", false},
	} {
		if got := ConsumesType(c.patterns, c.typ); got != c.want {
			t.Errorf("ConsumesType(%v, %q) = %v", c.patterns, c.typ, got)
		}
	}
	for _, c := range []struct {
		consumes  []string
		published string
		want      bool
	}{
		{[]string{"comment.*"}, "*", true},
		{[]string{"comment.*"}, "comment.add", true},
		{[]string{"comment.add"}, "comment.*", true},
		{[]string{"document.deleted"}, "comment.*", false},
		{[]string{"*"}, "users.removed", false},
		{[]string{"*"}, "notification.add", true},
		{nil, "*", false},
		{[]string{"document.deleted", "users.removed"}, "*", false}, // reserved types: exact names only
		{[]string{"document.deleted"}, "document.deleted", true},
		{[]string{"document.deleted", "comment.*"}, "*", true},
	} {
		if got := Overlap(c.consumes, c.published); got != c.want {
			t.Errorf("Overlap(%v, %q) = %v", c.consumes, c.published, got)
		}
	}
}

func TestCheckRoutes(t *testing.T) {
	h := http.NotFoundHandler()
	m := Module{Name: "crdt", Routes: []string{"/v2/crdt/sync/"}}
	for _, c := range []struct {
		name   string
		routes []Route
		want   string // "" for no error
	}{
		{"exactly the declared", []Route{{"/v2/crdt/sync/", h}}, ""},
		{"undeclared", []Route{{"/v2/crdt/sync/", h}, {"/v2/crdt/other/", h}}, `serves the route "/v2/crdt/other/", which its module does not declare`},
		{"missing", nil, `does not serve the route "/v2/crdt/sync/"`},
		{"twice", []Route{{"/v2/crdt/sync/", h}, {"/v2/crdt/sync/", h}}, "twice"},
		{"no handler", []Route{{"/v2/crdt/sync/", nil}}, "without a handler"},
	} {
		err := m.CheckRoutes(&Instance{Routes: c.routes})
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if err := (Module{Name: "plain"}).CheckRoutes(&Instance{}); err != nil {
		t.Errorf("a module without routes: %v", err)
	}
	for p, ok := range map[string]bool{"/v2/crdt/sync/": true, "/a/": true, "/": false, "v2/x/": false, "/v2/x": false, "GET /x/": false, "/a//b/": false, "/{x}/": false} {
		if err := CheckRoutePrefix(p); (err == nil) != ok {
			t.Errorf("CheckRoutePrefix(%q) = %v", p, err)
		}
	}
}
