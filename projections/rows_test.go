package projections

import (
	"slices"
	"testing"
)

func TestRowCounts(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		n, max int
		want   []int
	}{{1, 256, []int{1}}, {3, 256, []int{2, 1}}, {256, 256, []int{256}}, {600, 256, []int{256, 256, 64, 16, 8}}, {0, 8, nil}} {
		if got := RowCounts(c.n, c.max); !slices.Equal(got, c.want) {
			t.Errorf("RowCounts(%d, %d) = %v, want %v", c.n, c.max, got, c.want)
		}
	}
}
