package querymodel

import (
	"context"

	"github.com/casebook/casebook/projections"
)

// LoadKeys looks up the stored rows of (tenant, id) keys as a batch does, and returns how many
// it found.
func LoadKeys(ctx context.Context, b *projections.Batch, keys [][2]string) (int, error) {
	want := make(map[key]bool, len(keys))
	for _, k := range keys {
		want[key{k[0], k[1]}] = true
	}
	rows, err := load(ctx, b, b.Gen.Table("qm_inquiries"), want, nil)
	return len(rows), err
}
