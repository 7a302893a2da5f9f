package etcd

import "github.com/foliodb/folio/internal/metadata"

// StopKeepAlive stops s's keepalives without revoking its lease, as if its
// process had died: etcd removes the registrations a TTL later.
func StopKeepAlive(s metadata.Session) { s.(*session).stopKA() }

// BucketID exposes bucketID.
var BucketID = bucketID
