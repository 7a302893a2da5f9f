package freeport

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

func TestTakeIsDistinctBindableAndBelowEphemeral(t *testing.T) {
	seen := map[int]bool{}
	low := ephemeralLow()
	for range 200 {
		p, err := Take()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		if p < lowest || (low > lowest+1000 && p >= low) {
			t.Fatalf("port %d outside [%d, %d)", p, lowest, low)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d not bindable: %v", p, err)
		}
		l.Close()
	}
}

// A port reserved by another live process is never handed out here; the
// helper process holds a reservation while this one asks.
func TestReservationHoldsAcrossProcesses(t *testing.T) {
	if os.Getenv("FREEPORT_HELPER") != "" {
		p, err := Take()
		if err != nil {
			os.Exit(2)
		}
		os.Stdout.WriteString(strconv.Itoa(p) + "\n")
		var b [1]byte
		os.Stdin.Read(b[:]) // hold until the parent closes stdin
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReservationHoldsAcrossProcesses$")
	cmd.Env = append(os.Environ(), "FREEPORT_HELPER=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() {
		t.Fatalf("helper said nothing: %v", sc.Err())
	}
	held, err := strconv.Atoi(sc.Text())
	if err != nil {
		t.Fatalf("helper said %q", sc.Text())
	}
	f, err := reserve(filepath.Join(os.TempDir(), "folio-test-ports"), held)
	if err != nil {
		t.Fatal(err)
	}
	if f != nil {
		f.Close()
		t.Fatalf("port %d, held by another process, was reserved here too", held)
	}
}
