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

// EmitAll records effect intents in the batch's transaction and reports, for each, whether it is
// new: an effect whose key was already emitted (by the live generation, an earlier delivery, or
// earlier in effects) is not emitted again. It writes every effect with one statement on Postgres
// (multi-row statements on SQLite, see ExecRows), whatever their number: the statement gives
// the batch a transaction id, which holds the log's visible end for every reader until the batch
// commits, so a subscriber should emit once, at the end of Apply, rather than effect by effect.
// In a dry run nothing is written and new effects are only recorded.
func (b *Batch) EmitAll(ctx context.Context, projection string, effects []Effect) ([]bool, error) {
	fresh := make([]bool, len(effects))
	first := make(map[string]int, len(effects)) // key → index of its first effect
	for i, e := range effects {
		if _, dup := first[e.Key]; !dup {
			first[e.Key] = i
		}
	}
	if b.effects != nil && b.effects.dryRun {
		for i, e := range effects {
			var n int
			if err := b.QueryRow(ctx, `SELECT count(*) FROM effect_intents WHERE key = ?`, e.Key).Scan(&n); err != nil {
				return nil, err
			}
			if fresh[i] = n == 0 && first[e.Key] == i; fresh[i] {
				b.effects.record(e)
			}
		}
		return fresh, nil
	}
	args := make([]any, 0, len(first)*len(intentTypes))
	now := b.Now.UnixNano()
	for i, e := range effects {
		if first[e.Key] == i {
			args = append(args, e.Key, projection, e.Kind, e.Tenant, e.Payload, now)
		}
	}
	err := b.rows(ctx, `INSERT INTO effect_intents (`+intentCols+`)`, ` ON CONFLICT (key) DO NOTHING RETURNING key`, intentTypes, args,
		func(ctx context.Context, q string, args ...any) error {
			rows, err := b.Query(ctx, q, args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var key string
				if err := rows.Scan(&key); err != nil {
					return err
				}
				if i, ok := first[key]; ok {
					fresh[i] = true
				}
			}
			return rows.Err()
		})
	if err != nil {
		return nil, err
	}
	return fresh, nil
}

// intentCols are the columns of effect_intents that EmitAll writes, in their order.
var intentCols, intentTypes = Columns("key text, projection text, kind text, tenant_id text, payload text, created_at bigint")
