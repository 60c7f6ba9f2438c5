package domain_test

import (
	"testing"

	"github.com/casebook/casebook/domain"
)

func TestCutRunes(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{{"héllo", 2, "hé"}, {"日本語", 2, "日本"}, {"abc", 5, "abc"}, {"abc", 0, ""}, {"", 3, ""}} {
		if got := domain.CutRunes(c.in, c.n); got != c.want {
			t.Errorf("CutRunes(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
