package kurrenttest_test

import (
	"errors"
	"io"
	"testing"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"

	"github.com/casebook/casebook/eventstore/kurrent/kurrenttest"
)

func client(t *testing.T) (*esdb.Client, *kurrenttest.Server) {
	t.Helper()
	conn, srv := kurrenttest.Start(t)
	cfg, err := esdb.ParseConnectionString(conn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = esdb.NoopLogging()
	c, err := esdb.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, srv
}

func events(ids ...uuid.UUID) []esdb.EventData {
	out := make([]esdb.EventData, len(ids))
	for i, id := range ids {
		out[i] = esdb.EventData{EventID: id, EventType: "T", ContentType: esdb.ContentTypeJson, Data: []byte(`{}`)}
	}
	return out
}

func code(err error) esdb.ErrorCode {
	var e *esdb.Error
	if errors.As(err, &e) {
		return e.Code()
	}
	return -1
}

func readStream(t *testing.T, c *esdb.Client, stream string) []*esdb.ResolvedEvent {
	t.Helper()
	rs, err := c.ReadStream(t.Context(), stream, esdb.ReadStreamOptions{}, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out []*esdb.ResolvedEvent
	for {
		ev, err := rs.Recv()
		if errors.Is(err, io.EOF) || code(err) == esdb.ErrorCodeResourceNotFound {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
}

// TestAppendIdempotency pins our reading of the server's commit check.
func TestAppendIdempotency(t *testing.T) {
	t.Parallel()
	c, _ := client(t)
	a0, a1, x := uuid.New(), uuid.New(), uuid.New()
	tests := []struct {
		name    string
		exp     esdb.ExpectedRevision
		ids     []uuid.UUID
		wantErr bool
		wantRev uint64
		wantLen int
	}{
		{"repeat with no stream", esdb.NoStream{}, []uuid.UUID{a0, a1}, false, 1, 2},
		{"repeat the tail at its revision", esdb.Revision(0), []uuid.UUID{a1}, false, 1, 2},
		{"repeat with any", esdb.Any{}, []uuid.UUID{a0, a1}, false, 1, 2},
		{"repeat part with any", esdb.Any{}, []uuid.UUID{a0}, false, 0, 2},
		{"partly repeated", esdb.NoStream{}, []uuid.UUID{a0, x}, true, 0, 2},
		{"partly repeated with any", esdb.Any{}, []uuid.UUID{a0, x}, true, 0, 2},
		{"longer than what was written", esdb.NoStream{}, []uuid.UUID{a0, a1, x}, true, 0, 2},
		{"other id behind the stream", esdb.Revision(0), []uuid.UUID{x}, true, 0, 2},
		{"ahead of the stream", esdb.Revision(5), []uuid.UUID{x}, true, 0, 2},
		{"reused id at the stream's end", esdb.Revision(1), []uuid.UUID{a0}, false, 2, 3},
		{"stream exists", esdb.StreamExists{}, []uuid.UUID{x}, false, 2, 3},
	}
	for i, tt := range tests {
		stream := "s-" + string(rune('a'+i))
		if _, err := c.AppendToStream(t.Context(), stream, esdb.AppendToStreamOptions{ExpectedRevision: esdb.NoStream{}}, events(a0, a1)...); err != nil {
			t.Fatal(err)
		}
		res, err := c.AppendToStream(t.Context(), stream, esdb.AppendToStreamOptions{ExpectedRevision: tt.exp}, events(tt.ids...)...)
		switch {
		case tt.wantErr && code(err) != esdb.ErrorCodeWrongExpectedVersion:
			t.Errorf("%s: err = %v, want wrong expected version", tt.name, err)
		case !tt.wantErr && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case !tt.wantErr && res.NextExpectedVersion != tt.wantRev:
			t.Errorf("%s: revision %d, want %d", tt.name, res.NextExpectedVersion, tt.wantRev)
		}
		if n := len(readStream(t, c, stream)); n != tt.wantLen {
			t.Errorf("%s: stream has %d events, want %d", tt.name, n, tt.wantLen)
		}
	}
	// Ids are not unique across the log.
	if _, err := c.AppendToStream(t.Context(), "other", esdb.AppendToStreamOptions{ExpectedRevision: esdb.NoStream{}}, events(a0)...); err != nil {
		t.Errorf("id of another stream: %v", err)
	}
	if _, err := c.AppendToStream(t.Context(), "missing", esdb.AppendToStreamOptions{ExpectedRevision: esdb.StreamExists{}}, events(x)...); code(err) != esdb.ErrorCodeWrongExpectedVersion {
		t.Errorf("stream exists on a missing stream: %v", err)
	}
}

func TestReadPositions(t *testing.T) {
	t.Parallel()
	c, _ := client(t)
	if _, err := c.AppendToStream(t.Context(), "s", esdb.AppendToStreamOptions{}, events(uuid.New(), uuid.New(), uuid.New())...); err != nil {
		t.Fatal(err)
	}
	evs := readStream(t, c, "s")
	if len(evs) != 3 || evs[0].Event.Position.Commit >= evs[1].Event.Position.Commit {
		t.Fatalf("stream read: %d events", len(evs))
	}
	mid := evs[1].Event.Position
	readAll := func(dir esdb.Direction) []esdb.Position {
		rs, err := c.ReadAll(t.Context(), esdb.ReadAllOptions{From: mid, Direction: dir}, 10)
		if err != nil {
			t.Fatal(err)
		}
		defer rs.Close()
		var out []esdb.Position
		for {
			ev, err := rs.Recv()
			if errors.Is(err, io.EOF) {
				return out
			}
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, ev.Event.Position)
		}
	}
	if got := readAll(esdb.Forwards); len(got) != 2 || got[0] != mid {
		t.Errorf("forward read from %v = %v, want it and the next", mid, got)
	}
	if got := readAll(esdb.Backwards); len(got) != 1 || got[0] != evs[0].Event.Position {
		t.Errorf("backward read from %v = %v, want only the one before", mid, got)
	}
	sub, err := c.SubscribeToAll(t.Context(), esdb.SubscribeToAllOptions{From: mid})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if ev := sub.Recv(); ev.EventAppeared == nil || ev.EventAppeared.Event.Position != evs[2].Event.Position {
		t.Errorf("subscription from %v starts with %+v, want the event after it", mid, ev)
	}
	if ev := sub.Recv(); ev.CaughtUp == nil {
		t.Errorf("after catching up: %+v, want CaughtUp", ev)
	}
	ssub, err := c.SubscribeToStream(t.Context(), "s", esdb.SubscribeToStreamOptions{From: esdb.Revision(0)})
	if err != nil {
		t.Fatal(err)
	}
	defer ssub.Close()
	if ev := ssub.Recv(); ev.EventAppeared == nil || ev.EventAppeared.Event.EventNumber != 1 {
		t.Errorf("stream subscription from revision 0 starts with %+v, want revision 1", ev)
	}
	rs, err := c.ReadStream(t.Context(), "missing", esdb.ReadStreamOptions{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	if _, err := rs.Recv(); code(err) != esdb.ErrorCodeResourceNotFound {
		t.Errorf("read of a missing stream: %v", err)
	}
}

func TestFilteredSubscription(t *testing.T) {
	t.Parallel()
	c, _ := client(t)
	for _, s := range []string{"in-1", "out-1", "out-2", "out-3", "in-2"} {
		if _, err := c.AppendToStream(t.Context(), s, esdb.AppendToStreamOptions{}, events(uuid.New())...); err != nil {
			t.Fatal(err)
		}
	}
	sub, err := c.SubscribeToAll(t.Context(), esdb.SubscribeToAllOptions{
		From:            esdb.Start{},
		Filter:          &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: []string{"in-"}},
		MaxSearchWindow: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var streams []string
	checkpoints := 0
	for {
		ev := sub.Recv()
		switch {
		case ev.EventAppeared != nil:
			streams = append(streams, ev.EventAppeared.Event.StreamID)
		case ev.CheckPointReached != nil:
			checkpoints++
		case ev.SubscriptionDropped != nil:
			t.Fatal(ev.SubscriptionDropped.Error)
		}
		if ev.CaughtUp != nil {
			break
		}
	}
	if len(streams) != 2 || streams[0] != "in-1" || streams[1] != "in-2" {
		t.Errorf("filtered subscription delivered %v", streams)
	}
	if checkpoints != 2 { // one per two events considered
		t.Errorf("%d checkpoints, want 2", checkpoints)
	}
}

func TestFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fault   kurrenttest.Fault
		code    esdb.ErrorCode
		applied bool
	}{
		{kurrenttest.Unavailable, esdb.ErrorUnavailable, false},
		{kurrenttest.NotLeader, esdb.ErrorCodeNotLeader, false},
		{kurrenttest.DeadlineExceeded, esdb.ErrorCodeDeadlineExceeded, false},
		{kurrenttest.AppliedDeadlineExceeded, esdb.ErrorCodeDeadlineExceeded, true},
	}
	for _, tt := range tests {
		t.Run(tt.fault.String(), func(t *testing.T) {
			t.Parallel()
			c, srv := client(t)
			srv.InjectFault(kurrenttest.OpAppend, tt.fault)
			_, err := c.AppendToStream(t.Context(), "s", esdb.AppendToStreamOptions{}, events(uuid.New())...)
			if code(err) != tt.code {
				t.Fatalf("err = %v, want code %d", err, tt.code)
			}
			if applied := srv.Len() == 1; applied != tt.applied {
				t.Fatalf("applied = %v, want %v", applied, tt.applied)
			}
			// The fault is used up, and after not-leader the client follows the named leader.
			if _, err := c.AppendToStream(t.Context(), "s", esdb.AppendToStreamOptions{}, events(uuid.New())...); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("dropped subscription", func(t *testing.T) {
		t.Parallel()
		c, srv := client(t)
		if _, err := c.AppendToStream(t.Context(), "s", esdb.AppendToStreamOptions{}, events(uuid.New(), uuid.New())...); err != nil {
			t.Fatal(err)
		}
		srv.DropSubscriptionAfter(1)
		sub, err := c.SubscribeToAll(t.Context(), esdb.SubscribeToAllOptions{From: esdb.Start{}})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		if ev := sub.Recv(); ev.EventAppeared == nil {
			t.Fatalf("first message %+v, want an event", ev)
		}
		if ev := sub.Recv(); ev.SubscriptionDropped == nil {
			t.Fatalf("second message %+v, want a drop", ev)
		}
	})
}
