package metadata

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"strconv"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/foliodb/folio/internal/metadata/formatpb"
)

// BookieServiceInfo is what a bookie publishes about how to reach it
// (BookieServiceInfoFormat, spec/metadata.md §5). ZooKeeper stores it as
// the value of the bookie's registration znode, where Java clients resolve
// the bookie id through its first `bookie-rpc` endpoint. Java's etcd driver
// stores nothing (its clients can only resolve host:port ids); Folio's
// stores it as the value of the registration key, which Java's etcd
// clients ignore, so Folio clients resolve custom bookie ids on etcd too.
type BookieServiceInfo struct {
	Endpoints  []BookieEndpoint
	Properties map[string]string
}

// BookieEndpoint is one endpoint of a bookie.
type BookieEndpoint struct {
	// ID names the endpoint: "bookie" for the bookie protocol, "httpserver"
	// for the admin HTTP server (Java's names).
	ID string
	// Host and Port are where it listens.
	Host string
	Port int
	// Protocol is "bookie-rpc" or "http".
	Protocol   string
	Auth       []string
	Extensions []string
}

// Endpoint ids and protocols a Java bookie publishes (BookieService,
// HttpService).
const (
	BookieEndpointID     = "bookie"
	BookieRPCProtocol    = "bookie-rpc"
	HTTPServerEndpointID = "httpserver"
	HTTPProtocol         = "http"
)

// DefaultBookieServiceInfo is the info of a bookie known only by its id
// (host:port): one bookie-rpc endpoint at that address, what a Java client
// assumes for a registration without info ("legacy").
func DefaultBookieServiceInfo(id BookieID) (BookieServiceInfo, error) {
	host, portText, err := net.SplitHostPort(string(id))
	if err != nil {
		return BookieServiceInfo{}, fmt.Errorf("bookie id %q is not host:port: %w", id, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port <= 0 || port > 65535 {
		return BookieServiceInfo{}, fmt.Errorf("bookie id %q: bad port %q", id, portText)
	}
	return BookieServiceInfo{Endpoints: []BookieEndpoint{{ID: BookieEndpointID, Host: host, Port: port, Protocol: BookieRPCProtocol}}}, nil
}

// EncodeBookieServiceInfo returns the binary (not length-delimited)
// BookieServiceInfoFormat, as Java's ZKRegistrationManager writes it.
func EncodeBookieServiceInfo(info BookieServiceInfo) ([]byte, error) {
	f := &formatpb.BookieServiceInfoFormat{Properties: info.Properties}
	for _, e := range info.Endpoints {
		if e.ID == "" || e.Host == "" || e.Protocol == "" || e.Port < 0 || e.Port > 65535 {
			return nil, fmt.Errorf("bookie service info: endpoint %+v lacks an id, host, protocol or valid port", e)
		}
		f.Endpoints = append(f.Endpoints, &formatpb.BookieServiceInfoFormat_Endpoint{
			Id: proto.String(e.ID), Port: proto.Int32(int32(e.Port)), Host: proto.String(e.Host),
			Protocol: proto.String(e.Protocol), Auth: e.Auth, Extensions: e.Extensions,
		})
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(f)
}

// DecodeBookieServiceInfo parses EncodeBookieServiceInfo's bytes. An empty
// value is a registration without info (a "legacy" bookie): the caller
// falls back to DefaultBookieServiceInfo, as Java does.
func DecodeBookieServiceInfo(b []byte) (BookieServiceInfo, error) {
	var f formatpb.BookieServiceInfoFormat
	if err := proto.Unmarshal(b, &f); err != nil {
		return BookieServiceInfo{}, fmt.Errorf("not a BookieServiceInfoFormat: %w", err)
	}
	info := BookieServiceInfo{Properties: f.GetProperties()}
	for _, e := range f.GetEndpoints() {
		info.Endpoints = append(info.Endpoints, BookieEndpoint{
			ID: e.GetId(), Host: e.GetHost(), Port: int(e.GetPort()), Protocol: e.GetProtocol(),
			Auth: e.GetAuth(), Extensions: e.GetExtensions(),
		})
	}
	return info, nil
}

// ServiceInfoReader is implemented by drivers that can read the
// BookieServiceInfo a registered bookie published (Java's
// RegistrationClient.getBookieServiceInfo).
type ServiceInfoReader interface {
	// BookieServiceInfo returns the info of the registered bookie id
	// (writable registration first, then read-only). A registration with an
	// empty value gets DefaultBookieServiceInfo when the id is host:port.
	// ErrNotFound if the bookie is not registered; ErrCorruptMetadata if
	// the value does not parse.
	ReadBookieServiceInfo(ctx context.Context, id BookieID) (BookieServiceInfo, error)
}

// ErrBookieNotResolved: a bookie id that is not host:port could not be
// turned into an address (Java's BookieIdNotResolvedException).
var ErrBookieNotResolved = errors.New("bookie id not resolved")

// ServiceInfoOf returns the BookieServiceInfo of id as Java's
// DefaultBookieAddressResolver finds it: the registration's, and for a
// bookie that is not registered (or a driver that cannot read registration
// values) the legacy info derived from a host:port id. A custom id (not
// host:port) of a bookie that is not registered is ErrBookieNotResolved. A
// store error is returned as such.
func ServiceInfoOf(ctx context.Context, reg any, id BookieID) (BookieServiceInfo, error) {
	if r, ok := reg.(ServiceInfoReader); ok {
		info, err := r.ReadBookieServiceInfo(ctx, id)
		if err == nil {
			return info, nil
		}
		if !errors.Is(err, ErrNotFound) {
			return BookieServiceInfo{}, err
		}
	}
	info, err := DefaultBookieServiceInfo(id)
	if err != nil {
		return BookieServiceInfo{}, fmt.Errorf("%w: bookie %s is not registered and its id is not host:port", ErrBookieNotResolved, id)
	}
	return info, nil
}

// BookieAddress is the host:port of the first bookie-rpc endpoint of info
// (where Java's DefaultBookieAddressResolver connects).
func (info BookieServiceInfo) BookieAddress() (string, error) {
	for _, e := range info.Endpoints {
		if e.Protocol == BookieRPCProtocol {
			return net.JoinHostPort(e.Host, strconv.Itoa(e.Port)), nil
		}
	}
	return "", fmt.Errorf("%w: its service info has no %s endpoint", ErrBookieNotResolved, BookieRPCProtocol)
}

// ResolveBookie returns the address to dial for bookie id: the bookie-rpc
// endpoint of ServiceInfoOf(reg, id).
func ResolveBookie(ctx context.Context, reg any, id BookieID) (string, error) {
	info, err := ServiceInfoOf(ctx, reg, id)
	if err != nil {
		return "", err
	}
	addr, err := info.BookieAddress()
	if err != nil {
		return "", fmt.Errorf("bookie %s: %w", id, err)
	}
	return addr, nil
}

// Resolver resolves bookie ids for a client's connections (transport's
// Resolve): ResolveBookie, remembering each id's last address. When the
// store does not answer (an outage, a read slower than a third of the
// connect's time), an id that is host:port and was never seen published
// at another address resolves to itself, as Java's etcd driver always
// resolves it, so that a store outage does not cut clients off the bookies
// they use. Any other id then fails with the store's error: its address
// is known only from the store, and dialling a guess could reach a
// different bookie, whose answers would count as this one's.
type Resolver struct {
	reg  any
	mu   sync.Mutex
	last map[BookieID]string
}

// NewResolver returns a Resolver over reg (a metadata.Driver).
func NewResolver(reg any) *Resolver {
	return &Resolver{reg: reg, last: map[BookieID]string{}}
}

// Resolve returns the address to dial for id.
func (r *Resolver) Resolve(ctx context.Context, id string) (string, error) {
	bid := BookieID(id)
	_, hostPort := DefaultBookieServiceInfo(bid)
	rctx := ctx
	if hostPort == nil {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, hostPortLookupBudget(ctx))
		defer cancel()
	}
	addr, err := ResolveBookie(rctx, r.reg, bid)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		r.last[bid] = addr
		return addr, nil
	}
	if hostPort == nil && ctx.Err() == nil && !errors.Is(err, ErrCorruptMetadata) && !errors.Is(err, ErrBookieNotResolved) {
		if last, seen := r.last[bid]; !seen || last == id {
			return id, nil
		}
	}
	return "", err
}

// Prune forgets the remembered address of each id keep reports false for
// whose address was the id itself: forgetting it changes no answer of
// Resolve (a host:port id never seen elsewhere resolves to itself in an
// outage, as one seen only at itself does), and it bounds the state of a
// client on a cluster whose bookie ids come and go (Kubernetes: ids change
// with addresses). An id last published at another address is kept: it
// is what stops Resolve from dialling a guess for it. keep is called with
// the Resolver's lock held. It returns the number of ids forgotten.
func (r *Resolver) Prune(keep func(BookieID) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.last)
	maps.DeleteFunc(r.last, func(id BookieID, addr string) bool { return addr == string(id) && !keep(id) })
	return n - len(r.last)
}

// Remembered is the number of ids whose address the Resolver remembers
// (tests).
func (r *Resolver) Remembered() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.last)
}

// DecodeRegistrationValue parses the value of a registration key or znode
// of id: empty is the legacy default (DefaultBookieServiceInfo), anything
// else a BookieServiceInfoFormat. where names the key for errors.
func DecodeRegistrationValue(where string, id BookieID, value []byte) (BookieServiceInfo, error) {
	if len(value) == 0 {
		info, err := DefaultBookieServiceInfo(id)
		if err != nil {
			return BookieServiceInfo{}, fmt.Errorf("%w: %s has no service info and the id is not host:port", ErrBookieNotResolved, where)
		}
		return info, nil
	}
	info, err := DecodeBookieServiceInfo(value)
	if err != nil {
		return BookieServiceInfo{}, Corrupt(where, err)
	}
	return info, nil
}

// hostPortLookupBudget bounds the store read that resolves a host:port id:
// a third of what is left of ctx (the connect's timeout), at most 2 s, so
// that when the store does not answer the id itself is still dialled in
// time.
func hostPortLookupBudget(ctx context.Context) time.Duration {
	const most = 2 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		return min(time.Until(dl)/3, most)
	}
	return most
}
