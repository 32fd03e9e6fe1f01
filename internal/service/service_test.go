package service

import "testing"

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
