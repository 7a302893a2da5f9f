package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bookieDirsArgs points a configuration's directories at a test directory.
func bookieDirsArgs(t *testing.T) []string {
	d := t.TempDir()
	return []string{"--set", "journalDirectories=" + filepath.Join(d, "j"), "--set", "journalDirectory=" + filepath.Join(d, "j"),
		"--set", "ledgerDirectories=" + filepath.Join(d, "l"), "--set", "indexDirectories="}
}

func runEnviron(env map[string]string, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Main(context.Background(), args, Env{
		Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string { return env[k] },
		Environ: func() []string {
			var l []string
			for k, v := range env {
				l = append(l, k+"="+v)
			}
			return l
		},
	})
	return code, out.String(), errb.String()
}

// TestBookiePrintConfig: --print-config prints every key with its value
// and source and exits 0, secrets hidden; the sources follow the
// precedence file < BK_ < PULSAR_PREFIX_ < FOLIO_ < --set.
func TestBookiePrintConfig(t *testing.T) {
	conf := "../bookie/server/testdata/pulsar-bookkeeper.conf"
	env := map[string]string{
		"BK_zkTimeout": "20000", "PULSAR_PREFIX_diskCheckInterval": "4000", "FOLIO_GC_WAIT_TIME": "120000",
		"PULSAR_PREFIX_httpServerTrustStorePassword": "hunter2",
	}
	args := append([]string{"bookie", "--conf", conf, "--print-config", "--set", "bookiePort=3999"}, bookieDirsArgs(t)...)
	code, out, errOut := runEnviron(env, args...)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		f := strings.Fields(l)
		lines[f[0]] = f[1:]
	}
	for key, want := range map[string]string{
		"zkTimeout":                    "20000 BK_zkTimeout implemented",
		"diskCheckInterval":            "4000 PULSAR_PREFIX_diskCheckInterval implemented",
		"gcWaitTime":                   "120000 FOLIO_GC_WAIT_TIME implemented",
		"bookiePort":                   "3999 --set implemented",
		"journalMaxSizeMB":             "2048 " + conf + ":64 implemented",
		"httpServerTrustStorePassword": "(set) PULSAR_PREFIX_httpServerTrustStorePassword implemented",
		"localScrubInterval":           "0 default not supported",
		"bookieId":                     "(empty) default implemented",
	} {
		if got := strings.Join(lines[key], " "); got != want {
			t.Errorf("%s: %q, want %q", key, got, want)
		}
	}
	if strings.Contains(out, "hunter2") {
		t.Error("a password printed")
	}
	if len(lines) < 250 {
		t.Errorf("only %d keys printed", len(lines))
	}
}

// TestBookieRefusedConfig: a refused configuration exits 1 with the same
// message from --print-config as from the start, naming the key and file.
func TestBookieRefusedConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bk_server.conf")
	if err := os.WriteFile(path, []byte("bookiePort=3181\nlocalScrubInterval=3600\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dirs := bookieDirsArgs(t)
	code1, _, err1 := runEnviron(nil, append([]string{"bookie", "--conf", path, "--print-config"}, dirs...)...)
	code2, _, err2 := runEnviron(nil, append([]string{"bookie", "--conf", path}, dirs...)...)
	if code1 != ExitFail || code2 != ExitFail {
		t.Fatalf("exit codes %d, %d; want %d", code1, code2, ExitFail)
	}
	if err1 != err2 || !strings.Contains(err1, "localScrubInterval") || !strings.Contains(err1, path+":2") {
		t.Errorf("messages:\n%s\n%s", err1, err2)
	}
}

// TestBookieLogFlags: --log-format json and --log-level reach the logs;
// the configuration's logFormat applies without the flag; bad values are
// usage errors on every command that takes them.
func TestBookieLogFlags(t *testing.T) {
	dirs := bookieDirsArgs(t)
	base := append([]string{"bookie", "--print-config", "--set", "bookiPort=1"}, dirs...)
	for _, c := range []struct {
		args []string
		json bool
		warn bool
	}{
		{[]string{"--log-format", "json"}, true, true},
		{[]string{"--set", "logFormat=json"}, true, true},
		{[]string{"--set", "logFormat=json", "--log-format", "text"}, false, true},
		{[]string{"--log-level", "error"}, false, false},
		{[]string{"--set", "logLevel=error"}, false, false},
	} {
		code, _, errOut := runEnviron(nil, append(append([]string{}, base...), c.args...)...)
		if code != ExitOK {
			t.Fatalf("%v: exit %d: %s", c.args, code, errOut)
		}
		first := strings.SplitN(strings.TrimSpace(errOut), "\n", 2)[0]
		var m map[string]any
		isJSON := json.Unmarshal([]byte(first), &m) == nil
		hasWarn := strings.Contains(errOut, "bookiPort")
		if isJSON != c.json || hasWarn != c.warn {
			t.Errorf("%v: json %v warn %v:\n%s", c.args, isJSON, hasWarn, errOut)
		}
	}
	for _, args := range [][]string{
		{"bookie", "--print-config", "--log-level", "loud"},
		{"bookie", "--print-config", "--log-format", "xml"},
		{"autorecovery", "--id", "127.0.0.1:1", "--log-level", "loud"},
		{"standalone", "--log-format", "xml"},
	} {
		if code, _, errOut := runEnviron(nil, args...); code != ExitUsage || !strings.Contains(errOut, "--log-") {
			t.Errorf("%v: exit %d: %s", args, code, errOut)
		}
	}
}
