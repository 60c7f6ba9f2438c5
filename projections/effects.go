package projections

import (
	"context"
	"sync"
)

// Effect is an intent to change something outside Casebook (a Slack message, a List row). Key is
// deterministic (tenant + inquiry + kind + canonical version): an effect is emitted once per key,
// however often its events are replayed.
type Effect struct {
	Key     string `json:"key"`
	Kind    string `json:"kind"`
	Tenant  string `json:"tenant_id"`
	Payload string `json:"payload"`
}

// effectSink records what a dry run would emit.
type effectSink struct {
	dryRun bool
	mu     sync.Mutex
	would  []Effect
}

func (s *effectSink) record(e Effect) {
	s.mu.Lock()
	s.would = append(s.would, e)
	s.mu.Unlock()
}

func (s *effectSink) recorded() []Effect {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Effect(nil), s.would...)
}

// Emit records an effect intent in the batch's transaction. It reports whether the effect is new;
// an effect whose key was already emitted (by the live generation, or an earlier delivery) is not
// emitted again. In a dry run nothing is written and new effects are only recorded.
func (b *Batch) Emit(ctx context.Context, projection string, e Effect) (bool, error) {
	if b.effects != nil && b.effects.dryRun {
		var n int
		if err := b.QueryRow(ctx, `SELECT count(*) FROM effect_intents WHERE key = ?`, e.Key).Scan(&n); err != nil {
			return false, err
		}
		if n == 0 {
			b.effects.record(e)
		}
		return n == 0, nil
	}
	res, err := b.q().ExecContext(ctx, b.DB.Rebind(`INSERT INTO effect_intents (key, projection, kind, tenant_id, payload, created_at)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING`), e.Key, projection, e.Kind, e.Tenant, e.Payload, b.Now.UnixNano())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}
