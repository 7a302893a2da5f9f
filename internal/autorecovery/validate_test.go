package autorecovery

import (
	"context"
	"testing"
)

// A Service without a metadata store is a configuration error, found by
// Validate and returned by StartService before anything starts.
func TestServiceConfigValidate(t *testing.T) {
	if err := (ServiceConfig{}).Validate(); err == nil {
		t.Fatal("Validate of an empty configuration passed")
	}
	if _, err := StartService(context.Background(), ServiceConfig{MetadataServiceURI: "etcd://127.0.0.1:1/ledgers"}); err == nil {
		t.Fatal("StartService without a Driver started")
	}
}
