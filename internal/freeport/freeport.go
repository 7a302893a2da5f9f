// Package freeport hands out free TCP ports on 127.0.0.1 for servers whose
// port must be known before they listen: tests that start servers in other
// processes (bookies, etcd members, ZooKeeper, Java bookies), and
// `folio standalone` / foliotest with port 0 (the bookie id holds the
// port), where a listener cannot simply be passed along.
//
// Two things make "listen on port 0, close, hand the number over" flaky
// when many test binaries run at once (go test ./... runs packages in
// parallel):
//
//   - port 0 draws from the kernel's ephemeral range, the same range every
//     outgoing connection's local port comes from, so a client in another
//     test process may hold the port by the time the server binds it;
//   - two test processes may be handed the same just-closed port.
//
// Take therefore draws from the ports below the ephemeral range, which the
// kernel never assigns on its own, and reserves each port for the life of
// the process with an exclusive flock on a file per port, which every test
// process honours and the kernel releases when the process exits (no stale
// reservations after a crash).
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

const (
	// lowest is the lowest port handed out: above the well-known and the
	// commonly configured service ports (2181, 2379, 3181, 8000, 9090).
	lowest = 10000
	// fallbackEphemeralLow is Linux's default start of the ephemeral range,
	// used when /proc does not say.
	fallbackEphemeralLow = 32768
)

var state struct {
	sync.Mutex
	held map[int]*os.File // reservation lock files, open for the process's life
}

// Take returns a port that was free on 127.0.0.1 a moment ago, that the
// kernel does not hand out as an ephemeral port, and that no other call in
// this or another live process using this package returned.
func Take() (int, error) {
	state.Lock()
	defer state.Unlock()
	if state.held == nil {
		state.held = map[int]*os.File{}
	}
	dir := filepath.Join(os.TempDir(), "folio-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return 0, fmt.Errorf("freeport: %w", err)
	}
	high := ephemeralLow()
	if high <= lowest+1000 {
		high = fallbackEphemeralLow
	}
	for range 1000 {
		port := lowest + rand.IntN(high-lowest)
		if state.held[port] != nil {
			continue
		}
		f, err := reserve(dir, port)
		if err != nil {
			return 0, err
		}
		if f == nil {
			continue // another process holds it
		}
		if !bindable(port) {
			f.Close()
			continue
		}
		state.held[port] = f
		return port, nil
	}
	return 0, errors.New("freeport: no free port after 1000 tries")
}

// reserve takes the port's lock file; nil, nil means another process holds
// it.
func reserve(dir string, port int) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("freeport: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, fmt.Errorf("freeport: lock port %d: %w", port, err)
	}
	return f, nil
}

// bindable reports whether a listener can bind the port on 127.0.0.1 now.
func bindable(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// ephemeralLow is the first port of the kernel's ephemeral range, or 0.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 {
		return 0
	}
	n, err := strconv.Atoi(fields[0])
	if err != nil {
		return 0
	}
	return n
}
