package service

import (
	"strings"
	"testing"
)

// IntFunc stores a whole number within its bounds and refuses anything else, naming them.
func TestIntFunc(t *testing.T) {
	for _, c := range []struct {
		min, max int
		in       string
		want     int
		refused  string
	}{
		{0, -1, "0", 0, ""},
		{0, -1, " 25000 ", 25000, ""},
		{0, -1, "-1", 0, "of 0 or more"},
		{1, -1, "0", 0, "of 1 or more"},
		{0, 1024, "1024", 1024, ""},
		{0, 1024, "1025", 0, "from 0 to 1024"},
		{0, 1024, "ten", 0, "from 0 to 1024"},
		{0, 1024, "", 0, "from 0 to 1024"},
	} {
		n := -7
		err := IntFunc(&n, c.min, c.max)(c.in)
		switch {
		case c.refused == "" && (err != nil || n != c.want):
			t.Errorf("%q in [%d, %d]: %d, %v; want %d", c.in, c.min, c.max, n, err, c.want)
		case c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused) || n != -7):
			t.Errorf("%q in [%d, %d]: %d, %v; want refused %q, n untouched", c.in, c.min, c.max, n, err, c.refused)
		}
	}
}
