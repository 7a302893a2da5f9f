package metadata

import (
	"fmt"
	"net"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/foliodb/folio/internal/metadata/formatpb"
)

// BookieServiceInfo is what a bookie publishes about how to reach it
// (BookieServiceInfoFormat, spec/metadata.md §5). ZooKeeper stores it as
// the value of the bookie's registration znode, where Java clients resolve
// the bookie id through its first `bookie-rpc` endpoint; Java's etcd driver
// stores nothing, and neither does Folio's.
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
