// Package kurrenttest runs an in-process stand-in for a single KurrentDB node: a gRPC server on a
// loopback listener implementing the services that github.com/EventStore/EventStore-Client-Go/v4
// calls (Streams.Append, Streams.Read with reads and catch-up subscriptions, ServerFeatures and
// Gossip), with streams held in memory and faults that tests inject.
//
// It encodes our reading of the server's behaviour, not the server itself:
//   - Append checks the expected revision and is idempotent by event id the way the server's
//     commit check is: with an exact revision or "no stream" that is behind the stream, the
//     batch is a success without writing again when the stream already holds the same ids at
//     the following revisions, and a wrong expected version otherwise; with "any" or "stream
//     exists", a batch whose ids are all already in that stream is a success without writing.
//     The server remembers ids for "any" in a bounded cache; this fake remembers every id.
//     Event ids are not unique across the log: the same id on another stream is written.
//   - Every event has its own log position, used as both its commit and prepare position; a
//     forward read of $all from a position includes the event at it, a backward read excludes
//     it, and a subscription from a position delivers only what follows it. An append reports
//     the position of its last event.
//   - A read of a missing stream answers StreamNotFound; a subscription answers a confirmation,
//     catches up, sends CaughtUp once, then follows live appends. A filtered $all subscription
//     sends a checkpoint every window×multiplier events it considered.
//   - Faults are gRPC statuses as the server sends them: Unavailable, DeadlineExceeded, and
//     not-leader as NotFound with the "exception: not-leader" and leader-endpoint trailers.
//
// Not implemented: BatchAppend, Delete, Tombstone, stream metadata and ACLs, links and
// projections, persistent subscriptions, authentication and TLS.
package kurrenttest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/gossip"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/serverfeatures"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/shared"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Version is the server version the fake reports through ServerFeatures.
const Version = "24.10.0"

// MaxAppendSize is the largest batch (sum of data and metadata) an append accepts, as the
// server's default.
const MaxAppendSize = 1 << 20

// firstPosition is where the first event lands: a real log starts with system records, so no
// event sits at position 0.
const firstPosition = 1024

// Fault is a failure injected into one call.
type Fault int

const (
	// Unavailable fails the call with codes.Unavailable before doing anything.
	Unavailable Fault = iota + 1
	// NotLeader fails the call as a follower would, naming this server as the leader.
	NotLeader
	// DeadlineExceeded fails the call with codes.DeadlineExceeded before doing anything.
	DeadlineExceeded
	// AppliedDeadlineExceeded applies an append, then answers DeadlineExceeded.
	AppliedDeadlineExceeded
	// AppliedResponseLost applies an append, then answers nothing until the client gives up.
	AppliedResponseLost
)

func (f Fault) String() string {
	switch f {
	case Unavailable:
		return "unavailable"
	case NotLeader:
		return "not-leader"
	case DeadlineExceeded:
		return "deadline-exceeded"
	case AppliedDeadlineExceeded:
		return "applied-deadline-exceeded"
	case AppliedResponseLost:
		return "applied-response-lost"
	}
	return "fault(" + strconv.Itoa(int(f)) + ")"
}

// Op names the calls faults apply to.
type Op int

const (
	// OpAppend is Streams.Append.
	OpAppend Op = iota
	// OpRead is a Streams.Read that is not a subscription.
	OpRead
	// OpSubscribe is a Streams.Read that is a subscription.
	OpSubscribe
	numOps
)

type record struct {
	id       uuid.UUID
	stream   string
	revision uint64
	pos      uint64
	meta     map[string]string
	custom   []byte
	data     []byte
}

// Server is the fake node. Its methods are safe for concurrent use.
type Server struct {
	addr string
	host string
	port int

	mu       sync.Mutex
	log      []*record
	streams  map[string][]*record
	ids      map[uuid.UUID]*record
	next     uint64
	changed  chan struct{} // closed and replaced on every append
	faults   [numOps][]Fault
	calls    [numOps]int
	drops    []int // pending "drop after n events" for the next subscriptions
	subs     map[*subscription]struct{}
	started  int
	grpc     *grpc.Server
	stopped  chan struct{}
	serveErr chan error
}

type subscription struct {
	drop chan struct{}
	once sync.Once
}

func (s *subscription) dropNow() { s.once.Do(func() { close(s.drop) }) }

// Listen starts a server on addr ("127.0.0.1:0" picks a free port). Close stops it.
func Listen(addr string) (*Server, error) {
	s := &Server{
		streams: map[string][]*record{},
		ids:     map[uuid.UUID]*record{},
		next:    firstPosition,
		changed: make(chan struct{}),
		subs:    map[*subscription]struct{}{},
	}
	if err := s.serve(addr); err != nil {
		return nil, err
	}
	return s, nil
}

// Start starts a server on a free loopback port, stops it when the test ends, and returns the
// connection string for it.
func Start(t testing.TB) (string, *Server) {
	t.Helper()
	s, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatalf("kurrenttest: %v", err)
	}
	t.Cleanup(s.Close)
	return s.ConnString(), s
}

func (s *Server) serve(addr string) error {
	lis, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", addr)
	if err != nil {
		return fmt.Errorf("kurrenttest: listen: %w", err)
	}
	tcp, ok := lis.Addr().(*net.TCPAddr)
	if !ok {
		_ = lis.Close()
		return fmt.Errorf("kurrenttest: listener address %v is not TCP", lis.Addr())
	}
	g := grpc.NewServer()
	streams.RegisterStreamsServer(g, streamsService{s: s})
	serverfeatures.RegisterServerFeaturesServer(g, featuresService{})
	gossip.RegisterGossipServer(g, gossipService{s: s})
	s.mu.Lock()
	s.addr, s.host, s.port = lis.Addr().String(), tcp.IP.String(), tcp.Port
	s.grpc, s.stopped, s.serveErr = g, make(chan struct{}), make(chan error, 1)
	serveErr := s.serveErr
	s.mu.Unlock()
	go func() { serveErr <- g.Serve(lis) }()
	return nil
}

// Addr is the host:port the server listens on.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// ConnString is an insecure single-node connection string for the server.
func (s *Server) ConnString() string { return "esdb://" + s.Addr() + "?tls=false" }

// Stop stops serving, dropping every connection and subscription, but keeps the data; Restart
// serves it again on the same address.
func (s *Server) Stop() {
	s.mu.Lock()
	g, stopped, serveErr := s.grpc, s.stopped, s.serveErr
	s.grpc = nil
	s.mu.Unlock()
	if g == nil {
		return
	}
	close(stopped)
	g.Stop()
	// Wait for Serve to return; after Stop its error carries no information.
	if err := <-serveErr; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return
	}
}

// Restart serves the same data again on the address the server had.
func (s *Server) Restart() error {
	s.mu.Lock()
	running := s.grpc != nil
	addr := s.addr
	s.mu.Unlock()
	if running {
		return errors.New("kurrenttest: server is running")
	}
	return s.serve(addr)
}

// Close stops the server for good.
func (s *Server) Close() { s.Stop() }

// InjectFault makes the next call of kind op fail with f. Faults queue up per op; each one is used
// by one call. Applied* faults only apply to OpAppend.
func (s *Server) InjectFault(op Op, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[op] = append(s.faults[op], f)
}

// DropSubscriptionAfter makes the next subscription started end with Unavailable after it has sent
// n events.
func (s *Server) DropSubscriptionAfter(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drops = append(s.drops, n)
}

// DropSubscriptions ends every active subscription now with Unavailable.
func (s *Server) DropSubscriptions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sub := range s.subs {
		sub.dropNow()
	}
}

// Calls reports how many calls of kind op the server received, faulted ones included.
func (s *Server) Calls(op Op) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

// Len is the number of events in the log.
func (s *Server) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.log)
}

// call counts a call of kind op and takes its fault, if any.
func (s *Server) call(op Op) Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[op]++
	if len(s.faults[op]) == 0 {
		return 0
	}
	f := s.faults[op][0]
	s.faults[op] = s.faults[op][1:]
	return f
}

// failBefore turns a fault that fires before any work into the status the server would send.
func (s *Server) failBefore(ctx context.Context, f Fault) error {
	switch f {
	case Unavailable:
		return status.Error(codes.Unavailable, "Server Is Not Ready")
	case DeadlineExceeded:
		return status.Error(codes.DeadlineExceeded, "Operation timed out")
	case NotLeader:
		s.mu.Lock()
		host, port := s.host, s.port
		s.mu.Unlock()
		_ = grpc.SetTrailer(ctx, metadata.Pairs(
			"exception", "not-leader",
			"leader-endpoint-host", host,
			"leader-endpoint-port", strconv.Itoa(port),
		))
		return status.Error(codes.NotFound, "Leader info available")
	}
	return nil
}

type featuresService struct {
	serverfeatures.UnimplementedServerFeaturesServer
}

func (featuresService) GetSupportedMethods(context.Context, *shared.Empty) (*serverfeatures.SupportedMethods, error) {
	const svc = "event_store.client.streams.streams"
	return &serverfeatures.SupportedMethods{
		EventStoreServerVersion: Version,
		Methods: []*serverfeatures.SupportedMethod{
			{ServiceName: svc, MethodName: "append"},
			{ServiceName: svc, MethodName: "read"},
		},
	}, nil
}

type gossipService struct {
	gossip.UnimplementedGossipServer
	s *Server
}

// Read reports a one-node cluster whose leader is this server.
func (g gossipService) Read(context.Context, *shared.Empty) (*gossip.ClusterInfo, error) {
	g.s.mu.Lock()
	host, port := g.s.host, g.s.port
	g.s.mu.Unlock()
	return &gossip.ClusterInfo{Members: []*gossip.MemberInfo{{
		InstanceId:   structuredUUID(uuid.NewSHA1(uuid.NameSpaceURL, []byte(host+":"+strconv.Itoa(port)))),
		TimeStamp:    time.Now().UnixNano() / 100,
		State:        gossip.MemberInfo_Leader,
		IsAlive:      true,
		HttpEndPoint: &gossip.EndPoint{Address: host, Port: uint32(port)},
	}}}, nil
}

type streamsService struct {
	streams.UnimplementedStreamsServer
	s *Server
}

// Append reads the whole request before answering, as the server does.
func (a streamsService) Append(stream streams.Streams_AppendServer) error {
	s := a.s
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	opts := first.GetOptions()
	if opts == nil {
		return status.Error(codes.InvalidArgument, "first append message must carry options")
	}
	var msgs []*streams.AppendReq_ProposedMessage
	size := 0
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		pm := req.GetProposedMessage()
		if pm == nil {
			return status.Error(codes.InvalidArgument, "expected a proposed message")
		}
		size += len(pm.Data) + len(pm.CustomMetadata)
		msgs = append(msgs, pm)
	}
	fault := s.call(OpAppend)
	if err := s.failBefore(stream.Context(), fault); err != nil {
		return err
	}
	if size > MaxAppendSize {
		stream.SetTrailer(metadata.Pairs("exception", "maximum-append-size-exceeded", "maximum-append-size", strconv.Itoa(MaxAppendSize)))
		return status.Errorf(codes.InvalidArgument, "Maximum Append Size of %d Exceeded.", MaxAppendSize)
	}
	ids := make([]uuid.UUID, len(msgs))
	for i, pm := range msgs {
		id, err := fromProtoUUID(pm.Id)
		if err != nil {
			return status.Errorf(codes.InvalidArgument, "event id: %v", err)
		}
		ids[i] = id
	}
	resp := s.append(string(opts.GetStreamIdentifier().GetStreamName()), opts, ids, msgs)
	switch fault {
	case AppliedDeadlineExceeded:
		return status.Error(codes.DeadlineExceeded, "Operation timed out")
	case AppliedResponseLost:
		s.mu.Lock()
		stopped := s.stopped
		s.mu.Unlock()
		select {
		case <-stream.Context().Done():
		case <-stopped:
		}
		return status.FromContextError(stream.Context().Err()).Err()
	}
	return stream.SendAndClose(resp)
}

// expected is an append's condition: rev ≥ 0 is an exact revision, -1 no stream, -2 any, -4
// stream exists (the server's ExpectedVersion constants).
func expected(opts *streams.AppendReq_Options) int64 {
	switch opts.GetExpectedStreamRevision().(type) {
	case *streams.AppendReq_Options_Revision:
		return int64(opts.GetRevision())
	case *streams.AppendReq_Options_NoStream:
		return -1
	case *streams.AppendReq_Options_StreamExists:
		return -4
	}
	return -2
}

func (s *Server) append(name string, opts *streams.AppendReq_Options, ids []uuid.UUID, msgs []*streams.AppendReq_ProposedMessage) *streams.AppendResp {
	s.mu.Lock()
	defer s.mu.Unlock()
	exp := expected(opts)
	cur := int64(len(s.streams[name])) - 1
	switch first, last, ok := s.checkCommit(name, exp, cur, ids); {
	case !ok:
		return wrongExpectedVersion(exp, cur)
	case first != nil:
		return success(last.revision, last.pos)
	}
	if len(msgs) == 0 {
		if cur < 0 {
			return &streams.AppendResp{Result: &streams.AppendResp_Success_{Success: &streams.AppendResp_Success{
				CurrentRevisionOption: &streams.AppendResp_Success_NoStream{NoStream: &shared.Empty{}},
				PositionOption:        &streams.AppendResp_Success_NoPosition{NoPosition: &shared.Empty{}},
			}}}
		}
		last := s.streams[name][cur]
		return success(last.revision, last.pos)
	}
	created := strconv.FormatInt(time.Now().UnixNano()/100, 10)
	var last *record
	for i, pm := range msgs {
		r := &record{
			id:       ids[i],
			stream:   name,
			revision: uint64(cur + 1 + int64(i)),
			pos:      s.next,
			meta: map[string]string{
				"type":         pm.Metadata["type"],
				"content-type": pm.Metadata["content-type"],
				"created":      created,
			},
			custom: pm.CustomMetadata,
			data:   pm.Data,
		}
		// Positions grow by the record's size, as offsets in a log file do.
		s.next += uint64(64 + len(name) + len(pm.Data) + len(pm.CustomMetadata) + len(pm.Metadata["type"]))
		s.log = append(s.log, r)
		s.streams[name] = append(s.streams[name], r)
		s.ids[r.id] = r
		last = r
	}
	close(s.changed)
	s.changed = make(chan struct{})
	return success(last.revision, last.pos)
}

// checkCommit decides an append: ok false is a wrong expected version; first non-nil means the
// batch is already written (idempotent success) from first to last; otherwise write it.
func (s *Server) checkCommit(name string, exp, cur int64, ids []uuid.UUID) (first, last *record, ok bool) {
	if exp == -4 && cur < 0 {
		return nil, nil, false
	}
	if exp == -2 || exp == -4 {
		for i, id := range ids {
			r, found := s.ids[id]
			if !found || r.stream != name {
				// First id unknown: a new write. A later one unknown: partly written, refused.
				return nil, nil, i == 0
			}
			if i == 0 {
				first = r
			}
			last = r
		}
		return first, last, true
	}
	if exp < cur {
		evs := s.streams[name]
		for i, id := range ids {
			n := exp + 1 + int64(i)
			if n > cur || evs[n].id != id {
				return nil, nil, false
			}
			if i == 0 {
				first = evs[n]
			}
			last = evs[n]
		}
		if first == nil { // no events: nothing to be idempotent about
			return nil, nil, false
		}
		return first, last, true
	}
	return nil, nil, exp == cur
}

func success(rev, pos uint64) *streams.AppendResp {
	return &streams.AppendResp{Result: &streams.AppendResp_Success_{Success: &streams.AppendResp_Success{
		CurrentRevisionOption: &streams.AppendResp_Success_CurrentRevision{CurrentRevision: rev},
		PositionOption: &streams.AppendResp_Success_Position{Position: &streams.AppendResp_Position{
			CommitPosition: pos, PreparePosition: pos,
		}},
	}}}
}

func wrongExpectedVersion(exp, cur int64) *streams.AppendResp {
	w := &streams.AppendResp_WrongExpectedVersion{}
	if cur < 0 {
		w.CurrentRevisionOption = &streams.AppendResp_WrongExpectedVersion_CurrentNoStream{CurrentNoStream: &shared.Empty{}}
		w.CurrentRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_NoStream_20_6_0{NoStream_20_6_0: &shared.Empty{}}
	} else {
		w.CurrentRevisionOption = &streams.AppendResp_WrongExpectedVersion_CurrentRevision{CurrentRevision: uint64(cur)}
		w.CurrentRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_CurrentRevision_20_6_0{CurrentRevision_20_6_0: uint64(cur)}
	}
	switch {
	case exp >= 0:
		w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedRevision{ExpectedRevision: uint64(exp)}
		w.ExpectedRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_ExpectedRevision_20_6_0{ExpectedRevision_20_6_0: uint64(exp)}
	case exp == -1:
		w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedNoStream{ExpectedNoStream: &shared.Empty{}}
	case exp == -4:
		w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedStreamExists{ExpectedStreamExists: &shared.Empty{}}
		w.ExpectedRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_StreamExists_20_6_0{StreamExists_20_6_0: &shared.Empty{}}
	default:
		w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedAny{ExpectedAny: &shared.Empty{}}
		w.ExpectedRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_Any_20_6_0{Any_20_6_0: &shared.Empty{}}
	}
	return &streams.AppendResp{Result: &streams.AppendResp_WrongExpectedVersion_{WrongExpectedVersion: w}}
}

// Read serves reads and subscriptions.
func (a streamsService) Read(req *streams.ReadReq, stream streams.Streams_ReadServer) error {
	opts := req.GetOptions()
	if opts == nil {
		return status.Error(codes.InvalidArgument, "read without options")
	}
	f, err := newFilter(opts.GetFilter())
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "filter: %v", err)
	}
	stringIDs := opts.GetUuidOption().GetString_() != nil
	if opts.GetSubscription() != nil {
		if err := a.s.failBefore(stream.Context(), a.s.call(OpSubscribe)); err != nil {
			return err
		}
		return a.s.subscribe(stream, opts, f, stringIDs)
	}
	if err := a.s.failBefore(stream.Context(), a.s.call(OpRead)); err != nil {
		return err
	}
	evs, found := a.s.read(opts, f)
	if !found {
		return stream.Send(&streams.ReadResp{Content: &streams.ReadResp_StreamNotFound_{StreamNotFound: &streams.ReadResp_StreamNotFound{
			StreamIdentifier: opts.GetStream().GetStreamIdentifier(),
		}}})
	}
	for _, r := range evs {
		if err := stream.Send(eventResp(r, stringIDs)); err != nil {
			return err
		}
	}
	return nil
}

// read answers a non-subscription read; found is false for a missing stream.
func (s *Server) read(opts *streams.ReadReq_Options, f *filter) (out []*record, found bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	count := opts.GetCount()
	back := opts.GetReadDirection() == streams.ReadReq_Options_Backwards
	take := func(r *record) bool {
		if f.match(r) {
			out = append(out, r)
		}
		return uint64(len(out)) < count
	}
	if so := opts.GetStream(); so != nil {
		evs, ok := s.streams[string(so.GetStreamIdentifier().GetStreamName())]
		if !ok {
			return nil, false
		}
		if count == 0 {
			return nil, true
		}
		switch {
		case !back:
			from := uint64(len(evs))
			if so.GetStart() != nil {
				from = 0
			} else if so.GetEnd() == nil {
				from = so.GetRevision()
			}
			for i := from; i < uint64(len(evs)) && take(evs[i]); i++ {
			}
		default:
			from := int64(len(evs)) - 1
			if so.GetStart() != nil {
				from = -1
			} else if so.GetEnd() == nil {
				from = min(int64(so.GetRevision()), from)
			}
			for i := from; i >= 0 && take(evs[i]); i-- {
			}
		}
		return out, true
	}
	if count == 0 {
		return nil, true
	}
	ao := opts.GetAll()
	if !back {
		from := len(s.log)
		if ao.GetStart() != nil {
			from = 0
		} else if p := ao.GetPosition(); p != nil {
			from = s.firstAtOrAfter(p.GetCommitPosition())
		}
		for i := from; i < len(s.log) && take(s.log[i]); i++ {
		}
		return out, true
	}
	from := len(s.log) - 1
	if ao.GetStart() != nil {
		from = -1
	} else if p := ao.GetPosition(); p != nil {
		from = s.firstAtOrAfter(p.GetCommitPosition()) - 1
	}
	for i := from; i >= 0 && take(s.log[i]); i-- {
	}
	return out, true
}

// firstAtOrAfter is the index of the first event whose position is ≥ pos. Events use one word for
// both commit and prepare, so the commit word orders them.
func (s *Server) firstAtOrAfter(pos uint64) int {
	lo, hi := 0, len(s.log)
	for lo < hi {
		m := (lo + hi) / 2
		if s.log[m].pos < pos {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// subscribe serves a catch-up subscription to one stream or to $all.
func (s *Server) subscribe(stream streams.Streams_ReadServer, opts *streams.ReadReq_Options, f *filter, stringIDs bool) error {
	ctx := stream.Context()
	sub := &subscription{drop: make(chan struct{})}
	s.mu.Lock()
	dropAfter := -1
	if len(s.drops) > 0 {
		dropAfter, s.drops = s.drops[0], s.drops[1:]
	}
	s.subs[sub] = struct{}{}
	s.started++
	stopped := s.stopped
	// The cursor is an index into the stream or the log: both only grow.
	so, all := opts.GetStream(), opts.GetAll()
	var name string
	var cursor int
	if so != nil {
		name = string(so.GetStreamIdentifier().GetStreamName())
		switch {
		case so.GetStart() != nil:
			cursor = 0
		case so.GetEnd() != nil:
			cursor = len(s.streams[name])
		default:
			cursor = int(so.GetRevision()) + 1
		}
	} else {
		switch {
		case all.GetStart() != nil:
			cursor = 0
		case all.GetEnd() != nil:
			cursor = len(s.log)
		default:
			p := all.GetPosition().GetCommitPosition()
			cursor = s.firstAtOrAfter(p)
			if cursor < len(s.log) && s.log[cursor].pos == p {
				cursor++
			}
		}
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.subs, sub)
		s.mu.Unlock()
	}()
	dropped := status.Error(codes.Unavailable, "subscription dropped")
	if err := stream.Send(&streams.ReadResp{Content: &streams.ReadResp_Confirmation{
		Confirmation: &streams.ReadResp_SubscriptionConfirmation{SubscriptionId: uuid.NewString()},
	}}); err != nil {
		return err
	}
	interval := f.checkpointInterval()
	sent, considered := 0, 0
	caughtUp := false
	for {
		s.mu.Lock()
		var batch []*record
		if so != nil {
			batch = s.streams[name]
		} else {
			batch = s.log
		}
		if cursor < len(batch) {
			batch = batch[cursor:]
		} else {
			batch = nil
		}
		changed := s.changed
		s.mu.Unlock()
		for _, r := range batch {
			select {
			case <-sub.drop:
				return dropped
			default:
			}
			cursor++
			considered++
			if f.match(r) {
				if err := stream.Send(eventResp(r, stringIDs)); err != nil {
					return err
				}
				sent++
				if sent == dropAfter {
					return dropped
				}
			}
			if so == nil && interval > 0 && considered%interval == 0 {
				if err := stream.Send(&streams.ReadResp{Content: &streams.ReadResp_Checkpoint_{Checkpoint: &streams.ReadResp_Checkpoint{
					CommitPosition: r.pos, PreparePosition: r.pos,
				}}}); err != nil {
					return err
				}
			}
		}
		if !caughtUp {
			caughtUp = true
			if err := stream.Send(&streams.ReadResp{Content: &streams.ReadResp_CaughtUp_{CaughtUp: &streams.ReadResp_CaughtUp{}}}); err != nil {
				return err
			}
		}
		select {
		case <-changed:
		case <-sub.drop:
			return dropped
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-stopped:
			return status.Error(codes.Unavailable, "server stopping")
		}
	}
}

// Subscriptions reports how many subscriptions the server started.
func (s *Server) Subscriptions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

func eventResp(r *record, stringIDs bool) *streams.ReadResp {
	id := structuredUUID(r.id)
	if stringIDs {
		id = &shared.UUID{Value: &shared.UUID_String_{String_: r.id.String()}}
	}
	return &streams.ReadResp{Content: &streams.ReadResp_Event{Event: &streams.ReadResp_ReadEvent{
		Event: &streams.ReadResp_ReadEvent_RecordedEvent{
			Id:               id,
			StreamIdentifier: &shared.StreamIdentifier{StreamName: []byte(r.stream)},
			StreamRevision:   r.revision,
			PreparePosition:  r.pos,
			CommitPosition:   r.pos,
			Metadata:         r.meta,
			CustomMetadata:   r.custom,
			Data:             r.data,
		},
		Position: &streams.ReadResp_ReadEvent_CommitPosition{CommitPosition: r.pos},
	}}}
}

// filter is a server-side read or subscription filter; nil matches everything.
type filter struct {
	onType   bool
	prefixes []string
	re       *regexp.Regexp
	window   int
	mult     int
}

func newFilter(o *streams.ReadReq_Options_FilterOptions) (*filter, error) {
	if o == nil {
		return nil, nil
	}
	f := &filter{mult: int(o.GetCheckpointIntervalMultiplier())}
	expr := o.GetStreamIdentifier()
	if expr == nil {
		expr, f.onType = o.GetEventType(), true
	}
	if expr == nil {
		return nil, errors.New("neither a stream nor an event type expression")
	}
	f.prefixes = expr.GetPrefix()
	if expr.GetRegex() != "" {
		re, err := regexp.Compile(expr.GetRegex())
		if err != nil {
			return nil, err
		}
		f.re = re
	}
	if o.GetCount() == nil {
		f.window = int(o.GetMax())
	}
	return f, nil
}

func (f *filter) match(r *record) bool {
	if f == nil {
		return true
	}
	v := r.stream
	if f.onType {
		v = r.meta["type"]
	}
	if f.re != nil {
		return f.re.MatchString(v)
	}
	for _, p := range f.prefixes {
		if strings.HasPrefix(v, p) {
			return true
		}
	}
	return false
}

// checkpointInterval is how many considered events separate two checkpoints (0: none).
func (f *filter) checkpointInterval() int {
	if f == nil || f.mult == 0 {
		return 0
	}
	w := f.window
	if w <= 0 {
		w = 32
	}
	return w * f.mult
}

func structuredUUID(id uuid.UUID) *shared.UUID {
	var most, least int64
	for i := range 8 {
		most = most<<8 | int64(id[i])
		least = least<<8 | int64(id[8+i])
	}
	return &shared.UUID{Value: &shared.UUID_Structured_{Structured: &shared.UUID_Structured{
		MostSignificantBits: most, LeastSignificantBits: least,
	}}}
}

func fromProtoUUID(u *shared.UUID) (uuid.UUID, error) {
	if st := u.GetStructured(); st != nil {
		var id uuid.UUID
		most, least := uint64(st.GetMostSignificantBits()), uint64(st.GetLeastSignificantBits())
		for i := range 8 {
			id[7-i] = byte(most >> (8 * i))
			id[15-i] = byte(least >> (8 * i))
		}
		return id, nil
	}
	if s := u.GetString_(); s != "" {
		return uuid.Parse(s)
	}
	return uuid.UUID{}, errors.New("missing")
}
