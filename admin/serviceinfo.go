package admin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/foliodb/folio/internal/metadata"
)

// ServiceInfo is what a registered bookie publishes about how to reach it
// (Java's BookieServiceInfo): its endpoints and free-form properties.
type ServiceInfo struct {
	// Endpoints are where the bookie serves, in the order it published.
	Endpoints []Endpoint `json:"endpoints"`
	// Properties are free-form key-values the bookie published (nil if
	// none).
	Properties map[string]string `json:"properties,omitempty"`
}

// Endpoint is one endpoint of a bookie (Java's BookieServiceInfo.Endpoint).
type Endpoint struct {
	// ID names the endpoint: "bookie" for the bookie protocol,
	// "httpserver" for its admin HTTP server.
	ID string `json:"id"`
	// Host and Port are where the endpoint listens.
	Host string `json:"host"`
	Port int    `json:"port"`
	// Protocol is "bookie-rpc" or "http".
	Protocol string `json:"protocol"`
	// Auth are the authentication mechanisms the endpoint offers, and
	// Extensions its protocol extensions (e.g. "tls"), as published.
	Auth       []string `json:"auth,omitempty"`
	Extensions []string `json:"extensions,omitempty"`
}

// Endpoint returns the endpoint with the given id ("bookie",
// "httpserver"), and whether there is one.
func (s ServiceInfo) Endpoint(id string) (Endpoint, bool) {
	i := slices.IndexFunc(s.Endpoints, func(e Endpoint) bool { return e.ID == id })
	if i < 0 {
		return Endpoint{}, false
	}
	return s.Endpoints[i], true
}

// BookieServiceInfo returns what the registered bookie published about
// itself (Java: BookKeeperAdmin.getBookieServiceInfo), e.g. the address
// of its admin HTTP server. A registration without published info (a
// Java bookie on etcd) gets the info of its host:port id, as Java's
// clients assume. ErrInvalidBookieID, ErrNoSuchBookie if it is not
// registered.
func (a *Admin) BookieServiceInfo(ctx context.Context, bookie string) (ServiceInfo, error) {
	if err := a.check(); err != nil {
		return ServiceInfo{}, err
	}
	if err := validBookie(bookie); err != nil {
		return ServiceInfo{}, err
	}
	id := metadata.BookieID(bookie)
	r, ok := a.md.(metadata.ServiceInfoReader)
	if !ok {
		if err := a.registered(ctx, bookie); err != nil {
			return ServiceInfo{}, err
		}
		info, err := metadata.ServiceInfoOf(ctx, a.md, id)
		if err != nil {
			return ServiceInfo{}, publicError(err)
		}
		return serviceInfo(info), nil
	}
	info, err := r.ReadBookieServiceInfo(ctx, id)
	switch {
	case errors.Is(err, metadata.ErrNotFound):
		return ServiceInfo{}, fmt.Errorf("%w: %s is not registered (neither writable nor read-only)", ErrNoSuchBookie, bookie)
	case err != nil:
		return ServiceInfo{}, publicError(fmt.Errorf("reading the service info of %s: %w", bookie, err))
	}
	return serviceInfo(info), nil
}

func serviceInfo(info metadata.BookieServiceInfo) ServiceInfo {
	s := ServiceInfo{Endpoints: make([]Endpoint, 0, len(info.Endpoints))}
	if len(info.Properties) > 0 {
		s.Properties = maps.Clone(info.Properties)
	}
	for _, e := range info.Endpoints {
		s.Endpoints = append(s.Endpoints, Endpoint{ID: e.ID, Host: e.Host, Port: e.Port, Protocol: e.Protocol,
			Auth: slices.Clone(e.Auth), Extensions: slices.Clone(e.Extensions)})
	}
	return s
}
